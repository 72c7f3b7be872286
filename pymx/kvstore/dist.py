"""Key-value stores across processes: 'dist_sync' and 'dist_device_sync', over MPI (mpi4py).

Launch one process per worker, e.g. `mpiexec -n 4 python train.py`; every process runs the same
script and creates the same store. 'dist_sync' first sums a key's values over the process's own
devices on the CPU (as 'local' does), 'dist_device_sync' on the devices (as 'device' does); then one
MPI all-reduce sums over the processes. A process not started by mpiexec is a job of one worker.

Note [Synchronous data parallelism without a server]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
MXNet's dist stores keep the weights on parameter servers; pymx has no server. Every worker holds
the whole store and gets the same totals from MPI_Allreduce(SUM). With an optimizer set
(update_on_kvstore), every worker applies the same update to its own master copy of each weight
with the same summed gradient, so the weights stay identical everywhere, because:
  - init() broadcasts rank 0's value, so all workers start from the same weights;
  - Allreduce hands every rank the same result (MPI: it "appears in the receive buffer of all
    the group members"; tests/python/test_kvstore_dist.py checks the bits with MPICH);
  - the optimizer is deterministic, and its states (replicated too) see the same inputs.
Without an optimizer, the same reasoning holds for the updates that gluon.Trainer runs on every
device. save_optimizer_states writes the same file on every rank: save from one of them.

Every call that moves data (init, push, pushpull) and barrier() are collective: all workers must
make them with the same keys, shapes and dtypes, in the same order; pull is local. A call starts
with an Allgather of a digest of (call, keys, shapes, dtypes); when the digests differ, every rank
raises the same ValueError naming the key, the shapes and the ranks, before any data moves, so a
mistake shows as an error instead of a hang or a wrong sum. Each call packs all its keys into one
flat host buffer per dtype, so a Trainer step costs one Allgather plus one Allreduce per dtype.

If a worker dies, the job ends: mpiexec kills the other ranks when a process is killed (a crash,
SIGKILL, os._exit). A Python exit instead finalises MPI, which waits for the other ranks while
they wait in a collective for this one: a hang. So with more than one worker the store makes an
uncaught exception call MPI_Abort (as `python -m mpi4py script.py` does), which ends the job;
sys.exit() on one rank alone still hangs the others.
"""
import hashlib
import sys

import numpy as onp

from .. import autograd
from ..base import bfloat16
from ..device import cpu, cpu_pinned
from ..ndarray import empty
from .kvstore import KVStore, _as_list

__all__ = ['DistKVStore']

# 'dist' and 'dist_sync_device' are MXNet's other spellings of the same two stores.
_NAMES = ('dist', 'dist_sync', 'dist_device_sync', 'dist_sync_device')


def _import_mpi():
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError) as err:  # RuntimeError: mpi4py found no MPI library
        raise ImportError(f"the dist kvstores need mpi4py and an MPI library: "
                          f"pip install 'pymx[dist]' ({err})") from err
    return MPI


def _abort_job_on_uncaught_exception(comm):
    """See Note [Synchronous data parallelism without a server]: an uncaught exception on this
    rank is printed as usual, then ends every rank of the job."""
    previous = sys.excepthook
    if getattr(previous, 'aborts_mpi_job', False):
        return

    def excepthook(*exc_info):
        previous(*exc_info)
        sys.stderr.flush()
        comm.Abort(1)

    excepthook.aborts_mpi_job = True
    sys.excepthook = excepthook


def _per_key(key, value):
    """([keys], [list of per-device arrays for each key]) for one key or a list of keys."""
    if not isinstance(key, (list, tuple)):
        return [key], [_as_list(value)]
    if not isinstance(value, (list, tuple)) or len(value) != len(key):
        raise ValueError(f"KVStore: a list of {len(key)} keys needs a list of as many values")
    return list(key), [_as_list(v) for v in value]


def _describe(values):
    """'shape (2, 3) float32' for a key's per-device values; all variants when they differ."""
    variants = list(dict.fromkeys(f"shape {v.shape} {v.dtype}" for v in values))
    return variants[0] if len(variants) == 1 else ' and '.join(variants)


def _mismatch_message(store, signatures):
    call0, entries0 = signatures[0]
    for rank, (call, entries) in enumerate(signatures[1:], start=1):
        keys0, keys = [k for k, _ in entries0], [k for k, _ in entries]
        if call != call0 or keys != keys0:
            return (f"KVStore '{store}': rank 0 called {call0} with keys {keys0} but rank {rank} "
                    f"called {call} with keys {keys}; every worker must make the same kvstore "
                    f"calls with the same keys in the same order")
        for (key, what0), (_, what) in zip(entries0, entries):
            if what != what0:
                return (f"KVStore '{store}': {call} of key {key!r} has {what0} on rank 0 but "
                        f"{what} on rank {rank}; every worker must use the same shape and dtype "
                        f"for a key")
    raise AssertionError("pymx bug: kvstore call digests differ but the signatures agree; "
                         "please report it")


class DistKVStore(KVStore):
    """A KVStore whose sums run over every device of every process (see the module docstring)."""

    def __init__(self, name='dist_sync'):
        if 'async' in name:
            raise ValueError(f"KVStore '{name}': asynchronous updates need a parameter server, "
                             f"which pymx does not have; use 'dist_sync' or 'dist_device_sync'")
        if name not in _NAMES:
            raise ValueError(f"Unknown KVStore type '{name}'; pymx supports 'device', 'local', "
                             f"'dist_sync' and 'dist_device_sync'")
        super().__init__('device' if 'device' in name else 'local')
        self._type = name
        self._mpi = _import_mpi()
        self._comm = self._mpi.COMM_WORLD
        if self._comm.Get_size() > 1:
            _abort_job_on_uncaught_exception(self._comm)

    @property
    def rank(self):
        return self._comm.Get_rank()

    @property
    def num_workers(self):
        return self._comm.Get_size()

    def barrier(self):
        """Returns once every worker has called barrier()."""
        self._comm.Barrier()

    _barrier = barrier  # MXNet's name

    def _check_same_call(self, call, keys, values):
        """Raises the same ValueError on every rank unless all ranks make this call with the
        same keys, shapes and dtypes. Collective."""
        signature = (call, [(k, _describe(v)) for k, v in zip(keys, values)])
        digest = hashlib.blake2b(repr(signature).encode(), digest_size=8).digest()
        mine = onp.frombuffer(digest, dtype=onp.uint64)
        everyone = onp.empty(self.num_workers, dtype=onp.uint64)
        self._comm.Allgather(mine, everyone)
        if (everyone != everyone[0]).any():  # every rank sees the same digests, so all get here
            raise ValueError(_mismatch_message(self._type, self._comm.allgather(signature)))

    def _across_processes(self, arrays, collective):
        """Copies `arrays` into one flat host buffer per dtype, runs `collective` (an in-place MPI
        call) on each buffer, and returns per array a view of its part of the result. MPI has no
        bfloat16: such arrays travel as float32 (exactly) and come back rounded once."""
        if any(a.dtype == bfloat16 for a in arrays):
            wide = [a.astype('float32') if a.dtype == bfloat16 else a for a in arrays]
            results = self._across_processes(wide, collective)
            return [r.astype(a.dtype) for a, r in zip(arrays, results)]
        on_gpu = any(a.device.device_type == 'gpu' for a in arrays)
        host = cpu_pinned(0) if on_gpu else cpu(0)
        groups = {}  # dtype -> indices; the same order on every rank (the calls were checked)
        for i, array in enumerate(arrays):
            groups.setdefault(array.dtype, []).append(i)
        results = [None] * len(arrays)
        for dtype, indices in groups.items():
            flat = empty((sum(arrays[i].size for i in indices),), dtype, host)
            begin = 0
            for i in indices:
                end = begin + arrays[i].size
                results[i] = flat._slice_view(begin, end)._reshape_view(arrays[i].shape)
                arrays[i].copyto(results[i])
                begin = end
            flat.wait_to_read()  # MPI works on the memory itself, outside the engine
            collective(onp.from_dlpack(flat))
        return results

    def _sum_over_workers(self, call, keys, values):
        """Per key, the sum of its values over every device of every worker (host arrays)."""
        self._check_same_call(call, keys, values)
        totals = [self._reduce(k, v) for k, v in zip(keys, values)]
        for key, total in zip(keys, totals):
            if total.dtype == onp.bool_:  # the same on every rank: the calls were checked
                raise TypeError(f"KVStore '{self._type}': cannot sum key {key!r} of dtype bool "
                                f"across workers")
        mpi = self._mpi
        return self._across_processes(
            totals, lambda buf: self._comm.Allreduce(mpi.IN_PLACE, buf, op=mpi.SUM))

    def _store(self, key, total):
        """Applies the updater to the key's master with `total`, or keeps `total` as its value."""
        total = total.to_device(self._merge_device[key])
        if self._updater is None:
            self._master[key] = total
        else:
            self._updater(key, total, self._master[key])

    def _assign(self, key, value):
        """Stores rank 0's value of each key (the first copy when given a list) on every worker
        (init and broadcast). Collective."""
        keys, values = _per_key(key, value)
        firsts = [v[0] for v in values]
        with autograd.pause():
            self._check_same_call('init', keys, [[first] for first in firsts])
            rank0 = self._across_processes(firsts, lambda buf: self._comm.Bcast(buf, root=0))
            for k, first, value0 in zip(keys, firsts, rank0):
                self._master[k] = value0.copyto(self._place(k, [first]))

    def push(self, key, value):
        """Sums each key's values over every device of every worker; with an updater, applies
        it to the master weight, else keeps the sum. Collective."""
        keys, values = _per_key(key, value)
        self._check_initialized(keys)
        with autograd.pause():
            for k, total in zip(keys, self._sum_over_workers('push', keys, values)):
                self._store(k, total)

    def pull(self, key, out):
        """Copies the stored value of each key into every array of its `out`. Local."""
        keys, outs = _per_key(key, out)
        for k, targets in zip(keys, outs):
            super().pull(k, targets)

    def pushpull(self, key, value, out=None):
        """Sums each key's values over every device of every worker into its `out` (default: the
        values). With an updater set, `out` gets the updated weight instead. Collective."""
        keys, values = _per_key(key, value)
        outs = values if out is None else _per_key(key, out)[1]
        self._check_initialized(keys)
        with autograd.pause():
            totals = self._sum_over_workers('pushpull', keys, values)
            for k, total, targets in zip(keys, totals, outs):
                if self._updater is None:
                    for arr in targets:
                        total.copyto(arr)
                else:
                    self._store(k, total)
                    super().pull(k, targets)

    def _check_initialized(self, keys):
        if self._updater is None:
            return
        missing = [k for k in keys if k not in self._master]
        if missing:
            raise ValueError(f"KVStore: keys {missing} must be init()-ed before push when an "
                             f"optimizer is set")
