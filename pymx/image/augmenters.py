"""Image augmenters (MXNet's mx.image.Augmenter family) and CreateAugmenter.

An augmenter is a callable from an HWC image to an HWC image. Random ones draw as Note [Random
draws in pymx.image] (_random.py) describes, so pymx.random.seed makes them repeat.

Deliberate differences from MXNet 2.x:
- Augmenters return new arrays; MXNet's colour augmenters modify their input in place.
- The colour augmenters (brightness, contrast, saturation, hue, lighting, gray) compute in
  float32 (float64 for float64 images) and return the input's dtype, integer images rounded to
  nearest and saturated (MXNet's in-place arithmetic keeps the dtype too). CreateAugmenter casts
  to float32 before them, as in MXNet.
- RandomOrderAug draws a fresh order per call instead of shuffling its list in place.
- Bad arguments raise ValueError naming them (MXNet: asserts).
"""
import json
import numbers
import warnings

import numpy as onp

from .. import numpy as _np
from . import _random
from .image import (_get_interp_method, center_crop, color_normalize, imresize, random_crop,
                    random_size_crop, resize_short)

__all__ = ["Augmenter", "SequentialAug", "ResizeAug", "ForceResizeAug", "RandomCropAug",
           "RandomSizedCropAug", "CenterCropAug", "RandomOrderAug", "BrightnessJitterAug",
           "ContrastJitterAug", "SaturationJitterAug", "HueJitterAug", "ColorJitterAug",
           "LightingAug", "ColorNormalizeAug", "RandomGrayAug", "HorizontalFlipAug", "CastAug",
           "CreateAugmenter"]

_GRAY_COEF = (0.299, 0.587, 0.114)
# RGB -> YIQ and back, for HueJitterAug's rotation of the chroma plane
_TO_YIQ = onp.array([[0.299, 0.587, 0.114],
                     [0.596, -0.274, -0.321],
                     [0.211, -0.523, 0.311]])
_FROM_YIQ = onp.array([[1.0, 0.956, 0.621],
                       [1.0, -0.272, -0.647],
                       [1.0, -1.107, 1.705]])
# ImageNet's PCA lighting (AlexNet) and mean / std, CreateAugmenter's defaults
_PCA_EIGVAL = onp.array([55.46, 4.794, 1.148])
_PCA_EIGVEC = onp.array([[-0.5675, 0.7192, 0.4009],
                         [-0.5808, -0.0045, -0.8140],
                         [-0.5836, -0.6948, 0.4203]])
_IMAGENET_MEAN = (123.68, 116.28, 103.53)
_IMAGENET_STD = (58.395, 57.12, 57.375)


def _plain(value):
    """A JSON-friendly copy of an augmenter argument (arrays become lists)."""
    if isinstance(value, _np.ndarray):
        value = value.asnumpy()
    return value.tolist() if isinstance(value, onp.ndarray) else value


def _compute_dtype(src):
    return onp.float64 if src.dtype == onp.float64 else onp.float32


def _as_compute(src):
    return src.astype(_compute_dtype(src))


def _like(value, src):
    """A float result in src's dtype: integer dtypes rounded to nearest and saturated."""
    if onp.issubdtype(src.dtype, onp.integer):
        info = onp.iinfo(src.dtype)
        return value.round().clip(info.min, info.max).astype(src.dtype)
    return value.astype(src.dtype)


def _rgb(src, what):
    if src.ndim != 3 or src.shape[2] != 3:
        raise ValueError(f"{what}: expected an RGB image (height, width, 3), got shape "
                         f"{tuple(src.shape)}")


def _non_negative(what, name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise ValueError(f"{what}: {name} must be a number >= 0, got {value!r}")
    return value


def _probability(what, p):
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p <= 1:
        raise ValueError(f"{what}: p must be a probability in [0, 1], got {p!r}")
    return p


class Augmenter:
    """Base class: keeps its keyword arguments for `dumps`; subclasses define __call__."""

    def __init__(self, **kwargs):
        self._kwargs = {name: _plain(value) for name, value in kwargs.items()}

    def dumps(self):
        """A JSON string [class name in lower case, arguments]."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, src):
        raise NotImplementedError(f"{type(self).__name__} must define __call__")


class SequentialAug(Augmenter):
    """Applies the augmenters `ts` in order."""

    def __init__(self, ts):
        super().__init__()
        self.ts = list(ts)

    def dumps(self):
        return [self.__class__.__name__.lower(), [t.dumps() for t in self.ts]]

    def __call__(self, src):
        for aug in self.ts:
            src = aug(src)
        return src


class RandomOrderAug(SequentialAug):
    """Applies the augmenters `ts` in a random order."""

    def __call__(self, src):
        for which in _random.generator().permutation(len(self.ts)):
            src = self.ts[which](src)
        return src


class ResizeAug(Augmenter):
    """Resizes the shorter edge to `size` (see resize_short)."""

    def __init__(self, size, interp=2):
        super().__init__(size=size, interp=interp)
        self.size = size
        self.interp = interp

    def __call__(self, src):
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(Augmenter):
    """Resizes to size (width, height), whatever the aspect ratio."""

    def __init__(self, size, interp=2):
        super().__init__(size=size, interp=interp)
        self.size = size
        self.interp = interp

    def __call__(self, src):
        sizes = (src.shape[0], src.shape[1], self.size[1], self.size[0])
        return imresize(src, *self.size, interp=_get_interp_method(self.interp, sizes))


class RandomCropAug(Augmenter):
    """A random crop of size (width, height) (see random_crop)."""

    def __init__(self, size, interp=2):
        super().__init__(size=size, interp=interp)
        self.size = size
        self.interp = interp

    def __call__(self, src):
        return random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    """A crop of random area and aspect ratio resized to size (see random_size_crop)."""

    def __init__(self, size, area, ratio, interp=2, **kwargs):
        if "min_area" in kwargs:
            warnings.warn("`min_area` is deprecated. Please use `area` instead.",
                          DeprecationWarning, stacklevel=2)
            area = kwargs.pop("min_area")
        if kwargs:
            raise TypeError(f"RandomSizedCropAug: unexpected keyword arguments {sorted(kwargs)}")
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)
        self.size = size
        self.area = area
        self.ratio = ratio
        self.interp = interp

    def __call__(self, src):
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp)[0]


class CenterCropAug(Augmenter):
    """The centre crop of size (width, height) (see center_crop)."""

    def __init__(self, size, interp=2):
        super().__init__(size=size, interp=interp)
        self.size = size
        self.interp = interp

    def __call__(self, src):
        return center_crop(src, self.size, self.interp)[0]


class BrightnessJitterAug(Augmenter):
    """src * (1 + U(-brightness, brightness))."""

    def __init__(self, brightness):
        super().__init__(brightness=brightness)
        self.brightness = _non_negative("BrightnessJitterAug", "brightness", brightness)

    def __call__(self, src):
        alpha = 1.0 + _random.generator().uniform(-self.brightness, self.brightness)
        return _like(_as_compute(src) * alpha, src)


class ContrastJitterAug(Augmenter):
    """src * alpha + (1 - alpha) * the image's mean gray level, alpha = 1 + U(-c, c)."""

    def __init__(self, contrast):
        super().__init__(contrast=contrast)
        self.contrast = _non_negative("ContrastJitterAug", "contrast", contrast)

    def __call__(self, src):
        _rgb(src, "ContrastJitterAug")
        alpha = 1.0 + _random.generator().uniform(-self.contrast, self.contrast)
        x = _as_compute(src)
        coef = _np.array(_GRAY_COEF, dtype=x.dtype, device=x.device)
        mean_gray = (x * coef).sum() * (3.0 / x.size)
        return _like(x * alpha + mean_gray * (1.0 - alpha), src)


class SaturationJitterAug(Augmenter):
    """src * alpha + (1 - alpha) * each pixel's gray level, alpha = 1 + U(-s, s)."""

    def __init__(self, saturation):
        super().__init__(saturation=saturation)
        self.saturation = _non_negative("SaturationJitterAug", "saturation", saturation)

    def __call__(self, src):
        _rgb(src, "SaturationJitterAug")
        alpha = 1.0 + _random.generator().uniform(-self.saturation, self.saturation)
        x = _as_compute(src)
        coef = _np.array(_GRAY_COEF, dtype=x.dtype, device=x.device)
        gray = (x * coef).sum(axis=2, keepdims=True)
        return _like(x * alpha + gray * (1.0 - alpha), src)


def _hue_matrix(alpha):
    """rgb_out = rgb_in @ M rotates the YIQ chroma plane by alpha * pi radians."""
    u, w = onp.cos(alpha * onp.pi), onp.sin(alpha * onp.pi)
    rotate = onp.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
    return (_FROM_YIQ @ rotate @ _TO_YIQ).T


class HueJitterAug(Augmenter):
    """Rotates the hue by alpha * 180 degrees in YIQ space, alpha = U(-hue, hue)."""

    def __init__(self, hue):
        super().__init__(hue=hue)
        self.hue = _non_negative("HueJitterAug", "hue", hue)

    def __call__(self, src):
        _rgb(src, "HueJitterAug")
        alpha = _random.generator().uniform(-self.hue, self.hue)
        x = _as_compute(src)
        matrix = _np.array(_hue_matrix(alpha), dtype=x.dtype, device=x.device)
        return _like(_np.matmul(x, matrix), src)


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter (those > 0) in a random order."""

    def __init__(self, brightness, contrast, saturation):
        ts = []
        if brightness > 0:
            ts.append(BrightnessJitterAug(brightness))
        if contrast > 0:
            ts.append(ContrastJitterAug(contrast))
        if saturation > 0:
            ts.append(SaturationJitterAug(saturation))
        super().__init__(ts)


class LightingAug(Augmenter):
    """Adds the PCA colour offset (eigvec * alpha) @ eigval, alpha ~ N(0, alphastd) per
    component."""

    def __init__(self, alphastd, eigval, eigvec):
        super().__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)
        self.alphastd = _non_negative("LightingAug", "alphastd", alphastd)
        self.eigval = onp.asarray(_plain(eigval), dtype=onp.float64)
        self.eigvec = onp.asarray(_plain(eigvec), dtype=onp.float64)
        if self.eigval.shape != (3,) or self.eigvec.shape != (3, 3):
            raise ValueError(f"LightingAug: eigval must have shape (3,) and eigvec (3, 3), got "
                             f"{self.eigval.shape} and {self.eigvec.shape}")

    def __call__(self, src):
        _rgb(src, "LightingAug")
        alpha = _random.generator().normal(0.0, self.alphastd, size=3)
        rgb = (self.eigvec * alpha) @ self.eigval
        x = _as_compute(src)
        return _like(x + _np.array(rgb, dtype=x.dtype, device=x.device), src)


def _channel_values(value, what, name):
    """None, or `value` (a number or 1 or 3 per-channel values) as a float32 NumPy array."""
    if value is None:
        return None
    array = onp.asarray(_plain(value), dtype=onp.float32).reshape(-1)
    if array.size not in (1, 3):
        raise ValueError(f"{what}: {name} must hold 1 or 3 values (one per RGB channel), got "
                         f"{array.size}")
    return array


class ColorNormalizeAug(Augmenter):
    """(src - mean) / std per channel (see color_normalize)."""

    def __init__(self, mean, std):
        super().__init__(mean=mean, std=std)
        self.mean = _channel_values(mean, "ColorNormalizeAug", "mean")
        self.std = _channel_values(std, "ColorNormalizeAug", "std")

    def __call__(self, src):
        def on_device(values):
            return None if values is None else _np.array(values, device=src.device)
        return color_normalize(src, on_device(self.mean), on_device(self.std))


class RandomGrayAug(Augmenter):
    """With probability p, every channel becomes 0.21 R + 0.72 G + 0.07 B (the image keeps
    its three channels)."""

    _MIX = onp.array([[0.21, 0.21, 0.21], [0.72, 0.72, 0.72], [0.07, 0.07, 0.07]])

    def __init__(self, p):
        super().__init__(p=p)
        self.p = _probability("RandomGrayAug", p)

    def __call__(self, src):
        if _random.generator().random() >= self.p:
            return src
        _rgb(src, "RandomGrayAug")
        x = _as_compute(src)
        return _like(_np.matmul(x, _np.array(self._MIX, dtype=x.dtype, device=x.device)), src)


class HorizontalFlipAug(Augmenter):
    """Flips left-right with probability p."""

    def __init__(self, p):
        super().__init__(p=p)
        self.p = _probability("HorizontalFlipAug", p)

    def __call__(self, src):
        if _random.generator().random() < self.p:
            return _np.flip(src, axis=1)
        return src


class CastAug(Augmenter):
    """Casts to `typ` (float32 by default)."""

    def __init__(self, typ="float32"):
        super().__init__(type=typ)
        self.typ = typ

    def __call__(self, src):
        return src.astype(self.typ)


def _data_shape(data_shape, what):
    shape = tuple(data_shape) if isinstance(data_shape, (tuple, list)) else None
    if shape is None or len(shape) != 3 or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and d > 0
            for d in shape):
        raise ValueError(f"{what}: data_shape must be (channels, height, width) of positive "
                         f"ints, got {data_shape!r}")
    return tuple(int(d) for d in shape)


def CreateAugmenter(data_shape, resize=0, rand_crop=False, rand_resize=False, rand_mirror=False,
                    mean=None, std=None, brightness=0, contrast=0, saturation=0, hue=0,
                    pca_noise=0, rand_gray=0, inter_method=2):
    """The standard augmenter list for images of data_shape (C, H, W), in this order: resize
    the shorter edge (resize > 0); crop to (W, H): random-sized (rand_resize, needs rand_crop),
    random (rand_crop) or centred; flip (rand_mirror); cast to float32; colour jitter
    (brightness, contrast, saturation in random order); hue; PCA lighting noise (pca_noise);
    random gray (rand_gray); normalise (mean / std: arrays of 1 or 3 values, or True for
    ImageNet's)."""
    _, h, w = _data_shape(data_shape, "CreateAugmenter")
    auglist = []
    if resize > 0:
        auglist.append(ResizeAug(resize, inter_method))
    crop_size = (w, h)
    if rand_resize:
        if not rand_crop:
            raise ValueError("CreateAugmenter: rand_resize=True needs rand_crop=True")
        auglist.append(RandomSizedCropAug(crop_size, 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method))
    elif rand_crop:
        auglist.append(RandomCropAug(crop_size, inter_method))
    else:
        auglist.append(CenterCropAug(crop_size, inter_method))
    if rand_mirror:
        auglist.append(HorizontalFlipAug(0.5))
    auglist.append(CastAug())
    if brightness or contrast or saturation:
        auglist.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        auglist.append(HueJitterAug(hue))
    if pca_noise > 0:
        auglist.append(LightingAug(pca_noise, _PCA_EIGVAL, _PCA_EIGVEC))
    if rand_gray > 0:
        auglist.append(RandomGrayAug(rand_gray))
    if mean is True:
        mean = _IMAGENET_MEAN
    if std is True:
        std = _IMAGENET_STD
    if mean is not None or std is not None:
        auglist.append(ColorNormalizeAug(mean, std))
    return auglist
