"""npx.gather_nd, scatter_nd, index_add and index_update: reading and writing an array at
positions given as one index array per leading axis, as in MXNet.

Each is composed from pymx's take / index_update operators on the array viewed as
(prod(leading axes), rest...), so they run on every device, are differentiable (gather_nd's
gradient scatters with accumulation, scatter_nd's gathers) and trace into hybridized graphs.
Negative indices count from the end of their axis. Difference from MXNet (which checks none):
an index outside its axis raises IndexError when the operator runs (at the next wait, as every
error found by a kernel), naming the position one past the end of the leading axes flattened.
"""
import numpy as _onp

from pymx import numpy as _np
from pymx._op import invoke as _invoke
from pymx.numpy._indexing import flat_positions


def _index_rows(indices, op):
    # Float indices are accepted, as in MXNet (pymx arrays are float32 by default).
    if not (_onp.issubdtype(indices.dtype, _onp.integer)
            or _onp.issubdtype(indices.dtype, _onp.floating)):
        raise TypeError(f"{op}: indices must be an integer or float array, got dtype "
                        f"{indices.dtype}")
    if indices.ndim == 0:
        raise ValueError(f"{op}: indices must have at least one dimension, got a scalar")
    return indices.astype("int64")


def _flat_positions(indices, shape, op):
    """The positions that indices[:, ...] (one row per leading axis of `shape`) select in the
    leading axes flattened (see pymx.numpy._indexing.flat_positions)."""
    num_axes = indices.shape[0]
    if num_axes > len(shape):
        raise ValueError(f"{op}: indices of shape {indices.shape} index {num_axes} axes, but the "
                         f"array of shape {tuple(shape)} has {len(shape)}")
    return flat_positions([indices[axis] for axis in range(num_axes)], shape)


def _leading_flattened(shape, num_axes):
    size = 1
    for d in shape[:num_axes]:
        size *= d
    return (size,) + tuple(shape[num_axes:])


def gather_nd(data, indices):
    """data[indices[0], indices[1], ..., indices[M-1]]: indices (M, Y...) with M <= data.ndim
    give an array of shape (Y..., data.shape[M:]...)."""
    indices = _index_rows(indices, "gather_nd")
    flat = _flat_positions(indices, data.shape, "gather_nd")
    rows = _np.reshape(data, _leading_flattened(data.shape, indices.shape[0]))
    return _np.take(rows, flat, axis=0)


def scatter_nd(data, indices, shape):
    """The inverse of gather_nd: zeros of `shape` with out[indices[:, y...]] = data[y...].
    data has shape (Y..., shape[M:]...) for indices (M, Y...). Where indices repeat, one of the
    values is kept (which one is unspecified, as in MXNet)."""
    indices = _index_rows(indices, "scatter_nd")
    shape = tuple(int(d) for d in shape)
    num_axes = indices.shape[0]
    expected = tuple(indices.shape[1:]) + shape[num_axes:]
    if num_axes <= len(shape) and tuple(data.shape) != expected:
        raise ValueError(f"scatter_nd: data has shape {data.shape}, but indices {indices.shape} "
                         f"into shape {shape} need {expected}")
    flat = _flat_positions(indices, shape, "scatter_nd")
    rows = _leading_flattened(shape, num_axes)
    zeros = _np.zeros(rows, dtype=data.dtype, device=data.device)
    values = _np.reshape(data, tuple(flat.shape) + rows[1:])
    out = _invoke("index_update", [zeros, flat, values], {"axis": 0})[0]
    return _np.reshape(out, shape)


def _indexed_update(a, ind, val, accumulate, op):
    ind = _index_rows(ind, op)
    if ind.ndim == 1:
        ind = _np.reshape(ind, (1, ind.shape[0]))
    if ind.ndim != 2:
        raise ValueError(f"{op}: ind must have shape (index axes, count) or (count,), got "
                         f"{ind.shape}")
    num_axes, count = ind.shape
    flat = _flat_positions(ind, a.shape, op)
    rows = _leading_flattened(a.shape, num_axes)
    target = (count,) + rows[1:]
    val = val if isinstance(val, _np.ndarray) else _np.array(val, dtype=a.dtype, device=a.device)
    try:
        values = _np.broadcast_to(val.astype(a.dtype), target)
    except ValueError:
        raise ValueError(f"{op}: val of shape {val.shape} does not broadcast to {target}, the "
                         f"shape ind {ind.shape} selects in a {a.shape}") from None
    out = _invoke("index_update", [_np.reshape(a, rows), flat, values],
                  {"axis": 0, "accumulate": accumulate})[0]
    return _np.reshape(out, a.shape)


def index_add(a, ind, val):
    """A copy of `a` with val added at the positions ind[:, k] (ind: (index axes, count), or
    (count,) for one axis); val broadcasts to (count, a.shape[index axes:]...). Repeated
    positions add up."""
    return _indexed_update(a, ind, val, True, "index_add")


def index_update(a, ind, val):
    """A copy of `a` with the positions ind[:, k] set to val (shapes as index_add). Where
    positions repeat, one of the values is kept (which one is unspecified, as in MXNet)."""
    return _indexed_update(a, ind, val, False, "index_update")
