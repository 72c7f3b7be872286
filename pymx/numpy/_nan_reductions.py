"""NaN-ignoring reductions for `pymx.np` beyond nansum / nanmean / nanmax / nanmin (in
_statistics): nanargmax, nanargmin, nanprod, nancumsum, nancumprod, nanvar, nanstd, nanmedian,
nanquantile and nanpercentile.

Each replaces NaN by the value that changes nothing (0 for sums, 1 for products) or works on
the sorted values, where NaN sorts last, so that all of them run on the device and the float
results are differentiable. nanargmax and nanargmin must raise NumPy's ValueError on a slice
that is all NaN, so they read the all-NaN mask on the host: a sync point (in a hybridized block
only the call that is traced is checked).

Differences from NumPy: results of integer input are float32 for the quantiles (MXNet); an
all-NaN slice gives NaN without NumPy's RuntimeWarning.
"""
import numpy as _onp

from pymx.numpy import _core
from pymx.numpy._core import (_is_float, _to_array, add, copyto, equal, full, isnan, multiply,
                              subtract, sum, where)
from pymx.numpy._cumulative import cumprod
from pymx.numpy._statistics import (_as_float, _bracketing, _check_method, _method,
                                    _quantiles_array, _reduced_last, _without_nan)

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


# ---------------------------------------------------------------------------------------------
# Positions of the extremes
# ---------------------------------------------------------------------------------------------

def _check_no_all_nan_slice(mask, axis, what):
    """Raises NumPy's ValueError when a slice of `mask` along `axis` (None: the whole array) is
    all True, naming the first such slice."""
    if mask.size == 0:
        return
    all_nan = _core.all(mask, axis=axis)
    flags = all_nan._values_outside_trace()
    if not flags.any():
        return
    if axis is None:
        raise ValueError(f"All-NaN slice encountered ({what}: every element of the array of "
                         f"shape {mask.shape} is NaN)")
    position = tuple(int(i) for i in _onp.argwhere(flags)[0])
    raise ValueError(f"All-NaN slice encountered ({what}: the slice along axis {axis} at "
                     f"index {position} of the result, in the array of shape {mask.shape}, is "
                     f"NaN throughout)")


def _nan_arg_extreme(a, axis, out, keepdims, largest, what):
    a = _to_array(a)
    if not _is_float(a.dtype):
        arg = _core.argmax if largest else _core.argmin
        return arg(a, axis=axis, out=out, keepdims=keepdims)
    if axis is not None:
        axis = _core._normalized_axes(axis, a.ndim, what)[0]
    mask = isnan(a)
    _check_no_all_nan_slice(mask, axis, what)
    fill, extreme = (-_onp.inf, _core.max) if largest else (_onp.inf, _core.min)
    best = extreme(where(mask, full((), fill, dtype=a.dtype, device=a.device), a), axis=axis,
                   keepdims=True)
    # The first position that holds the extreme (a NaN equals nothing, so never one of them;
    # filling NaN alone would let a NaN before a -inf win nanargmax).
    return _core.argmax(equal(a, best).astype(_onp.int32), axis=axis, out=out,
                        keepdims=keepdims)


@_export
def nanargmax(a, axis=None, out=None, *, keepdims=False):
    """argmax ignoring NaN; a slice that is all NaN is a ValueError (checked on the host)."""
    return _nan_arg_extreme(a, axis, out, keepdims, True, "nanargmax")


@_export
def nanargmin(a, axis=None, out=None, *, keepdims=False):
    """argmin ignoring NaN; a slice that is all NaN is a ValueError (checked on the host)."""
    return _nan_arg_extreme(a, axis, out, keepdims, False, "nanargmin")


# ---------------------------------------------------------------------------------------------
# Products and running totals
# ---------------------------------------------------------------------------------------------

@_export
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False):
    """prod treating NaN as one."""
    a, _ = _without_nan(a, 1)
    return _core.prod(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims)


@_export
def nancumsum(a, axis=None, dtype=None, out=None):
    """cumsum treating NaN as zero (leading NaNs give zeros)."""
    a, _ = _without_nan(a, 0)
    return _core.cumsum(a, axis=axis, dtype=dtype, out=out)


@_export
def nancumprod(a, axis=None, dtype=None, out=None):
    """cumprod treating NaN as one (leading NaNs give ones)."""
    a, _ = _without_nan(a, 1)
    return cumprod(a, axis=axis, dtype=dtype, out=out)


# ---------------------------------------------------------------------------------------------
# Spread
# ---------------------------------------------------------------------------------------------

@_export
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """var of the non-NaN elements: their squared deviations from their mean, summed and
    divided by (count - ddof); NaN where that is not positive (an all-NaN slice too). The
    computation runs in `dtype` when given; integers give float32."""
    a = _to_array(a)
    a = _as_float(a) if dtype is None else a.astype(dtype)
    mask = isnan(a)
    zero = full((), 0, dtype=a.dtype, device=a.device)
    kept = _core.logical_not(mask)
    count = sum(kept, axis=axis, keepdims=True).astype(a.dtype)
    # Empty and all-NaN slices divide by at least 1 here (the result there is set to NaN
    # below): no 0 / 0, whose NaN would also reach the gradient.
    one = full((), 1, dtype=a.dtype, device=a.device)
    mean = _core.true_divide(sum(where(mask, zero, a), axis=axis, keepdims=True),
                             _core.maximum(count, one))
    deviations = where(mask, zero, subtract(a, mean))
    squares = sum(multiply(deviations, deviations), axis=axis, keepdims=keepdims)
    freedom = subtract(sum(kept, axis=axis, keepdims=keepdims).astype(a.dtype), ddof)
    result = _core.true_divide(squares, _core.maximum(freedom, one))
    result = where(_core.greater(freedom, 0), result,
                   full((), _onp.nan, dtype=a.dtype, device=a.device))
    return result if out is None else copyto(out, result)


@_export
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """std of the non-NaN elements: the square root of nanvar (same arguments)."""
    result = _core.sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))
    return result if out is None else copyto(out, result)


# ---------------------------------------------------------------------------------------------
# Order statistics
# ---------------------------------------------------------------------------------------------

def _nan_quantile(a, q, axis, out, keepdims, method, what):
    """The quantiles q (a float64 array in [0, 1]) of the non-NaN values of each slice."""
    _check_method(method, what)
    a = _as_float(_to_array(a))
    flat, keepdims_shape = _reduced_last(a, axis)
    kept_shape, n = flat.shape[:-1], flat.shape[-1]
    if n == 0 or flat.size == 0:  # nothing to take a quantile of: NaN, as NumPy
        shape = q.shape + (keepdims_shape if keepdims else kept_shape)
        result = full(shape, _onp.nan, dtype=a.dtype, device=a.device)
        return result if out is None else copyto(out, result)
    rows = flat.size // n
    ordered = _core.reshape(_core.sort(flat, axis=-1), (-1,))  # NaN last in every row
    valid = sum(_core.logical_not(isnan(flat)), axis=-1)
    # Positions among each row's valid values: q * (count - 1), per row and quantile.
    last = _core.maximum(subtract(valid, 1), 0).astype(_onp.float64)
    position = multiply(_core.reshape(last, kept_shape + (1,) * q.ndim), q)
    below, above = _bracketing(position, method)
    # Row r's values start at r * n in the flattened sort.
    starts = _core.reshape(multiply(_core.arange(rows, dtype=_onp.int64, device=a.device), n),
                           kept_shape + (1,) * q.ndim)

    def gather(positions):
        return _core.take(ordered, add(starts, positions.astype(_onp.int64)))

    result = gather(below)
    if method in ("linear", "midpoint"):
        fraction = subtract(position, below) if method == "linear" else \
            full(position.shape, 0.5, dtype=position.dtype, device=position.device)
        result = add(result, multiply(subtract(gather(above), result),
                                      fraction.astype(a.dtype)))
    all_nan = _core.reshape(equal(valid, 0), kept_shape + (1,) * q.ndim)
    result = where(all_nan, full((), _onp.nan, dtype=result.dtype, device=result.device), result)
    if q.ndim:  # NumPy puts the axes of q first
        result = _core.moveaxis(result, tuple(range(result.ndim - q.ndim, result.ndim)),
                                tuple(range(q.ndim)))
    if keepdims:
        result = _core.reshape(result, q.shape + keepdims_shape)
    return result if out is None else copyto(out, result)


def _nan_method(interpolation, method, what):
    """The method asked for: NumPy's `method` (default linear) or MXNet's `interpolation`."""
    return _method(interpolation, None if method == "linear" else method, what)


@_export
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, interpolation=None):
    """The q-th quantiles (q in [0, 1]) of the non-NaN values of `a` over `axis` (NaN where a
    slice has none). method: linear, lower, higher, midpoint or nearest."""
    a = _to_array(a)
    q = _quantiles_array(q, a.device, 1, "nanquantile")
    return _nan_quantile(a, q, axis, out, keepdims,
                         _nan_method(interpolation, method, "nanquantile"), "nanquantile")


@_export
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, interpolation=None):
    """The q-th percentiles (q in [0, 100]) of the non-NaN values; see nanquantile."""
    a = _to_array(a)
    q = _quantiles_array(q, a.device, 100, "nanpercentile")
    return _nan_quantile(a, q, axis, out, keepdims,
                         _nan_method(interpolation, method, "nanpercentile"), "nanpercentile")


@_export
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median of the non-NaN values over `axis` (NaN where a slice has none)."""
    a = _to_array(a)
    q = _to_array(_onp.float64(0.5), device=a.device)
    return _nan_quantile(a, q, axis, out, keepdims, "linear", "nanmedian")
