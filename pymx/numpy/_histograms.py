"""Histograms beyond np.histogram for `pymx.np`: histogram_bin_edges, histogramdd, histogram2d.

They share histogram's rules (its `_bin_edges`): edges from a bin count over `range` (default
the data's minimum and maximum, read on the host) or given edges; bins are half-open
[edge_i, edge_i+1) except the last, which is closed; values outside are not counted. Each
sample's bin is found on the device with searchsorted, and the counts (or summed weights) are
one scatter-add (`index_update`) into the flattened grid of bins.

Differences from NumPy, as np.histogram's: edges computed from a bin count have the data's
float dtype (float32 for float32 data), and the data are compared with the edges in that dtype
(NumPy compares in float64), so a float32 value within rounding of an inner edge may fall into
the neighbouring bin.
"""
import builtins
import numbers

import numpy as _onp

from pymx._c import core as _c_core
from pymx.ndarray import ndarray
from pymx.numpy import _core
from pymx.numpy._core import _to_array, full, ravel, subtract, true_divide, where
from pymx.numpy._manipulation import diff
from pymx.numpy._searching import searchsorted
from pymx.numpy._statistics import _as_float, _bin_edges

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _device_edges(edges, data):
    """Host `edges` on data's device: integer edges stay integers, others take data's dtype."""
    dtype = edges.dtype if edges.dtype.kind in "iu" else data.dtype
    return _to_array(edges, device=data.device, dtype=dtype)


@_export
def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The edges np.histogram would use for these arguments (weights do not change them)."""
    a = ravel(_to_array(a))
    return _device_edges(_bin_edges(a, bins, range), _as_float(a))


def _bin_index(values, edges, device_edges):
    """The bin of each value (int64) for the 1-d host `edges`: -1 below the first edge, the bin
    count above the last; a value equal to the last edge goes into the last bin."""
    count = edges.shape[0] - 1
    index = subtract(searchsorted(device_edges, values, side="right"), 1)
    last = full((), count - 1, dtype=_onp.int64, device=values.device)
    index = where(_core.equal(values, device_edges[-1]), last, index)
    return where(_core.greater_equal(index, count),
                 full((), -1, dtype=_onp.int64, device=values.device), index)


def _per_dimension(value, count, name):
    """bins or range given once for all dimensions or as one entry per dimension."""
    if value is None or isinstance(value, (numbers.Integral, _onp.integer)):
        return [value] * count
    if len(value) != count:
        raise ValueError(f"histogramdd: the dimension of {name} ({len(value)}) must be equal to "
                         f"the dimension of the sample x ({count})")
    return list(value)


@_export
def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """(hist, edges): the D-dimensional histogram of the N points of `sample` (an (N, D) array,
    or a sequence of D arrays of N coordinates). bins: a count, or per dimension a count or
    edges; range: per dimension a (min, max) for counted bins. hist is float64 of the bin counts
    (sums of `weights`, or a density with density=True); edges is a list of D arrays."""
    if isinstance(sample, (list, tuple)):
        device = next((v.device for v in sample if isinstance(v, ndarray)), None)
        columns = [ravel(_to_array(v, device=device)) for v in sample]
        if len({c.shape[0] for c in columns}) > 1:
            raise ValueError(f"histogramdd: sample coordinates must all have one length, got "
                             f"{[c.shape[0] for c in columns]}")
    else:
        sample = _to_array(sample)
        if sample.ndim == 1:
            sample = _core.reshape(sample, (-1, 1))
        if sample.ndim != 2:
            raise ValueError(f"histogramdd: sample must be an (N, D) array, got shape "
                             f"{sample.shape}")
        columns = [sample[:, d] for d in builtins.range(sample.shape[1])]
    dims = len(columns)
    if dims == 0:
        raise ValueError("histogramdd: sample must have at least one dimension")
    count_points = columns[0].shape[0]
    device = columns[0].device
    bins_per_dim = _per_dimension(bins, dims, "bins")
    ranges = [None] * dims if range is None else _per_dimension(range, dims, "range")
    edges, flat, counts = [], None, []
    outside = None
    for column, column_bins, column_range in zip(columns, bins_per_dim, ranges):
        data = _as_float(column)
        host_edges = _bin_edges(data, column_bins, column_range)
        edges.append(_device_edges(host_edges, data))
        index = _bin_index(data, host_edges, _to_array(host_edges, device=device,
                                                       dtype=data.dtype))
        n = host_edges.shape[0] - 1
        counts.append(n)
        below = _core.less(index, 0)
        outside = below if outside is None else _core.logical_or(outside, below)
        flat = index if flat is None else flat * n + index
    size = int(_onp.prod(counts, dtype=_onp.int64))
    # Points outside some dimension's edges go into one extra slot that is dropped.
    flat = where(outside, full((), size, dtype=_onp.int64, device=device), flat)
    if weights is None:
        values = _core.ones((count_points,), dtype=_onp.float64, device=device)
    else:
        values = ravel(_to_array(weights, device=device)).astype(_onp.float64, copy=False)
        if values.shape[0] != count_points:
            raise ValueError(f"histogramdd: weights should have one value per point, got "
                             f"{values.shape[0]} weights for {count_points} points")
    totals = _core.zeros((size + 1,), dtype=_onp.float64, device=device)
    hist = _c_core.invoke("index_update", [totals, flat, values],
                          {"axis": 0, "accumulate": True})[0][:size]
    hist = _core.reshape(hist, tuple(counts))
    if density:
        volume = None
        for d, e in enumerate(edges):
            widths = diff(e.astype(_onp.float64))
            shape = [1] * dims
            shape[d] = counts[d]
            widths = _core.reshape(widths, tuple(shape))
            volume = widths if volume is None else volume * widths
        hist = true_divide(true_divide(hist, _core.sum(hist)), volume)
    return hist, edges


@_export
def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """(hist, xedges, yedges): the 2-d histogram of the points (x, y), as histogramdd. bins: a
    count, [count_x, count_y], one array of edges for both, or [xedges, yedges]."""
    try:
        length = len(bins)
    except TypeError:
        length = 1
    if length not in (1, 2):
        bins = [bins, bins]
    hist, (xedges, yedges) = histogramdd([x, y], bins, range, density, weights)
    return hist, xedges, yedges
