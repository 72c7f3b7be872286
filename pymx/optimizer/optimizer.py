"""Optimizers (MXNet's `mx.optimizer`), each step one fused update op per parameter.

The Python side schedules the learning rate, applies lr_mult / wd_mult, counts updates per
parameter and, for Adam, folds the bias correction into the learning rate; the fused ops in
engine/src/ops/optimizer.cc do the arithmetic in place on the weight's device (formulas there).
"""
import math
import pickle

import numpy as _onp

from .. import autograd
from .. import numpy as np
from .._op import invoke
from ..base import bfloat16
from ..ndarray import ndarray

__all__ = ['Optimizer', 'SGD', 'NAG', 'Adam', 'AdamW', 'RMSProp', 'AdaGrad', 'Updater',
           'create', 'register', 'get_updater']

_REGISTRY = {}


def register(klass):
    """Registers an optimizer class under its lower-cased name, for create('sgd')."""
    _REGISTRY[klass.__name__.lower()] = klass
    return klass


def create(name, **kwargs):
    """Creates an optimizer by name ('sgd', 'adam', ...) with its keyword arguments."""
    if isinstance(name, Optimizer):
        return name
    klass = _REGISTRY.get(str(name).lower())
    if klass is None:
        raise ValueError(f"Cannot find optimizer '{name}'. Known optimizers: "
                         f"{sorted(_REGISTRY)}")
    return klass(**kwargs)


class Optimizer:
    """Base class.

    rescale_grad multiplies every gradient first (the Trainer sets it to 1/batch_size); then
    clip_gradient clips it to [-c, c] (None, 0 or a negative value: off); wd is the L2 weight decay. The learning rate
    is `learning_rate`, or lr_scheduler(num_update) when a scheduler is given. param_dict maps an
    index to its Parameter, whose lr_mult / wd_mult scale lr and wd. multi_precision keeps a
    float32 master copy of float16 and bfloat16 weights and updates that.
    """

    def __init__(self, rescale_grad=1.0, param_idx2name=None, wd=0.0, clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, begin_num_update=0,
                 multi_precision=False, param_dict=None, aggregate_num=None,
                 use_fused_step=None, **kwargs):
        if kwargs:
            raise TypeError(f"{type(self).__name__} got unexpected optimizer parameter(s) "
                            f"{sorted(kwargs)}")
        self.rescale_grad = rescale_grad
        if lr_scheduler is not None and not callable(lr_scheduler):
            raise TypeError(f"{type(self).__name__}: lr_scheduler must be an LRScheduler (a "
                            f"callable of num_update), got {type(lr_scheduler).__name__}: "
                            f"{lr_scheduler!r}")
        self.lr_scheduler = lr_scheduler
        if learning_rate is None:
            learning_rate = 0.01 if lr_scheduler is None else lr_scheduler.base_lr
        if lr_scheduler is not None:
            lr_scheduler.base_lr = learning_rate
        self.lr = learning_rate
        self.wd = wd
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self.aggregate_num = aggregate_num or 1
        self.param_dict = param_dict if param_dict is not None else {}
        self.idx2name = dict(param_idx2name or {})
        # Per device (updater) counts, as MXNet: copies of one parameter on several devices are
        # updated once per step each, which must count as one update.
        self._all_index_update_counts = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.lr_mult = {}
        self.wd_mult = {}

    @property
    def learning_rate(self):
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr):
        if self.lr_scheduler is not None:
            raise UserWarning("LRScheduler of the optimizer has already been defined. Note that "
                              "set_learning_rate can mutate the value of the learning rate of "
                              "the optimizer only when the LRScheduler of the optimizer is "
                              "undefined.")
        self.lr = lr

    def set_lr_mult(self, args_lr_mult):
        self.lr_mult = dict(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        self.wd_mult = dict(args_wd_mult)

    def _set_current_context(self, device_key):
        self._index_update_count = self._all_index_update_counts.setdefault(device_key, {})

    def _update_count(self, index):
        count = self._index_update_count.get(index, self.begin_num_update) + 1
        self._index_update_count[index] = count
        self.num_update = max(count, self.num_update)

    def _get_lr(self, index):
        lr = self.learning_rate
        if index in self.param_dict:
            lr *= self.param_dict[index].lr_mult
        elif index in self.lr_mult:
            lr *= self.lr_mult[index]
        elif index in self.idx2name:
            lr *= self.lr_mult.get(self.idx2name[index], 1.0)
        return lr

    def _get_wd(self, index):
        wd = self.wd
        if index in self.param_dict:
            wd *= self.param_dict[index].wd_mult
        elif index in self.wd_mult:
            wd *= self.wd_mult[index]
        elif index in self.idx2name:
            wd *= self.wd_mult.get(self.idx2name[index], 1.0)
        return wd

    @property
    def _clip_bound(self):
        """clip_gradient when clipping is on, else None. MXNet's fused rules pass clip_gradient
        to their kernels only when it is truthy and the kernels clip only when it is >= 0, so 0
        and negative values turn clipping off (rather than zeroing every gradient)."""
        if self.clip_gradient is None or self.clip_gradient <= 0:
            return None
        return self.clip_gradient

    def _common_attrs(self, index):
        return dict(lr=self._get_lr(index), wd=self._get_wd(index),
                    rescale_grad=self.rescale_grad,
                    clip_gradient=-1.0 if self._clip_bound is None else self._clip_bound)

    def _preprocessed_grad(self, grad, weight=None, wd=0.0):
        """rescale_grad * grad, clipped to [-clip_gradient, clip_gradient] when clipping is on,
        plus wd * weight when `weight` is given: the gradient most rules start from. A new
        array; `grad` is left as it is."""
        grad = grad * self.rescale_grad
        if self._clip_bound is not None:
            grad = np.clip(grad, -self._clip_bound, self._clip_bound)
        if weight is not None:
            grad = grad + wd * weight
        return grad

    # ---- states and steps ---------------------------------------------------------------------

    def create_state(self, index, weight):
        """The optimizer state for one weight (None, an array, or a tuple of arrays)."""
        return None

    def _uses_master_copy(self, weight):
        return self.multi_precision and weight.dtype in (_onp.float16, bfloat16)

    def create_state_multi_precision(self, index, weight):
        if self._uses_master_copy(weight):
            master = weight.astype('float32')
            return master, self.create_state(index, master)
        return self.create_state(index, weight)

    def fused_update(self, index, weight, grad, state):
        """The fused op that updates `weight` in place, as (name, inputs, attrs) with the
        per-parameter 'lr' and 'wd' among the attrs; None when the rule has no such op (then
        unfused_step runs)."""
        return None

    def unfused_step(self, index, weight, grad, state):
        """The update of a rule, or a variant, that fused_update does not cover."""
        raise NotImplementedError(f"{type(self).__name__} must implement step, fused_update or "
                                  f"unfused_step")

    def step(self, index, weight, grad, state):
        """Updates `weight` in place (the update count is already advanced). A subclass may
        override it; the updater then calls it for every parameter instead of batching."""
        call = self.fused_update(index, weight, grad, state)
        if call is None:
            self.unfused_step(index, weight, grad, state)
        else:
            invoke(*call)

    def update(self, indices, weights, grads, states):
        for index, weight, grad, state in zip(indices, weights, grads, states):
            self._update_count(index)
            self.step(index, weight, grad, state)

    def update_multi_precision(self, indices, weights, grads, states):
        """Updates every weight; the fused ops of parameters sharing a device and every attribute
        but lr and wd run as one multi_ op (one call for all of a device's parameters)."""
        batches = {}  # (op, device, shared attrs) -> (inputs, lrs, wds)
        own_step = type(self).step is not Optimizer.step  # a subclass's step sees every update
        with autograd.pause():
            for index, weight, grad, state in zip(indices, weights, grads, states):
                self._update_count(index)
                if self._uses_master_copy(weight):
                    master, inner = state
                    self.step(index, master, grad.astype('float32'), inner)
                    weight[:] = master.astype(weight.dtype)
                    continue
                call = None if own_step else self.fused_update(index, weight, grad, state)
                if call is None:
                    self.step(index, weight, grad, state)
                    continue
                name, inputs, attrs = call
                lr, wd = attrs.pop('lr'), attrs.pop('wd')
                key = (name, weight.device, tuple(sorted(attrs.items())))
                batch = batches.setdefault(key, ([], [], []))
                batch[0].extend(inputs)
                batch[1].append(lr)
                batch[2].append(wd)
            for (name, _, shared), (inputs, lrs, wds) in batches.items():
                if len(lrs) == 1:
                    invoke(name, inputs, dict(shared, lr=lrs[0], wd=wds[0]))
                else:
                    invoke('multi_' + name, inputs,
                           dict(shared, num_weights=len(lrs), lrs=tuple(lrs), wds=tuple(wds)))

    def __getstate__(self):
        state = self.__dict__.copy()
        state['param_dict'] = {}  # Parameters hold device arrays; the Trainer re-attaches them
        return state


def _zeros_like(weight):
    return np.zeros(weight.shape, dtype=weight.dtype, device=weight.device)


@register
class SGD(Optimizer):
    """SGD with optional momentum: mom = momentum*mom - lr*(grad + wd*w); w += mom."""

    def __init__(self, learning_rate=0.1, momentum=0.0, lazy_update=False, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum

    def create_state(self, index, weight):
        return _zeros_like(weight) if self.momentum != 0.0 else None

    def fused_update(self, index, weight, grad, state):
        attrs = self._common_attrs(index)
        if state is None:
            return 'sgd_update', [weight, grad], attrs
        return 'sgd_mom_update', [weight, grad, state], dict(attrs, momentum=self.momentum)


@register
class NAG(Optimizer):
    """Nesterov accelerated SGD."""

    def __init__(self, learning_rate=0.1, momentum=0.9, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum

    def create_state(self, index, weight):
        return _zeros_like(weight)

    def fused_update(self, index, weight, grad, state):
        return ('nag_mom_update', [weight, grad, state],
                dict(self._common_attrs(index), momentum=self.momentum))


@register
class Adam(Optimizer):
    """Adam; the bias correction sqrt(1-beta2^t)/(1-beta1^t) is folded into the learning rate."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=False, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return _zeros_like(weight), _zeros_like(weight)

    def fused_update(self, index, weight, grad, state):
        t = self._index_update_count[index]
        attrs = self._common_attrs(index)
        attrs['lr'] *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        mean, var = state
        return ('adam_update', [weight, grad, mean, var],
                dict(attrs, beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon))


@register
class AdamW(Optimizer):
    """Adam with decoupled weight decay (MXNet's form):
    w -= lr_t * (mean / (sqrt(var) + eps) + wd*w), lr_t = lr * sqrt(1-beta2^t)/(1-beta1^t)
    (lr_t = lr without correct_bias)."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 correct_bias=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.correct_bias = correct_bias

    def create_state(self, index, weight):
        return _zeros_like(weight), _zeros_like(weight)

    def fused_update(self, index, weight, grad, state):
        t = self._index_update_count[index]
        attrs = self._common_attrs(index)
        lr = attrs['lr']
        if self.correct_bias:
            lr *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        # The op computes w -= eta * (lr * mean/(sqrt(var)+eps) + wd*w); with eta 1 the rate goes
        # into lr and wd, which a multi_ op takes per parameter.
        mean, var = state
        return ('adamw_update', [weight, grad, mean, var],
                dict(attrs, lr=lr, wd=attrs['wd'] * lr, eta=1.0, beta1=self.beta1,
                     beta2=self.beta2, epsilon=self.epsilon))


@register
class RMSProp(Optimizer):
    """RMSProp. Plain: n = rho*n + (1-rho)*g^2; w -= lr*g/(sqrt(n)+eps). centered=True (Graves'
    variant) also tracks the mean gradient and uses momentum:
    delta = momentum*delta - lr*g/sqrt(n - mean^2 + eps); w += delta."""

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.9, epsilon=1e-8, centered=False,
                 clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.rho = rho
        self.momentum = momentum
        self.epsilon = epsilon
        self.centered = centered
        self.clip_weights = clip_weights

    @property
    def _clip_weights_bound(self):
        """clip_weights when on, else None (None, 0 and negative values: off, as in MXNet)."""
        if self.clip_weights is None or self.clip_weights <= 0:
            return None
        return self.clip_weights

    def create_state(self, index, weight):
        if self.centered:
            return _zeros_like(weight), _zeros_like(weight), _zeros_like(weight)
        return _zeros_like(weight)

    def fused_update(self, index, weight, grad, state):
        if self.centered:
            return None
        return ('rmsprop_update', [weight, grad, state],
                dict(self._common_attrs(index), rho=self.rho, epsilon=self.epsilon,
                     clip_weights=self._clip_weights_bound or -1.0))

    def unfused_step(self, index, weight, grad, state):  # centered
        attrs = self._common_attrs(index)
        n, mean, delta = state
        g = self._preprocessed_grad(grad, weight, attrs['wd'])
        n[:] = self.rho * n + (1 - self.rho) * g * g
        mean[:] = self.rho * mean + (1 - self.rho) * g
        delta[:] = self.momentum * delta - attrs['lr'] * g / np.sqrt(n - mean * mean +
                                                                      self.epsilon)
        new_weight = weight + delta
        if self._clip_weights_bound is not None:
            new_weight = np.clip(new_weight, -self._clip_weights_bound, self._clip_weights_bound)
        weight[:] = new_weight


@register
class AdaGrad(Optimizer):
    """AdaGrad: history += g^2; w -= lr * g / (sqrt(history) + eps)."""

    def __init__(self, learning_rate=0.01, epsilon=1e-6, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return _zeros_like(weight)

    def fused_update(self, index, weight, grad, state):
        return ('adagrad_update', [weight, grad, state],
                dict(self._common_attrs(index), epsilon=self.epsilon))


# ---- Updater ----------------------------------------------------------------------------------

def _to_host(state):
    if isinstance(state, ndarray):
        return ('array', state._host_values())
    if isinstance(state, (list, tuple)):
        return ('tuple', [_to_host(s) for s in state])
    return ('value', state)


def _to_device(state, device):
    kind, value = state
    if kind == 'array':
        return np.array(value, dtype=value.dtype, device=device)
    if kind == 'tuple':
        return tuple(_to_device(s, device) for s in value)
    return value


class Updater:
    """Applies an optimizer to (index, grad, weight) triples, creating states lazily.

    One Updater serves one device; its states live on that device.
    """

    _next_key = 0

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.states = {}
        self._host_states = {}  # loaded by set_states, moved to the weight's device on use
        self._loaded_counts = None  # loaded by set_states, given to the optimizer on use
        Updater._next_key += 1
        self._key = Updater._next_key

    def __call__(self, index, grad, weight):
        indices = index if isinstance(index, (list, tuple)) else [index]
        grads = grad if isinstance(grad, (list, tuple)) else [grad]
        weights = weight if isinstance(weight, (list, tuple)) else [weight]
        for i, w in zip(indices, weights):
            if i in self._host_states:
                self.states[i] = _to_device(self._host_states.pop(i), w.device)
            elif i not in self.states:
                with autograd.pause():
                    self.states[i] = self.optimizer.create_state_multi_precision(i, w)
        if self._loaded_counts is not None:
            # Installed here rather than in set_states: the Trainer may hand this updater
            # another updater's copy of the loaded optimizer.
            self.optimizer._all_index_update_counts[self._key] = self._loaded_counts
            self._loaded_counts = None
        self.optimizer._set_current_context(self._key)
        self.optimizer.update_multi_precision(indices, weights, grads,
                                              [self.states[i] for i in indices])

    def get_states(self, dump_optimizer=False):
        """Pickled states (as host arrays); with dump_optimizer, also the optimizer and this
        device's update counts (which rules such as Adam's bias correction depend on)."""
        states = {i: _to_host(s) for i, s in self.states.items()}
        states.update(self._host_states)
        if not dump_optimizer:
            return pickle.dumps(states)
        counts = self._loaded_counts
        if counts is None:
            counts = self.optimizer._all_index_update_counts.get(self._key, {})
        return pickle.dumps((states, self.optimizer, dict(counts)))

    def set_states(self, blob):
        """Restores states from get_states(); an included optimizer replaces the current one,
        and the saved update counts continue on this updater's device."""
        try:
            loaded = pickle.loads(blob)
        except Exception as e:  # a truncated or foreign file fails in many ways inside pickle
            raise ValueError(f"the optimizer states are corrupt or truncated "
                             f"({type(e).__name__}: {e})") from e
        well_formed = isinstance(loaded, dict) or (
            isinstance(loaded, tuple) and len(loaded) in (2, 3) and
            isinstance(loaded[0], dict) and isinstance(loaded[1], Optimizer))
        if not well_formed:
            raise ValueError(f"the file holds a {type(loaded).__name__}, not optimizer states")
        if isinstance(loaded, tuple):
            loaded, optimizer, *counts = loaded
            optimizer.param_dict = self.optimizer.param_dict
            self.optimizer = optimizer
            # A file without the counts (written before they were saved beside the states)
            # still holds them in the optimizer: those of the device it updated last, which
            # every device shares.
            self._loaded_counts = dict(counts[0] if counts else optimizer._index_update_count)
            # Also at once, for a reader of the counts before the first update (the Trainer
            # carrying states to the updaters of new devices).
            optimizer._all_index_update_counts[self._key] = dict(self._loaded_counts)
        self.states = {}
        self._host_states = dict(loaded)


def get_updater(optimizer):
    """An Updater for `optimizer`."""
    return Updater(optimizer)
