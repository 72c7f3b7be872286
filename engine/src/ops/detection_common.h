// Code shared by the SSD detection operators' CPU kernels (detection.cc) and GPU kernels
// (cuda/src/detection.cu), which must agree on it: the parsing and checking of their attributes,
// the anchor extents of multibox_prior, and the box arithmetic (overlap, encoding of a
// ground-truth box against an anchor, decoding of a prediction). Boxes are corners
// [xmin, ymin, xmax, ymax]. The arithmetic runs in A, the compute type: float for float16,
// bfloat16 and float32 (the precision MXNet computes these operators in), double for float64.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/host_device.h"
#include "pymx/op.h"

namespace pymx {
namespace detection {

// std::min / std::max's exact choices (the first argument unless the comparison says
// otherwise), written out so that both devices take the same one, NaN included.
template <typename A>
PMX_HOST_DEVICE A lesser(A a, A b) { return b < a ? b : a; }
template <typename A>
PMX_HOST_DEVICE A greater(A a, A b) { return a < b ? b : a; }

// Intersection over union of two corner boxes; 0 when the union is not positive.
template <typename A>
PMX_HOST_DEVICE A box_iou(const A* a, const A* b) {
  const A w = greater(A(0), lesser(a[2], b[2]) - greater(a[0], b[0]));
  const A h = greater(A(0), lesser(a[3], b[3]) - greater(a[1], b[1]));
  const A inter = w * h;
  const A uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return uni <= A(0) ? A(0) : inter / uni;
}

// The scales of the encoded offsets: centre x, centre y, log width, log height.
struct Variances {
  float v[4];
};

// multibox_target's regression target of ground-truth box `gt` against `anchor`:
// ((gx - ax) / aw / vx, (gy - ay) / ah / vy, log(gw / aw) / vw, log(gh / ah) / vh).
template <typename A>
PMX_HOST_DEVICE void encode_box(const A* anchor, const A* gt, Variances var, A* out) {
  using std::log;
  const A aw = anchor[2] - anchor[0], ah = anchor[3] - anchor[1];
  const A ax = (anchor[0] + anchor[2]) * A(0.5), ay = (anchor[1] + anchor[3]) * A(0.5);
  const A gw = gt[2] - gt[0], gh = gt[3] - gt[1];
  const A gx = (gt[0] + gt[2]) * A(0.5), gy = (gt[1] + gt[3]) * A(0.5);
  out[0] = (gx - ax) / aw / A(var.v[0]);
  out[1] = (gy - ay) / ah / A(var.v[1]);
  out[2] = log(gw / aw) / A(var.v[2]);
  out[3] = log(gh / ah) / A(var.v[3]);
}

// multibox_detection's box for the offsets `pred` against `anchor` (encode_box's inverse),
// clipped to [0, 1] when `clip`.
template <typename A>
PMX_HOST_DEVICE void decode_box(const A* anchor, const A* pred, Variances var, bool clip, A* out) {
  using std::exp;
  const A aw = anchor[2] - anchor[0], ah = anchor[3] - anchor[1];
  const A ax = (anchor[0] + anchor[2]) / A(2), ay = (anchor[1] + anchor[3]) / A(2);
  const A ox = pred[0] * A(var.v[0]) * aw + ax;
  const A oy = pred[1] * A(var.v[1]) * ah + ay;
  const A half_w = exp(pred[2] * A(var.v[2])) * aw / A(2);
  const A half_h = exp(pred[3] * A(var.v[3])) * ah / A(2);
  const A box[4] = {ox - half_w, oy - half_h, ox + half_w, oy + half_h};
  for (int i = 0; i < 4; ++i) out[i] = clip ? greater(A(0), lesser(A(1), box[i])) : box[i];
}

// ---------------------------------------------------------------------------------------------
// Attributes (host only)
// ---------------------------------------------------------------------------------------------
inline std::vector<double> floats_or(const Attrs& attrs, const char* key,
                                     std::vector<double> fallback) {
  return attrs.has(key) ? attrs.get_floats(key) : fallback;
}

inline Variances parse_variances(const Attrs& attrs, const char* op) {
  const std::vector<double> v = floats_or(attrs, "variances", {0.1, 0.1, 0.2, 0.2});
  PMX_CHECK(v.size() == 4, op, ": variances must have 4 values (x, y, width, height), got ",
            v.size());
  return {{static_cast<float>(v[0]), static_cast<float>(v[1]), static_cast<float>(v[2]),
           static_cast<float>(v[3])}};
}

// multibox_prior's anchors for a height x width feature map: per cell, one anchor per size (of
// aspect ratio 1), then one per further ratio (of size sizes[0]).
template <typename A>
struct PriorGrid {
  int64_t height, width;
  A step_y, step_x, offset_y, offset_x;
  bool clip;
  std::vector<A> half_extents;  // half width, half height of each anchor of a cell

  int64_t anchors_per_cell() const { return static_cast<int64_t>(half_extents.size()) / 2; }
};

inline void check_prior_attrs(const Attrs& attrs, std::vector<double>* sizes,
                              std::vector<double>* ratios, std::vector<double>* steps,
                              std::vector<double>* offsets) {
  *sizes = floats_or(attrs, "sizes", {1.0});
  *ratios = floats_or(attrs, "ratios", {1.0});
  *steps = floats_or(attrs, "steps", {-1.0, -1.0});
  *offsets = floats_or(attrs, "offsets", {0.5, 0.5});
  PMX_CHECK(!sizes->empty() && !ratios->empty(),
            "multibox_prior: sizes and ratios need at least one value each, got ", sizes->size(),
            " sizes and ", ratios->size(), " ratios");
  for (double s : *sizes) PMX_CHECK(s > 0, "multibox_prior: sizes must be > 0, got ", s);
  for (double r : *ratios) PMX_CHECK(r > 0, "multibox_prior: ratios must be > 0, got ", r);
  PMX_CHECK(steps->size() == 2, "multibox_prior: steps must be (step_y, step_x), got ",
            steps->size(), " values");
  PMX_CHECK((*steps)[0] * (*steps)[1] >= 0, "multibox_prior: give both steps or neither (-1 for ",
            "automatic), got (", (*steps)[0], ", ", (*steps)[1], ")");
  PMX_CHECK(offsets->size() == 2, "multibox_prior: offsets must be (offset_y, offset_x), got ",
            offsets->size(), " values");
  for (double o : *offsets)
    PMX_CHECK(o >= 0 && o <= 1, "multibox_prior: offsets must lie in [0, 1], got ", o);
}

// The grid of `data` (N, C, H, W, ...): the arithmetic of each extent is the same on both devices.
template <typename A>
PriorGrid<A> prior_grid(const Attrs& attrs, const Shape& data) {
  std::vector<double> sizes, ratios, steps, offsets;
  check_prior_attrs(attrs, &sizes, &ratios, &steps, &offsets);
  PriorGrid<A> g;
  g.height = data[2];
  g.width = data[3];
  const bool automatic = steps[0] <= 0 || steps[1] <= 0;
  g.step_y = automatic ? A(1) / A(g.height) : A(steps[0]);
  g.step_x = automatic ? A(1) / A(g.width) : A(steps[1]);
  g.offset_y = A(offsets[0]);
  g.offset_x = A(offsets[1]);
  g.clip = attrs.get_bool("clip", false);
  const A height = A(g.height), width = A(g.width);
  auto add = [&](A size, A ratio_root) {
    g.half_extents.push_back(size * height / width * ratio_root / A(2));
    g.half_extents.push_back(size / ratio_root / A(2));
  };
  for (double s : sizes) add(A(s), A(1));
  for (size_t r = 1; r < ratios.size(); ++r) add(A(sizes[0]), std::sqrt(A(ratios[r])));
  return g;
}

// Anchor `k` of cell (row, col), written to out[0..3].
template <typename A, typename T, typename Convert>
PMX_HOST_DEVICE void prior_box(A step_y, A step_x, A offset_y, A offset_x, bool clip,
                               const A* half_extents, int64_t row, int64_t col, int64_t k,
                               T* out, Convert convert) {
  const A cy = (A(row) + offset_y) * step_y, cx = (A(col) + offset_x) * step_x;
  const A hw = half_extents[2 * k], hh = half_extents[2 * k + 1];
  const A box[4] = {cx - hw, cy - hh, cx + hw, cy + hh};
  for (int i = 0; i < 4; ++i) {
    A v = box[i];
    if (clip) v = v < A(0) ? A(0) : (v > A(1) ? A(1) : v);
    out[i] = convert(v);
  }
}

struct TargetParams {
  double overlap_threshold, ignore_label, negative_mining_ratio, negative_mining_thresh;
  int64_t minimum_negative_samples;
  Variances variances;
};

inline TargetParams target_params(const Attrs& attrs) {
  TargetParams p;
  p.overlap_threshold = attrs.get_float("overlap_threshold", 0.5);
  p.ignore_label = attrs.get_float("ignore_label", -1.0);
  p.negative_mining_ratio = attrs.get_float("negative_mining_ratio", -1.0);
  p.negative_mining_thresh = attrs.get_float("negative_mining_thresh", 0.5);
  p.minimum_negative_samples = attrs.get_int("minimum_negative_samples", 0);
  p.variances = parse_variances(attrs, "multibox_target");
  PMX_CHECK(p.negative_mining_ratio <= 0 || p.negative_mining_thresh > 0,
            "multibox_target: negative mining (negative_mining_ratio ", p.negative_mining_ratio,
            ") needs negative_mining_thresh > 0, got ", p.negative_mining_thresh);
  PMX_CHECK(p.minimum_negative_samples >= 0,
            "multibox_target: minimum_negative_samples must be >= 0, got ",
            p.minimum_negative_samples);
  return p;
}

// The first label of highest IoU with anchor j (IoU above -1), or -1; that IoU in *best.
// overlaps is (num_anchors, num_gt).
template <typename A>
PMX_HOST_DEVICE int64_t best_label(const A* overlaps, int64_t num_gt, int64_t j, A* best) {
  int64_t id = -1;
  *best = A(-1);
  for (int64_t k = 0; k < num_gt; ++k) {
    if (overlaps[j * num_gt + k] > *best) {
      *best = overlaps[j * num_gt + k];
      id = k;
    }
  }
  return id;
}

// Softmax probability of class 0 (the background) at anchor j of cls_pred (C, N).
template <typename A, typename T, typename Convert>
PMX_HOST_DEVICE A background_probability(const T* cls_pred, int64_t num_classes,
                                         int64_t num_anchors, int64_t j, Convert convert) {
  using std::exp;
  const T* scores = cls_pred + j;  // class c's score at scores[c * num_anchors]
  A top = convert(scores[0]);
  for (int64_t c = 1; c < num_classes; ++c) top = greater(top, A(convert(scores[c * num_anchors])));
  A sum = A(0);
  for (int64_t c = 0; c < num_classes; ++c) sum += exp(A(convert(scores[c * num_anchors])) - top);
  return exp(A(convert(scores[0])) - top) / sum;
}

// How many hard negatives an item with `positives` of `anchors` anchors gets.
PMX_HOST_DEVICE int64_t negatives_wanted(const TargetParams& p, int64_t positives,
                                         int64_t anchors) {
  // int(positives * ratio) in float, as MXNet.
  int64_t n = static_cast<int64_t>(static_cast<float>(positives) *
                                   static_cast<float>(p.negative_mining_ratio));
  if (n < p.minimum_negative_samples) n = p.minimum_negative_samples;
  return n < anchors - positives ? n : anchors - positives;
}

// The key by which hard negatives are chosen, lowest first: the background probability, NaN
// (from NaN scores) as +inf so that such anchors come last.
template <typename A>
PMX_HOST_DEVICE A background_key(A probability) {
  return probability != probability ? A(INFINITY) : probability;
}

struct DetectionParams {
  bool clip, force_suppress;
  double threshold, nms_threshold;
  int64_t background_id, nms_topk;
  Variances variances;

  // NMS runs only with a threshold in (0, 1]; otherwise the detections stay in anchor order.
  PMX_HOST_DEVICE bool runs_nms() const { return nms_threshold > 0 && nms_threshold <= 1; }
};

inline DetectionParams detection_params(const Attrs& attrs) {
  DetectionParams p;
  p.clip = attrs.get_bool("clip", true);
  p.force_suppress = attrs.get_bool("force_suppress", false);
  p.threshold = attrs.get_float("threshold", 0.01);
  p.nms_threshold = attrs.get_float("nms_threshold", 0.5);
  p.background_id = attrs.get_int("background_id", 0);
  p.nms_topk = attrs.get_int("nms_topk", -1);
  p.variances = parse_variances(attrs, "multibox_detection");
  return p;
}

// The class of anchor `i` of `num_anchors` with the highest score among the classes other than
// the background (the first highest; scores must beat -1), or -1 when none does or the score is
// below the threshold. cls_prob is (num_classes, num_anchors).
template <typename A, typename T, typename Convert>
PMX_HOST_DEVICE int64_t best_class(const T* cls_prob, int64_t num_classes, int64_t num_anchors,
                                   int64_t i, int64_t background_id, A threshold, A* score,
                                   Convert convert) {
  int64_t id = -1;
  *score = A(-1);
  for (int64_t c = 0; c < num_classes; ++c) {
    if (c == background_id) continue;
    const A v = convert(cls_prob[c * num_anchors + i]);
    if (v > *score) {
      *score = v;
      id = c;
    }
  }
  return id >= 0 && *score < threshold ? -1 : id;
}

// The class id a detection reports: classes renumbered without the background.
PMX_HOST_DEVICE int64_t reported_class(int64_t id, int64_t background_id) {
  return id > background_id ? id - 1 : id;
}

}  // namespace detection
}  // namespace pymx
