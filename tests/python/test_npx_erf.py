"""npx.erf and npx.erfinv against float64 references (math.erf, and erf(erfinv(x)) = x), in every
float dtype and for integers, their edges (+-1, outside [-1, 1], NaN), gradients against central
differences, empty shapes, and GPU against CPU. erfinv's vector path at sizes around its vector
width, block and thread chunk, special values inside a block, the same bits wherever an array
starts, and the threaded engine against the naive one."""
import math

import numpy as onp
import pytest

import pymx
from pymx import npx
from pymx.ndarray import from_numpy
from pymx.test_utils import assert_almost_equal, check_numeric_gradient, check_op
from conftest import assert_engines_agree, requires_gpu
from test_unary_fast_paths import SPECIAL, assert_within_ulps, kUlps


def erf_reference(x):
    x = onp.asarray(x)
    return onp.vectorize(math.erf, otypes=[x.dtype])(x)


def test_erf_values_and_gradient(device):
    check_op(erf_reference, npx.erf, shapes=[(3, 4), (0,), (2, 0), ()], low=-3, high=3,
             grad=True, device=device)


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_erf_dtypes(device, dtype):
    check_op(erf_reference, npx.erf, shapes=[(5, 6)], dtype=dtype, low=-3, high=3,
             device=device)


def test_erf_of_integers_is_float32(device):
    out = npx.erf(from_numpy(onp.array([-2, 0, 1, 3], dtype="int32"), device=device))
    assert out.dtype == onp.float32
    assert_almost_equal(out, erf_reference(onp.array([-2.0, 0, 1, 3])).astype(onp.float32))


def test_erfinv_inverts_erf_in_float64(device):
    x = onp.concatenate([onp.linspace(-0.999, 0.999, 100),
                         [0.0, 1e-300, -1e-12, 0.9999999, -0.9999999999, 1 - 2.0 ** -52]])
    y = npx.erfinv(from_numpy(x, device=device)).asnumpy()
    # The CPU's Newton steps make erf(y) = x to rounding with the erf that math.erf also calls;
    # the GPU runs CUDA's erfinv, documented within 5 ulp: up to 1.1e-15 of y, and at most as
    # much of x (|d log erf / d log y| <= 1), plus math.erf's own rounding.
    rtol = 4e-16 if device.device_type == "cpu" else 1.5e-15
    assert_almost_equal(erf_reference(y), x, rtol=rtol, atol=1e-300)
    assert y[100] == 0.0
    # Near 1, erf(y) rounds away the digits of y: the gap to 1 is the check, via erfc.
    near_one = onp.array([0.9999999, 1 - 1e-12, 1 - 2.0 ** -52])
    y = npx.erfinv(from_numpy(near_one, device=device)).asnumpy()
    assert_almost_equal(onp.vectorize(math.erfc)(y), 1 - near_one, rtol=1e-13, atol=0)
    assert_almost_equal(npx.erfinv(from_numpy(onp.array([0.5]), device=device)),
                        onp.array([0.47693627620446987338]), rtol=1e-15, atol=0)


def test_erfinv_edges(device):
    x = onp.array([1.0, -1.0, 1.5, -2.0, onp.inf, onp.nan])
    for dtype in ("float64", "float32"):
        y = npx.erfinv(from_numpy(x, dtype=dtype, device=device)).asnumpy()
        assert y[0] == onp.inf and y[1] == -onp.inf, y
        assert onp.isnan(y[2:]).all(), y


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_erfinv_dtypes(device, dtype):
    """Against the float64 op on the same rounded values (checked above), rounded."""
    x = from_numpy(onp.random.uniform(-0.99, 0.99, size=(4, 7)), dtype=dtype, device=device)
    want = npx.erfinv(from_numpy(x.asnumpy().astype(onp.float64))).asnumpy()
    got = npx.erfinv(x)
    assert got.dtype == x.dtype
    assert_almost_equal(got, want.astype(onp.float32),
                        rtol=1e-6 if dtype == "float32" else None,
                        atol=1e-6 if dtype == "float32" else None)


def test_erfinv_gradient_and_empty(device):
    check_numeric_gradient(npx.erfinv, [onp.random.uniform(-0.9, 0.9, size=(3, 4))],
                           device=device)
    assert npx.erfinv(from_numpy(onp.zeros((0, 3)), device=device)).shape == (0, 3)


@requires_gpu
@pytest.mark.parametrize("op", ["erf", "erfinv"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32"])
def test_gpu_matches_cpu(op, dtype):
    values = onp.random.uniform(-0.99, 0.99, size=(3, 50))
    if dtype == "int32":
        values = onp.random.randint(-3, 4, size=(3, 50))
    values[0, :4] = [1, -1, 0, 0.5] if dtype != "int32" else [1, -1, 0, 2]
    cpu = getattr(npx, op)(from_numpy(values, dtype=dtype)).asnumpy()
    gpu = getattr(npx, op)(from_numpy(values, dtype=dtype, device=pymx.gpu(0))).asnumpy()
    assert_almost_equal(gpu, cpu, rtol=1e-13 if dtype == "float64" else None,
                        atol=1e-13 if dtype == "float64" else None, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_erf_within_ulps_over_its_range_and_special_values(dtype):
    """The CPU runs libmvec's erf where glibc has it (Note [Vector math through libmvec])."""
    rng = onp.random.default_rng(5)
    x = onp.concatenate([rng.uniform(-7, 7, 50000), SPECIAL]).astype(dtype)
    got = npx.erf(from_numpy(x)).asnumpy()
    assert_within_ulps(got, erf_reference(x.astype(onp.float64)), onp.dtype(dtype), kUlps, "erf")


def test_erf_same_bits_wherever_the_array_starts():
    """Every element is computed by the same routine wherever the threads' chunks and the
    vector tails fall."""
    x = onp.random.default_rng(6).uniform(-6, 6, 40000).astype("float32")
    whole = npx.erf(from_numpy(x)).asnumpy()
    for offset in (1, 7, 15, 17, 16380):
        assert npx.erf(from_numpy(x[offset:])).asnumpy().tobytes() == whole[offset:].tobytes()


# ---------------------------------------------------------------------------------------------
# erfinv's vector path (Note [Inverse error function on vectors] in erf_inverse.h)
# ---------------------------------------------------------------------------------------------
# Sizes around the vector width, erfinv's block (256) and the threads' chunk (16384).
ERFINV_SIZES = (0, 1, 15, 16, 17, 255, 257, 2 * 16384 + 5)


def erfinv_arguments(n, rng):
    """Central (|x| <= 0.5) and tail arguments interleaved, the tail down to 1 - 1e-15."""
    tail = 1 - 10.0 ** -rng.uniform(0.3, 15, n)
    x = onp.where(rng.random(n) < 0.5, rng.uniform(-0.5, 0.5, n), tail)
    return x * rng.choice([-1, 1], n)


def test_erfinv_inverts_erf_at_every_size():
    """float64: erf(y) = x to rounding in the centre, erfc(|y|) = 1 - |x| near +-1 (where erf(y)
    has lost y's digits), as for the scalar steps."""
    rng = onp.random.default_rng(31)
    for n in ERFINV_SIZES:
        x = erfinv_arguments(n, rng)
        y = npx.erfinv(from_numpy(x)).asnumpy()
        assert y.shape == (n,) and y.dtype == onp.float64
        central = onp.abs(x) <= 0.5
        assert_almost_equal(erf_reference(y[central]), x[central], rtol=4e-16, atol=1e-300)
        assert_almost_equal(onp.vectorize(math.erfc, otypes=[float])(onp.abs(y[~central])),
                            1 - onp.abs(x[~central]), rtol=1e-13, atol=0)
        assert (onp.sign(y) == onp.sign(x)).all()


def test_erfinv_float32_is_the_double_result_rounded():
    """float32 arguments run the same steps in double without the last libm step: their results
    are the float64 op's results rounded to float, at every size."""
    rng = onp.random.default_rng(32)
    for n in ERFINV_SIZES:
        x = erfinv_arguments(n, rng).astype(onp.float32)
        got = npx.erfinv(from_numpy(x)).asnumpy()
        want = npx.erfinv(from_numpy(x.astype(onp.float64))).asnumpy().astype(onp.float32)
        assert got.dtype == onp.float32
        assert got.tobytes() == want.tobytes(), n


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_erfinv_special_values_inside_a_block(dtype):
    """+-0 (sign kept), +-1 (+-inf), outside [-1, 1] and NaN (NaN), subnormals (erfinv(x) =
    sqrt(pi) / 2 x there), the last values below 1, mixed with ordinary ones in one block."""
    last_below_one = float(onp.nextafter(onp.array(1, dtype), onp.array(0, dtype)))
    x = onp.array([0.0, -0.0, 1.0, -1.0, 1.5, -1.5, onp.inf, -onp.inf, onp.nan,
                   1e-40 if dtype == "float32" else 1e-310, -1e-300, 0.3, 0.7,
                   last_below_one, -last_below_one, 0.5, -0.5], dtype=dtype)
    y = npx.erfinv(from_numpy(x)).asnumpy()
    assert y[0] == 0 and not onp.signbit(y[0]) and y[1] == 0 and onp.signbit(y[1])
    assert y[2] == onp.inf and y[3] == -onp.inf
    assert onp.isnan(y[4:9]).all()
    half_sqrt_pi = math.sqrt(math.pi) / 2
    assert_almost_equal(y[9:11], (half_sqrt_pi * x[9:11].astype(onp.float64)).astype(dtype),
                        rtol=onp.finfo(dtype).eps, atol=0)
    exact = x[11:].astype(onp.float64)
    tail = 1 - onp.abs(exact)
    want_tail = onp.vectorize(math.erfc, otypes=[float])(onp.abs(y[11:].astype(onp.float64)))
    # float32: y is rounded to float, so erfc(y) is off by ~2 y^2 ulp(y) relative.
    assert_almost_equal(want_tail, tail, rtol=1e-13 if dtype == "float64" else 2e-5, atol=0)
    assert (onp.sign(y[11:]) == onp.sign(exact)).all()


def test_erfinv_same_bits_wherever_the_array_starts():
    rng = onp.random.default_rng(33)
    x = erfinv_arguments(16384 + 600, rng)
    for dtype in ("float32", "float64"):
        values = x.astype(dtype)
        whole = npx.erfinv(from_numpy(values)).asnumpy()
        for first, last in ((1, 300), (255, 16390), (16385, 16984)):
            part = npx.erfinv(from_numpy(values[first:last])).asnumpy()
            assert part.tobytes() == whole[first:last].tobytes(), (dtype, first, last)


_ERFINV_ENGINE_SCRIPT = r"""
import numpy as onp
from pymx import autograd, npx
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(34)
results = []
for dtype in ("float32", "float64", "bfloat16"):
    x = from_numpy(rng.uniform(-0.999, 0.999, 40005), dtype=dtype)
    x.attach_grad()
    with autograd.record():
        y = npx.erfinv(x)
    y.backward()
    results += [y.asnumpy(), x.grad.asnumpy()]
onp.savez(OUT, *results)
"""


def test_erfinv_threaded_engine_matches_naive(tmp_path):
    assert_engines_agree(_ERFINV_ENGINE_SCRIPT, tmp_path)
