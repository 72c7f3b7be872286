"""pymx.np.linalg: NumPy's linear algebra over pymx operators, differentiable and asynchronous.

inv, det, slogdet, solve, cholesky, eigh, eigvalsh, eig, svd and qr are native operators,
batched over leading axes: LAPACK on the CPU (the matrices of a batch spread over the intra-op
threads), cuSOLVER on the GPU (one call per matrix, on the worker's stream; inv, solve,
cholesky, eigh, eig and svd read cuSOLVER's status back to the host to raise LinAlgError, a wait
on that stream). pinv, matrix_rank and lstsq are built on svd, cond on svd, norm, inv and
slogdet, eigvals on eig, and matrix_power, multi_dot, tensorinv and tensorsolve on matmul, inv
and solve. Every function takes stacks of matrices (..., M, N) where NumPy does, float32 or
float64 (integer and bool input is computed in float32, pymx's default float dtype); results
stay on the input's device.

A singular matrix (inv, solve), one that is not positive definite (cholesky), one with complex
eigenvalues or infs or NaNs (eig, eigvals), one with NaNs (svd on the CPU) or an iteration that
does not converge (eigh, eig, svd) raises LinAlgError (a ValueError, and a
numpy.linalg.LinAlgError) naming the matrix of the batch and LAPACK's info value. Like any error
of an asynchronous op it surfaces when the result is waited for (asnumpy(), wait_to_read()).

Deliberate differences from MXNet 2.x's np.linalg:
- svd returns NumPy's (u, s, vh) with the reduced shapes (..., M, K), (..., K), (..., K, N),
  K = min(M, N), for any M and N (MXNet's requires M <= N, where its (ut, l, v) are the same
  arrays); full_matrices=True is accepted where it changes nothing (square matrices).
- qr supports modes 'reduced' and 'r', and 'complete' where it equals 'reduced' (M <= N).
- The gradients of cholesky and eigh are the exact derivatives of the functions LAPACK computes,
  which read one triangle of the input: the other triangle gets zero and the read one the folded
  symmetric gradient (MXNet returns the symmetric gradient). For a symmetric input built upstream
  (A = X X^T) the gradient reaching X is the same.
- eig and eigvals return real arrays: pymx has no complex dtype, so, as MXNet's, they raise
  LinAlgError for a matrix with a complex eigenvalue (Note [Complex eigenvalues of eig] in
  engine/src/ops/linalg_common.h). eig is differentiable (distinct eigenvalues; MXNet's gradient
  is zero), and eigvals is eig's first output, eigenvectors computed too.
- lstsq's rcond default ('warn' or None) is NumPy 2's: machine epsilon times max(M, N), without
  a warning.
"""
import builtins as _builtins
import numbers as _numbers

import numpy as _onp

from pymx.base import DEFAULT_DTYPE as _DEFAULT_DTYPE
from pymx.base import PymxLinAlgError as LinAlgError
from pymx.numpy import _core as _np

__all__ = ["LinAlgError", "norm", "cond", "inv", "det", "slogdet", "solve", "cholesky", "eigh",
           "eigvalsh", "eig", "eigvals", "svd", "qr", "pinv", "matrix_rank", "lstsq",
           "matrix_power", "multi_dot", "tensorinv", "tensorsolve"]


_invoke = _np._invoke


def _float_array(x, device=None):
    """x as a pymx array of a floating dtype: integer and bool data become float32."""
    x = _np._to_array(x, device=device)
    if x.dtype.kind in "biu":
        x = x.astype(_DEFAULT_DTYPE)
    return x


def _check_matrices(a, name, square=False):
    if a.ndim < 2:
        raise LinAlgError(f"{name}: {a.ndim}-dimensional array given; the array must be at least "
                          "two-dimensional")
    if square and a.shape[-1] != a.shape[-2]:
        raise LinAlgError(f"{name}: the last 2 dimensions of the array must be square, got shape "
                          f"{a.shape}")


def _matrix_transpose(a):
    return _np.swapaxes(a, -1, -2)


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return _np.sqrt(_np.sum(_np.square(x), axis=axis, keepdims=keepdims))
    if ord == float("inf"):
        return _np.max(_np.abs(x), axis=axis, keepdims=keepdims)
    if ord == -float("inf"):
        return _np.min(_np.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return _np.sum(_np.not_equal(x, 0).astype(x.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return _np.sum(_np.abs(x), axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    return _np.power(_np.sum(_np.power(_np.abs(x), float(ord)), axis=axis, keepdims=keepdims),
                     1.0 / float(ord))


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if ord in (None, "fro"):
        result = _np.sqrt(_np.sum(_np.square(x), axis=axes, keepdims=True))
    elif ord in (2, -2, "nuc"):
        s = svd(_np.moveaxis(x, (row, col), (-2, -1)), compute_uv=False)
        reduced = _np.sum(s, axis=-1) if ord == "nuc" else \
            (_np.max(s, axis=-1) if ord == 2 else _np.min(s, axis=-1))
        result = _np.expand_dims(_np.expand_dims(reduced, -1), -1)
        result = _np.moveaxis(result, (-2, -1), (row, col))
    elif ord in (1, -1, float("inf"), -float("inf")):
        # 1: the largest column sum of |x|; inf: the largest row sum.
        summed_axis, kept_axis = (row, col) if ord in (1, -1) else (col, row)
        sums = _np.sum(_np.abs(x), axis=summed_axis, keepdims=True)
        reduce = _np.max if ord in (1, float("inf")) else _np.min
        result = reduce(sums, axis=kept_axis, keepdims=True)
    else:
        raise ValueError(f"norm: invalid norm order {ord!r} for matrices")
    return result if keepdims else _np.squeeze(result, axis=axes)


def norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's vector and matrix norms. With `axis` an int (or None on a 1-D array): the vector
    norms (ord None/2, inf, -inf, 0, 1 and any p). With `axis` a pair (or None on a 2-D array):
    the matrix norms (ord None/'fro', 'nuc', 2, -2 through svd, 1, -1, inf, -inf). With axis None
    and ord None: the 2-norm of the flattened array, whatever its dimension."""
    x = _float_array(x)
    if axis is None:
        if ord is None:
            result = _np.sqrt(_np.sum(_np.square(x)))
            return _np.reshape(result, (1,) * x.ndim) if keepdims else result
        if x.ndim not in (1, 2):
            raise ValueError(f"norm: ord {ord!r} without axis needs a 1-D or 2-D array, got "
                             f"{x.ndim} dimensions")
        axis = tuple(range(x.ndim))
    axes = _np._normalized_axes(axis, x.ndim, "norm")
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ValueError(f"norm: axis must be an int or a pair of ints, got {axis!r}")


# ---------------------------------------------------------------------------------------------
# Native operators
# ---------------------------------------------------------------------------------------------

def inv(a):
    """The inverse of each matrix of `a` (..., M, M). LinAlgError for a singular one."""
    a = _float_array(a)
    _check_matrices(a, "inv", square=True)
    return _invoke("linalg_inv", [a])[0]


def det(a):
    """The determinant of each matrix of `a` (..., M, M), shape (...); 0 for a singular one."""
    a = _float_array(a)
    _check_matrices(a, "det", square=True)
    return _invoke("linalg_det", [a])[0]


def slogdet(a):
    """(sign, logabsdet) of each matrix of `a` (..., M, M), with det = sign * exp(logabsdet);
    (0, -inf) for a singular matrix. Gradients flow through logabsdet."""
    a = _float_array(a)
    _check_matrices(a, "slogdet", square=True)
    sign, logabsdet = _invoke("linalg_slogdet", [a])
    return sign, logabsdet


def solve(a, b):
    """x with a @ x = b for `a` (..., M, M) and `b` (..., M) or (..., M, K): b is a stack of
    vectors when it is 1-D (NumPy 2's rule) or has one dimension fewer than a (NumPy 1's and
    MXNet's). Batch axes broadcast. LinAlgError for a singular matrix."""
    a = _float_array(a)
    b = _float_array(b, device=a.device)
    _check_matrices(a, "solve", square=True)
    if a.dtype != b.dtype:
        dtype = _onp.result_type(a.dtype, b.dtype)
        a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    vector_rhs = b.ndim in (1, a.ndim - 1)
    if vector_rhs:
        b = _np.expand_dims(b, -1)
    if b.ndim < 2:
        raise ValueError(f"solve: b of shape {b.shape} does not match a of shape {a.shape}")
    try:
        batch = _onp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"solve: the batch shapes of a {a.shape} and b "
                         f"{b.shape[:-1] if vector_rhs else b.shape} do not broadcast") from None
    if a.shape[:-2] != batch:
        a = _np.broadcast_to(a, batch + a.shape[-2:])
    if b.shape[:-2] != batch:
        b = _np.broadcast_to(b, batch + b.shape[-2:])
    x = _invoke("linalg_solve", [a, b])[0]
    return _np.reshape(x, x.shape[:-1]) if vector_rhs else x


def cholesky(a, upper=False):
    """The Cholesky factor of each symmetric positive-definite matrix of `a` (..., M, M): lower
    L with a = L @ L.T, or upper U = L.T with a = U.T @ U when `upper`. Only the lower triangle
    of `a` is read. LinAlgError for a matrix that is not positive definite."""
    a = _float_array(a)
    _check_matrices(a, "cholesky", square=True)
    lower = _invoke("linalg_cholesky", [a])[0]
    return _matrix_transpose(lower) if upper else lower


def eigh(a, UPLO="L"):
    """(w, v): the eigenvalues (ascending, (..., M)) and eigenvectors (the columns of v,
    (..., M, M)) of each symmetric matrix of `a`, reading its lower (UPLO='L') or upper ('U')
    triangle."""
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    a = _float_array(a)
    _check_matrices(a, "eigh", square=True)
    w, v = _invoke("linalg_eigh", [a], {"UPLO": UPLO})
    return w, v


def eigvalsh(a, UPLO="L"):
    """The eigenvalues (ascending) of each symmetric matrix of `a`; see eigh."""
    return eigh(a, UPLO)[0]


def eig(a):
    """(w, v): the eigenvalues (..., M), in LAPACK's order as NumPy's, and the right
    eigenvectors (the columns of v (..., M, M), each of unit norm) of each square matrix of
    `a`, not necessarily symmetric. LinAlgError when a matrix has a complex eigenvalue (pymx
    has no complex dtype) or contains infs or NaNs. The gradient needs distinct eigenvalues."""
    a = _float_array(a)
    _check_matrices(a, "eig", square=True)
    w, v = _invoke("linalg_eig", [a])
    return w, v


def eigvals(a):
    """The eigenvalues of each square matrix of `a`; see eig."""
    return eig(a)[0]


def svd(a, full_matrices=False, compute_uv=True, hermitian=False):
    """The reduced singular value decomposition of each matrix of `a` (..., M, N):
    (u (..., M, K), s (..., K) descending, vh (..., K, N)) with a = u @ (s[..., None] * vh) and
    K = min(M, N); only s when not `compute_uv`. `hermitian` is accepted and changes nothing.
    The gradient needs distinct nonzero singular values."""
    a = _float_array(a)
    _check_matrices(a, "svd")
    if full_matrices and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"svd: full_matrices=True is not supported for non-square matrices "
                         f"(shape {a.shape}); pymx computes the reduced decomposition")
    u, s, vh = _invoke("linalg_svd", [a])
    return (u, s, vh) if compute_uv else s


def qr(a, mode="reduced"):
    """The QR decomposition of each matrix of `a` (..., M, N): (q (..., M, K) orthonormal,
    r (..., K, N) upper triangular), K = min(M, N); only r for mode 'r'."""
    a = _float_array(a)
    _check_matrices(a, "qr")
    if mode not in ("reduced", "r", "complete") or \
            (mode == "complete" and a.shape[-2] > a.shape[-1]):
        raise ValueError(f"qr: mode {mode!r} is not supported for shape {a.shape}; pymx supports "
                         "'reduced', 'r', and 'complete' when M <= N")
    q, r = _invoke("linalg_qr", [a])
    return r if mode == "r" else (q, r)


# ---------------------------------------------------------------------------------------------
# Compositions
# ---------------------------------------------------------------------------------------------

def _inverse_singular_values(s, cutoff):
    """1/s where s > cutoff, else 0; the masked entries get no gradient (where() picks a safe
    denominator, so no inf*0 appears in the backward pass)."""
    kept = _np.greater(s, cutoff)
    safe = _np.where(kept, s, _np.ones_like(s))
    return _np.where(kept, _np.reciprocal(safe), _np.zeros_like(s))


def cond(x, p=None):
    """The condition number of each matrix of `x` (..., M, N) in the norm `p`: None or 2 (the
    largest over the smallest singular value), -2 (the inverse), 'fro', 'nuc', inf, -inf, 1 or
    -1 (norm(x, p) * norm(inv(x), p), square matrices only). As NumPy's: a singular matrix gives
    inf, one holding a NaN gives NaN."""
    x = _float_array(x)
    _check_matrices(x, "cond")
    if x.size == 0 and x.shape[-1] * x.shape[-2] == 0:
        raise LinAlgError(f"cond: not defined on empty arrays (shape {x.shape})")
    # A matrix holding a NaN has condition number NaN; zeros stand in for it below, so that no
    # decomposition sees the NaN.
    has_nan = _np.any(_np.isnan(x), axis=(-2, -1))
    x = _np.where(_np.expand_dims(_np.expand_dims(has_nan, -1), -1), _np.zeros_like(x), x)
    if p is None or p in (2, -2):
        s = svd(x, compute_uv=False)
        large, small = s[..., 0], s[..., -1]
        r = small / large if p == -2 else large / small
    else:
        _check_matrices(x, "cond", square=True)
        # LU's exact zero pivot marks a singular matrix (what makes NumPy's inverse NaN); an
        # identity stands in for it so that inv does not raise.
        sign, _ = slogdet(x)
        singular = _np.equal(sign, 0)
        invertible = _np.where(_np.expand_dims(_np.expand_dims(singular, -1), -1),
                               _np.eye(x.shape[-1], dtype=x.dtype, device=x.device), x)
        r = norm(x, p, axis=(-2, -1)) * norm(inv(invertible), p, axis=(-2, -1))
        r = _np.where(singular, float("inf"), r)
    # NumPy's rule: NaN from a matrix without NaNs (0 / 0 of a zero matrix) is inf.
    r = _np.where(_np.isnan(r), float("inf"), r)
    return _np.where(has_nan, float("nan"), r)


def pinv(a, rcond=1e-15, hermitian=False):
    """The Moore-Penrose pseudo-inverse (..., N, M) of each matrix of `a` (..., M, N), through
    svd: singular values at most rcond times the largest are treated as zero. `rcond` may be an
    array broadcasting against the batch shape."""
    a = _float_array(a)
    _check_matrices(a, "pinv")
    m, n = a.shape[-2:]
    if min(m, n) == 0:
        return _np.zeros(a.shape[:-2] + (n, m), dtype=a.dtype, device=a.device)
    u, s, vh = svd(a)
    rcond = _np._to_array(rcond, device=a.device, dtype=a.dtype)
    cutoff = _np.multiply(_np.expand_dims(rcond, -1), _np.max(s, axis=-1, keepdims=True))
    s_inv = _inverse_singular_values(s, cutoff)
    return _np.matmul(_matrix_transpose(vh) * _np.expand_dims(s_inv, -2), _matrix_transpose(u))


def matrix_rank(M, tol=None, hermitian=False):
    """The number of singular values of each matrix of `M` (..., M, N) above `tol` (default:
    the largest times max(M, N) times the dtype's machine epsilon), as an int64 array; for a
    vector (or scalar), 1 unless it is all zeros."""
    M = _float_array(M)
    if M.ndim < 2:
        return _np.any(_np.not_equal(M, 0)).astype("int64")
    s = svd(M, compute_uv=False)
    if s.shape[-1] == 0:
        return _np.zeros(s.shape[:-1], dtype="int64", device=M.device)
    if tol is None:
        tol = _np.max(s, axis=-1, keepdims=True) * (_builtins.max(M.shape[-2:]) *
                                                    float(_onp.finfo(M.dtype).eps))
    else:
        tol = _np.expand_dims(_np._to_array(tol, device=M.device, dtype=M.dtype), -1)
    return _np.sum(_np.greater(s, tol), axis=-1).astype("int64")


def lstsq(a, b, rcond="warn"):
    """The least-squares solution x of a @ x = b for `a` (M, N) and `b` (M,) or (M, K), through
    svd. Returns (x (N,) or (N, K), residuals, rank, s): residuals are the squared 2-norms of
    each column of b - a @ x, shape (K,) or (1,), when rank == N < M and empty otherwise; rank
    is a Python int; s holds a's singular values. Singular values at most rcond times the
    largest count as zero; rcond 'warn' or None means machine epsilon times max(M, N). Waits
    for a's singular values (the rank decides the shape of residuals)."""
    a = _float_array(a)
    b = _float_array(b, device=a.device)
    if a.ndim != 2:
        raise LinAlgError(f"lstsq: a must be two-dimensional, got shape {a.shape}")
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise LinAlgError(f"lstsq: b of shape {b.shape} does not match a of shape {a.shape} "
                          f"(expected ({a.shape[0]},) or ({a.shape[0]}, K))")
    if a.dtype != b.dtype:
        dtype = _onp.result_type(a.dtype, b.dtype)
        a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    m, n = a.shape
    b2 = _np.expand_dims(b, -1) if b.ndim == 1 else b
    if rcond is None or (isinstance(rcond, str) and rcond == "warn"):
        rcond = float(_onp.finfo(a.dtype).eps) * _builtins.max(m, n)
    if min(m, n) == 0:
        s = _np.zeros((0,), dtype=a.dtype, device=a.device)
        x = _np.zeros((n, b2.shape[1]), dtype=a.dtype, device=a.device)
        rank = 0
    else:
        u, s, vh = svd(a)
        cutoff = _np.max(s) * float(rcond)
        s_inv = _inverse_singular_values(s, cutoff)
        x = _np.matmul(_matrix_transpose(vh),
                       _np.expand_dims(s_inv, -1) * _np.matmul(_matrix_transpose(u), b2))
        rank = int(_np.sum(_np.greater(s, cutoff)).item())
    if rank == n and m > n:
        residuals = _np.sum(_np.square(b2 - _np.matmul(a, x)), axis=0)
    else:
        residuals = _np.zeros((0,), dtype=a.dtype, device=a.device)
    if b.ndim == 1:
        x = _np.reshape(x, (n,))
    return x, residuals, rank, s


def matrix_power(a, n):
    """Each square matrix of `a` raised to the integer power `n` by repeated squaring; n = 0
    gives identity matrices and n < 0 powers of inv(a)."""
    if not isinstance(n, (_numbers.Integral, _onp.integer)) or isinstance(n, bool):
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}")
    a = _np._to_array(a)
    _check_matrices(a, "matrix_power", square=True)
    n = int(n)
    if n == 0:
        eye = _np.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        return _np.broadcast_to(eye, a.shape)
    if n < 0:
        a = inv(a)
        n = -n
    result = None
    power = a
    while True:
        if n & 1:
            result = power if result is None else _np.matmul(result, power)
        n >>= 1
        if n == 0:
            return result
        power = _np.matmul(power, power)


def _chain_order(shapes):
    """The split table of the cheapest way to multiply matrices of `shapes` (each (rows, cols)),
    by dynamic programming over the chain (Cormen et al., Introduction to Algorithms, 15.2)."""
    count = len(shapes)
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(arrays, out=None):
    """The product of two or more arrays, multiplied in the order with the fewest scalar
    multiplications. The first may be 1-D (a row vector) and the last 1-D (a column vector);
    the others must be 2-D."""
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"multi_dot: expecting at least two arrays, got {len(arrays)}")
    arrays = [_np._to_array(x) for x in arrays]
    first_vector, last_vector = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first_vector:
        arrays[0] = _np.reshape(arrays[0], (1, -1))
    if last_vector:
        arrays[-1] = _np.reshape(arrays[-1], (-1, 1))
    for i, x in enumerate(arrays):
        if x.ndim != 2:
            raise ValueError(f"multi_dot: array {i} has {x.ndim} dimensions (shape {x.shape}); "
                             "the first and last may be 1-D, all others must be 2-D")
    split = _chain_order([x.shape for x in arrays])

    def product(i, j):
        if i == j:
            return arrays[i]
        return _np.matmul(product(i, split[i][j]), product(split[i][j] + 1, j))

    result = product(0, len(arrays) - 1)
    shape = result.shape
    if first_vector:
        shape = shape[1:]
    if last_vector:
        shape = shape[:-1]
    result = _np.reshape(result, shape)
    if out is None:
        return result
    _np.copyto(out, result)
    return out


def tensorinv(a, ind=2):
    """The inverse of `a` with respect to tensordot over its first `ind` axes: shape
    a.shape[ind:] + a.shape[:ind]; prod(a.shape[:ind]) must equal prod(a.shape[ind:])."""
    a = _np._to_array(a)
    if not isinstance(ind, _numbers.Integral) or ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got {ind!r}")
    rows = int(_onp.prod(a.shape[:ind], dtype=_onp.int64))
    cols = int(_onp.prod(a.shape[ind:], dtype=_onp.int64))
    if rows != cols:
        raise ValueError(f"tensorinv: prod(a.shape[:{ind}]) = {rows} must equal "
                         f"prod(a.shape[{ind}:]) = {cols} (shape {a.shape})")
    return _np.reshape(inv(_np.reshape(a, (rows, cols))), a.shape[ind:] + a.shape[:ind])


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, axes=x.ndim) = b: x has shape a.shape[b.ndim:] (after moving
    `axes` of a to the end), whose size must equal b's."""
    a = _np._to_array(a)
    b = _np._to_array(b, device=a.device)
    if axes is not None:
        axes = [int(k) % a.ndim for k in (axes if isinstance(axes, (tuple, list)) else (axes,))]
        order = [k for k in range(a.ndim) if k not in axes] + axes
        a = _np.transpose(a, tuple(order))
    x_shape = a.shape[b.ndim:]
    size = int(_onp.prod(x_shape, dtype=_onp.int64))
    if a.size != size * size or b.size != size:
        raise LinAlgError(f"tensorsolve: a of shape {a.shape} and b of shape {b.shape} must "
                          "satisfy prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim]) == b.size")
    x = solve(_np.reshape(a, (size, size)), _np.reshape(b, (size,)))
    return _np.reshape(x, x_shape)
