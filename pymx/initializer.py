"""Weight initializers (MXNet's `mx.init`).

An initializer fills an existing array in place: ``init(name, arr)``. When a Parameter has no
initializer of its own, the global one decides by the parameter's name (MXNet's default rules):
biases, betas and running means start at zero, gammas and running variances at one, everything
else goes through the initializer's weight rule. A Parameter's own initializer always applies its
weight rule, whatever the name.

Deliberate differences from MXNet 2.x: Mixed and Load are Initializers (so that they are accepted
wherever an initializer is); LSTMBias requires a first dimension divisible by 4 and Bilinear a
4-D weight, raising ValueError instead of filling a wrong pattern.
"""
import json
import logging
import math
import re

import numpy as _onp

from . import numpy as _np

__all__ = ['Initializer', 'Uniform', 'Normal', 'Xavier', 'MSRAPrelu', 'Zero', 'One', 'Constant',
           'Orthogonal', 'Bilinear', 'LSTMBias', 'Mixed', 'Load', 'register', 'create']

_REGISTRY = {}


def register(klass):
    """Registers an initializer class under its lower-cased name (for ``create('xavier')``)."""
    _REGISTRY[klass.__name__.lower()] = klass
    return klass


def create(init):
    """Returns an Initializer from an instance, a registered name ('xavier', 'zeros', ...), the
    JSON of Initializer.dumps() ('["xavier", {"magnitude": 2}]') or None."""
    if init is None or isinstance(init, Initializer):
        return init
    if isinstance(init, str) and init.startswith('['):
        name, kwargs = json.loads(init)
        klass = _REGISTRY.get(name.lower())
        if klass is None:
            raise ValueError(f"Unknown initializer '{name}'. Known initializers: "
                             f"{sorted(_REGISTRY)}")
        return klass(**kwargs)
    if isinstance(init, str):
        klass = _REGISTRY.get(init.lower())
        if klass is None:
            raise ValueError(f"Unknown initializer '{init}'. Known initializers: "
                             f"{sorted(_REGISTRY)}")
        return klass()
    raise TypeError(f"An initializer must be an Initializer or a name, got {type(init).__name__}")


# Name suffix -> fill value used when no explicit initializer is set (MXNet's Initializer.__call__).
_SUFFIX_RULES = (('bias', 0.0), ('beta', 0.0), ('gamma', 1.0), ('running_mean', 0.0),
                 ('moving_mean', 0.0), ('running_var', 1.0), ('moving_var', 1.0),
                 ('min', 0.0), ('max', 0.0))


class Initializer:
    """Base class. Subclasses implement ``_init_weight(name, arr)``."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs

    def __call__(self, name, arr, explicit=False):
        """Fills `arr` in place. `explicit` is True when this is the parameter's own initializer."""
        if not explicit:
            for suffix, value in _SUFFIX_RULES:
                if name.endswith(suffix):
                    arr[:] = value
                    return
        self._init_weight(name, arr)

    def _init_weight(self, name, arr):
        raise NotImplementedError(f"{type(self).__name__} must implement _init_weight")

    def dumps(self):
        """JSON [lower-cased class name, constructor arguments], which create() accepts."""
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __repr__(self):
        args = ', '.join(f'{k}={v!r}' for k, v in self._kwargs.items())
        return f'{type(self).__name__}({args})'


@register
class Zero(Initializer):
    """Fills with 0."""

    def _init_weight(self, name, arr):
        arr[:] = 0.0


@register
class One(Initializer):
    """Fills with 1."""

    def _init_weight(self, name, arr):
        arr[:] = 1.0


@register
class Constant(Initializer):
    """Fills with `value` (a scalar or an array broadcastable to the parameter)."""

    def __init__(self, value=0.0):
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, name, arr):
        arr[:] = self.value


@register
class Uniform(Initializer):
    """Samples from U(-scale, scale)."""

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, name, arr):
        arr[:] = _np.random.uniform(-self.scale, self.scale, size=arr.shape, dtype=arr.dtype,
                                   device=arr.device)


@register
class Normal(Initializer):
    """Samples from N(0, sigma^2)."""

    def __init__(self, sigma=0.01):
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, name, arr):
        arr[:] = _np.random.normal(0.0, self.sigma, size=arr.shape, dtype=arr.dtype,
                                  device=arr.device)


@register
class Xavier(Initializer):
    """Xavier/Glorot: scale = sqrt(magnitude / factor), factor from fan-in/fan-out.

    rnd_type 'uniform' samples U(-scale, scale); 'gaussian' samples N(0, scale^2).
    factor_type 'avg' uses (fan_in + fan_out) / 2, 'in' fan_in, 'out' fan_out.
    """

    def __init__(self, rnd_type='uniform', factor_type='avg', magnitude=3):
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        if rnd_type not in ('uniform', 'gaussian'):
            raise ValueError(f"Xavier: rnd_type must be 'uniform' or 'gaussian', got {rnd_type!r}")
        if factor_type not in ('avg', 'in', 'out'):
            raise ValueError(f"Xavier: factor_type must be 'avg', 'in' or 'out', got {factor_type!r}")
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _init_weight(self, name, arr):
        shape = arr.shape
        if len(shape) < 2:
            raise ValueError(f"Xavier initializer cannot be applied to vector {name}. "
                             f"It requires at least 2D.")
        hw_scale = math.prod(shape[2:]) if len(shape) > 2 else 1
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        factor = {'avg': (fan_in + fan_out) / 2.0, 'in': fan_in, 'out': fan_out}[self.factor_type]
        scale = math.sqrt(self.magnitude / factor)
        if self.rnd_type == 'uniform':
            arr[:] = _np.random.uniform(-scale, scale, size=shape, dtype=arr.dtype, device=arr.device)
        else:
            arr[:] = _np.random.normal(0.0, scale, size=shape, dtype=arr.dtype, device=arr.device)


@register
class MSRAPrelu(Xavier):
    """He initialisation for PReLU slopes: gaussian Xavier with magnitude 2 / (1 + slope^2)."""

    def __init__(self, factor_type='avg', slope=0.25):
        super().__init__('gaussian', factor_type, 2.0 / (1 + slope ** 2))
        self._kwargs = {'factor_type': factor_type, 'slope': slope}


def _fill_from_host(arr, values):
    """Copies host (NumPy) values into `arr`, converted to its dtype on its device."""
    arr[:] = _np.array(values, dtype=arr.dtype, device=arr.device)


@register
class Orthogonal(Initializer):
    """scale * an orthogonal matrix (Saxe et al., arXiv:1312.6120), reshaped to the weight.

    The weight is seen as (shape[0], prod(shape[1:])); a random matrix of that shape (rand_type
    'uniform': U(-1, 1), 'normal': N(0, 1)) is replaced by the orthonormal factor of its SVD
    that has its shape, so rows (or columns, whichever are fewer) are orthonormal.
    """

    def __init__(self, scale=1.414, rand_type='uniform'):
        super().__init__(scale=scale, rand_type=rand_type)
        if rand_type not in ('uniform', 'normal'):
            raise ValueError(f"Orthogonal: rand_type must be 'uniform' or 'normal', got "
                             f"{rand_type!r}")
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, name, arr):
        if arr.ndim < 1:
            raise ValueError(f"Orthogonal initializer cannot be applied to scalar {name}")
        flat_shape = (arr.shape[0], math.prod(arr.shape[1:]))
        if self.rand_type == 'uniform':
            draw = _np.random.uniform(-1.0, 1.0, size=flat_shape, dtype='float64')
        else:
            draw = _np.random.normal(0.0, 1.0, size=flat_shape, dtype='float64')
        u, _, v = _onp.linalg.svd(draw.asnumpy(), full_matrices=False)
        orthonormal = u if u.shape == flat_shape else v
        _fill_from_host(arr, self.scale * orthonormal.reshape(arr.shape))


@register
class Bilinear(Initializer):
    """Bilinear-interpolation kernels for upsampling with a Deconvolution weight
    (channels_out, channels_in, height, width): every (out, in) slice gets
    (1 - |x/f - c|) * (1 - |y/f - c|) with f = ceil(width / 2) and c = (2f - 1 - f % 2) / (2f).
    """

    def __init__(self):
        super().__init__()

    def _init_weight(self, name, arr):
        if arr.ndim != 4:
            raise ValueError(f"Bilinear initializer needs a 4-D weight (out, in, height, width); "
                             f"{name} has shape {arr.shape}")
        height, width = arr.shape[2:]
        f = math.ceil(width / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        rows = 1 - _onp.abs(_onp.arange(height) / f - c)
        columns = 1 - _onp.abs(_onp.arange(width) / f - c)
        _fill_from_host(arr, _onp.broadcast_to(_onp.outer(rows, columns), arr.shape))


@register
class LSTMBias(Initializer):
    """Zero LSTM biases except the forget gate's, set to forget_bias (Jozefowicz et al. 2015
    recommend 1.0). The bias holds the 4 gates in the order input, forget, cell, output along
    its first axis."""

    def __init__(self, forget_bias=1.0):
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name, arr):
        if arr.ndim < 1 or arr.shape[0] % 4:
            raise ValueError(f"LSTMBias needs a bias whose first dimension holds the 4 LSTM "
                             f"gates (a multiple of 4); {name} has shape {arr.shape}")
        num_hidden = arr.shape[0] // 4
        arr[:] = 0.0
        arr[num_hidden:2 * num_hidden] = self.forget_bias


class Mixed(Initializer):
    """Initializes each parameter with the initializer of the first pattern (a regular
    expression, matched at the start of the name) that its name matches; add a '.*' pattern last
    for a default."""

    def __init__(self, patterns, initializers):
        if len(patterns) != len(initializers):
            raise ValueError(f"Mixed: {len(patterns)} patterns for {len(initializers)} "
                             f"initializers")
        super().__init__(patterns=list(patterns))
        self.map = [(re.compile(pattern), create(init))
                    for pattern, init in zip(patterns, initializers)]

    def __call__(self, name, arr, explicit=False):
        for pattern, init in self.map:
            if pattern.match(name):
                init(name, arr, explicit)
                return
        raise ValueError(f"Parameter name {name} did not match any pattern "
                         f"{[p.pattern for p, _ in self.map]}. Consider adding a \".*\" pattern "
                         f"at the end with a default Initializer.")


class Load(Initializer):
    """Initializes parameters from saved arrays: `param` is a {name: array} dict or a parameter
    file (.params or .npz); MXNet's 'arg:' / 'aux:' name prefixes are dropped. Parameters not
    found go to default_init (an error without one)."""

    def __init__(self, param, default_init=None, verbose=False):
        super().__init__()
        if isinstance(param, str):
            from .gluon._params_file import load_params_file
            param = load_params_file(param)
        if not isinstance(param, dict):
            raise TypeError(f"Load: param must be a dict of arrays or a file name, got "
                            f"{type(param).__name__}")
        self.param = {name[4:] if name.startswith(('arg:', 'aux:')) else name: value
                      for name, value in param.items()}
        self.default_init = create(default_init)
        self.verbose = verbose

    def __call__(self, name, arr, explicit=False):
        if name in self.param:
            value = self.param[name]
            if tuple(arr.shape) != tuple(value.shape):
                raise ValueError(f"Parameter {name} cannot be initialized from loading. Shape "
                                 f"mismatch, target {arr.shape} vs loaded {tuple(value.shape)}")
            _fill_from_host(arr, value.asnumpy() if hasattr(value, 'asnumpy') else value)
            if self.verbose:
                logging.info("Initialized %s by loading", name)
            return
        if self.default_init is None:
            raise ValueError(f"Cannot initialize {name}: not found in the loaded parameters "
                             f"and no default Initializer is provided")
        self.default_init(name, arr, explicit)
        if self.verbose:
            logging.info("Initialized %s by default", name)


# MXNet's string aliases.
_REGISTRY['zeros'] = Zero
_REGISTRY['ones'] = One
