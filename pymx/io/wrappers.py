"""Iterators that wrap other iterators (MXNet's mx.io.ResizeIter and mx.io.PrefetchingIter)."""
import threading

from .base import DataBatch, DataDesc, DataIter

__all__ = ["ResizeIter", "PrefetchingIter"]


class _CurrentBatchIter(DataIter):
    """An iterator whose iter_next() sets self.current_batch: next() returns that batch and the
    getters read it."""

    def next(self):
        if self.iter_next():
            return self.current_batch
        raise StopIteration

    def getdata(self):
        return self.current_batch.data

    def getlabel(self):
        return self.current_batch.label

    def getindex(self):
        return self.current_batch.index

    def getpad(self):
        return self.current_batch.pad


class ResizeIter(_CurrentBatchIter):
    """Makes an epoch of `data_iter` exactly `size` batches: resets it when it runs out early,
    stops it early when it has more. reset() resets it too unless reset_internal is False."""

    def __init__(self, data_iter, size, reset_internal=True):
        super().__init__()
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch = None
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self):
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self):
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True


class _Prefetcher:
    """One background thread that fetches the next batch of `data_iter` whenever the slot is
    empty.

    Protocol (two events): `taken` set means the slot may be refilled (or, with `running`
    False, that the thread must end). The thread clears `taken`, calls next() and stores the
    batch (None at the end of the epoch) or the exception it raised in the slot, then sets
    `ready`. The consumer waits for `ready`, reads the slot, clears `ready` and sets `taken`.
    Only the thread clears `taken`, and only before it looks at `running`, so a stop request
    that arrives while next() runs is not lost. The thread holds no reference to the
    PrefetchingIter, so dropping that iterator can stop the thread."""

    def __init__(self, data_iter, name):
        self.data_iter = data_iter
        self.ready = threading.Event()
        self.taken = threading.Event()
        self.taken.set()
        self.batch = None
        self.error = None
        self.running = True
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            self.taken.wait()
            self.taken.clear()
            if not self.running:
                return
            try:
                self.batch, self.error = self.data_iter.next(), None
            except StopIteration:
                self.batch, self.error = None, None
            except BaseException as err:  # noqa: B036  (handed to the consumer thread)
                self.batch, self.error = None, err
            # invariant: the slot is written before `ready` is set and not again until `taken`
            self.ready.set()

    def take(self):
        """(batch or None at the end, error or None) once fetched; frees the slot."""
        self.ready.wait()
        batch, error = self.batch, self.error
        self.batch = self.error = None
        self.ready.clear()
        self.taken.set()
        return batch, error

    def stop(self):
        self.running = False
        self.taken.set()
        self.thread.join()


class PrefetchingIter(_CurrentBatchIter):
    """Fetches the next batch of each of `iters` (a DataIter or a list of them) on a
    background thread while the current one is used; a batch joins the iterators' data and
    label lists. rename_data / rename_label: one {old name: new name} dict per iterator.

    An exception raised by an iterator's next() is raised again by this iterator's next(), in
    the consumer's thread. close() (or leaving a `with` block, or dropping the iterator) stops
    and joins the threads.
    """

    def __init__(self, iters, rename_data=None, rename_label=None):
        super().__init__()
        if not isinstance(iters, list):
            iters = [iters]
        if not iters:
            raise ValueError("PrefetchingIter: iters must hold at least one DataIter")
        self.iters = iters
        self.n_iter = len(iters)
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.current_batch = None
        self._prefetchers = [_Prefetcher(it, f"PrefetchingIter-{i}")
                             for i, it in enumerate(iters)]

    def close(self):
        """Stops and joins the prefetching threads (idempotent)."""
        for prefetcher in self._prefetchers:
            prefetcher.stop()
        self._prefetchers = []

    def __del__(self):
        if getattr(self, "_prefetchers", None):
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    @staticmethod
    def _renamed(descs, renames):
        if renames is None:
            return sum(descs, [])
        return sum([[DataDesc(rename[d.name], d.shape, d.dtype)
                     if isinstance(d, DataDesc) else DataDesc(rename[d[0]], *d[1:])
                     for d in desc] for rename, desc in zip(renames, descs)], [])

    @property
    def provide_data(self):
        return self._renamed([it.provide_data for it in self.iters], self.rename_data)

    @property
    def provide_label(self):
        return self._renamed([it.provide_label for it in self.iters], self.rename_label)

    def _check_open(self):
        if not self._prefetchers:
            raise RuntimeError("PrefetchingIter: the iterator is closed")

    def reset(self):
        """Waits for the batches in flight, resets every iterator and starts fetching the new
        epoch."""
        self._check_open()
        for prefetcher in self._prefetchers:
            prefetcher.ready.wait()
        for it in self.iters:
            it.reset()
        for prefetcher in self._prefetchers:
            prefetcher.ready.clear()
            prefetcher.taken.set()

    def iter_next(self):
        self._check_open()
        results = [prefetcher.take() for prefetcher in self._prefetchers]
        for _, error in results:
            if error is not None:
                raise error
        batches = [batch for batch, _ in results]
        if batches[0] is None:
            if any(batch is not None for batch in batches):
                raise ValueError("PrefetchingIter: the iterators have different numbers of "
                                 "batches")
            return False
        if any(batch is None or batch.pad != batches[0].pad for batch in batches):
            raise ValueError(f"PrefetchingIter: the iterators' batches do not line up (pads "
                             f"{[None if b is None else b.pad for b in batches]})")
        self.current_batch = DataBatch(sum([batch.data for batch in batches], []),
                                       sum([batch.label for batch in batches], []),
                                       batches[0].pad, batches[0].index,
                                       provide_data=self.provide_data,
                                       provide_label=self.provide_label)
        return True

