// The row geometry of sort, argsort, cumsum and cumsum_backward, shared by the CPU ops
// (sort_scan.cc) and the GPU ops (cuda/src/sort_scan.cu), which must agree on it. Plain host code.
#pragma once

#include <string>

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

}  // namespace nn
}  // namespace pymx
