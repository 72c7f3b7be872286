"""npx.roi_pooling and npx.roi_align: features of regions of interest, pooled to a fixed size.

Each is one native operator (engine/src/ops/roi.cc, cuda/src/roi.cu) on every device,
differentiable with respect to data (rois get no gradient, as in MXNet) and traced by hybridize.
rois is (R, 5), rows [batch_index, x1, y1, x2, y2] in image coordinates, of data's dtype; the
result is (R, C, pooled_h, pooled_w).

Differences from MXNet: a batch index outside [0, N) raises (MXNet reads outside data), found
when the kernel runs, so it surfaces at the next wait; roi_align's region with a negative batch
index gives a whole output of 0 (MXNet zeroes only its first element).
"""
from pymx._op import invoke

__all__ = ["roi_pooling", "roi_align"]


def _as_tuple(pooled_size):
    return tuple(pooled_size) if isinstance(pooled_size, (tuple, list)) else (pooled_size,)


def roi_pooling(data, rois, pooled_size, spatial_scale):
    """Max pooling of each region of interest to pooled_size = (height, width) bins.

    The corners, scaled by spatial_scale, round half away from zero; the region spans at least
    one pixel and includes its end pixels. Bin (ph, pw) covers rows floor(ph * h / pooled_h) to
    ceil((ph + 1) * h / pooled_h) of it (likewise columns), clipped to the map; an empty bin gives
    0. The gradient goes to the pixel that gave each maximum.
    """
    attrs = {"pooled_size": _as_tuple(pooled_size), "spatial_scale": spatial_scale}
    return invoke("roi_pooling", [data, rois], attrs)[0]


def roi_align(data, rois, pooled_size, spatial_scale, sample_ratio=-1, position_sensitive=False,
              aligned=False):
    """ROI Align (MXNet's contrib ROIAlign): each of the pooled_size = (height, width) bins is the
    average of bilinear samples on a regular grid of sample_ratio x sample_ratio points
    (sample_ratio <= 0: ceil(bin extent) points per side), without rounding the region.

    aligned=True shifts the scaled region by -0.5 pixel (pixel centres at half-integers) and
    requires x2 > x1 and y2 > y1; otherwise a region smaller than a pixel is taken as 1 x 1.
    position_sensitive=True reads, for output channel c and bin (ph, pw), data channel
    (c * pooled_h + ph) * pooled_w + pw, so the output has C / (pooled_h * pooled_w) channels.
    A region with a negative batch index is skipped: its output is 0.
    """
    attrs = {"pooled_size": _as_tuple(pooled_size), "spatial_scale": spatial_scale,
             "sample_ratio": sample_ratio, "position_sensitive": position_sensitive,
             "aligned": aligned}
    return invoke("roi_align", [data, rois], attrs)[0]
