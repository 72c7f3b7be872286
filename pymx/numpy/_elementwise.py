"""Elementwise functions for `pymx.np` composed from the basic ones of _core: nan_to_num,
isclose, copysign, ldexp, heaviside, gcd, lcm and polynomial evaluation (polyval). Each runs on
the inputs' device; the float-valued ones are differentiable.

Differences from NumPy: copysign reads the sign of a zero (-0.0 counts as negative) but not the
sign bit of a NaN (a NaN second operand counts as positive); float-valued functions of integers
give float32 (MXNet).
"""
import numpy as _onp

from pymx.base import bfloat16
from pymx.ndarray import ndarray
from pymx.numpy import _core
from pymx.numpy._core import (_is_float, _to_array, abs, add, clip, equal, full, isfinite, isinf,
                              isnan, less, less_equal, logical_and, logical_or, multiply, power,
                              where)

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _arrays(x1, x2):
    """Both operands as arrays on the device of the first array among them."""
    device = next((x.device for x in (x1, x2) if isinstance(x, ndarray)), None)
    return _to_array(x1, device=device), _to_array(x2, device=device)


def _scalar_like(value, like):
    return full((), value, dtype=like.dtype, device=like.device)


def _largest_finite(dtype):
    """The largest finite value of the floating `dtype` (NumPy's finfo lacks bfloat16)."""
    if dtype == bfloat16:  # float32's exponent range with 7 explicit mantissa bits
        return (2.0 - 2.0 ** -7) * 2.0 ** 127
    return float(_onp.finfo(dtype).max)


@_export
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """x with NaN replaced by `nan`, +inf by `posinf` and -inf by `neginf` (default the largest
    and most negative finite values of x's dtype). Integer and boolean arrays are unchanged."""
    x = _to_array(x)
    if not _is_float(x.dtype):
        return _core.copy(x) if copy else x
    posinf = _largest_finite(x.dtype) if posinf is None else posinf
    neginf = -_largest_finite(x.dtype) if neginf is None else neginf
    result = where(isnan(x), _scalar_like(nan, x), x)
    result = where(isinf(x), where(less(x, 0), _scalar_like(neginf, x),
                                   _scalar_like(posinf, x)), result)
    return result if copy else _core.copyto(x, result)


@_export
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| elementwise (broadcast); infinities are close only to
    themselves, NaN only to NaN with equal_nan."""
    a, b = _arrays(a, b)
    finite = logical_and(isfinite(a), isfinite(b))
    difference = abs(_core.subtract(a, b))
    close = where(finite, less_equal(difference, add(multiply(abs(b), rtol), atol)),
                  equal(a, b))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(a), isnan(b)))
    return close


def _is_negative(x):
    """x < 0, with -0.0 counted as negative (1 / -0.0 = -inf)."""
    if x.dtype.kind in "iub":
        return less(x, 0)
    return logical_or(less(x, 0), logical_and(equal(x, 0), less(_core.reciprocal(x), 0)))


@_export
def copysign(x1, x2, out=None):
    """|x1| with the sign of x2, elementwise (broadcast)."""
    x1, x2 = _arrays(x1, x2)
    magnitude = abs(x1) if _is_float(x1.dtype) else abs(x1).astype(_onp.float32)
    return where(_is_negative(x2), _core.negative(magnitude), magnitude, out=out)


@_export
def ldexp(x1, x2, out=None):
    """x1 * 2 ** x2, elementwise; x2 must be integers. Exact wherever the result is
    representable, also where 2 ** x2 alone is not (ldexp(2.0 ** -20, 130) in float32)."""
    x1, x2 = _arrays(x1, x2)
    if x2.dtype.kind not in "iu":
        raise TypeError(f"ldexp: the exponent must be integers, got dtype {x2.dtype}")
    if not _is_float(x1.dtype):
        x1 = x1.astype(_onp.float32)
    info = _onp.finfo(_onp.float32 if x1.dtype == bfloat16 else x1.dtype)
    mantissa_bits = 7 if x1.dtype == bfloat16 else info.nmant
    # Past `reach` every finite non-zero x1 has over- or underflowed, so clipping there changes
    # no result; a third of it is a finite power of two in every float dtype. Scaling by the
    # three thirds in turn keeps each step finite, and 0 * 2 ** big at 0 (not 0 * inf = NaN).
    reach = info.maxexp - info.minexp + mantissa_bits + 1
    exponent = clip(x2.astype(_onp.int64), -reach, reach)
    first = _core.floor_divide(exponent, 3)
    second = _core.floor_divide(_core.subtract(exponent, first), 2)
    third = _core.subtract(_core.subtract(exponent, first), second)
    two = _scalar_like(2.0, x1)
    result = x1
    for step in (first, second):
        result = multiply(result, power(two, step))
    return multiply(result, power(two, third), out=out)


@_export
def heaviside(x1, x2, out=None):
    """The Heaviside step: 0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0 (NaN stays NaN)."""
    x1, x2 = _arrays(x1, x2)
    if not _is_float(x1.dtype):  # the step is float-valued: integers give float32 (MXNet)
        x1 = x1.astype(x2.dtype if _is_float(x2.dtype) else _onp.float32)
    step = where(less(x1, 0), _scalar_like(0, x1), _scalar_like(1, x1))
    step = where(equal(x1, 0), x2.astype(x1.dtype) if x2.dtype != x1.dtype else x2, step)
    return where(isnan(x1), x1, step, out=out)


# Euclid's algorithm halves the smaller operand every two steps at worst (Lamé), so a fixed
# number of steps per dtype covers every value and keeps the loop free of host reads.
_EUCLID_STEPS = {1: 12, 2: 24, 4: 48, 8: 94}


def _integer_operands(x1, x2, name):
    # A Python int beside an integer array takes the array's dtype (not the float32 default).
    if _core._is_scalar(x1) and isinstance(x2, ndarray):
        x1 = full((), x1, dtype=x2.dtype, device=x2.device)
    if _core._is_scalar(x2) and isinstance(x1, ndarray):
        x2 = full((), x2, dtype=x1.dtype, device=x1.device)
    x1, x2 = _arrays(x1, x2)
    for x in (x1, x2):
        if x.dtype.kind not in "iu":
            raise TypeError(f"{name}: ufunc '{name}' is only defined for integers, got dtype "
                            f"{x.dtype}")
    if x1.dtype != x2.dtype:
        common = _onp.promote_types(x1.dtype, x2.dtype)
        x1, x2 = x1.astype(common), x2.astype(common)
    return x1, x2


@_export
def gcd(x1, x2, out=None):
    """Greatest common divisor of |x1| and |x2|, elementwise (gcd(0, 0) = 0)."""
    a, b = _integer_operands(x1, x2, "gcd")
    a, b = _core.broadcast_arrays(abs(a), abs(b))
    zero, one = _scalar_like(0, a), _scalar_like(1, a)
    for _ in range(_EUCLID_STEPS[a.dtype.itemsize]):
        done = equal(b, zero)
        a, b = where(done, a, b), where(done, zero, _core.mod(a, where(done, one, b)))
    return a if out is None else _core.copyto(out, a)


@_export
def lcm(x1, x2, out=None):
    """Least common multiple of |x1| and |x2|, elementwise (0 if either is 0)."""
    a, b = _integer_operands(x1, x2, "lcm")
    divisor = gcd(a, b)
    safe = where(equal(divisor, 0), _scalar_like(1, divisor), divisor)
    return abs(multiply(_core.floor_divide(a, safe), b), out=out)


@_export
def polyval(p, x):
    """The polynomial with coefficients `p` (highest power first) at x, by Horner's rule."""
    p, x = _arrays(p, x)
    if p.ndim != 1:
        raise ValueError(f"polyval: p must be 1-d, got shape {p.shape}")
    result = _core.zeros_like(x) if _is_float(x.dtype) else \
        _core.zeros(x.shape, dtype=p.dtype, device=x.device)
    for i in range(p.shape[0]):
        result = add(multiply(result, x), p[i])
    return result
