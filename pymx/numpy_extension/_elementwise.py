"""npx.smooth_l1, stop_gradient (BlockGrad) and cast.

smooth_l1 is composed from pymx's elementwise operators; stop_gradient is pymx's stop_gradient
operator (the identity with a zero gradient, an operator so that hybridized graphs replay it).
Differences from MXNet: none known.
"""
from pymx import numpy as _np
from pymx._op import invoke as _invoke


def smooth_l1(data, scalar=1.0):
    """0.5 * (scalar * x)**2 where |x| < 1 / scalar**2, |x| - 0.5 / scalar**2 elsewhere."""
    if scalar <= 0:
        raise ValueError(f"smooth_l1: scalar must be > 0, got {scalar}")
    inverse_square = 1.0 / (scalar * scalar)
    magnitude = _np.abs(data)
    return _np.where(magnitude < inverse_square, 0.5 * (scalar * data) ** 2,
                     magnitude - 0.5 * inverse_square)


def stop_gradient(data):
    """data, through which no gradient flows back (its inputs get zero gradient)."""
    return _invoke("stop_gradient", [data])[0]


BlockGrad = stop_gradient


def cast(data, dtype):
    """data converted to `dtype` (a copy)."""
    return data.astype(dtype)
