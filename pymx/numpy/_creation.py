"""Array creation for `pymx.np` beyond the basics of _core: log- and geometric-spaced values,
triangles, index grids and coordinate matrices. All are made on the device (`device=`, default
the current device) from the arange / linspace / comparison operators.

Differences from NumPy: float results are float32 unless `dtype` says otherwise (MXNet);
meshgrid returns a list, as MXNet does, and `copy` is accepted for compatibility (its arrays
are read-only views in NumPy with copy=False); indices, tril_indices and triu_indices give
int64 like NumPy (MXNet's indices defaults to int32).
"""
import numpy as _onp

from pymx.base import DEFAULT_DTYPE, as_dtype
from pymx.device import current_device
from pymx.numpy._core import (_to_array, arange, broadcast_to, greater_equal, linspace, power,
                              reshape, stack, zeros)

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


@_export
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0, device=None,
             ctx=None):
    """base ** linspace(start, stop, num): `num` values spaced evenly on a log scale."""
    if axis != 0:
        raise ValueError(f"logspace: only axis=0 is supported for scalar start and stop, got "
                         f"{axis}")
    exponents = linspace(start, stop, num, endpoint=endpoint, dtype=_onp.float64,
                         device=device or ctx)
    values = power(float(base), exponents)
    return values.astype(DEFAULT_DTYPE if dtype is None else dtype)


@_export
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0, device=None, ctx=None):
    """`num` values from start to stop in geometric progression (each a constant multiple of
    the previous); start and stop must be non-zero and of the same sign."""
    start, stop = float(start), float(stop)
    if start == 0 or stop == 0:
        raise ValueError(f"geomspace: geometric sequence cannot include zero, got start={start}, "
                         f"stop={stop}")
    if (start < 0) != (stop < 0):
        raise ValueError(f"geomspace: start ({start}) and stop ({stop}) must have the same sign "
                         f"(pymx has no complex numbers)")
    sign = -1.0 if start < 0 else 1.0
    values = logspace(_onp.log10(sign * start), _onp.log10(sign * stop), num, endpoint=endpoint,
                      dtype=_onp.float64, axis=axis, device=device, ctx=ctx)
    values = values * sign
    # The end points are exact, as in NumPy, not 10 ** log10(x).
    if num > 0:
        values[0] = start
        if endpoint and num > 1:
            values[-1] = stop
    return values.astype(DEFAULT_DTYPE if dtype is None else dtype)


@_export
def tri(N, M=None, k=0, dtype=None, device=None, ctx=None):
    """An N x M array with ones at and below the k-th diagonal, zeros elsewhere."""
    M = N if M is None else M
    if N < 0 or M < 0:
        raise ValueError(f"tri: negative dimensions are not allowed, got N={N}, M={M}")
    device = device or ctx or current_device()
    rows = reshape(arange(N, dtype=_onp.int64, device=device), (-1, 1))
    cols = reshape(arange(M, dtype=_onp.int64, device=device), (1, -1))
    mask = greater_equal(rows + int(k), cols)
    return mask.astype(DEFAULT_DTYPE if dtype is None else dtype)


def _triangle_indices(n, k, m, lower, device):
    if n < 0 or (m is not None and m < 0):
        raise ValueError(f"negative dimensions are not allowed, got n={n}, m={m}")
    mask = _onp.tri(n, m, k=k if lower else k - 1, dtype=bool)
    rows, cols = _onp.nonzero(mask if lower else ~mask)
    device = device or current_device()
    return (_to_array(rows.astype(_onp.int64), device=device),
            _to_array(cols.astype(_onp.int64), device=device))


@_export
def tril_indices(n, k=0, m=None, device=None):
    """(rows, cols) of the elements of an n x m array at and below the k-th diagonal, in row
    order (int64)."""
    return _triangle_indices(n, k, m, True, device)


@_export
def triu_indices(n, k=0, m=None, device=None):
    """(rows, cols) of the elements of an n x m array at and above the k-th diagonal, in row
    order (int64)."""
    return _triangle_indices(n, k, m, False, device)


@_export
def indices(dimensions, dtype=None, sparse=False, device=None, ctx=None):
    """A grid of the indices along each axis of an array of shape `dimensions`: shape
    (len(dimensions),) + dimensions (int64 by default), or with sparse=True a tuple of arrays
    of shape (1, .., n_i, .., 1)."""
    dimensions = tuple(int(d) for d in dimensions)
    dtype = _onp.int64 if dtype is None else as_dtype(dtype)
    device = device or ctx or current_device()
    axes = []
    for i, n in enumerate(dimensions):
        shape = (1,) * i + (n,) + (1,) * (len(dimensions) - i - 1)
        axes.append(reshape(arange(n, dtype=dtype, device=device), shape))
    if sparse:
        return tuple(axes)
    if not axes:
        return zeros((0,), dtype=dtype, device=device)
    return stack([broadcast_to(a, dimensions) for a in axes])


@_export
def meshgrid(*xi, indexing="xy", sparse=False, copy=True):
    """Coordinate arrays from 1-d coordinate vectors: with indexing 'xy' (Cartesian) the first
    two output axes are swapped relative to 'ij' (matrix)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: valid values for indexing are 'xy' and 'ij', got "
                         f"{indexing!r}")
    arrays = [_to_array(x) for x in xi]
    ndim = len(arrays)
    shapes = []
    for i, a in enumerate(arrays):
        shape = [1] * ndim
        shape[i] = a.size
        if indexing == "xy" and ndim > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        shapes.append(tuple(shape))
    grids = [reshape(a, s) for a, s in zip(arrays, shapes)]
    if sparse:
        return grids
    grid_shape = [a.size for a in arrays]
    if indexing == "xy" and ndim > 1:
        grid_shape[0], grid_shape[1] = grid_shape[1], grid_shape[0]
    return [broadcast_to(g, tuple(grid_shape)) for g in grids]
