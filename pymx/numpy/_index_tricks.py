"""Index tricks for `pymx.np`: take_along_axis, choose, select, piecewise, compress, extract,
rollaxis, ix_, unravel_index, diag/tril/triu_indices_from, flatnonzero, digitize,
apply_along_axis, apply_over_axes.

The functions whose result has a static shape are compositions of operators (take, where,
arithmetic), so they run on the array's device, autograd records them and hybridize traces them.
take_along_axis gathers with one `take` of the flattened array at computed flat positions: its
gradient scatters back, summing repeated indices. compress, extract, flatnonzero and ix_ with a
boolean mask turn the mask into positions on the host (the result's size depends on its values,
as for `nonzero`); the gather itself stays on the device and is differentiable.

Differences from NumPy:
  * piecewise calls each function on the whole of x and keeps its values where the condition
    holds (NumPy calls it on x[cond] only), so the functions must be elementwise.
  * digitize reads `bins` on the host when it is a pymx array (their order decides the search).
  * An index out of range (take_along_axis, choose with mode='raise', unravel_index of a pymx
    array) raises IndexError when the gather that checks it runs, at the next wait, without a
    host round trip. take_along_axis names the index; choose names a negative entry v as
    v - len(choices), and unravel_index the out-of-range leading coordinate (see
    `_checked_nonnegative`). Lists and NumPy arrays are checked at once with their own values,
    and raise ValueError as NumPy does.
"""
import builtins

import numpy as _onp

from pymx.base import bfloat16
from pymx.ndarray import from_numpy, ndarray
from pymx.numpy import _core
from pymx.numpy._core import (_normalized_axes, _to_array, arange, broadcast_arrays,
                              broadcast_to, expand_dims, moveaxis, ravel, reshape, take,
                              transpose, where)
from pymx.numpy._creation import tril_indices, triu_indices
from pymx.numpy._einsum import _common_dtype
from pymx.numpy._indexing import flat_positions
from pymx.numpy._manipulation import _is_int
from pymx.numpy._searching import searchsorted

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _index_array(indices, device, what):
    """`indices` as an integer pymx array; anything else is an IndexError naming the dtype."""
    if not isinstance(indices, ndarray):
        indices = _onp.asarray(indices)
        if indices.size == 0:  # an empty list reads as float64
            indices = indices.astype(_onp.int64)
    if indices.dtype.kind not in "iu":
        raise IndexError(f"{what}: indices must be an integer array, got dtype {indices.dtype}")
    return _to_array(indices, device=device)


def _checked(indices, n, axis, ndim):
    """`indices` (integer, any shape) with negatives counted from the end of an axis of size n,
    as int64; an entry outside [-n, n) makes the gather raise IndexError naming it, its axis
    and n. The table gathered from has n entries along `axis` of an `ndim`-d shape, so that the
    message names the caller's axis."""
    table_shape = [1] * ndim
    table_shape[axis] = n
    table = reshape(arange(n, dtype=_onp.int64, device=indices.device), tuple(table_shape))
    positions = take(table, ravel(indices), axis=axis, mode="raise")
    return reshape(positions, indices.shape)


def _checked_nonnegative(indices, n):
    """`indices` that must lie in [0, n) (no negatives), checked as `_checked` does; a negative
    entry v is sent to the gather as v - n, out of range whatever n, so the message names
    v - n. (Callers check entries known on the host themselves, naming their own values.)"""
    return _checked(where(indices < 0, indices - n, indices), n, 0, 1)


# ---------------------------------------------------------------------------------------------
# Gathering
# ---------------------------------------------------------------------------------------------

@_export
def take_along_axis(arr, indices, axis):
    """arr's values at `indices` along `axis` in each 1-d slice (None: of the flattened arr);
    indices has arr's number of dimensions and broadcasts with it along the other axes.
    Differentiable in arr: the gradient adds up the contributions of repeated indices."""
    arr = _to_array(arr)
    indices = _index_array(indices, arr.device, "take_along_axis")
    if axis is None:
        if indices.ndim != 1:
            raise ValueError(f"take_along_axis: when axis=None, indices must be 1-d, got shape "
                             f"{indices.shape}")
        arr, axis = ravel(arr), 0
    if indices.ndim != arr.ndim:
        raise ValueError(f"take_along_axis: indices of shape {indices.shape} and arr of shape "
                         f"{arr.shape} must have the same number of dimensions")
    axis = _normalized_axes(axis, arr.ndim, "take_along_axis")[0]
    try:
        shape = list(_onp.broadcast_shapes(
            arr.shape[:axis] + (1,) + arr.shape[axis + 1:],
            indices.shape[:axis] + (1,) + indices.shape[axis + 1:]))
    except ValueError:
        raise ValueError(f"take_along_axis: indices of shape {indices.shape} do not broadcast "
                         f"with arr of shape {arr.shape} outside axis {axis}") from None
    shape[axis] = arr.shape[axis]
    source = broadcast_to(arr, tuple(shape)) if tuple(shape) != arr.shape else arr
    positions = _checked(indices, arr.shape[axis], axis, arr.ndim)
    # Every element's coordinates: its own along the other axes, `positions` along `axis`.
    coordinates = [positions if d == axis else
                   reshape(arange(n, dtype=_onp.int64, device=arr.device),
                           (1,) * d + (n,) + (1,) * (arr.ndim - d - 1))
                   for d, n in enumerate(source.shape)]
    flat = flat_positions(broadcast_arrays(*coordinates), source.shape)
    return take(ravel(source), flat)


@_export
def choose(a, choices, out=None, mode="raise"):
    """choices[a[i]][i] for every i of the broadcast a and choices. mode 'raise' refuses an a
    outside [0, len(choices)), 'wrap' takes it modulo len(choices), 'clip' clips it.
    Differentiable in the choices."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    a_host = None if isinstance(a, ndarray) else _onp.asarray(a)
    choices = [_to_array(c) for c in choices] if not isinstance(choices, ndarray) else \
        [choices[i] for i in range(choices.shape[0])]
    n = len(choices)
    if n == 0:
        raise ValueError("choose: choices must not be empty")
    device = choices[0].device
    a = _index_array(a, device, "choose")
    if mode == "raise" and a_host is not None and a_host.size:
        outside = a_host[(a_host < 0) | (a_host >= n)]
        if outside.size:
            raise ValueError(f"choose: invalid entry {outside.flat[0]} in the choice array "
                             f"for {n} choices")
    dtype = _common_dtype([c.dtype for c in choices])
    stacked = _core.stack(broadcast_arrays(*[c.astype(dtype, copy=False) for c in choices] +
                                           [a])[:-1])
    if mode == "raise":
        a = _checked_nonnegative(a.astype(_onp.int64), n)
    elif mode == "wrap":
        a = _core.mod(a.astype(_onp.int64), n)
    else:
        a = _core.clip(a.astype(_onp.int64), 0, n - 1)
    a = broadcast_to(a, stacked.shape[1:])
    result = take_along_axis(stacked, expand_dims(a, 0), 0)[0]
    return result if out is None else _core.copyto(out, result)


@_export
def select(condlist, choicelist, default=0):
    """The element of the first choice whose condition holds, `default` where none does."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: list of cases must be same length as list of conditions, "
                         f"got {len(condlist)} conditions and {len(choicelist)} choices")
    if len(choicelist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    device = next((v.device for v in list(condlist) + list(choicelist) if isinstance(v, ndarray)),
                  None)
    conditions = [_to_array(c, device=device) for c in condlist]
    for i, c in enumerate(conditions):
        if c.dtype != _onp.bool_:
            raise TypeError(f"select: invalid entry {i} in condlist: should be boolean, got "
                            f"dtype {c.dtype}")
    device = conditions[0].device
    choices = [_to_array(c, device=device) for c in choicelist]
    if isinstance(default, ndarray):
        dtype = _common_dtype([c.dtype for c in choices] + [default.dtype])
    else:
        dtype = _common_dtype([c.dtype for c in choices])
        if dtype != bfloat16:  # a Python scalar default is weak, as in NumPy
            dtype = _onp.result_type(dtype, default)
        default = _core.full((), default, dtype=dtype, device=device)
    count = len(conditions)
    arrays = broadcast_arrays(*conditions, *choices, default)
    conditions = arrays[:count]
    result = arrays[-1].astype(dtype, copy=False)
    # Earlier conditions take precedence: apply them last.
    for condition, choice in zip(reversed(conditions), reversed(arrays[count:2 * count])):
        result = where(condition, choice.astype(dtype, copy=False), result)
    return result


@_export
def piecewise(x, condlist, funclist, *args, **kw):
    """funclist[i] (a function of x, or a value) where condlist[i] holds, later conditions
    overriding earlier ones; with one function more than conditions, the last applies where
    none holds. Elsewhere 0. The result has x's dtype and shape."""
    x = _to_array(x)
    if isinstance(condlist, (bool, _onp.bool_)) or (isinstance(condlist, ndarray) and
                                                   condlist.shape == x.shape) or \
            (isinstance(condlist, (list, tuple)) and condlist and x.ndim != 0 and
             not isinstance(condlist[0], (list, tuple, ndarray, _onp.ndarray))):
        condlist = [condlist]
    conditions = [broadcast_to(_to_array(c, device=x.device, dtype=_onp.bool_), x.shape)
                  for c in condlist]
    if len(funclist) == len(conditions) + 1:
        anything = conditions[0] if conditions else _core.zeros(x.shape, dtype=_onp.bool_,
                                                                device=x.device)
        for c in conditions[1:]:
            anything = _core.logical_or(anything, c)
        conditions.append(_core.logical_not(anything))
    elif len(funclist) != len(conditions):
        raise ValueError(f"piecewise: with {len(conditions)} condition(s), either "
                         f"{len(conditions)} or {len(conditions) + 1} functions are expected, "
                         f"got {len(funclist)}")
    result = _core.zeros_like(x)
    for condition, func in zip(conditions, funclist):
        values = func(x, *args, **kw) if callable(func) else func
        values = broadcast_to(_to_array(values, device=x.device, dtype=x.dtype), x.shape)
        result = where(condition, values.astype(x.dtype, copy=False), result)
    return result


def _mask_positions(condition, what):
    """The int64 positions (on the host) of the true entries of the 1-d `condition`."""
    values = condition.asnumpy() if isinstance(condition, ndarray) else _onp.asarray(condition)
    if values.ndim != 1:
        raise ValueError(f"{what}: condition must be a 1-d array, got shape {values.shape}")
    return _onp.flatnonzero(values).astype(_onp.int64)


@_export
def compress(condition, a, axis=None, out=None):
    """The slices of `a` along `axis` (None: the flattened a) where the 1-d `condition` is
    true; a condition shorter than the axis counts as false beyond its end. Reads the
    condition on the host; differentiable in a."""
    a = _to_array(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = _normalized_axes(axis, a.ndim, "compress")[0]
    positions = _mask_positions(condition, "compress")
    if positions.size and positions[-1] >= a.shape[axis]:
        raise IndexError(f"compress: condition has a true entry at {positions[-1]}, out of "
                         f"bounds for axis {axis} with size {a.shape[axis]}")
    result = take(a, _to_array(positions, device=a.device), axis=axis)
    return result if out is None else _core.copyto(out, result)


@_export
def extract(condition, arr):
    """The elements of the flattened arr where the flattened condition is non-zero, as a 1-d
    array. Reads the condition on the host; differentiable in arr."""
    arr = _to_array(arr)
    values = condition.asnumpy() if isinstance(condition, ndarray) else _onp.asarray(condition)
    positions = _onp.flatnonzero(values).astype(_onp.int64)
    if positions.size and positions[-1] >= arr.size:
        raise IndexError(f"extract: condition has a true entry at flat position "
                         f"{positions[-1]}, out of bounds for arr of size {arr.size}")
    return take(ravel(arr), _to_array(positions, device=arr.device))


@_export
def flatnonzero(a):
    """The int64 positions of the non-zero elements of the flattened a (computed on the host)."""
    a = _to_array(a)
    return from_numpy(_onp.flatnonzero(a.asnumpy()).astype(_onp.int64), device=a.device)


# ---------------------------------------------------------------------------------------------
# Axes and index grids
# ---------------------------------------------------------------------------------------------

@_export
def rollaxis(a, axis, start=0):
    """a with `axis` moved to just before position `start` (the other axes keep their order)."""
    a = _to_array(a)
    n = a.ndim
    axis = _normalized_axes(axis, n, "rollaxis")[0]
    if not _is_int(start):
        raise TypeError(f"rollaxis: start must be an integer, got {start!r}")
    if not -n <= start <= n:
        raise _onp.exceptions.AxisError(f"rollaxis: start arg requires {-n} <= start < {n + 1}, "
                                        f"but {start} was passed in")
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    if axis == start:
        return a
    axes = [d for d in range(n) if d != axis]
    axes.insert(start, axis)
    return transpose(a, tuple(axes))


@_export
def ix_(*args):
    """Open-mesh index arrays from 1-d sequences: the k-th of N has shape (1, .., len, .., 1)
    with the length on axis k, so that a[ix_(rows, cols)] is the cross product. Boolean
    sequences become the positions of their true entries (on the host)."""
    results = []
    count = len(args)
    device = next((v.device for v in args if isinstance(v, ndarray)), None)
    for k, seq in enumerate(args):
        if isinstance(seq, ndarray):
            if seq.dtype == _onp.bool_:
                seq = _onp.flatnonzero(seq.asnumpy()) if seq.ndim == 1 else seq.asnumpy()
        else:
            seq = _onp.asarray(seq)
            if seq.size == 0:
                seq = seq.astype(_onp.int64)
        if seq.ndim != 1:
            raise ValueError(f"ix_: cross index must be 1 dimensional, got argument {k} of shape "
                             f"{seq.shape}")
        if seq.dtype == _onp.bool_:
            seq = _onp.flatnonzero(seq)
        if seq.dtype.kind not in "iu":
            raise IndexError(f"ix_: arrays used as indices must be of integer (or boolean) type, "
                             f"got dtype {seq.dtype} for argument {k}")
        seq = _to_array(seq, device=device, dtype=None if isinstance(seq, ndarray) else
                        _onp.int64)
        results.append(reshape(seq, (1,) * k + (seq.size,) + (1,) * (count - k - 1)))
    return tuple(results)


def _dims(shape):
    dims = (int(shape),) if _is_int(shape) else tuple(shape)
    if not builtins.all(_is_int(d) and d >= 0 for d in dims):
        raise ValueError(f"unravel_index: dimensions must be non-negative integers, got {shape!r}")
    return tuple(int(d) for d in dims)


@_export
def unravel_index(indices, shape, order="C"):
    """The coordinates (a tuple of int64 arrays shaped like `indices`) of the flat `indices`
    in an array of `shape`, in row-major ('C') or column-major ('F') order."""
    if order not in ("C", "F"):
        raise ValueError(f"unravel_index: only 'C' or 'F' order is permitted, got {order!r}")
    dims = _dims(shape)
    size = int(_onp.prod(dims, dtype=_onp.int64))
    host = None if isinstance(indices, ndarray) else _onp.asarray(indices)
    flat = _index_array(indices, None, "unravel_index").astype(_onp.int64)
    if host is not None and host.size:
        outside = host[(host < 0) | (host >= size)]
        if outside.size:
            raise ValueError(f"unravel_index: index {outside.flat[0]} is out of bounds for "
                             f"array with size {size}")
    axes = range(len(dims) - 1, -1, -1) if order == "C" else range(len(dims))
    coordinates = [None] * len(dims)
    remaining = flat
    for i, axis in enumerate(axes):
        n = dims[axis]
        if i == len(dims) - 1:
            # The most significant coordinate keeps what is left: in [0, n) exactly when the
            # index lies in the array.
            coordinates[axis] = _checked_nonnegative(remaining, n) if host is None else remaining
        else:
            coordinates[axis] = _core.mod(remaining, n) if n else remaining
            remaining = _core.floor_divide(remaining, n) if n else remaining
    return tuple(coordinates)


@_export
def diag_indices_from(arr):
    """The indices of the main diagonal of `arr`, whose dimensions (at least 2) are all equal."""
    arr = _to_array(arr)
    if arr.ndim < 2:
        raise ValueError(f"diag_indices_from: input array must be at least 2-d, got shape "
                         f"{arr.shape}")
    if len(set(arr.shape)) != 1:
        raise ValueError(f"diag_indices_from: all dimensions of input must be of equal length, "
                         f"got shape {arr.shape}")
    diagonal = arange(arr.shape[0], dtype=_onp.int64, device=arr.device)
    return (diagonal,) * arr.ndim


def _two_dimensional(arr, what):
    arr = _to_array(arr)
    if arr.ndim != 2:
        raise ValueError(f"{what}: input array must be 2-d, got shape {arr.shape}")
    return arr


@_export
def tril_indices_from(arr, k=0):
    """(rows, cols) of the elements of the 2-d arr at and below its k-th diagonal."""
    arr = _two_dimensional(arr, "tril_indices_from")
    return tril_indices(arr.shape[-2], k=k, m=arr.shape[-1], device=arr.device)


@_export
def triu_indices_from(arr, k=0):
    """(rows, cols) of the elements of the 2-d arr at and above its k-th diagonal."""
    arr = _two_dimensional(arr, "triu_indices_from")
    return triu_indices(arr.shape[-2], k=k, m=arr.shape[-1], device=arr.device)


@_export
def digitize(x, bins, right=False):
    """The int64 index of the bin of each x: i with bins[i-1] <= x < bins[i] for increasing bins
    (bins[i-1] < x <= bins[i] with right=True), the mirror image for decreasing bins."""
    edges = bins.asnumpy() if isinstance(bins, ndarray) else _onp.asarray(bins)
    if edges.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-dimensional, got shape {edges.shape}")
    x = _to_array(x, device=bins.device if isinstance(bins, ndarray) else None)
    if edges.dtype.kind not in "biuf":
        raise TypeError(f"digitize: bins must be real numbers, got {bins!r}")
    increasing = bool((edges[1:] >= edges[:-1]).all())
    if not increasing and not (edges[1:] <= edges[:-1]).all():
        raise ValueError(f"digitize: bins must be monotonically increasing or decreasing, got "
                         f"{edges}")
    dtype = _common_dtype([x.dtype, edges.dtype])
    x = x.astype(dtype, copy=False)
    side = "left" if right else "right"
    if increasing:
        return searchsorted(_to_array(edges, device=x.device, dtype=dtype), x, side=side)
    reversed_edges = _to_array(edges[::-1].copy(), device=x.device, dtype=dtype)
    return edges.shape[0] - searchsorted(reversed_edges, x, side=side)


# ---------------------------------------------------------------------------------------------
# Applying functions over axes
# ---------------------------------------------------------------------------------------------

@_export
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """func1d(a_1d, *args, **kwargs) for every 1-d slice of arr along `axis`; the axes of its
    (common) result take the place of `axis`."""
    arr = _to_array(arr)
    axis = _normalized_axes(axis, arr.ndim, "apply_along_axis")[0]
    moved = moveaxis(arr, axis, -1)
    outer = moved.shape[:-1]
    if 0 in outer:
        raise ValueError(f"apply_along_axis: cannot apply when any iteration dimensions are 0 "
                         f"(array of shape {arr.shape}, axis {axis})")
    results = [_to_array(func1d(moved[index], *args, **kwargs), device=arr.device)
               for index in _onp.ndindex(*outer)]
    first = results[0]
    for index, r in zip(_onp.ndindex(*outer), results):
        if r.shape != first.shape:
            raise ValueError(f"apply_along_axis: func1d returned shape {r.shape} at {index} but "
                             f"{first.shape} at the first slice")
    stacked = reshape(_core.stack(results), outer + first.shape)
    # The result's own axes go where `axis` was.
    source = list(range(len(outer), len(outer) + first.ndim))
    return moveaxis(stacked, source, list(range(axis, axis + first.ndim))) if source else stacked


@_export
def apply_over_axes(func, a, axes):
    """func(a, axis) applied for each axis in turn; a result with one dimension fewer gets it
    back (size 1), so the result keeps a's number of dimensions."""
    result = _to_array(a)
    for axis in (axes,) if _is_int(axes) else axes:
        if axis < 0:
            axis += result.ndim
        reduced = _to_array(func(result, axis), device=result.device)
        if reduced.ndim == result.ndim - 1:
            reduced = expand_dims(reduced, axis)
        elif reduced.ndim != result.ndim:
            raise ValueError(f"apply_over_axes: function is not returning an array of the "
                             f"correct shape (got {reduced.ndim} dimensions for an input of "
                             f"{result.ndim})")
        result = reduced
    return result
