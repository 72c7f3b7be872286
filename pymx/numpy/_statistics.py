"""Order statistics, NaN-ignoring reductions, covariance and histograms for `pymx.np`.

quantile, percentile and median sort along the reduced axes on the device with `topk` (all k
values, ascending), whose gradient routes each output back to the element it came from, and
gather the order statistics at the requested positions with `take`; so they are
differentiable, run on any device and are traced by hybridize. A NaN anywhere in a reduced
slice makes that result NaN, as in NumPy.

Differences from NumPy (as in MXNet, or for a stated reason):
  * quantile / percentile take MXNet's `interpolation` argument; NumPy's `method` is accepted
    too, for the methods linear, lower, higher, midpoint and nearest.
  * Results of integer input are float32 (MXNet), not float64.
  * histogram computes its edges on the host in float64 (as NumPy does) and compares the data
    with them in the data's dtype; `bins` may be an int or a sequence of edges (not a string).
"""
import builtins
import numbers

import numpy as _onp

from pymx._c import core as _c_core
from pymx.base import DEFAULT_DTYPE
from pymx.ndarray import ndarray
from pymx.numpy import _core
from pymx.numpy._core import (_is_float, _to_array, add, any, copyto, full, isnan, maximum,
                              moveaxis, multiply, reshape, subtract, sum, take, true_divide,
                              where)
from pymx.numpy._manipulation import diagonal
from pymx.numpy._searching import searchsorted

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _as_float(a):
    return a if _is_float(a.dtype) else a.astype(DEFAULT_DTYPE)


def _reduced_last(a, axis):
    """a with the axes in `axis` (None: all) merged into one last axis, and the shape the
    result has when those axes are kept with length 1."""
    if axis is None:
        return reshape(a, (-1,)), (1,) * a.ndim
    axes = sorted({int(ax) % builtins.max(a.ndim, 1) for ax in _core._axis_tuple(axis)})
    for ax in _core._axis_tuple(axis):
        if not -a.ndim <= ax < a.ndim:
            raise _onp.exceptions.AxisError(f"axis {ax} is out of bounds for array of dimension "
                                            f"{a.ndim}")
    kept = [d for d in range(a.ndim) if d not in axes]
    moved = _core.transpose(a, tuple(kept + axes))
    kept_shape = tuple(a.shape[d] for d in kept)
    keepdims_shape = tuple(1 if d in axes else a.shape[d] for d in range(a.ndim))
    # The merged length is spelled out: -1 cannot be inferred when a kept axis is empty.
    merged = int(_onp.prod([a.shape[d] for d in axes], dtype=_onp.int64))
    return reshape(moved, kept_shape + (merged,)), keepdims_shape


_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _check_method(method, what):
    if method not in _METHODS:
        raise ValueError(f"{what}: interpolation method {method!r} is not supported; expected "
                         f"one of {_METHODS}")


def _bracketing(position, method):
    """The order statistics below and above each position that `method` combines."""
    below, above = _core.floor(position), _core.ceil(position)
    if method == "lower":
        above = below
    elif method == "higher":
        below = above
    elif method == "nearest":
        below = above = _core.round(position)
    return below, above


def _quantile(a, q, axis, out, keepdims, method, what):
    _check_method(method, what)
    a = _as_float(_to_array(a))
    flat, keepdims_shape = _reduced_last(a, axis)
    n = flat.shape[-1]
    if n == 0:
        if what != "median":  # NumPy: a quantile of nothing is an IndexError, a median NaN
            raise IndexError(f"{what}: cannot take quantiles over an empty axis (array of "
                             f"shape {a.shape}, axis {axis})")
        return full(keepdims_shape if keepdims else flat.shape[:-1], _onp.nan, dtype=a.dtype,
                    device=a.device)
    ordered = _c_core.invoke("topk", [flat], {"axis": -1, "k": n, "ret_typ": "value",
                                              "is_ascend": True})[0]
    # Positions of the requested quantiles among the n order statistics (float64, host or
    # device): floor and ceil are gathered and combined as `method` says.
    position = multiply(q, n - 1)
    below, above = _bracketing(position, method)
    low = take(ordered, below.astype(_onp.int64), axis=-1)
    if method in ("lower", "higher", "nearest"):
        result = low
    else:
        high = take(ordered, above.astype(_onp.int64), axis=-1)
        fraction = subtract(position, below) if method == "linear" else \
            full(position.shape, 0.5, dtype=position.dtype, device=position.device)
        fraction = fraction.astype(a.dtype)
        result = add(low, multiply(subtract(high, low), fraction))
    # NaN anywhere in a slice makes its quantiles NaN (sorting does not order NaN).
    has_nan = any(isnan(flat), axis=-1)
    has_nan = reshape(has_nan, has_nan.shape + (1,) * q.ndim)
    result = where(has_nan, full((), _onp.nan, dtype=result.dtype, device=result.device),
                   result)
    # NumPy puts the axes of q first.
    result = moveaxis(result, tuple(range(result.ndim - q.ndim, result.ndim)),
                      tuple(range(q.ndim))) if q.ndim else result
    if keepdims:
        result = reshape(result, q.shape + keepdims_shape)
    return result if out is None else copyto(out, result)


def _quantiles_array(q, device, scale, what):
    """q (scalar, sequence or array) divided by `scale`, as a float64 array on `device`,
    checked to lie in [0, 1]."""
    values = q.asnumpy() if isinstance(q, ndarray) else _onp.asarray(q, dtype=_onp.float64)
    values = values.astype(_onp.float64) / scale
    if not ((values >= 0) & (values <= 1)).all():
        bound = "[0, 100]" if scale == 100 else "[0, 1]"
        raise ValueError(f"{what}: {'percentiles' if scale == 100 else 'quantiles'} must be in "
                         f"the range {bound}, got {q!r}")
    if isinstance(q, ndarray):  # kept on the device (and in the autograd graph)
        return true_divide(q.astype(_onp.float64), scale) if scale != 1 else \
            q.astype(_onp.float64)
    return _to_array(values, device=device)


def _method(interpolation, method, what):
    if method is not None and interpolation not in (None, "linear", method):
        raise TypeError(f"{what}: give either interpolation={interpolation!r} or "
                        f"method={method!r}, not both")
    return method or interpolation or "linear"


@_export
def quantile(a, q, axis=None, out=None, overwrite_input=None, interpolation="linear",
             keepdims=False, *, method=None):
    """The q-th quantiles (q in [0, 1]; a scalar or array, whose axes come first) of `a` over
    `axis`. interpolation (or method): linear, lower, higher, midpoint or nearest."""
    a = _to_array(a)
    q = _quantiles_array(q, a.device, 1, "quantile")
    return _quantile(a, q, axis, out, keepdims, _method(interpolation, method, "quantile"),
                     "quantile")


@_export
def percentile(a, q, axis=None, out=None, overwrite_input=None, interpolation="linear",
               keepdims=False, *, method=None):
    """The q-th percentiles (q in [0, 100]) of `a` over `axis`; see quantile."""
    a = _to_array(a)
    q = _quantiles_array(q, a.device, 100, "percentile")
    return _quantile(a, q, axis, out, keepdims, _method(interpolation, method, "percentile"),
                     "percentile")


@_export
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median over `axis` (the mean of the two middle values for an even count)."""
    a = _to_array(a)
    q = _to_array(_onp.float64(0.5), device=a.device)
    return _quantile(a, q, axis, out, keepdims, "linear", "median")


# ---------------------------------------------------------------------------------------------
# NaN-ignoring reductions
# ---------------------------------------------------------------------------------------------

def _without_nan(a, fill):
    """a with NaN replaced by `fill`, and the NaN mask (None for data that has no NaN)."""
    a = _to_array(a)
    if not _is_float(a.dtype):
        return a, None
    mask = isnan(a)
    return where(mask, full((), fill, dtype=a.dtype, device=a.device), a), mask


@_export
def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    """sum treating NaN as zero."""
    a, _ = _without_nan(a, 0)
    return sum(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims)


@_export
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    """mean of the non-NaN elements (NaN where all are NaN)."""
    a, mask = _without_nan(a, 0)
    if mask is None:
        return _core.mean(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims)
    total = sum(a, axis=axis, dtype=dtype, keepdims=keepdims)
    count = sum(_core.logical_not(mask), axis=axis, keepdims=keepdims)
    return true_divide(total, count.astype(total.dtype), out=out)


def _nan_extreme(a, axis, out, keepdims, reduce, fill):
    a = _to_array(a)
    filled, mask = _without_nan(a, fill)
    result = reduce(filled, axis=axis, keepdims=keepdims)
    if mask is not None:  # all-NaN slices stay NaN
        all_nan = _core.all(mask, axis=axis, keepdims=keepdims)
        result = where(all_nan, full((), _onp.nan, dtype=a.dtype, device=a.device), result)
    return result if out is None else copyto(out, result)


@_export
def nanmax(a, axis=None, out=None, keepdims=False):
    """max ignoring NaN (NaN where all are NaN)."""
    return _nan_extreme(a, axis, out, keepdims, _core.max, -_onp.inf)


@_export
def nanmin(a, axis=None, out=None, keepdims=False):
    """min ignoring NaN (NaN where all are NaN)."""
    return _nan_extreme(a, axis, out, keepdims, _core.min, _onp.inf)


@_export
def ptp(a, axis=None, out=None, keepdims=False):
    """Range of values (max - min) over `axis`."""
    a = _to_array(a)
    return subtract(_core.max(a, axis=axis, keepdims=keepdims),
                    _core.min(a, axis=axis, keepdims=keepdims), out=out)


# ---------------------------------------------------------------------------------------------
# Covariance
# ---------------------------------------------------------------------------------------------

def _observations(m, rowvar, what):
    """m as a 2-d (variables, observations) array; a 1-d m is one variable."""
    m = _to_array(m)
    if m.ndim > 2:
        raise ValueError(f"{what}: m has more than 2 dimensions (shape {m.shape})")
    if m.ndim < 2:
        return reshape(m, (1, -1))
    return m if rowvar else _core.transpose(m)


def _weights(values, n, what, name, integral, device):
    w = _to_array(values, device=device).astype(_onp.float64)
    if w.ndim != 1:
        raise RuntimeError(f"{what}: cannot handle multidimensional {name} (shape {w.shape})")
    if w.shape[0] != n:
        raise RuntimeError(f"{what}: incompatible numbers of samples and {name} ({n} and "
                           f"{w.shape[0]})")
    host = w.asnumpy()
    if integral and not _onp.all(host == _onp.around(host)):
        raise TypeError(f"{what}: {name} must be integer")
    if (host < 0).any():
        raise ValueError(f"{what}: {name} cannot be negative")
    return w


@_export
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """Covariance matrix of the variables in m's rows (columns with rowvar=False), and y's.
    fweights: integer repeat counts per observation; aweights: observation weights."""
    if ddof is not None and not isinstance(ddof, (numbers.Integral, _onp.integer)):
        raise ValueError(f"cov: ddof must be an integer, got {ddof!r}")
    m = _to_array(m)
    x = _as_float(_observations(m, rowvar, "cov"))
    if y is not None:
        x = _core.concatenate([x, _as_float(_observations(_to_array(y, device=m.device),
                                                          rowvar, "cov")).astype(x.dtype)])
    if dtype is not None:
        x = x.astype(dtype)
    ddof = (0 if bias else 1) if ddof is None else int(ddof)
    n = x.shape[1]
    weights = None
    if fweights is not None:
        weights = _weights(fweights, n, "cov", "fweights", integral=True, device=x.device)
    if aweights is not None:
        a_w = _weights(aweights, n, "cov", "aweights", integral=False, device=x.device)
        weights = a_w if weights is None else multiply(weights, a_w)
    if weights is None:
        mean = _core.mean(x, axis=1, keepdims=True)
        norm = n - ddof
        centered = subtract(x, mean)
        product = _core.matmul(centered, _core.transpose(centered))
        return _squeeze(true_divide(product, builtins.max(norm, 0)))
    weights = weights.astype(x.dtype)
    total = sum(weights)
    mean = true_divide(sum(multiply(x, weights), axis=1, keepdims=True), total)
    if ddof == 0:
        norm = total
    elif aweights is None:
        norm = subtract(total, ddof)
    else:
        norm = subtract(total, true_divide(multiply(sum(multiply(weights, a_w.astype(x.dtype))),
                                                    ddof), total))
    centered = subtract(x, mean)
    product = _core.matmul(multiply(centered, weights), _core.transpose(centered))
    return _squeeze(true_divide(product, maximum(norm, 0)))


def _squeeze(c):
    """A 1 x 1 covariance matrix as a 0-d array, as NumPy returns it."""
    return reshape(c, ()) if c.shape == (1, 1) else c


@_export
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """Pearson correlation coefficients of the variables (rows of x, and y's), clipped to
    [-1, 1]."""
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:  # a single variable: c / c, NaN for zero variance, as NumPy
        return true_divide(c, c)
    d = _core.sqrt(diagonal(c))
    c = true_divide(true_divide(c, reshape(d, (-1, 1))), reshape(d, (1, -1)))
    return _core.clip(c, -1, 1)


# ---------------------------------------------------------------------------------------------
# Histogram
# ---------------------------------------------------------------------------------------------

def _bin_edges(a, bins, range):
    """The bin edges NumPy would use, on the host: float64 from a bin count, or `bins` itself
    (integer edges stay integers)."""
    if isinstance(bins, str):
        raise ValueError(f"histogram: bins must be an int or a sequence of edges, got {bins!r}")
    if isinstance(bins, (numbers.Integral, _onp.integer)) and not isinstance(bins, bool):
        if bins < 1:
            raise ValueError(f"histogram: bins must be positive, got {bins}")
        if range is not None:
            first, last = (float(v) for v in range)
            if first > last:
                raise ValueError(f"histogram: max must be larger than min in range parameter, "
                                 f"got range={range!r}")
            if not (_onp.isfinite(first) and _onp.isfinite(last)):
                raise ValueError(f"histogram: supplied range of [{first}, {last}] is not "
                                 f"finite")
        elif a.size == 0:
            first, last = 0.0, 1.0
        else:
            first, last = (float(r.item()) for r in (_core.min(a), _core.max(a)))
            if not (_onp.isfinite(first) and _onp.isfinite(last)):
                raise ValueError(f"histogram: autodetected range of [{first}, {last}] is not "
                                 f"finite")
        if first == last:
            first, last = first - 0.5, last + 0.5
        return _onp.linspace(first, last, int(bins) + 1, endpoint=True)
    edges = bins.asnumpy() if isinstance(bins, ndarray) else _onp.asarray(bins)
    if edges.dtype.kind not in "iuf":
        raise ValueError(f"histogram: bins must be an int or a sequence of edges, got {bins!r}")
    if edges.ndim != 1:
        raise ValueError(f"histogram: bins must be 1-d when an array, got shape {edges.shape}")
    if (_onp.diff(edges) < 0).any():
        raise ValueError(f"histogram: bins must increase monotonically, got {edges}")
    return edges


@_export
def histogram(a, bins=10, range=None, density=None, weights=None):
    """(hist, bin_edges): the number of elements of the flattened `a` in each bin (the sum of
    their `weights` if given; a density with density=True). Bins are [edge_i, edge_i+1), the
    last one closed; values outside the edges are not counted."""
    a = _core.ravel(_to_array(a))
    edges = _bin_edges(a, bins, range)
    data = _as_float(a)
    device_edges = _to_array(edges, device=a.device, dtype=data.dtype)
    count = edges.shape[0] - 1
    # Bin i holds edges[i] <= x < edges[i+1]; x == edges[-1] goes into the last bin, and
    # outside values into an extra slot that is dropped.
    index = subtract(searchsorted(device_edges, data, side="right"), 1)
    index = where(_core.equal(data, device_edges[-1]),
                  full((), count - 1, dtype=_onp.int64, device=a.device), index)
    outside = _core.logical_or(_core.less(index, 0), _core.greater_equal(index, count))
    index = where(outside, full((), count, dtype=_onp.int64, device=a.device), index)
    if weights is None:
        values = _core.ones(a.shape, dtype=_onp.int64, device=a.device)
    else:
        values = _core.ravel(_to_array(weights, device=a.device))
        if values.shape != a.shape:
            raise ValueError(f"histogram: weights should have the same shape as a, got "
                             f"{values.size} weights for {a.size} values")
    totals = _core.zeros((count + 1,), dtype=values.dtype, device=a.device)
    hist = _c_core.invoke("index_update", [totals, index, values],
                          {"axis": 0, "accumulate": True})[0][:count]
    edges_dtype = edges.dtype if edges.dtype.kind in "iu" else data.dtype
    edges_out = _to_array(edges, device=a.device, dtype=edges_dtype)
    if density:
        widths = _to_array(_onp.diff(edges.astype(_onp.float64)), device=a.device,
                           dtype=_onp.float64)
        hist = hist.astype(_onp.float64)
        hist = true_divide(true_divide(hist, widths), sum(hist))
    return hist, edges_out
