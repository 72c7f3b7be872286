"""Resampling of NCHW images as MXNet's UpSampling, contrib BilinearResize2D and contrib
AdaptiveAvgPooling2D compute it, composed of differentiable pymx operations.

Interpolation and pooling weights depend only on the shapes, so they are built with NumPy and
applied as matrix products over the last two axes: out = A_h @ x @ A_w^T with A (out, in).
"""
import math

import numpy as _onp

from .. import numpy as np
from .. import numpy_extension as npx

__all__ = ['upsample_nearest', 'upsample_bilinear', 'bilinear_resize', 'adaptive_avg_pool',
           'bilinear_kernel_size']


def _check_nchw(x, what):
    if x.ndim != 4:
        raise ValueError(f"{what} needs 4-D NCHW data, got shape {x.shape}")


def upsample_nearest(x, scale_h, scale_w):
    """Repeats every pixel scale_h times down and scale_w times across."""
    return np.repeat(np.repeat(x, scale_h, axis=2), scale_w, axis=3)


def bilinear_kernel_size(scale):
    """The deconvolution kernel of bilinear UpSampling by `scale`."""
    return 2 * scale - scale % 2


def upsample_bilinear(x, weight, scale, num_filter):
    """MXNet's bilinear UpSampling: a depthwise deconvolution with the given weight
    (num_filter, 1, k, k), stride `scale` and padding ceil((scale - 1) / 2)."""
    kernel = bilinear_kernel_size(scale)
    pad = math.ceil((scale - 1) / 2)
    return npx.deconvolution(x, weight, None, kernel=(kernel, kernel), stride=(scale, scale),
                             pad=(pad, pad), num_filter=num_filter, num_group=num_filter,
                             no_bias=True)


def _interpolation_matrix(size_in, size_out, align_corners):
    """(size_out, size_in): row i blends the two source pixels of output pixel i (MXNet's
    source index: scaled by (in - 1) / (out - 1) with align_corners, else pixel centres
    mapped and clamped at 0)."""
    matrix = _onp.zeros((size_out, size_in))
    if align_corners:
        scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    else:
        scale = size_in / size_out
    for i in range(size_out):
        source = scale * i if align_corners else max(scale * (i + 0.5) - 0.5, 0.0)
        low = min(int(source), size_in - 1)
        high = min(low + 1, size_in - 1)
        weight = source - low
        matrix[i, low] += 1 - weight
        matrix[i, high] += weight
    return matrix


def _pooling_matrix(size_in, size_out):
    """(size_out, size_in): row i averages source pixels floor(i * in / out) to
    ceil((i + 1) * in / out) - 1."""
    matrix = _onp.zeros((size_out, size_in))
    for i in range(size_out):
        begin = (i * size_in) // size_out
        end = -((-(i + 1) * size_in) // size_out)
        matrix[i, begin:end] = 1 / (end - begin)
    return matrix


def _apply(x, rows, columns):
    """rows @ x @ columns^T over the last two axes, in x's dtype and on its device."""
    def array(matrix):
        return np.array(matrix, dtype=x.dtype, device=x.device)
    return np.matmul(np.matmul(array(rows), x), array(columns.T))


def bilinear_resize(x, height, width, align_corners):
    """x (N, C, H, W) resized to (N, C, height, width) by bilinear interpolation."""
    _check_nchw(x, 'BilinearResize2D')
    if height <= 0 or width <= 0:
        raise ValueError(f"BilinearResize2D: the output size ({height}, {width}) of data "
                         f"{x.shape} must be positive")
    return _apply(x, _interpolation_matrix(x.shape[2], height, align_corners),
                  _interpolation_matrix(x.shape[3], width, align_corners))


def adaptive_avg_pool(x, height, width):
    """x (N, C, H, W) average-pooled to (N, C, height, width) by MXNet's adaptive bins."""
    _check_nchw(x, 'AdaptiveAvgPooling2D')
    if height <= 0 or width <= 0:
        raise ValueError(f"AdaptiveAvgPooling2D: the output size ({height}, {width}) of data "
                         f"{x.shape} must be positive")
    return _apply(x, _pooling_matrix(x.shape[2], height), _pooling_matrix(x.shape[3], width))
