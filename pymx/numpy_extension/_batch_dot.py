"""npx.batch_dot: matrix products over a batch of matrices, as MXNet's batch_dot.

Differences from MXNet: any number (>= 1) of leading batch axes is accepted, as in MXNet 2.x's
NumPy front end, and `forward_stype` accepts only None/'default' (pymx has no sparse storage).

The transposed operands are read in place: the flags go to the matmul op as its transpose_a /
transpose_b attributes (exported as MXNet's batch_dot with the same flags).
"""
from pymx._op import invoke as _invoke


def batch_dot(a, b, transpose_a=False, transpose_b=False, forward_stype=None):
    """a[..., i, :] . b[..., :, j] for each batch entry: a (B..., N, M) and b (B..., M, K) give
    (B..., N, K). transpose_a / transpose_b read a or b with its last two axes swapped. a and b
    must have the same number of dimensions (>= 3) and the same batch axes."""
    if forward_stype not in (None, "default"):
        raise ValueError(f"batch_dot: forward_stype must be None or 'default' (pymx has no "
                         f"sparse storage), got {forward_stype!r}")
    if a.ndim < 3 or a.ndim != b.ndim:
        raise ValueError(f"batch_dot: a and b must have the same number of dimensions, at least "
                         f"3, got shapes {a.shape} and {b.shape}")
    if a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"batch_dot: the batch axes of a {a.shape} and b {b.shape} differ")
    inner_a = a.shape[-2] if transpose_a else a.shape[-1]
    inner_b = b.shape[-1] if transpose_b else b.shape[-2]
    if inner_a != inner_b:
        raise ValueError(f"batch_dot: inner dimensions differ: a {a.shape} (transpose_a="
                         f"{transpose_a}) and b {b.shape} (transpose_b={transpose_b})")
    flags = {}
    if transpose_a:
        flags["transpose_a"] = True
    if transpose_b:
        flags["transpose_b"] = True
    return _invoke("matmul", [a, b], flags)[0]
