"""The functions of `pymx.np`: NumPy signatures over pymx's C++ operators.

Python does argument checking and the NumPy-to-operator translation only; every computation is
one or more `invoke` calls (asynchronous). Scalars on either side of a binary op use the
`*_scalar` operators, so `x + 1` makes no array for the 1.

Deliberate differences from NumPy: argsort is always stable (any `kind`); cumsum of uint8
accumulates in int64 (pymx has no uint64), and of float16 / bfloat16 in float32 with each output
rounded once (NumPy rounds every partial sum to float16).
"""
import builtins
import numbers
import operator

import numpy as _onp

from pymx._c import core as _c_core
from pymx.base import DEFAULT_DTYPE, as_dtype, bfloat16
from pymx.device import current_device
from pymx.ndarray import from_numpy, ndarray

_invoke = _c_core.invoke

__all__ = []  # filled by _export


def _export(fn):
    __all__.append(fn.__name__)
    return fn


# ---------------------------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------------------------

def _is_scalar(x):
    return isinstance(x, (numbers.Number, _onp.generic)) and not isinstance(x, ndarray)


def _scalar_value(x):
    """A Python int or float (bools count as ints, like NumPy)."""
    if isinstance(x, (bool, _onp.bool_)):
        return int(x)
    if isinstance(x, (numbers.Integral, _onp.integer)):
        return int(x)
    if isinstance(x, (numbers.Real, _onp.floating)):
        return float(x)
    raise TypeError(f"pymx does not support scalars of type {type(x).__name__} ({x!r})")


def _host_array(obj, dtype):
    """obj as a NumPy array with MXNet's dtype defaults: data that is not already an array
    (lists, Python numbers) becomes float32 unless it is boolean; NumPy arrays keep their
    dtype. For dtype bfloat16 the values come as float32, and a NumPy array of `bfloat16` bits
    comes as it is: from_numpy converts both."""
    if isinstance(obj, _onp.ndarray) and obj.dtype == bfloat16:
        return obj
    if dtype is not None and as_dtype(dtype) == bfloat16:
        return _host_array(obj, _onp.float32)
    if isinstance(obj, (_onp.ndarray, _onp.generic)):
        values = _onp.asarray(obj) if dtype is None else _onp.asarray(obj).astype(dtype)
    else:
        values = _onp.asarray(obj, dtype=dtype)
        if values.dtype.kind == "c":  # casting to float32 below would drop the imaginary part
            raise TypeError(f"pymx does not support arrays of dtype {values.dtype}")
        if dtype is None and values.dtype != _onp.bool_:
            values = values.astype(DEFAULT_DTYPE)
    if values.dtype.name not in ("float32", "float64", "float16", "uint8", "int8", "int32",
                                 "int64", "bool"):
        if values.dtype.kind in "iu":
            values = values.astype(_onp.int64)
        elif values.dtype.kind == "f":
            values = values.astype(_onp.float32)
        else:
            raise TypeError(f"pymx does not support arrays of dtype {values.dtype}")
    return values


def _is_float(dtype):
    """Whether `dtype` is a floating type: NumPy's, or bfloat16 (a record type to NumPy, whose
    dtype.kind is 'V' and dtype.name 'void16')."""
    return dtype.kind == "f" or dtype == bfloat16


def _to_array(x, device=None, dtype=None):
    """x as a pymx ndarray (an ndarray is returned as is, or cast to `dtype`)."""
    if isinstance(x, ndarray):
        return x if dtype is None or as_dtype(dtype) == x.dtype else x.astype(dtype)
    return from_numpy(_host_array(x, dtype), device=device or current_device(), dtype=dtype)


def _one(outputs):
    return outputs[0]


def _axis_tuple(axis):
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        return tuple(int(a) for a in axis)
    return (int(axis),)


def _normalized_axes(axes, ndim, what):
    """`axes` (an int or a sequence of ints) as a list of distinct axes in [0, ndim). An axis out
    of range is NumPy's AxisError and a repeated one a ValueError, both naming `what` (such as
    "moveaxis: source") and the values."""
    axes = list(_axis_tuple(axes))
    for axis in axes:
        if not -ndim <= axis < ndim:
            raise _onp.exceptions.AxisError(f"{what}: axis {axis} is out of bounds for array of "
                                            f"dimension {ndim}")
    normalized = [axis % ndim for axis in axes]
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"{what}: repeated axis in {tuple(axes)}")
    return normalized


_MAX_DIMENSION = 2 ** 63 - 1  # shapes are int64 in the engine


def _shape_tuple(shape):
    """shape (an int or a sequence of ints) as a tuple; anything else is a TypeError naming it
    (int() would accept 2.5 or "3" and silently build a different shape)."""
    def is_int(value):
        return isinstance(value, (numbers.Integral, _onp.integer)) and not isinstance(value, bool)

    if is_int(shape):
        dims = (int(shape),)
    # (this module defines np.all, so the builtin is spelled out)
    elif isinstance(shape, (tuple, list)) and builtins.all(is_int(s) for s in shape):
        dims = tuple(int(s) for s in shape)
    else:
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}")
    if builtins.any(not -_MAX_DIMENSION <= d <= _MAX_DIMENSION for d in dims):  # as NumPy
        raise ValueError(f"shape {dims}: maximum allowed dimension exceeded (an array "
                         f"dimension is at most 2**63 - 1)")
    return dims


# ---------------------------------------------------------------------------------------------
# Creation
# ---------------------------------------------------------------------------------------------

@_export
def array(object, dtype=None, device=None, copy=True, ctx=None):
    """A new array from `object` (an ndarray, NumPy array, list, scalar). Float data without a
    dtype becomes float32, as in MXNet."""
    device = device or ctx
    if isinstance(object, ndarray):
        result = object if device is None or object.device == device else object.to_device(device)
        if dtype is not None and as_dtype(dtype) != result.dtype:
            return result.astype(dtype)
        return result.copy() if copy and result is object else result
    return from_numpy(_host_array(object, dtype), device=device or current_device(), dtype=dtype)


@_export
def asarray(a, dtype=None, device=None):
    return array(a, dtype=dtype, device=device, copy=False)


def _create(op, shape, dtype, device, **attrs):
    dtype = DEFAULT_DTYPE if dtype is None else as_dtype(dtype)
    return _invoke(op, [], {"shape": _shape_tuple(shape), "dtype": dtype, **attrs},
                   device=device or current_device())[0]


@_export
def zeros(shape, dtype=None, order="C", device=None, ctx=None):
    return _create("zeros", shape, dtype, device or ctx)


@_export
def ones(shape, dtype=None, order="C", device=None, ctx=None):
    return _create("ones", shape, dtype, device or ctx)


@_export
def empty(shape, dtype=None, order="C", device=None, ctx=None):
    return _create("empty", shape, dtype, device or ctx)


@_export
def full(shape, fill_value, dtype=None, order="C", device=None, ctx=None, out=None):
    if isinstance(fill_value, ndarray):
        fill_value = fill_value.item()
    if dtype is None and isinstance(fill_value, (bool, _onp.bool_)):
        dtype = _onp.bool_
    result = _create("full", shape, dtype, device or ctx, value=_scalar_value(fill_value))
    if out is not None:
        return copyto(out, result)
    return result


def _like(op, a, dtype, device, **kwargs):
    return op(a.shape, dtype=a.dtype if dtype is None else dtype,
              device=a.device if device is None else device, **kwargs)


@_export
def zeros_like(a, dtype=None, order="C", device=None, ctx=None):
    return _like(zeros, _to_array(a), dtype, device or ctx)


@_export
def ones_like(a, dtype=None, order="C", device=None, ctx=None):
    return _like(ones, _to_array(a), dtype, device or ctx)


@_export
def empty_like(prototype, dtype=None, order="C", device=None, ctx=None):
    return _like(empty, _to_array(prototype), dtype, device or ctx)


@_export
def full_like(a, fill_value, dtype=None, order="C", device=None, ctx=None):
    a = _to_array(a)
    return full(a.shape, fill_value, dtype=a.dtype if dtype is None else dtype,
                device=a.device if device is None and ctx is None else device or ctx)


@_export
def arange(start, stop=None, step=1, dtype=None, device=None, ctx=None):
    """Evenly spaced values in [start, stop); float32 unless dtype is given (MXNet)."""
    if step == 0:
        raise ValueError("arange: step must not be zero")
    dtype = DEFAULT_DTYPE if dtype is None else as_dtype(dtype)
    return _invoke("arange", [], {"start": _scalar_value(start),
                                  "stop": None if stop is None else _scalar_value(stop),
                                  "step": _scalar_value(step), "dtype": dtype},
                   device=device or ctx or current_device())[0]


@_export
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, device=None,
             ctx=None):
    if int(num) < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    dtype = DEFAULT_DTYPE if dtype is None else as_dtype(dtype)
    result = _invoke("linspace", [], {"start": float(start), "stop": float(stop), "num": int(num),
                                      "endpoint": bool(endpoint), "dtype": dtype},
                     device=device or ctx or current_device())[0]
    if retstep:
        div = (num - 1) if endpoint else num
        return result, (float(stop) - float(start)) / div if div > 0 else float("nan")
    return result


@_export
def eye(N, M=None, k=0, dtype=None, device=None, ctx=None):
    dtype = DEFAULT_DTYPE if dtype is None else as_dtype(dtype)
    return _invoke("eye", [], {"N": int(N), "M": None if M is None else int(M), "k": int(k),
                               "dtype": dtype}, device=device or ctx or current_device())[0]


@_export
def identity(n, dtype=None, device=None, ctx=None):
    return eye(n, dtype=dtype, device=device or ctx)


@_export
def copy(a):
    return _invoke("copy", [_to_array(a)])[0]


@_export
def copyto(dst, src):
    """Copies src (broadcast, cast to dst's dtype) into dst."""
    src = broadcast_to(_to_array(src, device=dst.device), dst.shape)
    if src.dtype != dst.dtype:
        src = src.astype(dst.dtype)
    if src.device != dst.device:
        src = src.to_device(dst.device)
    return _invoke("copy", [src], out=dst)[0]


# ---------------------------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------------------------

def _unary(op, x, out):
    return _invoke(op, [_to_array(x)], out=out)[0]


# NumPy's negative and sign have no loop for bool (x - y and -x of bools are TypeErrors there).
_NO_BOOL_LOOP = ("negative", "sign")


def _make_unary(op, name=None):
    def fn(x, out=None, **kwargs):
        if kwargs.get("where", True) is not True:
            raise ValueError(f"{name or op}: only where=True is supported")
        if op in _NO_BOOL_LOOP:
            x = _to_array(x)
            if x.dtype == _onp.bool_:
                raise TypeError(f"{name or op}: ufunc '{name or op}' is not supported for dtype "
                                f"bool; use logical_not")
        return _unary(op, x, out)
    fn.__name__ = fn.__qualname__ = name or op
    fn.__doc__ = f"Elementwise {name or op} (NumPy semantics; integer input gives float32 for " \
                 f"float-valued functions)."
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)


for _op in ("exp", "log", "log1p", "expm1", "log2", "log10", "sqrt", "cbrt", "square", "abs",
            "negative", "sign", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh",
            "tanh", "arcsinh", "arccosh", "arctanh", "floor", "ceil", "trunc", "rint",
            "reciprocal", "isnan", "isinf", "isfinite", "logical_not"):
    _make_unary(_op)
_make_unary("abs", "absolute")
_make_unary("trunc", "fix")


@_export
def round(x, decimals=0, out=None):
    """Rounds half to even, like NumPy. Integers keep their dtype: negative decimals round them
    in float64 (as NumPy does), other decimals leave them as they are."""
    x = _to_array(x)
    if decimals == 0 or (x.dtype.kind in "iu" and decimals > 0):
        return _unary("round", x, out)
    if x.dtype.kind in "iu":
        rounded = round(x.astype(_onp.float64), decimals).astype(x.dtype)
        return rounded if out is None else copyto(out, rounded)
    scale = 10.0 ** decimals
    return true_divide(_unary("round", multiply(x, scale), None), scale, out=out)


around = round
__all__.append("around")


@_export
def positive(x, out=None):
    x = _to_array(x)
    if x.dtype == _onp.bool_:
        raise TypeError("positive: ufunc 'positive' is not supported for dtype bool")
    return copy(x) if out is None else copyto(out, x)


@_export
def invert(x, out=None):
    """Bitwise not: logical not for bools, -x - 1 for integers."""
    x = _to_array(x)
    if x.dtype == _onp.bool_:
        return _unary("logical_not", x, out)
    if x.dtype.kind not in "iu":
        raise TypeError(f"invert: ufunc 'invert' not supported for dtype {x.dtype}")
    return subtract(negative(x), 1, out=out)


bitwise_not = invert
__all__.append("bitwise_not")


@_export
def clip(a, a_min=None, a_max=None, out=None):
    if a_min is None and a_max is None:  # nothing to clip (NumPy 2)
        return copy(a) if out is None else copyto(out, a)
    return _invoke("clip", [_to_array(a)], {"a_min": None if a_min is None else float(a_min),
                                            "a_max": None if a_max is None else float(a_max)},
                   out=out)[0]


def _bool_beside_bool(array, scalar):
    """Whether `scalar` is a Python or NumPy bool beside a bool array: NumPy keeps the result
    bool, where the `*_scalar` operators would read the scalar as the int 1 or 0 (int64)."""
    return isinstance(scalar, (bool, _onp.bool_)) and array.dtype == _onp.bool_


# Note [Comparing with an integer the dtype cannot hold]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# NumPy 2 compares an integer array with a Python int outside the array's dtype by value
# (a uint8 array < 300 is all True, an int64 array == 2**70 all False), where arithmetic with
# it raises OverflowError. The `*_scalar` operators convert the scalar to the compute dtype (300
# would wrap to 44 in uint8, and 2**70 is refused), so such a comparison is answered here: every
# element compares as 0 does, 0 being in every integer dtype, so the result is a full array.
_COMPARISONS = {"equal": operator.eq, "not_equal": operator.ne, "greater": operator.gt,
                "greater_equal": operator.ge, "less": operator.lt, "less_equal": operator.le}


def _comparison_beyond_dtype(op, array, scalar, reverse, out):
    """`array <op> scalar` (`scalar <op> array` when reverse) when op is a comparison, the array
    integer and the scalar an integer its dtype cannot hold; None otherwise."""
    compare = _COMPARISONS.get(op)
    if (compare is None or array.dtype.kind not in "iu" or isinstance(scalar, (bool, _onp.bool_))
            or not isinstance(scalar, (numbers.Integral, _onp.integer))):
        return None
    info, value = _onp.iinfo(array.dtype), int(scalar)
    if info.min <= value <= info.max:
        return None
    answer = compare(value, 0) if reverse else compare(0, value)
    result = full(array.shape, answer, dtype=_onp.bool_, device=array.device)
    return result if out is None else copyto(out, result)


def _binary(op, x1, x2, out):
    if isinstance(x1, ndarray):
        if isinstance(x2, ndarray):
            return _invoke(op, [x1, x2], out=out)[0]
        beyond = _comparison_beyond_dtype(op, x1, x2, False, out) if _is_scalar(x2) else None
        if beyond is not None:
            return beyond
        if _is_scalar(x2) and not _bool_beside_bool(x1, x2):
            return _invoke(op + "_scalar", [x1], {"scalar": _scalar_value(x2), "reverse": False},
                           out=out)[0]
        x2 = _to_array(x2, device=x1.device)
    elif isinstance(x2, ndarray):
        beyond = _comparison_beyond_dtype(op, x2, x1, True, out) if _is_scalar(x1) else None
        if beyond is not None:
            return beyond
        if _is_scalar(x1) and not _bool_beside_bool(x2, x1):
            return _invoke(op + "_scalar", [x2], {"scalar": _scalar_value(x1), "reverse": True},
                           out=out)[0]
        x1 = _to_array(x1, device=x2.device)
    else:
        x1 = _to_array(x1)
        x2 = _to_array(x2, device=x1.device)
    return _invoke(op, [x1, x2], out=out)[0]


def _is_integer_operand(x, kinds):
    """Whether x is an ndarray whose dtype kind is in `kinds`, or a Python / NumPy integer."""
    if isinstance(x, ndarray):
        return x.dtype.kind in kinds
    return isinstance(x, (numbers.Integral, _onp.integer)) and not isinstance(x, bool)


def _check_integer_power(base, exponent):
    """NumPy refuses integers to negative integer powers (the result is no integer): a
    ValueError rather than a truncated value. An exponent array is read on the host for it, a
    sync point, but only where both operands are integers (bool bases count: they promote)."""
    if not isinstance(base, ndarray) and not isinstance(exponent, ndarray):
        return  # two Python numbers: float32 arrays, as all Python data
    if not _is_integer_operand(base, "iub") or not _is_integer_operand(exponent, "i"):
        return
    if isinstance(exponent, ndarray):
        negative = exponent.size and bool(any(less(exponent, 0))._values_outside_trace())
    else:
        negative = exponent < 0
    if negative:
        raise ValueError(f"Integers to negative integer powers are not allowed. (power: base "
                         f"dtype {getattr(base, 'dtype', type(base).__name__)}, exponent "
                         f"{'array with negative values' if isinstance(exponent, ndarray) else exponent})")


def _make_binary(op, name=None):
    def fn(x1, x2, out=None, **kwargs):
        if kwargs.get("where", True) is not True:
            raise ValueError(f"{name or op}: only where=True is supported")
        if op == "power":
            _check_integer_power(x1, x2)
        return _binary(op, x1, x2, out)
    fn.__name__ = fn.__qualname__ = name or op
    fn.__doc__ = f"Elementwise {name or op} with NumPy broadcasting; scalars on either side."
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)


for _op in ("add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "mod",
            "floor_divide", "arctan2", "hypot", "equal", "not_equal", "greater", "greater_equal",
            "less", "less_equal", "logical_and", "logical_or", "logical_xor"):
    _make_binary(_op)
_make_binary("divide", "true_divide")
_make_binary("mod", "remainder")
_make_binary("power", "float_power")
del _op


@_export
def fmax(x1, x2, out=None):
    """Maximum that ignores NaN where the other operand is a number."""
    return where(isnan(x2), x1, where(isnan(x1), x2, maximum(x1, x2)), out=out)


@_export
def fmin(x1, x2, out=None):
    """Minimum that ignores NaN where the other operand is a number."""
    return where(isnan(x2), x1, where(isnan(x1), x2, minimum(x1, x2)), out=out)


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------

def _reduce(op, a, axis, keepdims, out=None, **attrs):
    return _invoke(op, [_to_array(a)], {"axis": _axis_tuple(axis), "keepdims": bool(keepdims),
                                        **attrs}, out=out)[0]


@_export
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None):
    result = _reduce("sum", a, axis, keepdims, out if initial is None else None,
                     dtype=None if dtype is None else as_dtype(dtype))
    return result if initial is None else add(result, initial, out=out)


@_export
def prod(a, axis=None, dtype=None, out=None, keepdims=False):
    return _reduce("prod", a, axis, keepdims, out,
                   dtype=None if dtype is None else as_dtype(dtype))


@_export
def mean(a, axis=None, dtype=None, out=None, keepdims=False):
    return _reduce("mean", a, axis, keepdims, out,
                   dtype=None if dtype is None else as_dtype(dtype))


@_export
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    result = _reduce("var", a, axis, keepdims, out if dtype is None else None, ddof=ddof)
    return result if dtype is None else _invoke("cast", [result], {"dtype": as_dtype(dtype)},
                                                out=out)[0]


@_export
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    result = _reduce("std", a, axis, keepdims, out if dtype is None else None, ddof=ddof)
    return result if dtype is None else _invoke("cast", [result], {"dtype": as_dtype(dtype)},
                                                out=out)[0]


@_export
def max(a, axis=None, out=None, keepdims=False):
    return _reduce("max", a, axis, keepdims, out)


@_export
def min(a, axis=None, out=None, keepdims=False):
    return _reduce("min", a, axis, keepdims, out)


amax = max
amin = min
__all__ += ["amax", "amin"]


@_export
def all(a, axis=None, out=None, keepdims=False):
    return _reduce("all", a, axis, keepdims, out)


@_export
def any(a, axis=None, out=None, keepdims=False):
    return _reduce("any", a, axis, keepdims, out)


@_export
def argmax(a, axis=None, out=None, keepdims=False):
    return _invoke("argmax", [_to_array(a)], {"axis": None if axis is None else int(axis),
                                              "keepdims": bool(keepdims)}, out=out)[0]


@_export
def argmin(a, axis=None, out=None, keepdims=False):
    return _invoke("argmin", [_to_array(a)], {"axis": None if axis is None else int(axis),
                                              "keepdims": bool(keepdims)}, out=out)[0]


@_export
def average(a, axis=None, weights=None, returned=False, keepdims=False):
    a = _to_array(a)
    if weights is None:
        result = mean(a, axis=axis, keepdims=keepdims)
        count = a.size // builtins.max(result.size, 1) if a.size else 0
        return (result, full(result.shape, count, dtype=result.dtype, device=a.device)) \
            if returned else result
    weights = _to_array(weights, device=a.device)
    if weights.shape != a.shape:
        if axis is None or weights.ndim != 1:
            raise ValueError(f"average: weights of shape {weights.shape} differ from the "
                             f"array's {a.shape}; 1-d weights need an axis")
        shape = [1] * a.ndim
        shape[int(axis)] = weights.shape[0]
        weights = reshape(weights, tuple(shape))
    total = sum(multiply(a, weights), axis=axis, keepdims=keepdims)
    scale = sum(broadcast_to(weights, a.shape), axis=axis, keepdims=keepdims)
    result = true_divide(total, scale)
    return (result, scale) if returned else result


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------

@_export
def reshape(a, newshape, order="C"):
    if order != "C":
        raise ValueError(f"reshape supports only order='C', got {order!r}")
    return _invoke("reshape", [_to_array(a)], {"newshape": _shape_tuple(newshape)})[0]


@_export
def ravel(a, order="C"):
    return reshape(a, (-1,), order)


@_export
def transpose(a, axes=None):
    return _invoke("transpose", [_to_array(a)], {"axes": _axis_tuple(axes)})[0]


@_export
def swapaxes(a, axis1, axis2):
    return _invoke("swapaxes", [_to_array(a)], {"axis1": int(axis1), "axis2": int(axis2)})[0]


@_export
def moveaxis(a, source, destination):
    a = _to_array(a)
    source = _normalized_axes(source, a.ndim, "moveaxis: source")
    destination = _normalized_axes(destination, a.ndim, "moveaxis: destination")
    if len(source) != len(destination):
        raise ValueError("moveaxis: source and destination must have the same number of "
                         f"elements, got {source} and {destination}")
    order = [n for n in range(a.ndim) if n not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose(a, tuple(order))


@_export
def expand_dims(a, axis):
    return _invoke("expand_dims", [_to_array(a)], {"axis": _axis_tuple(axis)})[0]


@_export
def squeeze(a, axis=None):
    return _invoke("squeeze", [_to_array(a)], {"axis": _axis_tuple(axis)})[0]


@_export
def broadcast_to(array, shape):
    array = _to_array(array)
    shape = _shape_tuple(shape)
    if array.shape == shape:
        return array
    return _invoke("broadcast_to", [array], {"shape": shape})[0]


@_export
def broadcast_arrays(*args):
    arrays = [_to_array(a) for a in args]
    shape = _onp.broadcast_shapes(*[a.shape for a in arrays])
    return [broadcast_to(a, shape) for a in arrays]


@_export
def tile(A, reps):
    return _invoke("tile", [_to_array(A)], {"reps": _shape_tuple(reps)})[0]


@_export
def repeat(a, repeats, axis=None):
    if not isinstance(repeats, (numbers.Integral, _onp.integer)):
        raise TypeError(f"repeat: pymx supports one integer count of repeats, got {repeats!r}")
    return _invoke("repeat", [_to_array(a)], {"repeats": int(repeats),
                                              "axis": None if axis is None else int(axis)})[0]


@_export
def flip(m, axis=None):
    return _invoke("flip", [_to_array(m)], {"axis": _axis_tuple(axis)})[0]


@_export
def fliplr(m):
    return flip(m, 1)


@_export
def flipud(m):
    return flip(m, 0)


def _sequence(arrays, what):
    if isinstance(arrays, ndarray) or not isinstance(arrays, (list, tuple)) or not arrays:
        raise ValueError(f"{what}: expected a non-empty list or tuple of arrays")
    first = next((a for a in arrays if isinstance(a, ndarray)), None)
    device = first.device if first is not None else None
    return [_to_array(a, device=device) for a in arrays]


@_export
def concatenate(seq, axis=0, out=None):
    arrays = _sequence(seq, "concatenate")
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    return _invoke("concatenate", arrays, {"axis": int(axis)}, out=out)[0]


@_export
def stack(arrays, axis=0, out=None):
    return _invoke("stack", _sequence(arrays, "stack"), {"axis": int(axis)}, out=out)[0]


@_export
def vstack(tup):
    return concatenate([a if a.ndim >= 2 else reshape(a, (1, -1))
                        for a in _sequence(tup, "vstack")], axis=0)


@_export
def hstack(tup):
    arrays = _sequence(tup, "hstack")
    return concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1)


@_export
def column_stack(tup):
    return concatenate([a if a.ndim >= 2 else reshape(a, (-1, 1))
                        for a in _sequence(tup, "column_stack")], axis=1)


@_export
def split(ary, indices_or_sections, axis=0):
    ary = _to_array(ary)
    if ary.ndim == 0:
        raise ValueError("split: cannot split a zero-dimensional array")
    length = ary.shape[int(axis) % ary.ndim]
    if isinstance(indices_or_sections, (numbers.Integral, _onp.integer)):
        sections = int(indices_or_sections)
        if sections <= 0 or length % sections:
            raise ValueError(f"array split does not result in an equal division: axis of "
                             f"length {length} into {sections} sections")
        step = length // sections
        indices = tuple(range(step, length, step))[:sections - 1]
    else:
        indices = tuple(int(i) for i in indices_or_sections)
    return _invoke("split", [ary], {"indices": indices, "axis": int(axis)})


@_export
def array_split(ary, indices_or_sections, axis=0):
    ary = _to_array(ary)
    if not isinstance(indices_or_sections, (numbers.Integral, _onp.integer)):
        return split(ary, indices_or_sections, axis)
    length, sections = ary.shape[int(axis) % ary.ndim], int(indices_or_sections)
    if sections <= 0:
        raise ValueError(f"array_split: number of sections must be positive, got {sections}")
    size, extra = divmod(length, sections)
    bounds = _onp.cumsum([size + 1] * extra + [size] * (sections - extra))[:-1]
    return split(ary, tuple(int(b) for b in bounds), axis)


@_export
def where(condition, x=None, y=None, out=None):
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y should be given")
    arrays = [v for v in (condition, x, y) if isinstance(v, ndarray)]
    device = arrays[0].device if arrays else current_device()
    like = next((v for v in (x, y) if isinstance(v, ndarray)), None)

    def operand(v):
        if isinstance(v, ndarray):
            return v
        if _is_scalar(v) and like is not None:  # a scalar takes the other operand's dtype
            return full((), v, dtype=like.dtype, device=device)
        return _to_array(v, device=device)

    return _invoke("where", [_to_array(condition, device=device), operand(x), operand(y)],
                   out=out)[0]


# ---------------------------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------------------------

@_export
def matmul(a, b, out=None):
    a = _to_array(a)
    b = _to_array(b, device=a.device)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: input operand does not have enough dimensions (0-d operand)")
    if a.ndim >= 2 and b.ndim >= 2:
        return _invoke("matmul", [a, b], out=out)[0]
    # NumPy promotes 1-d operands to matrices and removes the added axis afterwards; the core
    # dimensions are checked first so that the message names the shapes the caller passed.
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if a.shape[-1] != k_b:
        raise ValueError(f"matmul: input operand 1 has a mismatch in its core dimension 0 (size "
                         f"{k_b} is different from {a.shape[-1]}); shapes {a.shape} and {b.shape}")
    a2 = reshape(a, (1, -1)) if a.ndim == 1 else a
    b2 = reshape(b, (-1, 1)) if b.ndim == 1 else b
    result = _invoke("matmul", [a2, b2])[0]
    shape = result.shape
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    return _invoke("reshape", [result], {"newshape": shape}, out=out)[0]


@_export
def dot(a, b, out=None):
    a = _to_array(a)
    b = _to_array(b, device=a.device)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b, out=out)
    # Checked here so that the message names the caller's shapes, not matmul's 2-d views of them.
    a_dim, b_dim = a.ndim - 1, builtins.max(b.ndim - 2, 0)
    if a.shape[a_dim] != b.shape[b_dim]:
        raise ValueError(f"dot: shapes {a.shape} and {b.shape} not aligned: {a.shape[a_dim]} "
                         f"(dim {a_dim}) != {b.shape[b_dim]} (dim {b_dim})")
    if b.ndim <= 2:
        return matmul(a, b, out=out)
    result = tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 2]))
    return result if out is None else copyto(out, result)


@_export
def vdot(a, b):
    return dot(ravel(a), ravel(b))


@_export
def inner(a, b):
    a = _to_array(a)
    b = _to_array(b, device=a.device)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    return tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 1]))


@_export
def outer(a, b, out=None):
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)), out=out)


@_export
def tensordot(a, b, axes=2):
    a = _to_array(a)
    b = _to_array(b, device=a.device)
    if isinstance(axes, (numbers.Integral, _onp.integer)):
        n = int(axes)
        a_axes, b_axes = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        a_axes, b_axes = (list(_axis_tuple(ax)) for ax in axes)
    if len(a_axes) != len(b_axes):
        raise ValueError(f"tensordot: axes lengths differ: {a_axes} and {b_axes}")
    a_axes = _normalized_axes(a_axes, a.ndim, f"tensordot: axes of a {a.shape}")
    b_axes = _normalized_axes(b_axes, b.ndim, f"tensordot: axes of b {b.shape}")
    for x, y in zip(a_axes, b_axes):
        if a.shape[x] != b.shape[y]:
            raise ValueError(f"tensordot: shape-mismatch for sum: {a.shape} axis {x} and "
                             f"{b.shape} axis {y}")
    a_free = [x for x in range(a.ndim) if x not in a_axes]
    b_free = [y for y in range(b.ndim) if y not in b_axes]
    k = int(_onp.prod([a.shape[x] for x in a_axes], dtype=_onp.int64))
    a2 = reshape(transpose(a, tuple(a_free + a_axes)), (-1, k))
    b2 = reshape(transpose(b, tuple(b_axes + b_free)), (k, -1))
    shape = tuple(a.shape[x] for x in a_free) + tuple(b.shape[y] for y in b_free)
    return reshape(_invoke("matmul", [a2, b2])[0], shape)


# ---------------------------------------------------------------------------------------------
# Sorting and cumulative sums (operators sort, argsort, cumsum: engine/src/ops/sort_scan.cc)
# ---------------------------------------------------------------------------------------------

_SORT_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


def _ordering_axis(ndim, axis, what):
    """The `axis` attribute for `what` on an array of `ndim` dimensions: None (the flattened
    array) or an axis in [0, ndim). An axis out of range is NumPy's AxisError, a non-integer one
    a TypeError."""
    if axis is None:
        return None
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{what}: axis must be an integer or None, got {axis!r}") from None
    return _normalized_axes(axis, ndim, what)[0]


def _check_sort_options(kind, order, what):
    # Every kind gives the same result: the operators sort stably, which each kind allows.
    if kind not in _SORT_KINDS:
        raise ValueError(f"{what}: kind must be one of {_SORT_KINDS[1:]} or None, got {kind!r}")
    if order is not None:
        raise ValueError(f"{what}: cannot specify order ({order!r}) when the array has no fields")


@_export
def sort(a, axis=-1, kind=None, order=None):
    """A sorted copy of `a` along `axis` (None: of the flattened array), NaNs last.
    Differentiable: the gradient flows back to where each value came from."""
    _check_sort_options(kind, order, "sort")
    a = _to_array(a)
    return _invoke("sort", [a], {"axis": _ordering_axis(a.ndim, axis, "sort")})[0]


@_export
def argsort(a, axis=-1, kind=None, order=None):
    """The int64 indices that sort `a` along `axis` (None: the flattened array), NaNs last;
    equal values keep their order (NumPy's kind='stable', whatever `kind` says)."""
    _check_sort_options(kind, order, "argsort")
    a = _to_array(a)
    return _invoke("argsort", [a], {"axis": _ordering_axis(a.ndim, axis, "argsort"),
                                    "dtype": "int64"})[0]


@_export
def cumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum along `axis` (None: of the flattened array, a 1-d result). Without a
    `dtype`, bool and integers narrower than int64 accumulate in int64, other dtypes in their
    own; float16 and bfloat16 keep the running sum in float32 and round each output once."""
    a = _to_array(a)
    # NumPy takes a 0-d array as 1-d, so axis 0 (or -1) works on it too.
    axis = _ordering_axis(builtins.max(a.ndim, 1), axis, "cumsum")
    attrs = {"axis": None if a.ndim == 0 else axis}
    if dtype is not None:
        attrs["dtype"] = as_dtype(dtype)
    result = _invoke("cumsum", [a], attrs)[0]
    return result if out is None else copyto(out, result)


# ---------------------------------------------------------------------------------------------
# Host-side functions. Their result shapes depend on data values (nonzero, argwhere, unique):
# they wait for the input, compute with NumPy and return a new array. They are not recorded by
# autograd.
# ---------------------------------------------------------------------------------------------

def _host(fn, a, *args, **kwargs):
    a = _to_array(a)
    return _host_result(_onp.asarray(fn(a.asnumpy(), *args, **kwargs)), a)


def _host_result(values, a):
    """NumPy `values` computed from a.asnumpy(), as an array on a's device. bfloat16 data is
    computed on as float32: float32 results go back to bfloat16."""
    keep_bfloat16 = a.dtype == bfloat16 and values.dtype == _onp.float32
    return from_numpy(values, device=a.device, dtype=bfloat16 if keep_bfloat16 else None)


@_export
def nonzero(a):
    a = _to_array(a)
    return tuple(from_numpy(i.astype(_onp.int64), device=a.device)
                 for i in _onp.nonzero(a.asnumpy()))


@_export
def argwhere(a):
    return _host(_onp.argwhere, a)


@_export
def unique(ar, return_counts=False):
    ar = _to_array(ar)
    values = _onp.unique(ar.asnumpy(), return_counts=return_counts)
    if return_counts:
        return (_host_result(values[0], ar),
                from_numpy(values[1].astype(_onp.int64), device=ar.device))
    return _host_result(values, ar)


@_export
def take(a, indices, axis=None, mode="raise", out=None):
    a = _to_array(a)
    if mode not in ("raise", "clip", "wrap"):
        raise ValueError(f"take: mode must be 'raise', 'clip' or 'wrap', got {mode!r}")
    if axis is None:
        a = ravel(a)
        axis = 0
    indices = _to_array(indices, device=a.device)
    if indices.dtype.kind not in "iu":
        indices = indices.astype(_onp.int64)
    return _invoke("take", [a, indices], {"axis": int(axis), "mode": mode}, out=out)[0]


@_export
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(_onp.allclose(_to_array(a).asnumpy(), _to_array(b).asnumpy(), rtol=rtol,
                              atol=atol, equal_nan=equal_nan))


@_export
def array_equal(a1, a2):
    return bool(_onp.array_equal(_to_array(a1).asnumpy(), _to_array(a2).asnumpy()))


@_export
def shape(a):
    return _to_array(a).shape


@_export
def size(a, axis=None):
    a = _to_array(a)
    return a.size if axis is None else a.shape[axis]


@_export
def ndim(a):
    return _to_array(a).ndim
