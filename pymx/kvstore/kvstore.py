"""Single-process key-value stores that sum values across devices.

'device' reduces on the devices themselves: each key's merge buffer lives on one of the devices
holding its values (each key, when first seen, on the least-loaded of its devices, as MXNet's
CommDevice balances them). 'local' reduces on the CPU. Both hand the sum back to every device, so the
copies of a parameter stay identical. With an optimizer set (update_on_kvstore), the store keeps
a master copy of each weight next to its merge buffer, updates it there with the summed gradient,
and broadcasts the new weight. 'nccl' (nccl.py) is 'device' with the sums run by an NCCL
all-reduce over the GPUs.
"""
from .. import autograd
from .._atomic_file import write_atomically
from ..device import cpu
from ..optimizer import Updater

__all__ = ['KVStore', 'create']


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


class KVStore:
    """A store for (int or str) keys; values are arrays or lists of per-device arrays."""

    def __init__(self, name='device'):
        if name not in ('device', 'local'):
            raise ValueError(f"Unknown KVStore type '{name}'; pymx supports 'device', 'local', "
                             f"'nccl', 'dist_sync' and 'dist_device_sync'")
        self._type = name
        self._merge_device = {}   # key -> Device of its merge buffer
        self._load = {}           # Device -> elements placed there ('device' balancing)
        self._master = {}         # key -> master weight (update_on_kvstore)
        self._updater = None

    @property
    def type(self):
        return self._type

    @property
    def rank(self):
        return 0

    @property
    def num_workers(self):
        return 1

    def _place(self, key, values):
        device = self._merge_device.get(key)
        if device is None:
            if self._type == 'local':
                device = cpu()
            else:
                device = min({v.device for v in values}, key=lambda d: self._load.get(d, 0))
                self._load[device] = self._load.get(device, 0) + values[0].size
            self._merge_device[key] = device
        return device

    def _reduce(self, key, values):
        """The sum of `values` on the key's merge device (the value itself when alone there)."""
        device = self._place(key, values)
        total = None
        for value in values:
            value = value if value.device == device else value.copyto(device)
            total = value if total is None else total + value
        return total

    def init(self, key, value):
        """Stores the initial value of `key` (the first copy when given a list)."""
        keys, values = (key, value) if isinstance(key, (list, tuple)) else ([key], [value])
        with autograd.pause():
            for k, v in zip(keys, values):
                first = _as_list(v)[0]
                self._master[k] = first.copyto(self._place(k, [first]))

    def broadcast(self, key, value, out):
        """init(key, value), then copies the stored value into every array of `out`."""
        keys, outs = (key, out) if isinstance(key, (list, tuple)) else ([key], [out])
        for k, o in zip(keys, outs):  # placed among all of out's devices, not just the first
            self._place(k, _as_list(o))
        self.init(key, value)
        self.pull(key, out)

    def push(self, key, value):
        """Sums the per-device values of `key`; with an updater, applies it to the master."""
        with autograd.pause():
            values = _as_list(value)
            total = self._reduce(key, values)
            if self._updater is None:
                # a lone value already on the store's device is the caller's array: not stored
                # as such, or the caller's later writes would change what pull returns
                self._master[key] = total.copy() if any(total is v for v in values) else total
            else:
                if key not in self._master:
                    raise ValueError(f"KVStore: key {key!r} must be init()-ed before push when an "
                                     f"optimizer is set")
                self._updater(key, total, self._master[key])

    def pull(self, key, out):
        """Copies the stored value of `key` into every array of `out`."""
        if key not in self._master:
            raise ValueError(f"KVStore: key {key!r} has no value; init() or push() it first")
        with autograd.pause():
            for arr in _as_list(out):
                self._master[key].copyto(arr)

    def pushpull(self, key, value, out=None):
        """Sums `value` over devices and writes the result into `out` (default: `value`).

        With an updater set, the result is the updated weight instead of the sum.
        """
        values = _as_list(value)
        targets = values if out is None else _as_list(out)
        if self._updater is not None:
            self.push(key, values)
            self.pull(key, targets)
            return
        with autograd.pause():
            self._sum_into(key, values, targets)

    def _sum_into(self, key, values, targets):
        """Writes the sum of `key`'s `values` into each of `targets`."""
        total = self._reduce(key, values)
        for arr in targets:
            if arr is not total:
                total.copyto(arr)

    def set_optimizer(self, optimizer):
        """Updates values on the store (update_on_kvstore) with `optimizer`."""
        self._updater = Updater(optimizer)

    @property
    def updater(self):
        return self._updater

    def save_optimizer_states(self, fname, dump_optimizer=False):
        if self._updater is None:
            raise RuntimeError("Cannot save states for a KVStore without an optimizer")
        states = self._updater.get_states(dump_optimizer)
        write_atomically(fname, lambda f: f.write(states))

    def load_optimizer_states(self, fname):
        if self._updater is None:
            raise RuntimeError("Cannot load states for a KVStore without an optimizer")
        with open(fname, 'rb') as f:
            self._updater.set_states(f.read())


def create(name='device'):
    """Creates a KVStore: 'device' (reduce on the devices), 'local' (reduce on the CPU), 'nccl'
    (an NCCL all-reduce over GPUs; see nccl.py), or 'dist_sync' / 'dist_device_sync' (the same as
    'local' / 'device', then across processes over MPI; see dist.py)."""
    if isinstance(name, KVStore):
        return name
    if not isinstance(name, str):
        raise TypeError(f"KVStore name must be a string, got {type(name).__name__}")
    name = name.lower()
    if 'dist' in name:
        from .dist import DistKVStore  # dist imports this module
        return DistKVStore(name)
    if name == 'nccl':
        from .nccl import NcclKVStore  # nccl imports this module
        return NcclKVStore()
    return KVStore(name)

