"""Image decoding, resizing, cropping and normalising (MXNet's python/mxnet/image/image.py).

Images are HWC pymx arrays, uint8 when decoded, RGB unless to_rgb=False asks for OpenCV's BGR.
Decoding is recordio's Pillow decoder, which gives OpenCV's pixels (see pymx/recordio.py).
Interpolation codes are OpenCV's, as in MXNet: 0 nearest, 1 bilinear, 2 bicubic, 3 area,
4 Lanczos; the helpers that take `interp` also accept 9 (bicubic when enlarging, area when
shrinking, bilinear otherwise) and 10 (one of 0-4 at random).

Deliberate differences from MXNet 2.x:
- Results are new arrays: color_normalize does not modify `src` in place.
- fixed_crop raises ValueError for a box that is not inside the image (MXNet's slicing returns
  a smaller image). Bad images, sizes and codes raise ValueError naming them (MXNet: asserts or
  OpenCV errors); undecodable data raises ValueError (MXNet: an OpenCV error).
- imresize's bicubic, area and Lanczos results may differ from OpenCV's by one uint8 level
  (see _resample.py).
"""
import numbers
import os
import warnings

import numpy as onp

from .. import numpy as _np
from .. import numpy_extension as _npx
from .. import recordio
from ..device import cpu as _cpu
from . import _random
from ._resample import resample

__all__ = ["imread", "imdecode", "imresize", "resize_short", "fixed_crop", "center_crop",
           "random_crop", "random_size_crop", "scale_down", "color_normalize", "copyMakeBorder"]

_INTERP_CODES = (0, 1, 2, 3, 4)
_INTERP_AUTO, _INTERP_RANDOM = 9, 10
_NATIVE_INTERP = (0, 1)     # npx.image.resize; the others are _resample's


def _check_flag(flag, what):
    if flag not in (0, 1):
        raise ValueError(f"{what}: flag must be 0 (grayscale) or 1 (colour), got {flag!r}")


def _to_image(decoded, flag, to_rgb, out):
    """recordio's decoded OpenCV-ordered array as MXNet's imdecode returns it."""
    if flag == 0:
        decoded = decoded[:, :, None]
    elif to_rgb:
        decoded = decoded[:, :, ::-1]
    image = _np.array(onp.ascontiguousarray(decoded), dtype=onp.uint8, device=_cpu())
    if out is None:
        return image
    if tuple(out.shape) != image.shape or out.dtype != onp.uint8:
        raise ValueError(f"imdecode: out must be a uint8 array of shape {image.shape}, got "
                         f"{out.dtype} {tuple(out.shape)}")
    out[:] = image
    return out


def imdecode(buf, flag=1, to_rgb=True, out=None):
    """Decodes a JPEG or PNG image held in `buf` (bytes, bytearray, or a uint8 NumPy or pymx
    array of the encoded bytes) into an HWC uint8 array on the cpu: (H, W, 3), RGB (BGR with
    to_rgb=False), for flag=1; (H, W, 1) grayscale for flag=0. With `out`, the pixels are
    written there and out is returned."""
    _check_flag(flag, "imdecode")
    if isinstance(buf, _np.ndarray):
        buf = buf.asnumpy()
    if isinstance(buf, onp.ndarray):
        if buf.dtype != onp.uint8:
            raise ValueError(f"imdecode: an array buf must hold uint8 bytes, got {buf.dtype}")
        buf = buf.tobytes()
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise ValueError(f"imdecode: buf must be bytes, bytearray or a uint8 array, got "
                         f"{type(buf).__name__} (convert a str to bytes first)")
    decoded = recordio._decode(bytes(buf), flag, f"imdecode: the {len(buf)} bytes of buf")
    return _to_image(decoded, flag, to_rgb, out)


def imread(filename, flag=1, to_rgb=True, out=None):
    """Reads and decodes the image file `filename` (see imdecode). A missing file raises
    FileNotFoundError, one that is not an image ValueError, both naming the file."""
    _check_flag(flag, "imread")
    path = os.fspath(filename)
    with open(path, "rb") as image_file:
        payload = image_file.read()
    return _to_image(recordio._decode(payload, flag, f"imread: {path}"), flag, to_rgb, out)


def _check_image(src, what):
    if src.ndim != 3 or 0 in src.shape:
        raise ValueError(f"{what}: src must be a non-empty (height, width, channels) image, "
                         f"got shape {tuple(src.shape)}")


def _positive_size(w, h, what):
    for name, value in (("w", w), ("h", h)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
            raise ValueError(f"{what}: {name} must be a positive int, got {value!r}")
    return int(w), int(h)


def imresize(src, w, h, interp=1):
    """`src` (H, W, C) resized to (h, w, C), in its dtype. interp: OpenCV's code, 0 nearest,
    1 bilinear (the default), 2 bicubic, 3 area, 4 Lanczos."""
    _check_image(src, "imresize")
    w, h = _positive_size(w, h, "imresize")
    if interp not in _INTERP_CODES:
        raise ValueError(f"imresize: interp must be one of {_INTERP_CODES} (0 nearest, "
                         f"1 bilinear, 2 bicubic, 3 area, 4 Lanczos), got {interp!r}")
    if (h, w) == tuple(src.shape[:2]):
        return src.copy()
    if interp in _NATIVE_INTERP:
        return _npx.image.resize(src, size=(w, h), keep_ratio=False, interp=interp)
    return resample(src, w, h, interp)


def _get_interp_method(interp, sizes=()):
    """The OpenCV code (0-4) that `interp` stands for; sizes is (old_h, old_w, new_h, new_w)
    for the automatic choice 9."""
    if interp == _INTERP_AUTO:
        if not sizes:
            return 2
        old_h, old_w, new_h, new_w = sizes
        if new_h > old_h and new_w > old_w:
            return 2
        if new_h < old_h and new_w < old_w:
            return 3
        return 1
    if interp == _INTERP_RANDOM:
        return int(_random.generator().integers(0, 4, endpoint=True))
    if interp not in _INTERP_CODES:
        raise ValueError(f"Unknown interp method {interp!r}: expected 0-4, 9 (automatic) or "
                         f"10 (random)")
    return interp


def resize_short(src, size, interp=2):
    """Resizes `src` so that its shorter edge is `size`; the longer edge becomes
    size * long // short."""
    _check_image(src, "resize_short")
    h, w = src.shape[0], src.shape[1]
    if h > w:
        new_h, new_w = size * h // w, size
    else:
        new_h, new_w = size, size * w // h
    return imresize(src, new_w, new_h, interp=_get_interp_method(interp, (h, w, new_h, new_w)))


def fixed_crop(src, x0, y0, w, h, size=None, interp=2):
    """The w x h box of `src` whose top-left corner is (x0, y0), resized to size=(width,
    height) when given and different."""
    _check_image(src, "fixed_crop")
    out = _npx.image.crop(src, int(x0), int(y0), int(w), int(h))
    if size is not None and (w, h) != tuple(size):
        out = imresize(out, *size, interp=_get_interp_method(interp, (h, w, size[1], size[0])))
    return out


def scale_down(src_size, size):
    """The crop size (w, h) scaled down, keeping its aspect ratio, to fit an image of
    src_size (w, h)."""
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def random_crop(src, size, interp=2):
    """A crop of size (w, h) at a random position, scaled down to fit and resized up to size
    when src is smaller. Returns (image, (x0, y0, w, h) of the box in src)."""
    _check_image(src, "random_crop")
    h, w = src.shape[0], src.shape[1]
    new_w, new_h = scale_down((w, h), size)
    rng = _random.generator()
    x0 = int(rng.integers(0, w - new_w, endpoint=True))
    y0 = int(rng.integers(0, h - new_h, endpoint=True))
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def center_crop(src, size, interp=2):
    """The centred crop of size (w, h), scaled down to fit and resized up to size when src is
    smaller. Returns (image, (x0, y0, w, h) of the box in src)."""
    _check_image(src, "center_crop")
    h, w = src.shape[0], src.shape[1]
    new_w, new_h = scale_down((w, h), size)
    x0 = int((w - new_w) / 2)
    y0 = int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def random_size_crop(src, size, area, ratio, interp=2, **kwargs):
    """A random crop of area fraction drawn from `area` ((min, max), or a float min with max 1)
    and aspect ratio w/h drawn log-uniformly from `ratio`, resized to size (w, h); after ten
    draws that do not fit, the centre crop. Returns (image, (x0, y0, w, h)).
    `min_area` is the deprecated name of `area`."""
    _check_image(src, "random_size_crop")
    if "min_area" in kwargs:
        warnings.warn("`min_area` is deprecated. Please use `area` instead.",
                      DeprecationWarning, stacklevel=2)
        area = kwargs.pop("min_area")
    if kwargs:
        raise TypeError(f"random_size_crop: unexpected keyword arguments {sorted(kwargs)}")
    if isinstance(area, numbers.Real):
        area = (area, 1.0)
    h, w = src.shape[0], src.shape[1]
    rng = _random.generator()
    log_ratio = (onp.log(ratio[0]), onp.log(ratio[1]))
    for _ in range(10):
        target_area = rng.uniform(area[0], area[1]) * h * w
        new_ratio = onp.exp(rng.uniform(*log_ratio))
        new_w = int(round(onp.sqrt(target_area * new_ratio)))
        new_h = int(round(onp.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = int(rng.integers(0, w - new_w, endpoint=True))
            y0 = int(rng.integers(0, h - new_h, endpoint=True))
            return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)
    return center_crop(src, size, interp)


def color_normalize(src, mean, std=None):
    """(src - mean) / std, per channel for 3-value mean and std; either may be None."""
    if mean is not None:
        src = src - mean
    if std is not None:
        src = src / std
    return src


# OpenCV's border codes (cv::BorderTypes) and the np.pad mode of each
_BORDER_MODES = {1: "edge", 2: "symmetric", 3: "wrap", 4: "reflect"}
_BORDER_CONSTANT = 0


def _border_fill(values, value, channels, dtype):
    """The per-channel constant of BORDER_CONSTANT: `values` (up to 4, the rest 0, as a
    cv::Scalar), else `value` in every channel; saturated to an integer dtype."""
    fill = onp.zeros(channels)
    if len(values):
        if len(values) > 4:
            raise ValueError(f"copyMakeBorder: values holds at most 4 channel values, got "
                             f"{len(values)}")
        count = min(len(values), channels)
        fill[:count] = values[:count]
    else:
        fill[:] = value
    if onp.issubdtype(dtype, onp.integer):
        info = onp.iinfo(dtype)
        fill = onp.clip(onp.round(fill), info.min, info.max)
    return fill.astype(dtype)


def copyMakeBorder(src, top, bot, left, right, type=0, value=0.0, values=()):  # noqa: A002
    """Pads the HWC image with top/bot rows and left/right columns. type is OpenCV's border
    code: 0 constant (`values` per channel, else `value`), 1 replicate (aaa|abc), 2 reflect
    (cba|abc), 3 wrap (abc|abc), 4 reflect-101 (cb|abc)."""
    _check_image(src, "copyMakeBorder")
    widths = (top, bot, left, right)
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0 for v in widths):
        raise ValueError(f"copyMakeBorder: top, bot, left and right must be ints >= 0, got "
                         f"{widths}")
    pad_width = ((top, bot), (left, right), (0, 0))
    if type == _BORDER_CONSTANT:
        fill = _border_fill(tuple(values), value, src.shape[2], src.dtype)
        return _np.pad(src, pad_width, mode="constant") + _border_mask(src, pad_width, fill)
    if type not in _BORDER_MODES:
        raise ValueError(f"copyMakeBorder: type must be an OpenCV border code 0-4 (constant, "
                         f"replicate, reflect, wrap, reflect-101), got {type!r}")
    return _np.pad(src, pad_width, mode=_BORDER_MODES[type])


def _border_mask(src, pad_width, fill):
    """An array of src's padded shape holding `fill` in the border and 0 inside."""
    (top, bot), (left, right), _ = pad_width
    h, w, channels = src.shape
    border = onp.broadcast_to(fill, (h + top + bot, w + left + right, channels)).copy()
    border[top:top + h, left:left + w] = 0
    return _np.array(border, dtype=src.dtype, device=src.device)
