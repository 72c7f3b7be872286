"""Set routines for `pymx.np`: isin, in1d, intersect1d, union1d, setdiff1d, setxor1d,
trim_zeros.

isin and in1d keep the shape of their input, so they run on the device: the test elements are
sorted (the `sort` operator) and each element is looked up with `searchsorted` and compared
with the value found there. NaN is in no set, as in NumPy.

The other functions return as many elements as the values decide. Like unique, nonzero and
argwhere they wait for their inputs and compute with NumPy on the host (a hybridized block that
calls them runs imperatively); the results are new arrays on the first input's device.
trim_zeros only reads where the first and last non-zero are, and slices on the device, so it is
differentiable.
"""
import numpy as _onp

from pymx.ndarray import from_numpy, ndarray
from pymx.numpy import _core
from pymx.numpy._core import _host_result, _to_array, ravel, take
from pymx.numpy._einsum import _common_dtype
from pymx.numpy._searching import searchsorted

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _pair(ar1, ar2):
    """ar1 and ar2 as pymx arrays on one device (ar1's, or ar2's when only it is a pymx array)."""
    device = next((v.device for v in (ar1, ar2) if isinstance(v, ndarray)), None)
    ar1 = _to_array(ar1, device=device)
    return ar1, _to_array(ar2, device=ar1.device)


_KINDS = (None, "sort", "table")


@_export
def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """A boolean array shaped like `element`: whether each element is in `test_elements`
    (False with invert=True). Every `kind` gives the same result; assume_unique only allows a
    faster path in NumPy."""
    if kind not in _KINDS:
        raise ValueError(f"isin: kind must be None, 'sort' or 'table', got {kind!r}")
    element, test = _pair(element, test_elements)
    test = ravel(test)
    if test.size == 0:
        found = _core.zeros(element.shape, dtype=_onp.bool_, device=element.device)
    else:
        dtype = _common_dtype([element.dtype, test.dtype])
        values = element.astype(dtype, copy=False)
        ordered = _core.sort(test.astype(dtype, copy=False))
        at = _core.clip(searchsorted(ordered, values), 0, test.size - 1)
        found = _core.equal(take(ordered, at), values)
    return _core.logical_not(found) if invert else found


@_export
def in1d(ar1, ar2, assume_unique=False, invert=False, *, kind=None):
    """isin of the flattened ar1: a 1-d boolean array."""
    return ravel(isin(ar1, ar2, assume_unique=assume_unique, invert=invert, kind=kind))


def _host_pair(ar1, ar2):
    ar1, ar2 = _pair(ar1, ar2)
    return ar1, ar1.asnumpy(), ar2.asnumpy()


def _on_device(values, like, integer=False):
    return from_numpy(values.astype(_onp.int64), device=like.device) if integer else \
        _host_result(values, like)


@_export
def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    """The sorted unique values in both ar1 and ar2; with return_indices, also the int64
    positions of their first occurrences in the flattened ar1 and ar2."""
    like, a, b = _host_pair(ar1, ar2)
    result = _onp.intersect1d(a, b, assume_unique=assume_unique, return_indices=return_indices)
    if return_indices:
        values, first, second = result
        return (_on_device(values, like), _on_device(first, like, True),
                _on_device(second, like, True))
    return _on_device(result, like)


@_export
def union1d(ar1, ar2):
    """The sorted unique values in ar1 or ar2 (both flattened)."""
    like, a, b = _host_pair(ar1, ar2)
    return _on_device(_onp.union1d(a, b), like)


@_export
def setdiff1d(ar1, ar2, assume_unique=False):
    """The unique values of ar1 that are not in ar2, sorted (unless assume_unique, which keeps
    ar1's order)."""
    like, a, b = _host_pair(ar1, ar2)
    return _on_device(_onp.setdiff1d(a, b, assume_unique=assume_unique), like)


@_export
def setxor1d(ar1, ar2, assume_unique=False):
    """The sorted unique values in exactly one of ar1 and ar2."""
    like, a, b = _host_pair(ar1, ar2)
    return _on_device(_onp.setxor1d(a, b, assume_unique=assume_unique), like)


@_export
def trim_zeros(filt, trim="fb"):
    """The 1-d `filt` without its leading zeros ('f' in trim), trailing zeros ('b'), or both.
    Reads where the non-zeros are; the slice itself is on the device (and differentiable)."""
    if not isinstance(trim, str) or not set(trim.lower()) <= set("fb"):
        raise ValueError(f"trim_zeros: unexpected character(s) in trim: {trim!r}")
    filt = _to_array(filt)
    if filt.ndim != 1:
        raise ValueError(f"trim_zeros: filt must be 1-d, got shape {filt.shape}")
    nonzero = _onp.flatnonzero(filt.asnumpy())
    if nonzero.size == 0:
        return filt[0:0]
    trim = trim.lower()
    start = int(nonzero[0]) if "f" in trim else 0
    stop = int(nonzero[-1]) + 1 if "b" in trim else filt.shape[0]
    return filt[start:stop]
