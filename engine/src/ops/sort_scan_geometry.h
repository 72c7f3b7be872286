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

// `axis_default` is the axis when the attribute is absent: "-1" (sort, argsort) or "None"
// (cumsum). An axis on 0-d data is out of range.
inline RowGeom row_geom(const Attrs& attrs, const Shape& data, const char* op,
                        const std::string& axis_default) {
  RowGeom g;
  const std::string axis_text = attrs.get_str("axis", axis_default);
  g.flat = axis_text == "None";
  if (g.flat) {
    g.view = {1, shape_size(data), 1};
  } else {
    PMX_CHECK(!data.empty(), op, ": axis ", axis_text, " is out of range for a 0-d array; pass "
              "axis None to work on it as a 1-d array");
    g.view = axis_view(data, attrs.get_int("axis"), op);
  }
  return g;
}

}  // namespace nn
}  // namespace pymx
