"""Polynomials for `pymx.np` (coefficients highest power first, as polyval takes them): polyadd,
polysub, polymul, polydiv, polyint, polyfit, roots.

polyadd, polysub, polymul and polyint are operator compositions on the device (polymul adds the
outer product's terms into their powers with one scatter-add, `index_update`), differentiable
and traced by hybridize. polydiv runs its long division on the device too, then reads the
remainder on the host to drop its leading zeros (NumPy's remainder length depends on them).
polyfit solves its least-squares problem with np.linalg.lstsq, which reads the rank on the host.
roots computes on the host with NumPy (see its docstring).

Differences from NumPy: integer and boolean coefficients compute in float32 where NumPy uses
float64 (polydiv, polyint, polyfit), as MXNet does for float-valued results of integers.
polymul keeps its inputs' leading zero coefficients (NumPy drops them first, through poly1d),
so that its length depends on the shapes only: the result is the same polynomial, with leading
zeros where NumPy's is shorter.
"""
import builtins
import numbers
import warnings

import numpy as _onp

from pymx.ndarray import from_numpy, ndarray
from pymx.numpy import _core, linalg
from pymx.numpy._core import (_is_float, _to_array, add, concatenate, multiply, ravel, reshape,
                              subtract, true_divide)
from pymx.numpy._einsum import _common_dtype
from pymx.numpy._windows import vander

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _coefficients(p, what, device=None):
    """p as a 1-d pymx array (a scalar becomes one coefficient)."""
    p = _to_array(p, device=device)
    if p.ndim == 0:
        p = reshape(p, (1,))
    if p.ndim != 1:
        raise ValueError(f"{what}: coefficients must be 1-d, got shape {p.shape}")
    return p


def _float_coefficients(p, what, device=None):
    p = _coefficients(p, what, device)
    return p if _is_float(p.dtype) else p.astype(_onp.float32)


def _two(a1, a2, what, as_float=False):
    device = next((v.device for v in (a1, a2) if isinstance(v, ndarray)), None)
    convert = _float_coefficients if as_float else _coefficients
    a1 = convert(a1, what, device)
    a2 = convert(a2, what, a1.device)
    dtype = _common_dtype([a1.dtype, a2.dtype])
    return a1.astype(dtype, copy=False), a2.astype(dtype, copy=False)


def _leading_zeros(p, count):
    """p with `count` zero coefficients in front."""
    if count <= 0:
        return p
    return concatenate([_core.zeros((count,), dtype=p.dtype, device=p.device), p])


@_export
def polyadd(a1, a2):
    """The sum of two polynomials (the shorter is padded with leading zeros)."""
    a1, a2 = _two(a1, a2, "polyadd")
    n = builtins.max(a1.shape[0], a2.shape[0])
    return add(_leading_zeros(a1, n - a1.shape[0]), _leading_zeros(a2, n - a2.shape[0]))


@_export
def polysub(a1, a2):
    """The difference a1 - a2 of two polynomials."""
    a1, a2 = _two(a1, a2, "polysub")
    n = builtins.max(a1.shape[0], a2.shape[0])
    return subtract(_leading_zeros(a1, n - a1.shape[0]), _leading_zeros(a2, n - a2.shape[0]))


@_export
def polymul(a1, a2):
    """The product of two polynomials: the convolution of their coefficients."""
    a1, a2 = _two(a1, a2, "polymul")
    n1, n2 = a1.shape[0], a2.shape[0]
    if n1 == 0 or n2 == 0:
        raise ValueError(f"polymul: coefficients cannot be empty, got lengths {n1} and {n2}")
    terms = ravel(_core.outer(a1, a2))
    # Term (i, j) multiplies x^(n1-1-i) by x^(n2-1-j): it belongs to coefficient i + j.
    powers = _onp.add.outer(_onp.arange(n1), _onp.arange(n2)).ravel().astype(_onp.int64)
    totals = _core.zeros((n1 + n2 - 1,), dtype=terms.dtype, device=a1.device)
    return _core._invoke("index_update", [totals, from_numpy(powers, device=a1.device), terms],
                         {"axis": 0, "accumulate": True})[0]


@_export
def polydiv(u, v):
    """(quotient, remainder) of the polynomial division u / v, by long division. The remainder's
    leading coefficients that are zero (within a relative 1e-14 of the first) are dropped, as in
    NumPy, which reads it on the host."""
    u, v = _two(u, v, "polydiv", as_float=True)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    if n < 0 or m < 0:
        raise ValueError(f"polydiv: coefficients cannot be empty, got lengths {m + 1} and "
                         f"{n + 1}")
    scale = true_divide(1.0, v[0])
    remainder = u
    quotient = []
    for k in range(m - n + 1):
        d = multiply(scale, remainder[k])
        quotient.append(reshape(d, (1,)))
        update = _leading_zeros(multiply(d, v), k)
        tail = m + 1 - (k + n + 1)
        if tail:
            update = concatenate([update, _core.zeros((tail,), dtype=u.dtype, device=u.device)])
        remainder = subtract(remainder, update)
    quotient = concatenate(quotient) if quotient else _core.zeros((1,), dtype=u.dtype,
                                                                   device=u.device)
    values = remainder.asnumpy()
    start = 0
    while start < values.shape[0] - 1 and _onp.allclose(values[start], 0, rtol=1e-14):
        start += 1
    return quotient, remainder[start:]


@_export
def polyint(p, m=1, k=None):
    """The m-th antiderivative of p; its integration constants are k (a scalar for all of them,
    or one per integration, the first for the first integration), default zero."""
    if not isinstance(m, (numbers.Integral, _onp.integer)) or int(m) < 0:
        raise ValueError(f"polyint: order of integral must be a non-negative integer, got "
                         f"m={m!r}")
    m = int(m)
    if m == 0:
        return _coefficients(p, "polyint")
    p = _float_coefficients(p, "polyint")
    constants = [0.0] * m if k is None else k
    if isinstance(constants, ndarray):
        constants = [constants[i] for i in range(constants.size)] if constants.ndim else \
            [constants]
    elif _onp.ndim(constants) == 0:
        constants = [constants] * m
    else:
        constants = list(_onp.ravel(constants))
    if len(constants) == 1 and m > 1:
        constants = constants * m
    if len(constants) < m:
        raise ValueError(f"polyint: k must be a scalar or a rank-1 array of length 1 or >= m, "
                         f"got {len(constants)} constants for m={m}")
    for c in constants[:m]:
        length = p.shape[0]
        powers = _core.arange(length, 0, -1, dtype=p.dtype, device=p.device)
        constant = reshape(_to_array(c, device=p.device, dtype=p.dtype), (1,)) \
            if isinstance(c, ndarray) else _core.full((1,), c, dtype=p.dtype, device=p.device)
        p = concatenate([true_divide(p, powers), constant])
    return p


@_export
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree `deg` through (x, y): coefficients highest power
    first, shape (deg + 1,) or (deg + 1, K) for y of shape (M, K). w weights each point's
    residual; full=True also returns (residuals, rank, singular values, rcond); cov=True the
    coefficients' covariance matrix (scaled by residuals / (M - deg - 1) unless
    cov='unscaled')."""
    if not isinstance(deg, (numbers.Integral, _onp.integer)) or int(deg) < 0:
        raise ValueError(f"polyfit: expected deg >= 0 (an integer), got {deg!r}")
    order = int(deg) + 1
    device = next((v.device for v in (x, y, w) if isinstance(v, ndarray)), None)
    x = _to_array(x, device=device)
    y = _to_array(y, device=x.device)
    x, y = (v if _is_float(v.dtype) else v.astype(_onp.float32) for v in (x, y))
    dtype = _common_dtype([x.dtype, y.dtype])
    x, y = x.astype(dtype, copy=False), y.astype(dtype, copy=False)
    if x.ndim != 1:
        raise TypeError(f"polyfit: expected a 1-d vector for x, got shape {x.shape}")
    if x.size == 0:
        raise TypeError("polyfit: expected a non-empty vector for x")
    if y.ndim not in (1, 2):
        raise TypeError(f"polyfit: expected a 1-d or 2-d array for y, got shape {y.shape}")
    if x.shape[0] != y.shape[0]:
        raise TypeError(f"polyfit: expected x and y to have the same length, got {x.shape[0]} "
                        f"and {y.shape[0]}")
    if rcond is None:
        rcond = x.shape[0] * float(_onp.finfo(_onp.float32 if dtype != _onp.float64
                                              else _onp.float64).eps)
    lhs = vander(x, order)
    rhs = y
    if w is not None:
        w = _to_array(w, device=x.device, dtype=dtype)
        if w.ndim != 1:
            raise TypeError(f"polyfit: expected a 1-d array for weights, got shape {w.shape}")
        if w.shape[0] != y.shape[0]:
            raise TypeError(f"polyfit: expected w and y to have the same length, got "
                            f"{w.shape[0]} and {y.shape[0]}")
        lhs = multiply(lhs, reshape(w, (-1, 1)))
        rhs = multiply(rhs, reshape(w, (-1, 1)) if rhs.ndim == 2 else w)
    # Scaling the columns to unit norm improves the conditioning of the least-squares problem.
    scale = _core.sqrt(_core.sum(multiply(lhs, lhs), axis=0))
    lhs = true_divide(lhs, scale)
    c, residuals, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = true_divide(c, reshape(scale, (-1, 1)) if c.ndim == 2 else scale)
    if rank != order and not full:
        warnings.warn(f"polyfit may be poorly conditioned: rank {rank} < {order} coefficients",
                      _onp.exceptions.RankWarning, stacklevel=2)
    if full:
        return c, residuals, rank, s, rcond
    if not cov:
        return c
    base = linalg.inv(_core.matmul(_core.transpose(lhs), lhs))
    base = true_divide(base, _core.outer(scale, scale))
    if cov == "unscaled":
        factor = 1.0
    else:
        if x.shape[0] <= order:
            raise ValueError(f"polyfit: the number of data points ({x.shape[0]}) must exceed "
                             f"order ({order}) to scale the covariance matrix")
        factor = true_divide(residuals, x.shape[0] - order)
    if y.ndim == 1:
        return c, multiply(base, factor)
    return c, multiply(reshape(base, base.shape + (1,)), factor)


@_export
def roots(p):
    """The roots of the polynomial p (highest power first): the eigenvalues of its companion
    matrix. Computed on the host with NumPy's eigenvalue solver (pymx has no general
    eigenvalue operator yet), so not traced by hybridize. pymx has no complex dtype: real roots
    come as a pymx array on p's device (float32 unless p is float64); when some root is complex,
    the result is a NumPy complex array."""
    p = _coefficients(p, "roots")
    values = p.asnumpy()
    found = _onp.roots(values)
    if _onp.iscomplexobj(found):
        return found
    dtype = _onp.float64 if p.dtype == _onp.float64 else _onp.float32
    return from_numpy(found.astype(dtype), device=p.device)
