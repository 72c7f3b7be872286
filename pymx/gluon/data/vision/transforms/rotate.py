"""Rotation transforms: Rotate and RandomRotation (MXNet's transforms of the same names, which
rotate with ``mxnet.image.imrotate``).

Inputs are float tensors, (C, H, W) or a batch (N, C, H, W), as after ToTensor. The image is
rotated about its centre and keeps its shape; a positive angle turns the content
counter-clockwise as displayed (row 0 at the top), so 90 degrees is ``numpy.rot90`` over the
(H, W) axes. Each output pixel reads the source by bilinear interpolation with MXNet's
BilinearSampler semantics: a neighbour outside the image contributes zero.

Note [Bilinear rotation as a weighted gather]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Where each output pixel reads from depends only on the image size and the angle, never on the
pixel values, so the four source positions and weights of every output pixel are computed on
the host in float64. The device work is then one ``take`` (a gather, on CPU and GPU) of the four
neighbours from the image with a zero pixel appended (the target of out-of-image neighbours),
a multiply by the weights and a sum: every op is differentiable, so gradients reach the input.

Differences from MXNet: float16 and float64 inputs are accepted besides float32 (the result
keeps the input's dtype); ``zoom_in`` together with ``zoom_out`` is refused when the transform
is built rather than when it is first called.
"""
import numbers

import numpy as onp

from ..... import numpy as _np
from ....block import Block

__all__ = ["Rotate", "RandomRotation"]


def _zoom_scale(height, width, radians, zoom_in, zoom_out):
    """The factor applied to the sampling grid (MXNet's imrotate): below 1 zooms in until no
    padding shows, above 1 zooms out until the whole source shows; 1 without zoom."""
    if not (zoom_in or zoom_out):
        return 1.0
    diagonal = onp.hypot(height, width)
    corner_angle = onp.arctan(height / width)
    angle = abs(radians)
    # half-extents (doubled) of the rotated frame's bounding box
    extent_x = max(abs(diagonal * onp.cos(corner_angle + angle)),
                   abs(diagonal * onp.cos(corner_angle - angle)))
    extent_y = max(abs(diagonal * onp.sin(corner_angle + angle)),
                   abs(diagonal * onp.sin(corner_angle - angle)))
    if zoom_out:
        return max(extent_x / width, extent_y / height)
    return min(width / extent_x, height / extent_y)


def _bilinear_taps(height, width, radians, zoom_in, zoom_out):
    """(positions, weights), each of shape (4, height * width): the flat source positions of
    the four neighbours of every output pixel's sampling point, and their bilinear weights.
    A neighbour outside the image gets position height * width (the appended zero pixel)."""
    centre_y, centre_x = (height - 1) / 2.0, (width - 1) / 2.0
    out_y, out_x = onp.meshgrid(onp.arange(height) - centre_y, onp.arange(width) - centre_x,
                                indexing="ij")
    scale = _zoom_scale(height, width, radians, zoom_in, zoom_out)
    cos, sin = onp.cos(radians), onp.sin(radians)
    src_x = (out_x * cos - out_y * sin) * scale + centre_x
    src_y = (out_x * sin + out_y * cos) * scale + centre_y
    left, top = onp.floor(src_x), onp.floor(src_y)
    frac_x, frac_y = src_x - left, src_y - top
    positions, weights = [], []
    for dy, weight_y in ((0, 1.0 - frac_y), (1, frac_y)):
        for dx, weight_x in ((0, 1.0 - frac_x), (1, frac_x)):
            y, x = top + dy, left + dx
            inside = (y >= 0) & (y < height) & (x >= 0) & (x < width)
            positions.append(onp.where(inside, y * width + x, height * width))
            weights.append(weight_y * weight_x)
    return (onp.stack(positions).reshape(4, -1).astype(onp.int64),
            onp.stack(weights).reshape(4, -1))


def _angles(rotation_degrees, batch):
    """One angle in degrees per image, as a float64 array of length `batch`."""
    if isinstance(rotation_degrees, numbers.Real):
        return onp.full(batch, float(rotation_degrees))
    if isinstance(rotation_degrees, _np.ndarray):
        rotation_degrees = rotation_degrees.asnumpy()
    angles = onp.asarray(rotation_degrees, dtype=onp.float64).reshape(-1)
    if angles.size != batch:
        raise ValueError("rotate: got %d rotation angles for a batch of %d images; give one "
                         "angle, or one per image" % (angles.size, batch))
    return angles


def rotate(src, rotation_degrees, zoom_in=False, zoom_out=False):
    """Rotates a (C, H, W) image or an (N, C, H, W) batch by `rotation_degrees` (one number,
    or one per image of a batch) about the image centre. See the module docstring."""
    if zoom_in and zoom_out:
        raise ValueError("rotate: zoom_in and zoom_out cannot both be True")
    if onp.dtype(src.dtype).kind != "f":
        raise TypeError("rotate: the image must be a float tensor (C, H, W) or (N, C, H, W), "
                        "but its dtype is %s; apply ToTensor first" % onp.dtype(src.dtype).name)
    if src.ndim == 3:
        if not isinstance(rotation_degrees, numbers.Real):
            raise TypeError("rotate: a single image takes one rotation angle (a number), got "
                            "%r" % (rotation_degrees,))
        return rotate(_np.expand_dims(src, 0), rotation_degrees, zoom_in, zoom_out)[0]
    if src.ndim != 4:
        raise ValueError("rotate: expected an image (C, H, W) or a batch (N, C, H, W), but got "
                         "shape %s" % (src.shape,))
    batch, channels, height, width = src.shape
    angles = _angles(rotation_degrees, batch)
    pixels = height * width
    positions, weights = [], []
    for image, degrees in enumerate(angles):
        image_positions, image_weights = _bilinear_taps(height, width, onp.deg2rad(degrees),
                                                        zoom_in, zoom_out)
        # offset into the batch flattened to (batch * (pixels + 1)) rows, one zero pixel each
        positions.append(image_positions + image * (pixels + 1))
        weights.append(image_weights)
    positions = _np.array(onp.stack(positions), dtype=onp.int64, device=src.device)
    weights = _np.array(onp.stack(weights)[..., None], dtype=src.dtype, device=src.device)
    # See Note [Bilinear rotation as a weighted gather]: channel-last rows, plus a zero row.
    rows = _np.transpose(_np.reshape(src, (batch, channels, pixels)), (0, 2, 1))
    zero = _np.zeros((batch, 1, channels), dtype=src.dtype, device=src.device)
    rows = _np.reshape(_np.concatenate([rows, zero], axis=1), (batch * (pixels + 1), channels))
    taps = _np.take(rows, positions, axis=0)           # (batch, 4, pixels, channels)
    out = _np.sum(taps * weights, axis=1)               # (batch, pixels, channels)
    return _np.reshape(_np.transpose(out, (0, 2, 1)), (batch, channels, height, width))


class Rotate(Block):
    """Rotates a (C, H, W) or (N, C, H, W) float tensor by ``rotation_degrees`` (positive is
    counter-clockwise) about its centre, keeping its shape. ``zoom_in`` scales the image up
    so that no padding shows; ``zoom_out`` scales it down so that all of it shows."""

    def __init__(self, rotation_degrees, zoom_in=False, zoom_out=False):
        super().__init__()
        if zoom_in and zoom_out:
            raise ValueError("Rotate: zoom_in and zoom_out cannot both be True")
        self._args = (rotation_degrees, zoom_in, zoom_out)

    def forward(self, x):
        return rotate(x, *self._args)


class RandomRotation(Block):
    """With probability ``rotate_with_proba``, rotates by an angle drawn uniformly from
    ``angle_limits`` = (lower, upper) degrees; each image of a batch gets its own angle. See
    Rotate for ``zoom_in`` / ``zoom_out`` and Note [Random draws in transforms] (image.py)."""

    def __init__(self, angle_limits, zoom_in=False, zoom_out=False, rotate_with_proba=1.0):
        super().__init__()
        lower, upper = angle_limits
        if lower >= upper:
            raise ValueError("RandomRotation: angle_limits must be an ordered pair (lower, upper)"
                             " with lower < upper, got %s" % (tuple(angle_limits),))
        if not 0.0 <= rotate_with_proba <= 1.0:
            raise ValueError("RandomRotation: rotate_with_proba must be in [0, 1], got %r"
                             % (rotate_with_proba,))
        if zoom_in and zoom_out:
            raise ValueError("RandomRotation: zoom_in and zoom_out cannot both be True")
        self._limits = (float(lower), float(upper))
        self._zoom = (zoom_in, zoom_out)
        self._rotate_with_proba = rotate_with_proba

    def forward(self, x):
        if onp.random.random() > self._rotate_with_proba:
            return x
        if x.ndim == 4:
            degrees = onp.random.uniform(*self._limits, size=x.shape[0])
        else:
            degrees = onp.random.uniform(*self._limits)
        return rotate(x, degrees, *self._zoom)
