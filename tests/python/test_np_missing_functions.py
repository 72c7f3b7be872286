"""pymx.np's nanvar / nanstd, gradient, sinc, fmod, logaddexp / logaddexp2, nextafter, the
shifts, the complex-number functions on real arrays (conj, real, imag, angle) and the refusal of
integers to negative integer powers, against NumPy (float64 reference unless a dtype is under
test), gradients against central differences, and the errors for bad input. Tolerances: 1e-12
for exact results and float64, 1e-6 relative for float32, 0 for bit-exact ones (fmod,
nextafter, shifts)."""
import warnings

import numpy as onp
import pytest

import pymx
from pymx import np
from pymx.base import bfloat16
from pymx.test_utils import check_numeric_gradient
from conftest import requires_gpu
from test_np_manipulation import check, on, rand

INT_DTYPES = ["uint8", "int8", "int32", "int64"]
EDGES = onp.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, onp.inf, -onp.inf, onp.nan, 1e-30, -7.0])


def with_nans(shape, fraction=0.3):
    values = rand(shape)
    values[onp.random.uniform(size=shape) < fraction] = onp.nan
    return values


# ---- nanvar / nanstd -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["nanvar", "nanstd"])
def test_nanvar_nanstd_match_numpy(name, device):
    x = with_nans((4, 5, 3))
    x[1, :, 2] = onp.nan  # an all-NaN slice along axis 1
    fn, want_fn = getattr(np, name), getattr(onp, name)
    with onp.errstate(all="ignore"):
        for axis in (None, 0, 1, -1, (0, 2)):
            for ddof in (0, 1):
                for keepdims in (False, True):
                    want = _quiet(want_fn, x, axis=axis, ddof=ddof, keepdims=keepdims)
                    check(fn(on(device, x), axis=axis, ddof=ddof, keepdims=keepdims), want,
                          device)
        # float32 data, integers (float32 result), ddof past the count, empty, 0-d
        x32 = x.astype(onp.float32)
        got = fn(on(device, x32), axis=0)
        assert got.dtype == onp.float32
        check(got, _quiet(want_fn, x32.astype(onp.float64), axis=0), device, 1e-6, 1e-6)
        ints = onp.arange(12).reshape(3, 4)
        got = fn(on(device, ints), axis=1)
        assert got.dtype == onp.float32
        check(got, want_fn(ints, axis=1), device, 1e-6, 1e-6)
        check(fn(on(device, onp.array([1.0, onp.nan, 3.0])), ddof=2),
              _quiet(want_fn, onp.array([1.0, onp.nan, 3.0]), ddof=2), device)
        check(fn(on(device, onp.zeros((0, 3))), axis=0), _quiet(want_fn, onp.zeros((0, 3)),
                                                                  axis=0), device)
        check(fn(on(device, onp.array(2.0))), want_fn(onp.array(2.0)), device)
        check(fn(on(device, x), axis=1, dtype="float32"),
              _quiet(want_fn, x, axis=1), device, 1e-5, 1e-6)
    out = np.zeros((4, 3), dtype="float64", device=device)
    assert fn(on(device, x), axis=1, out=out) is out
    check(out, _quiet(want_fn, x, axis=1), device)


def _quiet(fn, *args, **kwargs):
    """NumPy's result without its RuntimeWarnings (degrees of freedom, invalid values)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def test_nanvar_nanstd_gradients():
    x = rand((3, 4))
    x[0, 1] = x[2, 3] = onp.nan
    for fn in (np.nanvar, np.nanstd):
        # Autograd's gradient is zero at the NaNs; the differences are NaN there, so compare
        # on the finite entries through a function of the finite values only.
        finite = ~onp.isnan(x)

        def on_finite(v, fn=fn):
            full = np.where(np.array(finite, device=v.device), v,
                            np.array(onp.full(x.shape, onp.nan), device=v.device))
            return fn(full, axis=1, ddof=1)
        check_numeric_gradient(on_finite, [onp.where(finite, x, 0.5)])


# ---- gradient --------------------------------------------------------------------------------
def test_gradient_matches_numpy(device):
    f = rand((5, 6, 4))
    for edge_order in (1, 2):
        for axis in (None, 0, -1, (0, 2)):
            want = onp.gradient(f, axis=axis, edge_order=edge_order)
            got = np.gradient(on(device, f), axis=axis, edge_order=edge_order)
            if isinstance(want, tuple):
                assert isinstance(got, tuple) and len(got) == len(want)
                for g, w in zip(got, want):
                    check(g, w, device)
            else:
                check(got, want, device)
        # spacing: one scalar, one per axis (scalars and coordinate arrays mixed)
        check_all(np.gradient(on(device, f), 0.5, edge_order=edge_order),
                  onp.gradient(f, 0.5, edge_order=edge_order), device)
        xs = onp.cumsum(onp.random.uniform(0.2, 1.0, 5))
        zs = onp.cumsum(onp.random.uniform(0.2, 1.0, 4))
        check_all(np.gradient(on(device, f), on(device, xs), 2.0, zs, edge_order=edge_order),
                  onp.gradient(f, xs, 2.0, zs, edge_order=edge_order), device, 1e-10, 1e-10)
        check_all(np.gradient(on(device, f), zs, axis=2, edge_order=edge_order),
                  onp.gradient(f, zs, axis=2, edge_order=edge_order), device, 1e-10, 1e-10)
    # the smallest lengths: 2 points for edge_order 1, 3 for edge_order 2
    check(np.gradient(on(device, onp.array([1.0, 3.0]))), onp.gradient(onp.array([1.0, 3.0])),
          device)
    check(np.gradient(on(device, onp.array([1.0, 2.0, 4.0])), edge_order=2),
          onp.gradient(onp.array([1.0, 2.0, 4.0]), edge_order=2), device)
    assert np.gradient(on(device, onp.array(3.0))) == ()  # 0-d: no axes


def check_all(got, want, device, rtol=1e-12, atol=1e-12):
    want = want if isinstance(want, (tuple, list)) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w, device, rtol, atol)


def test_gradient_dtypes_and_nonfinite(device):
    ints = onp.array([[1, 4, 9, 16], [2, 3, 5, 9]])
    got = np.gradient(on(device, ints), axis=1)
    assert got.dtype == onp.float32
    check(got, onp.gradient(ints, axis=1), device, 1e-6, 1e-6)
    f32 = rand((6,)).astype(onp.float32)
    got = np.gradient(on(device, f32), onp.cumsum(onp.random.uniform(0.5, 1, 6)))
    assert got.dtype == onp.float32
    values = onp.array([0.0, onp.inf, 1.0, onp.nan, 2.0, -onp.inf])
    check(np.gradient(on(device, values)), _quiet(onp.gradient, values), device)


def test_gradient_errors(device):
    f = on(device, rand((4, 3)))
    with pytest.raises(ValueError, match=r"at least \(edge_order \+ 1\).*axis 0 has 2"):
        np.gradient(on(device, rand((2, 3))), axis=0, edge_order=2)
    with pytest.raises(ValueError, match="must be 1 or 2"):
        np.gradient(f, edge_order=3)
    with pytest.raises(TypeError, match="3 spacings for 2 axes"):
        np.gradient(f, 1.0, 2.0, 3.0)
    with pytest.raises(ValueError, match="5 coordinates for axis 0 of length 4"):
        np.gradient(f, onp.arange(5.0), 1.0)
    with pytest.raises(ValueError, match="scalars or 1d"):
        np.gradient(f, onp.ones((4, 1)), 1.0)
    with pytest.raises(onp.exceptions.AxisError):
        np.gradient(f, axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        np.gradient(f, axis=(0, -2))


def test_gradient_autograd():
    xs = onp.cumsum(onp.random.uniform(0.3, 1.0, 5))
    for edge_order in (1, 2):
        check_numeric_gradient(lambda v: np.gradient(v, xs, edge_order=edge_order), [rand((5,))])
        check_numeric_gradient(lambda v: np.gradient(v, 0.7, axis=0, edge_order=edge_order),
                               [rand((4, 3))])


# ---- sinc ------------------------------------------------------------------------------------
def test_sinc(device):
    x = onp.concatenate([rand((20,), -4, 4), [0.0, -0.0, 1.0, -2.0, 0.5, onp.inf, onp.nan,
                                              1e-12]])
    check(np.sinc(on(device, x)), _quiet(onp.sinc, x), device)
    got = np.sinc(on(device, x.astype(onp.float32)))
    assert got.dtype == onp.float32
    check(got, _quiet(onp.sinc, x), device, 1e-5, 1e-6)
    got = np.sinc(on(device, onp.arange(-3, 4)))
    assert got.dtype == onp.float32
    check(got, onp.sinc(onp.arange(-3, 4)), device, 1e-6, 1e-6)
    check(np.sinc(on(device, onp.zeros((0, 2)))), onp.zeros((0, 2)), device)
    check(np.sinc(on(device, onp.array(0.0))), onp.sinc(0.0), device)
    check_numeric_gradient(np.sinc, [onp.array([0.0, 0.3, -1.7, 2.0, 0.99])])


# ---- logaddexp / logaddexp2 ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp(name, device):
    fn, want_fn = getattr(np, name), getattr(onp, name)
    a, b = rand((3, 4), -50, 50), rand((4,), -50, 50)
    check(fn(on(device, a), on(device, b)), want_fn(a, b), device)
    big = onp.array([1000.0, -1000.0, 800.0, 1e-20, 0.0])  # exp would overflow / underflow
    check(fn(on(device, big), on(device, big[::-1].copy())), want_fn(big, big[::-1]), device)
    ends = onp.array([onp.inf, -onp.inf, onp.nan, 3.0])
    x1, x2 = onp.meshgrid(ends, ends)
    check(fn(on(device, x1), on(device, x2)), _quiet(want_fn, x1, x2), device)
    got = fn(on(device, a.astype(onp.float32)), 2.0)
    assert got.dtype == onp.float32
    check(got, want_fn(a, 2.0), device, 1e-6, 1e-5)
    got = fn(on(device, onp.array([1, 2, 3])), on(device, onp.array([3, 2, 1])))
    assert got.dtype == onp.float32
    check(got, want_fn(onp.array([1, 2, 3]), onp.array([3, 2, 1])), device, 1e-6, 1e-6)
    out = np.zeros((3, 4), dtype="float64", device=device)
    assert fn(on(device, a), on(device, b), out=out) is out
    check(out, want_fn(a, b), device)
    check(fn(on(device, onp.zeros((0,))), 1.0), want_fn(onp.zeros((0,)), 1.0), device)
    check_numeric_gradient(fn, [rand((3, 4), -3, 3), rand((4,), -3, 3)])
    # at ties the gradient splits evenly, as exp(x - logaddexp(x, x)) = 1/2 says
    x = np.array(onp.array([0.5, -2.0]))
    x.attach_grad()
    with pymx.autograd.record():
        y = fn(x, x)
    y.backward()
    check(x.grad, onp.ones(2), x.device)


# ---- fmod ------------------------------------------------------------------------------------
def test_fmod_floats(device):
    a, b = rand((4, 5), -10, 10), rand((5,), -3, 3)
    check(np.fmod(on(device, a), on(device, b)), onp.fmod(a, b), device, 0, 0)
    x1, x2 = onp.meshgrid(EDGES, EDGES)
    check(np.fmod(on(device, x1), on(device, x2)), _quiet(onp.fmod, x1, x2), device, 0, 0)
    got = np.fmod(on(device, x1), on(device, x2)).asnumpy()
    want = _quiet(onp.fmod, x1, x2)
    assert (onp.signbit(got) == onp.signbit(want))[~onp.isnan(want)].all()  # -0.0 kept
    for dtype in ("float32", "float16"):
        got = np.fmod(on(device, a.astype(dtype)), 1.5)
        assert got.dtype == dtype
        check(got, onp.fmod(a.astype(dtype), onp.asarray(1.5, dtype)), device, 0, 0)
    check(np.fmod(-7.5, on(device, b)), onp.fmod(-7.5, b), device, 0, 0)
    out = np.zeros((4, 5), dtype="float64", device=device)
    assert np.fmod(on(device, a), on(device, b), out=out) is out
    check(out, onp.fmod(a, b), device, 0, 0)
    check_numeric_gradient(np.fmod, [rand((3, 4), -5, 5), rand((4,), 0.7, 2.0)])


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_fmod_integers(dtype, device):
    info = onp.iinfo(dtype)
    rng = onp.random.default_rng(0)
    a = rng.integers(info.min, info.max, size=(6, 7), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, size=(7,), dtype=dtype, endpoint=True)
    b[0] = 0  # x % 0 is 0 for integers
    if info.min < 0:
        b[1] = -1
    got = np.fmod(on(device, a), on(device, b))
    assert got.dtype == dtype
    check(got, _quiet(onp.fmod, a, b), device, 0, 0)
    check(np.fmod(on(device, a), 7), onp.fmod(a, 7), device, 0, 0)
    assert np.fmod(on(device, a), 7).dtype == dtype
    if info.min < 0:
        check(np.fmod(on(device, a), -3), onp.fmod(a, -3), device, 0, 0)
    flags = onp.array([True, False, True])
    check(np.fmod(on(device, flags), on(device, onp.array([True, True, True]))),
          onp.fmod(flags, onp.array([True, True, True])), device, 0, 0)


# ---- nextafter -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_nextafter(dtype, device):
    info = onp.finfo(dtype)
    specials = onp.array([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -4.0, 3.0, onp.inf, -onp.inf, onp.nan,
                          info.max, -info.max, info.tiny, -info.tiny, info.smallest_subnormal,
                          -info.smallest_subnormal, info.tiny * 2], dtype=dtype)
    x1, x2 = onp.meshgrid(specials, specials)
    got = np.nextafter(on(device, x1), on(device, x2))
    want = _quiet(onp.nextafter, x1, x2)
    assert got.dtype == dtype
    check(got, want, device, 0, 0)
    got = got.asnumpy()
    assert (onp.signbit(got) == onp.signbit(want))[~onp.isnan(want)].all()
    values = (rand((50,), -1e3, 1e3) * 10.0 ** onp.random.randint(-3, 2, 50)).astype(dtype)
    for towards in (onp.inf, -onp.inf, 0.0):
        check(np.nextafter(on(device, values), towards),
              onp.nextafter(values, onp.asarray(towards, dtype)), device, 0, 0)
    out = np.zeros(x1.shape, dtype=dtype, device=device)
    assert np.nextafter(on(device, x1), on(device, x2), out=out) is out
    check(out, want, device, 0, 0)


def test_nextafter_bfloat16_and_integers(device):
    one = np.nextafter(np.array([1.0, -1.0, 0.0], dtype=bfloat16, device=device), 2.0)
    assert one.dtype == bfloat16
    check(one.astype("float32"), onp.array([1 + 2.0 ** -7, -1 + 2.0 ** -8, 2.0 ** -133],
                                           "float32"), device, 0, 0)
    got = np.nextafter(on(device, onp.array([1, 2, 0])), on(device, onp.array([2, 0, -1])))
    assert got.dtype == onp.float32  # integers give float32 (NumPy: float64)
    check(got, onp.nextafter(onp.float32([1, 2, 0]), onp.float32([2, 0, -1])), device, 0, 0)


# ---- shifts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name, dunder", [("left_shift", "__lshift__"),
                                          ("right_shift", "__rshift__")])
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_shifts(name, dunder, dtype, device):
    fn, want_fn = getattr(np, name), getattr(onp, name)
    info = onp.iinfo(dtype)
    rng = onp.random.default_rng(1)
    a = rng.integers(info.min, info.max, size=(5, 6), dtype=dtype, endpoint=True)
    bits = info.bits
    counts = onp.array([0, 1, bits - 1, bits, bits + 3, 3], dtype=dtype)  # wide: all bits out
    if info.min < 0:
        counts[4] = -1  # a negative count reads as a huge one
    got = fn(on(device, a), on(device, counts))
    assert got.dtype == dtype
    check(got, want_fn(a, counts), device, 0, 0)
    check(fn(on(device, a), 2), want_fn(a, 2), device, 0, 0)
    assert fn(on(device, a), 2).dtype == dtype
    check(fn(3, on(device, counts[:4])), want_fn(onp.asarray(3, dtype), counts[:4]), device, 0, 0)
    check(getattr(on(device, a), dunder)(on(device, counts)), want_fn(a, counts), device, 0, 0)
    check(getattr(on(device, counts[:4]), "__r" + dunder[2:])(3),
          want_fn(onp.asarray(3, dtype), counts[:4]), device, 0, 0)
    target = on(device, a)
    assert getattr(target, "__i" + dunder[2:])(1) is target
    check(target, want_fn(a, 1), device, 0, 0)
    mixed = fn(on(device, a.astype(onp.int8) if dtype != "int8" else a),
               on(device, onp.array([1, 2, 3, 4, 5, 6], onp.int64)))
    assert mixed.dtype == onp.int64
    out = np.zeros((5, 6), dtype=dtype, device=device)
    assert fn(on(device, a), on(device, counts), out=out) is out
    check(out, want_fn(a, counts), device, 0, 0)
    bools = onp.array([True, False, True])
    got = fn(on(device, bools), on(device, onp.array([True, True, False])))
    assert got.dtype == onp.int8
    check(got, want_fn(bools, onp.array([True, True, False])), device, 0, 0)
    check(fn(on(device, onp.zeros((0,), dtype)), 1), want_fn(onp.zeros((0,), dtype), 1), device,
          0, 0)


@pytest.mark.parametrize("name", ["left_shift", "right_shift"])
def test_shifts_refuse_floats(name, device):
    with pytest.raises(TypeError, match=f"{name}.*float32"):
        getattr(np, name)(on(device, rand((3,)).astype("float32")), 1)
    with pytest.raises(TypeError, match=f"{name}.*float"):
        getattr(np, name)(on(device, onp.arange(3)), 1.5)


# ---- complex-number functions on real arrays -------------------------------------------------
def test_conj_real_imag_angle(device):
    x = onp.concatenate([rand((6,)), [0.0, -0.0, onp.inf, -onp.inf, onp.nan]])
    for fn in (np.conj, np.conjugate):
        got = fn(on(device, x))
        check(got, onp.conj(x), device, 0, 0)
    ints = onp.arange(-3, 3, dtype=onp.int32)
    assert np.conj(on(device, ints)).dtype == onp.int32
    out = np.zeros(x.shape, dtype="float64", device=device)
    assert np.conjugate(on(device, x), out=out) is out
    check(out, x, device, 0, 0)
    check(np.real(on(device, x)), onp.real(x), device, 0, 0)
    check(np.imag(on(device, x)), onp.imag(x), device, 0, 0)
    assert np.imag(on(device, ints)).dtype == onp.int32
    check(np.angle(on(device, x)), onp.angle(x), device, 0, 0)
    check(np.angle(on(device, x), deg=True), onp.angle(x, deg=True), device)
    got = np.angle(on(device, ints))
    assert got.dtype == onp.float32
    check(got, onp.angle(ints), device, 1e-6, 0)
    check(np.angle(on(device, onp.zeros((0, 3)))), onp.angle(onp.zeros((0, 3))), device)


# ---- integers to negative powers -------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_negative_power_refused(dtype, device):
    base = on(device, onp.array([1, 2, 3], dtype))
    message = "Integers to negative integer powers are not allowed"
    with pytest.raises(ValueError, match=message):
        np.power(base, -1)
    with pytest.raises(ValueError, match=message):
        base ** -2
    with pytest.raises(ValueError, match=message):
        np.power(base, on(device, onp.array([1, -1, 2])))
    with pytest.raises(ValueError, match=message):
        np.power(2, on(device, onp.array([1, -1, 2])))
    # non-negative exponents, float operands and bool bases beside non-negative ints still work
    check(np.power(base, on(device, onp.array([0, 1, 2]))), onp.power(
        onp.array([1, 2, 3], dtype), onp.array([0, 1, 2])), device, 0, 0)
    check(np.power(base, -1.0), onp.power(onp.array([1, 2, 3], dtype), -1.0), device, 1e-6, 0)
    check(np.power(on(device, onp.array([2.0])), -1), onp.array([0.5]), device, 0, 0)
    with pytest.raises(ValueError, match=message):
        np.power(on(device, onp.array([True, False])), -1)


# ---- GPU against CPU -------------------------------------------------------------------------
@requires_gpu
def test_gpu_matches_cpu():
    gpu, cpu = pymx.device.gpu(0), pymx.device.cpu(0)
    a, b = rand((4, 5), -6, 6), rand((5,), -3, 3)
    ints = onp.random.default_rng(2).integers(-100, 100, size=(4, 5)).astype(onp.int32)
    counts = onp.array([0, 1, 31, 32, -1], onp.int32)
    cases = [(np.fmod, (a, b)), (np.fmod, (ints, onp.array([3, -3, 0, 7, 1], onp.int32))),
             (np.logaddexp, (a, b)), (np.logaddexp2, (a, b)), (np.nextafter, (a, b)),
             (np.left_shift, (ints, counts)), (np.right_shift, (ints, counts)),
             (np.sinc, (a,)), (np.nanvar, (with_nans((4, 5)),)), (np.angle, (a,)),
             (lambda f: np.gradient(f, 0.5, axis=1, edge_order=2), (a,))]
    for fn, args in cases:
        on_gpu = fn(*[np.array(x, dtype=x.dtype, device=gpu) for x in args])
        on_cpu = fn(*[np.array(x, dtype=x.dtype, device=cpu) for x in args])
        assert on_gpu.device == gpu and on_gpu.dtype == on_cpu.dtype
        onp.testing.assert_allclose(on_gpu.asnumpy(), on_cpu.asnumpy(), rtol=1e-12, atol=1e-12)
