"""npx.reshape (with MXNet's special codes), slice, slice_like, broadcast_like and arange_like.

Each is a shape computation on the host followed by pymx's reshape / slice / broadcast_to /
arange operators, so they run on every device, are differentiable where MXNet's are (arange_like
is not) and trace into hybridized graphs. Differences from MXNet: none known.
"""
import builtins as _builtins

import numpy as _onp

from pymx import numpy as _np

_RESHAPE_CODES = {-1: "infer", -2: "copy", -3: "skip a 1", -4: "copy the rest", -5: "merge two",
                  -6: "split one"}


def _reshape_codes(src, codes, newshape):
    """The output shape for `codes` read left to right against the input shape `src`."""
    def need(count, code):
        if i + count > len(src):
            raise ValueError(f"reshape: code {code} at position {j} of {newshape} needs "
                             f"{count} more input dimension(s), but {tuple(src)} has none left")

    out, infer_at = [], None
    i = j = 0  # positions in src and codes
    while j < len(codes):
        code = codes[j]
        if code >= 0:
            out.append(code)
            i += 1
        elif code == -1:
            if infer_at is not None:
                raise ValueError(f"reshape: more than one -1 in {newshape}")
            infer_at = len(out)
            out.append(1)
            i += 1
        elif code == -2:
            need(1, code)
            out.append(src[i])
            i += 1
        elif code == -3:
            need(1, code)
            if src[i] != 1:
                raise ValueError(f"reshape: code -3 at position {j} of {newshape} skips only an "
                                 f"input dimension of size 1, got {src[i]} (input {tuple(src)})")
            i += 1
        elif code == -4:
            out.extend(src[i:])
            i = len(src)
        elif code == -5:
            need(2, code)
            out.append(src[i] * src[i + 1])
            i += 2
        elif code == -6:
            need(1, code)
            if j + 2 >= len(codes):
                raise ValueError(f"reshape: code -6 at position {j} of {newshape} must be "
                                 "followed by the two sizes to split into")
            first, second = codes[j + 1], codes[j + 2]
            if first == -1:
                first = src[i] // second if second > 0 else 0
            elif second == -1:
                second = src[i] // first if first > 0 else 0
            if first < 0 or second < 0 or first * second != src[i]:
                raise ValueError(f"reshape: code -6 at position {j} of {newshape} cannot split "
                                 f"input dimension {src[i]} into ({codes[j + 1]}, "
                                 f"{codes[j + 2]})")
            out.extend((first, second))
            i += 1
            j += 2
        else:
            raise ValueError(f"reshape: unknown code {code} in {newshape}; the codes are "
                             f"{_RESHAPE_CODES}")
        j += 1
    total = int(_onp.prod(src, dtype=_onp.int64))
    if infer_at is not None:
        known = int(_onp.prod(out, dtype=_onp.int64))
        if known == 0 or total % known:
            raise ValueError(f"reshape: cannot infer the -1 of {newshape} for an input of shape "
                             f"{tuple(src)}")
        out[infer_at] = total // known
    if int(_onp.prod(out, dtype=_onp.int64)) != total:
        raise ValueError(f"reshape: cannot reshape an array of shape {tuple(src)} into "
                         f"{newshape} (read as {tuple(out)})")
    return tuple(out)


def reshape(a, newshape, reverse=False, order="C"):
    """`a` with a new shape. newshape: an int or a tuple of sizes and codes, read against a's
    dimensions in order: -1 infers this size from the rest, -2 copies this input dimension, -3
    drops this input dimension (which must be 1), -4 copies all remaining input dimensions, -5
    merges the next two input dimensions, -6 splits this input dimension into the two sizes that
    follow (one may be -1). With reverse=True the codes are matched from the right."""
    if order != "C":
        raise ValueError(f"reshape: only order='C' is supported, got {order!r}")
    codes = (newshape,) if isinstance(newshape, (int, _onp.integer)) else tuple(newshape)
    codes = tuple(int(c) for c in codes)
    src = tuple(a.shape)
    if reverse:
        shape = _reshape_codes(src[::-1], codes[::-1], newshape)[::-1]
    else:
        shape = _reshape_codes(src, codes, newshape)
    return _np.reshape(a, shape)


def _as_tuple(value, name, op):
    if value is None:
        return None
    if isinstance(value, (int, _onp.integer)):
        return (int(value),)
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{op}: {name} must be a tuple of ints, got {value!r}")
    return tuple(value)


def slice(data, begin, end, step=None):  # noqa: A001 (MXNet's name)
    """data[begin[0]:end[0]:step[0], begin[1]:end[1]:step[1], ...]: begin, end and step have
    one entry (an int or None) per leading axis; step defaults to 1."""
    begin, end = _as_tuple(begin, "begin", "slice"), _as_tuple(end, "end", "slice")
    step = _as_tuple(step, "step", "slice") or (None,) * len(begin)
    if not len(begin) == len(end) == len(step):
        raise ValueError(f"slice: begin {begin}, end {end} and step {step} must have the same "
                         "length")
    if len(begin) > data.ndim:
        raise ValueError(f"slice: begin {begin} has {len(begin)} entries for an array of "
                         f"shape {data.shape}")
    if any(s == 0 for s in step):
        raise ValueError(f"slice: step must not be 0, got {step}")
    return data[tuple(_builtins.slice(b, e, s) for b, e, s in zip(begin, end, step))]


def _axes_of(axes, ndim, op):
    axes = _as_tuple(axes, "axes", op) or ()
    normalized = []
    for axis in axes:
        if not -ndim <= axis < ndim:
            raise ValueError(f"{op}: axis {axis} is out of range for {ndim} dimensions")
        normalized.append(axis % ndim)
    return tuple(normalized)


def slice_like(data, shape_like, axes=None):
    """data[:n0, :n1, ...] with n the shape of `shape_like` on `axes` (all axes when None or
    empty, which needs data and shape_like of the same ndim)."""
    axes = _axes_of(axes, data.ndim, "slice_like")
    if not axes:
        if data.ndim != shape_like.ndim:
            raise ValueError(f"slice_like: data {data.shape} and shape_like {shape_like.shape} "
                             "must have the same number of dimensions when axes is empty")
        axes = tuple(range(data.ndim))
    index = [_builtins.slice(None)] * data.ndim
    for axis in axes:
        if axis >= shape_like.ndim:
            raise ValueError(f"slice_like: axis {axis} is out of range for shape_like "
                             f"{shape_like.shape}")
        size = shape_like.shape[axis]
        if size > data.shape[axis]:
            raise ValueError(f"slice_like: shape_like {shape_like.shape} is larger than data "
                             f"{data.shape} on axis {axis}")
        index[axis] = _builtins.slice(0, size)
    return data[tuple(index)]


def broadcast_like(lhs, rhs, lhs_axes=None, rhs_axes=None):
    """lhs broadcast to rhs's shape, or with lhs_axes/rhs_axes, lhs with each axis lhs_axes[i]
    (of size 1) broadcast to rhs.shape[rhs_axes[i]]."""
    if (lhs_axes is None) != (rhs_axes is None):
        raise ValueError("broadcast_like: give both lhs_axes and rhs_axes, or neither")
    if lhs_axes is None:
        return _np.broadcast_to(lhs, rhs.shape)
    lhs_axes = _axes_of(lhs_axes, lhs.ndim, "broadcast_like")
    rhs_axes = _axes_of(rhs_axes, rhs.ndim, "broadcast_like")
    if len(lhs_axes) != len(rhs_axes):
        raise ValueError(f"broadcast_like: lhs_axes {lhs_axes} and rhs_axes {rhs_axes} must "
                         "have the same length")
    shape = list(lhs.shape)
    for la, ra in zip(lhs_axes, rhs_axes):
        if shape[la] != 1 and shape[la] != rhs.shape[ra]:
            raise ValueError(f"broadcast_like: axis {la} of lhs {lhs.shape} has size "
                             f"{shape[la]}, which does not broadcast to {rhs.shape[ra]}")
        shape[la] = rhs.shape[ra]
    return _np.broadcast_to(lhs, tuple(shape))


def arange_like(data, start=0.0, step=1.0, repeat=1, ctx=None, axis=None, device=None):
    """start, start+step, ... (each value `repeat` times) shaped like `data`, or along `axis`
    only (shape (data.shape[axis],)), with data's dtype, on data's device unless `device`/`ctx`
    is given. Not differentiable (as in MXNet)."""
    if not isinstance(repeat, (int, _onp.integer)) or repeat < 1:
        raise ValueError(f"arange_like: repeat must be a positive int, got {repeat!r}")
    if axis is None:
        shape = tuple(data.shape)
    else:
        (axis,) = _axes_of(axis, data.ndim, "arange_like")
        shape = (data.shape[axis],)
    device = device or ctx or data.device
    count = int(_onp.prod(shape, dtype=_onp.int64))
    positions = _np.arange(count, dtype="int64", device=device)
    if repeat > 1:
        positions = positions // repeat
    values = positions.astype("float64") * step + start
    return _np.reshape(values.astype(data.dtype), shape)
