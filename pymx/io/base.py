"""The data iterator interface (MXNet's mx.io.DataDesc, DataBatch and DataIter).

A DataIter yields DataBatch objects: `data` and `label` are lists of pymx arrays whose first
axis holds batch_size examples, `pad` counts the examples at the end of the batch that only
fill it up (to be ignored in prediction). `provide_data` / `provide_label` describe the arrays
as DataDesc (name, shape, dtype, layout).
"""
import numbers
from collections import namedtuple

import numpy as onp

__all__ = ["DataDesc", "DataBatch", "DataIter"]

LAST_BATCH_HANDLES = ("pad", "discard", "roll_over")


def check_batch_size(batch_size, what):
    """batch_size as an int, checked to be positive; `what` names the iterator in the error."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) \
            or batch_size < 1:
        raise ValueError(f"{what}: batch_size must be a positive int, got {batch_size!r}")
    return int(batch_size)


def check_last_batch_handle(last_batch_handle, what):
    """last_batch_handle, checked to be 'pad', 'discard' or 'roll_over'."""
    if last_batch_handle not in LAST_BATCH_HANDLES:
        raise ValueError(f"{what}: last_batch_handle must be one of {LAST_BATCH_HANDLES}, got "
                         f"{last_batch_handle!r}")
    return last_batch_handle


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """(name, shape) of a data or label array, with its `dtype` (float32 by default) and
    `layout` ('NCHW' by default; the position of 'N' is the batch axis)."""

    def __new__(cls, name, shape, dtype=onp.float32, layout="NCHW"):
        desc = super().__new__(cls, name, shape)
        desc.dtype = dtype
        desc.layout = layout
        return desc

    def __repr__(self):
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout):
        """The batch axis of `layout` (0 for None; -1 when it has no 'N')."""
        return 0 if layout is None else layout.find("N")

    @staticmethod
    def get_list(shapes, types):
        """DataDesc list from [(name, shape)] and, optionally, [(name, dtype)]."""
        if types is None:
            return [DataDesc(name, shape) for name, shape in shapes]
        dtypes = dict(types)
        return [DataDesc(name, shape, dtypes[name]) for name, shape in shapes]


class DataBatch:
    """One batch: `data` and `label` lists of arrays, `pad` (examples that only fill the
    batch), `index` (the examples' indices, if known), `bucket_key`, and the DataDesc lists
    `provide_data` / `provide_label`."""

    def __init__(self, data, label=None, pad=None, index=None, bucket_key=None,
                 provide_data=None, provide_label=None):
        if data is not None and not isinstance(data, (list, tuple)):
            raise TypeError(f"DataBatch: data must be a list of arrays, got "
                            f"{type(data).__name__}")
        if label is not None and not isinstance(label, (list, tuple)):
            raise TypeError(f"DataBatch: label must be a list of arrays, got "
                            f"{type(label).__name__}")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self):
        data_shapes = [d.shape for d in self.data]
        label_shapes = [lab.shape for lab in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data_shapes} label shapes: {label_shapes}"


class DataIter:
    """Base class of data iterators: iterate it (or call `next()`) for DataBatch objects until
    StopIteration; `reset()` starts the next epoch.

    A subclass defines either `next()`, or `iter_next()` (advance; False at the end) with
    `getdata`, `getlabel` and `getpad` (and optionally `getindex`) for the current batch."""

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def reset(self):
        """Starts the next epoch (nothing to do in the base class)."""

    def next(self):
        """The next DataBatch; raises StopIteration at the end of the epoch."""
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self):
        return self.next()

    def iter_next(self):
        """Moves to the next batch; returns whether there is one."""
        raise NotImplementedError(f"{type(self).__name__} must define next() or iter_next()")

    def getdata(self):
        """The current batch's data arrays."""
        raise NotImplementedError(f"{type(self).__name__} must define next() or getdata()")

    def getlabel(self):
        """The current batch's label arrays."""
        raise NotImplementedError(f"{type(self).__name__} must define next() or getlabel()")

    def getindex(self):
        """The current batch's example indices, None when unknown."""
        return None

    def getpad(self):
        """How many examples at the end of the current batch only fill it up."""
        raise NotImplementedError(f"{type(self).__name__} must define next() or getpad()")
