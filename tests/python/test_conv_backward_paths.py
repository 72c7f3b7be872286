"""The data gradient of npx.convolution through the direct kernel that takes the input columns by
stride phase (Note [Direct data gradient by phases], conv_direct_data_grad.cc; float32 with
AVX-512 and at least 32 input channels: stride 2 and narrow stride-1 layers), with the weight
gradient on its own path beside it (side by side, per part or direct), and the direct weight
gradient of stride-2 layers with outputs at least 16 wide and few taps (Note [Strided direct
weight gradient]): against float64 NumPy references and finite differences for stride 2 with odd
and even sizes, phases 7 to 28 columns wide (one tile, overlapping tiles, two tiles), padding
0 / 1 / 3, 2x2, 2x3, 3x3 and 7x7 kernels, channel counts that are not multiples of the kernel's
32 / 64-channel blocks, the layers left to GEMM + col2im (1x1, 3 channels, phases under 7),
batches of 0, 1 and several images, fused relu, every float dtype; hybridized equal to
imperative, the serial engine bitwise equal to the threaded one, GPU against CPU."""
import numpy as onp
import pytest

import pymx
from pymx import autograd, gluon, npx
from pymx.ndarray import from_numpy
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import assert_engines_agree, requires_gpu
from test_conv_backward_parts import conv_grads, out_shape, ref_conv_grads

RNG = onp.random.default_rng(7)

CASES = [
    # x shape, num_filter, kernel, stride, pad
    # resnet's 3x3/2 layers shrunk: phases of 7 (one tile of 64 channels) and 14 (one tile of 32
    # channels), one block exactly and one block and a channel
    ((2, 32, 14, 14), 9, (3, 3), (2, 2), (1, 1)),
    ((3, 33, 28, 28), 10, (3, 3), (2, 2), (1, 1)),
    # odd sizes: phases of 8 and 7, 15 and 14 columns (overlapping tiles), odd rows
    ((2, 35, 15, 17), 4, (3, 3), (2, 2), (1, 1)),
    ((1, 70, 13, 29), 6, (3, 3), (2, 2), (1, 1)),
    # two tiles per phase, no padding
    ((2, 33, 9, 56), 3, (3, 3), (2, 2), (0, 0)),
    # the stem's 7x7/2 with padding 3: up to 16 taps per pixel, 3 zero columns each side
    ((1, 32, 16, 17), 8, (7, 7), (2, 2), (3, 3)),
    # stride 2 across only, 1 down; and 2 down, 1 across
    ((2, 34, 10, 15), 6, (3, 3), (1, 2), (1, 1)),
    ((2, 34, 11, 9), 6, (3, 3), (2, 1), (1, 1)),
    # stride 1, rows 7 to 15 wide (too narrow for Note [Data gradient as a direct convolution])
    ((2, 36, 7, 7), 11, (3, 3), (1, 1), (1, 1)),
    ((1, 40, 14, 14), 3, (3, 3), (1, 1), (1, 1)),
    ((3, 32, 9, 12), 5, (2, 3), (1, 1), (0, 1)),
    # padding larger than the kernel minus one: outputs wider than the input
    ((1, 37, 8, 8), 4, (3, 3), (1, 1), (3, 3)),
    ((2, 33, 15, 15), 4, (3, 3), (2, 2), (3, 3)),
    # outputs at least 16 wide and at most 256 taps: the weight gradient is direct too (Note
    # [Strided direct weight gradient]), with odd and even padded widths, an even kernel, the
    # stem's 7x7/2 on 3 channels, stride 2 down only
    ((2, 5, 9, 33), 7, (3, 3), (2, 2), (1, 1)),
    ((3, 28, 8, 34), 6, (3, 3), (2, 2), (1, 1)),
    ((1, 4, 6, 32), 5, (2, 2), (2, 2), (0, 0)),
    ((2, 3, 20, 41), 8, (7, 7), (2, 2), (3, 3)),
    ((2, 6, 9, 18), 4, (3, 3), (2, 1), (1, 1)),
    # left to GEMM + col2im beside the same weight-gradient paths: resnet's 1x1/2 downsample,
    # the 3-channel stem, phases 6 wide
    ((2, 40, 14, 14), 7, (1, 1), (2, 2), (0, 0)),
    ((1, 3, 16, 17), 8, (7, 7), (2, 2), (3, 3)),
    ((2, 32, 13, 13), 5, (3, 3), (2, 2), (1, 1)),
]

CASE_IDS = ["x{}-f{}-k{}-s{}-p{}".format("x".join(map(str, c[0])), c[1], *(
    "".join(map(str, t)) for t in c[2:])) for c in CASES]


def random_case(shape, num_filter, kernel, stride, pad):
    x = RNG.standard_normal(shape)
    w = RNG.standard_normal((num_filter, shape[1]) + kernel)
    dy = RNG.standard_normal(out_shape(shape, num_filter, kernel, stride, pad, (1, 1)))
    return x, w, dy


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients_against_float64_reference(case, dtype):
    shape, num_filter, kernel, stride, pad = case
    x, w, dy = random_case(*case)
    got = conv_grads(x, w, dy, dtype, kernel=kernel, stride=stride, pad=pad)
    want = ref_conv_grads(x, w, dy, stride, pad, (1, 1), 1)
    tol = 1e-4 if dtype == "float32" else 1e-10
    for name, g, r in zip(("data", "weight", "bias"), got, want):
        assert_almost_equal(g, r, rtol=tol, atol=tol, names=(name, "reference"))


@pytest.mark.parametrize("case", [c for c in CASES if c[3][1] == 2 and c[2] != (1, 1)],
                         ids=lambda c: "x{}-k{}-s{}".format("x".join(map(str, c[0])),
                                                          *("".join(map(str, t)) for t in c[2:4])))
def test_weight_gradient_alone(case):
    """Without a data gradient (a first layer in training) the strided layers with outputs at
    least 16 wide and up to 256 taps take the direct weight gradient (Note [Strided direct weight
    gradient])."""
    shape, num_filter, kernel, stride, pad = case
    x, w, dy = random_case(*case)
    wa = from_numpy(w, dtype="float32")
    wa.attach_grad()
    with autograd.record():
        y = npx.convolution(from_numpy(x, dtype="float32"), wa, kernel=kernel, stride=stride,
                            pad=pad, num_filter=num_filter, no_bias=True)
    y.backward(from_numpy(dy, dtype="float32"))
    want = ref_conv_grads(x, w, dy, stride, pad, (1, 1), 1)[1]
    assert_almost_equal(wa.grad, want, rtol=1e-4, atol=1e-4, names=("weight", "reference"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sixteen_bit_gradients_through_float(dtype):
    """16-bit inputs are widened to float32 and take the same kernels."""
    case = CASES[2]
    x, w, dy = random_case(*case)
    # Round the inputs to the dtype first, so that the reference sees the values the op sees.
    x, w, dy = (from_numpy(a, dtype=dtype).astype("float64").asnumpy() for a in (x, w, dy))
    got = conv_grads(x, w, dy, dtype, kernel=case[2], stride=case[3], pad=case[4])
    want = ref_conv_grads(x, w, dy, case[3], case[4], (1, 1), 1)
    tol = 2e-2 if dtype == "bfloat16" else 5e-3
    for name, g, r in zip(("data", "weight", "bias"), got, want):
        scale = onp.abs(r).max()
        assert_almost_equal(g / scale, r / scale, rtol=tol, atol=tol, names=(name, "reference"))


@pytest.mark.parametrize("batch", [0, 1, 4])
def test_batch_sizes(batch):
    """An empty batch has empty data and zero weight gradients; one image and several."""
    case = ((batch, 37, 14, 15), 6, (3, 3), (2, 2), (1, 1))
    x, w, dy = random_case(*case)
    got = conv_grads(x, w, dy, "float32", kernel=(3, 3), stride=(2, 2), pad=(1, 1))
    want = ref_conv_grads(x, w, dy, (2, 2), (1, 1), (1, 1), 1)
    assert got[0].shape == x.shape
    for name, g, r in zip(("data", "weight", "bias"), got, want):
        assert_almost_equal(g, r, rtol=1e-4, atol=1e-4, names=(name, "reference"))


@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
def test_fused_relu_masks_out_grad(stride):
    """act_type='relu': the kernel masks out_grad by the output's sign while padding it."""
    x, w = RNG.standard_normal((3, 34, 14, 15)), RNG.standard_normal((9, 34, 3, 3))
    b = RNG.standard_normal(9)
    arrays = [from_numpy(a, dtype="float32") for a in (x, w, b)]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        y = npx.convolution(*arrays, kernel=(3, 3), stride=stride, pad=(1, 1), num_filter=9,
                            act_type="relu")
    dy = RNG.standard_normal(y.shape)
    y.backward(from_numpy(dy, dtype="float32"))
    kept = y.asnumpy() > 0
    assert 0 < kept.mean() < 1
    want = ref_conv_grads(x, w, dy * kept, stride, (1, 1), (1, 1), 1)
    for name, got, expected in zip(("data", "weight", "bias"), arrays, want):
        assert_almost_equal(got.grad, expected, rtol=1e-4, atol=1e-4, names=(name, "reference"))


def test_data_gradient_against_finite_differences():
    x = from_numpy(RNG.standard_normal((2, 3, 15, 14)), dtype="float64")
    w = from_numpy(RNG.standard_normal((4, 3, 3, 3)), dtype="float64")
    check_numeric_gradient(
        lambda a, b: npx.convolution(a, b, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                     num_filter=4, no_bias=True), [x, w])


def test_float32_data_gradient_against_finite_differences():
    """The float32 kernel's data gradient against float64 finite differences of the same
    convolution: the sum of out_grad * y changes by dx . dx_step."""
    x, w = RNG.standard_normal((1, 32, 14, 15)), RNG.standard_normal((6, 32, 3, 3))
    kwargs = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=6, no_bias=True)
    dy = RNG.standard_normal(out_shape(x.shape, 6, (3, 3), (2, 2), (1, 1), (1, 1)))

    def loss(xv):
        y = npx.convolution(from_numpy(xv, dtype="float64"), from_numpy(w, dtype="float64"),
                            **kwargs)
        return float((y.asnumpy() * dy).sum())

    xa = from_numpy(x, dtype="float32")
    xa.attach_grad()
    with autograd.record():
        y = npx.convolution(xa, from_numpy(w, dtype="float32"), **kwargs)
    y.backward(from_numpy(dy, dtype="float32"))
    dx = xa.grad.asnumpy().astype(onp.float64)
    eps = 1e-6
    for index in [(0, 0, 0, 0), (0, 31, 13, 14), (0, 2, 7, 8), (0, 17, 6, 1), (0, 1, 1, 13)]:
        step = onp.zeros_like(x)
        step[index] = eps
        numeric = (loss(x + step) - loss(x - step)) / (2 * eps)
        assert_almost_equal(dx[index], numeric, rtol=1e-4, atol=1e-4, names=(str(index), "fd"))


def test_hybridized_equals_imperative():
    x = from_numpy(RNG.standard_normal((2, 33, 14, 14)), dtype="float32")
    results = []
    for hybridize in (False, True):
        net = gluon.nn.Conv2D(16, kernel_size=3, strides=2, padding=1, in_channels=33)
        net.initialize(pymx.init.Constant(0.05))
        if hybridize:
            net.hybridize()
        xa = x.copy()
        xa.attach_grad()
        with autograd.record():
            y = net(xa)
        y.backward(from_numpy(onp.linspace(-1, 1, y.size).reshape(y.shape), dtype="float32"))
        results.append((xa.grad.asnumpy(), net.weight.grad().asnumpy()))
    for imperative, hybrid in zip(*results):
        assert_almost_equal(hybrid, imperative, rtol=0, atol=0)


_ENGINE_SCRIPT = r'''
import numpy as onp
from pymx import autograd, npx
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(3)
results = []
for shape, f, kernel, stride, pad in [((5, 70, 14, 15), 9, (3, 3), (2, 2), (1, 1)),
                                      ((3, 33, 7, 7), 40, (3, 3), (1, 1), (1, 1)),
                                      ((2, 40, 28, 27), 7, (3, 3), (2, 2), (1, 1))]:
    x = from_numpy(rng.standard_normal(shape), dtype="float32")
    w = from_numpy(rng.standard_normal((f, shape[1]) + kernel), dtype="float32")
    for a in (x, w):
        a.attach_grad()
    with autograd.record():
        y = npx.convolution(x, w, kernel=kernel, stride=stride, pad=pad, num_filter=f,
                            no_bias=True)
    y.backward(from_numpy(rng.standard_normal(y.shape), dtype="float32"))
    results += [x.grad.asnumpy(), w.grad.asnumpy()]
onp.savez(OUT, *results)
'''


def test_threaded_engine_matches_naive(tmp_path):
    """Every data-gradient element is one task's sum in a fixed order: bitwise equal."""
    assert_engines_agree(_ENGINE_SCRIPT, tmp_path)


@requires_gpu
@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[5], CASES[8], CASES[12]])
def test_gpu_matches_cpu(case):
    x, w, dy = random_case(*case)
    kwargs = dict(kernel=case[2], stride=case[3], pad=case[4])
    cpu = conv_grads(x, w, dy, "float32", **kwargs)
    gpu = conv_grads(x, w, dy, "float32", device=pymx.gpu(0), **kwargs)
    for name, got, want in zip(("data", "weight", "bias"), gpu, cpu):
        assert_almost_equal(got, want, rtol=1e-4, atol=1e-4, names=(name, "cpu"))
