"""NumPy indexing on pymx arrays: `ndarray.__getitem__` / `__setitem__` call getitem / setitem.

Basic indices (ints, slices, None, Ellipsis) become one `slice` op and a reshape; in place
assignment is `slice_assign` writing into the array itself. Advanced indices (integer arrays,
lists, boolean masks) on leading axes, followed by full slices, become `take` / `index_update`
of whole rows of the array viewed with those axes flattened (an index outside its axis raises IndexError when
that operator runs, at the next wait; with several pymx index arrays the message names the
position one past the end of the flattened axes; lists and NumPy arrays are checked at once). A boolean mask is turned into positions on the host
(the result's size depends on the mask's values), as MXNet does.

Any other mix of basic and advanced indices (an array index after a slice, arrays separated by
a slice, integers beside arrays, masks beside arrays) follows NumPy's rules exactly by letting
NumPy resolve them: `_element_positions` indexes, for each axis, a broadcast (zero-copy) grid of
that axis's coordinates with the same key, which gives every selected element's coordinates in
the result's shape and order, and so its flat position; `take` / `index_update` on the flattened
array do the rest on the device (and give the gradient). The host work is proportional to the
result, not to the array.
"""
import numbers

import numpy as _onp

from pymx._c import core as _c_core
from pymx.base import dtype_name
from pymx.ndarray import ndarray

_invoke = _c_core.invoke

__all__ = ["getitem", "setitem"]


def _is_int(k):
    return isinstance(k, (numbers.Integral, _onp.integer)) and not isinstance(k, (bool, _onp.bool_))


def _is_advanced(k):
    return isinstance(k, (ndarray, _onp.ndarray, list)) or isinstance(k, (bool, _onp.bool_))


def _expand(key, ndim):
    """key as a tuple with Ellipsis replaced by full slices."""
    if not isinstance(key, tuple):
        key = (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {used} "
                         f"were indexed")
    if Ellipsis in [k for k in key if not _is_advanced(k)]:
        at = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:at] + (slice(None),) * (ndim - used) + key[at + 1:]
    return key



class _Basic:
    """A basic index resolved against a shape: the slice op's attrs and the result shape."""

    def __init__(self, key, shape):
        self.begin, self.end, self.step = [], [], []
        self.result = []  # the shape NumPy returns
        axis = 0
        for k in key:
            if k is None:
                self.result.append(1)
                continue
            if axis >= len(shape):
                raise IndexError(f"too many indices for array of shape {shape}")
            n = shape[axis]
            if _is_int(k):
                i = int(k)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
                i %= n
                self.begin.append(i)
                self.end.append(i + 1)
                self.step.append(1)
            elif isinstance(k, slice):
                start, stop, step = k.indices(n)
                self.begin.append(start)
                self.end.append(stop)
                self.step.append(step)
                self.result.append(len(range(start, stop, step)))
            else:
                raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), "
                                 f"numpy.newaxis (`None`) and integer or boolean arrays are "
                                 f"valid indices, got {k!r}")
            axis += 1
        self.result.extend(shape[axis:])
        self.result = tuple(self.result)
        self.region = tuple(len(range(b, e, s)) for b, e, s in
                            zip(self.begin, self.end, self.step)) + tuple(shape[axis:])
        self.whole = all(b == 0 and e == n and s == 1 for b, e, s, n in
                         zip(self.begin, self.end, self.step, shape))

    def attrs(self):
        return {"begin": tuple(self.begin), "end": tuple(self.end), "step": tuple(self.step)}


def _positions(k, device):
    """An advanced index as an int64 pymx array (a boolean mask -> the flat positions of True)."""
    if isinstance(k, (bool, _onp.bool_)):
        raise IndexError("pymx does not support a scalar boolean index")
    if isinstance(k, ndarray):
        if k.dtype == _onp.bool_:
            return None
        return k if k.dtype == _onp.int64 else k.astype(_onp.int64)
    values = _onp.asarray(k)
    if values.dtype == _onp.bool_:
        return None
    if values.size or isinstance(k, _onp.ndarray):  # an empty list reads as float64: fine
        _check_index_dtype(values.dtype)
    return _c_core_array(values.astype(_onp.int64), device)


def _check_index_dtype(dtype):
    if _onp.dtype(dtype).kind not in "iu":
        raise IndexError(f"arrays used as indices must be of integer (or boolean) type, got "
                         f"{dtype_name(dtype)}")


def _c_core_array(values, device):
    from pymx.ndarray import from_numpy
    return from_numpy(values, device=device)


def _leading_only(key):
    """True when the advanced parts of `key` (a tuple) come first and only full slices or an
    Ellipsis follow them: the case whole rows serve."""
    lead = sum(1 for k in key if _is_advanced(k))
    return (all(_is_advanced(k) for k in key[:lead]) and
            all(k is Ellipsis or isinstance(k, slice) and k == slice(None) for k in key[lead:]))


def _element_positions(arr, key):
    """NumPy's arr[key] for any key, as the int64 flat positions (in arr) of the elements it
    selects, shaped like the result (see the module's docstring)."""
    key = tuple(k.asnumpy() if isinstance(k, ndarray) else k for k in key)
    positions = _onp.broadcast_to(_onp.int64(0), arr.shape)[key]  # also checks the key
    stride = 1
    for axis in reversed(range(arr.ndim)):
        along = [1] * arr.ndim
        along[axis] = arr.shape[axis]
        grid = _onp.broadcast_to(_onp.arange(arr.shape[axis], dtype=_onp.int64).reshape(along),
                                 arr.shape)
        positions = positions + grid[key] * stride
        stride *= arr.shape[axis]
    return positions


def _advanced_plan(arr, key):
    """For an index made of advanced parts on the leading axes followed by full slices:
    (number of leading axes, int64 flat positions into them)."""
    parts = [k for k in key if _is_advanced(k)]
    lead = len(parts)
    if lead == 1:
        k = parts[0]
        mask = k if isinstance(k, ndarray) and k.dtype == _onp.bool_ else None
        if mask is None and not isinstance(k, ndarray) and _onp.asarray(k).dtype == _onp.bool_:
            mask = _onp.asarray(k)
        if mask is not None:
            mask = mask.asnumpy() if isinstance(mask, ndarray) else mask
            if mask.shape != arr.shape[:mask.ndim]:
                raise IndexError(f"boolean index of shape {mask.shape} does not match the "
                                 f"indexed array's shape {arr.shape}")
            flat = _onp.flatnonzero(mask).astype(_onp.int64)
            return mask.ndim, _c_core_array(flat, arr.device)
        return 1, _positions(k, arr.device)
    if lead > arr.ndim:
        raise IndexError(f"too many indices for array: array is {arr.ndim}-dimensional, but "
                         f"{lead} were indexed")
    # Several integer arrays: broadcast them and combine into positions of the flattened axes.
    for axis, k in enumerate(parts):
        if not isinstance(k, ndarray):  # values known here: checked at once, as NumPy does
            _check_within_axis(_onp.asarray(k), arr.shape[axis], axis)
    indices = [_positions(k, arr.device) for k in parts]
    if any(i is None for i in indices):
        raise IndexError("pymx does not combine boolean masks with other array indices")
    from pymx.numpy import _core as _np
    return lead, flat_positions(_np.broadcast_arrays(*indices), arr.shape)


def _check_within_axis(values, n, axis):
    if values.dtype.kind in "iu":
        outside = values[(values < -n) | (values >= n)]
        if outside.size:
            raise IndexError(f"index {outside.flat[0]} is out of bounds for axis {axis} with "
                             f"size {n}")


def flat_positions(indices, shape):
    """The positions that the integer index arrays `indices` (one per leading axis of `shape`,
    all of one shape) select in those axes flattened, computed on the device without reading
    the indices. Negative entries count from the end of their axis. An entry outside its axis
    gives the flattened size, one past the end, for the take / index_update operator to refuse
    when it runs: combined with the other axes it could fall inside the array (row 0, column 3
    of a 2 x 2 array is its element 3) and select another element."""
    from pymx.numpy import _core as _np
    flat = outside = None
    size = 1
    for index, n in zip(indices, shape):
        index = _np.where(index < 0, index + n, index)
        outside_axis = (index < 0) | (index >= n)
        outside = outside_axis if outside is None else outside | outside_axis
        flat = index if flat is None else flat * n + index
        size *= n
    return _np.where(outside, size, flat)


def getitem(arr, key):
    if isinstance(key, tuple) and _any_advanced(key) or _is_advanced(key):
        key = key if isinstance(key, tuple) else (key,)
        if not _leading_only(key):
            positions = _element_positions(arr, key)
            flat = _invoke("reshape", [arr], {"newshape": (-1,)})[0]
            picked = _invoke("take", [flat, _c_core_array(positions.reshape(-1), arr.device)],
                             {"axis": 0, "mode": "raise"})[0]
            return _invoke("reshape", [picked], {"newshape": positions.shape})[0]
        lead, positions = _advanced_plan(arr, key)
        from pymx.numpy import _core as _np
        flat = arr if lead == 1 else _np.reshape(arr, (-1,) + arr.shape[lead:])
        return _invoke("take", [flat, positions], {"axis": 0, "mode": "raise"})[0]
    basic = _Basic(_expand(key, arr.ndim), arr.shape)
    result = arr if basic.whole else _invoke("slice", [arr], basic.attrs())[0]
    if result.shape != basic.result:
        result = _invoke("reshape", [result], {"newshape": basic.result})[0]
    elif result is arr:
        result = _invoke("copy", [arr])[0]
    return result


def _any_advanced(key):
    return any(_is_advanced(k) for k in key)


def _value_array(arr, value):
    if isinstance(value, ndarray):
        if value.device != arr.device:
            raise ValueError(f"cannot assign an array on {value.device} into an array on "
                             f"{arr.device}")
        return value
    from pymx.ndarray import from_numpy
    return from_numpy(value, device=arr.device, dtype=arr.dtype)


def _fit(value, shape, what):
    """value broadcast to `shape` (NumPy's assignment rule), as a new or the same array."""
    if value.shape == shape:
        return value
    try:
        target = _onp.broadcast_shapes(value.shape, shape)
    except ValueError:
        target = None
    if target != shape:
        raise ValueError(f"could not broadcast input array from shape {value.shape} into "
                         f"shape {shape} ({what})")
    return _invoke("broadcast_to", [value], {"shape": shape})[0]


def setitem(arr, key, value):
    value = _value_array(arr, value)
    if isinstance(key, tuple) and _any_advanced(key) or _is_advanced(key):
        key = key if isinstance(key, tuple) else (key,)
        if not _leading_only(key):
            positions = _element_positions(arr, key)
            view = arr._reshape_view((arr.size,))
            value = _fit(value, positions.shape, "index assignment")
            value = _invoke("reshape", [value], {"newshape": (-1,)})[0]
            _invoke("index_update", [view, _c_core_array(positions.reshape(-1), arr.device),
                                     value], {"axis": 0, "accumulate": False}, out=view)
            return
        lead, positions = _advanced_plan(arr, key)
        lead_size = int(_onp.prod(arr.shape[:lead], dtype=_onp.int64))
        view = arr._reshape_view((lead_size,) + arr.shape[lead:]) if lead != 1 else arr
        target = tuple(positions.shape) + tuple(arr.shape[lead:])
        value = _fit(value, target, "index assignment")
        _invoke("index_update", [view, positions, value], {"axis": 0, "accumulate": False},
                out=view)
        return
    basic = _Basic(_expand(key, arr.ndim), arr.shape)
    value = _fit(value, basic.result, "slice assignment")
    if value.shape != basic.region:
        value = _invoke("reshape", [value], {"newshape": basic.region})[0]
    if basic.whole:
        if value.dtype != arr.dtype:
            value = value.astype(arr.dtype)
        _invoke("copy", [value], out=arr)
        return
    _invoke("slice_assign", [arr, value], basic.attrs(), out=arr)
