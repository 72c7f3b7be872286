"""pymx.np.linalg: norms built from pymx operators (differentiable)."""
import numbers

from pymx.numpy import _core as _np

__all__ = ["norm"]


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector 2-norm / Frobenius norm (ord None, 2 for vectors, 'fro'), 1-norm (ord=1) and
    max-norm (ord=inf) along `axis` (None: the whole array)."""
    x = _np._to_array(x)
    if ord in (None, "fro", 2) and (ord != 2 or axis is None or isinstance(axis, numbers.Integral)
                                    or x.ndim == 1):
        return _np.sqrt(_np.sum(_np.square(x), axis=axis, keepdims=keepdims))
    if ord == 1 and (axis is not None or x.ndim == 1):
        return _np.sum(_np.abs(x), axis=axis, keepdims=keepdims)
    if ord == float("inf") and (axis is not None or x.ndim == 1):
        return _np.max(_np.abs(x), axis=axis, keepdims=keepdims)
    raise ValueError(f"norm: pymx supports ord None/'fro'/2 (vector), 1 and inf along an axis; "
                     f"got ord={ord!r}, axis={axis!r} for an array of dimension {x.ndim}")
