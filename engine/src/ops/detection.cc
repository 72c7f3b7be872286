// The SSD detection operators (npx.multibox_prior, npx.multibox_target, npx.multibox_detection;
// MXNet's contrib MultiBoxPrior / MultiBoxTarget / MultiBoxDetection). Boxes are corners
// [xmin, ymin, xmax, ymax] in image fractions; N anchors, B batch items, C classes.
//
// | op                 | inputs                                   | outputs                |
// |--------------------|------------------------------------------|------------------------|
// | multibox_prior     | data (B, ch, H, W, ...), any dtype       | anchors (1, H*W*K, 4)  |
// | multibox_target    | anchor (1, N, 4), label (B, L, >= 5),    | loc_target (B, 4N),    |
// |                    | cls_pred (B, C, N)                       | loc_mask (B, 4N),      |
// |                    |                                          | cls_target (B, N)      |
// | multibox_detection | cls_prob (B, C, N), loc_pred (B, 4N),    | out (B, N, 6)          |
// |                    | anchor (1, N, 4)                         |                        |
//
// Attributes (defaults): multibox_prior: sizes (1,), ratios (1,), clip (False), steps (-1, -1),
// offsets (0.5, 0.5). multibox_target: overlap_threshold (0.5), ignore_label (-1),
// negative_mining_ratio (-1: no mining), negative_mining_thresh (0.5), minimum_negative_samples
// (0), variances (0.1, 0.1, 0.2, 0.2). multibox_detection: clip (True), threshold (0.01),
// background_id (0), nms_threshold (0.5), force_suppress (False), variances, nms_topk (-1).
//
// multibox_prior: K = len(sizes) + len(ratios) - 1 anchors per cell, row-major over the cells:
// one per size at ratio 1, then one of size sizes[0] per further ratio; width
// size * H / W * sqrt(ratio), height size / sqrt(ratio), centred at ((col + offset_x) * step_x,
// (row + offset_y) * step_y). steps of -1 mean 1/H and 1/W. clip clamps to [0, 1]. Its output
// has data's dtype when that is a float, else float32 (only data's shape is read).
//
// multibox_target, per batch item (Note [Anchor matching]): label rows are
// [class, xmin, ymin, xmax, ymax, ...], padded with rows of class -1 (the first such row ends
// the labels). Positive anchors get cls_target = class + 1, loc_mask 1 and the encoded offsets
// of their box (detection_common.h's encode_box); negatives get cls_target 0; the others
// cls_target = ignore_label, and loc_target and loc_mask 0. An item without labels is all ignored.
//
// multibox_detection, per batch item (Note [Detection rows]): rows [class, score, xmin, ymin,
// xmax, ymax], class -1 for rows that are not (or no longer) detections.
//
// Gradients: zeros for every input (MXNet's backward writes zeros), so autograd through the
// targets, the anchors or the detections gives zero rather than failing.
//
// Deliberate differences from MXNet 1.9.1: minimum_negative_samples raises the number of hard
// negatives, as MXNet's GPU kernel does (its CPU kernel ignores it); background_id names the
// background class of cls_prob (MXNet ignores it and takes class 0); when fewer anchors qualify
// as hard negatives than wanted, all that qualify are taken (MXNet fails); a label row of class -1
// ends the labels whatever its other values (MXNet fails unless they are -1 too); sizes and ratios
// must be > 0; the inputs of target and detection may be any float dtype, all the same (MXNet:
// float32).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/detection_common.h"
#include "ops/dispatch.h"
#include "ops/elemwise.h"
#include "ops/nn_common.h"
#include "parallel.h"

namespace pymx {
namespace {

using namespace detection;

template <typename T>
T from_compute(compute_t<T> v) { return static_cast<T>(v); }

template <typename T>
compute_t<T> to_compute(T v) { return static_cast<compute_t<T>>(v); }

// ---------------------------------------------------------------------------------------------
// multibox_prior
// ---------------------------------------------------------------------------------------------
void prior_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                 std::vector<Shape>* out, std::vector<DType>* out_dt) {
  PMX_CHECK(in[0].size() >= 4, "multibox_prior: data must be (batch, channels, height, width), ",
            "got shape ", shape_str(in[0]));
  PMX_CHECK(in[0][2] > 0 && in[0][3] > 0, "multibox_prior: data's height and width must be > 0, ",
            "got shape ", shape_str(in[0]));
  std::vector<double> sizes, ratios, steps, offsets;
  check_prior_attrs(attrs, &sizes, &ratios, &steps, &offsets);
  const int64_t per_cell = static_cast<int64_t>(sizes.size() + ratios.size()) - 1;
  *out = {Shape{1, in[0][2] * in[0][3] * per_cell, 4}};
  *out_dt = {is_float(dt[0]) ? dt[0] : DType::kFloat32};
}

void prior_cpu(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  PMX_FLOAT_SWITCH(out[0].dtype, T, {
    using A = compute_t<T>;
    const PriorGrid<A> g = prior_grid<A>(*ctx.attrs, in[0].shape);
    const int64_t per_cell = g.anchors_per_cell();
    T* y = out[0].data<T>();
    for (int64_t row = 0; row < g.height; ++row)
      for (int64_t col = 0; col < g.width; ++col)
        for (int64_t k = 0; k < per_cell; ++k)
          prior_box(g.step_y, g.step_x, g.offset_y, g.offset_x, g.clip, g.half_extents.data(), row,
                    col, k, y + ((row * g.width + col) * per_cell + k) * 4, from_compute<T>);
  });
}

// ---------------------------------------------------------------------------------------------
// multibox_target
// ---------------------------------------------------------------------------------------------
// Note [Anchor matching]
// ~~~~~~~~~~~~~~~~~~~~~~
// Per batch item, with IoU the overlap of an anchor and a label box:
// 1. Bipartite: repeatedly take the unmatched (anchor, label) pair of highest IoU (above 1e-6;
//    the first in anchor-major order among equals) and make the anchor positive for that label,
//    until every label has an anchor or no pair overlaps.
// 2. With overlap_threshold > 0, every other anchor whose best IoU over all labels (the first
//    best) exceeds the threshold becomes positive for that label.
// 3. With negative_mining_ratio > 0, the hard negatives are the max(int(P * ratio),
//    minimum_negative_samples) anchors (at most N - P) among those neither positive nor of best
//    IoU >= negative_mining_thresh whose softmax probability of class 0 (the background) in
//    cls_pred is lowest (the first anchors among equals); P is the number of positives. Without
//    mining every anchor that is not positive is a negative.
// Step 1 is serial by nature: the CPU runs one batch item per thread, the GPU one thread block per
// batch item (Note [One thread block per batch item] in cuda/src/detection.cu), both computing
// exactly this.

// The label rows before the first of class -1.
template <typename T>
int64_t count_labels(const T* label, int64_t num_labels, int64_t width) {
  int64_t n = 0;
  while (n < num_labels && static_cast<float>(label[n * width]) != -1.0f) ++n;
  return n;
}

enum : int8_t { kIgnored = -1, kNegative = 0, kPositive = 1 };

template <typename T>
void target_item(const T* anchors, int64_t num_anchors, const T* label, int64_t num_labels,
                 int64_t width, const T* cls_pred, int64_t num_classes, const TargetParams& p,
                 T* loc_target, T* loc_mask, T* cls_target) {
  using A = compute_t<T>;
  std::fill(loc_target, loc_target + 4 * num_anchors, T(0));
  std::fill(loc_mask, loc_mask + 4 * num_anchors, T(0));
  std::fill(cls_target, cls_target + num_anchors, static_cast<T>(p.ignore_label));
  const int64_t num_gt = count_labels(label, num_labels, width);
  if (num_gt == 0) return;

  std::vector<A> anchor_boxes(4 * num_anchors), gt_boxes(4 * num_gt);
  for (int64_t i = 0; i < 4 * num_anchors; ++i) anchor_boxes[i] = to_compute(anchors[i]);
  for (int64_t k = 0; k < num_gt; ++k)
    for (int64_t c = 0; c < 4; ++c) gt_boxes[4 * k + c] = to_compute(label[k * width + 1 + c]);
  std::vector<A> overlaps(num_anchors * num_gt);
  for (int64_t j = 0; j < num_anchors; ++j)
    for (int64_t k = 0; k < num_gt; ++k)
      overlaps[j * num_gt + k] = box_iou(&anchor_boxes[4 * j], &gt_boxes[4 * k]);

  std::vector<int8_t> flag(num_anchors, kIgnored);
  std::vector<int64_t> match(num_anchors, -1);
  std::vector<bool> gt_matched(num_gt, false);
  int64_t positives = 0;
  for (int64_t round = 0; round < num_gt; ++round) {  // step 1
    int64_t best_anchor = -1, best_gt = -1;
    A best = A(1e-6f);
    for (int64_t j = 0; j < num_anchors; ++j) {
      if (flag[j] == kPositive) continue;
      for (int64_t k = 0; k < num_gt; ++k) {
        if (!gt_matched[k] && overlaps[j * num_gt + k] > best) {
          best = overlaps[j * num_gt + k];
          best_anchor = j;
          best_gt = k;
        }
      }
    }
    if (best_anchor < 0) break;
    flag[best_anchor] = kPositive;
    match[best_anchor] = best_gt;
    gt_matched[best_gt] = true;
    ++positives;
  }
  if (p.overlap_threshold > 0) {  // step 2
    for (int64_t j = 0; j < num_anchors; ++j) {
      if (flag[j] == kPositive) continue;
      A iou;
      const int64_t k = best_label(overlaps.data(), num_gt, j, &iou);
      if (k >= 0 && iou > A(static_cast<float>(p.overlap_threshold))) {
        flag[j] = kPositive;
        match[j] = k;
        ++positives;
      }
    }
  }
  if (p.negative_mining_ratio > 0) {  // step 3
    const int64_t wanted = negatives_wanted(p, positives, num_anchors);
    std::vector<std::pair<A, int64_t>> candidates;
    for (int64_t j = 0; j < num_anchors && wanted > 0; ++j) {
      if (flag[j] == kPositive) continue;
      A iou;
      best_label(overlaps.data(), num_gt, j, &iou);
      if (iou < A(static_cast<float>(p.negative_mining_thresh))) {
        const A probability =
            background_probability<A>(cls_pred, num_classes, num_anchors, j, to_compute<T>);
        candidates.emplace_back(background_key(probability), j);
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const int64_t taken = std::min(static_cast<int64_t>(candidates.size()), wanted);
    for (int64_t i = 0; i < taken; ++i) flag[candidates[i].second] = kNegative;
  } else {
    for (int8_t& f : flag)
      if (f != kPositive) f = kNegative;
  }

  for (int64_t j = 0; j < num_anchors; ++j) {
    if (flag[j] == kPositive) {
      cls_target[j] = static_cast<T>(to_compute(label[match[j] * width]) + A(1));
      A encoded[4];
      encode_box(&anchor_boxes[4 * j], &gt_boxes[4 * match[j]], p.variances, encoded);
      for (int c = 0; c < 4; ++c) {
        loc_mask[4 * j + c] = T(1);
        loc_target[4 * j + c] = from_compute<T>(encoded[c]);
      }
    } else if (flag[j] == kNegative) {
      cls_target[j] = T(0);
    }
  }
}

void target_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const Shape &anchor = in[0], &label = in[1], &cls_pred = in[2];
  PMX_CHECK(anchor.size() == 3 && anchor[0] == 1 && anchor[1] > 0 && anchor[2] == 4,
            "multibox_target: anchor must be (1, num_anchors > 0, 4), got shape ",
            shape_str(anchor));
  PMX_CHECK(label.size() == 3 && label[1] > 0 && label[2] >= 5,
            "multibox_target: label must be (batch, num_labels > 0, >= 5) rows of [class, xmin, ",
            "ymin, xmax, ymax], got shape ", shape_str(label));
  PMX_CHECK(cls_pred.size() == 3 && cls_pred[1] > 0,
            "multibox_target: cls_pred must be (batch, num_classes > 0, num_anchors), got shape ",
            shape_str(cls_pred));
  PMX_CHECK(cls_pred[0] == label[0], "multibox_target: cls_pred has batch ", cls_pred[0],
            " but label has batch ", label[0]);
  PMX_CHECK(cls_pred[2] == anchor[1], "multibox_target: cls_pred has ", cls_pred[2],
            " anchors (axis 2) but anchor has ", anchor[1]);
  nn::check_same_float(dt, "multibox_target");
  target_params(attrs);
  const Shape loc{label[0], 4 * anchor[1]};
  *out = {loc, loc, Shape{label[0], anchor[1]}};
  *out_dt = {dt[0], dt[0], dt[0]};
}

void target_cpu(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const TargetParams p = target_params(*ctx.attrs);
  const int64_t batch = in[1].shape[0], num_labels = in[1].shape[1], width = in[1].shape[2];
  const int64_t num_classes = in[2].shape[1], num_anchors = in[0].shape[1];
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    parallel_for(0, batch, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b)
        target_item(in[0].data<T>(), num_anchors, in[1].data<T>() + b * num_labels * width,
                    num_labels, width, in[2].data<T>() + b * num_classes * num_anchors,
                    num_classes, p, out[0].data<T>() + b * 4 * num_anchors,
                    out[1].data<T>() + b * 4 * num_anchors, out[2].data<T>() + b * num_anchors);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// multibox_detection
// ---------------------------------------------------------------------------------------------
// Note [Detection rows]
// ~~~~~~~~~~~~~~~~~~~~~
// Per batch item, every row starts as -1. Each anchor whose best non-background class
// (detection_common.h's best_class) scores at least `threshold` gives a row [class, score,
// decoded box]; these V rows come first, in anchor order. With nms_threshold in (0, 1], the
// rows are stably sorted by descending score; with nms_topk in (0, V), only the first nms_topk
// sorted rows are kept there and rows nms_topk .. V-1 keep their anchor-order contents with
// class -1 (MXNet's layout). Then greedy NMS over the kept rows: each row still of class >= 0
// sets the class of every later row (of the same class, or any with force_suppress) with IoU
// >= nms_threshold to -1; suppressed rows keep their score and box.
void detection_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                     std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const Shape &cls_prob = in[0], &loc_pred = in[1], &anchor = in[2];
  PMX_CHECK(cls_prob.size() == 3 && cls_prob[1] > 0,
            "multibox_detection: cls_prob must be (batch, num_classes > 0, num_anchors), got ",
            "shape ", shape_str(cls_prob));
  PMX_CHECK(anchor.size() == 3 && anchor[0] == 1 && anchor[1] > 0 && anchor[2] == 4,
            "multibox_detection: anchor must be (1, num_anchors > 0, 4), got shape ",
            shape_str(anchor));
  PMX_CHECK(cls_prob[2] == anchor[1], "multibox_detection: cls_prob has ", cls_prob[2],
            " anchors (axis 2) but anchor has ", anchor[1]);
  PMX_CHECK(loc_pred.size() == 2 && loc_pred[0] == cls_prob[0] && loc_pred[1] == 4 * anchor[1],
            "multibox_detection: loc_pred must be (batch, 4 * num_anchors) = (", cls_prob[0], ", ",
            4 * anchor[1], "), got shape ", shape_str(loc_pred));
  nn::check_same_float(dt, "multibox_detection");
  const DetectionParams p = detection_params(attrs);
  PMX_CHECK(p.background_id >= 0 && p.background_id < cls_prob[1],
            "multibox_detection: background_id ", p.background_id, " is not a class of cls_prob (",
            cls_prob[1], " classes)");
  *out = {Shape{cls_prob[0], anchor[1], 6}};
  *out_dt = {dt[0]};
}

template <typename T>
void detection_item(const T* cls_prob, const T* loc_pred, const T* anchors, int64_t num_classes,
                    int64_t num_anchors, const DetectionParams& p, T* out) {
  using A = compute_t<T>;
  std::fill(out, out + 6 * num_anchors, T(-1));
  int64_t valid = 0;
  for (int64_t i = 0; i < num_anchors; ++i) {
    A score;
    const int64_t id = best_class(cls_prob, num_classes, num_anchors, i, p.background_id,
                                  A(static_cast<float>(p.threshold)), &score, to_compute<T>);
    if (id < 0) continue;
    A anchor[4], pred[4], box[4];
    for (int c = 0; c < 4; ++c) {
      anchor[c] = to_compute(anchors[4 * i + c]);
      pred[c] = to_compute(loc_pred[4 * i + c]);
    }
    decode_box(anchor, pred, p.variances, p.clip, box);
    T* row = out + 6 * valid++;
    row[0] = static_cast<T>(reported_class(id, p.background_id));
    row[1] = from_compute<T>(score);
    for (int c = 0; c < 4; ++c) row[2 + c] = from_compute<T>(box[c]);
  }
  if (valid == 0 || !p.runs_nms()) return;

  std::vector<int64_t> order(valid);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return to_compute(out[6 * a + 1]) > to_compute(out[6 * b + 1]);
  });
  const int64_t kept = p.nms_topk > 0 && p.nms_topk < valid ? p.nms_topk : valid;
  std::vector<A> rows(6 * kept);  // the kept rows, sorted
  for (int64_t r = 0; r < kept; ++r)
    for (int c = 0; c < 6; ++c) rows[6 * r + c] = to_compute(out[6 * order[r] + c]);
  for (int64_t r = kept; r < valid; ++r) out[6 * r] = T(-1);
  const A nms_threshold = A(static_cast<float>(p.nms_threshold));
  for (int64_t i = 0; i < kept; ++i) {
    if (rows[6 * i] < 0) continue;
    for (int64_t j = i + 1; j < kept; ++j) {
      if (rows[6 * j] < 0 || !(p.force_suppress || rows[6 * i] == rows[6 * j])) continue;
      if (box_iou(&rows[6 * i + 2], &rows[6 * j + 2]) >= nms_threshold) rows[6 * j] = A(-1);
    }
  }
  for (int64_t i = 0; i < 6 * kept; ++i) out[i] = from_compute<T>(rows[i]);
}

void detection_cpu(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const DetectionParams p = detection_params(*ctx.attrs);
  const int64_t batch = in[0].shape[0], num_classes = in[0].shape[1], num_anchors = in[0].shape[2];
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    parallel_for(0, batch, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b)
        detection_item(in[0].data<T>() + b * num_classes * num_anchors,
                       in[1].data<T>() + b * 4 * num_anchors, in[2].data<T>(), num_classes,
                       num_anchors, p, out[0].data<T>() + b * 6 * num_anchors);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------------------------
std::vector<NDArray> zero_gradients(const GradContext& g) {
  std::vector<NDArray> grads;
  for (size_t i = 0; i < g.input_shapes.size(); ++i)
    grads.push_back(invoke(op_registry::get("zeros"), {},
                           Attrs{{"shape", ops::shape_attr(g.input_shapes[i])},
                                 {"dtype", dtype_name(g.input_dtypes[i])}},
                           g.out_grads[0].device())[0]);
  return grads;
}

PMX_REGISTER_OP(multibox_prior)
    .set_infer(prior_infer)
    .set_cpu(prior_cpu)
    .set_gradient(zero_gradients)
    .set_grad_uses({}, {});
PMX_REGISTER_OP(multibox_target)
    .set_num_inputs(3)
    .set_num_outputs(3)
    .set_infer(target_infer)
    .set_cpu(target_cpu)
    .set_gradient(zero_gradients)
    .set_grad_uses({}, {});
PMX_REGISTER_OP(multibox_detection)
    .set_num_inputs(3)
    .set_infer(detection_infer)
    .set_cpu(detection_cpu)
    .set_gradient(zero_gradients)
    .set_grad_uses({}, {});

}  // namespace
}  // namespace pymx
