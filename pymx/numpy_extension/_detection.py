"""npx.multibox_prior, npx.multibox_target, npx.multibox_detection: the anchor boxes, training
targets and post-processing of SSD-style detectors, as MXNet's contrib MultiBoxPrior,
MultiBoxTarget and MultiBoxDetection. Each is one native operator (engine/src/ops/detection.cc
documents the algorithms; cuda/src/detection.cu runs them on GPUs). Boxes are corners
[xmin, ymin, xmax, ymax] in fractions of the image.

Their gradients are zeros for every input (as MXNet's), so recording them under autograd and
differentiating a loss that reads their outputs works and sends no gradient through them.

Deliberate differences from MXNet 1.9.1 (whose CPU kernels ignore the first two):
  - minimum_negative_samples raises the number of hard negatives (as MXNet's GPU kernel does);
  - background_id names the background class of cls_prob (MXNet always takes class 0);
  - when fewer anchors qualify as hard negatives than wanted, all that qualify are taken
    (MXNet fails);
  - a label row of class -1 ends the labels whatever its other values (MXNet fails unless they
    are -1 too);
  - sizes and ratios must be > 0, and every input of multibox_target and multibox_detection
    must share one float dtype (MXNet: float32 only).
"""
from pymx._op import invoke
from pymx.numpy_extension._shape_ops import _check_array

__all__ = ["multibox_prior", "multibox_target", "multibox_detection"]


def _floats(op, name, value):
    """A tuple of floats from a number or a sequence of numbers (tuple, list, NumPy array)."""
    values = tuple(value) if hasattr(value, "__len__") and not isinstance(value, str) else (value,)
    try:
        return tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {name} must be a number or a sequence of numbers, got "
                        f"{value!r}") from None


def multibox_prior(data, sizes=(1.0,), ratios=(1.0,), clip=False, steps=(-1.0, -1.0),
                   offsets=(0.5, 0.5)):
    """Anchor boxes for the feature map `data` (batch, channels, height, width), shape
    (1, height * width * (len(sizes) + len(ratios) - 1), 4).

    Per cell, row-major: one box per size at aspect ratio 1, then one box of size sizes[0] per
    further ratio; a box of size s and ratio r is s * height / width * sqrt(r) wide and
    s / sqrt(r) high, centred at ((col + offsets[1]) * steps[1], (row + offsets[0]) * steps[0]).
    steps (-1, -1) means (1 / height, 1 / width); clip=True clamps the corners to [0, 1].
    Only data's shape is read; the result has its dtype when that is a float, else float32.
    """
    _check_array("multibox_prior", "data", data)
    return invoke("multibox_prior", [data], {
        "sizes": _floats("multibox_prior", "sizes", sizes),
        "ratios": _floats("multibox_prior", "ratios", ratios), "clip": bool(clip),
        "steps": _floats("multibox_prior", "steps", steps),
        "offsets": _floats("multibox_prior", "offsets", offsets)})[0]


def multibox_target(anchor, label, cls_pred, overlap_threshold=0.5, ignore_label=-1.0,
                    negative_mining_ratio=-1.0, negative_mining_thresh=0.5,
                    minimum_negative_samples=0, variances=(0.1, 0.1, 0.2, 0.2)):
    """Training targets [loc_target (B, 4N), loc_mask (B, 4N), cls_target (B, N)] of the anchors
    `anchor` (1, N, 4) for the labels `label` (B, L, >= 5), rows [class, xmin, ymin, xmax, ymax]
    padded with rows of -1, given the class scores `cls_pred` (B, C, N) (used by hard negative
    mining only).

    Each label gets its best-overlapping anchor, then every anchor whose best IoU exceeds
    overlap_threshold is matched too; those are positives: cls_target = class + 1, loc_mask 1,
    loc_target the box offsets scaled by `variances`. With negative_mining_ratio > 0, the
    max(ratio * positives, minimum_negative_samples) anchors of best IoU below
    negative_mining_thresh with the lowest background probability are negatives (cls_target 0);
    without, every other anchor is. The rest get cls_target = ignore_label.
    """
    for name, value in (("anchor", anchor), ("label", label), ("cls_pred", cls_pred)):
        _check_array("multibox_target", name, value)
    return invoke("multibox_target", [anchor, label, cls_pred], {
        "overlap_threshold": float(overlap_threshold), "ignore_label": float(ignore_label),
        "negative_mining_ratio": float(negative_mining_ratio),
        "negative_mining_thresh": float(negative_mining_thresh),
        "minimum_negative_samples": int(minimum_negative_samples),
        "variances": _floats("multibox_target", "variances", variances)})


def multibox_detection(cls_prob, loc_pred, anchor, clip=True, threshold=0.01, background_id=0,
                       nms_threshold=0.5, force_suppress=False,
                       variances=(0.1, 0.1, 0.2, 0.2), nms_topk=-1):
    """Detections (B, N, 6), rows [class_id, score, xmin, ymin, xmax, ymax], from the class
    probabilities `cls_prob` (B, C, N), the box offsets `loc_pred` (B, 4N) and the anchors
    `anchor` (1, N, 4).

    Each anchor's best class other than background_id (ids renumbered without it) gives a row
    when its score reaches `threshold`; rows come first, sorted by descending score, and
    non-maximum suppression (IoU >= nms_threshold, within a class unless force_suppress) sets
    the class of the suppressed rows to -1; nms_topk > 0 keeps only that many before NMS.
    nms_threshold outside (0, 1] skips sorting and NMS. Unused rows are all -1.
    """
    for name, value in (("cls_prob", cls_prob), ("loc_pred", loc_pred), ("anchor", anchor)):
        _check_array("multibox_detection", name, value)
    return invoke("multibox_detection", [cls_prob, loc_pred, anchor], {
        "clip": bool(clip), "threshold": float(threshold), "background_id": int(background_id),
        "nms_threshold": float(nms_threshold), "force_suppress": bool(force_suppress),
        "variances": _floats("multibox_detection", "variances", variances),
        "nms_topk": int(nms_topk)})[0]
