"""Sorting for `pymx.np` beyond sort and argsort: lexsort, partition, argpartition, msort.

All are built on the `sort` and `argsort` operators, so they run on the array's device and
hybridize traces them. partition and argpartition sort the whole axis: a sorted axis is one of
the results NumPy's partition contract allows (the k-th element where it would be in sorted
order, nothing larger before it, nothing smaller after it), so any kth, or several, give a valid
partition; NumPy leaves the order inside each side unspecified.
"""
import operator

import numpy as _onp

from pymx.ndarray import ndarray
from pymx.numpy import _core
from pymx.numpy._core import _ordering_axis, _to_array, argsort, ravel, sort
from pymx.numpy._index_tricks import take_along_axis

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


@_export
def lexsort(keys, axis=-1):
    """The int64 indices that sort by the last key, ties broken by the key before it, and so
    on (the first key is the least significant). keys: a sequence of arrays of one shape, or
    an array whose first axis indexes the keys."""
    if isinstance(keys, ndarray):
        keys = [keys[i] for i in range(keys.shape[0])] if keys.ndim > 0 else [keys]
    keys = [_to_array(k) for k in keys]
    if not keys:
        raise TypeError("lexsort: need a sequence of keys with len > 0")
    for i, k in enumerate(keys[1:], 1):
        if k.shape != keys[0].shape:
            raise ValueError(f"lexsort: all keys need to be the same shape, got key 0 of shape "
                             f"{keys[0].shape} and key {i} of shape {k.shape}")
        if k.device != keys[0].device:
            raise ValueError(f"lexsort: all keys need to be on one device, got key 0 on "
                             f"{keys[0].device} and key {i} on {k.device}")
    if keys[0].ndim == 0:
        return _core.zeros((), dtype=_onp.int64, device=keys[0].device)
    axis = _ordering_axis(keys[0].ndim, axis, "lexsort")
    # Stable sorts from the least significant key to the most: each keeps the order of the
    # previous ones among its ties.
    order = argsort(keys[0], axis=axis)
    for key in keys[1:]:
        order = take_along_axis(order, argsort(take_along_axis(key, order, axis), axis=axis),
                                axis)
    return order


def _check_kth(kth, n, what):
    """kth (an int or a sequence of ints) checked against an axis of size n."""
    values = [kth] if _onp.ndim(kth) == 0 else list(_onp.ravel(kth))
    for k in values:
        if isinstance(k, (bool, _onp.bool_)):
            raise TypeError(f"{what}: booleans are not valid partition indices, got kth={kth!r}")
        try:
            k = operator.index(k)
        except TypeError:
            raise TypeError(f"{what}: kth must be an integer or a sequence of integers, got "
                            f"{kth!r}") from None
        if not -n <= k < n:
            raise ValueError(f"{what}: kth(={k}) out of bounds ({n})")


def _partition_args(a, kth, axis, kind, order, what):
    if kind != "introselect":
        raise ValueError(f"{what}: kind must be 'introselect', got {kind!r}")
    if order is not None:
        raise ValueError(f"{what}: cannot specify order ({order!r}) when the array has no "
                         f"fields")
    a = _to_array(a)
    if axis is None:
        a, axis = ravel(a), -1
    if a.ndim == 0:
        raise _onp.exceptions.AxisError(f"{what}: axis {axis} is out of bounds for array of "
                                        f"dimension 0")
    axis = _ordering_axis(a.ndim, axis, what)
    _check_kth(kth, a.shape[axis], what)
    return a, axis


@_export
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """A copy of `a` whose element at each position in kth along `axis` (None: of the flattened
    a) is the one a sorted array would have there, with no larger element before it and no
    smaller one after it. NaNs sort last."""
    a, axis = _partition_args(a, kth, axis, kind, order, "partition")
    return sort(a, axis=axis)


@_export
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """The int64 indices that partition `a` as `partition` does."""
    a, axis = _partition_args(a, kth, axis, kind, order, "argpartition")
    return argsort(a, axis=axis)


@_export
def msort(a):
    """A copy of `a` sorted along its first axis."""
    return sort(a, axis=0)
