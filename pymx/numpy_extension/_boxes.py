"""npx.box_iou and npx.box_nms: overlaps and non-maximum suppression of bounding boxes.

Each is one native operator (engine/src/ops/bounding_box.cc, cuda/src/bounding_box.cu) on every
device and traced by hybridize. A box is 4 values: 'corner' [xmin, ymin, xmax, ymax] or 'center'
[x, y, width, height].

Differences from MXNet: box_nms converts every kept box to out_format (MXNet leaves a box whose
first coordinate is negative unconverted, as if it were a -1 row).
"""
from pymx._op import invoke

__all__ = ["box_iou", "box_nms"]


def box_iou(lhs, rhs, format="corner"):  # noqa: A002 (MXNet's parameter name)
    """Intersection over union of every pair: lhs (a..., 4) and rhs (b..., 4) give (a..., b...).
    Boxes that do not overlap give 0. No gradient flows to the boxes (MXNet passes zeros)."""
    return invoke("box_iou", [lhs, rhs], {"format": format})[0]


def box_nms(data, overlap_thresh=0.5, valid_thresh=0, topk=-1, coord_start=2, score_index=1,
            id_index=-1, background_id=-1, force_suppress=False, in_format="corner",
            out_format="corner"):
    """Non-maximum suppression over data (..., n, k): batches of n boxes of k values, a box being
    [id, score, x1, y1, x2, y2, ...] by default (score_index, coord_start, id_index say where).

    In each batch the boxes with score > valid_thresh (and, with id_index >= 0 and
    background_id >= 0, id != background_id) are sorted by descending score, equal scores in
    their order, and only the first topk (all when topk < 0) take part. Going down that list, a
    box not yet suppressed suppresses every later one whose IoU with it exceeds overlap_thresh
    (with id_index >= 0 and not force_suppress, only those of its class). The kept boxes fill
    the first rows in score order, their coordinates converted from in_format to out_format;
    the other rows are -1. topk=0 returns data unchanged. The gradient of an output row goes
    back to the input row it came from; suppressed rows get 0.
    """
    attrs = {"overlap_thresh": overlap_thresh, "valid_thresh": valid_thresh, "topk": topk,
             "coord_start": coord_start, "score_index": score_index, "id_index": id_index,
             "background_id": background_id, "force_suppress": force_suppress,
             "in_format": in_format, "out_format": out_format}
    return invoke("box_nms", [data], attrs)[0]
