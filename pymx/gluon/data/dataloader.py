"""DataLoader: batches from a Dataset, optionally built in worker processes or threads
(MXNet python/mxnet/gluon/data/dataloader.py).

Note [Transforms in worker processes]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Workers are forked (as in MXNet) after ``waitall()``, and pymx's engine survives fork, so a
worker runs the dataset's decoding *and* its transforms on pymx arrays on the cpu, exactly as
the main process would; tests/python/test_data_loader.py and test_data_vision.py check this.
Only the finished batch leaves the worker, as NumPy (see Note [Batches made in worker
processes] in batchify.py). The pool is created at the first iteration and kept across epochs.
"""
import multiprocessing
import multiprocessing.pool
import os
import signal
import threading

import numpy as onp

from ... import device as _device
from ..._op import waitall as _waitall
from . import batchify as _batchify
from . import sampler as _sampler

__all__ = ["DataLoader", "default_batchify_fn", "default_mp_batchify_fn"]

default_batchify_fn = _batchify.Stack()
default_mp_batchify_fn = _batchify.Stack(use_shared_mem=True)

# State of a worker process, set once by _worker_initializer (the pool forks with it in memory,
# so neither the dataset nor batchify_fn has to be picklable).
_worker_dataset = None
_worker_batchify_fn = None


def _worker_initializer(dataset, batchify_fn, base_seed):
    global _worker_dataset, _worker_batchify_fn
    # Ctrl-C goes to the whole process group; the main process handles it and ends the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_dataset = dataset
    _worker_batchify_fn = batchify_fn
    _batchify._in_worker = True
    # Forked children inherit the parent's NumPy generator state: reseed, or every worker would
    # draw the same random augmentations.
    onp.random.seed((base_seed + os.getpid()) % 2 ** 32)
    # A fork copies the parent's `with gpu(i):` scope too, but a child of a process that used CUDA
    # cannot: samples and batches are built on the CPU here, moved to devices by the parent.
    _device._current.set(_device.cpu())


def _worker_fn(indices):
    batch = _worker_batchify_fn([_worker_dataset[i] for i in indices])
    return _batchify.to_host(batch)


def _timeout_message(timeout, is_thread_pool):
    msg = ("Worker timed out after %s seconds. This might be caused by \n"
           "- Slow transform. Please increase timeout to allow slower data loading in each "
           "worker.\n" % timeout)
    if not is_thread_pool:
        msg += ("- Insufficient shared_memory if `timeout` is large enough.\n"
                "Please consider reduce `num_workers` or increase shared_memory in system.\n")
    return msg


class _MultiWorkerIter:
    """Keeps up to ``prefetch`` batches in flight in the pool and yields them in order."""

    def __init__(self, loader):
        self._loader = loader
        self._sampler_iter = iter(loader._batch_sampler)
        self._pending = []            # AsyncResults, oldest first
        for _ in range(max(1, loader._prefetch)):
            if not self._push_next():
                break

    def _push_next(self):
        indices = next(self._sampler_iter, None)
        if indices is None:
            return False
        self._pending.append(self._loader._submit(indices))
        return True

    def __iter__(self):
        return self

    def __next__(self):
        if not self._pending:
            raise StopIteration
        result = self._pending.pop(0)
        self._push_next()
        try:
            batch = result.get(self._loader._timeout)
        except multiprocessing.TimeoutError:
            raise multiprocessing.TimeoutError(
                _timeout_message(self._loader._timeout, self._loader._thread_pool)) from None
        return self._loader._finish(batch)


class DataLoader:
    """Loads batches from ``dataset``.

    Parameters follow MXNet 2.x: ``batch_size`` with ``shuffle`` / ``sampler`` / ``last_batch``
    ('keep', 'discard' or 'rollover'), or a ready ``batch_sampler``; ``batchify_fn`` (default
    ``Stack()``); ``num_workers`` worker processes (forked; ``thread_pool=True`` uses threads
    instead) keeping ``prefetch`` (default 2*num_workers) batches in flight, each of which must
    arrive within ``timeout`` seconds; ``pin_memory`` returns batches in page-locked host memory
    (``cpu_pinned(pin_device_id)``) for faster copies to a GPU. ``try_nopython`` is accepted for
    MXNet compatibility: pymx has no C++ loader, so batches always come from this Python loader.

    Batches are pymx arrays on the cpu (or pinned) device: data as the dataset gives it (float32
    after ToTensor), Python int labels as int64.

    Unlike MXNet, which reads a negative ``num_workers`` as 0, a negative (or non-integer)
    ``num_workers`` is a ValueError: it is far more likely a slip than a request for no workers.
    """

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None, last_batch=None,
                 batch_sampler=None, batchify_fn=None, num_workers=0, pin_memory=False,
                 pin_device_id=0, prefetch=None, thread_pool=False, timeout=120,
                 try_nopython=None):
        if batch_sampler is None:
            if batch_size is None:
                raise ValueError("batch_size must be specified unless batch_sampler is specified")
            if sampler is None:
                if shuffle:
                    sampler = _sampler.RandomSampler(len(dataset))
                else:
                    sampler = _sampler.SequentialSampler(len(dataset))
            elif shuffle:
                raise ValueError("shuffle must not be specified if sampler is specified")
            batch_sampler = _sampler.BatchSampler(sampler, batch_size, last_batch or "keep")
        elif batch_size is not None or shuffle or sampler is not None or last_batch is not None:
            raise ValueError("batch_size, shuffle, sampler and last_batch must not be specified "
                             "if batch_sampler is specified.")
        if not timeout > 0:
            raise ValueError("timeout must be positive, given %s" % (timeout,))

        self._dataset = dataset
        self._batch_sampler = batch_sampler
        if isinstance(num_workers, bool) or not isinstance(num_workers, (int, onp.integer)) \
                or num_workers < 0:
            raise ValueError(f"num_workers must be a non-negative integer, got {num_workers!r}")
        self._num_workers = int(num_workers)
        self._thread_pool = thread_pool
        self._pin_memory = pin_memory
        self._pin_device_id = pin_device_id
        self._prefetch = max(0, int(prefetch) if prefetch is not None
                             else 2 * self._num_workers)
        self._timeout = timeout
        self._try_nopython = try_nopython
        if batchify_fn is None:
            batchify_fn = default_mp_batchify_fn if self._num_workers else default_batchify_fn
        self._batchify_fn = batchify_fn
        self._pool = None
        self._pool_lock = threading.Lock()

    def _out_device(self):
        if self._pin_memory:
            return _device.Device("cpu_pinned", self._pin_device_id)
        return _device.cpu()

    def _finish(self, batch):
        """Main-process side of every batch: host arrays become pymx arrays, pinned if asked."""
        return _batchify.to_device(batch, self._out_device(), move_arrays=self._pin_memory)

    def _get_pool(self):
        with self._pool_lock:
            if self._pool is None:
                if self._thread_pool:
                    self._pool = multiprocessing.pool.ThreadPool(self._num_workers)
                else:
                    # A fork must not copy half-finished engine work into the children.
                    _waitall()
                    base_seed = int(onp.random.randint(0, 2 ** 31))
                    self._pool = multiprocessing.get_context("fork").Pool(
                        self._num_workers, initializer=_worker_initializer,
                        initargs=(self._dataset, self._batchify_fn, base_seed))
            return self._pool

    def _submit(self, indices):
        pool = self._get_pool()
        if self._thread_pool:
            return pool.apply_async(self._load_batch, (indices,))
        return pool.apply_async(_worker_fn, (indices,))

    def _load_batch(self, indices):
        return self._batchify_fn([self._dataset[i] for i in indices])

    def __iter__(self):
        if self._num_workers == 0:
            return self._same_process_iter()
        return _MultiWorkerIter(self)

    def _same_process_iter(self):
        for indices in self._batch_sampler:
            yield self._finish(self._load_batch(indices))

    def __len__(self):
        return len(self._batch_sampler)

    def close(self):
        """Ends the worker pool (it is also ended when the loader is garbage-collected)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.terminate()
            pool.join()

    def __del__(self):
        # A Pool is not terminated by garbage collection (https://bugs.python.org/issue34172).
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.terminate()
