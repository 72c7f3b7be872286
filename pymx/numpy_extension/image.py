"""npx.image: image operators for data pipelines (MXNet's mx.npx.image).

Images are HWC arrays (uint8 or float) and batches NHWC, except normalize, which takes the
CHW / NCHW float output of to_tensor. engine/src/ops/image.cc has the exact semantics.
The random_* helpers draw their decision or factor on the host with Python's `random` module,
so they are cheap per-sample calls in DataLoader workers.
"""
import random as _host_random

from pymx._op import invoke

__all__ = ["to_tensor", "normalize", "resize", "crop", "flip_left_right", "flip_top_bottom",
           "random_flip_left_right", "random_flip_top_bottom", "adjust_brightness",
           "adjust_contrast", "adjust_saturation", "random_brightness", "random_contrast",
           "random_saturation"]


def _one(op, data, attrs=None):
    return invoke(op, [data], attrs)[0]


def to_tensor(data):
    """HWC (or NHWC) in [0, 255] -> CHW (NCHW) float32 in [0, 1]."""
    return _one("image_to_tensor", data)


def _as_tuple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def normalize(data, mean=0.0, std=1.0):
    """(data - mean_c) / std_c per channel of a CHW image or NCHW batch; mean/std are scalars
    or one value per channel."""
    return _one("image_normalize", data, {"mean": _as_tuple(mean), "std": _as_tuple(std)})


def resize(data, size, keep_ratio=False, interp=1):
    """Resizes HWC/NHWC data. size: (width, height), or an int: size x size, or with
    keep_ratio the short edge becomes `size`. interp: 1 bilinear (OpenCV INTER_LINEAR), 0 nearest."""
    return _one("image_resize", data, {"size": _as_tuple(size), "keep_ratio": keep_ratio,
                                       "interp": interp})


def crop(data, x, y, width, height):
    """The width x height box whose top-left corner is (x, y)."""
    return _one("image_crop", data, {"x": x, "y": y, "width": width, "height": height})


def flip_left_right(data):
    return _one("image_flip_left_right", data)


def flip_top_bottom(data):
    return _one("image_flip_top_bottom", data)


def random_flip_left_right(data, p=0.5):
    """Flips with probability p."""
    return flip_left_right(data) if _host_random.random() < p else data


def random_flip_top_bottom(data, p=0.5):
    """Flips with probability p."""
    return flip_top_bottom(data) if _host_random.random() < p else data


def adjust_brightness(data, factor):
    """data * factor (integer dtypes are rounded and saturated)."""
    return _one("image_adjust_brightness", data, {"factor": factor})


def adjust_contrast(data, factor):
    """data * factor + mean_gray * (1 - factor), mean_gray over each RGB image."""
    return _one("image_adjust_contrast", data, {"factor": factor})


def adjust_saturation(data, factor):
    """data * factor + gray * (1 - factor), gray per RGB pixel."""
    return _one("image_adjust_saturation", data, {"factor": factor})


def random_brightness(data, min_factor, max_factor):
    return adjust_brightness(data, _host_random.uniform(min_factor, max_factor))


def random_contrast(data, min_factor, max_factor):
    return adjust_contrast(data, _host_random.uniform(min_factor, max_factor))


def random_saturation(data, min_factor, max_factor):
    return adjust_saturation(data, _host_random.uniform(min_factor, max_factor))
