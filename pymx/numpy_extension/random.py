"""npx.random: MXNet's npx.random (seed, bernoulli, uniform_n, normal_n), on the generator of
np.random (Note [RNG seeds] in engine/src/invoke.cc).

bernoulli draws U < prob (prob = sigmoid(logit) when logit is given) from np.random's uniform op;
uniform_n and normal_n are np.random.uniform / normal with batch_shape prepended to the
parameters' broadcast shape. Parameters are checked as np.random checks them.
"""
import numpy as _onp

from pymx.base import DEFAULT_DTYPE
from pymx.numpy import _core as _np
from pymx.numpy import random as _random

__all__ = ["seed", "bernoulli", "uniform_n", "normal_n"]


def seed(seed, device="all"):
    """Seeds pymx's random number generators (np.random and the ops that draw numbers, such as
    dropout). `device` is accepted for MXNet compatibility: all devices share one seed."""
    return _random.seed(seed)


def bernoulli(prob=None, logit=None, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples 1 with probability prob (or sigmoid(logit)), else 0; exactly one of prob and logit
    is given. float32 unless dtype says otherwise."""
    if (prob is None) == (logit is None):
        raise ValueError("bernoulli: give exactly one of prob and logit")
    (value,), shape, dtype, device = _random._prepare(
        "bernoulli", [prob if logit is None else logit], size, dtype, device, ctx, out)
    if logit is None:
        _random._check("bernoulli", "prob", value, lambda v: (v >= 0) & (v <= 1), "in [0, 1]")
        threshold = value
    else:
        _random._check("bernoulli", "logit", value, lambda v: v == v, "a number, not NaN")
        # sigmoid(logit); where exp(-logit) overflows to inf, 1 / inf is the right limit 0.
        if isinstance(value, float):
            with _onp.errstate(over="ignore"):
                threshold = float(1.0 / (1.0 + _onp.exp(-value)))
        else:
            threshold = 1.0 / (1.0 + _np.exp(-value))
    draws = _random._standard("uniform", shape, device)
    return _random._finish(_np.less(draws, threshold), dtype, out)


def _batched(batch_shape, params):
    """batch_shape + the parameters' broadcast shape (what uniform_n / normal_n draw)."""
    batch = () if batch_shape is None else _np._shape_tuple(batch_shape)
    shapes = [_onp.shape(p) if not isinstance(p, _np.ndarray) else p.shape for p in params]
    common = _random._broadcast_shape(shapes)
    if common is None:
        raise ValueError(f"parameters of shapes {', '.join(map(str, shapes))} do not broadcast "
                         f"together")
    return batch + common


def uniform_n(low=0.0, high=1.0, batch_shape=None, dtype=None, device=None, ctx=None):
    """U[low, high) samples of shape batch_shape + broadcast(low, high).shape."""
    return _random.uniform(low, high, size=_batched(batch_shape, [low, high]),
                           dtype=dtype or DEFAULT_DTYPE, device=device, ctx=ctx)


def normal_n(loc=0.0, scale=1.0, batch_shape=None, dtype=None, device=None, ctx=None):
    """N(loc, scale^2) samples of shape batch_shape + broadcast(loc, scale).shape."""
    return _random.normal(loc, scale, size=_batched(batch_shape, [loc, scale]),
                          dtype=dtype or DEFAULT_DTYPE, device=device, ctx=ctx)
