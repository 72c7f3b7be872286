// The row geometry of sort, argsort, cumsum and cumsum_backward, and the sort keys of sort and
// argsort, shared by the CPU ops (sort_scan.cc) and the GPU ops (cuda/src/sort_scan.cu), which
// must agree on both. Host code, and for the keys device code too.
#pragma once

#include <cstdint>
#include <string>

#include "ops/host_device.h"
#include "ops/nn_common.h"
#include "pymx/op.h"

namespace pymx {
namespace nn {

// The rows an op works along: the attribute `axis`, or the flattened array when it is "None"
// (the output is then 1-D). Rows are `outer * inner` runs of n elements (AxisView).
struct RowGeom {
  AxisView view;
  bool flat = false;

  int64_t rows() const { return view.outer * view.inner; }
  // The output shape for data of shape `data`.
  Shape out_shape(const Shape& data) const { return flat ? Shape{shape_size(data)} : data; }
};

// The text of the attribute `axis`, "None" included (Attrs::get_str takes "None" as absent);
// `axis_default` when it is absent: "-1" (sort, argsort) or "None" (cumsum).
inline std::string axis_text(const Attrs& attrs, const std::string& axis_default) {
  const std::string* given = attrs.find("axis");
  return given ? *given : axis_default;
}

// An axis on 0-d data is out of range.
inline RowGeom row_geom(const Attrs& attrs, const Shape& data, const char* op,
                        const std::string& axis_default) {
  RowGeom g;
  const std::string text = axis_text(attrs, axis_default);
  g.flat = text == "None";
  if (g.flat) {
    g.view = {1, shape_size(data), 1};
  } else {
    PMX_CHECK(!data.empty(), op, ": axis ", text, " is out of range for a 0-d array; pass "
              "axis None to work on it as a 1-d array");
    const int64_t axis = attrs.find("axis") ? attrs.get_int("axis") : std::stoll(axis_default);
    g.view = axis_view(data, axis, op);
  }
  return g;
}

// Note [Sort keys]
// ~~~~~~~~~~~~~~~~
// sort and argsort order elements by an unsigned key whose integer order is the sort order
// (Note [Sort order] in sort_scan.cc): a float's key is its bit pattern with the sign bit set
// when positive and all bits flipped when negative, every NaN gets the largest key and -0.0 the
// key of +0.0 (so the two tie); a signed integer's key flips the sign bit; descending order
// takes the complement. Sorting the keys stably is then all there is to it, on any device, and
// no float comparison (false for every NaN) is ever made.

// +inf's bit pattern in each float format.
constexpr uint16_t kHalfInfBits = 0x7c00;
constexpr uint16_t kBFloat16InfBits = 0x7f80;
constexpr uint32_t kFloatInfBits = 0x7f800000u;
constexpr uint64_t kDoubleInfBits = 0x7ff0000000000000ull;

// The ascending key of the float with bit pattern `bits` (K: the unsigned type of its width).
template <typename K>
PMX_HOST_DEVICE K float_sort_key(K bits, K inf_bits) {
  constexpr K kSign = K(K(1) << (sizeof(K) * 8 - 1));
  const K magnitude = K(bits & K(~kSign));
  if (magnitude > inf_bits) return K(~K(0));  // NaN
  if (magnitude == 0) return kSign;            // -0.0 and +0.0
  return (bits & kSign) ? K(~bits) : K(bits | kSign);
}

// The ascending key of an integer with bit pattern `bits`.
template <typename K>
PMX_HOST_DEVICE K integer_sort_key(K bits, bool is_signed) {
  return is_signed ? K(bits ^ K(K(1) << (sizeof(K) * 8 - 1))) : bits;
}

}  // namespace nn
}  // namespace pymx
