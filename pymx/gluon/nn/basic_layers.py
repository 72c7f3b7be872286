"""Basic layers: containers, Dense, Dropout, normalisation (BatchNorm, BatchNormReLU, ...),
Flatten, Embedding, lambdas.

Differences from MXNet 2.x: GroupNorm checks num_groups and in_channels at construction,
naming the values. InstanceNorm(axis=k) sizes gamma and beta by the input's axis k (MXNet's
infer_shape reads axis 1 whatever the axis, which fails unless the two extents agree)."""
import numpy as _onp

from ... import numpy as np
from ... import numpy_extension as npx
from ...base import dtype_name
from ..block import Block, HybridBlock
from ..parameter import Parameter

__all__ = ['Sequential', 'HybridSequential', 'Dense', 'Dropout', 'BatchNorm', 'BatchNormReLU',
           'LayerNorm',
           'InstanceNorm', 'GroupNorm', 'Embedding', 'Flatten', 'Lambda', 'HybridLambda',
           'Activation', 'Identity', 'Concatenate', 'HybridConcatenate']


class _SequentialMixin:
    """add / indexing / len shared by Sequential and HybridSequential."""

    def add(self, *blocks):
        """Appends blocks; they are registered as children '0', '1', ..."""
        for block in blocks:
            self.register_child(block)

    def forward(self, x, *args):
        for block in self._children.values():
            x = block(x, *args)
            args = ()
            if isinstance(x, (tuple, list)):
                x, args = x[0], x[1:]
        return (x, *args) if args else x

    def __getitem__(self, key):
        layers = list(self._children.values())[key]
        if not isinstance(layers, list):
            return layers
        net = type(self)()
        net.add(*layers)
        return net

    def __len__(self):
        return len(self._children)


class Sequential(_SequentialMixin, Block):
    """Runs its children one after another."""


class HybridSequential(_SequentialMixin, HybridBlock):
    """Runs its (hybridizable) children one after another."""


class Concatenate(Sequential):
    """Runs every child on the same input and concatenates their outputs along `axis`."""

    def __init__(self, axis=-1):
        super().__init__()
        self._axis = axis

    def forward(self, x):
        return np.concatenate([block(x) for block in self._children.values()], axis=self._axis)


class HybridConcatenate(HybridSequential):
    """Runs every (hybridizable) child on the same input and concatenates their outputs along
    `axis`."""

    def __init__(self, axis=-1):
        super().__init__()
        self._axis = axis

    def forward(self, x):
        return np.concatenate([block(x) for block in self._children.values()], axis=self._axis)


class Identity(HybridBlock):
    """Returns its input."""

    def forward(self, x):
        return x

    def __repr__(self):
        return 'Identity'


def _activation(x, activation):
    return x if activation is None else npx.activation(x, act_type=activation)


class Dense(HybridBlock):
    """out = activation(x . W^T + b). W is (units, in_units); in_units=0 defers it to the first
    input. With `flatten`, x (N, d1, d2, ...) is seen as (N, d1*d2*...); otherwise the last axis
    is the feature axis."""

    def __init__(self, units, activation=None, use_bias=True, flatten=True, dtype='float32',
                 weight_initializer=None, bias_initializer='zeros', in_units=0):
        super().__init__()
        if not isinstance(units, int) or units <= 0:  # else deferred init fails, far from here
            raise ValueError(f"Dense: units must be a positive int, got {units!r}")
        self._units = units
        self._in_units = in_units
        self._flatten = flatten
        self._activation = activation
        self.weight = Parameter('weight', shape=(units, in_units), init=weight_initializer,
                                dtype=dtype, allow_deferred_init=True)
        self.bias = Parameter('bias', shape=(units,), init=bias_initializer, dtype=dtype,
                              allow_deferred_init=True) if use_bias else None

    def infer_shape(self, x, *args):
        in_units = int(_onp.prod(x.shape[1:])) if self._flatten else x.shape[-1]
        self.weight.shape = (self._units, in_units)

    def forward(self, x):
        device = x.device
        bias = self.bias.data(device) if self.bias is not None else None
        out = npx.fully_connected(x, self.weight.data(device), bias, num_hidden=self._units,
                                  no_bias=bias is None, flatten=self._flatten)
        return _activation(out, self._activation)

    def __repr__(self):
        shape = self.weight.shape
        act = self._activation if self._activation else 'linear'
        return f'Dense({shape[1] if shape[1] > 0 else None} -> {shape[0]}, {act})'


class Dropout(HybridBlock):
    """Zeroes inputs with probability `rate` (scaling the rest by 1/(1-rate)) in train mode;
    `axes` shares the mask along those axes. Identity in predict mode."""

    def __init__(self, rate, axes=()):
        super().__init__()
        if not 0 <= rate < 1:
            raise ValueError(f"Dropout rate must be in [0, 1), got {rate}")
        self._rate = rate
        self._axes = tuple(axes)

    def forward(self, x):
        if self._rate > 0:
            return npx.dropout(x, p=self._rate, axes=self._axes)
        return np.copy(x)

    def __repr__(self):
        return f'Dropout(p = {self._rate}, axes={self._axes})'


class BatchNorm(HybridBlock):
    """Batch normalisation over axis `axis` (the channel axis).

    Running statistics are per device: each device copy updates its own in training, and
    save_parameters writes their average (MXNet's behaviour; the Trainer never syncs them).
    """

    def __init__(self, axis=1, momentum=0.9, epsilon=1e-5, center=True, scale=True,
                 use_global_stats=False, beta_initializer='zeros', gamma_initializer='ones',
                 running_mean_initializer='zeros', running_variance_initializer='ones',
                 in_channels=0):
        super().__init__()
        self._axis = axis
        self._kwargs = dict(eps=epsilon, momentum=momentum, fix_gamma=not scale,
                            use_global_stats=use_global_stats, axis=axis)
        self._in_channels = in_channels
        self.gamma = Parameter('gamma', grad_req='write' if scale else 'null',
                               shape=(in_channels,), init=gamma_initializer,
                               allow_deferred_init=True, differentiable=scale)
        self.beta = Parameter('beta', grad_req='write' if center else 'null',
                              shape=(in_channels,), init=beta_initializer,
                              allow_deferred_init=True, differentiable=center)
        self.running_mean = Parameter('running_mean', grad_req='null', shape=(in_channels,),
                                      init=running_mean_initializer, allow_deferred_init=True,
                                      differentiable=False)
        self.running_var = Parameter('running_var', grad_req='null', shape=(in_channels,),
                                     init=running_variance_initializer, allow_deferred_init=True,
                                     differentiable=False)

    def cast(self, dtype):
        # Statistics and affine parameters stay float32 under float16 and bfloat16 (MXNet's rule).
        if dtype_name(dtype) in ('float16', 'bfloat16'):
            dtype = 'float32'
        super().cast(dtype)

    def infer_shape(self, x, *args):
        channels = x.shape[self._axis]
        for param in (self.gamma, self.beta, self.running_mean, self.running_var):
            param.shape = (channels,)

    def forward(self, x):
        device = x.device
        return npx.batch_norm(x, self.gamma.data(device), self.beta.data(device),
                              self.running_mean.data(device), self.running_var.data(device),
                              **self._kwargs)

    def __repr__(self):
        channels = self.gamma.shape[0]
        return (f'{type(self).__name__}(axis={self._axis}, eps={self._kwargs["eps"]}, '
                f'momentum={self._kwargs["momentum"]}, fix_gamma={self._kwargs["fix_gamma"]}, '
                f'use_global_stats={self._kwargs["use_global_stats"]}, '
                f'in_channels={channels if channels > 0 else None})')


class BatchNormReLU(BatchNorm):
    """BatchNorm followed by relu, with BatchNorm's arguments and parameters (MXNet 2.x's
    layer, which fuses the two where its backend can; pymx's batch_norm has no activation, so
    relu runs as its own operator)."""

    def forward(self, x):
        return npx.relu(super().forward(x))


class LayerNorm(HybridBlock):
    """Normalises over axis `axis` per sample: (x - mean) / sqrt(var + eps) * gamma + beta."""

    def __init__(self, axis=-1, epsilon=1e-5, center=True, scale=True, beta_initializer='zeros',
                 gamma_initializer='ones', in_channels=0):
        super().__init__()
        self._axis = axis
        self._epsilon = epsilon
        self.gamma = Parameter('gamma', grad_req='write' if scale else 'null',
                               shape=(in_channels,), init=gamma_initializer,
                               allow_deferred_init=True)
        self.beta = Parameter('beta', grad_req='write' if center else 'null',
                              shape=(in_channels,), init=beta_initializer,
                              allow_deferred_init=True)

    def infer_shape(self, x, *args):
        channels = x.shape[self._axis]
        self.gamma.shape = (channels,)
        self.beta.shape = (channels,)

    def forward(self, x):
        device = x.device
        return npx.layer_norm(x, self.gamma.data(device), self.beta.data(device),
                              axis=self._axis, eps=self._epsilon)


def _norm_params(layer, in_channels, center, scale, beta_initializer, gamma_initializer):
    """gamma and beta of shape (in_channels,) (0: deferred to the first input), trained when
    `scale` / `center` (else held at their initial values: grad_req 'null')."""
    layer.gamma = Parameter('gamma', grad_req='write' if scale else 'null', shape=(in_channels,),
                            init=gamma_initializer, allow_deferred_init=True,
                            differentiable=scale)
    layer.beta = Parameter('beta', grad_req='write' if center else 'null', shape=(in_channels,),
                           init=beta_initializer, allow_deferred_init=True,
                           differentiable=center)


class InstanceNorm(HybridBlock):
    """Instance normalisation (Ulyanov et al., 2016): each channel (axis `axis`) of each sample
    is normalised over its other axes, (x - mean) / sqrt(var + epsilon) * gamma + beta.
    The input has at least 3 dimensions, the first the batch."""

    def __init__(self, axis=1, epsilon=1e-5, center=True, scale=False, beta_initializer='zeros',
                 gamma_initializer='ones', in_channels=0):
        super().__init__()
        self._axis = axis
        self._epsilon = epsilon
        _norm_params(self, in_channels, center, scale, beta_initializer, gamma_initializer)

    def infer_shape(self, x, *args):
        self.gamma.shape = (x.shape[self._axis],)
        self.beta.shape = (x.shape[self._axis],)

    def forward(self, x):
        device = x.device
        gamma, beta = self.gamma.data(device), self.beta.data(device)
        if self._axis in (1, 1 - x.ndim):
            return npx.instance_norm(x, gamma, beta, eps=self._epsilon)
        # instance_norm's channels are axis 1: the channel axis is swapped there and back.
        out = npx.instance_norm(np.swapaxes(x, 1, self._axis), gamma, beta, eps=self._epsilon)
        return np.swapaxes(out, 1, self._axis)

    def __repr__(self):
        channels = self.gamma.shape[0]
        return (f'InstanceNorm(axis={self._axis}, eps={self._epsilon}, '
                f'in_channels={channels if channels > 0 else None})')


class GroupNorm(HybridBlock):
    """Group normalisation (Wu and He, 2018): each sample's channels (axis 1) form `num_groups`
    groups, each normalised over its channels and positions, then scaled and shifted per
    channel by gamma and beta of shape (in_channels,). The input has at least 3 dimensions."""

    def __init__(self, num_groups=1, epsilon=1e-5, center=True, scale=True,
                 beta_initializer='zeros', gamma_initializer='ones', in_channels=0):
        super().__init__()
        if not isinstance(num_groups, int) or num_groups < 1:
            raise ValueError(f"GroupNorm: num_groups must be a positive int, got {num_groups!r}")
        if in_channels % num_groups:
            raise ValueError(f"GroupNorm: num_groups {num_groups} does not divide in_channels "
                             f"{in_channels}")
        self._num_groups = num_groups
        self._epsilon = epsilon
        _norm_params(self, in_channels, center, scale, beta_initializer, gamma_initializer)

    def infer_shape(self, x, *args):
        self.gamma.shape = (x.shape[1],)
        self.beta.shape = (x.shape[1],)

    def forward(self, x):
        device = x.device
        return npx.group_norm(x, self.gamma.data(device), self.beta.data(device),
                              num_groups=self._num_groups, eps=self._epsilon)

    def __repr__(self):
        channels = self.gamma.shape[0]
        return (f'GroupNorm(num_groups={self._num_groups}, eps={self._epsilon}, '
                f'in_channels={channels if channels > 0 else None})')


class Embedding(HybridBlock):
    """Maps integer indices (any shape) to rows of a (input_dim, output_dim) weight."""

    def __init__(self, input_dim, output_dim, dtype='float32', weight_initializer=None,
                 sparse_grad=False):
        super().__init__()
        if sparse_grad:
            raise ValueError("Embedding: sparse_grad=True is not supported (dense gradients "
                             "only)")
        self._input_dim = input_dim
        self._output_dim = output_dim
        self._dtype = dtype
        self.weight = Parameter('weight', shape=(input_dim, output_dim), init=weight_initializer,
                                dtype=dtype, allow_deferred_init=True)

    def forward(self, x):
        return npx.embedding(x, self.weight.data(x.device), input_dim=self._input_dim,
                             output_dim=self._output_dim, dtype=self._dtype)

    def __repr__(self):
        return f'Embedding({self._input_dim} -> {self._output_dim}, {self._dtype})'


class Flatten(HybridBlock):
    """(N, d1, d2, ...) -> (N, d1*d2*...)."""

    def forward(self, x):
        return npx.batch_flatten(x)

    def __repr__(self):
        return 'Flatten'


class Activation(HybridBlock):
    """An activation by name: 'relu', 'sigmoid', 'tanh', 'softrelu', 'softsign', ..."""

    def __init__(self, activation):
        super().__init__()
        self._act_type = activation

    def forward(self, x):
        return npx.activation(x, act_type=self._act_type)

    def __repr__(self):
        return f'Activation({self._act_type})'


def _resolve_function(function, what):
    if isinstance(function, str):
        for namespace in (np, npx):
            if hasattr(namespace, function):
                return getattr(namespace, function)
        raise ValueError(f"{what}: no function named '{function}' in pymx.np or pymx.npx")
    if not callable(function):
        raise ValueError(f"{what}: expected a function or a function name, got "
                         f"{type(function).__name__}")
    return function


class Lambda(Block):
    """Wraps a function (or the name of a pymx.np / npx function) as a Block."""

    def __init__(self, function):
        super().__init__()
        self._func = _resolve_function(function, 'Lambda')

    def forward(self, *args):
        return self._func(*args)

    def __repr__(self):
        return f'Lambda({getattr(self._func, "__name__", self._func)})'


class HybridLambda(HybridBlock):
    """Wraps a function of pymx.np / npx operations (or such a function's name) as a
    HybridBlock."""

    def __init__(self, function):
        super().__init__()
        self._func = _resolve_function(function, 'HybridLambda')

    def forward(self, x, *args):
        return self._func(x, *args)

    def __repr__(self):
        return f'HybridLambda({getattr(self._func, "__name__", self._func)})'
