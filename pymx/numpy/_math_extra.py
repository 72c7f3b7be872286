"""More elementwise math for `pymx.np`: the bitwise operators, angle conversions, taking floats
apart (modf, frexp, spacing, signbit), divmod, i0, and the small functions trapezoid, unwrap,
correlate and array_equiv, with MXNet's aliases (product, alltrue, sometrue, round_, trapz).

bitwise_and / or / xor, signbit, modf, frexp, spacing, i0 and correlate are native operators
(engine/src/ops/broadcast.cc, float_parts.cc and correlate.cc, with GPU twins); the others are
compositions that are exact. Everything runs on the inputs' device, is recorded by autograd (float results
are differentiable where NumPy's math is) and traced by hybridize, except array_equiv, which
returns a Python bool and so reads the result on the host.

Differences from NumPy: float-valued functions of integers give float32 (MXNet), also fabs,
trapezoid and unwrap; spacing of a negative float16 value is negative, as for every other float
dtype (NumPy's float16 spacing steps towards zero there); correlate is 1-d real correlation.
"""

import numpy as _onp

from pymx._c import core as _c_core
from pymx.base import DEFAULT_DTYPE, dtype_name
from pymx.ndarray import ndarray
from pymx.numpy import _core
from pymx.numpy._core import (_binary, _is_float, _is_scalar, _to_array, abs, add, cumsum, equal,
                              floor_divide, full, isinf, less, logical_and, mod, multiply,
                              subtract, sum, where)
from pymx.numpy._dtype_utils import promote_types
from pymx.numpy._manipulation import _normalize_axis, _slice_along, diff

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _as_float(x):
    return x if _is_float(x.dtype) else x.astype(DEFAULT_DTYPE)


# ---------------------------------------------------------------------------------------------
# Bitwise operators
# ---------------------------------------------------------------------------------------------

def _bitwise_operand(x, other):
    """x as an ndarray or a scalar for a bitwise op beside `other`: lists and NumPy arrays keep
    their integer dtype (not the float32 default of array data), and a Python bool beside a bool
    array stays a bool (the scalar path would count it as the int 1)."""
    if isinstance(x, ndarray):
        return x
    device = other.device if isinstance(other, ndarray) else None
    if isinstance(x, (bool, _onp.bool_)) and isinstance(other, ndarray) and \
            other.dtype == _onp.bool_:
        return full((), x, dtype=_onp.bool_, device=device)
    if _is_scalar(x):
        return x
    return _to_array(_onp.asarray(x), device=device)


def _dtype_of(x):
    if isinstance(x, ndarray):
        return x.dtype
    if isinstance(x, int) and not isinstance(x, bool):
        # Any Python int, even one int64 cannot hold (NumPy would say object or uint64): the
        # operator refuses that one with an OverflowError naming it.
        return _onp.dtype(_onp.int64)
    return _onp.asarray(x).dtype  # a Python scalar: bool or float64, or a NumPy scalar


def _bitwise(op, x1, x2, out):
    x1 = _bitwise_operand(x1, x2)
    if not isinstance(x1, ndarray) and not isinstance(x2, ndarray):  # two scalars: 0-d result
        x1 = _to_array(_onp.asarray(x1))
    x2 = _bitwise_operand(x2, x1)
    dtypes = (_dtype_of(x1), _dtype_of(x2))
    if any(d.kind not in "iub" for d in dtypes):  # floats, and bfloat16 (a record to NumPy)
        raise TypeError(f"{op}: ufunc '{op}' is defined for integers and bools only, got "
                        f"dtypes {dtype_name(dtypes[0])} and {dtype_name(dtypes[1])}")
    return _binary(op, x1, x2, out)


@_export
def bitwise_and(x1, x2, out=None):
    """x1 & x2 elementwise (broadcast) on integers and bools; a float operand is a TypeError."""
    return _bitwise("bitwise_and", x1, x2, out)


@_export
def bitwise_or(x1, x2, out=None):
    """x1 | x2 elementwise (broadcast) on integers and bools; a float operand is a TypeError."""
    return _bitwise("bitwise_or", x1, x2, out)


@_export
def bitwise_xor(x1, x2, out=None):
    """x1 ^ x2 elementwise (broadcast) on integers and bools; a float operand is a TypeError."""
    return _bitwise("bitwise_xor", x1, x2, out)


# ---------------------------------------------------------------------------------------------
# Elementwise functions
# ---------------------------------------------------------------------------------------------

def _unary_op(op, x, out):
    return _c_core.invoke(op, [_to_array(x)], out=out)


def _outputs(out, what):
    """`out` of a two-output function: None or a pair of arrays (or Nones)."""
    if out is None:
        return None
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError(f"{what}: out must be a tuple of 2 arrays (or None), got {out!r}")
    return list(out)


@_export
def deg2rad(x, out=None):
    """Degrees to radians: x * pi / 180 (integers give float32)."""
    return multiply(x, _onp.pi / 180, out=out)


@_export
def rad2deg(x, out=None):
    """Radians to degrees: x * 180 / pi (integers give float32)."""
    return multiply(x, 180 / _onp.pi, out=out)


@_export
def radians(x, out=None):
    """Degrees to radians (deg2rad)."""
    return deg2rad(x, out=out)


@_export
def degrees(x, out=None):
    """Radians to degrees (rad2deg)."""
    return rad2deg(x, out=out)


@_export
def fabs(x, out=None):
    """|x| as a float (integers give float32)."""
    return abs(_as_float(_to_array(x)), out=out)


@_export
def signbit(x, out=None):
    """Whether the sign bit is set, elementwise: True for negative numbers, -0.0 and NaNs with
    the sign bit set."""
    return _unary_op("signbit", x, out)[0]


@_export
def spacing(x, out=None):
    """The distance from x to the next representable value of x's dtype away from zero, signed
    as x (zero gives the smallest subnormal; the largest finite value inf; inf and NaN NaN)."""
    return _unary_op("spacing", x, out)[0]


@_export
def modf(x, out=None):
    """(fractional part, integral part) of x, both signed as x (modf(-inf) = (-0.0, -inf))."""
    return tuple(_unary_op("modf", x, _outputs(out, "modf")))


@_export
def frexp(x, out=None):
    """(mantissa, exponent) with x = mantissa * 2 ** exponent, |mantissa| in [0.5, 1) and an
    int32 exponent; 0, inf and NaN give themselves and exponent 0."""
    return tuple(_unary_op("frexp", x, _outputs(out, "frexp")))


@_export
def i0(x):
    """The modified Bessel function of the first kind, order 0 (integers give float32)."""
    return _unary_op("i0", x, None)[0]


@_export
def divmod(x1, x2, out=None):
    """(floor_divide(x1, x2), mod(x1, x2)) elementwise, broadcast."""
    out = _outputs(out, "divmod") or [None, None]
    return floor_divide(x1, x2, out=out[0]), mod(x1, x2, out=out[1])


@_export
def real(val):
    """The real part: pymx arrays are real, so `val` itself (as an array)."""
    return _to_array(val)


@_export
def isposinf(x, out=None):
    """Whether x is +inf, elementwise."""
    x = _to_array(x)
    return logical_and(isinf(x), _core.greater(x, 0), out=out)


@_export
def isneginf(x, out=None):
    """Whether x is -inf, elementwise."""
    x = _to_array(x)
    return logical_and(isinf(x), less(x, 0), out=out)


round_ = _core.round
product = _core.prod
alltrue = _core.all
sometrue = _core.any
__all__ += ["round_", "product", "alltrue", "sometrue"]


# ---------------------------------------------------------------------------------------------
# Integration, phase unwrapping, correlation, comparison
# ---------------------------------------------------------------------------------------------

@_export
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of y along `axis` by the trapezoidal rule, with sample points `x` (1-d of
    y's length along axis, or y's shape) or spacing `dx`."""
    y = _as_float(_to_array(y))
    if y.ndim == 0:
        raise ValueError("trapezoid: y must be at least one-dimensional, got a 0-d array")
    axis = _normalize_axis(axis, y.ndim, "trapezoid")
    if x is None:
        widths = dx
    else:
        x = _to_array(x, device=y.device).astype(y.dtype)
        if x.ndim == 1:
            if x.shape[0] != y.shape[axis]:
                raise ValueError(f"trapezoid: x has {x.shape[0]} sample points, y has "
                                 f"{y.shape[axis]} along axis {axis}")
            widths = _core.reshape(diff(x), (-1,) + (1,) * (y.ndim - 1 - axis))
        else:
            widths = diff(x, axis=axis)
    heights = add(_slice_along(y, axis, 1), _slice_along(y, axis, None, -1))
    return _core.true_divide(sum(multiply(heights, widths), axis=axis), 2.0)


trapz = trapezoid
__all__.append("trapz")


@_export
def unwrap(p, discont=None, axis=-1, *, period=2 * _onp.pi):
    """p with jumps between neighbours along `axis` larger than max(discont, period / 2)
    replaced by their complement modulo `period`."""
    p = _as_float(_to_array(p))
    if p.ndim == 0:
        raise ValueError("unwrap: p must be at least one-dimensional, got a 0-d array")
    axis = _normalize_axis(axis, p.ndim, "unwrap")
    half = period / 2
    discont = half if discont is None else discont
    steps = diff(p, axis=axis)
    # Each step moved into [-period/2, period/2); a step of exactly -period/2 that was positive
    # goes to +period/2, as in NumPy.
    wrapped = subtract(mod(add(steps, half), period), half)
    wrapped = where(logical_and(equal(wrapped, -half), _core.greater(steps, 0)),
                    full((), half, dtype=p.dtype, device=p.device), wrapped)
    correction = subtract(wrapped, steps)
    correction = where(less(abs(steps), discont), _core.zeros_like(correction), correction)
    first = _slice_along(p, axis, None, 1)
    rest = add(_slice_along(p, axis, 1), cumsum(correction, axis=axis))
    return _core.concatenate([first, rest], axis=axis)


_CORRELATE_MODES = ("valid", "same", "full")


@_export
def correlate(a, v, mode="valid"):
    """The cross-correlation of 1-d sequences: c[k] = sum_n a[n + k] * v[n], over the overlaps
    mode asks for: 'valid' (full overlaps), 'same' (max(len(a), len(v)) values, centred) or
    'full' (every partial overlap)."""
    a = _to_array(a)
    v = _to_array(v, device=a.device)
    if mode not in _CORRELATE_MODES:
        raise ValueError(f"correlate: mode must be one of {_CORRELATE_MODES}, got {mode!r}")
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"correlate: object too deep for desired array (a has shape {a.shape}, "
                         f"v {v.shape}; both must be 1-d)")
    if a.size == 0 or v.size == 0:
        raise ValueError(f"correlate: {'a' if a.size == 0 else 'v'} cannot be empty")
    if v.size > a.size:  # correlating the other way round gives the result reversed
        return _core.flip(correlate(v, a, mode), 0)
    n_a, n_v = a.size, v.size
    # Output k of 'full' correlates v with a[k - (n_v - 1):][:n_v]; 'same' and 'valid' are
    # ranges of those outputs. The operator computes each output in place (O(n_a + n_v) memory).
    first, count = {"full": (0, n_a + n_v - 1), "same": (n_v - 1 - n_v // 2, n_a),
                    "valid": (n_v - 1, n_a - n_v + 1)}[mode]
    dtype = promote_types(a.dtype, v.dtype)
    return _c_core.invoke("correlate", [_to_array(a, dtype=dtype), _to_array(v, dtype=dtype)],
                          {"shift": first - (n_v - 1), "count": count})[0]


@_export
def array_equiv(a1, a2):
    """True when a1 and a2 broadcast to one shape and are equal there (a Python bool; reads
    the result on the host)."""
    a1 = _to_array(a1)
    a2 = _to_array(a2, device=a1.device)
    try:
        _onp.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return False
    return bool(_core.all(equal(a1, a2)).item())
