"""Single-process key-value stores that sum values across devices.

'device' reduces on the devices themselves: each key's merge buffer lives on one of the devices
holding its values (each key, when first seen, on the least-loaded of its devices, as MXNet's
CommDevice balances them). 'local' reduces on the CPU. Both hand the sum back to every device, so the
copies of a parameter stay identical. With an optimizer set (update_on_kvstore), the store keeps
a master copy of each weight next to its merge buffer, updates it there with the summed gradient,
and broadcasts the new weight. 'nccl' (nccl.py) is 'device' with the sums run by an NCCL
all-reduce over the GPUs.

As in MXNet, init refuses a key that already has a value. Unlike MXNet's, broadcast sets the
value of a key it already holds (MXNet refuses there too): a Trainer given a store sets its
parameters up again after they moved devices or were re-initialized.
"""
from .. import autograd
from .._atomic_file import write_atomically
from ..device import cpu
from ..optimizer import Optimizer, Updater

__all__ = ['KVStore', 'create']


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _keys_and_values(method, key, value):
    """([keys], [values]) of a call with one key or a list of keys, checked as MXNet does: int
    or str keys, one value (or list of per-device values) per key."""
    if isinstance(key, (list, tuple)):
        keys = list(key)
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if len(values) != len(keys):
            raise ValueError(f"KVStore.{method}: {len(keys)} keys {keys!r} but {len(values)} "
                             f"values")
    else:
        keys, values = [key], [value]
    for k in keys:
        if isinstance(k, bool) or not isinstance(k, (int, str)):
            raise TypeError(f"KVStore.{method}: keys must be int or str, got "
                            f"{type(k).__name__} {k!r}")
    return keys, values


def check_type(name):
    """Raises ValueError unless `name` is a KVStore type pymx has (DistKVStore checks the
    'dist' names itself)."""
    if 'dist' not in name.lower() and name.lower() not in ('device', 'local', 'nccl'):
        raise ValueError(f"Unknown KVStore type '{name}'; pymx supports 'device', 'local', "
                         f"'nccl', 'dist_sync' and 'dist_device_sync'")


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
        """Stores the initial value of `key` (the first copy when given a list). A key is
        initialized once, as in MXNet; broadcast sets the value of a key again."""
        keys, _ = _keys_and_values('init', key, value)
        known = [k for k in keys if k in self._master]
        if known:
            raise ValueError(f"KVStore.init: key(s) {known} already have a value (from an "
                             f"earlier init, push or broadcast); a key is initialized once: "
                             f"broadcast or push to change its value")
        self._assign(key, value)

    def _assign(self, key, value):
        """Stores the value of `key` (the first copy when given a list), known or not."""
        keys, values = _keys_and_values('init', key, value)
        with autograd.pause():
            for k, v in zip(keys, values):
                first = _as_list(v)[0]
                self._master[k] = first.copyto(self._place(k, [first]))

    def broadcast(self, key, value, out):
        """Stores `value` as the key's value (known or not), then copies it into every array of
        `out`."""
        keys, outs = (key, out) if isinstance(key, (list, tuple)) else ([key], [out])
        for k, o in zip(keys, outs):  # placed among all of out's devices, not just the first
            self._place(k, _as_list(o))
        self._assign(key, value)
        self.pull(key, out)

    def _check_shapes(self, method, key, arrays):
        """Every array of one key has the key's shape (the first array's while it has none):
        a push of another shape would silently replace the value."""
        expected = self._master[key].shape if key in self._master else arrays[0].shape
        for arr in arrays:
            if arr.shape != expected:
                raise ValueError(f"KVStore.{method}: key {key!r} has shape {expected}, got an "
                                 f"array of shape {arr.shape}")

    def push(self, key, value):
        """Sums the per-device values of each key; with an updater, applies it to the master."""
        for k, v in zip(*_keys_and_values('push', key, value)):
            self._push_one(k, _as_list(v))

    def _push_one(self, key, values):
        self._check_shapes('push', key, values)
        with autograd.pause():
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
        """Copies the stored value of each key into every array of its `out`."""
        for k, o in zip(*_keys_and_values('pull', key, out)):
            if k not in self._master:
                raise ValueError(f"KVStore: key {k!r} has no value; init() or push() it first")
            targets = _as_list(o)
            self._check_shapes('pull', k, targets)
            with autograd.pause():
                for arr in targets:
                    self._master[k].copyto(arr)

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
        self._check_shapes('pushpull', key, values + targets)
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
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"KVStore.set_optimizer: optimizer must be an Optimizer, got "
                            f"{type(optimizer).__name__} {optimizer!r}")
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
            blob = f.read()
        try:
            self._updater.set_states(blob)
        except ValueError as e:
            raise ValueError(f"KVStore.load_optimizer_states: {fname!r}: {e}") from None


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

