"""NDArrayIter (MXNet's mx.io.NDArrayIter): batches of in-memory arrays.

Note [NDArrayIter's cursor]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
As in MXNet, one integer `cursor` (the first example of the current batch) encodes the state:
- next() adds batch_size; the epoch ends when cursor >= num_data.
- 'pad': a batch that runs past the end is completed from the start of the data (tiled when
  the pad is longer than the data) and `getpad()` is cursor + batch_size - num_data.
- 'discard' and 'roll_over': a batch that runs past the end is not returned; next() keeps it in
  a cache and raises StopIteration. reset() under 'roll_over' then sets the cursor so that the
  first batch of the new epoch starts at cursor = -(cached examples): that batch is the cache
  followed by the first batch_size - cached examples, and getpad() reports the cached count
  (MXNet's value), though every example in it is real. The epoch then continues from there, so
  the remainder is carried into every following epoch.
- reset() reshuffles first (shuffle=True) and `hard_reset()` drops the cache.
"""
import numpy as onp

from .. import numpy as _np
from ..numpy import random as _np_random
from .base import DataBatch, DataDesc, DataIter, check_batch_size, check_last_batch_handle

__all__ = ["NDArrayIter"]

def _as_array(value, name):
    if isinstance(value, _np.ndarray):
        return value
    try:
        # a host array becomes float32, as MXNet's mx.nd.array makes it
        return _np.array(onp.asarray(value, dtype=onp.float32))
    except (TypeError, ValueError) as err:
        raise TypeError(f"NDArrayIter: {name} must be an array (pymx or NumPy), got "
                        f"{type(value).__name__}: {err}") from None


def _init_data(data, allow_empty, default_name):
    """[(name, pymx array)] sorted by name, from an array, a list of arrays or a dict."""
    if data is None:
        if not allow_empty:
            raise ValueError("NDArrayIter: data must be given")
        data = []
    if isinstance(data, (_np.ndarray, onp.ndarray)):
        data = [data]
    if isinstance(data, (list, tuple)):
        if not data and not allow_empty:
            raise ValueError("NDArrayIter: data must hold at least one array")
        if len(data) == 1:
            data = {default_name: data[0]}
        else:
            data = {f"_{i}_{default_name}": d for i, d in enumerate(data)}
    if not isinstance(data, dict):
        raise TypeError(f"NDArrayIter: {default_name} must be an array, a list of arrays or a "
                        f"dict of them, got {type(data).__name__}")
    items = sorted((name, _as_array(value, name)) for name, value in data.items())
    for name, value in items:
        if value.ndim == 0:
            raise ValueError(f"NDArrayIter: {name} must have an example axis, got a 0-d array")
    return items


class NDArrayIter(DataIter):
    """Batches of `data` and `label` (each a pymx or NumPy array, a list of arrays, or a dict
    name -> array; host arrays become float32), cut along axis 0.

    Single arrays are named data_name and label_name; the arrays of a list are named
    '_<i>_<data_name>'; a dict's names are used; all are served sorted by name. shuffle
    reorders the examples at every reset with pymx's generator. last_batch_handle: 'pad',
    'discard' or 'roll_over', see Note [NDArrayIter's cursor].
    """

    def __init__(self, data, label=None, batch_size=1, shuffle=False, last_batch_handle="pad",
                 data_name="data", label_name="softmax_label"):
        super().__init__(check_batch_size(batch_size, "NDArrayIter"))
        check_last_batch_handle(last_batch_handle, "NDArrayIter")
        self.data = _init_data(data, allow_empty=False, default_name=data_name)
        self.label = _init_data(label, allow_empty=True, default_name=label_name)
        self.num_data = self.data[0][1].shape[0]
        for name, value in self.data + self.label:
            if value.shape[0] != self.num_data:
                raise ValueError(f"NDArrayIter: every array needs the same number of examples; "
                                 f"{self.data[0][0]} has {self.num_data}, {name} has "
                                 f"{value.shape[0]}")
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None
        self.reset()

    @property
    def provide_data(self):
        """DataDesc of each data array's batches."""
        return [DataDesc(name, (self.batch_size,) + tuple(value.shape[1:]), value.dtype)
                for name, value in self.data]

    @property
    def provide_label(self):
        """DataDesc of each label array's batches."""
        return [DataDesc(name, (self.batch_size,) + tuple(value.shape[1:]), value.dtype)
                for name, value in self.label]

    def hard_reset(self):
        """Starts again at the first example, dropping any rolled-over examples."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self):
        """Starts the next epoch. See Note [NDArrayIter's cursor]."""
        if self.shuffle:
            self._shuffle_data()
        if self.last_batch_handle == "roll_over" and \
                self.num_data - self.batch_size < self.cursor < self.num_data:
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def iter_next(self):
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self):
        if not self.iter_next():
            raise StopIteration
        data = self.getdata()
        label = self.getlabel()
        if data[0].shape[0] != self.batch_size:
            # an incomplete last batch ('discard', 'roll_over'): kept for the next epoch
            self._cache_data = data
            self._cache_label = label
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    @staticmethod
    def _slice(source, start=0, end=None):
        return [value[start:end] for _, value in source]

    @staticmethod
    def _concat(first, second):
        if not first or not second:
            return first or second
        return [_np.concatenate([a, b], axis=0) for a, b in zip(first, second)]

    def _batchify(self, source):
        """The current batch of each array of `source` (self.data or self.label)."""
        if self.cursor >= self.num_data:
            raise RuntimeError("NDArrayIter: the epoch is over; call reset()")
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            # the first batch of an epoch: the cached remainder, then the new examples
            cached = self._cache_data if self._cache_data is not None else self._cache_label
            new = self._slice(source, end=self.cursor + self.batch_size)
            if self._cache_data is not None:
                self._cache_data = None
            else:
                self._cache_label = None
            return self._concat(cached, new)
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            pad = self.batch_size - self.num_data + self.cursor
            first = self._slice(source, start=self.cursor)
            repeats, rest = divmod(pad, self.num_data)
            filler = [_np.concatenate([value] * repeats + [value[:rest]], axis=0)
                      for _, value in source]
            return self._concat(first, filler)
        end = min(self.cursor + self.batch_size, self.num_data)
        return self._slice(source, self.cursor, end)

    def getdata(self):
        return self._batchify(self.data)

    def getlabel(self):
        return self._batchify(self.label)

    def getpad(self):
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0

    def _shuffle_data(self):
        """Reorders every array by one random permutation from pymx's generator."""
        order = _np_random.permutation(self.num_data).asnumpy()
        self.data = [(name, _reorder(value, order)) for name, value in self.data]
        self.label = [(name, _reorder(value, order)) for name, value in self.label]


def _reorder(value, order):
    return _np.array(value.asnumpy()[order], dtype=value.dtype, device=value.device)
