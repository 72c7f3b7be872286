"""Weight initializers (MXNet's `mx.init`).

An initializer fills an existing array in place: ``init(name, arr)``. When a Parameter has no
initializer of its own, the global one decides by the parameter's name (MXNet's default rules):
biases, betas and running means start at zero, gammas and running variances at one, everything
else goes through the initializer's weight rule. A Parameter's own initializer always applies its
weight rule, whatever the name.
"""
import math

from . import numpy as _np

__all__ = ['Initializer', 'Uniform', 'Normal', 'Xavier', 'MSRAPrelu', 'Zero', 'One', 'Constant',
           'register', 'create']

_REGISTRY = {}


def register(klass):
    """Registers an initializer class under its lower-cased name (for ``create('xavier')``)."""
    _REGISTRY[klass.__name__.lower()] = klass
    return klass


def create(init):
    """Returns an Initializer from an instance, a registered name ('xavier', 'zeros', ...) or None."""
    if init is None or isinstance(init, Initializer):
        return init
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


# MXNet's string aliases.
_REGISTRY['zeros'] = Zero
_REGISTRY['ones'] = One
