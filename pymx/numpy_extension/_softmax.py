"""npx.softmax and log_softmax (with MXNet's length/use_length), masked_softmax and
masked_log_softmax.

The softmax itself is pymx's softmax / log_softmax operator (CPU and GPU kernels); lengths and
masks are applied around it with `where`, so everything is differentiable and traces into
hybridized graphs. Masked-out positions enter the softmax as the dtype's lowest finite value
(scaled so that dividing by the temperature stays finite), contribute exp(...) = 0, and are set
in the output afterwards: 0 for softmax (also softmax with length, and log_softmax with length,
as in MXNet) and -inf for masked_log_softmax (as in MXNet). A row with no valid position gives
zeros (-inf for masked_log_softmax). Differences from MXNet: masked_softmax's `normalize` is
accepted and ignored (the operator always subtracts the maximum, which changes no result).
"""
import numpy as _onp

from pymx import numpy as _np
from pymx._op import invoke as _invoke
from pymx.numpy._elementwise import _largest_finite


def _fill_value(dtype, temperature):
    return -_largest_finite(dtype) * min(1.0, float(temperature or 1.0))


def _softmax_op(name, data, axis, temperature, valid):
    """`name` along `axis` with the positions where `valid` is False left out."""
    if valid is not None:
        data = _np.where(valid, data, _fill_value(data.dtype, temperature))
    return _invoke(name, [data], {"axis": axis, "temperature": temperature})[0]


def _length_mask(data, length, axis, op):
    """valid[..., j, ...] = j < length[...] (j along `axis`)."""
    if not -data.ndim <= axis < data.ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for data of shape {data.shape}")
    axis %= data.ndim
    expected = tuple(data.shape[:axis]) + tuple(data.shape[axis + 1:])
    if tuple(length.shape) != expected:
        raise ValueError(f"{op}: length must have data's shape without axis {axis}, "
                         f"{expected}, got {length.shape}")
    positions = _np.arange(data.shape[axis], dtype="int64", device=data.device)
    positions = _np.reshape(positions, (-1,) + (1,) * (data.ndim - axis - 1))
    return positions < _np.expand_dims(length.astype("int64"), axis)


def _with_length(name, data, length, axis, temperature, use_length, dtype):
    if use_length and length is None:
        raise ValueError(f"{name}: use_length=True needs length")
    valid = _length_mask(data, length, axis, name) if use_length else None
    out = _softmax_op(name, data, axis, temperature, valid)
    if valid is not None:
        out = _np.where(valid, out, 0.0)
    return out if dtype is None else out.astype(dtype)


def softmax(data, length=None, axis=-1, temperature=None, use_length=False, dtype=None):
    """exp(x/t) / sum(exp(x/t)) along `axis` (t = temperature, default 1). With use_length, only
    the first length[...] positions along `axis` take part and the others are 0; length has
    data's shape without `axis`."""
    return _with_length("softmax", data, length, axis, temperature, use_length, dtype)


def log_softmax(data, length=None, axis=-1, temperature=None, use_length=False, dtype=None):
    """log(softmax(data)) along `axis`, computed stably; length/use_length as in softmax (the
    positions left out are 0, as in MXNet)."""
    return _with_length("log_softmax", data, length, axis, temperature, use_length, dtype)


def _masked(name, data, mask, axis, temperature, fill):
    if mask is None:
        raise ValueError(f"{name}: mask is required")
    try:
        _onp.broadcast_shapes(tuple(mask.shape), tuple(data.shape))
    except ValueError:
        raise ValueError(f"{name}: mask of shape {mask.shape} does not broadcast to data of "
                         f"shape {data.shape}") from None
    valid = mask.astype("bool")
    out = _softmax_op(name[len("masked_"):], data, axis, temperature, valid)
    return _np.where(valid, out, fill)


def masked_softmax(data, mask, axis=-1, temperature=1.0, normalize=True):
    """softmax along `axis` over the positions where `mask` (broadcastable to data) is true;
    0 elsewhere."""
    return _masked("masked_softmax", data, mask, axis, temperature, 0.0)


def masked_log_softmax(data, mask, axis=-1, temperature=1.0, normalize=True):
    """log_softmax along `axis` over the positions where `mask` is true; -inf elsewhere."""
    return _masked("masked_log_softmax", data, mask, axis, temperature, -_onp.inf)
