"""Searching and counting for `pymx.np`: searchsorted, interp, bincount, count_nonzero.

searchsorted is a binary search run for all queries at once on the device: ceil(log2(n + 1))
rounds, each gathering the sorted array at the current midpoints (`take`) and narrowing every
query's [lo, hi) range with `where`. interp builds on it and is differentiable in x and fp.
bincount's result length depends on the largest value, which it reads on the host (as nonzero
does); the counting itself is one scatter-add (`index_update`) on the device.

Differences from NumPy: bincount keeps the dtype of float weights (NumPy gives float64);
interp of integer x gives float32 unless fp is float64 (MXNet).
"""
import builtins

import numpy as _onp

from pymx._c import core as _c_core
from pymx.ndarray import ndarray
from pymx.numpy import _core
from pymx.numpy._core import (_is_float, _to_array, add, clip, concatenate, floor_divide, full,
                              greater, isnan, less, less_equal, logical_and, logical_not,
                              logical_or, multiply, subtract, take, true_divide, where)

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


@_export
def searchsorted(a, v, side="left", sorter=None):
    """Indices (int64) at which inserting v into the sorted 1-d `a` keeps it sorted: the first
    such index with side='left', the last with side='right'. NaN sorts last, as in NumPy."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    a = _to_array(a)
    if a.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-d, got shape {a.shape}")
    if sorter is not None:
        a = take(a, _to_array(sorter, device=a.device, dtype=_onp.int64))
    v = _to_array(v, device=a.device)
    n = a.shape[0]
    lo = _core.zeros(v.shape, dtype=_onp.int64, device=a.device)
    hi = full(v.shape, n, dtype=_onp.int64, device=a.device)
    if n == 0:
        return lo
    v_nan = isnan(v) if _is_float(v.dtype) else None
    for _ in range(int(n).bit_length()):
        mid = floor_divide(add(lo, hi), 2)
        pivot = take(a, clip(mid, 0, n - 1))
        # Does v belong after a[mid]? NaN compares as the largest value.
        if side == "left":
            after = less(pivot, v)
            if v_nan is not None:
                after = logical_or(after, logical_and(v_nan, logical_not(isnan(pivot))))
        else:
            after = less_equal(pivot, v)
            if v_nan is not None:
                after = logical_or(after, v_nan)
        active = less(lo, hi)
        lo = where(logical_and(active, after), add(mid, 1), lo)
        hi = where(logical_and(active, logical_not(after)), mid, hi)
    return lo


def _broadcast_like(value, like):
    value = value if value.dtype == like.dtype else value.astype(like.dtype)
    return _core.broadcast_to(value, like.shape)


@_export
def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (xp, fp) at x; xp must be increasing
    (unless `period` is given). Values below xp[0] give `left` (default fp[0]), above xp[-1]
    `right` (default fp[-1])."""
    device = next((v.device for v in (x, xp, fp) if isinstance(v, ndarray)), None)
    x, xp, fp = (_to_array(v, device=device) for v in (x, xp, fp))
    if xp.ndim != 1 or fp.ndim != 1:
        raise ValueError(f"interp: xp and fp must be 1-d, got shapes {xp.shape} and {fp.shape}")
    if xp.shape[0] != fp.shape[0]:
        raise ValueError(f"interp: fp and xp are not of the same length ({fp.shape[0]} and "
                         f"{xp.shape[0]})")
    if xp.shape[0] == 0:
        raise ValueError("interp: array of sample points is empty")
    if not _is_float(x.dtype):
        x = x.astype(fp.dtype if _is_float(fp.dtype) else "float32")
    if period is not None:
        if period == 0:
            raise ValueError("interp: period must be a non-zero value")
        period = builtins.abs(float(period))
        left = right = None
        x = _core.mod(x, period)
        xp = _core.mod(xp, period)
        order = _c_core.invoke("topk", [xp], {"axis": -1, "k": xp.shape[0], "ret_typ": "indices",
                                              "is_ascend": True, "dtype": _onp.int64})[0]
        xp, fp = take(xp, order), take(fp, order)
        xp = concatenate([subtract(xp[-1:], period), xp, add(xp[0:1], period)])
        fp = concatenate([fp[-1:], fp, fp[0:1]])
    if xp.dtype != x.dtype:
        xp = xp.astype(x.dtype)
    n = xp.shape[0]
    if n == 1:
        result = multiply(_core.ones_like(x), fp[0])
    else:
        upper = clip(searchsorted(xp, x, side="right"), 1, n - 1)
        lower = subtract(upper, 1)
        x0, x1 = take(xp, lower), take(xp, upper)
        f0, f1 = take(fp, lower), take(fp, upper)
        slope = true_divide(subtract(f1, f0), subtract(x1, x0))
        result = add(f0, multiply(slope, subtract(x, x0)))
        # x == xp[-1] lies at the end of the last segment: exactly fp[-1].
        result = where(_core.equal(x, xp[-1]), _broadcast_like(fp[-1], result), result)

    def edge_value(value, default):
        return _broadcast_like(default if value is None else
                              full((), value, dtype=result.dtype, device=result.device), result)

    result = where(less(x, xp[0]), edge_value(left, fp[0]), result)
    return where(greater(x, xp[-1]), edge_value(right, fp[-1]), result)


@_export
def bincount(x, weights=None, minlength=0):
    """Counts (int64) of each value 0..max(x) in the non-negative integer 1-d `x`, or the sums
    of `weights` per value; at least `minlength` bins."""
    x = _to_array(x)
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-d, got shape {x.shape}")
    if x.dtype.kind not in "iub":
        raise TypeError(f"bincount: x must be integers, got dtype {x.dtype}")
    if minlength is None or int(minlength) < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength!r}")
    if x.dtype.kind == "b":
        x = x.astype(_onp.int64)
    if x.size:
        smallest, largest = (int(r.item()) for r in (_core.min(x), _core.max(x)))
        if smallest < 0:
            raise ValueError(f"bincount: x must have no negative elements, found {smallest}")
    else:
        largest = -1
    length = builtins.max(largest + 1, int(minlength))
    if weights is None:
        values = _core.ones(x.shape, dtype=_onp.int64, device=x.device)
    else:
        values = _to_array(weights, device=x.device)
        if values.shape != x.shape:
            raise ValueError(f"bincount: weights of shape {values.shape} differ from x's "
                             f"{x.shape}")
        if not _is_float(values.dtype):
            values = values.astype(_onp.float64)
    totals = _core.zeros((length,), dtype=values.dtype, device=x.device)
    return _c_core.invoke("index_update", [totals, x.astype(_onp.int64), values],
                          {"axis": 0, "accumulate": True})[0]


@_export
def count_nonzero(a, axis=None, keepdims=False):
    """The number (int64) of non-zero elements, over `axis` (all if None)."""
    a = _to_array(a)
    nonzero = _core.not_equal(a, 0) if a.dtype != _onp.bool_ else a
    return _core.sum(nonzero, axis=axis, keepdims=keepdims).astype(_onp.int64)
