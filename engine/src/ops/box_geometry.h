// Box overlap maths and box_nms's attributes, shared by the CPU kernels (bounding_box.cc) and
// the GPU kernels (cuda/src/bounding_box.cu), which must agree on them to the bit.
//
// A box is 4 consecutive values: 'corner' [xmin, ymin, xmax, ymax] or 'center' [x, y, width,
// height]. The overlap expressions are written as MXNet's (the same comparisons, in the same
// order), so NaN coordinates give what MXNet gives.
#pragma once

#include <cstdint>
#include <string>

#include "ops/host_device.h"
#include "pymx/op.h"

namespace pymx {
namespace box {

enum class Format { kCorner, kCenter };

inline Format parse_format(const std::string& text, const char* op, const char* key) {
  if (text == "corner") return Format::kCorner;
  if (text == "center") return Format::kCenter;
  PMX_THROW(Status::kInvalidArg, op, ": ", key, " '", text, "' is not 'corner' or 'center'");
}

// The overlap of two boxes along one axis; `a` and `b` point at the axis's first value
// (a[0], a[2] are xmin, xmax or x, width). Never negative.
template <typename T>
PMX_HOST_DEVICE T axis_overlap(const T* a, const T* b, Format format) {
  T w;
  if (format == Format::kCorner) {
    const T left = a[0] > b[0] ? a[0] : b[0];
    const T right = a[2] < b[2] ? a[2] : b[2];
    w = right - left;
  } else {
    const T aw = a[2] / T(2), bw = b[2] / T(2);
    const T al = a[0] - aw, ar = a[0] + aw, bl = b[0] - bw, br = b[0] + bw;
    const T left = bl > al ? bl : al;
    const T right = br < ar ? br : ar;
    w = right - left;
  }
  return w > T(0) ? w : T(0);
}

// A box's area; 0 when its width or height is negative.
template <typename T>
PMX_HOST_DEVICE T area(const T* box, Format format) {
  const T width = format == Format::kCorner ? box[2] - box[0] : box[2];
  const T height = format == Format::kCorner ? box[3] - box[1] : box[3];
  return (width < T(0) || height < T(0)) ? T(0) : width * height;
}

// box_iou's value: intersection over union, 0 for boxes that do not overlap.
template <typename T>
PMX_HOST_DEVICE T iou(const T* a, const T* b, Format format) {
  const T inter = axis_overlap(a, b, format) * axis_overlap(a + 1, b + 1, format);
  if (inter <= T(0)) return T(0);
  return inter / (area(a, format) + area(b, format) - inter);
}

// box_nms's test: whether `b` overlaps `a` by more than `thresh` (0 / 0 for two empty boxes is
// NaN, which suppresses nothing).
template <typename T>
PMX_HOST_DEVICE bool suppresses(const T* a, const T* b, Format format, float thresh) {
  const T inter = axis_overlap(a, b, format) * axis_overlap(a + 1, b + 1, format);
  return inter / (area(a, format) + area(b, format) - inter) > static_cast<T>(thresh);
}

// Rewrites the box at `v` from `from` to the other format.
template <typename T>
PMX_HOST_DEVICE void convert_format(T* v, Format from) {
  if (from == Format::kCorner) {
    const T left = v[0], top = v[1], right = v[2], bottom = v[3];
    v[0] = (left + right) / T(2);
    v[1] = (top + bottom) / T(2);
    v[2] = right - left;
    v[3] = bottom - top;
  } else {
    const T x = v[0], y = v[1], half_w = v[2] / T(2), half_h = v[3] / T(2);
    v[0] = x - half_w;
    v[1] = y - half_h;
    v[2] = x + half_w;
    v[3] = y + half_h;
  }
}

// box_nms's attributes and the layout of data (..., num_boxes, width): batches of num_boxes
// rows. Trivially copyable: GPU kernels take it by value.
struct NmsParams {
  int64_t batches = 1, num_boxes = 0, width = 0;
  float overlap_thresh = 0.5f, valid_thresh = 0.f;
  int64_t topk = -1;  // the boxes that take part per batch: min(topk, num_boxes), all when < 0
  int64_t coord_start = 2, score_index = 1, id_index = -1, background_id = -1;
  bool force_suppress = false;
  Format in_format = Format::kCorner, out_format = Format::kCorner;

  PMX_HOST_DEVICE int64_t candidates() const {
    return topk < 0 || topk > num_boxes ? num_boxes : topk;
  }
  // Whether box `row` (its width values) takes part: score above valid_thresh (NaN never is)
  // and, with id_index and background_id, not of the background class.
  template <typename T>
  PMX_HOST_DEVICE bool valid(const T* row) const {
    if (!(row[score_index] > static_cast<T>(valid_thresh))) return false;
    return id_index < 0 || background_id < 0 || row[id_index] != static_cast<T>(background_id);
  }
  // Whether boxes `a` and `b` (rows) may suppress each other: any two with force_suppress or
  // without id_index, else two of one class (ids compared as ints, as MXNet).
  template <typename T>
  PMX_HOST_DEVICE bool same_group(const T* a, const T* b) const {
    return force_suppress || id_index < 0 ||
           static_cast<int64_t>(a[id_index]) == static_cast<int64_t>(b[id_index]);
  }
};

// The checked parameters of box_nms on data of shape `data`; errors name the values.
inline NmsParams nms_params(const Attrs& attrs, const Shape& data, const char* op) {
  PMX_CHECK(data.size() >= 2, op, ": data must have at least 2 dimensions (..., num_boxes, "
            "box_width), got shape ", shape_str(data));
  NmsParams p;
  p.width = data.back();
  p.num_boxes = data[data.size() - 2];
  for (size_t d = 0; d + 2 < data.size(); ++d) p.batches *= data[d];
  p.overlap_thresh = static_cast<float>(attrs.get_float("overlap_thresh", 0.5));
  p.valid_thresh = static_cast<float>(attrs.get_float("valid_thresh", 0));
  p.topk = attrs.get_int("topk", -1);
  p.coord_start = attrs.get_int("coord_start", 2);
  p.score_index = attrs.get_int("score_index", 1);
  p.id_index = attrs.get_int("id_index", -1);
  p.background_id = attrs.get_int("background_id", -1);
  p.force_suppress = attrs.get_bool("force_suppress", false);
  p.in_format = parse_format(attrs.get_str("in_format", "corner"), op, "in_format");
  p.out_format = parse_format(attrs.get_str("out_format", "corner"), op, "out_format");
  const int64_t expected = p.id_index > 0 ? 6 : 5;
  PMX_CHECK(p.width >= expected, op, ": each box needs at least ", expected,
            " values (score and 4 coordinates", p.id_index > 0 ? ", and an id" : "",
            "), data has ", p.width, " (shape ", shape_str(data), ")");
  const int64_t coord_end = p.coord_start + 3;
  PMX_CHECK(p.coord_start >= 0 && coord_end < p.width, op, ": coordinates [", p.coord_start,
            ", ", coord_end, "] fall outside the box width ", p.width);
  PMX_CHECK(p.score_index >= 0 && p.score_index < p.width, op, ": score_index ", p.score_index,
            " falls outside the box width ", p.width);
  PMX_CHECK(p.score_index < p.coord_start || p.score_index > coord_end, op, ": score_index ",
            p.score_index, " is one of the coordinates [", p.coord_start, ", ", coord_end, "]");
  if (p.id_index >= 0) {
    PMX_CHECK(p.id_index < p.width, op, ": id_index ", p.id_index,
              " falls outside the box width ", p.width);
    PMX_CHECK(p.id_index < p.coord_start || p.id_index > coord_end, op, ": id_index ",
              p.id_index, " is one of the coordinates [", p.coord_start, ", ", coord_end, "]");
    PMX_CHECK(p.id_index != p.score_index, op, ": id_index and score_index are both ",
              p.id_index);
  }
  return p;
}

}  // namespace box
}  // namespace pymx
