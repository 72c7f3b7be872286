"""pymx.np.random: sampling on a device. Seeds are per process: seed(s) makes every later
sampling op deterministic (each op takes the next seed of one stream, in push order)."""
import numbers

import numpy as _onp

from pymx._c import core as _c_core
from pymx.base import DEFAULT_DTYPE, as_dtype
from pymx.device import current_device
from pymx.numpy import _core as _np

__all__ = ["seed", "uniform", "normal", "randn", "rand", "randint", "choice", "shuffle",
           "permutation"]


def seed(seed):
    """Seeds every later random op of this process."""
    if not isinstance(seed, (numbers.Integral, _onp.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    _c_core.random_seed(int(seed))


def _size(size):
    if size is None:
        return ()
    return _np._shape_tuple(size)


def _number(value, name):
    if isinstance(value, _np.ndarray):
        if value.size != 1:
            raise TypeError(f"{name}: pymx samples with scalar parameters only, got an array of "
                            f"shape {value.shape}")
        value = value.item()
    return float(value)


def _sample(op, size, dtype, device, out, **attrs):
    dtype = DEFAULT_DTYPE if dtype is None else as_dtype(dtype)
    shape = out.shape if out is not None and size is None else _size(size)
    return _c_core.invoke(op, [], {"shape": shape, "dtype": dtype, **attrs},
                          device=device or (out.device if out is not None else current_device()),
                          out=out)[0]


def uniform(low=0.0, high=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    return _sample("uniform", size, dtype, device or ctx, out, low=_number(low, "uniform"),
                   high=_number(high, "uniform"))


def normal(loc=0.0, scale=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    scale = _number(scale, "normal")
    if scale < 0:
        raise ValueError(f"normal: scale must be non-negative, got {scale}")
    return _sample("normal", size, dtype, device or ctx, out, loc=_number(loc, "normal"),
                   scale=scale)


def randn(*size, **kwargs):
    return normal(0.0, 1.0, size=size, **kwargs)


def rand(*size, **kwargs):
    return uniform(0.0, 1.0, size=size, **kwargs)


def randint(low, high=None, size=None, dtype=None, device=None, out=None, ctx=None):
    if high is None:
        low, high = 0, low
    if int(low) >= int(high):
        raise ValueError(f"randint: low >= high (low={low}, high={high})")
    return _sample("randint", size, _onp.int64 if dtype is None else dtype, device or ctx, out,
                   low=int(low), high=int(high))


def permutation(x, device=None):
    """A permuted range(x) for an int, or a shuffled copy of array x (along axis 0)."""
    if isinstance(x, (numbers.Integral, _onp.integer)):
        return _c_core.invoke("permutation", [], {"n": int(x), "dtype": _onp.int64},
                              device=device or current_device())[0]
    x = _np._to_array(x)
    if x.ndim == 0:
        raise ValueError("permutation: x must be an integer or at least 1-dimensional")
    order = _c_core.invoke("permutation", [], {"n": x.shape[0], "dtype": _onp.int64},
                           device=x.device)[0]
    return _np.take(x, order, axis=0)


def shuffle(x):
    """Shuffles array x in place along axis 0."""
    if not isinstance(x, _np.ndarray):
        raise TypeError(f"shuffle expects a pymx ndarray, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError("shuffle: cannot shuffle a 0-d array")
    shuffled = permutation(x)
    _c_core.invoke("copy", [shuffled], out=x)


def choice(a, size=None, replace=True, p=None, device=None, ctx=None):
    """Samples from range(a) (an int) or from the 1-d array a."""
    device = device or ctx
    if isinstance(a, (numbers.Integral, _onp.integer)):
        n, values = int(a), None
    else:
        values = _np._to_array(a, device=device)
        if values.ndim != 1:
            raise ValueError(f"choice: a must be 1-dimensional, got shape {values.shape}")
        n = values.shape[0]
    if n <= 0:
        raise ValueError("choice: a must be non-empty")
    shape = _size(size)
    count = int(_onp.prod(shape, dtype=_onp.int64))
    device = device or (values.device if values is not None else current_device())
    if p is not None:
        # Inverse-CDF sampling: count the cumulative probabilities below each uniform draw.
        p = _np._to_array(p, device=device, dtype=_onp.float64)
        if p.shape != (n,):
            raise ValueError(f"choice: p must have shape ({n},), got {p.shape}")
        cdf = _np.cumsum(p)
        draws = uniform(0.0, 1.0, size=(count, 1), dtype=_onp.float64, device=device)
        index = _np.sum(_np.less_equal(_np.reshape(cdf, (1, n)), draws), axis=1)
        index = _np.minimum(index, n - 1)
        if not replace:
            raise ValueError("choice: replace=False with p is not supported")
    elif replace:
        index = randint(0, n, size=(count,), device=device)
    else:
        if count > n:
            raise ValueError(f"choice: cannot take a larger sample ({count}) than the population "
                             f"({n}) when replace=False")
        index = _np.take(permutation(n, device=device), _np.arange(count, dtype=_onp.int64,
                                                                   device=device))
    index = _np.reshape(index, shape)
    return index if values is None else _np.take(values, index)
