"""Samplers: iterables of indices into a Dataset (MXNet python/mxnet/gluon/data/sampler.py).

Samplers hold host integers only; shuffling uses NumPy's global generator, so
``numpy.random.seed`` makes an epoch's order reproducible (as in MXNet 2.x).
"""
import numpy as onp

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "BatchSampler", "FilterSampler",
           "IntervalSampler"]

_LAST_BATCH_MODES = ("keep", "discard", "rollover")


def _check_last_batch(last_batch):
    if last_batch not in _LAST_BATCH_MODES:
        raise ValueError("last_batch must be one of 'keep', 'discard', or 'rollover', "
                         "but got %s" % (last_batch,))


class Sampler:
    """Base class: subclasses define ``__iter__`` and ``__len__``."""

    def __iter__(self):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError


def _check_length(sampler, length):
    if isinstance(length, bool) or not isinstance(length, (int, onp.integer)) or length < 0:
        raise ValueError(f"{sampler}: length must be a non-negative integer, got {length!r}")


class SequentialSampler(Sampler):
    """Yields ``start, start + 1, ..., start + length - 1``."""

    def __init__(self, length, start=0):
        _check_length('SequentialSampler', length)
        self._length = length
        self._start = start

    def __iter__(self):
        return iter(range(self._start, self._start + self._length))

    def __len__(self):
        return self._length


class RandomSampler(Sampler):
    """Yields a fresh random permutation of ``range(length)`` on every iteration."""

    def __init__(self, length):
        _check_length('RandomSampler', length)
        self._length = length

    def __iter__(self):
        indices = onp.arange(self._length)
        onp.random.shuffle(indices)
        return iter(indices.tolist())

    def __len__(self):
        return self._length


class FilterSampler(Sampler):
    """Yields the indices of the samples of ``dataset`` for which ``fn(sample)`` is true.
    The dataset is scanned once, at construction."""

    def __init__(self, fn, dataset):
        self._indices = [i for i in range(len(dataset)) if fn(dataset[i])]

    def __iter__(self):
        return iter(self._indices)

    def __len__(self):
        return len(self._indices)


class IntervalSampler(Sampler):
    """Yields ``0, k, 2k, ...`` then (with rollover) ``1, k+1, ...`` and so on: every index of
    ``range(length)`` once, in strides of ``interval``. Without rollover only the first pass."""

    def __init__(self, length, interval, rollover=True):
        if not 0 < interval <= length:
            raise ValueError("Interval %d must be in (0, length=%d]" % (interval, length))
        self._length = length
        self._interval = interval
        self._rollover = rollover

    def __iter__(self):
        for offset in range(self._interval if self._rollover else 1):
            yield from range(offset, self._length, self._interval)

    def __len__(self):
        if self._rollover:
            return self._length
        return len(range(0, self._length, self._interval))


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``.

    last_batch: 'keep' yields a final short batch, 'discard' drops it, 'rollover' keeps the
    remainder and puts it at the front of the next epoch's first batch.

    >>> list(BatchSampler(SequentialSampler(10), 3, 'keep'))
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    """

    def __init__(self, sampler, batch_size, last_batch="keep"):
        if int(batch_size) != batch_size or batch_size <= 0:
            raise ValueError("batch_size must be a positive integer, but got %s" % (batch_size,))
        _check_last_batch(last_batch)
        self._sampler = sampler
        self._batch_size = int(batch_size)
        self._last_batch = last_batch
        self._prev = []          # the rolled-over remainder of the previous epoch

    def __iter__(self):
        batch, self._prev = self._prev, []
        for index in self._sampler:
            batch.append(index)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self):
        if self._last_batch == "keep":
            return (len(self._sampler) + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return len(self._sampler) // self._batch_size
        return (len(self._prev) + len(self._sampler)) // self._batch_size
