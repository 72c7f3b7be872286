"""Parameter: a named array with one copy per device, its gradients, and deferred initialisation.

A Parameter whose shape is not fully known (a dim of 0 or -1) and that allows deferred
initialisation records the requested initializer and devices at `initialize()`; the layer that
owns it fills in the shape from its first input and then finishes the initialisation. The values
are drawn once, on the CPU, and copied to every device, so all copies start identical.
"""
import warnings

import numpy as _onp

from .. import autograd
from .. import initializer as _init
from .. import numpy as np
from ..base import dtype_name
from ..device import Device, cpu, current_device
from ..ndarray import ndarray

__all__ = ['Parameter', 'Constant', 'DeferredInitializationError', 'ParameterDict']

_GRAD_REQS = ('write', 'add', 'null')


class DeferredInitializationError(RuntimeError):
    """The parameter's initialisation waits for the first forward pass to know its shape."""


def _as_device_list(device):
    if device is None:
        return [current_device()]
    if isinstance(device, Device):
        return [device]
    devices = list(device)
    if not devices or not all(isinstance(d, Device) for d in devices):
        raise ValueError(f"device must be a Device or a non-empty list of Devices, got {device!r}")
    return devices


def _shape_known(shape):
    return shape is not None and all(d > 0 for d in shape)


class Parameter:
    """A block's weight: one array per device plus a gradient buffer per device.

    Parameters mirror MXNet's: `grad_req` is 'write', 'add' or 'null'; a dim of 0 or -1 in `shape`
    is unknown until the first forward pass (needs `allow_deferred_init`); `init` is this
    parameter's own initializer (it takes precedence over the one given to `initialize`);
    `lr_mult` / `wd_mult` scale the optimizer's learning rate and weight decay.
    """

    def __init__(self, name='weight', grad_req='write', shape=None, dtype='float32', lr_mult=1.0,
                 wd_mult=1.0, init=None, allow_deferred_init=False, differentiable=True,
                 stype='default', grad_stype='default'):
        if stype != 'default' or grad_stype != 'default':
            raise ValueError(f"Parameter '{name}': only 'default' (dense) storage is supported, "
                             f"got stype={stype!r}, grad_stype={grad_stype!r}")
        self._name = name
        self._data = None          # list of arrays, in _device_list order
        self._grad = None
        self._device_list = None
        self._device_index = {}    # Device -> position in _device_list
        self._deferred_init = ()   # (init, devices, default_init, data or None)
        self._differentiable = differentiable
        self._grad_req = None
        self._shape = None
        self.shape = shape
        self.dtype = dtype_name(dtype)
        self.lr_mult = lr_mult
        self.wd_mult = wd_mult
        self.init = init
        self._allow_deferred_init = allow_deferred_init
        self.grad_req = grad_req
        self._trainer = None       # set by Trainer; set_data tells it weights changed

    def __repr__(self):
        return f'Parameter {self.name} (shape={self.shape}, dtype={self.dtype})'

    @property
    def name(self):
        return self._name

    # ---- attributes ---------------------------------------------------------------------------

    @property
    def grad_req(self):
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req):
        if req not in _GRAD_REQS:
            raise ValueError(f"grad_req must be one of 'write', 'add', or 'null', but got '{req}'")
        if not self._differentiable:
            req = 'null'
        if self._grad_req == req:
            return
        self._grad_req = req
        if self._data is None:
            return
        if req == 'null':
            self._grad = None
            self._data = [d.detach() for d in self._data]
        else:
            self._init_grad()

    @property
    def shape(self):
        if self._shape is None:
            return None
        return tuple(d if d > 0 else -1 for d in self._shape)

    @shape.setter
    def shape(self, new_shape):
        if new_shape is None:
            self._shape = None
            return
        new_shape = (new_shape,) if isinstance(new_shape, int) else tuple(int(d) for d in new_shape)
        if self._shape is None:
            self._shape = new_shape
            return
        compatible = len(self._shape) == len(new_shape) and all(
            old <= 0 or old == new for old, new in zip(self._shape, new_shape))
        if not compatible:
            raise ValueError(f"Expected shape {new_shape} is incompatible with given shape "
                             f"{self.shape} for Parameter '{self.name}'.")
        self._shape = new_shape

    # ---- initialisation -----------------------------------------------------------------------

    def initialize(self, init=None, device=None, default_init=None, force_reinit=False):
        """Allocates the parameter on `device` (a Device or list; default current_device()).

        The initializer is `init`, else this parameter's own `init`, else `default_init`
        (default Uniform()). With an unknown shape the work is deferred to the first forward.
        """
        if self._data is not None and not force_reinit:
            warnings.warn(f"Parameter '{self.name}' is already initialized, ignoring. "
                          f"Set force_reinit=True to re-initialize.", stacklevel=2)
            return
        self._tell_trainer()
        self._data = self._grad = None
        self._device_list = None
        self._device_index = {}
        devices = _as_device_list(device)
        if default_init is None:
            default_init = _init.Uniform()
        if init is None:
            init = self.init
        if not _shape_known(self._shape):
            if self._allow_deferred_init:
                self._deferred_init = (init, devices, default_init, None)
                return
            raise ValueError(f"Cannot initialize Parameter '{self.name}' because it has invalid "
                             f"shape: {self.shape}.")
        self._deferred_init = (init, devices, default_init, None)
        self._finish_deferred_init()

    def _deferred_init_error(self):
        return DeferredInitializationError(
            f"Parameter '{self.name}' has not been initialized yet because initialization "
            f"was deferred. Actual initialization happens during the first forward pass. "
            f"Please pass one batch of data through the network before accessing "
            f"Parameters. You can also avoid deferred initialization by specifying in_units, "
            f"num_features, etc., for network layers.")

    def _finish_deferred_init(self):
        """Runs a pending initialisation now that the shape is known (no-op when none pends)."""
        if not self._deferred_init:
            return
        init, devices, default_init, data = self._deferred_init
        if not _shape_known(self._shape):
            raise self._deferred_init_error()
        self._deferred_init = ()
        with autograd.pause():
            if data is None:
                # Drawn once on the CPU so that every device copy starts identical.
                data = np.zeros(self._shape, dtype=self.dtype, device=cpu())
                initializer = _init.create(init) if init is not None else _init.create(default_init)
                initializer(self.name, data, explicit=init is not None)
            self._init_impl(data, devices)

    def _tell_trainer(self):
        """The device copies are about to be rebuilt, maybe on other devices: the Trainer sets
        up its store again at its next step, or raises (before anything changed) when it cannot."""
        if self._trainer is not None:
            self._trainer._reset_kvstore()

    def _init_impl(self, data, devices):
        self._tell_trainer()
        self._device_list = list(devices)
        self._device_index = {d: i for i, d in enumerate(self._device_list)}
        with autograd.pause():
            self._data = [data.copyto(d) for d in self._device_list]
        self._init_grad()

    def _init_grad(self):
        if self._grad_req == 'null':
            self._grad = None
            return
        with autograd.pause():
            self._grad = [np.zeros_like(d) for d in self._data]
        autograd.mark_variables(self._data, self._grad, self._grad_req)

    # ---- access -------------------------------------------------------------------------------

    def _check_and_get(self, arrays, device):
        if arrays is not None:
            if device is list:
                return arrays
            if device is None:
                if len(arrays) == 1:
                    return arrays[0]
                device = current_device()
            index = self._device_index.get(device)
            if index is not None:
                return arrays[index]
            raise RuntimeError(f"Parameter '{self.name}' was not initialized on device {device}. "
                               f"It was only initialized on {self._device_list}.")
        if self._deferred_init:
            raise self._deferred_init_error()
        raise RuntimeError(f"Parameter '{self.name}' has not been initialized. Note that you "
                           f"should initialize parameters and create Trainer with "
                           f"Block.collect_params() instead of Block.params because the later "
                           f"does not include Parameters of nested child Blocks")

    def data(self, device=None):
        """The copy on `device` (default: the only copy, else the one on current_device())."""
        return self._check_and_get(self._data, device)

    def list_data(self):
        """All copies, in device order."""
        return self._check_and_get(self._data, list)

    def _check_grad(self):
        if self._data is not None and self._grad is None:
            raise RuntimeError(f"Cannot get gradient array for Parameter '{self.name}' because "
                               f"grad_req='null'")

    def grad(self, device=None):
        """The gradient buffer on `device`."""
        self._check_grad()
        return self._check_and_get(self._grad, device)

    def list_grad(self):
        """All gradient buffers, in device order."""
        self._check_grad()
        return self._check_and_get(self._grad, list)

    def list_device(self):
        """The devices holding a copy (or those a deferred initialisation will use)."""
        if self._data is None:
            if self._deferred_init:
                return list(self._deferred_init[1])
            raise RuntimeError(f"Parameter '{self.name}' has not been initialized")
        return list(self._device_list)

    list_ctx = list_device

    def zero_grad(self):
        """Sets every gradient buffer to 0."""
        if self._grad is None:
            return
        with autograd.pause():
            for g in self._grad:
                g[:] = 0

    def set_data(self, data):
        """Writes `data` into every device copy (or into the pending deferred initialisation)."""
        if self._data is None and not self._deferred_init:
            raise RuntimeError(f"Parameter '{self.name}' has not been initialized")
        if hasattr(data, 'shape'):
            self.shape = data.shape  # as MXNet: another shape is refused, not broadcast
        if self._data is None:
            self._deferred_init = self._deferred_init[:3] + (data,)
            return
        with autograd.pause():
            for arr in self._data:
                arr[:] = data.to_device(arr.device) if isinstance(data, ndarray) else data
        if self._trainer is not None:
            self._trainer._params_changed()

    def _reduce(self):
        """A CPU copy averaged over the device copies (what save_parameters writes)."""
        copies = self.list_data()
        with autograd.pause():
            if len(copies) == 1:
                return copies[0].copyto(cpu())
            total = copies[0].copyto(cpu()).astype('float64')
            for c in copies[1:]:
                total = total + c.copyto(cpu()).astype('float64')
            return (total / len(copies)).astype(self.dtype)

    def reset_device(self, device):
        """Moves the parameter to `device` (a Device or list); copies are averaged first."""
        devices = _as_device_list(device)
        self._tell_trainer()
        if self._data is not None:
            data = self._reduce()
            self._init_impl(data, devices)
        elif self._deferred_init:
            init, _, default_init, data = self._deferred_init
            self._deferred_init = (init, devices, default_init, data)
        else:
            raise ValueError(f"Cannot reset device for Parameter '{self.name}' because it has "
                             f"not been initialized.")

    reset_ctx = reset_device

    def cast(self, dtype):
        """Casts data and gradients to `dtype`."""
        self.dtype = dtype_name(dtype)
        if self._data is None:
            return
        with autograd.pause():
            self._data = [d.astype(self.dtype) for d in self._data]
        self._init_grad()

    def _load_init(self, data, device=None, cast_dtype=False, dtype_source='current', name=None):
        """Loads a host (numpy) array saved by save_parameters into this parameter.

        device=None keeps the devices the parameter already has (or its pending deferred ones),
        else uses current_device(): unlike MXNet, loading into a net initialised on GPUs works
        without repeating the device list. `name` (default self.name) is used in messages: the
        structural name the file uses.
        """
        name = name or self.name
        if dtype_source not in ('current', 'saved'):
            raise ValueError(f"dtype_source must be 'current' or 'saved', got {dtype_source!r}")
        data = _onp.asarray(data)
        if self._shape is not None:
            known = [d if d > 0 else -1 for d in self._shape]
            if len(known) != data.ndim or any(d not in (-1, s) for d, s in zip(known, data.shape)):
                raise ValueError(f"Failed loading Parameter '{name}' from saved params: "
                                 f"shape incompatible expected {self.shape} vs saved {data.shape}")
        self._shape = tuple(data.shape)
        if dtype_name(data.dtype) != self.dtype:
            if not cast_dtype:
                raise ValueError(f"Failed loading Parameter '{name}' from saved params: "
                                 f"dtype incompatible expected {self.dtype} vs saved "
                                 f"{dtype_name(data.dtype)}. Set cast_dtype=True to cast the "
                                 f"dtype of saved params.")
            if dtype_source == 'saved':  # else np.array below casts to the current dtype
                self._tell_trainer()  # new copies of the saved dtype
                self.dtype = dtype_name(data.dtype)
        devices = None if device is None else _as_device_list(device)
        array = np.array(data, dtype=self.dtype, device=cpu())
        if self._data is None:
            if devices is None:
                devices = self._deferred_init[1] if self._deferred_init else [current_device()]
            self._deferred_init = ()
            self._init_impl(array, devices)
            return
        if devices is not None and set(devices) != set(self._device_list):
            raise ValueError(f"Failed to load Parameter '{name}' on {devices} because it "
                             f"was previous initialized on {self._device_list}.")
        if self._data[0].dtype != array.dtype:  # dtype_source='saved' changed the dtype
            self._init_impl(array, self._device_list)
            return
        self.set_data(array)


class Constant(Parameter):
    """A parameter that never changes (grad_req 'null'), initialised to `value`."""

    def __init__(self, value, name='const'):
        host = value._host_values() if hasattr(value, 'asnumpy') else _onp.asarray(value)
        if host.dtype == _onp.float64 and not hasattr(value, 'asnumpy'):
            host = host.astype(_onp.float32)
        self.value = host
        super().__init__(name=name, grad_req='null', shape=host.shape, dtype=host.dtype,
                         init=_init.Constant(host), differentiable=False)

    def __repr__(self):
        return f'Constant {self.name} (shape={self.shape}, dtype={self.dtype})'


class ParameterDict(dict):
    """What Block.collect_params() returns: a plain {structural name: Parameter} dict, plus
    helpers acting on every parameter (MXNet 1.x ParameterDict methods the tutorial uses)."""

    def _unique_items(self):
        """(name, Parameter) once per Parameter: a shared one under its first name."""
        seen = set()
        for name, p in self.items():
            if id(p) not in seen:
                seen.add(id(p))
                yield name, p

    def _unique(self):
        return (p for _, p in self._unique_items())

    def initialize(self, init=None, device=None, verbose=False, force_reinit=False):
        """Initialises each Parameter once: a shared one is not warned about as already
        initialised under its other names (MXNet 2.x warns)."""
        if init is None:
            init = _init.Uniform()
        for name, p in self._unique_items():
            p.initialize(None, device, default_init=init, force_reinit=force_reinit)
            if verbose:
                print(f"Initialized {name} with {p.init if p.init is not None else init}")

    def zero_grad(self):
        for p in self._unique():
            p.zero_grad()

    def reset_device(self, device):
        for p in self._unique():
            p.reset_device(device)

    reset_ctx = reset_device

    def setattr(self, name, value):
        """Sets attribute `name` (e.g. 'grad_req', 'lr_mult') on every parameter."""
        for p in self._unique():
            setattr(p, name, value)

    def list_device(self):
        devices = []
        for p in self._unique():
            devices.extend(d for d in p.list_device() if d not in devices)
        return devices

    def save(self, filename):
        from ._params_file import save_npz
        save_npz(filename, {name: p._reduce()._host_values() for name, p in self.items()})

    def load(self, filename, device=None, allow_missing=False, ignore_extra=False,
             cast_dtype=False, dtype_source='current'):
        from ._params_file import load_params_file, load_into
        load_into(self, load_params_file(filename), filename, device, allow_missing,
                  ignore_extra, cast_dtype, dtype_source)
