"""npx.l2_normalization: data divided by its L2 norm, as MXNet's L2Normalization.

Composed from pymx's elementwise and reduction operators (every device, differentiable,
hybridizable). Differences from MXNet: none known.
"""
from pymx import numpy as _np

_MODE_AXES = {"instance": lambda ndim: tuple(range(1, ndim)),
              "channel": lambda ndim: (1,),
              "spatial": lambda ndim: tuple(range(2, ndim))}
_MODE_MIN_NDIM = {"instance": 2, "channel": 2, "spatial": 3}


def l2_normalization(data, eps=1e-10, mode="instance"):
    """data / sqrt(sum(data**2) + eps), the sum over all axes but the first (mode 'instance'),
    over axis 1 ('channel') or over the axes after the first two ('spatial')."""
    if mode not in _MODE_AXES:
        raise ValueError(f"l2_normalization: mode must be 'instance', 'channel' or 'spatial', "
                         f"got {mode!r}")
    if data.ndim < _MODE_MIN_NDIM[mode]:
        raise ValueError(f"l2_normalization: mode {mode!r} needs data with at least "
                         f"{_MODE_MIN_NDIM[mode]} dimensions, got shape {data.shape}")
    squares = _np.sum(data * data, axis=_MODE_AXES[mode](data.ndim), keepdims=True)
    return data / _np.sqrt(squares + eps)
