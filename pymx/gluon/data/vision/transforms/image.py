"""Image transforms (MXNet python/mxnet/gluon/data/vision/transforms/image.py).

Images are pymx arrays, HWC (or NHWC where stated), usually uint8. Geometry and tensor
conversion use the ``npx.image`` operators; the colour jitters are composed from ``np`` ops with
the formulas of MXNet's src/operator/image/image_random-inl.h (brightness, contrast and
saturation through the ``npx.image.adjust_*`` ops; hue and lighting from ``np`` ops in float32).
uint8 results are rounded to nearest and clamped to [0, 255] (OpenCV's saturate_cast; MXNet's
own kernels truncate, which darkens every adjusted image by half a level on average).
Unlike MXNet, a negative jitter amount, and a RandomResizedCrop scale or ratio that is not
0 < low <= high, raise ValueError when the transform is made (MXNet draws from the reversed or
negative range, or fails on the first image with a NaN size).

Note [Random draws in transforms]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Random decisions (flip or not, jitter factors, crop boxes) are drawn on the host from NumPy's
global generator, so ``numpy.random.seed`` makes an augmentation reproducible, and each
DataLoader worker process reseeds it (dataloader.py). Because the draws happen in Python, these
blocks must not be traced by ``hybridize``: a trace would freeze one draw forever. The random
transforms are therefore plain Blocks, and Compose never hybridizes them.
"""
import numbers

import numpy as onp

from ..... import numpy as _np
from ..... import numpy_extension as _npx
from ....block import Block, HybridBlock

__all__ = ["ToTensor", "Normalize", "Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop",
           "CropResize", "RandomFlipLeftRight", "RandomFlipTopBottom", "RandomBrightness",
           "RandomContrast", "RandomSaturation", "RandomHue", "RandomColorJitter",
           "RandomLighting", "RandomGray", "adjust_brightness", "adjust_contrast",
           "adjust_saturation", "adjust_hue", "adjust_lighting"]

_GRAY_COEF = (0.299, 0.587, 0.114)      # ITU-R 601 luma, as MXNet's contrast/saturation
_RANDOM_GRAY_COEF = (0.2989, 0.5870, 0.1140)    # MXNet's RandomGray weights


def _pair(size):
    """(width, height) from an int or a (width, height) pair."""
    if isinstance(size, numbers.Integral):
        return int(size), int(size)
    width, height = size
    return int(width), int(height)


def _non_negative(transform, name, value):
    """`value`, checked to be a real number >= 0 (a jitter amount)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise ValueError(f"{transform}: {name} must be a number >= 0, got {value!r}")
    return value


def _positive_range(transform, name, bounds):
    """`bounds`, checked to be an ordered pair (low, high) with 0 < low <= high."""
    try:
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"{transform}: {name} must be a pair (low, high), got {bounds!r}") \
            from None
    if not 0 < low <= high:
        raise ValueError(f"{transform}: {name} must be a pair (low, high) with "
                         f"0 < low <= high, got {tuple(bounds)!r}")
    return low, high


def _hw(x):
    if x.ndim == 3:
        return x.shape[0], x.shape[1]
    if x.ndim == 4:
        return x.shape[1], x.shape[2]
    raise ValueError("Expected an image of shape (H, W, C) or a batch (N, H, W, C), but got "
                     "shape %s" % (x.shape,))


def _check_hwc(x, what):
    if x.ndim != 3 or x.shape[2] not in (1, 3):
        raise ValueError("%s: input image must have shape (height, width, channels) with 1 or 3 "
                         "channels, but got %s" % (what, x.shape))


def _saturate(value, like):
    """float32 results back to the image's dtype: uint8 is rounded to nearest and clamped to
    [0, 255] (OpenCV's saturate_cast, as the npx.image.adjust_* ops do); floats are kept."""
    if like.dtype == onp.uint8:
        return value.clip(0.0, 255.0).round().astype(onp.uint8)
    return value.astype(like.dtype)


def adjust_brightness(x, alpha):
    """x * alpha."""
    return _npx.image.adjust_brightness(x, alpha)


def adjust_contrast(x, alpha):
    """Blends x with the mean gray level of the whole image: x * alpha + (1 - alpha) * mean."""
    _check_hwc(x, "adjust_contrast")
    if x.shape[2] == 3:
        return _npx.image.adjust_contrast(x, alpha)
    xf = x.astype(onp.float32)        # one channel: its mean is the mean gray level
    return _saturate(xf * alpha + xf.mean() * (1.0 - alpha), x)


def adjust_saturation(x, alpha):
    """Blends every pixel with its own gray level: x * alpha + (1 - alpha) * gray.

    MXNet's kernel assigns instead of accumulating the weighted channels (its gray is the blue
    term alone); pymx uses the full luma, which is what the transform is documented to do."""
    _check_hwc(x, "adjust_saturation")
    if x.shape[2] == 1:
        return x.copy()
    return _npx.image.adjust_saturation(x, alpha)


def _yiq_hue_matrix(alpha):
    """3x3 matrix M with rgb_out = rgb_in @ M: rotate the chroma (I, Q) plane of YIQ by
    alpha * pi radians (mxnet.image.HueJitterAug)."""
    to_yiq = onp.array([[0.299, 0.587, 0.114],
                        [0.596, -0.274, -0.321],
                        [0.211, -0.523, 0.311]])
    from_yiq = onp.array([[1.0, 0.956, 0.621],
                          [1.0, -0.272, -0.647],
                          [1.0, -1.107, 1.705]])
    u, w = onp.cos(alpha * onp.pi), onp.sin(alpha * onp.pi)
    rotate = onp.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
    return (from_yiq @ rotate @ to_yiq).T.astype(onp.float32)


def adjust_hue(x, alpha):
    """Rotates the hue by alpha * 180 degrees in YIQ space; brightness (Y) is kept."""
    _check_hwc(x, "adjust_hue")
    if x.shape[2] == 1:
        return x.copy()
    matrix = _np.array(_yiq_hue_matrix(alpha), device=x.device)
    return _saturate(_np.matmul(x.astype(onp.float32), matrix), x)


# PCA lighting noise of AlexNet, as in MXNet's AdjustLightingImpl: eigenvalue * eigenvector.
_EIGVAL = onp.array([55.46, 4.794, 1.148])
_EIGVEC = onp.array([[-0.5675, 0.7192, 0.4009],
                     [-0.5808, -0.0045, -0.8140],
                     [-0.5836, -0.6948, 0.4203]])


def adjust_lighting(x, alpha):
    """Adds the AlexNet PCA colour offset ``eigvec @ (eigval * alpha)`` to every pixel;
    alpha holds one weight per principal component (R, G, B)."""
    _check_hwc(x, "adjust_lighting")
    if x.shape[2] == 1:
        return x.copy()
    offset = (_EIGVEC * _EIGVAL) @ onp.asarray(alpha, dtype=onp.float64)
    offset = _np.array(offset.astype(onp.float32), device=x.device)
    return _saturate(x.astype(onp.float32) + offset, x)


class ToTensor(HybridBlock):
    """(H, W, C) uint8 in [0, 255] -> (C, H, W) float32 in [0, 1], dividing by 255;
    a batch (N, H, W, C) -> (N, C, H, W)."""

    def forward(self, x):
        return _npx.image.to_tensor(x)


class Normalize(HybridBlock):
    """(x - mean[c]) / std[c] per channel of a (C, H, W) or (N, C, H, W) tensor; a scalar
    mean or std applies to every channel."""

    def __init__(self, mean=0.0, std=1.0):
        super().__init__()
        self._mean = mean
        self._std = std

    def forward(self, x):
        return _npx.image.normalize(x, mean=self._mean, std=self._std)


def resize_size(height, width, size, keep_ratio):
    """Output (width, height) of Resize for a height x width source (resize-inl.h:73-100)."""
    if isinstance(size, numbers.Integral):
        if not keep_ratio:
            return int(size), int(size)
        if height > width:
            return int(size), int(height * size / width)
        return int(width * size / height), int(size)
    return _pair(size)


class Resize(HybridBlock):
    """Resizes an (N)HWC image. ``size`` is an int or (width, height). With an int and
    keep_ratio=False the result is size x size; with keep_ratio=True the short edge becomes
    size and the long edge ``int(long * size / short)``. ``interpolation`` follows OpenCV's
    codes (0 nearest, 1 bilinear, 2 area, 3 bicubic)."""

    def __init__(self, size, keep_ratio=False, interpolation=1):
        super().__init__()
        self._size = size
        self._keep_ratio = keep_ratio
        self._interpolation = interpolation

    def forward(self, x):
        height, width = _hw(x)
        target = resize_size(height, width, self._size, self._keep_ratio)
        if target == (width, height):
            return x
        return _npx.image.resize(x, size=target, keep_ratio=False,
                                 interp=self._interpolation)


def _scale_down(src_w, src_h, w, h):
    """The largest (w, h) box with the requested aspect ratio that fits the source
    (MXNet's ScaleDown, whose second branch reassigns w before using it; fixed here)."""
    if src_h < h:
        w, h = w * src_h / h, src_h
    if src_w < w:
        w, h = src_w, h * src_w / w
    return int(w), int(h)


def _crop_resize(x, x0, y0, crop_w, crop_h, out_w, out_h, interpolation):
    out = _npx.image.crop(x, x0, y0, crop_w, crop_h)
    if (crop_w, crop_h) != (out_w, out_h):
        out = _npx.image.resize(out, size=(out_w, out_h), keep_ratio=False, interp=interpolation)
    return out


def _random_crop(x, xrange, yrange, width, height, interpolation):
    """MXNet's image.random_crop: a (width, height) box (scaled down to fit, keeping its
    aspect ratio, then resized up) whose left/top are fractions drawn from xrange/yrange of
    the free space."""
    src_h, src_w = _hw(x)
    crop_w, crop_h = _scale_down(src_w, src_h, width, height)
    x0 = int(onp.random.uniform(*xrange) * (src_w - crop_w))
    y0 = int(onp.random.uniform(*yrange) * (src_h - crop_h))
    return _crop_resize(x, x0, y0, crop_w, crop_h, width, height, interpolation)


class CenterCrop(HybridBlock):
    """Crops the centre (width x height; an int means a square). A source smaller than the
    crop gives the largest centred box of that aspect ratio, resized up to the crop size."""

    def __init__(self, size, interpolation=1):
        super().__init__()
        self._size = _pair(size)
        self._interpolation = interpolation

    def forward(self, x):
        return _random_crop(x, (0.5, 0.5), (0.5, 0.5), *self._size, self._interpolation)


class CropResize(HybridBlock):
    """Crops the box (x, y, width, height), then resizes it to ``size`` if given."""

    def __init__(self, x, y, width, height, size=None, interpolation=1):
        super().__init__()
        self._box = (int(x), int(y), int(width), int(height))
        self._size = None if size is None else _pair(size)
        self._interpolation = interpolation

    def forward(self, x):
        x0, y0, w, h = self._box
        out_w, out_h = self._size or (w, h)
        return _crop_resize(x, x0, y0, w, h, out_w, out_h, self._interpolation)


class RandomCrop(Block):
    """Crops a random (width x height) box, after padding each side by ``pad`` pixels (an int,
    or a NumPy-style pad width per axis) with ``pad_value``. See Note [Random draws in
    transforms]."""

    def __init__(self, size, pad=None, pad_value=0, interpolation=1):
        super().__init__()
        self._size = _pair(size)
        if isinstance(pad, numbers.Integral):
            pad = ((pad, pad), (pad, pad), (0, 0))
        self._pad = pad
        self._pad_value = pad_value
        self._interpolation = interpolation

    def forward(self, x):
        if self._pad:
            padded = onp.pad(x.asnumpy(), self._pad, mode="constant",
                             constant_values=self._pad_value)
            x = _np.array(padded, device=x.device)
        return _random_crop(x, (0.0, 1.0), (0.0, 1.0), *self._size, self._interpolation)


class RandomResizedCrop(Block):
    """Crops a random box of area fraction in ``scale`` and aspect ratio (w/h, drawn
    log-uniformly) in ``ratio``, resized to ``size``; after 10 failed draws, a centre crop.
    See Note [Random draws in transforms]."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation=1):
        super().__init__()
        self._size = _pair(size)
        self._scale = _positive_range("RandomResizedCrop", "scale", scale)
        self._ratio = _positive_range("RandomResizedCrop", "ratio", ratio)
        self._interpolation = interpolation

    def forward(self, x):
        src_h, src_w = _hw(x)
        width, height = self._size
        for _ in range(10):
            area = onp.random.uniform(*self._scale) * src_w * src_h
            ratio = onp.exp(onp.random.uniform(onp.log(self._ratio[0]), onp.log(self._ratio[1])))
            new_w = int(round(onp.sqrt(area * ratio)))
            new_h = int(round(onp.sqrt(area / ratio)))
            if 0 < new_w <= src_w and 0 < new_h <= src_h:
                x0 = int(onp.random.uniform(0, 1) * (src_w - new_w))
                y0 = int(onp.random.uniform(0, 1) * (src_h - new_h))
                return _crop_resize(x, x0, y0, new_w, new_h, width, height, self._interpolation)
        return _random_crop(x, (0.5, 0.5), (0.5, 0.5), width, height, self._interpolation)


class _RandomFlip(Block):
    def __init__(self, p=0.5):
        super().__init__()
        self._p = p

    def forward(self, x):
        if self._p <= 0:
            return x
        if self._p >= 1 or onp.random.uniform() < self._p:
            return self._flip(x)
        return x


class RandomFlipLeftRight(_RandomFlip):
    """Flips the image along its width with probability p. See Note [Random draws in
    transforms]."""

    @staticmethod
    def _flip(x):
        return _npx.image.flip_left_right(x)


class RandomFlipTopBottom(_RandomFlip):
    """Flips the image along its height with probability p. See Note [Random draws in
    transforms]."""

    @staticmethod
    def _flip(x):
        return _npx.image.flip_top_bottom(x)


class RandomBrightness(Block):
    """Multiplies by a factor drawn from [max(0, 1 - brightness), 1 + brightness]."""

    def __init__(self, brightness):
        super().__init__()
        brightness = _non_negative("RandomBrightness", "brightness", brightness)
        self._range = (max(0.0, 1.0 - brightness), 1.0 + brightness)

    def forward(self, x):
        return adjust_brightness(x, onp.random.uniform(*self._range))


class RandomContrast(Block):
    """Blends with the mean gray level, factor drawn from [max(0, 1 - contrast), 1 + contrast]."""

    def __init__(self, contrast):
        super().__init__()
        contrast = _non_negative("RandomContrast", "contrast", contrast)
        self._range = (max(0.0, 1.0 - contrast), 1.0 + contrast)

    def forward(self, x):
        return adjust_contrast(x, onp.random.uniform(*self._range))


class RandomSaturation(Block):
    """Blends with per-pixel gray, factor drawn from [max(0, 1 - saturation), 1 + saturation]."""

    def __init__(self, saturation):
        super().__init__()
        saturation = _non_negative("RandomSaturation", "saturation", saturation)
        self._range = (max(0.0, 1.0 - saturation), 1.0 + saturation)

    def forward(self, x):
        return adjust_saturation(x, onp.random.uniform(*self._range))


class RandomHue(Block):
    """Rotates the hue by alpha * 180 degrees, alpha drawn from [-hue, hue]."""

    def __init__(self, hue):
        super().__init__()
        self._hue = _non_negative("RandomHue", "hue", hue)

    def forward(self, x):
        return adjust_hue(x, onp.random.uniform(-self._hue, self._hue))


class RandomColorJitter(Block):
    """Applies brightness, contrast, saturation and hue jitter in a random order; each one
    whose amount v is > 0 uses factor 1 + U(-v, v) (hue: U(-v, v)), not clamped at 0, as in
    MXNet's RandomColorJitter kernel."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        self._amounts = tuple(
            _non_negative("RandomColorJitter", name, value) for name, value in
            (("brightness", brightness), ("contrast", contrast), ("saturation", saturation),
             ("hue", hue)))

    def forward(self, x):
        adjust = (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue)
        for which in onp.random.permutation(4):
            amount = self._amounts[which]
            if amount > 0:
                factor = onp.random.uniform(-amount, amount)
                x = adjust[which](x, factor if which == 3 else 1.0 + factor)
        return x


class RandomLighting(Block):
    """AlexNet-style PCA lighting noise with per-component weights drawn from N(0, alpha)."""

    def __init__(self, alpha):
        super().__init__()
        self._alpha = alpha

    def forward(self, x):
        if self._alpha <= 0:
            return x
        return adjust_lighting(x, onp.random.normal(0.0, self._alpha, 3))


class RandomGray(Block):
    """With probability p, replaces every channel of an (N)HWC RGB image by its luma
    0.2989 R + 0.5870 G + 0.1140 B; the result keeps the image's dtype (uint8 is rounded to
    nearest). One-channel images are already gray and are returned as they are.

    MXNet's RandomGray multiplies by a matrix whose columns are constant, which gives channel j
    the value coef[j] * (R + G + B) instead of the luma, and always returns float32; pymx gives
    the gray image the transform is named for and keeps the dtype as its other colour
    transforms do. See Note [Random draws in transforms]."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError("RandomGray: p must be in [0, 1], got %r" % (p,))
        self.p = p

    def forward(self, x):
        if x.ndim not in (3, 4) or x.shape[-1] not in (1, 3):
            raise ValueError("RandomGray: expected an image (H, W, C) or a batch (N, H, W, C) "
                             "with 1 or 3 channels, but got shape %s" % (x.shape,))
        if onp.random.uniform() >= self.p or x.shape[-1] == 1:
            return x
        # float64 images keep their precision; the others are weighted in float32
        dtype = onp.float64 if x.dtype == onp.float64 else onp.float32
        weights = _np.array(onp.array(_RANDOM_GRAY_COEF)[:, None], dtype=dtype, device=x.device)
        gray = _np.matmul(x.astype(dtype), weights)      # (..., 1)
        return _saturate(_np.broadcast_to(gray, x.shape), x)
