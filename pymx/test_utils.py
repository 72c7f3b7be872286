"""Helpers for tests: comparisons with per-dtype tolerances (MXNet's table), random inputs,
numeric gradient checks, one-line op checks against NumPy, and the default test device."""
import numbers

import numpy as _onp

from pymx import device as _device
from pymx.base import as_dtype, bfloat16, dtype_name
from pymx.ndarray import from_numpy, ndarray

# MXNet's default tolerances (python/mxnet/test_utils.py default_rtols / default_atols);
# bfloat16, with 8 significant bits to float16's 11, gets rtol 2^-6: a few of its roundings.
_RTOLS = {"bfloat16": 2.0 ** -6, "float16": 1e-2, "float32": 1e-4, "float64": 1e-5}
_ATOLS = {"bfloat16": 1e-1, "float16": 1e-1, "float32": 1e-3, "float64": 1e-20}


def _to_numpy(value):
    if isinstance(value, ndarray):
        return value.asnumpy()
    return _onp.asarray(value)


def _dtype_of(value):
    """The dtype of `value` as pymx holds it (asnumpy widens bfloat16 to float32)."""
    return value.dtype if isinstance(value, ndarray) else _to_numpy(value).dtype


def _least_precise(*dtypes):
    """The float dtype with the loosest tolerance among `dtypes` (integers compare exactly)."""
    names = [dtype_name(d) for d in dtypes]
    for name in _RTOLS:
        if name in names:
            return name
    return None


def default_rtol(*dtypes):
    return _RTOLS.get(_least_precise(*dtypes), 0.0)


def default_atol(*dtypes):
    return _ATOLS.get(_least_precise(*dtypes), 0.0)


def assert_almost_equal(a, b, rtol=None, atol=None, names=("a", "b"), equal_nan=False):
    """Asserts |a - b| <= atol + rtol * |b| elementwise, with a message locating the worst
    element. `a`, `b`: pymx or NumPy arrays or scalars, same shape. Default tolerances come from
    the less precise of the two dtypes."""
    a_np, b_np = _to_numpy(a), _to_numpy(b)
    if a_np.shape != b_np.shape:
        raise AssertionError(f"shape mismatch: {names[0]} {a_np.shape} vs {names[1]} {b_np.shape}")
    rtol = default_rtol(_dtype_of(a), _dtype_of(b)) if rtol is None else rtol
    atol = default_atol(_dtype_of(a), _dtype_of(b)) if atol is None else atol
    a64, b64 = a_np.astype(_onp.float64), b_np.astype(_onp.float64)
    close = _onp.isclose(a64, b64, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if close.all():
        return
    error = _onp.abs(a64 - b64) - rtol * _onp.abs(b64)
    error = _onp.where(close, -_onp.inf, _onp.nan_to_num(error, nan=_onp.inf))
    worst = _onp.unravel_index(_onp.argmax(error), a_np.shape) if a_np.ndim else ()
    raise AssertionError(
        f"{int((~close).sum())} of {close.size} elements differ (rtol={rtol}, atol={atol}); "
        f"worst at index {tuple(int(i) for i in worst)}: {names[0]}={float(a64[worst])!r}, "
        f"{names[1]}={float(b64[worst])!r}\n{names[0]}: {a_np}\n{names[1]}: {b_np}")


def same(a, b):
    """True when `a` and `b` have equal shapes and exactly equal values."""
    return _onp.array_equal(_to_numpy(a), _to_numpy(b))


def default_device():
    """The device tests run on: the current device (cpu(0) unless set)."""
    return _device.current_device()


def set_default_device(device):
    """Makes `device` the current device of this thread (what default_device returns)."""
    _device._current.set(device)


def rand_shape_nd(num_dim, dim=10, allow_zero_size=False):
    """A random shape of `num_dim` dimensions, each in [1, dim] ([0, dim] if allow_zero_size)."""
    low = 0 if allow_zero_size else 1
    return tuple(int(d) for d in _onp.random.randint(low, dim + 1, size=num_dim))


def rand_ndarray(shape, dtype="float32", device=None, low=-1.0, high=1.0):
    """An array of uniform random values in [low, high) (drawn with NumPy's global RNG, which the
    test seed fixture seeds), rounded to `dtype`."""
    values = _onp.random.uniform(low, high, size=shape)
    return from_numpy(values, device=device or default_device(), dtype=dtype)


def check_numeric_gradient(fn, inputs, eps=1e-4, rtol=1e-3, atol=1e-5, device=None):
    """Compares autograd's gradients of `fn` with central differences, both in float64.

    fn: takes pymx arrays (one per input) and returns one pymx array. inputs: NumPy or pymx
    arrays. The scalar differentiated is sum(fn(*inputs) * w) for a random fixed w, so head
    gradients other than ones are exercised. Needs 2 * (total input size) evaluations of fn:
    keep inputs small.
    """
    from pymx import autograd

    device = device or default_device()
    values = [_to_numpy(x).astype(_onp.float64) for x in inputs]
    out_shape = _to_numpy(fn(*[from_numpy(v, device=device) for v in values])).shape
    weights = _onp.random.uniform(-1.0, 1.0, size=out_shape)

    def objective(arrays):
        return float((_to_numpy(fn(*[from_numpy(v, device=device) for v in arrays])) *
                      weights).sum())

    variables = [from_numpy(v, device=device) for v in values]
    for v in variables:
        v.attach_grad()
    with autograd.record():
        out = fn(*variables)
    out.backward(from_numpy(weights, device=device))

    for i, value in enumerate(values):
        numeric = _onp.zeros_like(value)
        for index in _onp.ndindex(value.shape):
            original = value[index]
            value[index] = original + eps
            plus = objective(values)
            value[index] = original - eps
            minus = objective(values)
            value[index] = original
            numeric[index] = (plus - minus) / (2 * eps)
        assert_almost_equal(variables[i].grad, numeric, rtol=rtol, atol=atol,
                            names=(f"autograd d/dx{i}", f"numeric d/dx{i}"))


def _is_shape(case):
    return isinstance(case, tuple) and all(isinstance(d, numbers.Integral) for d in case)


def check_op(reference, function, shapes, dtype="float32", device=None, grad=False, rtol=None,
             atol=None, low=-1.0, high=1.0, out_dtype=None):
    """One-line op test: for each case in `shapes` (a shape for a one-input op, or a tuple of
    shapes), draws uniform inputs in [low, high) of `dtype`, and checks `function` (pymx) against
    `reference` (NumPy, computed in float64 for float inputs): shape, dtype (NumPy's result dtype
    unless `out_dtype`; NumPy computes bfloat16 inputs as float32, whose results stand for
    bfloat16), values (per-dtype tolerances), and with grad=True the gradients against central
    differences."""
    device = device or default_device()
    for case in shapes:
        case_shapes = [case] if _is_shape(case) else list(case)
        arrays = [rand_ndarray(s, dtype, device, low, high) for s in case_shapes]
        inputs = [x.asnumpy() for x in arrays]  # exactly the values pymx holds
        got = function(*arrays)
        want_dtype = as_dtype(out_dtype) if out_dtype is not None else \
            _onp.asarray(reference(*inputs)).dtype
        if as_dtype(dtype) == bfloat16 and want_dtype == _onp.float32 and out_dtype is None:
            want_dtype = bfloat16
        is_float = inputs[0].dtype.kind == "f"
        want = _onp.asarray(reference(*[x.astype(_onp.float64) if is_float else x
                                        for x in inputs]))
        assert got.shape == want.shape, f"case {case}: shape {got.shape} != NumPy's {want.shape}"
        assert got.dtype == want_dtype, \
            f"case {case}: dtype {dtype_name(got.dtype)} != expected {dtype_name(want_dtype)}"
        assert_almost_equal(got, from_numpy(want, dtype=want_dtype),
                            rtol=default_rtol(dtype) if rtol is None else rtol,
                            atol=default_atol(dtype) if atol is None else atol,
                            names=("pymx", "numpy"))
        if grad:
            check_numeric_gradient(function, inputs, device=device)
