"""Trainer: applies an optimizer to a set of Parameters, summing gradients across devices.

Note [Gradients across devices]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`loss.backward()` on a per-sample loss gives each device the sum of its samples' gradients.
`step(batch_size)` first sums those over devices through the kvstore (created lazily; none when
the parameters live on one device) and writes the sum back into every device's gradient, then
every device runs the optimizer on identical gradients with rescale_grad = 1/batch_size, so the
copies stay identical. With update_on_kvstore=True the store updates one master copy per
parameter instead and broadcasts the new weights. Parameters with grad_req='null' (batch-norm
running statistics) are skipped: each device keeps its own. update_on_kvstore=None means False
for a non-dist store (MXNet reads MXNET_UPDATE_ON_KVSTORE, default on): the weights come out the
same, and allreduce_grads() + update() work without passing update_on_kvstore=False. One trace
of it stays: after step() every device's gradient holds the sum over devices (MXNet's default
leaves each device its own), which shows only when grad_req='add' gradients are carried into
the next step without zero_grad().

With a dist kvstore ('dist_sync', 'dist_device_sync'; one process per worker under mpiexec) the
store exists even for one device per process, every worker's weights are replaced by rank 0's
through the store (as in MXNet), and the sums run over every device of every process. MXNet
replaces them at the first step, after each worker took its first gradients at its own initial
weights; pymx does it when the Trainer is created if every parameter is initialized (else at the
first step), so that all first gradients are taken at the same weights. `step(batch_size)` still
divides by the batch_size passed, as MXNet's Trainer does: pass the global batch (per-process
batch * kv.num_workers) for the mean gradient; the per-process batch scales the effective
learning rate by num_workers. A step makes one kvstore call for all parameters, so the store
sends one MPI message per dtype.

Unlike MXNet, step() and update() refuse a batch_size that is not positive (ValueError naming it)
instead of scaling the gradients by inf or a negative number.
"""
import warnings

from .. import kvstore as _kvstore
from .._atomic_file import write_atomically
from .. import optimizer as opt
from .parameter import Parameter

__all__ = ['Trainer']


def _carry_states(optimizer, old, new):
    """`new` starts from `old`'s optimizer states (moved to their new devices at the first
    update) and update counts."""
    new.set_states(old.get_states())
    counts = optimizer._all_index_update_counts
    counts[new._key] = dict(counts.get(old._key, {}))


class Trainer:
    """Trainer(params, optimizer, optimizer_params=None, kvstore='device',
    update_on_kvstore=None).

    params: a {name: Parameter} dict (e.g. net.collect_params(), taken in key order) or a list of
    Parameters. optimizer: a name ('sgd', 'adam', ...) with optimizer_params, or an Optimizer.
    """

    def __init__(self, params, optimizer, optimizer_params=None, kvstore='device',
                 compression_params=None, update_on_kvstore=None):
        if isinstance(params, dict):
            params = [params[key] for key in sorted(params)]
        elif isinstance(params, (list, tuple)):
            params = list(params)
        else:
            raise ValueError(f"First argument must be a list or dict of Parameters, got "
                             f"{type(params)}.")
        if compression_params is not None:
            raise ValueError("gradient compression is not supported by pymx's kvstores")
        self._params = []
        seen = set()
        for param in params:
            if not isinstance(param, Parameter):
                raise ValueError(f"First argument must be a list or dict of Parameters, got "
                                 f"list of {type(param)}.")
            if id(param) in seen:
                continue  # a shared parameter is updated once
            seen.add(id(param))
            param._trainer = self
            self._params.append(param)
        self._devices = self._check_devices()
        optimizer_params = optimizer_params or {}
        self._init_optimizer(optimizer, optimizer_params)
        self._scale = self._optimizer.rescale_grad
        self._amp_original_scale = None  # amp.init_trainer sets these two (see pymx/amp/amp.py)
        self._amp_loss_scaler = None
        if isinstance(kvstore, str):
            _kvstore.check_type(kvstore)  # one device uses no store, but a typo is still one
        self._kvstore_arg = kvstore
        self._update_on_kvstore_arg = update_on_kvstore
        self._kv_initialized = False
        self._kvstore = None
        self._distributed = False
        self._update_on_kvstore = False
        if self._is_dist(kvstore) and all(param._data is not None for param in self._params):
            self._init_kvstore()  # see Note [Gradients across devices]: the first step too

    @staticmethod
    def _is_dist(kvstore):
        """Whether `kvstore` (a name or a store) sums across processes."""
        return 'dist' in str(getattr(kvstore, 'type', kvstore)).lower()

    def _check_devices(self):
        devices = None
        for param in self._params:
            param_devices = param.list_device()
            if devices is not None and devices != param_devices:
                raise ValueError(f"All Parameters must be initialized on the same set of "
                                 f"devices, but Parameter {param.name} is initialized on "
                                 f"{param_devices} while previous Parameters are initialized on "
                                 f"{devices}.")
            devices = param_devices
        return devices or []

    def _init_optimizer(self, optimizer, optimizer_params):
        param_dict = {i: param for i, param in enumerate(self._params)}
        if isinstance(optimizer, opt.Optimizer):
            if optimizer_params:
                raise ValueError("optimizer_params must be None if optimizer is an instance of "
                                 "Optimizer instead of str")
            self._optimizer = optimizer
            self._optimizer.param_dict = param_dict
        else:
            self._optimizer = opt.create(optimizer, param_dict=param_dict, **optimizer_params)
        self._updaters = [opt.get_updater(self._optimizer) for _ in self._devices]

    def _init_kvstore(self):
        """Creates the kvstore on first use (none for one device: updates run locally), and
        again after the parameters moved to other devices. The optimizer states and update
        counts carry over to the updaters of the new set-up, whichever side held them."""
        if self._update_on_kvstore:
            holder = self._kvstore.updater
        else:
            holder = self._updaters[0] if self._updaters else None  # the copies were identical
        devices = self._check_devices()
        if devices != self._devices:
            self._updaters = [opt.get_updater(self._optimizer) for _ in devices]
            self._devices = devices
        arg = self._kvstore_arg
        if isinstance(arg, _kvstore.KVStore):
            self._kvstore = arg
        elif arg and (len(self._devices) > 1 or self._is_dist(arg)):
            self._kvstore = _kvstore.create(arg)
        else:
            self._kvstore = None
        self._distributed = self._kvstore is not None and self._is_dist(self._kvstore)
        self._update_on_kvstore = bool(self._kvstore is not None and self._update_on_kvstore_arg)
        if self._update_on_kvstore_arg and self._kvstore is None:
            warnings.warn("update_on_kvstore=True has no effect without a kvstore (one device): "
                          "updates run locally", stacklevel=3)
        if self._update_on_kvstore:
            self._kvstore.set_optimizer(self._optimizer)
        updaters = [self._kvstore.updater] if self._update_on_kvstore else self._updaters
        for updater in updaters:
            if holder is not None and updater is not holder:
                _carry_states(self._optimizer, holder, updater)
        if self._update_on_kvstore or self._distributed:
            indices = list(range(len(self._params)))
            self._kv_call('broadcast', indices, [p.list_data()[0] for p in self._params],
                          [p.list_data() for p in self._params])
        self._kv_initialized = True

    def _reset_kvstore(self):
        """Called when a parameter's device copies were rebuilt (reset_device, initialize with
        force_reinit, deferred initialization): the store is set up again at the next step."""
        if self._distributed:
            raise RuntimeError("Cannot move the parameters of a trainer with a distributed "
                               "kvstore: its processes hold copies of them")
        self._kv_initialized = False

    def _kv_call(self, method, keys, values, outs):
        """kvstore.<method>(key, value, out=...) for every key: one call with all keys for a dist
        store (one MPI message per dtype instead of one per parameter), else one call per key."""
        call = getattr(self._kvstore, method)
        if self._distributed:
            call(keys, values, out=outs)
            return
        for key, value, out in zip(keys, values, outs):
            call(key, value, out=out)

    def _params_changed(self):
        """Called by Parameter.set_data: the kvstore's master weights are stale."""
        if self._update_on_kvstore:
            self._kv_initialized = False

    @property
    def learning_rate(self):
        return self._optimizer.learning_rate

    @property
    def optimizer(self):
        return self._optimizer

    @property
    def amp_loss_scale(self):
        """The loss scale amp.scale_loss applies (1.0 without dynamic loss scaling)."""
        return 1.0 if self._amp_loss_scaler is None else self._amp_loss_scaler.loss_scale

    def set_learning_rate(self, lr):
        """Sets the learning rate (when no lr_scheduler is used)."""
        self._optimizer.set_learning_rate(lr)

    def step(self, batch_size, ignore_stale_grad=False):
        """One optimisation step: sum gradients over devices, then update with gradients
        scaled by 1/batch_size (batch_size is the global batch, before split_and_load)."""
        self._set_rescale_grad(batch_size)
        if not self._kv_initialized:
            self._init_kvstore()
        self._allreduce_grads()
        self._update(ignore_stale_grad)

    def allreduce_grads(self):
        """Sums gradients over devices (for a manual allreduce_grads() + update() loop)."""
        if not self._kv_initialized:
            self._init_kvstore()
        if self._update_on_kvstore:
            raise ValueError("allreduce_grads() when parameters are updated on kvstore is not "
                             "supported. Try setting `update_on_kvstore` to False when creating "
                             "trainer.")
        self._allreduce_grads()

    def _allreduce_grads(self):
        if self._kvstore is None:
            return
        indices = [i for i, param in enumerate(self._params) if param.grad_req != 'null']
        grads = [self._params[i].list_grad() for i in indices]
        # With update_on_kvstore the store writes the new weights, else the summed gradients.
        outs = [self._params[i].list_data() for i in indices] if self._update_on_kvstore else grads
        self._kv_call('pushpull', indices, grads, outs)

    def update(self, batch_size, ignore_stale_grad=False):
        """Applies the optimizer (after allreduce_grads())."""
        if not self._kv_initialized:
            self._init_kvstore()
        if self._update_on_kvstore:
            raise ValueError("update() when parameters are updated on kvstore is not supported. "
                             "Try setting `update_on_kvstore` to False when creating trainer.")
        self._set_rescale_grad(batch_size)
        self._update(ignore_stale_grad)

    def _set_rescale_grad(self, batch_size):
        # A zero, negative or NaN batch size would scale every gradient by inf, a negative
        # number or NaN (MXNet divides regardless): refuse it before the weights change.
        if not batch_size > 0:
            raise ValueError(f"batch_size must be positive, got {batch_size!r}")
        self._optimizer.rescale_grad = self._scale / batch_size

    def _update(self, ignore_stale_grad):
        if self._amp_loss_scaler is not None and self._amp_loss_scaler.has_overflow(self._params):
            return  # a gradient overflowed: amp skips the step (the scale was lowered)
        updates = [([], [], []) for _ in self._updaters]
        for i, param in enumerate(self._params):
            if param.grad_req == 'null':
                continue
            fresh = self._fresh_copies(param, ignore_stale_grad)
            if self._update_on_kvstore:
                continue
            for upd, weight, grad, is_fresh in zip(updates, param.list_data(), param.list_grad(),
                                                   fresh):
                if is_fresh:  # with ignore_stale_grad, a stale copy is not updated
                    upd[0].append(i)
                    upd[1].append(grad)
                    upd[2].append(weight)
        for updater, (indices, grads, weights) in zip(self._updaters, updates):
            if indices:
                updater(indices, grads, weights)

    @staticmethod
    def _fresh_copies(param, ignore_stale_grad):
        """Per device copy, whether backward wrote its gradient since the last step (raising
        unless ignore_stale_grad when not); marks them consumed. Reads the array's `_fresh_grad`
        flag set by backward; an array without the flag counts as fresh."""
        fresh = []
        for device, data in zip(param.list_device(), param.list_data()):
            flag = getattr(data, '_fresh_grad', None)
            if flag is None:
                fresh.append(True)
                continue
            if not flag and not ignore_stale_grad:
                raise UserWarning(
                    f"Gradient of Parameter `{param.name}` on device {device} has not been "
                    f"updated by backward since last `step`. This could mean a bug in your "
                    f"model that made it only use a subset of the Parameters (Blocks) for this "
                    f"iteration. If you are intentionally only using a subset, call step with "
                    f"ignore_stale_grad=True to suppress this warning and skip updating of "
                    f"Parameters with stale gradient")
            fresh.append(flag)
            data._fresh_grad = False
        return fresh

    def save_states(self, fname):
        """Writes the optimizer and its states (from the first device) to `fname`, atomically."""
        if not self._kv_initialized:
            self._init_kvstore()
        if self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname, dump_optimizer=True)
            return
        states = self._updaters[0].get_states(dump_optimizer=True)
        write_atomically(fname, lambda f: f.write(states))

    def load_states(self, fname):
        """Restores what save_states wrote; states go to each device on its next update."""
        if not self._kv_initialized:
            self._init_kvstore()
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
            self._optimizer = self._kvstore.updater.optimizer
        else:
            with open(fname, 'rb') as f:
                blob = f.read()
            try:
                for updater in self._updaters:
                    updater.set_states(blob)
            except ValueError as e:
                raise ValueError(f"Trainer.load_states: {fname!r}: {e}") from None
            self._optimizer = self._updaters[0].optimizer
            for updater in self._updaters:
                updater.optimizer = self._optimizer
        self._optimizer.param_dict = {i: param for i, param in enumerate(self._params)}
