// topk's attribute parsing and row geometry, shared by the CPU op (nn_indexing.cc) and the GPU
// op (cuda/src/topk.cu), which must agree on both. Plain host code; TopkGeom is trivially
// copyable so that GPU kernels take it by value.
#pragma once

#include <string>

#include "ops/nn_common.h"
#include "pymx/op.h"

namespace pymx {
namespace nn {

enum class RetTyp { kIndices, kValue, kBoth, kMask };

inline RetTyp parse_ret_typ(const Attrs& attrs) {
  const std::string t = attrs.get_str("ret_typ", "indices");
  if (t == "indices") return RetTyp::kIndices;
  if (t == "value") return RetTyp::kValue;
  if (t == "both") return RetTyp::kBoth;
  if (t == "mask") return RetTyp::kMask;
  PMX_THROW(Status::kInvalidArg, "topk: ret_typ '", t, "' is not one of indices, value, both, mask");
}

// Rows are `outer * inner` runs of n elements, element j of row (o, i) at (o * n + j) * inner + i.
struct TopkGeom {
  int64_t outer = 1, n = 1, inner = 1, k = 1;
  bool flat = false;  // axis None (or 0-d data): the data is taken as 1-D
  int axis = 0;

  // The shape of the values / indices outputs of data of shape `data`.
  Shape out_shape(const Shape& data) const {
    Shape s = flat ? Shape{n} : data;
    s[axis] = k;
    return s;
  }
};

// axis None flattens the data (the outputs are then 1-D).
inline TopkGeom topk_geom(const Attrs& attrs, const Shape& data, const char* op = "topk") {
  TopkGeom g;
  const std::string* axis_text = attrs.find("axis");
  g.flat = (axis_text && *axis_text == "None") || data.empty();
  const Shape s = g.flat ? Shape{shape_size(data)} : data;
  if (!g.flat) g.axis = normalize_axis(attrs.get_int("axis", -1), static_cast<int>(s.size()), op);
  g.outer = prod(s, 0, g.axis);
  g.n = s[g.axis];
  g.inner = prod(s, g.axis + 1, static_cast<int>(s.size()));
  g.k = attrs.get_int("k", 1);
  if (g.k <= 0) g.k = g.n;  // MXNet: k < 1 selects the whole axis
  PMX_CHECK(g.k <= g.n, op, ": k=", g.k, " is larger than the ", g.n, " elements along axis ",
            g.axis, " of data ", shape_str(data));
  return g;
}

}  // namespace nn
}  // namespace pymx
