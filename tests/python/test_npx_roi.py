"""npx.roi_pooling and npx.roi_align against NumPy references of MXNet's semantics (checked
against MXNet 1.9.1's ROIPooling and contrib ROIAlign when they were written): values in every
float dtype, rounding of the region corners, empty and clipped bins, position_sensitive,
aligned, sample_ratio; roi_pooling's gradient routed to the argmax pixel, roi_align's against
central differences; the errors; GPU against CPU."""
import math

import numpy as onp
import pytest

import pymx
from pymx import autograd, npx
from pymx.ndarray import from_numpy
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import requires_gpu

FLT_MAX = float(onp.finfo(onp.float32).max)


# ---------------------------------------------------------------------------------------------
# References. The region geometry is computed in the kernels' type `ct` (float32 for float32 and
# the 16-bit floats, float64 for float64), values in float64.
# ---------------------------------------------------------------------------------------------
def _round_half_away(v):
    return int(math.copysign(math.floor(abs(float(v)) + 0.5), float(v)))


def roi_pooling_reference(x, rois, pooled_size, spatial_scale, ct=onp.float32):
    """(out, argmax): out (R, C, ph, pw) in float64, argmax the plane offset of each maximum."""
    n, c, h, w = x.shape
    pooled_h, pooled_w = pooled_size
    out = onp.zeros((len(rois), c, pooled_h, pooled_w))
    argmax = onp.full(out.shape, -1, dtype=onp.int64)
    scale = ct(onp.float32(spatial_scale))
    for r, row in enumerate(rois.astype(ct)):
        batch = int(row[0])
        start_w, start_h, end_w, end_h = (_round_half_away(row[k] * scale) for k in (1, 2, 3, 4))
        roi_h, roi_w = max(end_h - start_h + 1, 1), max(end_w - start_w + 1, 1)
        bin_h, bin_w = ct(roi_h) / ct(pooled_h), ct(roi_w) / ct(pooled_w)
        for ph in range(pooled_h):
            h0 = min(max(int(onp.floor(ct(ph) * bin_h)) + start_h, 0), h)
            h1 = min(max(int(onp.ceil(ct(ph + 1) * bin_h)) + start_h, 0), h)
            for pw in range(pooled_w):
                w0 = min(max(int(onp.floor(ct(pw) * bin_w)) + start_w, 0), w)
                w1 = min(max(int(onp.ceil(ct(pw + 1) * bin_w)) + start_w, 0), w)
                if h1 <= h0 or w1 <= w0:
                    continue  # an empty bin: 0, no argmax
                for ch in range(c):
                    best, best_at = -FLT_MAX, -1
                    for yy in range(h0, h1):
                        for xx in range(w0, w1):
                            if x[batch, ch, yy, xx] > best:
                                best, best_at = x[batch, ch, yy, xx], yy * w + xx
                    out[r, ch, ph, pw], argmax[r, ch, ph, pw] = best, best_at
    return out, argmax


def roi_pooling_grad_reference(x_shape, rois, argmax, head):
    """The argmax rule: each output's head gradient goes to the pixel it took."""
    grad = onp.zeros(x_shape)
    n, c, h, w = x_shape
    for index in onp.ndindex(argmax.shape):
        if argmax[index] >= 0:
            r, ch = index[0], index[1]
            grad[int(rois[r, 0]), ch].reshape(-1)[argmax[index]] += head[index]
    return grad


def _bilinear(y, x, h, w):
    """[(plane offset, weight)] of a sample, empty when it is over a pixel outside the map."""
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return []
    y, x = max(y, 0), max(x, 0)
    y_low, x_low = int(y), int(x)
    if y_low >= h - 1:
        y_low = y_high = h - 1
        y = type(y)(y_low)
    else:
        y_high = y_low + 1
    if x_low >= w - 1:
        x_low = x_high = w - 1
        x = type(x)(x_low)
    else:
        x_high = x_low + 1
    ly, lx = y - y_low, x - x_low
    hy, hx = 1 - ly, 1 - lx
    return [(y_low * w + x_low, hy * hx), (y_low * w + x_high, hy * lx),
            (y_high * w + x_low, ly * hx), (y_high * w + x_high, ly * lx)]


def roi_align_weights(x_shape, rois, pooled_size, spatial_scale, sample_ratio=-1,
                      position_sensitive=False, aligned=False, ct=onp.float32):
    """The matrix M with out.ravel() = M @ x.ravel(): roi_align is linear in data."""
    n, c, h, w = x_shape
    pooled_h, pooled_w = pooled_size
    out_c = c // (pooled_h * pooled_w) if position_sensitive else c
    matrix = onp.zeros((len(rois) * out_c * pooled_h * pooled_w, n * c * h * w))
    scale = ct(onp.float32(spatial_scale))
    offset = ct(0.5) if aligned else ct(0)
    for r, row in enumerate(rois.astype(ct)):
        batch = int(row[0])
        if batch < 0:
            continue  # a skipped region: 0
        start_w, start_h = row[1] * scale - offset, row[2] * scale - offset
        roi_w, roi_h = row[3] * scale - offset - start_w, row[4] * scale - offset - start_h
        if not aligned:
            roi_w, roi_h = max(roi_w, ct(1)), max(roi_h, ct(1))
        bin_h, bin_w = roi_h / ct(pooled_h), roi_w / ct(pooled_w)
        grid_h = sample_ratio if sample_ratio > 0 else int(onp.ceil(roi_h / ct(pooled_h)))
        grid_w = sample_ratio if sample_ratio > 0 else int(onp.ceil(roi_w / ct(pooled_w)))
        for ch in range(out_c):
            for ph in range(pooled_h):
                for pw in range(pooled_w):
                    data_ch = (ch * pooled_h + ph) * pooled_w + pw if position_sensitive else ch
                    o = ((r * out_c + ch) * pooled_h + ph) * pooled_w + pw
                    base = (batch * c + data_ch) * h * w
                    for iy in range(grid_h):
                        y = start_h + ct(ph) * bin_h + (ct(iy) + ct(0.5)) * bin_h / ct(grid_h)
                        for ix in range(grid_w):
                            xx = start_w + ct(pw) * bin_w + (ct(ix) + ct(0.5)) * bin_w / ct(grid_w)
                            for pos, weight in _bilinear(y, xx, h, w):
                                matrix[o, base + pos] += float(weight) / (grid_h * grid_w)
    return matrix, (len(rois), out_c, pooled_h, pooled_w)


def roi_align_reference(x, rois, pooled_size, spatial_scale, **kwargs):
    matrix, shape = roi_align_weights(x.shape, rois, pooled_size, spatial_scale, **kwargs)
    return (matrix @ x.ravel()).reshape(shape)


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------
def random_rois(num, batch, height, width, scale=1.0):
    """Regions in image coordinates (the map times 1 / scale), some past the borders, some
    inverted or smaller than a pixel."""
    rows = []
    for _ in range(num):
        x1, x2 = onp.random.uniform(-2, width + 1, size=2) / scale
        y1, y2 = onp.random.uniform(-2, height + 1, size=2) / scale
        rows.append([onp.random.randint(batch), x1, y1, x2, y2])
    return onp.array(rows)


# Region corners on .5 (rounding half away from zero), inverted, outside the map, degenerate.
FIXED_ROIS = onp.array([[0, 0, 0, 4, 4], [0, 2.5, 1.5, 3.49, 5.5], [0, -3, -3, -1, -1],
                        [0, 10, 10, 20, 20], [0, 0.5, 0.5, 0.5, 0.5], [0, 4, 4, 0, 0],
                        [1, -0.5, -2.5, 5.5, 7.5]])


def test_roi_pooling_mxnet_example(device):
    """MXNet's documented example (8 x 6 map, region (0, 0)-(4, 4), scales 1 and 0.7)."""
    x = from_numpy(onp.arange(48.0).reshape(1, 1, 8, 6), device=device)
    rois = from_numpy(onp.array([[0.0, 0, 0, 4, 4]]), device=device)
    assert npx.roi_pooling(x, rois, (2, 2), 1.0).asnumpy().tolist() == [[[[14, 16], [26, 28]]]]
    assert npx.roi_pooling(x, rois, (2, 2), 0.7).asnumpy().tolist() == [[[[7, 9], [19, 21]]]]


@pytest.mark.parametrize("pooled_size,spatial_scale", [((2, 3), 1.0), ((3, 3), 0.5), ((1, 1), 0.25),
                                                       ((4, 2), 0.7)])
def test_roi_pooling_values(device, pooled_size, spatial_scale):
    x = onp.random.uniform(-1, 1, size=(2, 3, 8, 6))
    rois = onp.concatenate([FIXED_ROIS, random_rois(6, 2, 8, 6, spatial_scale)])
    want, _ = roi_pooling_reference(x, rois, pooled_size, spatial_scale, ct=onp.float64)
    got = npx.roi_pooling(from_numpy(x, device=device), from_numpy(rois, device=device),
                          pooled_size, spatial_scale)
    assert got.shape == want.shape and got.dtype == onp.float64
    assert_almost_equal(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_roi_pooling_dtypes(device, dtype):
    x = onp.random.uniform(-1, 1, size=(2, 3, 7, 9))
    x = from_numpy(x, dtype=dtype).asnumpy().astype(onp.float64)  # exactly representable
    rois = onp.concatenate([FIXED_ROIS, random_rois(5, 2, 7, 9)])
    rois = from_numpy(rois, dtype=dtype).asnumpy().astype(onp.float64)
    want, _ = roi_pooling_reference(x, rois, (3, 2), 1.0)
    got = npx.roi_pooling(from_numpy(x, dtype=dtype, device=device),
                          from_numpy(rois, dtype=dtype, device=device), (3, 2), 1.0)
    assert got.dtype == from_numpy(x, dtype=dtype).dtype
    assert_almost_equal(got.asnumpy().astype(onp.float64), want, rtol=0, atol=0)


def test_roi_pooling_nan_and_minus_inf_bins(device):
    """A bin of NaN or -inf keeps MXNet's start value -FLT_MAX and routes no gradient."""
    x = onp.full((1, 1, 4, 4), onp.nan)
    x[0, 0, 2:, 2:] = -onp.inf
    x[0, 0, 3, 0] = 5.0
    data = from_numpy(x, device=device)
    data.attach_grad()
    with autograd.record():
        out = npx.roi_pooling(data, from_numpy(onp.array([[0.0, 0, 0, 3, 3]]), device=device),
                              (2, 2), 1.0)
    out.backward()
    assert out.asnumpy().reshape(-1).tolist() == [-FLT_MAX, -FLT_MAX, 5.0, -FLT_MAX]
    want_grad = onp.zeros((1, 1, 4, 4))
    want_grad[0, 0, 3, 0] = 1
    assert_almost_equal(data.grad, want_grad, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_roi_pooling_gradient_goes_to_argmax(device, dtype):
    """Overlapping regions and bins take some pixels several times: their gradients add."""
    x = onp.random.permutation(2 * 2 * 6 * 7).reshape(2, 2, 6, 7) / 10.0  # no ties
    rois = onp.concatenate([FIXED_ROIS, FIXED_ROIS[:3], random_rois(6, 2, 6, 7)])
    out_want, argmax = roi_pooling_reference(x, rois, (3, 3), 1.0)
    head = onp.random.uniform(-1, 1, size=out_want.shape)
    data = from_numpy(x, dtype=dtype, device=device)
    data.attach_grad()
    with autograd.record():
        out = npx.roi_pooling(data, from_numpy(rois, dtype=dtype, device=device), (3, 3), 1.0)
    out.backward(from_numpy(head, dtype=dtype, device=device))
    tolerance = 1e-12 if dtype == "float64" else 1e-5
    assert_almost_equal(out, out_want, rtol=tolerance, atol=tolerance)
    assert_almost_equal(data.grad, roi_pooling_grad_reference(x.shape, rois, argmax, head),
                        rtol=tolerance, atol=tolerance)


def test_roi_pooling_empty(device):
    x = from_numpy(onp.ones((2, 3, 4, 4)), device=device)
    x.attach_grad()
    with autograd.record():
        out = npx.roi_pooling(x, from_numpy(onp.zeros((0, 5)), device=device), (2, 2), 1.0)
    out.backward()
    assert out.shape == (0, 3, 2, 2)
    assert_almost_equal(x.grad, onp.zeros((2, 3, 4, 4)), rtol=0, atol=0)
    empty_channels = npx.roi_pooling(from_numpy(onp.ones((1, 0, 4, 4)), device=device),
                                     from_numpy(FIXED_ROIS[:2], device=device), (2, 2), 1.0)
    assert empty_channels.shape == (2, 0, 2, 2)


ALIGN_CASES = [
    dict(pooled_size=(2, 2), spatial_scale=1.0),
    dict(pooled_size=(3, 2), spatial_scale=0.5, sample_ratio=2),
    dict(pooled_size=(2, 3), spatial_scale=1.0, aligned=True),
    dict(pooled_size=(2, 2), spatial_scale=0.7, sample_ratio=1, aligned=True),
    dict(pooled_size=(2, 2), spatial_scale=1.0, position_sensitive=True),
    dict(pooled_size=(1, 3), spatial_scale=0.25, sample_ratio=3, position_sensitive=True),
]


def _align_rois(kwargs, batch, height, width):
    rois = random_rois(6, batch, height, width, kwargs["spatial_scale"])
    if kwargs.get("aligned"):  # aligned regions need x2 > x1 and y2 > y1
        rois[:, 1:3], rois[:, 3:5] = (onp.minimum(rois[:, 1:3], rois[:, 3:5]),
                                      onp.maximum(rois[:, 1:3], rois[:, 3:5]) + 0.25)
    else:
        rois = onp.concatenate([rois, FIXED_ROIS])
    rois[0, 0] = -1  # a skipped region
    return rois


@pytest.mark.parametrize("kwargs", ALIGN_CASES)
def test_roi_align_values(device, kwargs):
    x = onp.random.uniform(-1, 1, size=(2, 12, 7, 8))
    rois = _align_rois(kwargs, 2, 7, 8)
    want = roi_align_reference(x, rois, ct=onp.float64, **kwargs)
    got = npx.roi_align(from_numpy(x, device=device), from_numpy(rois, device=device), **kwargs)
    assert got.shape == want.shape
    assert_almost_equal(got, want, rtol=1e-12, atol=1e-12)
    assert not got.asnumpy()[0].any()  # the skipped region


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_roi_align_dtypes(device, dtype):
    x = from_numpy(onp.random.uniform(-1, 1, size=(2, 4, 6, 6)), dtype=dtype).asnumpy()
    rois = from_numpy(_align_rois(ALIGN_CASES[1], 2, 6, 6), dtype=dtype).asnumpy()
    want = roi_align_reference(x.astype(onp.float64), rois.astype(onp.float64), **ALIGN_CASES[1])
    got = npx.roi_align(from_numpy(x, dtype=dtype, device=device),
                        from_numpy(rois, dtype=dtype, device=device), **ALIGN_CASES[1])
    tolerance = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    assert_almost_equal(got.asnumpy().astype(onp.float64), want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("kwargs", ALIGN_CASES)
def test_roi_align_gradient_central_differences(device, kwargs):
    rois = from_numpy(_align_rois(kwargs, 2, 4, 5), device=device)
    check_numeric_gradient(lambda x: npx.roi_align(x, rois, **kwargs),
                           [onp.random.uniform(-1, 1, size=(2, 12, 4, 5))], device=device)


@pytest.mark.parametrize("kwargs", ALIGN_CASES[:3])
def test_roi_align_gradient_is_the_bilinear_weights(device, kwargs):
    """data_grad = M^T head for out = M data (every sample's weights, summed where bins and
    regions share pixels), in float32 against the float64 reference."""
    x = onp.random.uniform(-1, 1, size=(2, 12, 7, 8))
    rois = _align_rois(kwargs, 2, 7, 8)
    matrix, shape = roi_align_weights(x.shape, rois, **kwargs)
    head = onp.random.uniform(-1, 1, size=shape)
    data = from_numpy(x, dtype="float32", device=device)
    data.attach_grad()
    with autograd.record():
        out = npx.roi_align(data, from_numpy(rois, dtype="float32", device=device), **kwargs)
    out.backward(from_numpy(head, dtype="float32", device=device))
    assert_almost_equal(data.grad, (matrix.T @ head.ravel()).reshape(x.shape), rtol=1e-4,
                        atol=1e-5)


def test_roi_ops_hybridize():
    class Head(pymx.gluon.HybridBlock):
        def forward(self, x, rois):
            return (npx.roi_pooling(x, rois, (2, 2), 0.5) +
                    npx.roi_align(x, rois, (2, 2), 0.5, sample_ratio=2))

    x = from_numpy(onp.random.uniform(size=(1, 2, 6, 6)))
    rois = from_numpy(onp.array([[0.0, 1, 1, 9, 7], [0, 0, 2, 4, 10]]))
    block = Head()
    imperative = block(x, rois).asnumpy()
    block.hybridize()
    assert_almost_equal(block(x, rois), imperative, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", [npx.roi_pooling, npx.roi_align])
def test_bad_arguments(op):
    x = from_numpy(onp.ones((2, 4, 5, 5)))
    rois = from_numpy(onp.array([[0.0, 0, 0, 2, 2]]))
    name = op.__name__
    with pytest.raises(ValueError, match=rf"{name}: rois must have shape \(R, 5\).*got shape "
                                         r"\(1, 4\)"):
        op(x, from_numpy(onp.ones((1, 4))), (2, 2), 1.0)
    with pytest.raises(ValueError, match=rf"{name}: pooled_size must be two positive integers "
                                         r"\(height, width\), got \(0, 2\)"):
        op(x, rois, (0, 2), 1.0)
    with pytest.raises(ValueError, match=r"pooled_size.*got \(3,\)"):
        op(x, rois, 3, 1.0)
    for scale in (-0.5, 0, 1.5):
        with pytest.raises(ValueError, match=rf"{name}: spatial_scale must be in \(0, 1\], "
                                             rf"got {scale:g}"):
            op(x, rois, (2, 2), scale)
    with pytest.raises(ValueError, match=rf"{name}: data must be 4-d .*\(4, 5, 5\)"):
        op(from_numpy(onp.ones((4, 5, 5))), rois, (2, 2), 1.0)
    with pytest.raises(TypeError, match="rois has dtype float32 but data has dtype float64"):
        op(x, from_numpy(onp.ones((1, 5)), dtype="float32"), (2, 2), 1.0)
    assert op(x, rois, (2, 2), 1.0).shape == (1, 4, 2, 2)  # still usable


@pytest.mark.parametrize("op", [npx.roi_pooling, npx.roi_align])
def test_batch_index_out_of_range(device, op):
    x = from_numpy(onp.ones((2, 3, 5, 5)), device=device)
    bad = from_numpy(onp.array([[0.0, 0, 0, 2, 2], [2, 0, 0, 2, 2]]), device=device)
    with pytest.raises(ValueError, match=rf"{op.__name__}: rois row 1 has batch index 2, outside "
                                         r"\[0, 2\) for data of batch size 2"):
        op(x, bad, (2, 2), 1.0).asnumpy()
    if op is npx.roi_pooling:  # roi_align skips a negative index instead
        with pytest.raises(ValueError, match=r"rois row 0 has batch index -1"):
            op(x, from_numpy(onp.array([[-1.0, 0, 0, 2, 2]]), device=device), (2, 2), 1.0).asnumpy()
    good = op(x, from_numpy(onp.array([[1.0, 0, 0, 2, 2]]), device=device), (2, 2), 1.0)
    assert_almost_equal(good, onp.ones((1, 3, 2, 2)), rtol=0, atol=0)  # still usable


def test_roi_align_checks(device):
    x = from_numpy(onp.ones((1, 6, 5, 5)), device=device)
    with pytest.raises(ValueError, match=r"roi_align: with aligned=True, rois row 0 \(x1=3, y1=0, "
                                         r"x2=3, y2=2\) must have x2 > x1 and y2 > y1"):
        npx.roi_align(x, from_numpy(onp.array([[0.0, 3, 0, 3, 2]]), device=device), (2, 2), 1.0,
                      aligned=True).asnumpy()
    with pytest.raises(ValueError, match=r"roi_align: with position_sensitive, the 6 channels of "
                                         r"data must divide by pooled_size \(2, 2\) \(4 bins\)"):
        npx.roi_align(x, from_numpy(onp.array([[0.0, 0, 0, 3, 2]]), device=device), (2, 2), 1.0,
                      position_sensitive=True)


# ---------------------------------------------------------------------------------------------
# GPU against CPU
# ---------------------------------------------------------------------------------------------
@requires_gpu
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("op,kwargs", [(npx.roi_pooling, {})] +
                         [(npx.roi_align, kwargs) for kwargs in ALIGN_CASES])
def test_gpu_matches_cpu(op, kwargs, dtype, deterministic):
    kwargs = dict(kwargs) or {"pooled_size": (3, 2), "spatial_scale": 0.5}
    x = onp.random.permutation(2 * 12 * 9 * 11).reshape(2, 12, 9, 11) / 2000.0  # no ties
    rois = _align_rois(kwargs, 2, 9, 11) if op is npx.roi_align else \
        onp.concatenate([FIXED_ROIS, random_rois(20, 2, 9, 11, 0.5)])
    out_shape = op(from_numpy(x), from_numpy(rois), **kwargs).shape
    head = onp.random.uniform(-1, 1, size=out_shape)
    results = []
    previous = npx.set_deterministic(deterministic)
    try:
        for device in (pymx.cpu(0), pymx.gpu(0)):
            data = from_numpy(x, dtype=dtype, device=device)
            data.attach_grad()
            with autograd.record():
                out = op(data, from_numpy(rois, dtype=dtype, device=device), **kwargs)
            out.backward(from_numpy(head, dtype=dtype, device=device))
            results.append((out.asnumpy(), data.grad.asnumpy()))
    finally:
        npx.set_deterministic(previous)
    tolerance = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    for got, want in zip(results[1], results[0]):
        assert_almost_equal(got.astype(onp.float64), want.astype(onp.float64), rtol=tolerance,
                            atol=tolerance)
