"""Array manipulation for `pymx.np`: padding, rolling, rotating, differences, insertion and
deletion, diagonals and triangles, Kronecker and cross products, splitting and stacking.

Every function is a composition of existing operators (slice, take, concatenate, where,
multiply, ...), so it runs on the input's device, autograd records it and hybridize traces it.
Index maps that depend only on shapes (pad, insert, delete, diagonal) are computed on the host
and applied on the device with one `take`, whose gradient sums the contributions of repeated
indices.

Differences from NumPy (as in MXNet, or for a stated reason):
  * atleast_1d/2d/3d return a list when given several arrays (MXNet; NumPy 2 a tuple).
  * pad supports modes constant, edge, reflect, symmetric, wrap, maximum, minimum and mean
    (the statistic over the whole axis: no stat_length), and reflect_type 'even' only.
  * insert and delete take integer, slice or integer-sequence `obj` (no boolean masks).
"""
import builtins
import numbers

import numpy as _onp

from pymx.ndarray import ndarray
from pymx.numpy import _core
from pymx.numpy._creation import tri
from pymx.numpy._core import (_to_array, broadcast_to, concatenate, flip, full,
                              moveaxis, multiply, ravel, reshape, split, subtract, take,
                              transpose, where)

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _is_int(value):
    return isinstance(value, (numbers.Integral, _onp.integer)) and not isinstance(value, bool)


def _normalize_axis(axis, ndim, what):
    if not _is_int(axis):
        raise TypeError(f"{what}: axis must be an integer, got {axis!r}")
    if not -ndim <= axis < builtins.max(ndim, 1):
        raise _onp.exceptions.AxisError(f"{what}: axis {axis} is out of bounds for array of "
                                        f"dimension {ndim}")
    return int(axis) % builtins.max(ndim, 1)


def _slice_along(a, axis, start=None, stop=None):
    """a[..., start:stop, ...] with the slice on `axis`."""
    return a[(slice(None),) * axis + (slice(start, stop),)]


def _take_along(a, axis, positions):
    """a's entries at host-computed `positions` along `axis` (one gather on the device)."""
    positions = _onp.asarray(positions, dtype=_onp.int64)
    return take(a, _to_array(positions, device=a.device), axis=axis)


# ---------------------------------------------------------------------------------------------
# Padding
# ---------------------------------------------------------------------------------------------

def _as_pairs(value, ndim, name, as_index):
    """NumPy's broadcasting of pad_width / constant_values to one (before, after) per axis."""
    pairs = _onp.asarray(value)
    if as_index:
        if pairs.size and (pairs.dtype.kind not in "iu" or (pairs < 0).any()):
            raise ValueError(f"pad: {name} must be non-negative integers, got {value!r}")
        pairs = pairs.astype(_onp.int64)
    try:
        return [tuple(p) for p in _onp.broadcast_to(pairs, (ndim, 2)).tolist()]
    except ValueError:
        raise ValueError(f"pad: {name} {value!r} cannot be broadcast to one (before, after) "
                         f"pair for each of the {ndim} axes") from None


def _pad_positions(mode, n, before, after):
    """Source positions along an axis of length n for each position of the padded axis."""
    j = _onp.arange(-before, n + after)
    if mode == "edge":
        return _onp.clip(j, 0, n - 1)
    if mode == "wrap":
        return j % n
    if mode == "symmetric":
        j = j % (2 * n)
        return _onp.where(j >= n, 2 * n - 1 - j, j)
    # reflect: the edge is not repeated, so the pattern has period 2(n - 1).
    if n == 1:
        return _onp.zeros_like(j)
    j = j % (2 * (n - 1))
    return _onp.where(j >= n, 2 * (n - 1) - j, j)


_STAT_MODES = {"maximum": "max", "minimum": "min", "mean": "mean"}
_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap") + tuple(_STAT_MODES)


@_export
def pad(x, pad_width, mode="constant", **kwargs):
    """Pads `x` with `pad_width` (an int, (n,), (before, after) or one pair per axis) entries
    per axis. mode: 'constant' (constant_values, default 0), 'edge', 'reflect', 'symmetric',
    'wrap', or the axis' 'maximum', 'minimum' or 'mean'."""
    x = _to_array(x)
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode {mode!r} is not supported; expected one of {_PAD_MODES}")
    allowed = {"constant": {"constant_values"}, "reflect": {"reflect_type"},
               "symmetric": {"reflect_type"}}.get(mode, set())
    unexpected = set(kwargs) - allowed
    if unexpected:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: "
                         f"{sorted(unexpected)}")
    if kwargs.get("reflect_type", "even") != "even":
        raise ValueError(f"pad: only reflect_type='even' is supported, got "
                         f"{kwargs['reflect_type']!r}")
    widths = _as_pairs(pad_width, x.ndim, "pad_width", as_index=True)
    constants = _as_pairs(kwargs.get("constant_values", 0), x.ndim, "constant_values",
                          as_index=False)
    for axis, (before, after) in enumerate(widths):
        if before == 0 and after == 0:
            continue
        n = x.shape[axis]
        edge_shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]

        def block(width, value):
            return broadcast_to(value, edge_shape[:axis] + (width,) + edge_shape[axis + 1:])

        if mode == "constant":
            before_value, after_value = (full(edge_shape, c, dtype=x.dtype, device=x.device)
                                         for c in constants[axis])
            x = concatenate([block(before, before_value), x, block(after, after_value)],
                            axis=axis)
            continue
        if n == 0:
            raise ValueError(f"pad: can't extend empty axis {axis} using modes other than "
                             f"'constant'")
        if mode in _STAT_MODES:
            stat = getattr(_core, _STAT_MODES[mode])(x, axis=axis, keepdims=True)
            if mode == "mean" and x.dtype.kind in "iub":
                # NumPy rounds the mean for integers; a boolean one is True unless it is 0.
                stat = (stat if x.dtype.kind == "b" else _core.round(stat)).astype(x.dtype)
            x = concatenate([block(before, stat), x, block(after, stat)], axis=axis)
            continue
        x = _take_along(x, axis, _pad_positions(mode, n, before, after))
    return x


# ---------------------------------------------------------------------------------------------
# Rolling, rotating, dimensions
# ---------------------------------------------------------------------------------------------

@_export
def roll(a, shift, axis=None):
    """Shifts elements along `axis` (the flattened array if None), those past the end coming
    back at the start. `shift` and `axis` may be tuples (broadcast against each other)."""
    a = _to_array(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    shifts, axes = _onp.broadcast_arrays(_onp.asarray(shift), _onp.asarray(axis))
    if shifts.ndim > 1:
        raise ValueError(f"roll: shift {shift!r} and axis {axis!r} must be ints or 1-d")
    total = {}
    for s, ax in zip(shifts.reshape(-1).tolist(), axes.reshape(-1).tolist()):
        ax = _normalize_axis(ax, a.ndim, "roll")
        total[ax] = total.get(ax, 0) + int(s)
    for ax, s in total.items():
        n = a.shape[ax]
        if n == 0 or s % n == 0:
            continue
        cut = n - s % n
        a = concatenate([_slice_along(a, ax, cut), _slice_along(a, ax, 0, cut)], axis=ax)
    return a


@_export
def rot90(m, k=1, axes=(0, 1)):
    """Rotates by 90 degrees k times in the plane of `axes`, from the first axis towards the
    second."""
    m = _to_array(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError(f"rot90: len(axes) must be 2, got axes={axes}")
    if m.ndim < 2:
        raise ValueError(f"rot90: the array must have at least 2 dimensions, got {m.ndim}")
    if axes[0] == axes[1] or builtins.abs(axes[0] - axes[1]) == m.ndim:
        raise ValueError(f"rot90: axes must be different, got axes={axes}")
    if not builtins.all(-m.ndim <= ax < m.ndim for ax in axes):
        raise ValueError(f"rot90: axes={axes} out of range for array of ndim={m.ndim}")
    k = int(k) % 4
    if k == 0:
        return _core.copy(m)
    if k == 2:
        return flip(flip(m, axes[0]), axes[1])
    order = list(range(m.ndim))
    order[axes[0]], order[axes[1]] = order[axes[1]], order[axes[0]]
    if k == 1:
        return transpose(flip(m, axes[1]), tuple(order))
    return flip(transpose(m, tuple(order)), axes[1])


def _atleast(arys, ndim, shape_for):
    results = []
    for a in arys:
        a = _to_array(a)
        results.append(a if a.ndim >= ndim else reshape(a, shape_for(a)))
    return results[0] if len(results) == 1 else results


@_export
def atleast_1d(*arys):
    """Each input as an array of at least 1 dimension (0-d becomes shape (1,))."""
    return _atleast(arys, 1, lambda a: (1,))


@_export
def atleast_2d(*arys):
    """Each input with at least 2 dimensions: (n,) becomes (1, n)."""
    return _atleast(arys, 2, lambda a: (1,) * (2 - a.ndim) + a.shape)


@_export
def atleast_3d(*arys):
    """Each input with at least 3 dimensions: (n,) becomes (1, n, 1), (m, n) becomes
    (m, n, 1)."""
    return _atleast(arys, 3, lambda a: {0: (1, 1, 1), 1: (1,) + a.shape + (1,)}.get(
        a.ndim, a.shape + (1,)))


# ---------------------------------------------------------------------------------------------
# Differences, appending, inserting, deleting
# ---------------------------------------------------------------------------------------------

@_export
def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th discrete difference a[i+1] - a[i] along `axis` (not-equal for booleans)."""
    a = _to_array(a)
    if not _is_int(n) or n < 0:
        raise ValueError(f"diff: order must be a non-negative integer but got {n!r}")
    if a.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = _normalize_axis(axis, a.ndim, "diff")
    pieces = []
    for extra in (prepend, a, append):
        if extra is None:
            continue
        extra = _to_array(extra, device=a.device, dtype=None if isinstance(extra, ndarray)
                          else a.dtype)
        if extra.ndim == 0:
            extra = broadcast_to(extra, a.shape[:axis] + (1,) + a.shape[axis + 1:])
        pieces.append(extra)
    if len(pieces) > 1:
        a = concatenate(pieces, axis=axis)
    for _ in range(n):
        later, earlier = _slice_along(a, axis, 1), _slice_along(a, axis, None, -1)
        a = _core.not_equal(later, earlier) if a.dtype == _onp.bool_ else \
            subtract(later, earlier)
    return a


@_export
def ediff1d(ary, to_end=None, to_begin=None):
    """Differences between consecutive elements of the flattened array, with optional values
    before and after."""
    ary = ravel(_to_array(ary))
    pieces = [] if to_begin is None else [ravel(_to_array(to_begin, device=ary.device,
                                                            dtype=ary.dtype))]
    pieces.append(subtract(ary[1:], ary[:-1]) if ary.size else ary)
    if to_end is not None:
        pieces.append(ravel(_to_array(to_end, device=ary.device, dtype=ary.dtype)))
    return concatenate(pieces) if len(pieces) > 1 else pieces[0]


@_export
def append(arr, values, axis=None):
    """arr with `values` appended along `axis` (both flattened when axis is None)."""
    arr = _to_array(arr)
    values = _to_array(values, device=arr.device)
    if axis is None:
        return concatenate([ravel(arr), ravel(values)])
    return concatenate([arr, values], axis=axis)


def _positions(obj, n, what):
    """obj (an int, slice or sequence of ints) as int64 positions in [0, n), NumPy's checks."""
    if isinstance(obj, slice):
        return _onp.arange(*obj.indices(n), dtype=_onp.int64)
    if isinstance(obj, ndarray):
        obj = obj.asnumpy()
    positions = _onp.asarray(obj)
    if positions.dtype == _onp.bool_ or (positions.size and positions.dtype.kind not in "iu"):
        raise TypeError(f"{what}: index arrays must be integers, got {obj!r}")
    positions = positions.astype(_onp.int64)
    bad = (positions < -n) | (positions >= n)
    if bad.any():
        raise IndexError(f"{what}: index {int(positions[bad].reshape(-1)[0])} is out of bounds "
                         f"for axis with size {n}")
    return positions % n if n else positions


@_export
def insert(arr, obj, values, axis=None):
    """arr with `values` inserted before the positions `obj` (int, slice or ints) along `axis`
    (the flattened array if None)."""
    arr = _to_array(arr)
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = _normalize_axis(axis, arr.ndim, "insert")
    n = arr.shape[axis]
    values = _to_array(values, device=arr.device, dtype=None if isinstance(values, ndarray)
                       else arr.dtype)
    if values.dtype != arr.dtype:
        values = values.astype(arr.dtype)
    if _is_int(obj):
        if not -n <= obj <= n:
            raise IndexError(f"insert: index {obj} is out of bounds for axis {axis} with size "
                             f"{n}")
        # A scalar position inserts `values` as a block: its first axis runs along `axis`.
        values = reshape(values, (1,) * (arr.ndim - values.ndim) + values.shape) \
            if values.ndim < arr.ndim else values
        values = moveaxis(values, 0, axis)
        count = values.shape[axis]
        where_new = _onp.full(count, obj + n if obj < 0 else obj, dtype=_onp.int64)
    else:
        if isinstance(obj, slice):
            where_new = _onp.arange(*obj.indices(n), dtype=_onp.int64)
        else:
            where_new = _onp.asarray(obj.asnumpy() if isinstance(obj, ndarray) else obj)
            if where_new.size and where_new.dtype.kind not in "iu":
                raise TypeError(f"insert: index arrays must be integers, got {obj!r}")
            where_new = where_new.astype(_onp.int64).reshape(-1)
            bad = (where_new < -n) | (where_new > n)
            if bad.any():
                raise IndexError(f"insert: index {int(where_new[bad][0])} is out of bounds for "
                                 f"axis {axis} with size {n}")
            where_new = _onp.where(where_new < 0, where_new + n, where_new)
        count = where_new.size
    shape = arr.shape[:axis] + (count,) + arr.shape[axis + 1:]
    values = broadcast_to(values, shape)
    # New entry j lands at where_new[j] + (number of new entries before it, stably sorted).
    order = _onp.argsort(where_new, kind="stable")
    landing = _onp.empty(count, dtype=_onp.int64)
    landing[order] = where_new[order] + _onp.arange(count)
    source = _onp.empty(n + count, dtype=_onp.int64)
    is_new = _onp.zeros(n + count, dtype=bool)
    is_new[landing] = True
    source[landing] = n + _onp.arange(count)
    source[~is_new] = _onp.arange(n)
    return _take_along(concatenate([arr, values], axis=axis), axis, source)


@_export
def delete(arr, obj, axis=None):
    """arr without the entries at positions `obj` (int, slice or ints) along `axis` (the
    flattened array if None)."""
    arr = _to_array(arr)
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = _normalize_axis(axis, arr.ndim, "delete")
    n = arr.shape[axis]
    keep = _onp.ones(n, dtype=bool)
    keep[_positions(obj, n, "delete")] = False
    return _take_along(arr, axis, _onp.flatnonzero(keep))


# ---------------------------------------------------------------------------------------------
# Diagonals and triangles
# ---------------------------------------------------------------------------------------------

@_export
def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal at `offset` of the 2-d sub-arrays in axes (axis1, axis2), as the last axis
    of the result."""
    a = _to_array(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal requires an array of at least two dimensions, got {a.ndim}")
    axis1 = _normalize_axis(axis1, a.ndim, "diagonal")
    axis2 = _normalize_axis(axis2, a.ndim, "diagonal")
    if axis1 == axis2:
        raise ValueError(f"diagonal: axis1 and axis2 cannot be the same, got {axis1}")
    a = moveaxis(a, (axis1, axis2), (-2, -1))
    rows, cols = a.shape[-2:]
    offset = int(offset)
    length = builtins.max(0, builtins.min(rows, cols - offset) if offset >= 0
                          else builtins.min(rows + offset, cols))
    start = offset if offset >= 0 else -offset * cols
    flat = reshape(a, a.shape[:-2] + (rows * cols,))
    return _take_along(flat, flat.ndim - 1, start + _onp.arange(length) * (cols + 1))


@_export
def trace(a, offset=0, axis1=0, axis2=1):
    """The sums of the diagonals at `offset` of the 2-d sub-arrays in axes (axis1, axis2). Only
    the diagonal is summed: multiplying by an identity mask would turn a NaN or inf off the
    diagonal into a NaN in the sum."""
    a = _to_array(a)
    if a.ndim < 2:
        raise ValueError(f"trace: the array must have at least 2 dimensions, got shape {a.shape}")
    _core._normalized_axes((axis1, axis2), a.ndim, "trace: axis1 and axis2")  # names both
    return _core.sum(diagonal(a, offset, axis1, axis2), axis=-1)


@_export
def diag(v, k=0):
    """The k-th diagonal of a 2-d array, or a 2-d array with the 1-d `v` on its k-th
    diagonal."""
    v = _to_array(v)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError(f"diag: input must be 1-d or 2-d, got {v.ndim}-d of shape {v.shape}")
    k = int(k)
    size = v.shape[0] + builtins.abs(k)
    padded = concatenate([v, _core.zeros((builtins.abs(k),), dtype=v.dtype, device=v.device)])
    mask = _core.eye(size, k=k, dtype=_onp.bool_, device=v.device)
    # Row i holds v[i] at (i, i + k) for k >= 0; column j holds v[j] at (j - k, j) for k < 0.
    values = reshape(padded, (-1, 1) if k >= 0 else (1, -1))
    return where(mask, broadcast_to(values, (size, size)),
                 _core.zeros((), dtype=v.dtype, device=v.device))


@_export
def diagflat(v, k=0):
    """A 2-d array with the flattened `v` on its k-th diagonal."""
    return diag(ravel(_to_array(v)), k)


def _triangle(m, k, lower):
    m = _to_array(m)
    if m.ndim == 0:
        raise ValueError(f"{'tril' if lower else 'triu'}: input must be at least 1-d, got a "
                         f"0-d array")
    rows, cols = (m.shape[0], m.shape[0]) if m.ndim == 1 else m.shape[-2:]
    mask = tri(rows, cols, k=int(k) if lower else int(k) - 1, dtype=_onp.bool_, device=m.device)
    zero = _core.zeros((), dtype=m.dtype, device=m.device)
    # where, not multiply: 0 * inf would put NaN in the zeroed triangle.
    return where(mask, m, zero) if lower else where(mask, zero, m)


@_export
def tril(m, k=0):
    """m with the elements above the k-th diagonal zeroed (on the last two axes; a 1-d m is
    first broadcast to a square)."""
    return _triangle(m, k, lower=True)


@_export
def triu(m, k=0):
    """m with the elements below the k-th diagonal zeroed (on the last two axes)."""
    return _triangle(m, k, lower=False)


# ---------------------------------------------------------------------------------------------
# Products
# ---------------------------------------------------------------------------------------------

@_export
def kron(a, b):
    """Kronecker product: blocks a[i, j, ...] * b."""
    a = _to_array(a)
    b = _to_array(b, device=a.device)
    ndim = builtins.max(a.ndim, b.ndim)
    a_shape = (1,) * (ndim - a.ndim) + a.shape
    b_shape = (1,) * (ndim - b.ndim) + b.shape
    # Interleave the axes: a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...).
    a_spread = reshape(a, tuple(d for n in a_shape for d in (n, 1)))
    b_spread = reshape(b, tuple(d for n in b_shape for d in (1, n)))
    return reshape(multiply(a_spread, b_spread),
                   tuple(x * y for x, y in zip(a_shape, b_shape)))


@_export
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of vectors of 2 or 3 components along axisa / axisb (broadcast); 2-vectors
    have z = 0, and two 2-vectors give the z component only."""
    a = _to_array(a)
    b = _to_array(b, device=a.device)
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(a, _normalize_axis(axisa, a.ndim, "cross (axisa)"), -1)
    b = moveaxis(b, _normalize_axis(axisb, b.ndim, "cross (axisb)"), -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(f"incompatible dimensions for cross product (dimension must be 2 or "
                         f"3), got {a.shape[-1]} and {b.shape[-1]}")
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return subtract(multiply(a[..., 0], b[..., 1]), multiply(a[..., 1], b[..., 0]))

    def components(v):
        zero = _core.zeros(v.shape[:-1], dtype=v.dtype, device=v.device)
        return [v[..., i] for i in range(v.shape[-1])] + ([zero] if v.shape[-1] == 2 else [])

    (a0, a1, a2), (b0, b1, b2) = components(a), components(b)
    x = subtract(multiply(a1, b2), multiply(a2, b1))
    y = subtract(multiply(a2, b0), multiply(a0, b2))
    z = subtract(multiply(a0, b1), multiply(a1, b0))
    x, y, z = _core.broadcast_arrays(x, y, z)
    result = _core.stack([x, y, z], axis=-1)
    return moveaxis(result, -1, _normalize_axis(axisc, result.ndim, "cross (axisc)"))


# ---------------------------------------------------------------------------------------------
# Splitting, stacking, resizing
# ---------------------------------------------------------------------------------------------

@_export
def hsplit(ary, indices_or_sections):
    """split along axis 1 (axis 0 for 1-d arrays)."""
    ary = _to_array(ary)
    if ary.ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, axis=1 if ary.ndim > 1 else 0)


@_export
def vsplit(ary, indices_or_sections):
    """split along axis 0 of an array of at least 2 dimensions."""
    ary = _to_array(ary)
    if ary.ndim < 2:
        raise ValueError(f"vsplit only works on arrays of 2 or more dimensions, got {ary.ndim}")
    return split(ary, indices_or_sections, axis=0)


@_export
def dsplit(ary, indices_or_sections):
    """split along axis 2 of an array of at least 3 dimensions."""
    ary = _to_array(ary)
    if ary.ndim < 3:
        raise ValueError(f"dsplit only works on arrays of 3 or more dimensions, got {ary.ndim}")
    return split(ary, indices_or_sections, axis=2)


@_export
def dstack(tup):
    """Concatenates along the third axis after making every array at least 3-d."""
    arrays = _core._sequence(tup, "dstack")
    return concatenate([atleast_3d(a) for a in arrays], axis=2)


row_stack = _core.vstack
__all__.append("row_stack")


@_export
def resize(a, new_shape):
    """An array of `new_shape` filled with a's elements in order, repeated as needed (zeros if
    a is empty)."""
    a = _to_array(a)
    new_shape = _core._shape_tuple(new_shape)
    if builtins.any(d < 0 for d in new_shape):
        raise ValueError(f"resize: all elements of new_shape must be non-negative, got "
                         f"{new_shape}")
    size = int(_onp.prod(new_shape, dtype=_onp.int64))
    if a.size == 0 or size == 0:
        return _core.zeros(new_shape, dtype=a.dtype, device=a.device)
    flat = ravel(a)
    repeats = -(-size // a.size)
    if repeats > 1:
        flat = _core.tile(flat, (repeats,))
    return reshape(flat[:size], new_shape)
