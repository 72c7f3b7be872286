"""Dataset containers (MXNet python/mxnet/gluon/data/dataset.py)."""
import os

from ... import recordio
from ...ndarray import ndarray
from .sampler import FilterSampler, Sampler, SequentialSampler

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset", "RecordFileDataset"]


class Dataset:
    """Abstract dataset: subclasses define ``__getitem__`` and ``__len__``.
    Any object with ``len()`` and ``[]`` (a list, a NumPy or pymx array) can serve as one."""

    def __getitem__(self, idx):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def filter(self, fn):
        """A dataset of the samples for which ``fn(sample)`` is true."""
        return _SampledDataset(self, FilterSampler(fn, self))

    def shard(self, num_shards, index):
        """Shard ``index`` of ``num_shards`` contiguous, near-equal shards (the first
        ``len % num_shards`` shards get one sample more). Shard before shuffling."""
        if num_shards <= 0:
            raise ValueError("Number of shards must be greater than 0, but got %d" % num_shards)
        if not 0 <= index < num_shards:
            raise ValueError("Shard index out of bound: %d out of %d" % (index, num_shards))
        length = len(self)
        shard_len, rest = divmod(length, num_shards)
        start = shard_len * index + min(index, rest)
        end = start + shard_len + (index < rest)
        return _SampledDataset(self, SequentialSampler(end - start, start))

    def take(self, count):
        """The first ``count`` samples (all of them when count is None or too large)."""
        if count is None or count > len(self):
            count = len(self)
        return _SampledDataset(self, SequentialSampler(count))

    def sample(self, sampler):
        """The samples whose indices ``sampler`` yields."""
        if not isinstance(sampler, Sampler):
            raise TypeError("Invalid sampler type: %s. Expected gluon.data.Sampler instead."
                            % type(sampler))
        return _SampledDataset(self, sampler)

    def transform(self, fn, lazy=True):
        """A dataset whose samples are ``fn(*sample)`` (``fn(sample)`` for non-tuples).
        lazy=False applies fn to every sample now; keep lazy=True for random transforms, or
        every epoch sees the same result."""
        trans = _LazyTransformDataset(self, fn)
        if lazy:
            return trans
        return SimpleDataset([trans[i] for i in range(len(trans))])

    def transform_first(self, fn, lazy=True):
        """Like ``transform`` but ``fn`` sees only the first element of each sample (the data,
        leaving the label). The wrapper is a module-level class, so the result pickles."""
        return self.transform(_TransformFirstClosure(fn), lazy)


class SimpleDataset(Dataset):
    """Wraps any object that has ``len()`` and ``[]``."""

    def __init__(self, data):
        self._data = data

    def __len__(self):
        return len(self._data)

    def __getitem__(self, idx):
        return self._data[idx]


class _LazyTransformDataset(Dataset):
    def __init__(self, data, fn):
        self._data = data
        self._fn = fn

    def __len__(self):
        return len(self._data)

    def __getitem__(self, idx):
        item = self._data[idx]
        if isinstance(item, tuple):
            return self._fn(*item)
        return self._fn(item)


class _TransformFirstClosure:
    """A callable object rather than a nested function, so that it can be pickled."""

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, x, *args):
        if args:
            return (self._fn(x),) + args
        return self._fn(x)


class _SampledDataset(Dataset):
    def __init__(self, dataset, sampler):
        self._dataset = dataset
        self._indices = list(sampler)

    def __len__(self):
        return len(self._indices)

    def __getitem__(self, idx):
        return self._dataset[self._indices[idx]]


class ArrayDataset(Dataset):
    """Combines dataset-like objects of equal length; sample i is ``(x1[i], x2[i], ...)``, or
    ``x1[i]`` when there is one. A 1-D pymx array is turned into a NumPy array once, so that
    its samples are plain scalars rather than 0-d device arrays."""

    def __init__(self, *args):
        if not args:
            raise ValueError("Needs at least 1 arrays")
        self._length = len(args[0])
        self._data = []
        for i, data in enumerate(args):
            if len(data) != self._length:
                raise ValueError("All arrays must have the same length; array[0] has length %d "
                                 "while array[%d] has %d." % (self._length, i, len(data)))
            if isinstance(data, ndarray) and data.ndim == 1:
                data = data.asnumpy()
            self._data.append(data)

    def __getitem__(self, idx):
        if len(self._data) == 1:
            return self._data[0][idx]
        return tuple(data[idx] for data in self._data)

    def __len__(self):
        return self._length


class RecordFileDataset(Dataset):
    """The records of a RecordIO file, in the order of its index file: the .idx file next to
    `filename` with the same stem (`data.rec` -> `data.idx`). A sample is the raw bytes of a
    record. It works in DataLoader worker processes: each reopens the file (see
    recordio.MXRecordIO on fork safety)."""

    def __init__(self, filename):
        self.filename = os.fspath(filename)
        self.idx_file = os.path.splitext(self.filename)[0] + ".idx"
        self._record = recordio.MXIndexedRecordIO(self.idx_file, self.filename, "r")

    def __getitem__(self, idx):
        return self._record.read_idx(self._record.keys[idx])

    def __len__(self):
        return len(self._record.keys)
