"""Each transform against NumPy values computed by hand (float64 references; uint8 results
must match exactly unless a tolerance is stated)."""
import numpy as onp
import pytest

from pymx import np
from pymx.gluon.data.vision import transforms as T

GRAY = onp.array([0.299, 0.587, 0.114])


def _image(h=6, w=8, c=3, seed=0):
    return onp.random.default_rng(seed).integers(0, 256, (h, w, c), dtype=onp.uint8)


def _saturate(values):
    """uint8 results: rounded to nearest (half to even), clamped to [0, 255]."""
    return onp.clip(onp.rint(values), 0, 255).astype(onp.uint8)


def _run(transform, image):
    return transform(np.array(image)).asnumpy()


def test_to_tensor():
    img = _image()
    out = T.ToTensor()(np.array(img))
    assert out.dtype == onp.float32 and out.shape == (3, 6, 8)
    onp.testing.assert_allclose(out.asnumpy(), img.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    batch = onp.stack([img, _image(seed=1)])
    out = _run(T.ToTensor(), batch)
    onp.testing.assert_allclose(out, batch.transpose(0, 3, 1, 2) / 255.0, rtol=1e-6)


def test_normalize_per_channel_and_scalar():
    x = onp.random.default_rng(1).random((3, 4, 5)).astype(onp.float32)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    out = _run(T.Normalize(mean, std), x)
    expected = (x - onp.array(mean)[:, None, None]) / onp.array(std)[:, None, None]
    onp.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    onp.testing.assert_allclose(_run(T.Normalize(0.5, 2.0), x), (x - 0.5) / 2.0, rtol=1e-6)
    batch = onp.stack([x, x * 2])
    onp.testing.assert_allclose(_run(T.Normalize(mean, std), batch),
                                (batch - onp.array(mean)[:, None, None])
                                / onp.array(std)[:, None, None], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,size,keep_ratio,expected", [
    ((6, 8, 3), 4, False, (4, 4, 3)),
    ((6, 8, 3), (5, 3), False, (3, 5, 3)),             # size is (width, height)
    ((6, 8, 3), 12, True, (12, 16, 3)),                 # short edge (height) -> 12
    ((10, 7, 3), 5, True, (7, 5, 3)),                   # long edge int(10 * 5 / 7) = 7
    ((160, 160, 3), 224, True, (224, 224, 3)),          # the tutorial's leaf images
    ((2, 6, 8, 3), 4, False, (2, 4, 4, 3)),             # NHWC batch
])
def test_resize_output_shapes(shape, size, keep_ratio, expected):
    img = onp.zeros(shape, onp.uint8)
    assert T.Resize(size, keep_ratio)(np.array(img)).shape == expected


def test_resize_values_nearest_and_bilinear():
    img = _image(4, 4)
    # nearest, exact 2x upscale: every pixel is repeated twice along both axes
    near = _run(T.Resize(8, interpolation=0), img)
    onp.testing.assert_array_equal(near, img.repeat(2, axis=0).repeat(2, axis=1))
    # bilinear on a constant image stays constant; on a horizontal ramp it stays a ramp
    const = onp.full((5, 9, 3), 77, onp.uint8)
    onp.testing.assert_array_equal(_run(T.Resize((4, 3)), const), onp.full((3, 4, 3), 77))
    ramp = onp.tile(onp.arange(0, 80, 10, dtype=onp.float32)[None, :, None], (2, 1, 1))
    out = _run(T.Resize((4, 2)), ramp)       # halve the width: pixel centres at 0.5, 2.5, ...
    onp.testing.assert_allclose(out[0, :, 0], [5, 25, 45, 65], atol=1e-4)


def test_center_crop():
    img = _image(10, 12)
    out = _run(T.CenterCrop(4), img)
    onp.testing.assert_array_equal(out, img[3:7, 4:8])         # int(0.5 * (12 - 4)) = 4
    out = _run(T.CenterCrop((5, 3)), img)                      # (width, height)
    onp.testing.assert_array_equal(out, img[3:6, 3:8])         # y0 = int(3.5) = 3


def test_center_crop_larger_than_source_scales_the_box_down_then_resizes():
    const = onp.full((4, 6, 3), 200, onp.uint8)
    out = _run(T.CenterCrop((8, 8)), const)
    assert out.shape == (8, 8, 3)
    onp.testing.assert_array_equal(out, 200)
    img = onp.arange(4 * 6 * 3, dtype=onp.uint8).reshape(4, 6, 3)
    near = _run(T.CenterCrop((8, 8), interpolation=0), img)
    # box scaled to 4x4 (the source height), centred: columns 1..4, then nearest 2x upscale
    onp.testing.assert_array_equal(near, img[:, 1:5].repeat(2, axis=0).repeat(2, axis=1))


def test_crop_resize():
    img = _image(10, 12)
    onp.testing.assert_array_equal(_run(T.CropResize(2, 1, 5, 4), img), img[1:5, 2:7])
    out = _run(T.CropResize(2, 1, 4, 4, size=8, interpolation=0), img)
    onp.testing.assert_array_equal(out, img[1:5, 2:6].repeat(2, axis=0).repeat(2, axis=1))


def test_random_crop_with_padding():
    img = _image(5, 5)
    onp.random.seed(3)
    fx, fy = onp.random.uniform(0, 1), onp.random.uniform(0, 1)
    onp.random.seed(3)
    out = _run(T.RandomCrop(4, pad=2), img)
    padded = onp.pad(img, ((2, 2), (2, 2), (0, 0)))
    x0, y0 = int(fx * (9 - 4)), int(fy * (9 - 4))
    onp.testing.assert_array_equal(out, padded[y0:y0 + 4, x0:x0 + 4])


def test_random_resized_crop_draws():
    img = _image(20, 30)
    onp.random.seed(5)
    area = onp.random.uniform(0.08, 1.0) * 600
    ratio = onp.exp(onp.random.uniform(onp.log(3 / 4), onp.log(4 / 3)))
    w, h = int(round(onp.sqrt(area * ratio))), int(round(onp.sqrt(area / ratio)))
    x0 = int(onp.random.uniform(0, 1) * (30 - w))
    y0 = int(onp.random.uniform(0, 1) * (20 - h))
    onp.random.seed(5)
    out = _run(T.RandomResizedCrop((w, h)), img)       # output size = box size: no resize
    onp.testing.assert_array_equal(out, img[y0:y0 + h, x0:x0 + w])
    assert T.RandomResizedCrop(16)(np.array(img)).shape == (16, 16, 3)


def test_random_flips():
    img = _image()
    onp.testing.assert_array_equal(_run(T.RandomFlipLeftRight(p=1), img), img[:, ::-1])
    onp.testing.assert_array_equal(_run(T.RandomFlipTopBottom(p=1), img), img[::-1])
    onp.testing.assert_array_equal(_run(T.RandomFlipLeftRight(p=0), img), img)
    onp.random.seed(0)
    flips = [bool((_run(T.RandomFlipLeftRight(), img) != img).any()) for _ in range(40)]
    assert 8 < sum(flips) < 32
    batch = onp.stack([img, img])
    onp.testing.assert_array_equal(_run(T.RandomFlipLeftRight(p=1), batch), batch[:, :, ::-1])


def test_adjust_brightness_contrast_saturation():
    img = _image()
    f = img.astype(onp.float64)
    onp.testing.assert_array_equal(T.adjust_brightness(np.array(img), 1.3).asnumpy(),
                                   _saturate(f * 1.3))
    mean_gray = (f @ GRAY).mean()
    onp.testing.assert_array_equal(T.adjust_contrast(np.array(img), 0.6).asnumpy(),
                                   _saturate(f * 0.6 + mean_gray * (1 - 0.6)))
    gray = (f @ GRAY)[:, :, None]
    onp.testing.assert_array_equal(T.adjust_saturation(np.array(img), 1.5).asnumpy(),
                                   _saturate(f * 1.5 + gray * (1 - 1.5)))


def test_adjust_hue_and_lighting():
    img = _image()
    f = img.astype(onp.float64)
    to_yiq = onp.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321],
                        [0.211, -0.523, 0.311]])
    yiq = f @ to_yiq.T
    angle = 0.2 * onp.pi
    i = yiq[..., 1] * onp.cos(angle) - yiq[..., 2] * onp.sin(angle)
    q = yiq[..., 1] * onp.sin(angle) + yiq[..., 2] * onp.cos(angle)
    rotated = onp.stack([yiq[..., 0], i, q], axis=-1) @ onp.linalg.inv(to_yiq).T
    got = T.adjust_hue(np.array(img), 0.2).asnumpy().astype(int)
    # float32 matrix product and the rounded inverse matrix MXNet uses: within one level
    assert onp.abs(got - _saturate(rotated).astype(int)).max() <= 1
    unchanged = T.adjust_hue(np.array(img), 0.0).asnumpy().astype(int)
    assert onp.abs(unchanged - img.astype(int)).max() <= 1
    alpha = onp.array([0.1, -0.2, 0.05])
    eigval = onp.array([55.46, 4.794, 1.148])
    eigvec = onp.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                        [-0.5836, -0.6948, 0.4203]])
    expected = _saturate(f + eigvec @ (eigval * alpha))
    got = T.adjust_lighting(np.array(img), alpha).asnumpy()
    assert onp.abs(got.astype(int) - expected.astype(int)).max() <= 1


def test_adjust_on_float_images_does_not_clamp():
    x = onp.random.default_rng(2).random((3, 4, 3)).astype(onp.float32) * 300
    out = T.adjust_brightness(np.array(x), 2.0).asnumpy()
    assert out.dtype == onp.float32
    onp.testing.assert_allclose(out, x * 2.0, rtol=1e-6)


def test_gray_images_pass_through_colour_ops():
    gray = _image(c=1)
    f = gray.astype(onp.float64)
    onp.testing.assert_array_equal(T.adjust_saturation(np.array(gray), 2.0).asnumpy(), gray)
    onp.testing.assert_array_equal(T.adjust_hue(np.array(gray), 0.3).asnumpy(), gray)
    got = T.adjust_contrast(np.array(gray), 0.5).asnumpy().astype(int)
    assert onp.abs(got - _saturate(f * 0.5 + 0.5 * f.mean()).astype(int)).max() <= 1  # float32


def test_random_enhancers_use_their_documented_ranges():
    img = _image()
    f = img.astype(onp.float64)
    onp.random.seed(7)
    alpha = onp.random.uniform(0.0, 2.5)                # max(0, 1 - 1.5) = 0
    onp.random.seed(7)
    onp.testing.assert_array_equal(_run(T.RandomBrightness(1.5), img), _saturate(f * alpha))
    onp.random.seed(8)
    alpha = onp.random.uniform(0.7, 1.3)
    onp.random.seed(8)
    expected = T.adjust_contrast(np.array(img), alpha).asnumpy()
    onp.random.seed(8)
    onp.testing.assert_array_equal(_run(T.RandomContrast(0.3), img), expected)
    for transform, adjust, low, high in [(T.RandomSaturation(0.4), T.adjust_saturation, 0.6, 1.4),
                                         (T.RandomHue(0.1), T.adjust_hue, -0.1, 0.1)]:
        onp.random.seed(9)
        alpha = onp.random.uniform(low, high)
        onp.random.seed(9)
        onp.testing.assert_array_equal(_run(transform, img),
                                       adjust(np.array(img), alpha).asnumpy())
    onp.random.seed(10)
    alpha = onp.random.normal(0.0, 0.1, 3)
    onp.random.seed(10)
    onp.testing.assert_array_equal(_run(T.RandomLighting(0.1), img),
                                   T.adjust_lighting(np.array(img), alpha).asnumpy())


def test_color_jitter_applies_enabled_adjustments_in_a_random_order():
    img = _image()
    onp.random.seed(11)
    order = onp.random.permutation(4)
    expected = np.array(img)
    adjust = [T.adjust_brightness, T.adjust_contrast, T.adjust_saturation, T.adjust_hue]
    amounts = [0.2, 0.3, 0.0, 0.05]
    for which in order:
        if amounts[which] > 0:
            factor = onp.random.uniform(-amounts[which], amounts[which])
            expected = adjust[which](expected, factor if which == 3 else 1 + factor)
    onp.random.seed(11)
    out = _run(T.RandomColorJitter(brightness=0.2, contrast=0.3, hue=0.05), img)
    onp.testing.assert_array_equal(out, expected.asnumpy())
    onp.testing.assert_array_equal(_run(T.RandomColorJitter(), img), img)


def test_compose_cast_and_hybrid_compose():
    img = _image(10, 10)
    pipeline = T.Compose([T.Resize(8), T.CenterCrop(4), T.ToTensor(), T.Cast("float16")])
    out = pipeline(np.array(img))
    assert out.shape == (3, 4, 4) and out.dtype == onp.float16
    hybrid = T.HybridCompose([T.ToTensor(), T.Normalize(0.5, 0.5)])
    onp.testing.assert_allclose(_run(hybrid, img), (img.transpose(2, 0, 1) / 255 - 0.5) / 0.5,
                                rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="HybridCompose accepts HybridBlocks only"):
        T.HybridCompose([T.ToTensor(), T.RandomFlipLeftRight()])


def test_colour_ops_reject_bad_shapes():
    with pytest.raises(ValueError, match=r"adjust_contrast: input image must have shape"):
        T.adjust_contrast(np.array(onp.zeros((2, 4, 4, 3), onp.uint8)), 0.5)
