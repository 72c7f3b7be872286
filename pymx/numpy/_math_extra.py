"""More elementwise math for `pymx.np`: the bitwise operators and shifts, angle conversions,
taking floats apart (modf, frexp, spacing, signbit, nextafter), divmod, fmod, i0, sinc,
logaddexp / logaddexp2, the complex-number functions on real arrays (real, imag, conj, angle),
and the small functions trapezoid, gradient, unwrap, correlate and array_equiv, with MXNet's
aliases (product, alltrue, sometrue, round_, trapz).

bitwise_and / or / xor, left_shift / right_shift, signbit, modf, frexp, spacing, i0 and
correlate are native operators (engine/src/ops/broadcast.cc, float_parts.cc and correlate.cc,
with GPU twins); the others are compositions that are exact. Everything runs on the inputs'
device, is recorded by autograd (float results are differentiable where NumPy's math is) and
traced by hybridize, except array_equiv, which returns a Python bool and so reads the result on
the host.

Differences from NumPy: float-valued functions of integers give float32 (MXNet), also fabs,
trapezoid, gradient, unwrap and nextafter; spacing of a negative float16 value is negative, as
for every other float dtype (NumPy's float16 spacing steps towards zero there); correlate is
1-d real correlation. pymx has no complex dtype, so real is the array, imag zeros, conj a copy
and angle 0 or pi, as NumPy gives for real input.
"""

import numpy as _onp

from pymx._c import core as _c_core
from pymx.base import DEFAULT_DTYPE, dtype_name
from pymx.ndarray import ndarray
from pymx.numpy import _core
from pymx.numpy._core import (_binary, _is_float, _is_scalar, _to_array, abs, add, cumsum, equal,
                              floor_divide, full, isinf, less, logical_and, mod, multiply,
                              subtract, sum, where)
from pymx.numpy._elementwise import _largest_finite
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


# pymx has no complex dtype: the functions of complex numbers below act on real arrays as
# NumPy's do on real input.

@_export
def real(val):
    """The real part: pymx arrays are real, so `val` itself (as an array)."""
    return _to_array(val)


@_export
def imag(val):
    """The imaginary part: pymx arrays are real, so zeros of val's shape and dtype."""
    return _core.zeros_like(_to_array(val))


@_export
def conjugate(x, out=None):
    """The complex conjugate: pymx arrays are real, so a copy of x."""
    x = _to_array(x)
    return _core.copy(x) if out is None else _core.copyto(out, x)


conj = conjugate
__all__.append("conj")


@_export
def angle(z, deg=False):
    """The argument of z: pymx arrays are real, so 0 for x >= +0.0 and pi for x < 0 or -0.0
    (NaN stays NaN), as arctan2(0, x); in degrees with deg=True. Integers give float32."""
    z = _to_array(z)
    result = _core.arctan2(_core.zeros_like(z), z)
    return multiply(result, 180 / _onp.pi) if deg else result


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


def _along(values, axis, ndim):
    """A 1-d array shaped to broadcast along `axis` of an ndim-dimensional array."""
    return _core.reshape(values, (-1,) + (1,) * (ndim - 1 - axis))


def _gradient_along(f, axis, spacing_, edge_order):
    """NumPy's gradient of f along one axis: second-order central differences inside, first- or
    second-order one-sided differences at the two ends; `spacing_` is a Python number (uniform)
    or the 1-d coordinates along the axis."""
    n = f.shape[axis]
    if n < edge_order + 1:
        raise ValueError(f"Shape of array too small to calculate a numerical gradient, at least "
                         f"(edge_order + 1) elements are required (gradient: axis {axis} has "
                         f"{n}, edge_order is {edge_order}).")

    def at(start, stop=None):
        return _slice_along(f, axis, start, stop)

    def combine(terms):  # sum of coefficient * slice
        total = None
        for coefficient, values in terms:
            term = multiply(values, coefficient)
            total = term if total is None else add(total, term)
        return total

    if not isinstance(spacing_, ndarray):  # uniform spacing h
        h = float(spacing_)
        inside = _core.true_divide(subtract(at(2), at(None, -2)), 2.0 * h)
        if edge_order == 1:
            first = _core.true_divide(subtract(at(1, 2), at(0, 1)), h)
            last = _core.true_divide(subtract(at(-1), at(-2, -1)), h)
        else:
            first = combine([(-1.5 / h, at(0, 1)), (2.0 / h, at(1, 2)), (-0.5 / h, at(2, 3))])
            last = combine([(0.5 / h, at(-3, -2)), (-2.0 / h, at(-2, -1)), (1.5 / h, at(-1))])
    else:
        steps = diff(spacing_)
        left, right = steps[:-1], steps[1:]
        # The weights of the quadratic through each point and its two neighbours.
        inside = combine([
            (_along(_core.negative(right) / (left * (left + right)), axis, f.ndim), at(None, -2)),
            (_along((right - left) / (left * right), axis, f.ndim), at(1, -1)),
            (_along(left / (right * (left + right)), axis, f.ndim), at(2))])
        if edge_order == 1:
            first = _core.true_divide(subtract(at(1, 2), at(0, 1)), steps[0])
            last = _core.true_divide(subtract(at(-1), at(-2, -1)), steps[-1])
        else:
            h1, h2 = steps[0], steps[1]
            first = combine([(-(2.0 * h1 + h2) / (h1 * (h1 + h2)), at(0, 1)),
                             ((h1 + h2) / (h1 * h2), at(1, 2)),
                             (-h1 / (h2 * (h1 + h2)), at(2, 3))])
            h1, h2 = steps[-2], steps[-1]
            last = combine([(h2 / (h1 * (h1 + h2)), at(-3, -2)),
                            (-(h2 + h1) / (h1 * h2), at(-2, -1)),
                            ((2.0 * h2 + h1) / (h2 * (h1 + h2)), at(-1))])
    result = _core.concatenate([first, inside, last], axis=axis)
    return result if result.dtype == f.dtype else result.astype(f.dtype)


@_export
def gradient(f, *varargs, axis=None, edge_order=1):
    """The gradient of f sampled on a grid: along each axis in `axis` (default all), central
    differences inside and one-sided ones of order `edge_order` (1 or 2) at the ends. `varargs`
    gives the spacing: nothing (1), one scalar for every axis, or one per axis, each a scalar
    or the 1-d coordinates along its axis. One array for one axis, else a tuple of them.
    Integers give float32."""
    f = _as_float(_to_array(f))
    axes = tuple(range(f.ndim)) if axis is None else tuple(
        _core._normalized_axes(axis, f.ndim, "gradient"))
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: 'edge_order' greater than 2 not supported, got "
                         f"{edge_order!r} (it must be 1 or 2)")
    if len(varargs) == 0:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and _onp.ndim(varargs[0]) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError(f"gradient: invalid number of arguments: {len(varargs)} spacings for "
                        f"{len(axes)} axes")
    for i, (ax, h) in enumerate(zip(axes, spacings)):
        if _onp.ndim(h) == 0:
            spacings[i] = h.item() if isinstance(h, (ndarray, _onp.ndarray)) else h
            continue
        coordinates = _as_float(_to_array(h, device=f.device))
        if coordinates.ndim != 1:
            raise ValueError(f"gradient: distances must be either scalars or 1d, got an array "
                             f"of shape {coordinates.shape} for axis {ax}")
        if coordinates.shape[0] != f.shape[ax]:
            raise ValueError(f"gradient: when 1d, distances must match the length of the "
                             f"corresponding dimension: {coordinates.shape[0]} coordinates "
                             f"for axis {ax} of length {f.shape[ax]}")
        spacings[i] = coordinates
    results = tuple(_gradient_along(f, ax, h, edge_order) for ax, h in zip(axes, spacings))
    return results[0] if len(results) == 1 else results


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


# ---------------------------------------------------------------------------------------------
# sinc, logaddexp, fmod, nextafter, shifts
# ---------------------------------------------------------------------------------------------

def _float_operands(x1, x2):
    """Both operands as arrays of one float dtype on the first array's device: a Python number
    beside an array takes the array's dtype (float32 beside an integer array), and the float
    of the promoted dtype otherwise (integers give float32)."""
    device = next((x.device for x in (x1, x2) if isinstance(x, ndarray)), None)
    like = next((x for x in (x1, x2) if isinstance(x, ndarray)), None)
    dtype = DEFAULT_DTYPE if like is None or not _is_float(like.dtype) else like.dtype
    x1, x2 = (x if isinstance(x, ndarray) else _to_array(x, device=device, dtype=dtype)
              for x in (x1, x2))
    dtype = promote_types(x1.dtype, x2.dtype)
    if not _is_float(dtype):
        dtype = DEFAULT_DTYPE
    return _to_array(x1, dtype=dtype), _to_array(x2, dtype=dtype)


@_export
def sinc(x):
    """sin(pi x) / (pi x), and 1 at x = 0 (integers give float32)."""
    x = _as_float(_to_array(x))
    zero = equal(x, 0)
    one = full((), 1, dtype=x.dtype, device=x.device)
    # 0 is replaced before dividing, so that neither the value nor the gradient sees 0 / 0.
    scaled = multiply(where(zero, one, x), _onp.pi)
    return where(zero, one, _core.true_divide(_core.sin(scaled), scaled))


def _log_add(x1, x2, out, base_two):
    """log(exp(x1) + exp(x2)) (or in base 2) as max + log1p(exp(-|x1 - x2|)), which neither
    overflows nor loses small terms. Equal operands take max + log(2) directly: x1 - x2 is NaN
    for equal infinities, and there the halved sum splits the gradient evenly."""
    x1, x2 = _float_operands(x1, x2)
    same = equal(x1, x2)
    gap = abs(where(same, _core.zeros_like(x1), subtract(x1, x2)))
    if base_two:  # log2(1 + 2 ** -gap) = log1p(exp(-gap ln 2)) / ln 2
        rest = _core.true_divide(_core.log1p(_core.exp(multiply(gap, -_onp.log(2.0)))),
                                 _onp.log(2.0))
        tie = 1.0
    else:
        rest = _core.log1p(_core.exp(_core.negative(gap)))
        tie = _onp.log(2.0)
    tied = add(multiply(add(x1, x2), 0.5), tie)
    return where(same, tied, add(_core.maximum(x1, x2), rest), out=out)


@_export
def logaddexp(x1, x2, out=None):
    """log(exp(x1) + exp(x2)) elementwise (broadcast), without overflow; exact at +-inf
    (logaddexp(-inf, -inf) = -inf). Integers give float32."""
    return _log_add(x1, x2, out, base_two=False)


@_export
def logaddexp2(x1, x2, out=None):
    """log2(2 ** x1 + 2 ** x2) elementwise (broadcast), without overflow; exact at +-inf.
    Integers give float32."""
    return _log_add(x1, x2, out, base_two=True)


def _same_kind_operands(x1, x2):
    """Both operands as arrays: a Python number beside an array takes the array's dtype where
    it is of the same kind (an int beside integers, any number beside floats), as NumPy's weak
    scalars; a float beside integers gives float32 (MXNet)."""
    like = next((x for x in (x1, x2) if isinstance(x, ndarray)), None)
    if like is not None:
        def operand(x):
            if isinstance(x, ndarray):
                return x
            if _is_float(like.dtype) or (like.dtype.kind in "iu" and
                                         isinstance(x, (int, _onp.integer))):
                return _to_array(x, device=like.device, dtype=like.dtype)
            return _to_array(x, device=like.device)
        return operand(x1), operand(x2)
    x1 = _to_array(x1)
    return x1, _to_array(x2, device=x1.device)


@_export
def fmod(x1, x2, out=None):
    """The C remainder of x1 / x2, elementwise (broadcast): it has the sign of the dividend x1
    (mod's has the divisor's). Integers keep their dtype, and x % 0 is 0 for them (NaN for
    floats)."""
    x1, x2 = _same_kind_operands(x1, x2)
    if x1.dtype == _onp.bool_ and x2.dtype == _onp.bool_:
        x1, x2 = x1.astype(_onp.int8), x2.astype(_onp.int8)  # NumPy has no bool loop
    if _is_float(promote_types(x1.dtype, x2.dtype)):
        # mod of two magnitudes is fmod of them exactly (no correction step runs), and fmod's
        # magnitude does not depend on the signs: only x1's sign is left to put back.
        magnitude = mod(abs(x1), abs(x2))
        return where(signbit(x1), _core.negative(magnitude), magnitude, out=out)
    # Integers: mod moved x2 over where the signs of the remainder and x1 differ; undo that
    # (exact, and wrapping as C's % does).
    remainder = mod(x1, x2)
    moved = logical_and(_core.not_equal(remainder, 0),
                        _core.not_equal(less(remainder, 0), less(x1, 0)))
    return where(moved, subtract(remainder, x2), remainder, out=out)


@_export
def nextafter(x1, x2, out=None):
    """The next value of x1's dtype after x1 towards x2, elementwise (broadcast); x2 where they
    are equal, NaN where either is NaN. Integers give float32 (NumPy: float64). Built from
    spacing, which knows the 16-bit formats, so float16 and bfloat16 step in their own."""
    x1, x2 = _float_operands(x1, x2)
    x1, x2 = _core.broadcast_arrays(x1, x2)
    magnitude = abs(x1)
    step = spacing(magnitude)
    away = add(magnitude, step)  # the largest finite value steps to inf (its spacing is inf)
    # Below a power of two the step is half as large: the spacing of the value one step below
    # (a multiple of the smaller step either way) is the step towards zero.
    # The largest finite value's spacing is inf; its own step is twice that of its half.
    finite_step = where(isinf(step), multiply(spacing(multiply(magnitude, 0.5)), 2.0), step)
    towards = subtract(magnitude, spacing(subtract(magnitude, finite_step)))
    towards = where(isinf(magnitude), full((), _largest_finite(x1.dtype), dtype=x1.dtype,
                                           device=x1.device), towards)
    grows = _core.not_equal(_core.greater(x2, x1), signbit(x1))
    moved = where(grows, away, towards)
    moved = where(signbit(x1), _core.negative(moved), moved)
    # From zero (either sign) the step is the smallest subnormal, signed as x2.
    tiny = spacing(_core.zeros_like(x1))
    moved = where(equal(x1, 0), where(signbit(x2), _core.negative(tiny), tiny), moved)
    # Equal operands give x2 (C's nextafter: nextafter(0.0, -0.0) is -0.0); NumPy's float16
    # loop gives x1 there instead, which only shows in the sign of a zero.
    moved = where(equal(x1, x2), x1 if x1.dtype == _onp.float16 else x2, moved)
    return where(_core.logical_or(_core.isnan(x1), _core.isnan(x2)), add(x1, x2), moved,
                 out=out)


def _shift(op, x1, x2, out):
    x1 = _bitwise_operand(x1, x2)
    x2 = _bitwise_operand(x2, x1)
    # NumPy's shifts have no bool loop: two bools give int8 (a bool beside integers promotes).
    if _dtype_of(x1) == _onp.bool_ and _dtype_of(x2) == _onp.bool_:
        x1, x2 = (_to_array(x, dtype=_onp.int8) for x in (x1, x2))
    return _bitwise(op, x1, x2, out)


@_export
def left_shift(x1, x2, out=None):
    """x1 << x2 elementwise (broadcast) on integers: bits shifted out at the top are lost, and
    a count at or beyond the dtype's width (or negative) gives 0. Floats are a TypeError."""
    return _shift("left_shift", x1, x2, out)


@_export
def right_shift(x1, x2, out=None):
    """x1 >> x2 elementwise (broadcast) on integers, the sign bit filling in: a count at or
    beyond the dtype's width (or negative) gives 0, or -1 for negative x1. Floats are a
    TypeError."""
    return _shift("right_shift", x1, x2, out)
