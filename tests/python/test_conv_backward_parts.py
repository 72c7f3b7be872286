"""The weight and bias gradients of npx.convolution and npx.deconvolution when the batch is split
into parts, each with its own weight-gradient buffer, that the backward adds in order (Note
[Adding the parts' weight gradients], nn_convolution.cc): against float64 NumPy references for
batches of 0, 1 and more images than parts, weight matrices whose sides are not multiples of the
reduction's tile (16 x 64), groups, 1-D / 2-D / 3-D and channel-last layouts, every float dtype;
the serial engine as the oracle of the parallel reduction (bitwise); GPU against CPU."""
import itertools

import numpy as onp
import pytest

import pymx
from pymx import autograd, npx
from pymx.ndarray import from_numpy
from pymx.test_utils import assert_almost_equal
from conftest import assert_engines_agree, requires_gpu

RNG = onp.random.default_rng(0)


def windows(in_sp, out_sp, kpos, stride, dilate):
    """The slices of the padded input that kernel position `kpos` reads, one per output."""
    return tuple(slice(kpos[i] * dilate[i], kpos[i] * dilate[i] + stride[i] * (out_sp[i] - 1) + 1,
                       stride[i]) for i in range(len(in_sp)))


def batch_product(a, b):
    """(A, B) matrix of the sums over images and positions of a[n, i, ...] * b[n, j, ...]."""
    axes = [0] + list(range(2, a.ndim))
    return onp.tensordot(a, b, axes=(axes, axes))


def ref_conv_grads(x, w, dy, stride, pad, dilate, groups):
    """(data_grad, weight_grad, bias_grad) of a channel-first convolution in float64, given
    out_grad `dy`: weight_grad[f, c, k] = sum over n and outputs o of dy[n, f, o] * x_pad[n, c,
    o * stride + k * dilate]."""
    nsp = x.ndim - 2
    kernel, out_sp = w.shape[2:], dy.shape[2:]
    cg, fg = x.shape[1] // groups, w.shape[0] // groups
    spatial_pad = [(0, 0), (0, 0)] + [(p, p) for p in pad]
    xp = onp.pad(x, spatial_pad)
    dxp = onp.zeros_like(xp)
    dw = onp.zeros_like(w)
    for kpos in itertools.product(*[range(k) for k in kernel]):
        window = (slice(None), slice(None)) + windows(x.shape[2:], out_sp, kpos, stride, dilate)
        for g in range(groups):
            cs, fs = slice(g * cg, (g + 1) * cg), slice(g * fg, (g + 1) * fg)
            dw[(fs, slice(None)) + kpos] = batch_product(dy[:, fs], xp[window][:, cs])
            dxp[window][:, cs] += onp.einsum("nf...,fc->nc...", dy[:, fs],
                                             w[(fs, slice(None)) + kpos])
    inner = (slice(None), slice(None)) + tuple(slice(p, p + n) for p, n in zip(pad, x.shape[2:]))
    return dxp[inner], dw, dy.sum(axis=(0,) + tuple(range(2, dy.ndim)))


def conv_grads(x, w, dy, dtype, layout=None, device=None, **kwargs):
    """npx.convolution's (data_grad, weight_grad, bias_grad), as NumPy arrays."""
    device = device or pymx.cpu(0)
    xa, wa = from_numpy(x, dtype=dtype, device=device), from_numpy(w, dtype=dtype, device=device)
    ba = from_numpy(onp.zeros(w.shape[0]), dtype=dtype, device=device)
    for a in (xa, wa, ba):
        a.attach_grad()
    if layout:
        kwargs["layout"] = layout
    with autograd.record():
        y = npx.convolution(xa, wa, ba, num_filter=w.shape[0], **kwargs)
    y.backward(from_numpy(dy, dtype=dtype, device=device))
    return xa.grad.asnumpy(), wa.grad.asnumpy(), ba.grad.asnumpy()


def out_shape(x_shape, num_filter, kernel, stride, pad, dilate):
    return (x_shape[0], num_filter) + tuple(
        (x_shape[2 + i] + 2 * pad[i] - dilate[i] * (kernel[i] - 1) - 1) // stride[i] + 1
        for i in range(len(kernel)))


CASES = [
    # x shape, num_filter, kernel, stride, pad, dilate, groups
    # resnet's 7x7 outputs: one block of 8 images side by side (Note [Images side by side]);
    # K = 180 = 11 * 16 + 4 rows and 70 = 64 + 6 filters, so the transposing reduction's last
    # tile is partial both ways.
    ((8, 20, 7, 7), 70, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    # 16 x 16 = 256 outputs: 8 parts of one image, each with its own weight-gradient buffer
    ((8, 20, 31, 32), 70, (3, 3), (2, 2), (1, 1), (1, 1), 1),
    # 15 x 15 outputs: blocks of 4, 4 and 1 images, the weight gradient accumulated over them
    ((9, 3, 15, 15), 5, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((5, 8, 6, 6), 10, (3, 2), (1, 1), (1, 0), (1, 2), 2),  # two groups: each its own block
    ((3, 5, 11), 33, (3,), (1,), (1,), (1,), 1),
    ((4, 3, 4, 5, 5), 5, (2, 2, 2), (1, 2, 1), (1, 0, 1), (1, 1, 1), 1),
    ((3, 1, 5, 5), 1, (1, 1), (1, 1), (0, 0), (1, 1), 1),  # a 1 x 1 weight, pointwise
    ((1, 4, 6, 6), 3, (3, 3), (1, 1), (0, 0), (1, 1), 1),  # one image
    # outputs 16 wide: the direct weight gradient (AVX-512) fills the parts where it runs
    ((4, 3, 10, 18), 19, (3, 3), (1, 1), (1, 1), (1, 1), 1),
]


@pytest.mark.parametrize("case", CASES)
def test_convolution_gradients_over_parts_float64(case):
    shape, f, kernel, stride, pad, dilate, groups = case
    x, w = RNG.standard_normal(shape), RNG.standard_normal((f, shape[1] // groups, *kernel))
    dy = RNG.standard_normal(out_shape(shape, f, kernel, stride, pad, dilate))
    got = conv_grads(x, w, dy, "float64", kernel=kernel, stride=stride, pad=pad, dilate=dilate,
                     num_group=groups)
    for name, value, want in zip(("data", "weight", "bias"), got,
                                 ref_conv_grads(x, w, dy, stride, pad, dilate, groups)):
        assert_almost_equal(value, want, rtol=1e-10, atol=1e-10, names=(name, "reference"))


# Unit roundoff of each dtype; 16-bit floats are computed in float32 and rounded once.
UNITS = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


@pytest.mark.parametrize("dtype", sorted(UNITS))
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[2], CASES[3], CASES[8]])
def test_convolution_weight_gradient_over_parts_in_each_dtype(case, dtype):
    shape, f, kernel, stride, pad, dilate, groups = case
    x, w = RNG.standard_normal(shape), RNG.standard_normal((f, shape[1] // groups, *kernel))
    dy = RNG.standard_normal(out_shape(shape, f, kernel, stride, pad, dilate))
    # The reference takes the inputs as rounded to the dtype.
    rounded = [from_numpy(a, dtype=dtype).asnumpy().astype(onp.float64) for a in (x, w, dy)]
    _, dw, db = conv_grads(x, w, dy, dtype, kernel=kernel, stride=stride, pad=pad,
                           dilate=dilate, num_group=groups)
    _, want_dw, want_db = ref_conv_grads(*rounded, stride, pad, dilate, groups)
    # float32 sums of up to n * prod(out) products: a few units of the largest partial sums.
    terms = shape[0] * onp.prod(dy.shape[2:])
    unit = UNITS[dtype]
    for name, value, want in (("weight", dw, want_dw), ("bias", db, want_db)):
        scale = onp.abs(want).max()
        assert_almost_equal(value.astype(onp.float64), want, rtol=2 * unit,
                            atol=2 * unit * scale + 4 * terms * 2.0 ** -24 * scale,
                            names=(f"{name} grad", "reference"))


def test_convolution_weight_gradient_channel_last():
    """NHWC: the parts' sum lands in the channel-first workspace, then is transposed."""
    x, w = RNG.standard_normal((6, 5, 7, 9)), RNG.standard_normal((21, 3, 3, 9))
    dy = RNG.standard_normal((6, 3, 5, 21))
    dx, dw, db = conv_grads(x, w, dy, "float64", layout="NHWC", kernel=(3, 3))
    want = ref_conv_grads(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2),
                          dy.transpose(0, 3, 1, 2), (1, 1), (0, 0), (1, 1), 1)
    assert_almost_equal(dx, want[0].transpose(0, 2, 3, 1), rtol=1e-10, atol=1e-10)
    assert_almost_equal(dw, want[1].transpose(0, 2, 3, 1), rtol=1e-10, atol=1e-10)
    assert_almost_equal(db, want[2], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layout", [None, "NHWC"])
def test_fused_relu_gradients_over_blocks(layout):
    """act_type='relu': out_grad is masked by the output's sign while it is gathered (NCHW) or
    transposed (NHWC), over blocks of 4, 4 and 1 images."""
    x, w = RNG.standard_normal((9, 3, 15, 15)), RNG.standard_normal((5, 3, 3, 3))
    b, dy = RNG.standard_normal(5), RNG.standard_normal((9, 5, 15, 15))
    to_layout = (lambda a: a.transpose(0, 2, 3, 1)) if layout else (lambda a: a)
    arrays = [from_numpy(a) for a in (to_layout(x), to_layout(w), b)]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        y = npx.convolution(*arrays, kernel=(3, 3), pad=(1, 1), num_filter=5, act_type="relu",
                            **({"layout": layout} if layout else {}))
    y.backward(from_numpy(to_layout(dy)))
    out = y.asnumpy()
    kept = (out.transpose(0, 3, 1, 2) if layout else out) > 0
    want = ref_conv_grads(x, w, dy * kept, (1, 1), (1, 1), (1, 1), 1)
    for name, got, expected in zip(("data", "weight"), arrays, want):
        assert_almost_equal(got.grad, to_layout(expected), rtol=1e-10, atol=1e-10,
                            names=(name, "reference"))
    assert_almost_equal(arrays[2].grad, want[2], rtol=1e-10, atol=1e-10)


def test_convolution_weight_gradient_of_an_empty_batch_is_zero():
    w = RNG.standard_normal((70, 20, 3, 3))
    dx, dw, db = conv_grads(onp.zeros((0, 20, 7, 7)), w, onp.zeros((0, 70, 7, 7)), "float32",
                            kernel=(3, 3), pad=(1, 1))
    assert dx.shape == (0, 20, 7, 7)
    onp.testing.assert_array_equal(dw, onp.zeros(w.shape, onp.float32))
    onp.testing.assert_array_equal(db, onp.zeros(70, onp.float32))


# ---------------------------------------------------------------------------------------------
# Deconvolution: its parts are added in place, element by element
# ---------------------------------------------------------------------------------------------
def ref_deconv_weight_grad(x, dy, kernel, stride, pad, dilate, groups):
    """weight_grad of npx.deconvolution in float64: input element x[n, c, i] adds x * w[c, f, k]
    to output position i * stride - pad + k * dilate, so weight_grad[c, f, k] is the sum over n
    and i of x[n, c, i] * dy at that position (0 outside the output)."""
    nsp = x.ndim - 2
    cg, fg = x.shape[1] // groups, dy.shape[1] // groups
    canvas = [max((x.shape[2 + i] - 1) * stride[i] + dilate[i] * (kernel[i] - 1) + 1,
                  pad[i] + dy.shape[2 + i]) for i in range(nsp)]
    full = onp.zeros(dy.shape[:2] + tuple(canvas))
    full[(slice(None), slice(None)) +
         tuple(slice(p, p + n) for p, n in zip(pad, dy.shape[2:]))] = dy
    dw = onp.zeros((x.shape[1], fg) + tuple(kernel))
    for kpos in itertools.product(*[range(k) for k in kernel]):
        window = (slice(None), slice(None)) + windows(x.shape[2:], x.shape[2:], kpos, stride,
                                                      dilate)
        for g in range(groups):
            cs, fs = slice(g * cg, (g + 1) * cg), slice(g * fg, (g + 1) * fg)
            dw[(cs, slice(None)) + kpos] = batch_product(x[:, cs], full[window][:, fs])
    return dw


@pytest.mark.parametrize("shape,num_filter,kernel,stride,pad,groups", [
    ((9, 6, 4, 5), 7, (3, 3), (2, 2), (1, 1), 1),  # 8 parts of 1 or 2 images
    ((5, 4, 3, 3), 6, (2, 3), (1, 2), (0, 1), 2),
    ((3, 3, 7), 5, (4,), (3,), (2,), 1),
])
def test_deconvolution_weight_gradient_over_parts(shape, num_filter, kernel, stride, pad, groups):
    x = RNG.standard_normal(shape)
    w = RNG.standard_normal((shape[1], num_filter // groups, *kernel))
    xa, wa = from_numpy(x), from_numpy(w)
    for a in (xa, wa):
        a.attach_grad()
    with autograd.record():
        y = npx.deconvolution(xa, wa, kernel=kernel, stride=stride, pad=pad,
                              num_filter=num_filter, num_group=groups, no_bias=True)
    dy = RNG.standard_normal(y.shape)
    y.backward(from_numpy(dy))
    want = ref_deconv_weight_grad(x, dy, kernel, stride, pad, (1,) * len(kernel), groups)
    assert_almost_equal(wa.grad, want, rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------------------------------------
# The serial engine as the parallel reduction's oracle; GPU against CPU
# ---------------------------------------------------------------------------------------------
_ENGINE_SCRIPT = r'''
import numpy as onp
from pymx import autograd, npx
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(5)
results = []
for dtype in ("float32", "float64"):
    # 130 x 288 weight gradients: 8 images side by side (7x7 outputs), then 8 parts of one
    # image (16x16 outputs, stride 2); then deconvolution's 9 images.
    for size, stride in ((7, 1), (32, 2)):
        x = from_numpy(rng.standard_normal((8, 32, size, size)), dtype=dtype)
        w = from_numpy(rng.standard_normal((130, 32, 3, 3)), dtype=dtype)
        b = from_numpy(rng.standard_normal(130), dtype=dtype)
        for a in (x, w, b):
            a.attach_grad()
        with autograd.record():
            y = npx.convolution(x, w, b, kernel=(3, 3), pad=(1, 1), stride=(stride, stride),
                                num_filter=130)
        y.backward(from_numpy(rng.standard_normal(y.shape), dtype=dtype))
        results += [x.grad.asnumpy(), w.grad.asnumpy(), b.grad.asnumpy()]
    x = from_numpy(rng.standard_normal((9, 40, 5, 5)), dtype=dtype)
    w = from_numpy(rng.standard_normal((40, 24, 3, 3)), dtype=dtype)
    for a in (x, w):
        a.attach_grad()
    with autograd.record():
        y = npx.deconvolution(x, w, kernel=(3, 3), stride=(2, 2), num_filter=24, no_bias=True)
    y.backward(from_numpy(rng.standard_normal(y.shape), dtype=dtype))
    results += [x.grad.asnumpy(), w.grad.asnumpy()]
onp.savez(OUT, *results)
'''


def test_threaded_engine_matches_naive(tmp_path):
    """The reduction's tiles run on several threads; the serial engine runs the same chunks and
    every element is summed in part order, so the gradients are bitwise equal."""
    assert_engines_agree(_ENGINE_SCRIPT, tmp_path)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3], CASES[5]])
def test_gpu_matches_cpu(case, dtype):
    shape, f, kernel, stride, pad, dilate, groups = case
    x, w = RNG.standard_normal(shape), RNG.standard_normal((f, shape[1] // groups, *kernel))
    dy = RNG.standard_normal(out_shape(shape, f, kernel, stride, pad, dilate))
    kwargs = dict(kernel=kernel, stride=stride, pad=pad, dilate=dilate, num_group=groups)
    cpu = conv_grads(x, w, dy, dtype, **kwargs)
    gpu = conv_grads(x, w, dy, dtype, device=pymx.gpu(0), **kwargs)
    for got, want in zip(gpu, cpu):
        assert_almost_equal(got, want, rtol=1e-9 if dtype == "float64" else 1e-4,
                            atol=1e-9 if dtype == "float64" else 1e-4)
