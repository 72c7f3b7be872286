"""npx.multibox_prior, npx.multibox_target and npx.multibox_detection against float64 NumPy
references of MXNet's algorithms (engine/src/ops/detection.cc), outputs MXNet 1.9.1 produced for
the same inputs, the zero gradients, the errors, GPU against CPU, and a small SSD that trains one
step and decodes its detections."""

import numpy as onp
import pytest

import pymx
from pymx import autograd, gluon, np, npx
from pymx.gluon import nn
from pymx.ndarray import from_numpy
from pymx.test_utils import assert_almost_equal
from conftest import requires_gpu

VARIANCES = (0.1, 0.1, 0.2, 0.2)


# ---------------------------------------------------------------------------------------------
# float64 references
# ---------------------------------------------------------------------------------------------
def prior_reference(height, width, sizes, ratios, clip=False, steps=(-1, -1), offsets=(0.5, 0.5)):
    if steps[0] <= 0 or steps[1] <= 0:
        steps = (1 / height, 1 / width)
    shapes = [(s, 1.0) for s in sizes] + [(sizes[0], r) for r in ratios[1:]]
    boxes = []
    for row in range(height):
        for col in range(width):
            cy, cx = (row + offsets[0]) * steps[0], (col + offsets[1]) * steps[1]
            for size, ratio in shapes:
                half_w = size * height / width * onp.sqrt(ratio) / 2
                half_h = size / onp.sqrt(ratio) / 2
                boxes.append([cx - half_w, cy - half_h, cx + half_w, cy + half_h])
    out = onp.array(boxes).reshape(1, -1, 4)
    return onp.clip(out, 0, 1) if clip else out


def iou_matrix(a, b):
    """IoU of every box of a (n, 4) with every box of b (m, 4); 0 where the union is not > 0.
    Computed in the inputs' dtype with the operators' order of operations: boxes of one size
    inside a label box tie in exact arithmetic, and rounding decides which comes first."""
    a, b = a[:, None], b[None, :]
    w = onp.maximum(0, onp.minimum(a[..., 2], b[..., 2]) - onp.maximum(a[..., 0], b[..., 0]))
    h = onp.maximum(0, onp.minimum(a[..., 3], b[..., 3]) - onp.maximum(a[..., 1], b[..., 1]))
    inter = w * h
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    union = area_a + area_b - inter
    return onp.where(union <= 0, 0.0, inter / onp.where(union <= 0, 1.0, union))


def encode(anchor, box, variances):
    aw, ah = anchor[2] - anchor[0], anchor[3] - anchor[1]
    ax, ay = (anchor[0] + anchor[2]) / 2, (anchor[1] + anchor[3]) / 2
    gw, gh = box[2] - box[0], box[3] - box[1]
    gx, gy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return [(gx - ax) / aw / variances[0], (gy - ay) / ah / variances[1],
            onp.log(gw / aw) / variances[2], onp.log(gh / ah) / variances[3]]


def target_reference(anchor, label, cls_pred, overlap_threshold=0.5, ignore_label=-1.0,
                     negative_mining_ratio=-1.0, negative_mining_thresh=0.5,
                     minimum_negative_samples=0, variances=VARIANCES):
    dtype = anchor.dtype.type  # the IoUs and their comparisons in the operator's precision
    anchors = anchor[0]
    batch, n = label.shape[0], anchors.shape[0]
    loc = onp.zeros((batch, n, 4))
    mask = onp.zeros((batch, n, 4))
    cls = onp.full((batch, n), float(ignore_label))
    for b in range(batch):
        num_gt = 0
        while num_gt < label.shape[1] and label[b, num_gt, 0] != -1:
            num_gt += 1
        if num_gt == 0:
            continue
        gt = label[b, :num_gt]
        iou = iou_matrix(anchors, gt[:, 1:5])
        positive, matched = onp.zeros(n, bool), onp.zeros(num_gt, bool)
        match = onp.full(n, -1)
        for _ in range(num_gt):  # bipartite: the best remaining pair, anchor-major among equals
            remaining = onp.where(positive[:, None] | matched[None, :], -1.0, iou)
            j, k = onp.unravel_index(onp.argmax(remaining), remaining.shape)
            if remaining[j, k] <= dtype(1e-6):
                break
            positive[j], matched[k], match[j] = True, True, k
        if overlap_threshold > 0:
            extra = ~positive & (iou.max(axis=1) > dtype(overlap_threshold))
            match[extra] = iou.argmax(axis=1)[extra]
            positive |= extra
        if negative_mining_ratio > 0:
            num_positive = int(positive.sum())
            wanted = int(onp.float32(num_positive) * onp.float32(negative_mining_ratio))
            wanted = min(max(wanted, minimum_negative_samples), n - num_positive)
            logits = cls_pred[b].astype(onp.float64)
            exp = onp.exp(logits - logits.max(axis=0))
            background = exp[0] / exp.sum(axis=0)
            candidates = ~positive & (iou.max(axis=1) < dtype(negative_mining_thresh))
            order = [j for j in onp.argsort(background, kind="stable") if candidates[j]]
            negative = onp.zeros(n, bool)
            negative[order[:wanted]] = True
        else:
            negative = ~positive
        cls[b, negative] = 0
        for j in onp.flatnonzero(positive):
            cls[b, j] = gt[match[j], 0] + 1
            mask[b, j] = 1
            loc[b, j] = encode(anchors[j].astype(onp.float64),
                               gt[match[j], 1:5].astype(onp.float64), variances)
    return loc.reshape(batch, -1), mask.reshape(batch, -1), cls


def decode(anchor, pred, variances, clip):
    aw, ah = anchor[2] - anchor[0], anchor[3] - anchor[1]
    ax, ay = (anchor[0] + anchor[2]) / 2, (anchor[1] + anchor[3]) / 2
    ox, oy = pred[0] * variances[0] * aw + ax, pred[1] * variances[1] * ah + ay
    half_w = onp.exp(pred[2] * variances[2]) * aw / 2
    half_h = onp.exp(pred[3] * variances[3]) * ah / 2
    box = onp.array([ox - half_w, oy - half_h, ox + half_w, oy + half_h])
    return onp.clip(box, 0, 1) if clip else box


def detection_reference(cls_prob, loc_pred, anchor, clip=True, threshold=0.01, background_id=0,
                        nms_threshold=0.5, force_suppress=False, variances=VARIANCES,
                        nms_topk=-1):
    batch, num_classes, n = cls_prob.shape
    out = onp.full((batch, n, 6), -1.0)
    for b in range(batch):
        rows = []
        for i in range(n):
            best, score = -1, -1.0
            for c in range(num_classes):
                if c != background_id and cls_prob[b, c, i] > score:
                    best, score = c, float(cls_prob[b, c, i])
            if best < 0 or score < threshold:
                continue
            box = decode(anchor[0, i].astype(onp.float64), loc_pred[b, 4 * i:4 * i + 4], variances,
                         clip)
            rows.append([best - (best > background_id), score, *box])
        valid = len(rows)
        if valid:
            out[b, :valid] = rows
        if valid == 0 or not 0 < nms_threshold <= 1:
            continue
        order = sorted(range(valid), key=lambda r: -rows[r][1])  # stable
        kept = nms_topk if 0 < nms_topk < valid else valid
        out[b, kept:valid, 0] = -1  # the rows past nms_topk keep their anchor-order contents
        ranked = onp.array([rows[r] for r in order[:kept]])
        for i in range(kept):
            if ranked[i, 0] < 0:
                continue
            for j in range(i + 1, kept):
                if ranked[j, 0] >= 0 and (force_suppress or ranked[j, 0] == ranked[i, 0]):
                    if iou_matrix(ranked[i:i + 1, 2:], ranked[j:j + 1, 2:])[0, 0] >= nms_threshold:
                        ranked[j, 0] = -1
        out[b, :kept] = ranked
    return out


def arrays(device, *values, dtype="float32"):
    return [from_numpy(onp.asarray(v, dtype=dtype), device=device) for v in values]


# ---------------------------------------------------------------------------------------------
# multibox_prior
# ---------------------------------------------------------------------------------------------
PRIOR_CASES = [
    dict(sizes=(1.0,), ratios=(1.0,)),
    dict(sizes=(0.5, 0.25), ratios=(1, 2, 0.5)),
    dict(sizes=(0.75, 0.5, 0.25), ratios=(1, 2, 0.5), clip=True),
    dict(sizes=(0.3,), ratios=(1, 3), steps=(0.2, 0.1), offsets=(0.0, 1.0)),
    dict(sizes=(0.9, 0.2), ratios=(0.25,), offsets=(0.25, 0.75), clip=True),
]


@pytest.mark.parametrize("kwargs", PRIOR_CASES)
@pytest.mark.parametrize("hw", [(2, 3), (5, 5), (1, 7)])
def test_prior_values(device, kwargs, hw):
    data = np.zeros((2, 3) + hw, device=device)
    got = npx.multibox_prior(data, **kwargs)
    want = prior_reference(*hw, **kwargs)
    per_cell = len(kwargs["sizes"]) + len(kwargs["ratios"]) - 1
    assert got.shape == want.shape == (1, hw[0] * hw[1] * per_cell, 4)
    assert got.dtype == onp.float32
    assert_almost_equal(got, want, rtol=1e-6, atol=1e-6)


def test_prior_matches_mxnet():
    # MXNet 1.9.1's first rows for the same call
    got = npx.multibox_prior(np.zeros((1, 3, 2, 3)), sizes=(0.5, 0.25), ratios=(1, 2, 0.5))
    mxnet_first_rows = [[0.0, 0.0, 0.33333334, 0.5], [0.08333334, 0.125, 0.25, 0.375],
                        [-0.06903559, 0.07322331, 0.40236893, 0.4267767],
                        [0.04881554, -0.10355338, 0.2845178, 0.6035534],
                        [0.3333333, 0.0, 0.6666667, 0.5]]
    assert_almost_equal(got[0, :5], onp.array(mxnet_first_rows), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype,want_dtype", [("float64", "float64"), ("float16", "float16"),
                                              ("int32", "float32"), ("uint8", "float32")])
def test_prior_dtypes(dtype, want_dtype):
    got = npx.multibox_prior(np.zeros((1, 1, 3, 4), dtype=dtype), sizes=[0.4, 0.2], ratios=[1, 2])
    assert got.dtype == want_dtype
    tolerance = 1e-3 if dtype == "float16" else 1e-7
    assert_almost_equal(got.astype("float64"), prior_reference(3, 4, (0.4, 0.2), (1, 2)),
                        rtol=tolerance, atol=tolerance)


def test_prior_scalar_sizes_and_defaults():
    got = npx.multibox_prior(np.zeros((1, 1, 2, 2)), sizes=0.5, ratios=2)
    assert_almost_equal(got, prior_reference(2, 2, (0.5,), (2,)), rtol=1e-6, atol=1e-7)
    got = npx.multibox_prior(np.zeros((1, 1, 2, 2)), sizes=onp.array([0.5, 0.25]), ratios=[1, 2])
    assert_almost_equal(got, prior_reference(2, 2, (0.5, 0.25), (1, 2)), rtol=1e-6, atol=1e-7)
    with pytest.raises(TypeError, match=r"sizes must be a number or a sequence of .*'big'"):
        npx.multibox_prior(np.zeros((1, 1, 2, 2)), sizes="big")
    assert_almost_equal(npx.multibox_prior(np.zeros((1, 1, 2, 2))),
                        prior_reference(2, 2, (1,), (1,)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shape,kwargs,match", [
    ((3, 4), {}, r"\(batch, channels, height, width\).*\(3, 4\)"),
    ((1, 1, 0, 4), {}, r"height and width must be > 0.*\(1, 1, 0, 4\)"),
    ((1, 1, 2, 2), dict(sizes=(0.5, -0.1)), r"sizes must be > 0, got -0\.1"),
    ((1, 1, 2, 2), dict(sizes=()), r"at least one value.*0 sizes"),
    ((1, 1, 2, 2), dict(ratios=(1, 0)), r"ratios must be > 0, got 0"),
    ((1, 1, 2, 2), dict(steps=(0.1,)), r"steps must be \(step_y, step_x\), got 1 values"),
    ((1, 1, 2, 2), dict(steps=(-1, 0.1)), r"give both steps or neither.*-1, 0\.1"),
    ((1, 1, 2, 2), dict(offsets=(0.5, 1.5)), r"offsets must lie in \[0, 1\], got 1\.5"),
])
def test_prior_errors(shape, kwargs, match):
    with pytest.raises(ValueError, match=match):
        npx.multibox_prior(np.zeros(shape), **kwargs)
    assert npx.multibox_prior(np.zeros((1, 1, 2, 2))).shape == (1, 4, 4)  # still usable


# ---------------------------------------------------------------------------------------------
# multibox_target
# ---------------------------------------------------------------------------------------------
HAND_ANCHORS = [[[0.1, 0.1, 0.4, 0.4], [0.12, 0.1, 0.42, 0.4], [0.5, 0.5, 0.9, 0.9],
                 [0.52, 0.5, 0.9, 0.92], [0.0, 0.0, 0.2, 0.2], [0.6, 0.0, 0.9, 0.3]]]
HAND_LABELS = [[[0, 0.1, 0.1, 0.4, 0.4], [1, 0.5, 0.5, 0.9, 0.9], [-1, -1, -1, -1, -1]],
               [[-1, -1, -1, -1, -1], [-1, -1, -1, -1, -1], [-1, -1, -1, -1, -1]]]


def test_target_hand_made_matches_mxnet(device):
    cls_pred = onp.random.RandomState(0).randn(2, 3, 6)
    anchor, label, pred = arrays(device, HAND_ANCHORS, HAND_LABELS, cls_pred)
    loc, mask, cls = npx.multibox_target(anchor, label, pred)
    assert loc.shape == mask.shape == (2, 24) and cls.shape == (2, 6)
    # MXNet 1.9.1's outputs: anchors 0-3 positive (two bipartite matches, two above 0.5), anchors
    # 4 and 5 negatives; the item without labels is all ignore_label.
    assert_almost_equal(cls, onp.array([[1, 1, 2, 2, 0, 0], [-1] * 6]))
    assert_almost_equal(mask, onp.array([[1] * 16 + [0] * 8, [0] * 24]))
    want_loc = onp.zeros((2, 24))
    want_loc[0, 4] = -0.6667
    want_loc[0, 12:16] = [-0.2632, -0.2381, 0.2565, -0.244]
    assert_almost_equal(loc, want_loc, rtol=0, atol=1e-4)
    want = target_reference(onp.array(HAND_ANCHORS, "float32"), onp.array(HAND_LABELS), cls_pred)
    assert_almost_equal(loc, want[0], rtol=1e-5, atol=1e-6)
    # overlap_threshold=0: the bipartite matches only (MXNet: [1, 0, 2, 0, 0, 0])
    _, mask, cls = npx.multibox_target(anchor, label, pred, overlap_threshold=0)
    assert_almost_equal(cls[0], onp.array([1, 0, 2, 0, 0, 0]))
    assert_almost_equal(mask[0], onp.array([1] * 4 + [0] * 4 + [1] * 4 + [0] * 12))
    # ignore_label marks the anchors that are neither positive nor mined
    _, _, cls = npx.multibox_target(anchor, label, pred, ignore_label=-7, negative_mining_ratio=0.5)
    assert_almost_equal(cls, onp.array([[1, 1, 2, 2, 0, 0], [-7] * 6]))


def test_target_hard_negatives_match_mxnet(device):
    anchor = npx.multibox_prior(np.zeros((1, 3, 4, 4), device=device), sizes=(0.3,))
    label = from_numpy(onp.array([[[0, 0.1, 0.1, 0.35, 0.4], [-1, -1, -1, -1, -1]]], "float32"),
                       device=device)
    cls_pred = from_numpy(onp.random.RandomState(1).randn(1, 3, 16).astype("float32"),
                          device=device)
    # MXNet 1.9.1's cls_target for these inputs
    _, _, cls = npx.multibox_target(anchor, label, cls_pred, negative_mining_ratio=1)
    assert_almost_equal(cls[0], onp.array([-1] * 4 + [1] + [-1] * 6 + [0] + [-1] * 4))
    _, _, cls = npx.multibox_target(anchor, label, cls_pred, negative_mining_ratio=3,
                                    negative_mining_thresh=0.01)
    assert_almost_equal(cls[0], onp.array([-1] * 3 + [0, 1] + [-1] * 6 + [0] + [-1] * 3 + [0]))
    # minimum_negative_samples raises the count (MXNet's CPU kernel ignores it, its GPU kernel not)
    _, _, cls = npx.multibox_target(anchor, label, cls_pred, negative_mining_ratio=1,
                                    minimum_negative_samples=5)
    assert int((cls.asnumpy() == 0).sum()) == 5


def random_labels(rng, batch, num_labels, num_classes, padded):
    """Label rows of random boxes, the last `padded[b]` rows of item b padded with -1."""
    corners = rng.uniform(0, 1, size=(batch, num_labels, 2, 2))
    boxes = onp.concatenate([corners.min(axis=2), corners.max(axis=2) + 0.05], axis=2)
    classes = rng.randint(0, num_classes, size=(batch, num_labels, 1))
    label = onp.concatenate([classes, boxes], axis=2)
    for b, pad in enumerate(padded):
        if pad:
            label[b, num_labels - pad:] = -1
    return label


TARGET_CASES = [
    dict(),
    dict(overlap_threshold=0.3),
    dict(overlap_threshold=0),
    dict(negative_mining_ratio=3, negative_mining_thresh=0.5),
    dict(negative_mining_ratio=2, negative_mining_thresh=0.3, overlap_threshold=0.6),
    dict(negative_mining_ratio=0.5, minimum_negative_samples=20, ignore_label=-2),
    dict(variances=(0.2, 0.3, 0.5, 0.4)),
]


@pytest.mark.parametrize("kwargs", TARGET_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_target_random(device, kwargs, dtype):
    rng = onp.random.RandomState(onp.random.randint(2**31))
    anchor = npx.multibox_prior(np.zeros((1, 1, 6, 5), dtype=dtype, device=device),
                                sizes=(0.4, 0.2), ratios=(1, 2, 0.5))
    n = anchor.shape[1]
    label = random_labels(rng, 4, 5, 3, padded=[0, 2, 5, 4])
    cls_pred = rng.randn(4, 4, n)
    label_, cls_pred_ = arrays(device, label, cls_pred, dtype=dtype)
    loc, mask, cls = npx.multibox_target(anchor, label_, cls_pred_, **kwargs)
    assert loc.dtype == mask.dtype == cls.dtype == dtype
    want_loc, want_mask, want_cls = target_reference(anchor.asnumpy(), label.astype(dtype),
                                                     cls_pred.astype(dtype), **kwargs)
    assert_almost_equal(cls, want_cls, rtol=0, atol=0)
    assert_almost_equal(mask, want_mask, rtol=0, atol=0)
    assert_almost_equal(loc, want_loc, rtol=1e-5, atol=1e-5)
    assert (want_cls[2] == kwargs.get("ignore_label", -1)).all()  # item 2 has no labels
    assert (want_cls > 0).any()


def test_target_padding_ends_labels():
    """The first row of class -1 ends an item's labels: rows after it are not ground truth."""
    anchor, cls_pred = arrays(pymx.cpu(0), HAND_ANCHORS, onp.zeros((1, 2, 6)))
    label = from_numpy(onp.array([[[0, 0.1, 0.1, 0.4, 0.4], [-1, -1, -1, -1, -1],
                                   [1, 0.5, 0.5, 0.9, 0.9]]], "float32"))
    _, _, cls = npx.multibox_target(anchor, label, cls_pred)
    assert_almost_equal(cls[0], onp.array([1, 1, 0, 0, 0, 0]))


def test_target_fewer_candidates_than_wanted():
    """All qualifying anchors become negatives when mining wants more (MXNet fails)."""
    anchor, label, cls_pred = arrays(pymx.cpu(0), HAND_ANCHORS, HAND_LABELS[:1],
                                     onp.zeros((1, 2, 6)))
    _, _, cls = npx.multibox_target(anchor, label, cls_pred, negative_mining_ratio=10)
    assert_almost_equal(cls[0], onp.array([1, 1, 2, 2, 0, 0]))


@pytest.mark.parametrize("shapes,kwargs,match", [
    (((2, 6, 4), (2, 3, 5), (2, 3, 6)), {},
     r"anchor must be \(1, num_anchors > 0, 4\), got shape \(2, 6, 4\)"),
    (((1, 6, 4), (2, 3, 4), (2, 3, 6)), {}, r"label must be .* got shape \(2, 3, 4\)"),
    (((1, 6, 4), (2, 3), (2, 3, 6)), {}, r"label must be .* got shape \(2, 3\)"),
    (((1, 6, 4), (2, 3, 5), (3, 3, 6)), {}, r"cls_pred has batch 3 but label has batch 2"),
    (((1, 6, 4), (2, 3, 5), (2, 3, 7)), {}, r"cls_pred has 7 anchors .* anchor has 6"),
    (((1, 6, 4), (2, 3, 5), (2, 3, 6)), dict(variances=(0.1, 0.2)),
     r"variances must have 4 values.*got 2"),
    (((1, 6, 4), (2, 3, 5), (2, 3, 6)), dict(negative_mining_ratio=3, negative_mining_thresh=0),
     r"needs negative_mining_thresh > 0, got 0"),
])
def test_target_errors(shapes, kwargs, match):
    inputs = [np.zeros(s) for s in shapes]
    with pytest.raises(ValueError, match=match):
        npx.multibox_target(*inputs, **kwargs)
    with pytest.raises(TypeError, match=r"input 1 has dtype float64 but input 0 has float32"):
        npx.multibox_target(np.zeros((1, 6, 4)), np.zeros((2, 3, 5), dtype="float64"),
                            np.zeros((2, 3, 6)))
    valid = arrays(pymx.cpu(0), HAND_ANCHORS, HAND_LABELS, onp.zeros((2, 2, 6)))
    assert npx.multibox_target(*valid)[2].shape == (2, 6)


# ---------------------------------------------------------------------------------------------
# multibox_detection
# ---------------------------------------------------------------------------------------------
DET_ANCHORS = [[[0.1, 0.1, 0.4, 0.4], [0.12, 0.1, 0.42, 0.4], [0.5, 0.5, 0.9, 0.9],
                [0.52, 0.5, 0.9, 0.92], [0.0, 0.0, 0.2, 0.2]]]
DET_PROBS = [[[0.1, 0.2, 0.3, 0.9, 0.6], [0.9, 0.7, 0.6, 0.05, 0.3], [0.0, 0.1, 0.1, 0.05, 0.1]]]
A0, A1, A2, A3, A4 = ([0.1, 0.1, 0.4, 0.4], [0.12, 0.1, 0.42, 0.4], [0.5, 0.5, 0.9, 0.9],
                      [0.52, 0.5, 0.9, 0.92], [0.0, 0.0, 0.2, 0.2])
# MXNet 1.9.1's outputs for DET_PROBS, zero offsets and DET_ANCHORS
MXNET_DETECTIONS = [
    (dict(), [[0, 0.9] + A0, [-1, 0.7] + A1, [0, 0.6] + A2, [0, 0.3] + A4, [-1, 0.05] + A3]),
    (dict(nms_topk=2),
     [[0, 0.9] + A0, [-1, 0.7] + A1, [-1, 0.6] + A2, [-1, 0.05] + A3, [-1, 0.3] + A4]),
    (dict(nms_threshold=0),
     [[0, 0.9] + A0, [0, 0.7] + A1, [0, 0.6] + A2, [0, 0.05] + A3, [0, 0.3] + A4]),
    (dict(threshold=0.65), [[0, 0.9] + A0, [-1, 0.7] + A1] + [[-1] * 6] * 3),
]


@pytest.mark.parametrize("kwargs,want", MXNET_DETECTIONS)
def test_detection_matches_mxnet(device, kwargs, want):
    cls_prob, loc_pred, anchor = arrays(device, DET_PROBS, onp.zeros((1, 20)), DET_ANCHORS)
    got = npx.multibox_detection(cls_prob, loc_pred, anchor, **kwargs)
    assert got.shape == (1, 5, 6) and got.dtype == onp.float32
    assert_almost_equal(got[0], onp.array(want), rtol=1e-6, atol=1e-7)
    want = detection_reference(onp.array(DET_PROBS), onp.zeros((1, 20)), onp.array(DET_ANCHORS),
                               **kwargs)
    assert_almost_equal(got, want, rtol=1e-6, atol=1e-7)


def test_detection_background_id_and_force_suppress():
    probs = onp.array(DET_PROBS)
    probs[0, 2] = [0.0, 0.5, 0.1, 0.05, 0.7]
    cls_prob, loc_pred, anchor = arrays(pymx.cpu(0), probs, onp.zeros((1, 20)), DET_ANCHORS)
    # class 1 as the background: classes 0 and 2 remain, reported as 0 and 1; anchor 3 (class 0,
    # 0.9) suppresses anchor 2, and anchor 0 (class 0) survives anchor 1 (class 1)
    got = npx.multibox_detection(cls_prob, loc_pred, anchor, background_id=1).asnumpy()[0]
    assert_almost_equal(got[:, :2], onp.array([[0, 0.9], [1, 0.7], [1, 0.5], [-1, 0.3], [0, 0.1]]))
    # force_suppress: anchor 1 suppresses anchor 0 across classes
    forced = npx.multibox_detection(cls_prob, loc_pred, anchor, background_id=1,
                                    force_suppress=True)
    assert_almost_equal(forced.asnumpy()[0, :, 0], onp.array([0, 1, 1, -1, -1]))
    for kwargs, result in ((dict(), got[None]), (dict(force_suppress=True), forced)):
        want = detection_reference(probs, onp.zeros((1, 20)), onp.array(DET_ANCHORS),
                                   background_id=1, **kwargs)
        assert_almost_equal(result, want, rtol=1e-6, atol=1e-7)


DETECTION_CASES = [
    dict(),
    dict(force_suppress=True),
    dict(nms_threshold=0.3, nms_topk=15),
    dict(nms_topk=1000),
    dict(threshold=0.3, clip=False),
    dict(nms_threshold=1.0),
    dict(nms_threshold=-1),
    dict(background_id=2, variances=(0.2, 0.2, 0.3, 0.3)),
]


@pytest.mark.parametrize("kwargs", DETECTION_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_detection_random(device, kwargs, dtype):
    rng = onp.random.RandomState(onp.random.randint(2**31))
    anchor = npx.multibox_prior(np.zeros((1, 1, 4, 5), dtype=dtype, device=device),
                                sizes=(0.5, 0.3), ratios=(1, 2, 0.5))
    n = anchor.shape[1]
    logits = rng.randn(3, 4, n) * 2
    cls_prob = onp.exp(logits) / onp.exp(logits).sum(axis=1, keepdims=True)
    loc_pred = rng.randn(3, 4 * n) * 0.5
    got = npx.multibox_detection(*arrays(device, cls_prob, loc_pred, dtype=dtype), anchor, **kwargs)
    want = detection_reference(cls_prob.astype(dtype), loc_pred.astype(dtype), anchor.asnumpy(),
                               **kwargs)
    assert got.shape == (3, n, 6) and got.dtype == dtype
    assert_almost_equal(got[:, :, :2], want[:, :, :2], rtol=0, atol=0)
    assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)
    if 0 < kwargs.get("nms_threshold", 0.5) < 1:
        assert (want[:, :, 0] == -1).any() and (want[:, :, 0] >= 0).any()  # NMS did something


VALID_DETECTION_SHAPES = ((2, 3, 5), (2, 20), (1, 5, 4))


@pytest.mark.parametrize("shapes,kwargs,match", [
    (((2, 3, 5), (2, 20), (1, 5)), {},
     r"anchor must be \(1, num_anchors > 0, 4\), got shape \(1, 5\)"),
    (((2, 3), (2, 20), (1, 5, 4)), {}, r"cls_prob must be .* got shape \(2, 3\)"),
    (((2, 3, 5), (3, 20), (1, 5, 4)), {},
     r"loc_pred must be \(batch, 4 \* num_anchors\) = \(2, 20\), got shape \(3, 20\)"),
    (((2, 3, 5), (2, 16), (1, 5, 4)), {}, r"= \(2, 20\), got shape \(2, 16\)"),
    (((2, 3, 6), (2, 24), (1, 5, 4)), {}, r"cls_prob has 6 anchors .* anchor has 5"),
    (((2, 3, 5), (2, 20), (1, 5, 4)), dict(background_id=3),
     r"background_id 3 is not a class of cls_prob \(3 classes\)"),
])
def test_detection_errors(shapes, kwargs, match):
    with pytest.raises(ValueError, match=match):
        npx.multibox_detection(*[np.zeros(s) for s in shapes], **kwargs)
    with pytest.raises(TypeError, match=r"floating-point"):
        npx.multibox_detection(*[np.zeros(s, dtype="int32") for s in VALID_DETECTION_SHAPES])
    assert npx.multibox_detection(*[np.zeros(s) for s in VALID_DETECTION_SHAPES]).shape == (2, 5, 6)


def test_empty_batch():
    anchor = np.zeros((1, 5, 4))
    assert npx.multibox_detection(np.zeros((0, 3, 5)), np.zeros((0, 20)), anchor).shape == (0, 5, 6)
    outs = npx.multibox_target(anchor, np.zeros((0, 2, 5)), np.zeros((0, 3, 5)))
    assert [o.shape for o in outs] == [(0, 20), (0, 20), (0, 5)]


# ---------------------------------------------------------------------------------------------
# Gradients: zeros through every input
# ---------------------------------------------------------------------------------------------
def test_zero_gradients(device):
    data, cls_pred, loc_pred = arrays(device, onp.ones((1, 2, 3, 3)), onp.random.randn(2, 3, 9),
                                      onp.random.randn(2, 36))
    label = from_numpy(onp.array(HAND_LABELS, "float32")[:, :2], device=device)
    for x in (data, cls_pred, loc_pred, label):
        x.attach_grad()
    with autograd.record():
        anchor = npx.multibox_prior(data, sizes=(0.4,))
        loc, mask, cls = npx.multibox_target(anchor, label, cls_pred)
        det = npx.multibox_detection(npx.softmax(cls_pred, axis=1), loc_pred, anchor)
        loss = (loc * mask).sum() + cls.sum() + det.sum() + anchor.sum() + (cls_pred * 2).sum()
    loss.backward()
    for x in (data, label, loc_pred):
        assert_almost_equal(x.grad, onp.zeros(x.shape))
    # only the direct term reaches cls_pred: none flows back through target or detection
    assert_almost_equal(cls_pred.grad, onp.full(cls_pred.shape, 2.0))


# ---------------------------------------------------------------------------------------------
# GPU against CPU
# ---------------------------------------------------------------------------------------------
@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_gpu_matches_cpu(dtype):
    n = 20 * 24 * 4  # anchors: several per thread of a block
    label = random_labels(onp.random, 5, 12, 6, padded=[0, 3, 12, 11, 1])
    cls_pred = onp.random.randn(5, 7, n)
    prob = onp.exp(cls_pred) / onp.exp(cls_pred).sum(axis=1, keepdims=True)
    loc_pred = onp.random.randn(5, 4 * n) * 0.3
    results = {}
    for device in (pymx.cpu(0), pymx.gpu(0)):
        anchor = npx.multibox_prior(np.zeros((2, 3, 20, 24), dtype=dtype, device=device),
                                    sizes=(0.2, 0.1), ratios=(1, 2, 0.5), clip=True)
        label_, cls_pred_, prob_, loc_pred_ = arrays(device, label, cls_pred, prob, loc_pred,
                                                     dtype=dtype)
        results[device.device_type] = [
            anchor,
            *npx.multibox_target(anchor, label_, cls_pred_),
            *npx.multibox_target(anchor, label_, cls_pred_, negative_mining_ratio=3,
                                 minimum_negative_samples=50, overlap_threshold=0.4),
            npx.multibox_detection(prob_, loc_pred_, anchor),
            npx.multibox_detection(prob_, loc_pred_, anchor, force_suppress=True, nms_topk=300),
            npx.multibox_detection(prob_, loc_pred_, anchor, nms_threshold=0),
        ]
    tolerance = 2e-3 if dtype == "float16" else 1e-5
    for got, want in zip(results["gpu"], results["cpu"]):
        assert_almost_equal(got, want, rtol=tolerance, atol=tolerance)
    for index in (3, 6):  # cls_target: exact
        assert (results["gpu"][index].asnumpy() == results["cpu"][index].asnumpy()).all()
    for index in (7, 8, 9):  # detection classes: exact
        classes = [results[kind][index].asnumpy()[:, :, 0] for kind in ("gpu", "cpu")]
        assert (classes[0] == classes[1]).all()


# ---------------------------------------------------------------------------------------------
# A small SSD (the shapes of d2l's TinySSD, at 64x64): one training step and the detections
# ---------------------------------------------------------------------------------------------
SIZES = [[0.2, 0.272], [0.37, 0.447], [0.54, 0.619], [0.71, 0.79]]
RATIOS = [[1, 2, 0.5]] * 4
ANCHORS_PER_CELL = len(SIZES[0]) + len(RATIOS[0]) - 1


def down_sample_blk(num_channels):
    blk = nn.HybridSequential()
    for _ in range(2):
        blk.add(nn.Conv2D(num_channels, kernel_size=3, padding=1), nn.BatchNorm(),
                nn.Activation("relu"))
    blk.add(nn.MaxPool2D(2))
    return blk


class TinySSD(nn.Block):
    def __init__(self, num_classes):
        super().__init__()
        self.num_classes = num_classes
        stages = [nn.HybridSequential(), down_sample_blk(32), down_sample_blk(32),
                  nn.GlobalMaxPool2D()]
        stages[0].add(down_sample_blk(16), down_sample_blk(32))  # the base network: 64 -> 16
        for i, stage in enumerate(stages):
            setattr(self, f"stage_{i}", stage)
            setattr(self, f"cls_{i}", nn.Conv2D(ANCHORS_PER_CELL * (num_classes + 1),
                                                kernel_size=3, padding=1))
            setattr(self, f"bbox_{i}", nn.Conv2D(ANCHORS_PER_CELL * 4, kernel_size=3, padding=1))

    def forward(self, x):
        anchors, cls_preds, bbox_preds = [], [], []
        for i in range(4):
            x = getattr(self, f"stage_{i}")(x)
            anchors.append(npx.multibox_prior(x, sizes=SIZES[i], ratios=RATIOS[i]))
            for preds, head in ((cls_preds, "cls"), (bbox_preds, "bbox")):
                pred = getattr(self, f"{head}_{i}")(x)
                preds.append(npx.batch_flatten(pred.transpose(0, 2, 3, 1)))
        cls_preds = np.concatenate(cls_preds, axis=1)
        return (np.concatenate(anchors, axis=1),
                cls_preds.reshape(cls_preds.shape[0], -1, self.num_classes + 1),
                np.concatenate(bbox_preds, axis=1))


def test_tiny_ssd_trains_and_detects():
    net = TinySSD(num_classes=1)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.2, "wd": 5e-4})
    cls_loss, bbox_loss = gluon.loss.SoftmaxCrossEntropyLoss(), gluon.loss.L1Loss()
    x = np.random.uniform(size=(2, 3, 64, 64))
    y = from_numpy(onp.array([[[0, 0.1, 0.08, 0.52, 0.92], [-1] * 5],
                              [[0, 0.5, 0.5, 0.9, 0.95], [0, 0.05, 0.1, 0.3, 0.4]]], "float32"))
    num_anchors = (16 * 16 + 8 * 8 + 4 * 4 + 1) * ANCHORS_PER_CELL  # 16x16, 8x8, 4x4, 1x1 cells
    losses = []
    for _ in range(2):
        with autograd.record():
            anchors, cls_preds, bbox_preds = net(x)
            bbox_labels, bbox_masks, cls_labels = npx.multibox_target(
                anchors, y, cls_preds.transpose(0, 2, 1))
            loss = (cls_loss(cls_preds, cls_labels)
                    + bbox_loss(bbox_preds * bbox_masks, bbox_labels * bbox_masks))
        loss.backward()
        trainer.step(2)
        losses.append(float(loss.mean()))
    assert anchors.shape == (1, num_anchors, 4)
    assert cls_preds.shape == (2, num_anchors, 2) and bbox_preds.shape == (2, num_anchors * 4)
    assert bbox_labels.shape == bbox_masks.shape == (2, num_anchors * 4)
    assert cls_labels.shape == (2, num_anchors) and (cls_labels.asnumpy() == 1).sum() >= 3
    assert onp.isfinite(losses).all() and losses[1] < losses[0]
    cls_probs = npx.softmax(cls_preds).transpose(0, 2, 1)
    detections = npx.multibox_detection(cls_probs, bbox_preds, anchors)
    assert detections.shape == (2, num_anchors, 6)
    kept = detections.asnumpy()[0]
    kept = kept[kept[:, 0] >= 0]
    assert len(kept) > 0 and (kept[:, 0] == 0).all()
    assert ((kept[:, 2:] >= 0) & (kept[:, 2:] <= 1)).all() and (onp.diff(kept[:, 1]) <= 0).all()
