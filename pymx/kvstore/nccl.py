"""KVStore 'nccl': sums each key's per-GPU values with an NCCL all-reduce (MXNet's KVStoreNCCL).

The store has the 'device' store's interface and keeps a key's stored value (with an optimizer
set, the master weight that update_on_kvstore updates) on one of the GPUs holding its values, as
'device' does. Only the sum differs: instead of copying the values to one GPU and adding them
there, one NCCL all-reduce sums them on all their GPUs at once (cuda/src/nccl_all_reduce.cc, Note
[NCCL all-reduce]). pushpull(key, values) with no `out`, gluon.Trainer's call, sums the values in
place without a copy. NCCL (libnccl.so.2, from the nvidia-nccl-cu13 wheel or the system) is loaded
at the first sum.

As in MXNet, the store sums GPU arrays only, and every key over the same set of GPUs (those of the
first key summed), one value per GPU. Logical GPUs of one physical GPU (PYMX_LOGICAL_GPUS_PER_GPU)
are refused, since NCCL needs a different GPU for each value: use 'device' there. Values are
ordered by GPU id before the sum, so that every key uses the same NCCL communicator.
"""
from .._c import core as _core
from ..base import PymxError
from ..device import _preload_wheel_libraries, num_gpus
from .kvstore import KVStore

__all__ = ['NcclKVStore']


def _same_arrays(first, second):
    return len(first) == len(second) and all(a._same_memory(b) for a, b in zip(first, second))


class NcclKVStore(KVStore):
    """kvstore.create('nccl'): a 'device' store whose sums run through NCCL (see the module
    docstring)."""

    def __init__(self):
        if num_gpus() == 0:
            raise PymxError("KVStore 'nccl' sums arrays on GPUs with NCCL, but no GPU is visible "
                            "(num_gpus() is 0: pymx was built without CUDA, or there is no "
                            "NVIDIA driver or no device); use kvstore 'device' or 'local'")
        # From the nvidia-nccl wheel wherever it is installed (Note [Preloading the NVIDIA wheels]).
        _preload_wheel_libraries([("nvidia.nccl", "libnccl.so.2")])
        super().__init__('device')
        self._type = 'nccl'
        self._gpus = None  # the GPUs of the first key summed; every key is summed over them

    def _all_reduce(self, key, arrays):
        """Sums `arrays`, the per-GPU values of `key`, in place on their GPUs."""
        for array in arrays:
            if array.device.device_type != 'gpu':
                raise ValueError(f"KVStore 'nccl' sums GPU arrays only, but key {key!r} has a "
                                 f"value on {array.device}; use kvstore 'device' or 'local'")
        ordered = sorted(arrays, key=lambda array: array.device.device_id)
        gpus = [array.device for array in ordered]
        if self._gpus is not None and gpus != self._gpus:
            raise ValueError(f"KVStore 'nccl' sums every key over one set of GPUs, but key "
                             f"{key!r} has values on {gpus} and earlier keys on {self._gpus}")
        _core.nccl_all_reduce(ordered)
        self._gpus = gpus

    def _reduce(self, key, values):
        """The sum of `values` on the key's merge device."""
        sums = [value.copy() for value in values]  # push leaves the pushed values alone
        self._all_reduce(key, sums)
        device = self._place(key, values)
        for total in sums:
            if total.device == device:
                return total
        return sums[0].copyto(device)  # the key was init()-ed from elsewhere (e.g. the CPU)

    def _sum_into(self, key, values, targets):
        """pushpull's sum: in place when `targets` are the values themselves (no copy)."""
        if _same_arrays(targets, values):
            self._all_reduce(key, values)
            return
        sums = [value.copy() for value in values]  # the values keep their contents
        self._all_reduce(key, sums)
        on_device = {total.device: total for total in sums}
        for target in targets:
            on_device.get(target.device, sums[0]).copyto(target)
