"""npx.image operators against hand-computed NumPy values."""
import numpy as onp
import pytest

from pymx import npx
from test_npx_nn import arr

RNG = onp.random.default_rng(1)


def image(h, w, c=3):
    return RNG.integers(0, 256, size=(h, w, c)).astype("uint8")


def test_to_tensor_hwc_and_nhwc():
    img = image(4, 5)
    out = npx.image.to_tensor(arr(img, "uint8"))
    assert out.dtype == onp.float32 and out.shape == (3, 4, 5)
    onp.testing.assert_allclose(out.asnumpy(), img.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    batch = onp.stack([img, image(4, 5)])
    onp.testing.assert_allclose(npx.image.to_tensor(arr(batch, "uint8")).asnumpy(),
                                batch.transpose(0, 3, 1, 2) / 255.0, rtol=1e-6)


def test_normalize_chw_nchw_and_scalar():
    x = RNG.random((2, 3, 4, 4)).astype("float32")
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    out = npx.image.normalize(arr(x, "float32"), mean, std).asnumpy()
    expected = (x - onp.array(mean).reshape(1, 3, 1, 1)) / onp.array(std).reshape(1, 3, 1, 1)
    onp.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    onp.testing.assert_allclose(npx.image.normalize(arr(x[0], "float32"), 0.5, 2.0).asnumpy(),
                                (x[0] - 0.5) / 2.0, rtol=1e-6)
    with pytest.raises(ValueError, match="mean has 2 values but the image has 3 channels"):
        npx.image.normalize(arr(x, "float32"), (0.1, 0.2), 1.0)


def test_resize_bilinear_hand_values():
    img = onp.array([[0.0, 10.0], [20.0, 30.0]], dtype="float32").reshape(2, 2, 1)
    out = npx.image.resize(arr(img, "float32"), (4, 4)).asnumpy()[:, :, 0]
    # OpenCV INTER_LINEAR: source x = (dx + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 (clamped).
    row0 = onp.array([0.0, 2.5, 7.5, 10.0])
    onp.testing.assert_allclose(out[0], row0)
    onp.testing.assert_allclose(out[1], row0 + 0.25 * 20)
    onp.testing.assert_allclose(out[2], row0 + 0.75 * 20)
    onp.testing.assert_allclose(out[3], row0 + 20)


def test_resize_uint8_rounds_and_keep_ratio():
    img = onp.array([[0, 255], [255, 0]], dtype="uint8").reshape(2, 2, 1)
    out = npx.image.resize(arr(img, "uint8"), (3, 1)).asnumpy()  # (width 3, height 1)
    assert out.dtype == onp.uint8 and out.shape == (1, 3, 1)
    # y = 0.5 between the rows (mean 127.5 each column), x taps at 1/6 and 5/6 -> 127.5 -> 128.
    onp.testing.assert_array_equal(out[0, :, 0], [128, 128, 128])
    wide = image(20, 30)
    assert npx.image.resize(arr(wide, "uint8"), 10, keep_ratio=True).shape == (10, 15, 3)
    assert npx.image.resize(arr(wide, "uint8"), 7, keep_ratio=True).shape == (7, 10, 3)
    assert npx.image.resize(arr(wide, "uint8"), 8).shape == (8, 8, 3)
    batch = onp.stack([wide, wide])
    assert npx.image.resize(arr(batch, "uint8"), (6, 4)).shape == (2, 4, 6, 3)


def test_resize_nearest_and_identity():
    img = image(6, 4)
    onp.testing.assert_array_equal(npx.image.resize(arr(img, "uint8"), (4, 6)).asnumpy(), img)
    onp.testing.assert_array_equal(npx.image.resize(arr(img, "uint8"), (2, 3), interp=0).asnumpy(),
                                   img[::2, ::2])


def test_crop_and_flips():
    img = image(5, 6)
    onp.testing.assert_array_equal(npx.image.crop(arr(img, "uint8"), 1, 2, 3, 2).asnumpy(),
                                   img[2:4, 1:4])
    onp.testing.assert_array_equal(npx.image.flip_left_right(arr(img, "uint8")).asnumpy(),
                                   img[:, ::-1])
    onp.testing.assert_array_equal(npx.image.flip_top_bottom(arr(img, "uint8")).asnumpy(),
                                   img[::-1])
    batch = onp.stack([img, image(5, 6)])
    onp.testing.assert_array_equal(npx.image.flip_left_right(arr(batch, "uint8")).asnumpy(),
                                   batch[:, :, ::-1])
    with pytest.raises(ValueError, match="does not fit in the 6x5"):
        npx.image.crop(arr(img, "uint8"), 4, 0, 3, 2)


def test_random_flip_extremes():
    img = image(3, 4)
    onp.testing.assert_array_equal(npx.image.random_flip_left_right(arr(img, "uint8"), p=1.0).asnumpy(),
                                   img[:, ::-1])
    onp.testing.assert_array_equal(npx.image.random_flip_top_bottom(arr(img, "uint8"), p=0.0).asnumpy(),
                                   img)


def test_color_adjustments():
    img = image(4, 5)
    f = 1.3
    x = img.astype("float64")
    gray = x @ onp.array([0.299, 0.587, 0.114])
    cases = {
        npx.image.adjust_brightness: x * f,
        npx.image.adjust_contrast: x * f + gray.mean() * (1 - f),
        npx.image.adjust_saturation: x * f + gray[..., None] * (1 - f),
    }
    for fn, expected in cases.items():
        onp.testing.assert_array_equal(fn(arr(img, "uint8"), f).asnumpy(),
                                       onp.clip(onp.rint(expected), 0, 255).astype("uint8"))
        onp.testing.assert_allclose(fn(arr(x, "float32"), f).asnumpy(), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="expected 3 \\(RGB\\) channels, got 1"):
        npx.image.adjust_contrast(arr(image(2, 2, 1), "uint8"), 0.5)
