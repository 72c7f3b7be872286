"""Batchify functions: merge a list of samples into a batch (MXNet gluon/data/batchify.py).

Note [Batches made in worker processes]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
MXNet's workers write batches into shared-memory NDArrays. pymx workers build each batch as a
NumPy array wrapped in ``HostBatch`` (cheap to pickle, no device memory in the child) and the
main process turns every HostBatch into a pymx array on the target device (cpu, or pinned memory
when pin_memory=True) with one copy. ``_in_worker`` is set by the DataLoader's worker
initializer; a user batchify that returns pymx arrays still works, as ``to_host`` converts them
before the batch leaves the worker.
"""
import math
import warnings

import numpy as onp

from ... import numpy as _np
from ...base import as_dtype, bfloat16
from ...ndarray import ndarray

__all__ = ["Stack", "Pad", "Group", "AsList"]

_in_worker = False   # True inside DataLoader worker processes; see Note above


class HostBatch:
    """A batch array made in a worker process, waiting to become a pymx array."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array


def _make_batch(array, dtype=None):
    """A batch of the NumPy values `array` in `dtype` (default: theirs); bfloat16 is rounded by
    pymx (NumPy has no such type) and travels from a worker as its bits."""
    if dtype is not None and as_dtype(dtype) == bfloat16:
        batch = _np.array(array, dtype=bfloat16)
        return HostBatch(batch._host_values()) if _in_worker else batch
    array = onp.asarray(array, dtype=dtype)
    if _in_worker:
        return HostBatch(array)
    return _np.array(array, dtype=array.dtype)


def to_host(batch):
    """Replaces the pymx arrays of a (nested list/tuple) batch by HostBatch objects (bfloat16
    arrays as their bits, which to_device takes back as they are)."""
    if isinstance(batch, ndarray):
        return HostBatch(batch._host_values())
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_host(b) for b in batch)
    return batch


def to_device(batch, device, move_arrays=False):
    """Replaces the HostBatch objects of a (nested list/tuple) batch by pymx arrays on device;
    with move_arrays, pymx arrays elsewhere are copied there too."""
    if isinstance(batch, HostBatch):
        return _np.array(batch.array, dtype=batch.array.dtype, device=device)
    if isinstance(batch, ndarray):
        return batch.to_device(device) if move_arrays else batch
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(b, device, move_arrays) for b in batch)
    return batch


def _check_equal_shapes(samples):
    """Names the first sample whose shape differs (NumPy's stack error names none)."""
    shapes = [getattr(x, 'shape', None) for x in samples]
    for i, shape in enumerate(shapes):
        if shape is not None and shapes[0] is not None and tuple(shape) != tuple(shapes[0]):
            raise ValueError(f"Stack: all samples must have the same shape, but sample 0 has "
                             f"shape {tuple(shapes[0])} and sample {i} has shape {tuple(shape)} "
                             f"(batchify.Pad pads samples of different lengths)")


class Stack:
    """Stacks samples of equal shape along a new first axis.

    pymx arrays are stacked with ``np.stack`` (on their device); NumPy arrays, scalars and lists
    go through ``numpy.asarray`` and keep its dtype (Python ints give int64, floats float64, as
    in MXNet). A sample that is a tuple or list of fields gives a list with one batch per field.
    ``use_shared_mem`` is accepted for MXNet compatibility; see Note [Batches made in worker
    processes] for why pymx does not need it.
    """

    def __init__(self, use_shared_mem=False):
        self._use_shared_mem = use_shared_mem

    def __call__(self, data):
        if len(data) == 0:
            raise ValueError("Stack: cannot make a batch of no samples")
        first = data[0]
        _check_equal_shapes(data)
        if isinstance(first, ndarray):
            if _in_worker:
                return HostBatch(onp.stack([x._host_values() for x in data]))
            return _np.stack(data)
        if isinstance(first, (tuple, list)):
            return [self(list(field)) for field in zip(*data)]
        return _make_batch(data)


def _pad_to_max_length(arrays, pad_val, dtype, round_to):
    """The samples padded and stacked as NumPy values, and the batch's dtype (bfloat16 samples
    and batches are padded as float32, which holds their values exactly)."""
    if isinstance(arrays[0], ndarray):
        dtype = arrays[0].dtype if dtype is None else as_dtype(dtype)
        arrays = [a.asnumpy() for a in arrays]
    else:
        arrays = [onp.asarray(a) for a in arrays]
        dtype = arrays[0].dtype if dtype is None else as_dtype(dtype)
    ndims = {a.ndim for a in arrays}
    if len(ndims) != 1:
        raise ValueError("Pad: all samples must have the same number of dimensions, "
                         "but got %s" % sorted(ndims))
    shape = [max(a.shape[axis] for a in arrays) for axis in range(arrays[0].ndim)]
    if round_to is not None:
        shape = [round_to * math.ceil(size / round_to) for size in shape]
    out = onp.full([len(arrays)] + shape, pad_val,
                   dtype=onp.float32 if dtype == bfloat16 else dtype)
    for i, a in enumerate(arrays):
        out[(i,) + tuple(slice(0, n) for n in a.shape)] = a
    return out, dtype


class Pad:
    """Pads samples (NumPy arrays, lists of numbers or pymx arrays) with ``val`` to the largest
    size in every dimension, rounded up to a multiple of ``round_to`` if given, and stacks them.
    ``dtype`` defaults to the samples' dtype.

    >>> Pad()([[1, 2, 3, 4], [4, 5, 6], [8, 2]])     # -> [[1 2 3 4] [4 5 6 0] [8 2 0 0]]
    """

    def __init__(self, val=None, dtype=None, round_to=None, use_shared_mem=False):
        self._pad_val = 0 if val is None else val
        self._dtype = dtype
        self._round_to = round_to
        self._use_shared_mem = use_shared_mem
        self._warned = False

    def __call__(self, data):
        if isinstance(data[0], ndarray) and not self._warned:
            self._warned = True
            warnings.warn("Using Pad with NDArrays is discouraged for speed reasons. "
                          "Instead you should pad your data while it is still a list "
                          "and before converting to an NDArray. "
                          "Alternatively you can consider inputting a numpy.ndarray.")
        if not isinstance(data[0], (ndarray, onp.ndarray, list)):
            raise NotImplementedError(
                "Pad() does not support multiple items, use Group(Pad(), Pad(), ...) instead")
        return _make_batch(*_pad_to_max_length(data, self._pad_val, self._dtype, self._round_to))


class Group:
    """Applies the i-th batchify function to the i-th field of every sample; returns a tuple.
    ``Group(A, B)`` and ``Group([A, B])`` are the same."""

    def __init__(self, fn, *args):
        if isinstance(fn, (list, tuple)):
            if args:
                raise ValueError("Input pattern not understood. The input of Group can be "
                                 "Group(A, B, C) or Group([A, B, C]) or Group((A, B, C)). "
                                 "Received fn=%s, args=%s" % (fn, args))
            self._fn = tuple(fn)
        else:
            self._fn = (fn,) + args
        for i, ele_fn in enumerate(self._fn):
            if not callable(ele_fn):
                raise TypeError("Batchify functions must be callable! type(fn[%d]) = %s"
                                % (i, type(ele_fn)))

    def __call__(self, data):
        if len(data[0]) != len(self._fn):
            raise ValueError("The number of attributes in each data sample should contain %d "
                             "elements, but the first sample has %d"
                             % (len(self._fn), len(data[0])))
        return tuple(fn([sample[i] for sample in data]) for i, fn in enumerate(self._fn))


class AsList:
    """Returns the samples as a plain list (for text fields, with Group)."""

    def __call__(self, data):
        return list(data)
