"""cumprod for `pymx.np`: a differentiable cumulative product on the device.

The scan doubles its reach at each step (Hillis-Steele): after step s, every element holds the
product of itself and the 2**s - 1 elements before it. That is ceil(log2 n) multiplications of
the array by a shifted copy of itself, exact for zeros and negative values (a product of logs
would not be), recorded by autograd and traced by hybridize like any other ops.
"""

from pymx.base import as_dtype
from pymx.numpy._core import _to_array, concatenate, copyto, multiply, ones, ravel

__all__ = ["cumprod"]


def cumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product along `axis` (of the flattened array if None). Booleans and small
    integers accumulate in int64, like NumPy."""
    a = _to_array(a)
    if dtype is not None:
        a = a.astype(dtype) if as_dtype(dtype) != a.dtype else a
    elif a.dtype.kind == "b" or (a.dtype.kind in "iu" and a.dtype.itemsize < 8):
        a = a.astype("int64")
    if axis is None or a.ndim == 0:  # NumPy accumulates a 0-d array as a 1-element one
        a, axis = ravel(a), 0 if axis is None else axis
    if not -a.ndim <= axis < a.ndim:
        raise ValueError(f"cumprod: axis {axis} is out of bounds for array of dimension "
                         f"{a.ndim}")
    axis %= a.ndim
    n = a.shape[axis]
    lead = (slice(None),) * axis
    shift = 1
    while shift < n:
        filler = ones(a.shape[:axis] + (shift,) + a.shape[axis + 1:], dtype=a.dtype,
                      device=a.device)
        a = multiply(a, concatenate([filler, a[lead + (slice(0, n - shift),)]], axis=axis))
        shift *= 2
    return a if out is None else copyto(out, a)
