"""pymx.image: decoding, resizing, cropping, augmenters and ImageIter, against Pillow and
NumPy references. Images are written to tmp_path; the .rec files with pymx.recordio."""
import io

import numpy as onp
import pytest
from PIL import Image

import pymx
from pymx import image, np, recordio
from conftest import requires_gpu


def _rgb(height, width, seed=0):
    return onp.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=onp.uint8)


def _png_bytes(array):
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def _jpeg_bytes(array):
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="JPEG", quality=90)
    return out.getvalue()


# ---------------------------------------------------------------- decoding

def test_imread_png_and_jpeg_match_pillow(tmp_path):
    pixels = _rgb(9, 13)
    png, jpg = tmp_path / "a.png", tmp_path / "a.jpg"
    png.write_bytes(_png_bytes(pixels))
    jpg.write_bytes(_jpeg_bytes(pixels))
    decoded = image.imread(str(png))
    assert decoded.shape == (9, 13, 3) and decoded.dtype == onp.uint8
    assert str(decoded.device) == "cpu(0)"
    onp.testing.assert_array_equal(decoded.asnumpy(), pixels)
    onp.testing.assert_array_equal(image.imread(str(png), to_rgb=False).asnumpy(),
                                   pixels[:, :, ::-1])
    gray = image.imread(str(png), flag=0)
    assert gray.shape == (9, 13, 1)
    onp.testing.assert_array_equal(gray.asnumpy()[:, :, 0],
                                   onp.asarray(Image.open(str(png)).convert("L")))
    with Image.open(str(jpg)) as reference:
        onp.testing.assert_array_equal(image.imread(str(jpg)).asnumpy(),
                                       onp.asarray(reference.convert("RGB")))


def test_imdecode_accepts_bytes_bytearray_and_uint8_arrays():
    pixels = _rgb(6, 5, seed=1)
    encoded = _png_bytes(pixels)
    for buf in (encoded, bytearray(encoded), onp.frombuffer(encoded, onp.uint8),
                np.array(onp.frombuffer(encoded, onp.uint8), dtype=onp.uint8)):
        onp.testing.assert_array_equal(image.imdecode(buf).asnumpy(), pixels)
    out = np.zeros((6, 5, 3), dtype=onp.uint8)
    assert image.imdecode(encoded, out=out) is out
    onp.testing.assert_array_equal(out.asnumpy(), pixels)


def test_decoding_errors_name_the_input_and_leave_the_process_usable(tmp_path):
    missing = tmp_path / "missing.png"
    with pytest.raises(FileNotFoundError, match="missing.png"):
        image.imread(str(missing))
    with pytest.raises(ValueError, match="12 bytes of buf is not a decodable image"):
        image.imdecode(b"not an image")
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 truncated")
    with pytest.raises(ValueError, match="broken.jpg"):
        image.imread(str(broken))
    with pytest.raises(ValueError, match="convert a str to bytes"):
        image.imdecode("a string")
    with pytest.raises(ValueError, match="flag must be 0 .* got 2"):
        image.imdecode(_png_bytes(_rgb(2, 2)), flag=2)
    with pytest.raises(ValueError, match="must hold uint8 bytes, got float32"):
        image.imdecode(onp.zeros(4, onp.float32))
    onp.testing.assert_array_equal(image.imdecode(_png_bytes(_rgb(3, 3))).asnumpy(), _rgb(3, 3))


# ---------------------------------------------------------------- resizing

def _kernel_resize(src, width, height, kernel, taps):
    """float64 reference of OpenCV's separable resize: source coordinate (d + 0.5) * scale -
    0.5, taps floor - taps/2 + 1 .. floor + taps/2 clamped to the image, weights kernel(distance)
    normalised to sum to one."""
    def axis_matrix(size_in, size_out):
        matrix = onp.zeros((size_out, size_in))
        for d in range(size_out):
            position = (d + 0.5) * size_in / size_out - 0.5
            start = int(onp.floor(position))
            for k in range(start - taps // 2 + 1, start + taps // 2 + 1):
                matrix[d, min(max(k, 0), size_in - 1)] += kernel(position - k)
            matrix[d] /= matrix[d].sum()
        return matrix
    rows, cols = axis_matrix(src.shape[0], height), axis_matrix(src.shape[1], width)
    return onp.einsum("oh,hwc,pw->opc", rows, src.astype(onp.float64), cols)


def _cubic(d, a=-0.75):
    d = abs(d)
    if d <= 1:
        return (a + 2) * d**3 - (a + 3) * d**2 + 1
    if d < 2:
        return a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a
    return 0.0


def _lanczos4(d):
    return float(onp.sinc(d) * onp.sinc(d / 4)) if abs(d) < 4 else 0.0


def _linear(d):
    return max(0.0, 1.0 - abs(d))


@pytest.mark.parametrize("interp,kernel,taps", [(1, _linear, 2), (2, _cubic, 4),
                                                (4, _lanczos4, 8)])
@pytest.mark.parametrize("size", [(7, 5), (19, 23), (11, 4)])
def test_imresize_kernels_match_float64_reference(interp, kernel, taps, size):
    src = onp.random.default_rng(2).uniform(0, 255, (9, 12, 3)).astype(onp.float32)
    out = image.imresize(np.array(src), *size, interp=interp)
    assert out.shape == (size[1], size[0], 3) and out.dtype == onp.float32
    onp.testing.assert_allclose(out.asnumpy(), _kernel_resize(src, *size, kernel, taps),
                                rtol=1e-4, atol=1e-3)


def test_imresize_uint8_rounds_and_saturates_within_one_level():
    src = _rgb(10, 14, seed=3)
    for interp, kernel, taps in ((1, _linear, 2), (2, _cubic, 4), (4, _lanczos4, 8)):
        out = image.imresize(np.array(src), 21, 17, interp=interp)
        assert out.dtype == onp.uint8
        expected = onp.clip(onp.round(_kernel_resize(src, 21, 17, kernel, taps)), 0, 255)
        assert onp.abs(out.asnumpy().astype(int) - expected).max() <= 1


def test_imresize_nearest_and_area():
    src = onp.random.default_rng(4).uniform(0, 255, (12, 18, 3)).astype(onp.float32)
    nearest = image.imresize(np.array(src), 7, 5, interp=0).asnumpy()
    rows = onp.minimum(onp.floor(onp.arange(5) * 12 / 5).astype(int), 11)
    cols = onp.minimum(onp.floor(onp.arange(7) * 18 / 7).astype(int), 17)
    onp.testing.assert_array_equal(nearest, src[rows][:, cols])
    # shrinking by whole factors averages the blocks
    area = image.imresize(np.array(src), 6, 4, interp=3).asnumpy()
    blocks = src.astype(onp.float64).reshape(4, 3, 6, 3, 3).mean(axis=(1, 3))
    onp.testing.assert_allclose(area, blocks, rtol=1e-5, atol=1e-3)
    # a fractional shrink weights the partly covered pixels: (0 + 1 + 2 / 2) / 2.5 = 0.8, ...
    ramp = onp.tile(onp.arange(10, dtype=onp.float32)[None, :, None], (4, 1, 3))
    shrunk = image.imresize(np.array(ramp), 4, 4, interp=3).asnumpy()[0, :, 0]
    onp.testing.assert_allclose(shrunk, [0.8, 3.2, 5.8, 8.2], atol=1e-5)
    # enlarging with area keeps a constant image and stays within the source range
    enlarged = image.imresize(np.array(src), 40, 30, interp=3).asnumpy()
    assert enlarged.min() >= src.min() - 1e-3 and enlarged.max() <= src.max() + 1e-3
    flat = image.imresize(np.full((4, 4, 3), 7.0), 9, 9, interp=3).asnumpy()
    onp.testing.assert_allclose(flat, 7.0, atol=1e-5)


def test_imresize_checks_its_arguments():
    src = np.array(_rgb(4, 4))
    with pytest.raises(ValueError, match="interp must be one of .* got 7"):
        image.imresize(src, 3, 3, interp=7)
    with pytest.raises(ValueError, match="w must be a positive int, got 0"):
        image.imresize(src, 0, 3)
    with pytest.raises(ValueError, match=r"got shape \(4, 4\)"):
        image.imresize(np.zeros((4, 4)), 3, 3)


def test_resize_short_and_interp_choice():
    wide, tall = np.array(_rgb(20, 31)), np.array(_rgb(31, 20))
    assert image.resize_short(wide, 10).shape == (10, 15, 3)     # 10 * 31 // 20
    assert image.resize_short(tall, 10).shape == (15, 10, 3)
    from pymx.image.image import _get_interp_method
    assert _get_interp_method(9, (10, 10, 20, 20)) == 2
    assert _get_interp_method(9, (10, 10, 5, 5)) == 3
    assert _get_interp_method(9, (10, 10, 5, 20)) == 1
    pymx.random.seed(5)
    assert {_get_interp_method(10) for _ in range(60)} == {0, 1, 2, 3, 4}
    with pytest.raises(ValueError, match="Unknown interp method 6"):
        _get_interp_method(6)


# ---------------------------------------------------------------- cropping

def test_fixed_center_and_scale_down():
    src = _rgb(20, 30, seed=6)
    crop = image.fixed_crop(np.array(src), 4, 3, 10, 8)
    onp.testing.assert_array_equal(crop.asnumpy(), src[3:11, 4:14])
    assert image.fixed_crop(np.array(src), 4, 3, 10, 8, size=(5, 4)).shape == (4, 5, 3)
    with pytest.raises(ValueError, match="x=25"):
        image.fixed_crop(np.array(src), 25, 0, 10, 8)
    out, box = image.center_crop(np.array(src), (10, 8))
    assert box == (10, 6, 10, 8)
    onp.testing.assert_array_equal(out.asnumpy(), src[6:14, 10:20])
    assert image.scale_down((640, 480), (720, 120)) == (640, 106)
    assert image.scale_down((30, 20), (60, 20)) == (30, 10)
    # a crop larger than the image takes the largest box of its aspect ratio, resized up
    big, box = image.center_crop(np.array(src), (60, 20), interp=1)
    assert box == (0, 5, 30, 10) and big.shape == (20, 60, 3)


def test_random_crop_is_a_slice_and_repeats_under_a_seed():
    src = _rgb(20, 30, seed=7)
    boxes = set()
    for trial in range(20):
        pymx.random.seed(trial)
        out, (x0, y0, w, h) = image.random_crop(np.array(src), (10, 8))
        assert (w, h) == (10, 8) and 0 <= x0 <= 20 and 0 <= y0 <= 12
        onp.testing.assert_array_equal(out.asnumpy(), src[y0:y0 + 8, x0:x0 + 10])
        pymx.random.seed(trial)
        assert image.random_crop(np.array(src), (10, 8))[1] == (x0, y0, w, h)
        boxes.add((x0, y0))
    assert len(boxes) > 10


def test_random_size_crop_draws_area_and_ratio_in_range():
    src = np.array(_rgb(40, 50, seed=8))
    pymx.random.seed(9)
    for _ in range(30):
        out, (x0, y0, w, h) = image.random_size_crop(src, (16, 12), (0.2, 0.6), (0.5, 2.0))
        assert out.shape == (12, 16, 3)
        assert 0.2 * 2000 - 2 * (w + h) <= w * h <= 0.6 * 2000 + 2 * (w + h)
        assert 0.5 - 0.1 <= w / h <= 2.0 + 0.1
        assert x0 + w <= 50 and y0 + h <= 40
    # no box of that area fits: falls back to the centre crop
    out, box = image.random_size_crop(src, (16, 12), (3.0, 4.0), (1.0, 1.0))
    assert box == image.center_crop(src, (16, 12))[1]
    with pytest.warns(DeprecationWarning, match="min_area"):
        image.random_size_crop(src, (16, 12), None, (0.9, 1.1), min_area=0.5)


def test_color_normalize_and_copy_make_border():
    src = onp.random.default_rng(10).uniform(0, 255, (4, 5, 3)).astype(onp.float32)
    mean, std = onp.array([1.0, 2.0, 3.0], onp.float32), onp.array([2.0, 4.0, 8.0], onp.float32)
    out = image.color_normalize(np.array(src), np.array(mean), np.array(std))
    onp.testing.assert_allclose(out.asnumpy(), (src - mean) / std, rtol=1e-6)
    row = onp.arange(8, dtype=onp.uint8)[None, :, None].repeat(3, axis=2)   # "abcdefgh"
    inside = list(range(8))
    expected = {1: [0] * 6 + inside + [7] * 7,                            # aaaaaa|abcdefgh|hhhhhhh
                2: [5, 4, 3, 2, 1, 0] + inside + [7, 6, 5, 4, 3, 2, 1],   # fedcba|abcdefgh|hgfedcb
                3: [2, 3, 4, 5, 6, 7] + inside + [0, 1, 2, 3, 4, 5, 6],   # cdefgh|abcdefgh|abcdefg
                4: [6, 5, 4, 3, 2, 1] + inside + [6, 5, 4, 3, 2, 1, 0]}   # gfedcb|abcdefgh|gfedcba
    for border, values in expected.items():
        padded = image.copyMakeBorder(np.array(row), 0, 0, 6, 7, type=border).asnumpy()
        onp.testing.assert_array_equal(padded[0, :, 0], values, err_msg=f"type {border}")
    constant = image.copyMakeBorder(np.array(row), 1, 2, 3, 4, values=(9, 300, -5)).asnumpy()
    assert constant.shape == (4, 15, 3) and constant.dtype == onp.uint8
    onp.testing.assert_array_equal(constant[0, 0], [9, 255, 0])
    onp.testing.assert_array_equal(constant[1, 3:11, 1], onp.arange(8))
    scalar = image.copyMakeBorder(np.array(row), 1, 0, 0, 0, value=4).asnumpy()
    onp.testing.assert_array_equal(scalar[0], 4)
    with pytest.raises(ValueError, match="border code 0-4 .* got 5"):
        image.copyMakeBorder(np.array(row), 1, 1, 1, 1, type=5)
    with pytest.raises(ValueError, match=r"got \(1, -1, 0, 0\)"):
        image.copyMakeBorder(np.array(row), 1, -1, 0, 0)


# ---------------------------------------------------------------- augmenters

_GRAY = onp.array([0.299, 0.587, 0.114])


def _float_image(seed=11):
    return onp.random.default_rng(seed).uniform(0, 255, (6, 7, 3)).astype(onp.float32)


def _fitted_alpha(out, src, centre):
    """alpha with out - centre = alpha * (src - centre), checked to fit."""
    delta_in, delta_out = src - centre, out - centre
    alpha = (delta_in * delta_out).sum() / (delta_in * delta_in).sum()
    onp.testing.assert_allclose(delta_out, alpha * delta_in, atol=2e-3 * 255)
    return alpha


def test_colour_jitters_follow_their_formulas():
    src = _float_image()
    pymx.random.seed(12)
    for _ in range(5):
        bright = image.BrightnessJitterAug(0.3)(np.array(src)).asnumpy()
        assert 0.7 - 1e-5 <= _fitted_alpha(bright, src, 0.0) <= 1.3 + 1e-5
        contrast = image.ContrastJitterAug(0.3)(np.array(src)).asnumpy()
        mean_gray = (src @ _GRAY).mean()
        onp.testing.assert_allclose((contrast @ _GRAY).mean(), mean_gray, rtol=1e-4)
        assert 0.7 - 1e-5 <= _fitted_alpha(contrast, src, mean_gray) <= 1.3 + 1e-5
        saturation = image.SaturationJitterAug(0.3)(np.array(src)).asnumpy()
        gray = (src @ _GRAY)[:, :, None]
        onp.testing.assert_allclose(saturation @ _GRAY, gray[:, :, 0], rtol=1e-4, atol=1e-2)
        assert 0.7 - 1e-5 <= _fitted_alpha(saturation, src, gray) <= 1.3 + 1e-5
        hue = image.HueJitterAug(0.4)(np.array(src)).asnumpy()
        onp.testing.assert_allclose(hue @ _GRAY, src @ _GRAY, atol=0.5)    # luma kept
        assert hue.dtype == onp.float32


def test_hue_lighting_gray_flip_cast_and_normalize():
    src = _float_image(13)
    # the YIQ matrices are inverse to three decimals, so hue 0 is the identity within a level
    onp.testing.assert_allclose(image.HueJitterAug(0)(np.array(src)).asnumpy(), src, atol=1.0)
    eigval, eigvec = onp.array([55.46, 4.794, 1.148]), onp.eye(3)
    lit = image.LightingAug(0.1, eigval, eigvec)(np.array(src)).asnumpy()
    offset = (lit - src).reshape(-1, 3)
    onp.testing.assert_allclose(offset, offset[:1].repeat(len(offset), 0), atol=1e-3)
    assert (onp.abs(offset[0]) < 6 * 0.1 * eigval).all()
    onp.testing.assert_allclose(image.LightingAug(0.0, eigval, eigvec)(np.array(src)).asnumpy(),
                                src)
    gray = image.RandomGrayAug(1.0)(np.array(src)).asnumpy()
    expected = src @ onp.array([0.21, 0.72, 0.07])
    onp.testing.assert_allclose(gray, expected[:, :, None].repeat(3, 2), rtol=1e-5)
    assert image.RandomGrayAug(0.0)(np.array(src)).asnumpy().tolist() == src.tolist()
    onp.testing.assert_array_equal(image.HorizontalFlipAug(1.0)(np.array(src)).asnumpy(),
                                   src[:, ::-1])
    onp.testing.assert_array_equal(image.HorizontalFlipAug(0.0)(np.array(src)).asnumpy(), src)
    assert image.CastAug()(np.array(_rgb(2, 2))).dtype == onp.float32
    assert image.CastAug("float64")(np.array(_rgb(2, 2))).dtype == onp.float64
    normalized = image.ColorNormalizeAug([1.0, 2.0, 3.0], [2.0, 2.0, 4.0])(np.array(src))
    onp.testing.assert_allclose(normalized.asnumpy(), (src - [1, 2, 3]) / [2, 2, 4], rtol=1e-6)


def test_uint8_images_keep_their_dtype_rounded_and_saturated():
    src = _rgb(5, 6, seed=14)
    pymx.random.seed(15)
    for aug in (image.BrightnessJitterAug(0.9), image.ContrastJitterAug(0.9),
                image.SaturationJitterAug(0.9), image.HueJitterAug(0.5),
                image.LightingAug(5.0, onp.array([55.46, 4.794, 1.148]), onp.eye(3)),
                image.RandomGrayAug(1.0)):
        out = aug(np.array(src))
        assert out.dtype == onp.uint8 and out.shape == src.shape, type(aug).__name__
    pymx.random.seed(16)
    bright = image.BrightnessJitterAug(0.5)(np.array(src)).asnumpy()
    pymx.random.seed(16)
    as_float = image.BrightnessJitterAug(0.5)(np.array(src.astype(onp.float32))).asnumpy()
    onp.testing.assert_array_equal(bright, onp.clip(onp.round(as_float), 0, 255))


def test_geometric_augmenters_shapes():
    src = np.array(_rgb(20, 30, seed=17))
    assert image.ResizeAug(10)(src).shape == (10, 15, 3)
    assert image.ForceResizeAug((7, 9))(src).shape == (9, 7, 3)
    assert image.RandomCropAug((8, 6))(src).shape == (6, 8, 3)
    assert image.CenterCropAug((8, 6))(src).shape == (6, 8, 3)
    assert image.RandomSizedCropAug((8, 6), 0.3, (0.75, 1.33))(src).shape == (6, 8, 3)
    for aug in (image.ResizeAug(10), image.RandomCropAug((8, 6))):
        assert aug(src).dtype == onp.uint8


def test_random_order_draws_each_order():
    add = type("Add", (image.Augmenter,), {"__call__": lambda self, x: x + 1})()
    double = type("Double", (image.Augmenter,), {"__call__": lambda self, x: x * 2})()
    seen = set()
    pymx.random.seed(18)
    for _ in range(30):
        seen.add(float(image.RandomOrderAug([add, double])(np.array([1.0])).asnumpy()[0]))
    assert seen == {3.0, 4.0}       # (1 + 1) * 2 and 1 * 2 + 1


def test_augmenters_repeat_under_a_seed_and_vary_without():
    src = np.array(_rgb(24, 32, seed=19))
    augs = image.CreateAugmenter((3, 12, 12), resize=16, rand_crop=True, rand_resize=True,
                                 rand_mirror=True, mean=True, std=True, brightness=0.2,
                                 contrast=0.2, saturation=0.2, hue=0.2, pca_noise=0.1,
                                 rand_gray=0.3, inter_method=10)

    def run():
        out = src
        for aug in augs:
            out = aug(out)
        return out.asnumpy()

    pymx.random.seed(20)
    first = run()
    pymx.random.seed(20)
    onp.testing.assert_array_equal(run(), first)
    assert first.shape == (12, 12, 3) and first.dtype == onp.float32
    assert not all(onp.array_equal(run(), first) for _ in range(3))


def test_create_augmenter_lists_and_errors():
    names = [type(a).__name__ for a in image.CreateAugmenter((3, 8, 8))]
    assert names == ["CenterCropAug", "CastAug"]
    augs = image.CreateAugmenter((3, 8, 8), resize=10, rand_crop=True, rand_mirror=True,
                                 brightness=0.1, hue=0.1, pca_noise=0.1, rand_gray=0.1,
                                 mean=True, std=True)
    assert [type(a).__name__ for a in augs] == [
        "ResizeAug", "RandomCropAug", "HorizontalFlipAug", "CastAug", "ColorJitterAug",
        "HueJitterAug", "LightingAug", "RandomGrayAug", "ColorNormalizeAug"]
    onp.testing.assert_allclose(augs[-1].mean, [123.68, 116.28, 103.53], rtol=1e-6)
    assert augs[0].dumps() == '["resizeaug", {"size": 10, "interp": 2}]'
    with pytest.raises(ValueError, match="rand_resize=True needs rand_crop=True"):
        image.CreateAugmenter((3, 8, 8), rand_resize=True)
    with pytest.raises(ValueError, match=r"data_shape must be .* got \(8, 8\)"):
        image.CreateAugmenter((8, 8))
    with pytest.raises(ValueError, match="brightness must be a number >= 0, got -1"):
        image.BrightnessJitterAug(-1)
    with pytest.raises(ValueError, match="p must be a probability in .* got 1.5"):
        image.HorizontalFlipAug(1.5)
    with pytest.raises(ValueError, match="mean must hold 1 or 3 values .* got 2"):
        image.ColorNormalizeAug([1.0, 2.0], None)


# ---------------------------------------------------------------- ImageIter

@pytest.fixture
def image_files(tmp_path):
    """Seven 8x8 PNG images 0..6 in tmp_path/images, image k labelled k."""
    root = tmp_path / "images"
    root.mkdir()
    pixels = []
    for k in range(7):
        array = _rgb(8, 8, seed=100 + k)
        (root / f"{k}.png").write_bytes(_png_bytes(array))
        pixels.append(array)
    return root, pixels


def _labels(it, epochs):
    """[[(labels, pad) per batch] per epoch]."""
    result = []
    for _ in range(epochs):
        result.append([(b.label[0].asnumpy().astype(int).tolist(), b.pad) for b in it])
        it.reset()
    return result


def test_image_iter_from_imglist_gives_chw_float32_batches(image_files):
    root, pixels = image_files
    imglist = [[float(k), f"{k}.png"] for k in range(7)]
    it = image.ImageIter(3, (3, 8, 8), imglist=imglist, path_root=str(root))
    assert it.provide_data[0].shape == (3, 3, 8, 8)
    assert it.provide_label[0].shape == (3,)
    batch = it.next()
    assert isinstance(batch, pymx.io.DataBatch)
    assert batch.data[0].dtype == onp.float32 and batch.data[0].shape == (3, 3, 8, 8)
    for row in range(3):
        onp.testing.assert_array_equal(batch.data[0].asnumpy()[row],
                                       pixels[row].transpose(2, 0, 1).astype(onp.float32))
    onp.testing.assert_array_equal(batch.label[0].asnumpy(), [0, 1, 2])


def test_image_iter_last_batch_modes_over_epochs(image_files):
    root, _ = image_files
    imglist = [[float(k), f"{k}.png"] for k in range(7)]

    def make(mode):
        return image.ImageIter(3, (3, 8, 8), imglist=imglist, path_root=str(root),
                               last_batch_handle=mode)

    pad_epoch = [([0, 1, 2], 0), ([3, 4, 5], 0), ([6, 0, 1], 2)]
    assert _labels(make("pad"), 3) == [pad_epoch] * 3
    discard_epoch = [([0, 1, 2], 0), ([3, 4, 5], 0)]
    assert _labels(make("discard"), 3) == [discard_epoch] * 3
    # roll_over: 6 waits for the next epoch; the batch that completes it reports as pad the
    # images taken from the new epoch (MXNet's value)
    assert _labels(make("roll_over"), 3) == [
        [([0, 1, 2], 0), ([3, 4, 5], 0)],
        [([6, 0, 1], 2), ([2, 3, 4], 0)],
        [([5, 6, 0], 1), ([1, 2, 3], 0), ([4, 5, 6], 0)]]


def test_image_iter_from_lst_and_rec_agree(image_files, tmp_path):
    root, pixels = image_files
    lst = tmp_path / "images.lst"
    lst.write_text("".join(f"{k}\t{k}.0\t{10 + k}.0\t{k}.png\n" for k in range(7)))
    rec, idx = str(tmp_path / "images.rec"), str(tmp_path / "images.idx")
    with recordio.MXIndexedRecordIO(idx, rec, "w") as writer:
        for k in range(7):
            header = recordio.IRHeader(2, [float(k), 10.0 + k], k, 0)
            writer.write_idx(k, recordio.pack_img(header, pixels[k][:, :, ::-1], img_fmt=".png"))
    from_lst = image.ImageIter(4, (3, 8, 8), label_width=2, path_imglist=str(lst),
                               path_root=str(root))
    from_rec = image.ImageIter(4, (3, 8, 8), label_width=2, path_imgrec=rec, path_imgidx=idx)
    sequential = image.ImageIter(4, (3, 8, 8), label_width=2, path_imgrec=rec)
    for a, b, c in zip(from_lst, from_rec, sequential):
        assert a.label[0].shape == (4, 2)
        for x, y in ((a, b), (a, c)):
            onp.testing.assert_array_equal(x.data[0].asnumpy(), y.data[0].asnumpy())
            onp.testing.assert_array_equal(x.label[0].asnumpy(), y.label[0].asnumpy())
    # partitions: part 1 of 2 holds images 3, 4, 5
    part = image.ImageIter(3, (3, 8, 8), path_imgrec=rec, path_imgidx=idx, label_width=2,
                           num_parts=2, part_index=1)
    assert part.next().label[0].asnumpy()[:, 0].tolist() == [3, 4, 5]


def test_image_iter_shuffle_repeats_under_a_seed(image_files):
    root, _ = image_files
    imglist = [[float(k), f"{k}.png"] for k in range(7)]

    def epochs(seed):
        """(labels, data) of the one batch of each of two epochs."""
        pymx.random.seed(seed)
        it = image.ImageIter(7, (3, 6, 6), imglist=imglist, path_root=str(root), shuffle=True,
                             rand_crop=True, rand_mirror=True)
        batches = []
        for _ in range(2):
            batches += [(b.label[0].asnumpy().tolist(), b.data[0].asnumpy()) for b in it]
            it.reset()
        return batches

    first, again = epochs(21), epochs(21)
    for (labels_a, data_a), (labels_b, data_b) in zip(first, again):
        assert labels_a == labels_b
        onp.testing.assert_array_equal(data_a, data_b)
    assert sorted(first[0][0]) == list(range(7))
    assert first[0][0] != first[1][0] or not onp.array_equal(first[0][1], first[1][1])


def test_image_iter_bad_input_raises_naming_values(image_files, tmp_path):
    root, _ = image_files
    imglist = [[0.0, "0.png"]]
    with pytest.raises(ValueError, match=r"3 channels, got data_shape \(1, 8, 8\)"):
        image.ImageIter(2, (1, 8, 8), imglist=imglist, path_root=str(root))
    with pytest.raises(ValueError, match=r"length 3, .* got \(8, 8\)"):
        image.ImageIter(2, (8, 8), imglist=imglist, path_root=str(root))
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        image.ImageIter(0, (3, 8, 8), imglist=imglist, path_root=str(root))
    with pytest.raises(ValueError, match="last_batch_handle must be one of .* got 'keep'"):
        image.ImageIter(2, (3, 8, 8), imglist=imglist, path_root=str(root),
                        last_batch_handle="keep")
    with pytest.raises(ValueError, match="give path_imgrec, path_imglist or imglist"):
        image.ImageIter(2, (3, 8, 8))
    with pytest.raises(ValueError, match="part_index 2 with num_parts 2"):
        image.ImageIter(2, (3, 8, 8), imglist=imglist, path_root=str(root), num_parts=2,
                        part_index=2)
    missing = image.ImageIter(2, (3, 8, 8), imglist=[[0.0, "nope.png"]], path_root=str(root))
    with pytest.raises(FileNotFoundError, match="nope.png"):
        missing.next()
    (root / "bad.png").write_bytes(b"garbage")
    broken = image.ImageIter(2, (3, 8, 8), imglist=[[0.0, "bad.png"]], path_root=str(root))
    with pytest.raises(ValueError, match="Broken image filename: bad.png"):
        broken.next()
    wrong_shape = image.ImageIter(1, (3, 8, 8), imglist=imglist, path_root=str(root),
                                  aug_list=[image.ForceResizeAug((4, 4))])
    with pytest.raises(ValueError, match=r"shape \(3, 4, 4\) .* data_shape is \(3, 8, 8\)"):
        wrong_shape.next()
    wide = image.ImageIter(1, (3, 8, 8), label_width=2, imglist=imglist, path_root=str(root))
    with pytest.raises(ValueError, match="1 label values, label_width is 2"):
        wide.next()
    ok = image.ImageIter(1, (3, 8, 8), imglist=imglist, path_root=str(root))
    assert ok.next().data[0].shape == (1, 3, 8, 8)


# ---------------------------------------------------------------- GPU

@requires_gpu
def test_resizing_and_colour_augmenters_on_gpu_match_cpu():
    src = _float_image(22)
    gpu_src = np.array(src, device=pymx.gpu(0))
    for interp in range(5):
        onp.testing.assert_allclose(image.imresize(gpu_src, 11, 9, interp).asnumpy(),
                                    image.imresize(np.array(src), 11, 9, interp).asnumpy(),
                                    rtol=1e-4, atol=1e-3)
    for aug in (image.BrightnessJitterAug(0.3), image.ContrastJitterAug(0.3),
                image.SaturationJitterAug(0.3), image.HueJitterAug(0.3),
                image.HorizontalFlipAug(0.5), image.RandomGrayAug(0.5)):
        pymx.random.seed(23)
        on_gpu = aug(gpu_src)
        pymx.random.seed(23)
        on_cpu = aug(np.array(src))
        assert str(on_gpu.device) == "gpu(0)"
        onp.testing.assert_allclose(on_gpu.asnumpy(), on_cpu.asnumpy(), rtol=1e-4, atol=1e-3)
