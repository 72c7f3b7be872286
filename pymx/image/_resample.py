"""Bicubic, area and Lanczos resizing of HWC images with OpenCV's cv::resize formulas (MXNet's
imresize is cv::resize; its interp codes are OpenCV's: 2 cubic, 3 area, 4 Lanczos).
Nearest and bilinear resizing (codes 0 and 1) are the native npx.image.resize op.

Every one of these filters is separable, and its weights depend only on the sizes, so they are
built with NumPy as (out, in) matrices and applied as two matrix products:
out[c] = A_h @ x[c] @ A_w^T, in float32 (float64 for float64 images) on the image's device.
OpenCV computes uint8 bicubic and Lanczos results with fixed-point weights (11 fractional
bits), so pymx's, rounded from float32, may differ from them by one level.
"""
import numpy as onp

from .. import numpy as _np

CUBIC, AREA, LANCZOS = 2, 3, 4
_CUBIC_A = -0.75        # OpenCV's bicubic kernel parameter
_TAPS = {CUBIC: 4, LANCZOS: 8}


def _source_positions(size_in, size_out):
    """Pixel-centre mapping: the source coordinate of each output pixel, split into its floor
    and fraction."""
    position = (onp.arange(size_out) + 0.5) * (size_in / size_out) - 0.5
    start = onp.floor(position)
    return start.astype(onp.int64), position - start


def _cubic_weights(fraction):
    """(n, 4) weights of the taps at floor - 1 .. floor + 2."""
    a, x = _CUBIC_A, fraction
    w0 = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a
    w1 = ((a + 2) * x - (a + 3)) * x * x + 1
    w2 = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1
    return onp.stack([w0, w1, w2, 1 - w0 - w1 - w2], axis=1)


def _lanczos_weights(fraction):
    """(n, 8) weights of the taps at floor - 3 .. floor + 4: sinc(d) sinc(d / 4) at distance d,
    normalised to sum to one."""
    distance = fraction[:, None] + 3 - onp.arange(8)[None, :]
    weights = onp.sinc(distance) * onp.sinc(distance / 4)
    return weights / weights.sum(axis=1, keepdims=True)


def _tap_matrix(size_in, size_out, interp):
    """The (out, in) matrix of the cubic or Lanczos filter; taps beyond the edge read the edge
    pixel (OpenCV's replicated border)."""
    start, fraction = _source_positions(size_in, size_out)
    taps = _TAPS[interp]
    weights = _cubic_weights(fraction) if interp == CUBIC else _lanczos_weights(fraction)
    first = start - (taps // 2 - 1)
    columns = onp.clip(first[:, None] + onp.arange(taps)[None, :], 0, size_in - 1)
    matrix = onp.zeros((size_out, size_in))
    onp.add.at(matrix, (onp.repeat(onp.arange(size_out), taps), columns.ravel()), weights.ravel())
    return matrix


def _area_matrix(size_in, size_out):
    """Each output pixel is the mean of the source interval it covers, partly covered source
    pixels weighted by the covered fraction (the shrinking case of OpenCV's INTER_AREA)."""
    scale = size_in / size_out
    low = onp.arange(size_out)[:, None] * scale
    high = onp.minimum(low + scale, size_in)
    pixel = onp.arange(size_in)[None, :]
    overlap = onp.clip(onp.minimum(high, pixel + 1) - onp.maximum(low, pixel), 0, None)
    return overlap / (high - low)


def _area_linear_matrix(size_in, size_out):
    """INTER_AREA when an image is enlarged along some axis: OpenCV interpolates linearly
    between the two source pixels at floor(dst * scale), with a fraction that makes each output
    pixel the area-weighted blend of the two source pixels it straddles."""
    scale = size_in / size_out
    destination = onp.arange(size_out)
    start = onp.floor(destination * scale).astype(onp.int64)
    fraction = (destination + 1) - (start + 1) / scale
    fraction = onp.where(fraction <= 0, 0.0, fraction - onp.floor(fraction))
    at_end = start >= size_in - 1
    start = onp.where(at_end, size_in - 1, start)
    fraction = onp.where(at_end, 0.0, fraction)
    matrix = onp.zeros((size_out, size_in))
    onp.add.at(matrix, (destination, start), 1 - fraction)
    onp.add.at(matrix, (destination, onp.minimum(start + 1, size_in - 1)), fraction)
    return matrix


def _matrices(src_h, src_w, h, w, interp):
    if interp == AREA:
        if src_h >= h and src_w >= w:   # OpenCV averages only when no axis grows
            return _area_matrix(src_h, h), _area_matrix(src_w, w)
        return _area_linear_matrix(src_h, h), _area_linear_matrix(src_w, w)
    return _tap_matrix(src_h, h, interp), _tap_matrix(src_w, w, interp)


def resample(src, w, h, interp):
    """The HWC image `src` resized to (h, w, C) by filter `interp` (CUBIC, AREA or LANCZOS),
    in src's dtype (integer results rounded to nearest and saturated)."""
    src_h, src_w = src.shape[0], src.shape[1]
    rows, columns = _matrices(src_h, src_w, h, w, interp)
    compute = onp.float64 if src.dtype == onp.float64 else onp.float32
    rows = _np.array(rows, dtype=compute, device=src.device)
    columns_t = _np.array(columns.T, dtype=compute, device=src.device)
    planes = src.astype(compute).transpose(2, 0, 1)             # (C, H, W)
    out = _np.matmul(_np.matmul(rows, planes), columns_t).transpose(1, 2, 0)
    if onp.issubdtype(src.dtype, onp.integer):
        info = onp.iinfo(src.dtype)
        return out.round().clip(info.min, info.max).astype(src.dtype)
    return out.astype(src.dtype)
