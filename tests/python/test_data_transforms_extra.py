"""Rotate, RandomRotation, RandomGray, RandomApply and HybridRandomApply against float64 NumPy
references: rotations by multiples of 90 degrees exactly, other angles against a per-pixel
bilinear sampler written out below; probabilities as frequencies over seeded draws."""
import numpy as onp
import pytest

from conftest import requires_gpu
from pymx import autograd, np
from pymx.device import cpu, gpu
from pymx.gluon import HybridBlock
from pymx.gluon.data.vision import transforms as T
from pymx.test_utils import assert_almost_equal, check_numeric_gradient

LUMA = onp.array([0.2989, 0.5870, 0.1140])


def _sample(image, x, y):
    """Bilinear value of a (C, H, W) image at (x, y); neighbours outside the image count as 0."""
    height, width = image.shape[1:]
    x0, y0 = int(onp.floor(x)), int(onp.floor(y))
    value = onp.zeros(image.shape[0])
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= yy < height and 0 <= xx < width:
                value += wy * wx * image[:, yy, xx]
    return value


def _rotate_reference(image, degrees, scale=1.0):
    """Output pixel (i, j) reads the source at the centre plus the rotated, scaled offset."""
    image = image.astype(onp.float64)
    height, width = image.shape[1:]
    cy, cx = (height - 1) / 2, (width - 1) / 2
    theta = onp.deg2rad(degrees)
    out = onp.zeros_like(image)
    for i in range(height):
        for j in range(width):
            dx, dy = j - cx, i - cy
            out[:, i, j] = _sample(image, cx + scale * (dx * onp.cos(theta) - dy * onp.sin(theta)),
                                   cy + scale * (dx * onp.sin(theta) + dy * onp.cos(theta)))
    return out


def _chw(shape, seed=0, dtype=onp.float32):
    return onp.random.default_rng(seed).random(shape).astype(dtype)


@pytest.mark.parametrize("k", [1, 2, 3, -1])
def test_rotate_multiples_of_90_are_exact(k):
    x = _chw((2, 3, 5, 5))
    out = T.Rotate(90 * k)(np.array(x)).asnumpy()
    assert_almost_equal(out, onp.rot90(x, k, axes=(2, 3)), rtol=0, atol=1e-6)
    single = T.Rotate(90 * k)(np.array(x[0])).asnumpy()      # (C, H, W)
    assert_almost_equal(single, onp.rot90(x[0], k, axes=(1, 2)), rtol=0, atol=1e-6)


@pytest.mark.parametrize("degrees,shape", [(7.5, (2, 6, 6)), (-20.0, (3, 5, 7)),
                                           (33.0, (1, 4, 9))])
def test_rotate_small_angles_match_bilinear_reference(degrees, shape):
    x = _chw(shape, seed=1)
    out = T.Rotate(degrees)(np.array(x))
    assert out.shape == shape and out.dtype == onp.float32
    assert_almost_equal(out, _rotate_reference(x, degrees), rtol=1e-5, atol=1e-5)


def test_rotate_float64_and_per_image_angles():
    x = _chw((3, 2, 5, 6), seed=2, dtype=onp.float64)
    angles = [10.0, -45.0, 90.0]
    out = T.Rotate(angles)(np.array(x, dtype="float64"))
    assert out.dtype == onp.float64
    expected = onp.stack([_rotate_reference(img, a) for img, a in zip(x, angles)])
    assert_almost_equal(out, expected, rtol=1e-12, atol=1e-12)


def test_rotate_zoom_in_hides_padding_and_zoom_out_shows_whole_image():
    ones = onp.ones((1, 9, 9), onp.float32)
    zoomed_in = T.Rotate(30, zoom_in=True)(np.array(ones)).asnumpy()
    plain = T.Rotate(30)(np.array(ones)).asnumpy()
    assert zoomed_in.min() > 0.999 and plain.min() < 0.5     # no padding vs corner padding
    # zoom_out by 45 degrees on a square: scale = sqrt(2), every source pixel is inside
    x = _chw((1, 8, 8), seed=3)
    out = T.Rotate(45, zoom_out=True)(np.array(x))
    assert_almost_equal(out, _rotate_reference(x, 45, scale=onp.sqrt(2)), rtol=1e-5, atol=1e-5)
    scale_in = 1 / onp.sqrt(2)      # 45 degrees on a square: zoom in by sqrt(2)
    x = _chw((2, 6, 6), seed=4)
    out = T.Rotate(-45, zoom_in=True)(np.array(x))
    assert_almost_equal(out, _rotate_reference(x, -45, scale=scale_in), rtol=1e-5, atol=1e-5)


def test_rotate_gradient_reaches_input():
    x = _chw((1, 4, 5), seed=5)
    check_numeric_gradient(lambda a: T.Rotate(25.0)(a), [x])


def test_rotate_errors():
    with pytest.raises(ValueError, match="zoom_in and zoom_out"):
        T.Rotate(10, zoom_in=True, zoom_out=True)
    with pytest.raises(TypeError, match="uint8.*ToTensor"):
        T.Rotate(10)(np.array(onp.zeros((4, 4, 3), onp.uint8)))
    with pytest.raises(ValueError, match=r"shape \(4, 4\)"):
        T.Rotate(10)(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="2 rotation angles for a batch of 3"):
        T.Rotate([1.0, 2.0])(np.zeros((3, 1, 4, 4)))
    with pytest.raises(TypeError, match="one rotation angle"):
        T.Rotate([1.0, 2.0])(np.zeros((1, 4, 4)))


def test_random_rotation_draws_angles_from_numpy():
    x = _chw((2, 3, 6, 6), seed=6)
    onp.random.seed(11)
    out = T.RandomRotation((-30, 30))(np.array(x)).asnumpy()
    onp.random.seed(11)
    onp.random.random()                                     # the rotate_with_proba draw
    angles = onp.random.uniform(-30, 30, size=2)            # one angle per image
    expected = onp.stack([_rotate_reference(img, a) for img, a in zip(x, angles)])
    assert_almost_equal(out, expected, rtol=1e-5, atol=1e-5)


def test_random_rotation_probability():
    x = np.array(_chw((1, 4, 4), seed=7))
    transform = T.RandomRotation((10, 20), rotate_with_proba=0.3)
    onp.random.seed(0)
    rotated = sum(not onp.array_equal(transform(x).asnumpy(), x.asnumpy()) for _ in range(400))
    # binomial(400, 0.3): mean 120, standard deviation 9.2
    assert 120 - 4 * 9.2 < rotated < 120 + 4 * 9.2
    never = T.RandomRotation((10, 20), rotate_with_proba=0.0)
    assert all(never(x) is x for _ in range(20))


def test_random_rotation_errors():
    with pytest.raises(ValueError, match=r"lower < upper, got \(30, 10\)"):
        T.RandomRotation((30, 10))
    with pytest.raises(ValueError, match="rotate_with_proba must be in \\[0, 1\\], got 1.5"):
        T.RandomRotation((0, 10), rotate_with_proba=1.5)
    with pytest.raises(ValueError, match="zoom_in and zoom_out"):
        T.RandomRotation((0, 10), zoom_in=True, zoom_out=True)


def test_random_gray_uint8_float_and_batch():
    img = onp.random.default_rng(8).integers(0, 256, (2, 4, 5, 3), dtype=onp.uint8)
    out = T.RandomGray(p=1.0)(np.array(img))
    assert out.dtype == onp.uint8 and out.shape == img.shape
    gray = img.astype(onp.float64) @ LUMA
    expected = onp.clip(onp.rint(gray), 0, 255).astype(onp.uint8)
    onp.testing.assert_array_equal(out.asnumpy(), onp.repeat(expected[..., None], 3, axis=-1))
    xf = _chw((4, 5, 3), seed=9, dtype=onp.float64)
    out = T.RandomGray(p=1.0)(np.array(xf, dtype="float64"))
    assert out.dtype == onp.float64
    assert_almost_equal(out, onp.repeat((xf @ LUMA)[..., None], 3, axis=-1), rtol=1e-12)
    single = onp.zeros((3, 3, 1), onp.uint8)
    assert T.RandomGray(p=1.0)(np.array(single)).shape == (3, 3, 1)


def test_random_gray_probability_and_errors():
    img = np.array(onp.random.default_rng(10).integers(0, 256, (3, 3, 3), dtype=onp.uint8))
    transform = T.RandomGray(p=0.25)
    onp.random.seed(1)
    grayed = sum(not onp.array_equal(transform(img).asnumpy(), img.asnumpy())
                 for _ in range(400))
    assert 100 - 4 * 8.7 < grayed < 100 + 4 * 8.7          # binomial(400, 0.25)
    with pytest.raises(ValueError, match="p must be in \\[0, 1\\], got -0.1"):
        T.RandomGray(p=-0.1)
    with pytest.raises(ValueError, match=r"1 or 3 channels, but got shape \(3, 3, 4\)"):
        T.RandomGray(p=1.0)(np.zeros((3, 3, 4)))


class _AddOne(HybridBlock):
    def forward(self, x):
        return x + 1


def test_random_apply_probability_and_lists():
    x = np.zeros((2, 2))
    transform = T.RandomApply(_AddOne(), p=0.7)
    onp.random.seed(2)
    applied = sum(float(transform(x).sum()) == 4.0 for _ in range(400))
    assert 280 - 4 * 9.2 < applied < 280 + 4 * 9.2          # binomial(400, 0.7)
    both = T.RandomApply([_AddOne(), _AddOne()], p=1.0)
    assert_almost_equal(both(x), onp.full((2, 2), 2.0))
    assert T.RandomApply(_AddOne(), p=0.0)(x) is x
    with pytest.raises(ValueError, match="p must be a probability in \\[0, 1\\], got 2"):
        T.RandomApply(_AddOne(), p=2)
    with pytest.raises(TypeError, match="Block or a list of Blocks, got function"):
        T.RandomApply(lambda v: v)


@pytest.mark.parametrize("hybridize", [False, True])
def test_hybrid_random_apply_probability(hybridize):
    transform = T.HybridRandomApply(_AddOne(), p=0.4)
    if hybridize:
        transform.hybridize()
    x = np.zeros((3,))
    results = [float(transform(x).sum()) for _ in range(300)]
    assert set(results) <= {0.0, 3.0}
    applied = results.count(3.0)
    assert 120 - 4 * 8.5 < applied < 120 + 4 * 8.5          # binomial(300, 0.4)


def test_hybrid_random_apply_errors():
    with pytest.raises(TypeError, match="HybridBlock.*got RandomGray"):
        T.HybridRandomApply(T.RandomGray())
    with pytest.raises(ValueError, match="keep the input's shape and dtype.*uint8"):
        T.HybridRandomApply(T.Cast("float32"))(np.array(onp.zeros((2, 2), onp.uint8)))


@requires_gpu
def test_rotate_and_gray_gpu_match_cpu():
    x = _chw((2, 3, 7, 6), seed=12)
    for transform in (T.Rotate(17.0), T.Rotate(-40.0, zoom_out=True), T.Rotate(90)):
        want = transform(np.array(x, device=cpu(0)))
        got = transform(np.array(x, device=gpu(0)))
        assert got.device == gpu(0)
        assert_almost_equal(got.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-6)
    img = onp.random.default_rng(13).integers(0, 256, (5, 4, 3), dtype=onp.uint8)
    want = T.RandomGray(1.0)(np.array(img, device=cpu(0))).asnumpy()
    got = T.RandomGray(1.0)(np.array(img, device=gpu(0))).asnumpy()
    onp.testing.assert_array_equal(got, want)


@requires_gpu
def test_rotate_gradient_gpu_matches_cpu():
    x = _chw((1, 5, 5), seed=14)
    grads = []
    for device in (cpu(0), gpu(0)):
        a = np.array(x, device=device)
        a.attach_grad()
        with autograd.record():
            out = T.Rotate(33.0)(a)
        out.backward(np.array(onp.arange(25.0).reshape(1, 5, 5), device=device))
        grads.append(a.grad.asnumpy())
    assert_almost_equal(grads[1], grads[0], rtol=1e-5, atol=1e-5)
