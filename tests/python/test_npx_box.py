"""npx.box_iou and npx.box_nms against NumPy references of MXNet's semantics (checked against
MXNet 1.9.1's contrib box_iou and box_nms when they were written): both box formats, leading
dimensions, thresholds, topk, classes and background, force_suppress, format conversion, ties
in score, the gradient routed back to the kept rows; the errors; GPU against CPU."""
import numpy as onp
import pytest

import pymx
from pymx import autograd, npx
from pymx.ndarray import from_numpy
from pymx.test_utils import assert_almost_equal
from conftest import requires_gpu


# ---------------------------------------------------------------------------------------------
# References, in float64.
# ---------------------------------------------------------------------------------------------
def _corners(boxes, fmt):
    if fmt == "corner":
        return boxes[..., 0], boxes[..., 1], boxes[..., 2], boxes[..., 3]
    x, y, w, h = (boxes[..., k] for k in range(4))
    return x - w / 2, y - h / 2, x + w / 2, y + h / 2


def _area(boxes, fmt):
    if fmt == "corner":
        w, h = boxes[..., 2] - boxes[..., 0], boxes[..., 3] - boxes[..., 1]
    else:
        w, h = boxes[..., 2], boxes[..., 3]
    return onp.where((w < 0) | (h < 0), 0.0, w * h)


def _intersection(a, b, fmt):
    al, at, ar, ab = _corners(a, fmt)
    bl, bt, br, bb = _corners(b, fmt)
    w = onp.maximum(onp.minimum(ar, br) - onp.maximum(al, bl), 0)
    h = onp.maximum(onp.minimum(ab, bb) - onp.maximum(at, bt), 0)
    return w * h


def box_iou_reference(lhs, rhs, fmt="corner"):
    """(a..., b...): IoU of every pair, 0 where they do not overlap."""
    a = lhs.reshape(-1, 1, 4)
    b = rhs.reshape(1, -1, 4)
    inter = _intersection(a, b, fmt)
    with onp.errstate(invalid="ignore", divide="ignore"):
        iou = onp.where(inter > 0, inter / (_area(a, fmt) + _area(b, fmt) - inter), 0.0)
    return iou.reshape(lhs.shape[:-1] + rhs.shape[:-1])


def _convert(coords, fmt_from):
    if fmt_from == "corner":
        l, t, r, b = coords
        return [(l + r) / 2, (t + b) / 2, r - l, b - t]
    x, y, w, h = coords
    return [x - w / 2, y - h / 2, x + w / 2, y + h / 2]


def box_nms_reference(data, overlap_thresh=0.5, valid_thresh=0, topk=-1, coord_start=2,
                      score_index=1, id_index=-1, background_id=-1, force_suppress=False,
                      in_format="corner", out_format="corner"):
    """(out, record): record[..., i] is the input row of output row i, -1 for none."""
    shape = data.shape
    n, k = shape[-2:]
    batches = data.reshape(-1, n, k)
    out = onp.full(batches.shape, -1.0)
    record = onp.full(batches.shape[:2], -1, dtype=onp.int64)
    if topk == 0:
        return data.copy(), onp.broadcast_to(onp.arange(n), shape[:-1]).copy()
    for b, rows in enumerate(batches):
        valid = [i for i in range(n) if rows[i, score_index] > onp.float32(valid_thresh) and
                 (id_index < 0 or background_id < 0 or rows[i, id_index] != background_id)]
        order = sorted(valid, key=lambda i: -rows[i, score_index])  # stable: ties keep order
        if topk > 0:
            order = order[:topk]
        suppressed = [False] * len(order)
        for ref in range(len(order)):
            if suppressed[ref]:
                continue
            a = rows[order[ref]]
            for pos in range(ref + 1, len(order)):
                c = rows[order[pos]]
                if suppressed[pos] or not (force_suppress or id_index < 0 or
                                           int(a[id_index]) == int(c[id_index])):
                    continue
                box_a, box_c = a[coord_start:coord_start + 4], c[coord_start:coord_start + 4]
                inter = _intersection(box_a, box_c, in_format)
                with onp.errstate(invalid="ignore", divide="ignore"):
                    iou = inter / (_area(box_a, in_format) + _area(box_c, in_format) - inter)
                if iou > onp.float32(overlap_thresh):
                    suppressed[pos] = True
        kept = [order[pos] for pos in range(len(order)) if not suppressed[pos]]
        for slot, i in enumerate(kept):
            out[b, slot] = rows[i]
            if in_format != out_format:
                out[b, slot, coord_start:coord_start + 4] = _convert(
                    rows[i, coord_start:coord_start + 4], in_format)
            record[b, slot] = i
    return out.reshape(shape), record.reshape(shape[:-1])


def box_nms_grad_reference(head, record):
    n, k = head.shape[-2:]
    grad = onp.zeros(head.shape).reshape(-1, n, k)
    for b, rows in enumerate(record.reshape(-1, n)):
        for i, source in enumerate(rows):
            if source >= 0:
                grad[b, source] = head.reshape(-1, n, k)[b, i]
    return grad.reshape(head.shape)


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------
def random_boxes(shape, fmt="corner"):
    """Boxes in [0, 1) x [0, 1), many overlapping, a few inverted (empty)."""
    xy = onp.random.uniform(0, 1, size=shape + (2,))
    wh = onp.random.uniform(-0.05, 0.4, size=shape + (2,))
    if fmt == "corner":
        return onp.concatenate([xy, xy + wh], axis=-1)
    return onp.concatenate([xy, wh], axis=-1)


def detections(shape, num_classes=3, width=6):
    """Rows [id, score, x1, y1, x2, y2, extra...] with repeated scores (ties)."""
    ids = onp.random.randint(0, num_classes, size=shape + (1,)).astype(onp.float64)
    scores = onp.round(onp.random.uniform(-0.2, 1, size=shape + (1,)), 1)
    extra = onp.random.uniform(size=shape + (width - 6,))
    return onp.concatenate([ids, scores, random_boxes(shape), extra], axis=-1)


def test_box_iou_mxnet_example(device):
    x = from_numpy(onp.array([[0.5, 0.5, 1.0, 1.0], [0.0, 0.0, 0.5, 0.5]]), device=device)
    y = from_numpy(onp.array([[0.25, 0.25, 0.75, 0.75]]), device=device)
    assert_almost_equal(npx.box_iou(x, y), [[1 / 7], [1 / 7]], rtol=1e-12, atol=0)


@pytest.mark.parametrize("fmt", ["corner", "center"])
@pytest.mark.parametrize("lhs_shape,rhs_shape", [((5,), (7,)), ((2, 3), (4,)), ((3,), (2, 1, 2)),
                                                 ((0,), (3,)), ((2, 3), (0, 2))])
def test_box_iou_values(device, fmt, lhs_shape, rhs_shape):
    lhs, rhs = random_boxes(lhs_shape, fmt), random_boxes(rhs_shape, fmt)
    if lhs.size and rhs.size:  # a pair of equal boxes: IoU 1
        lhs.reshape(-1, 4)[0] = rhs.reshape(-1, 4)[0]
    want = box_iou_reference(lhs, rhs, fmt)
    got = npx.box_iou(from_numpy(lhs, device=device), from_numpy(rhs, device=device), format=fmt)
    assert got.shape == lhs_shape + rhs_shape == want.shape
    assert_almost_equal(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_box_iou_dtypes(device, dtype):
    lhs = from_numpy(random_boxes((6,)), dtype=dtype)
    rhs = from_numpy(random_boxes((5,)), dtype=dtype)
    want = box_iou_reference(lhs.asnumpy().astype(onp.float64), rhs.asnumpy().astype(onp.float64))
    got = npx.box_iou(lhs.copyto(device), rhs.copyto(device))
    assert got.dtype == lhs.dtype
    tolerance = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    assert_almost_equal(got.asnumpy().astype(onp.float64), want, rtol=tolerance, atol=tolerance)


def test_box_iou_passes_no_gradient(device):
    lhs, rhs = (from_numpy(random_boxes((3,)), device=device) for _ in range(2))
    for a in (lhs, rhs):
        a.attach_grad()
    with autograd.record():
        out = npx.box_iou(lhs, rhs) * 2
    out.backward()
    assert not lhs.grad.asnumpy().any() and not rhs.grad.asnumpy().any()


def test_box_nms_mxnet_example(device):
    x = onp.array([[0, 0.5, 0.1, 0.1, 0.2, 0.2], [1, 0.4, 0.1, 0.1, 0.2, 0.2],
                   [0, 0.3, 0.1, 0.1, 0.14, 0.14], [2, 0.6, 0.5, 0.5, 0.7, 0.8]])
    data = from_numpy(x, device=device)
    data.attach_grad()
    with autograd.record():
        out = npx.box_nms(data, overlap_thresh=0.1, coord_start=2, score_index=1, id_index=0,
                          force_suppress=True, in_format="corner", out_format="corner")
    out.backward(from_numpy(onp.array([[0.1] * 6, [0.2] * 6, [0.3] * 6, [0.4] * 6]),
                            device=device))
    assert_almost_equal(out, [[2, 0.6, 0.5, 0.5, 0.7, 0.8], [0, 0.5, 0.1, 0.1, 0.2, 0.2],
                              [-1] * 6, [-1] * 6], rtol=0, atol=0)
    assert_almost_equal(data.grad, [[0.2] * 6, [0] * 6, [0] * 6, [0.1] * 6], rtol=0, atol=0)


NMS_CASES = [
    {},
    dict(overlap_thresh=0.1, id_index=0),
    dict(overlap_thresh=0.3, id_index=0, force_suppress=True, topk=5),
    dict(overlap_thresh=0.2, id_index=0, background_id=1, valid_thresh=0.35),
    dict(topk=3, out_format="center"),
    dict(overlap_thresh=0.4, in_format="center", out_format="center", id_index=0),
    dict(overlap_thresh=0.4, in_format="center", out_format="corner"),
    dict(topk=0),
    dict(valid_thresh=2.0),  # nothing valid
]


@pytest.mark.parametrize("kwargs", NMS_CASES)
@pytest.mark.parametrize("shape", [(12,), (2, 9), (2, 1, 7)])
def test_box_nms_values_and_gradient(device, kwargs, shape):
    x = detections(shape)
    if kwargs.get("in_format") == "center":
        x[..., 2:6] = random_boxes(shape, "center")
    want, record = box_nms_reference(x, **kwargs)
    head = onp.random.uniform(-1, 1, size=x.shape)
    data = from_numpy(x, device=device)
    data.attach_grad()
    with autograd.record():
        out = npx.box_nms(data, **kwargs)
    out.backward(from_numpy(head, device=device))
    assert out.shape == x.shape
    assert_almost_equal(out, want, rtol=1e-12, atol=1e-15)
    assert_almost_equal(data.grad, box_nms_grad_reference(head, record), rtol=0, atol=0)


def test_box_nms_layouts(device):
    """Scores, ids and coordinates elsewhere in wider rows."""
    x = detections((10,), width=8)[:, [2, 3, 4, 5, 6, 1, 0, 7]]  # coords first, then score, id
    kwargs = dict(coord_start=0, score_index=4, id_index=5, overlap_thresh=0.2)
    want, _ = box_nms_reference(x, **kwargs)
    assert_almost_equal(npx.box_nms(from_numpy(x, device=device), **kwargs), want, rtol=0,
                        atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_box_nms_dtypes(device, dtype):
    x = from_numpy(detections((2, 10)), dtype=dtype)
    want, _ = box_nms_reference(x.asnumpy().astype(onp.float64), overlap_thresh=0.3, id_index=0)
    got = npx.box_nms(x.copyto(device), overlap_thresh=0.3, id_index=0)
    assert got.dtype == x.dtype
    assert_almost_equal(got.asnumpy().astype(onp.float64), want, rtol=0, atol=0)


def test_box_nms_empty(device):
    assert npx.box_nms(from_numpy(onp.zeros((0, 6)), device=device)).shape == (0, 6)
    assert npx.box_nms(from_numpy(onp.zeros((3, 0, 6)), device=device)).shape == (3, 0, 6)


def test_box_nms_nan_scores_are_not_valid(device):
    x = detections((6,))
    x[[1, 4], 1] = onp.nan
    want, _ = box_nms_reference(x)
    assert_almost_equal(npx.box_nms(from_numpy(x, device=device)), want, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
def test_box_iou_errors():
    boxes = from_numpy(onp.ones((3, 4)))
    with pytest.raises(ValueError, match=r"box_iou: rhs must have at least 2 dimensions and 4 "
                                         r"values per box \(\.\.\., 4\), got shape \(3, 5\)"):
        npx.box_iou(boxes, from_numpy(onp.ones((3, 5))))
    with pytest.raises(ValueError, match=r"box_iou: lhs .*got shape \(4,\)"):
        npx.box_iou(from_numpy(onp.ones(4)), boxes)
    with pytest.raises(ValueError, match="box_iou: format 'xywh' is not 'corner' or 'center'"):
        npx.box_iou(boxes, boxes, format="xywh")
    with pytest.raises(TypeError, match="int32"):
        npx.box_iou(from_numpy(onp.ones((3, 4), dtype=onp.int32)),
                    from_numpy(onp.ones((3, 4), dtype=onp.int32)))
    assert npx.box_iou(boxes, boxes).shape == (3, 3)  # still usable


def test_box_nms_errors():
    data = from_numpy(detections((4,)))
    with pytest.raises(ValueError, match=r"box_nms: each box needs at least 6 values .*data has 5 "
                                         r"\(shape \(4, 5\)\)"):
        npx.box_nms(from_numpy(onp.ones((4, 5))), id_index=5)
    with pytest.raises(ValueError, match=r"box_nms: score_index 3 is one of the coordinates "
                                         r"\[2, 5\]"):
        npx.box_nms(data, score_index=3)
    with pytest.raises(ValueError, match=r"box_nms: coordinates \[3, 6\] fall outside the box "
                                         r"width 6"):
        npx.box_nms(data, coord_start=3)
    with pytest.raises(ValueError, match="box_nms: id_index and score_index are both 1"):
        npx.box_nms(data, id_index=1)
    with pytest.raises(ValueError, match="box_nms: out_format 'xyxy' is not 'corner' or 'center'"):
        npx.box_nms(data, out_format="xyxy")
    with pytest.raises(ValueError, match=r"box_nms: data must have at least 2 dimensions.*\(6,\)"):
        npx.box_nms(from_numpy(onp.ones(6)))
    assert npx.box_nms(data).shape == (4, 6)  # still usable


# ---------------------------------------------------------------------------------------------
# GPU against CPU
# ---------------------------------------------------------------------------------------------
@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_gpu_box_iou_matches_cpu(dtype):
    lhs, rhs = random_boxes((40, 3)), random_boxes((70,))
    for fmt in ("corner", "center"):
        cpu, gpu = (npx.box_iou(from_numpy(lhs, dtype=dtype, device=d),
                                from_numpy(rhs, dtype=dtype, device=d), format=fmt).asnumpy()
                    for d in (pymx.cpu(0), pymx.gpu(0)))
        assert_almost_equal(gpu.astype(onp.float64), cpu.astype(onp.float64), rtol=1e-5,
                            atol=1e-6)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("kwargs", NMS_CASES)
def test_gpu_box_nms_matches_cpu(dtype, kwargs):
    """Hundreds of boxes per batch (many blocks' worth of threads), ties in score."""
    x = detections((3, 700))
    head = onp.random.uniform(-1, 1, size=x.shape)
    results = []
    for device in (pymx.cpu(0), pymx.gpu(0)):
        data = from_numpy(x, dtype=dtype, device=device)
        data.attach_grad()
        with autograd.record():
            out = npx.box_nms(data, **kwargs)
        out.backward(from_numpy(head, dtype=dtype, device=device))
        results.append((out.asnumpy(), data.grad.asnumpy()))
    for got, want in zip(results[1], results[0]):
        assert_almost_equal(got.astype(onp.float64), want.astype(onp.float64), rtol=0, atol=0)
