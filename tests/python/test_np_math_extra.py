"""pymx.np's bitwise operators, extra elementwise math (angles, modf, frexp, spacing, signbit,
divmod, i0, ...), trapezoid / unwrap / correlate / array_equiv against NumPy (float64
reference unless a dtype is under test), gradients against central differences, and the errors
for bad input. Tolerances: 1e-12 for exact results and float64, 1e-6 relative for float32."""
import warnings

import numpy as onp
import pytest

import pymx
from pymx import autograd, np
from pymx.base import bfloat16
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import requires_gpu
from test_np_manipulation import check, on, rand

INT_DTYPES = ["uint8", "int8", "int32", "int64"]


def ints(shape, dtype, seed=0):
    info = onp.iinfo(dtype)
    generator = onp.random.default_rng(seed)
    return generator.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


# ---- bitwise ---------------------------------------------------------------------------------
BITWISE = [("bitwise_and", "__and__"), ("bitwise_or", "__or__"), ("bitwise_xor", "__xor__")]


@pytest.mark.parametrize("name, dunder", BITWISE)
@pytest.mark.parametrize("dtype", INT_DTYPES + ["bool"])
def test_bitwise_dtypes_and_broadcasting(name, dunder, dtype, device):
    for shape_a, shape_b in [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((0, 3), (3,)),
                             ((), ())]:
        a = ints(shape_a, dtype, 1) if dtype != "bool" else rand(shape_a) > 0
        b = ints(shape_b, dtype, 2) if dtype != "bool" else rand(shape_b) > 0
        want = getattr(onp, name)(a, b)
        check(getattr(np, name)(on(device, a), on(device, b)), want, device, 0, 0)
        check(getattr(on(device, a), dunder)(on(device, b)), want, device, 0, 0)
        assert getattr(np, name)(on(device, a), on(device, b)).dtype == want.dtype


@pytest.mark.parametrize("name, dunder", BITWISE)
def test_bitwise_mixed_dtypes_scalars_and_operators(name, dunder, device):
    fn = getattr(onp, name)
    a, b = ints((4, 5), "int8", 3), ints((5,), "uint8", 4)
    check(getattr(np, name)(on(device, a), on(device, b)), fn(a.astype("int32"), b), device, 0, 0)
    x = ints((3, 4), "int32", 5)
    for scalar in (0, 5, -1, 255):
        check(getattr(np, name)(on(device, x), scalar), fn(x, onp.int32(scalar)), device, 0, 0)
        check(getattr(np, name)(scalar, on(device, x)), fn(onp.int32(scalar), x), device, 0, 0)
    check(getattr(np, name)(on(device, x), [1, 2, 3, 4]), fn(x, [1, 2, 3, 4]), device, 0, 0)
    flags = rand((6,)) > 0
    check(getattr(np, name)(on(device, flags), True), fn(flags, True), device, 0, 0)
    reflected = "__r" + dunder[2:]
    check(getattr(on(device, x), reflected)(7), fn(7, x), device, 0, 0)
    in_place = on(device, x)
    target = in_place
    in_place = getattr(in_place, "__i" + dunder[2:])(on(device, x[0]))
    assert in_place is target
    check(in_place, fn(x, x[0]), device, 0, 0)
    check(getattr(np, name)(6, 3), fn(6, 3), pymx.device.current_device(), 0, 0)


def test_bitwise_operator_spellings(device):
    x, y = on(device, onp.array([12, -7, 0], "int64")), on(device, onp.array([10, 3, -1], "int64"))
    check(x & y, onp.array([8, 1, 0]), device, 0, 0)
    check(x | y, onp.array([14, -5, -1]), device, 0, 0)
    check(x ^ y, onp.array([6, -6, -1]), device, 0, 0)
    check(3 & x, 3 & onp.array([12, -7, 0]), device, 0, 0)
    x |= 1
    check(x, onp.array([13, -7, 1]), device, 0, 0)
    x ^= y
    check(x, onp.array([13 ^ 10, -7 ^ 3, 1 ^ -1]), device, 0, 0)


@pytest.mark.parametrize("name, dunder", BITWISE)
def test_bitwise_refuses_floats(name, dunder, device):
    x = on(device, rand((3,)))
    i = on(device, onp.arange(3))
    with pytest.raises(TypeError, match=rf"{name}.*float64 and int64"):
        getattr(np, name)(x, i)
    with pytest.raises(TypeError, match=rf"{name}.*int64 and float64"):
        getattr(np, name)(i, 2.5)
    with pytest.raises(TypeError, match=name):
        getattr(x, dunder)(x)
    with pytest.raises(TypeError, match="only integer and bool operands"):  # the operator's own
        pymx._op.invoke(name, [x, i])
    check(getattr(np, name)(i, 1), getattr(onp, name)(onp.arange(3), 1), device, 0, 0)


# ---- angles, fabs, predicates ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["deg2rad", "rad2deg", "degrees", "radians", "fabs"])
def test_angle_conversions_and_fabs(name, device):
    for x in (rand((3, 4)) * 400, rand(()), onp.zeros((0, 2))):
        check(getattr(np, name)(on(device, x)), getattr(onp, name)(x), device)
        got = getattr(np, name)(on(device, x, "float32"))
        assert got.dtype == onp.float32
        assert_almost_equal(got, getattr(onp, name)(x.astype("float32")), rtol=1e-6, atol=1e-6)
    got = getattr(np, name)(on(device, onp.array([-90, 180, 45])))
    assert got.dtype == onp.float32  # float-valued functions of integers: float32 (MXNet)
    assert_almost_equal(got, getattr(onp, name)(onp.array([-90, 180, 45])), rtol=1e-6)
    out = np.zeros((2,), dtype="float64", device=device)
    assert getattr(np, name)(on(device, onp.array([1.0, -2.0])), out=out) is out
    assert_almost_equal(out, getattr(onp, name)(onp.array([1.0, -2.0])))
    check_numeric_gradient(getattr(np, name), [rand((2, 3)) + 3], device=device)


SPECIALS = onp.array([0.0, -0.0, 1.5, -1.5, 2.0, -2.0, 0.75, onp.inf, -onp.inf, onp.nan,
                      -onp.nan, 5e-324, -5e-324, 1e308, onp.finfo("float64").max, -3.25])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int64", "uint8",
                                   "bool"])
def test_signbit(dtype, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 1e308 overflows the narrow floats
        x = SPECIALS.astype(dtype) if dtype.startswith("float") else \
            onp.array([0, 1, -1, 100, -100]).astype(dtype)
    got = np.signbit(on(device, x))
    check(got, onp.signbit(x), device, 0, 0)
    check(np.signbit(on(device, x[:0])), onp.signbit(x[:0]), device)
    out = np.zeros(x.shape, dtype="bool", device=device)
    assert np.signbit(on(device, x), out=out) is out


def test_signbit_bfloat16(device):
    x = onp.array([-0.0, 0.0, -2.5, 3.0, onp.inf, -onp.inf], dtype="float32")
    check(np.signbit(np.array(x, dtype=bfloat16, device=device)), onp.signbit(x), device, 0, 0)


def test_isposinf_isneginf(device):
    x = onp.array([[onp.inf, -onp.inf, onp.nan], [0.0, 1e308, -1.0]])
    check(np.isposinf(on(device, x)), onp.isposinf(x), device)
    check(np.isneginf(on(device, x)), onp.isneginf(x), device)
    check(np.isneginf(on(device, onp.arange(3))), onp.isneginf(onp.arange(3)), device)
    out = np.zeros((2, 3), dtype="bool", device=device)
    assert np.isposinf(on(device, x), out=out) is out
    check(out, onp.isposinf(x), device)


# ---- taking floats apart ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_modf_and_frexp(dtype, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = onp.concatenate([SPECIALS, rand(20) * 1e3]).astype(dtype)
    for fn in ("modf", "frexp"):
        got = getattr(np, fn)(on(device, x))
        want = getattr(onp, fn)(x)
        assert isinstance(got, tuple) and len(got) == 2
        for g, w in zip(got, want):
            check(g, w, device, 0, 0)
            assert g.dtype == w.dtype
            # the sign of zero results too (modf(-0.5) = (-0.5, -0.0))
            assert (onp.signbit(g.asnumpy()) == onp.signbit(w)).all()
    got = np.frexp(on(device, onp.array([3, -8, 0], "int32")))
    assert got[0].dtype == onp.float32 and got[1].dtype == onp.int32
    check(got[1], onp.frexp(onp.array([3.0, -8.0, 0.0]))[1], device, 0, 0)
    empty = np.modf(on(device, onp.zeros((0, 3))))
    assert empty[0].shape == empty[1].shape == (0, 3)
    scalar = np.frexp(on(device, onp.float64(12.0)))
    assert scalar[0].shape == () and float(scalar[0]) == 0.75 and int(scalar[1]) == 4


def test_modf_frexp_out_and_errors(device):
    x = on(device, onp.array([2.5, -3.75]))
    fraction, whole = np.zeros((2,), dtype="float64", device=device), \
        np.zeros((2,), dtype="float64", device=device)
    got = np.modf(x, out=(fraction, whole))
    assert got[0] is fraction and got[1] is whole
    check(whole, onp.array([2.0, -3.0]), device)
    with pytest.raises(TypeError, match="modf: out must be a tuple of 2 arrays"):
        np.modf(x, out=fraction)
    with pytest.raises(TypeError, match="frexp: out must be a tuple of 2 arrays"):
        np.frexp(x, out=(fraction,))


def test_modf_frexp_gradients(device):
    # away from the integers and powers of two, where the parts jump
    x = onp.array([[0.3, -1.7, 2.45], [5.6, -6.2, 0.05]])
    check_numeric_gradient(lambda v: np.modf(v)[0] * 2 + np.modf(v)[1], [x], device=device)
    check_numeric_gradient(lambda v: np.frexp(v)[0], [x], device=device)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_spacing(dtype, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = onp.finfo(dtype)
        x = onp.array([0.0, -0.0, 1.0, -1.0, 2.0, 0.75, -0.75, 1e-30, -3e5, info.max, -info.max,
                       info.smallest_subnormal, -info.smallest_subnormal, info.tiny, onp.inf,
                       -onp.inf, onp.nan], dtype=dtype)
        want = onp.spacing(x)
    check(np.spacing(on(device, x)), want, device, 0, 0)
    assert np.spacing(on(device, onp.array([1, 2]))).dtype == onp.float32


def test_spacing_16_bit_floats(device):
    # The steps of float16's and bfloat16's own formats, away from zero as for every dtype.
    x = onp.array([1.0, 2.0, 0.0, 65504.0, 6.1035156e-05, 3.0e-06, -1.0], dtype="float16")
    want = onp.array([2.0 ** -10, 2.0 ** -9, 2.0 ** -24, onp.inf, 2.0 ** -24, 2.0 ** -24,
                      -(2.0 ** -10)])
    got = np.spacing(on(device, x))
    assert got.dtype == onp.float16
    check(got.astype("float64"), want, device, 0, 0)
    b = np.array(onp.array([1.0, 3.0, 0.0, -256.0]), dtype=bfloat16, device=device)
    got = np.spacing(b)
    assert got.dtype == bfloat16
    check(got.astype("float64"), onp.array([2.0 ** -7, 2.0 ** -6, 2.0 ** -133, -2.0]), device,
          0, 0)


def test_spacing_gradient_is_zero(device):
    x = on(device, rand((3,)))
    x.attach_grad()
    with autograd.record():
        y = np.spacing(x)
    y.backward()
    check(x.grad, onp.zeros(3), device)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_i0(dtype, device):
    x = onp.concatenate([onp.linspace(-30, 30, 61), [0.0, 7.99, 8.0, 8.01, onp.inf, -onp.inf,
                                                      onp.nan]]).astype(dtype)
    rtol = 1e-14 if dtype == "float64" else 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's i0(inf) is inf / inf
        want = onp.i0(x.astype("float64"))
    assert_almost_equal(np.i0(on(device, x)), want, rtol=rtol, atol=0, equal_nan=True)
    assert np.i0(on(device, x)).dtype == dtype
    got = np.i0(on(device, onp.array([[1, 2], [3, 4]])))
    assert got.dtype == onp.float32 and got.shape == (2, 2)
    assert np.i0(on(device, onp.zeros((0,)))).shape == (0,)
    check(np.i0(on(device, onp.float64(1.0))), onp.i0(1.0), device, 1e-14)
    check_numeric_gradient(np.i0, [rand((2, 4)) * 6], device=device, rtol=1e-6)
    check_numeric_gradient(np.i0, [onp.array([9.0, -12.0, 0.0])], device=device, rtol=1e-6)


def test_divmod_and_real(device):
    a, b = rand((3, 4)) * 10, rand((4,)) * 3 + 4
    q, r = np.divmod(on(device, a), on(device, b))
    check(q, onp.floor_divide(a, b), device)
    check(r, onp.mod(a, b), device)
    for x, y in ((onp.array([7, -7, 6]), 3), (5, onp.array([2, -3]))):
        q, r = np.divmod(x if onp.ndim(x) == 0 else on(device, x),
                         y if onp.ndim(y) == 0 else on(device, y))
        wq, wr = onp.divmod(x, y)
        check(q, wq, device, 0, 0)
        check(r, wr, device, 0, 0)
    out = (np.zeros((3, 4), dtype="float64", device=device),
           np.zeros((3, 4), dtype="float64", device=device))
    got = np.divmod(on(device, a), on(device, b), out=out)
    assert got[0] is out[0] and got[1] is out[1]
    x = on(device, a)
    assert np.real(x) is x
    check(np.real([1.5, 2.0]), onp.real([1.5, 2.0]), pymx.device.current_device())
    numerator, denominator = onp.array([[7.3, -2.2, 0.4]]), onp.array([2.5, 1.5, -3.0])
    check_numeric_gradient(lambda u, v: np.divmod(u, v)[1], [numerator, denominator],
                           device=device)


def test_round_product_alltrue_sometrue(device):
    x = rand((3, 4)) * 10
    check(np.round_(on(device, x), 1), onp.round(x, 1), device)
    check(np.product(on(device, x), axis=1), onp.prod(x, axis=1), device)
    flags = x > 0
    check(np.alltrue(on(device, flags), axis=0), onp.all(flags, axis=0), device)
    check(np.sometrue(on(device, flags), axis=1, keepdims=True),
          onp.any(flags, axis=1, keepdims=True), device)


# ---- trapezoid, unwrap, correlate, array_equiv -----------------------------------------------
def test_trapezoid(device):
    y = rand((3, 5))
    for axis in (0, 1, -1):
        check(np.trapezoid(on(device, y), axis=axis), onp.trapezoid(y, axis=axis), device)
        check(np.trapz(on(device, y), dx=0.5, axis=axis), onp.trapezoid(y, dx=0.5, axis=axis),
              device)
    x = onp.sort(rand((5,)))
    check(np.trapezoid(on(device, y), x=on(device, x)), onp.trapezoid(y, x=x), device)
    xs = onp.sort(rand((3, 5)), axis=0)
    check(np.trapezoid(on(device, y), x=on(device, xs), axis=0), onp.trapezoid(y, x=xs, axis=0),
          device)
    check(np.trapezoid(on(device, onp.zeros((2, 0)))), onp.trapezoid(onp.zeros((2, 0))), device)
    got = np.trapezoid(on(device, onp.array([1, 2, 4])))
    assert got.dtype == onp.float32 and float(got) == 4.5
    check_numeric_gradient(lambda v, u: np.trapezoid(v, x=u), [y, x], device=device)
    with pytest.raises(ValueError, match="x has 4 sample points, y has 5"):
        np.trapezoid(on(device, y), x=on(device, x[:4]))
    with pytest.raises(onp.exceptions.AxisError, match="axis 2 is out of bounds"):
        np.trapezoid(on(device, y), axis=2)


def test_unwrap(device):
    phase = onp.cumsum(rand((4, 9)) * 3, axis=1)
    wrapped = onp.angle(onp.exp(1j * phase))
    for axis in (0, 1, -1):
        check(np.unwrap(on(device, wrapped), axis=axis), onp.unwrap(wrapped, axis=axis), device)
    check(np.unwrap(on(device, wrapped), discont=4.0), onp.unwrap(wrapped, discont=4.0), device)
    steps = onp.array([0.0, 3.5, 7.0, 2.0, 9.0, 11.0])
    check(np.unwrap(on(device, steps), period=6), onp.unwrap(steps, period=6), device)
    ties = onp.array([0.0, onp.pi, 0.0, -onp.pi, 0.0])  # steps of exactly half a period
    check(np.unwrap(on(device, ties)), onp.unwrap(ties), device)
    check(np.unwrap(on(device, onp.zeros((0,)))), onp.unwrap(onp.zeros((0,))), device)
    # steps well away from +-pi, where unwrap jumps (a finite difference across it would not be
    # a derivative)
    jumps = onp.array([[0.0, 2.0, 5.0, 1.0, -2.5], [1.0, -2.5, 0.5, 4.5, 0.2]])
    check_numeric_gradient(np.unwrap, [jumps], device=device)
    check_numeric_gradient(lambda v: np.unwrap(v, axis=0), [jumps], device=device)
    with pytest.raises(ValueError, match="0-d"):
        np.unwrap(on(device, onp.float64(1.0)))


@pytest.mark.parametrize("mode", ["valid", "same", "full"])
def test_correlate(mode, device):
    for n_a, n_v in [(7, 3), (6, 2), (5, 5), (3, 6), (1, 1), (4, 1)]:
        a, v = rand((n_a,)), rand((n_v,))
        check(np.correlate(on(device, a), on(device, v), mode), onp.correlate(a, v, mode),
              device)
    ai, vi = onp.array([1, 2, 3, 4]), onp.array([1, 2])
    check(np.correlate(on(device, ai), on(device, vi), mode), onp.correlate(ai, vi, mode),
          device, 0, 0)
    check_numeric_gradient(lambda x, y: np.correlate(x, y, mode), [rand((5,)), rand((3,))],
                           device=device)


def test_correlate_errors(device):
    a = on(device, rand((4,)))
    with pytest.raises(ValueError, match="mode must be one of"):
        np.correlate(a, a, "middle")
    with pytest.raises(ValueError, match="v cannot be empty"):
        np.correlate(a, on(device, onp.zeros((0,))))
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        np.correlate(on(device, rand((2, 2))), a)


def test_array_equiv(device):
    a = onp.array([1.0, 2.0])
    for b in ([[1.0, 2.0], [1.0, 2.0]], [[1.0, 2.0], [1.0, 3.0]], [1.0, 2.0, 3.0], [1.0], 1.0,
              onp.zeros((0, 2))):
        assert np.array_equiv(on(device, a), on(device, onp.asarray(b))) == \
            onp.array_equiv(a, b), b
    assert np.array_equiv(on(device, onp.array([3.0, 3.0])), 3.0) is True


# ---- GPU against CPU ---------------------------------------------------------------------------
@requires_gpu
def test_gpu_matches_cpu():
    gpu, cpu = pymx.device.gpu(0), pymx.device.cpu(0)
    x = onp.concatenate([SPECIALS, rand(50) * 30])
    for dtype in ("float16", "float32", "float64"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = x.astype(dtype)
        for fn in (np.signbit, np.spacing, np.i0, np.fabs, np.deg2rad, np.isposinf):
            assert_almost_equal(fn(on(gpu, values)), fn(on(cpu, values)), rtol=1e-6, atol=0,
                                equal_nan=True)
        for fn in (np.modf, np.frexp):
            for g, c in zip(fn(on(gpu, values)), fn(on(cpu, values))):
                assert_almost_equal(g, c, rtol=0, atol=0, equal_nan=True)
    b = np.array(x, dtype=bfloat16, device=gpu)
    assert_almost_equal(np.spacing(b).astype("float32"),
                        np.spacing(b.to_device(cpu)).astype("float32"), rtol=0, atol=0,
                        equal_nan=True)
    for dtype in INT_DTYPES + ["bool"]:
        a = ints((5, 6), dtype, 1) if dtype != "bool" else rand((5, 6)) > 0
        c = ints((6,), dtype, 2) if dtype != "bool" else rand((6,)) > 0
        for name, _ in BITWISE:
            fn = getattr(np, name)
            assert_almost_equal(fn(on(gpu, a), on(gpu, c)), fn(on(cpu, a), on(cpu, c)), 0, 0)
            assert_almost_equal(fn(on(gpu, a), 3), fn(on(cpu, a), 3), 0, 0)
