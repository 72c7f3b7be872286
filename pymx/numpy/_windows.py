"""Window functions, Vandermonde matrices and bit packing for `pymx.np`: hanning, hamming,
blackman, vander, packbits, unpackbits.

All run on the device from arange, cos, cumprod and integer arithmetic (shapes depend only on
the arguments' shapes), so hybridize traces them. The windows are computed in float64 and then
cast, so every dtype gets its correctly rounded values.

Differences from NumPy: windows are float32 unless `dtype` says otherwise (MXNet); vander of
integers or booleans is int64 and of floats keeps their dtype (NumPy promotes float32 to
float64).
"""
import math
import numbers

import numpy as _onp

from pymx.base import DEFAULT_DTYPE
from pymx.device import current_device
from pymx.numpy import _core
from pymx.numpy._core import (_is_float, _normalized_axes, _to_array, arange, broadcast_to,
                              concatenate, cos, flip, moveaxis, multiply, ravel, reshape)
from pymx.numpy._cumulative import cumprod

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _cosine_window(M, coefficients, dtype, device, what):
    """sum_k coefficients[k] * cos(k * pi * n / (M - 1)) for n = 1-M, 3-M, .., M-1: a symmetric
    window of M points that is 1 in the middle."""
    if not isinstance(M, (numbers.Integral, _onp.integer)) or isinstance(M, bool):
        raise TypeError(f"{what}: M must be an integer, got {M!r}")
    dtype = DEFAULT_DTYPE if dtype is None else dtype
    device = device or current_device()
    if M < 1:
        return _core.zeros((0,), dtype=dtype, device=device)
    if M == 1:
        return _core.ones((1,), dtype=dtype, device=device)
    phase = multiply(arange(1 - M, M, 2, dtype=_onp.float64, device=device), math.pi / (M - 1))
    window = _core.full((M,), coefficients[0], dtype=_onp.float64, device=device)
    for k, c in enumerate(coefficients[1:], 1):
        window = window + multiply(cos(multiply(phase, float(k))), c)
    return window.astype(dtype)


@_export
def hanning(M, dtype=None, device=None, ctx=None):
    """The Hann window of M points: 0.5 + 0.5 cos(pi n / (M - 1)), n = 1-M, 3-M, .., M-1."""
    return _cosine_window(M, (0.5, 0.5), dtype, device or ctx, "hanning")


@_export
def hamming(M, dtype=None, device=None, ctx=None):
    """The Hamming window of M points: 0.54 + 0.46 cos(pi n / (M - 1))."""
    return _cosine_window(M, (0.54, 0.46), dtype, device or ctx, "hamming")


@_export
def blackman(M, dtype=None, device=None, ctx=None):
    """The Blackman window of M points: 0.42 + 0.5 cos(pi n / (M - 1))
    + 0.08 cos(2 pi n / (M - 1))."""
    return _cosine_window(M, (0.42, 0.5, 0.08), dtype, device or ctx, "blackman")


@_export
def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of the 1-d x: column j is x ** (N - 1 - j) (x ** j with
    increasing=True); N defaults to len(x). Differentiable in x."""
    x = _to_array(x)
    if x.ndim != 1:
        raise ValueError(f"vander: x must be a one-dimensional array or sequence, got shape "
                         f"{x.shape}")
    N = x.shape[0] if N is None else N
    if not isinstance(N, (numbers.Integral, _onp.integer)) or N < 0:
        raise ValueError(f"vander: N must be a non-negative integer, got {N!r}")
    if not _is_float(x.dtype):
        x = x.astype(_onp.int64)
    n = x.shape[0]
    if N == 0:
        return _core.zeros((n, 0), dtype=x.dtype, device=x.device)
    # Powers 0, 1, .., N-1 as running products of [1, x, x, ..].
    columns = concatenate([_core.ones((n, 1), dtype=x.dtype, device=x.device),
                           broadcast_to(reshape(x, (n, 1)), (n, N - 1))], axis=1)
    powers = cumprod(columns, axis=1)
    return powers if increasing else flip(powers, axis=1)


_BITORDERS = ("big", "little")


def _bitorder(bitorder, what):
    if bitorder not in _BITORDERS:
        raise ValueError(f"{what}: bitorder must be either 'little' or 'big', got {bitorder!r}")
    return bitorder


def _bit_weights(bitorder, device):
    """The value of each of a byte's 8 bits in order: 128 first for 'big', 1 first for 'little'."""
    weights = [1 << b for b in range(8)]
    return _to_array(_onp.array(weights[::-1] if bitorder == "big" else weights, dtype=_onp.int32),
                     device=device)


@_export
def packbits(a, axis=None, bitorder="big"):
    """The elements of the integer or boolean `a` as bits (non-zero is 1), packed eight to a
    uint8 along `axis` (None: the flattened a); the last byte is padded with zero bits."""
    _bitorder(bitorder, "packbits")
    a = _to_array(a)
    if a.dtype.kind not in "biu":
        raise TypeError(f"packbits: expected an input array of integer or boolean data type, "
                        f"got {a.dtype}")
    if axis is None:
        a, axis = ravel(a), 0
    axis = _normalized_axes(axis, a.ndim, "packbits")[0]
    a = moveaxis(_core.not_equal(a, 0).astype(_onp.int32), axis, -1)
    n = a.shape[-1]
    padding = -n % 8
    if padding:
        a = concatenate([a, _core.zeros(a.shape[:-1] + (padding,), dtype=_onp.int32,
                                        device=a.device)], axis=-1)
    bits = reshape(a, a.shape[:-1] + ((n + padding) // 8, 8))
    packed = _core.sum(multiply(bits, _bit_weights(bitorder, a.device)), axis=-1)
    return moveaxis(packed.astype(_onp.uint8), -1, axis)


@_export
def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of the uint8 `a` as a uint8 array of 0s and 1s, eight per byte along `axis`
    (None: the flattened a). count keeps that many bits (padding with zeros beyond the end);
    a negative count drops that many from the end (at most all of them)."""
    _bitorder(bitorder, "unpackbits")
    a = _to_array(a)
    if a.dtype != _onp.uint8:
        raise TypeError(f"unpackbits: expected an input array of unsigned byte data type, got "
                        f"{a.dtype}")
    if count is not None and (not isinstance(count, (numbers.Integral, _onp.integer)) or
                              isinstance(count, bool)):
        raise TypeError(f"unpackbits: count must be an integer or None, got {count!r}")
    if axis is None:
        a, axis = ravel(a), 0
    axis = _normalized_axes(axis, a.ndim, "unpackbits")[0]
    a = moveaxis(a.astype(_onp.int32), axis, -1)
    values = reshape(a, a.shape + (1,))
    bits = _core.mod(_core.floor_divide(values, _bit_weights(bitorder, a.device)), 2)
    bits = reshape(bits, a.shape[:-1] + (a.shape[-1] * 8,))
    total = bits.shape[-1]
    keep = total if count is None else int(count) if count >= 0 else total + int(count)
    if keep < 0:
        raise ValueError(f"unpackbits: -count larger than number of elements ({-count} > "
                         f"{total} bits)")
    if keep < total:
        bits = bits[..., :keep]
    elif keep > total:
        bits = concatenate([bits, _core.zeros(bits.shape[:-1] + (keep - total,),
                                              dtype=bits.dtype, device=bits.device)], axis=-1)
    return moveaxis(bits.astype(_onp.uint8), -1, axis)
