// The shape arithmetic of group_norm and instance_norm, shared by their CPU (nn_group_norm.cc) and
// GPU (cuda/src/group_norm.cu) kernels.
#pragma once

#include <cstdint>

#include "pymx/op.h"

namespace pymx {
namespace nn {

// Data (N, C, d1, d2, ...) seen as N * groups groups of `group_size` contiguous elements; group
// (n, g) holds channels [g * C / groups, (g + 1) * C / groups), each `inner` = d1 * d2 * ...
// contiguous elements. Row r = n * C + c is channel c of sample n. GPU kernels take it by value
// (its members are constexpr, so device code may call them).
struct GroupNormView {
  int64_t batch = 0, channels = 0, groups = 1, inner = 1;
  // instance_norm of zero channels has zero groups.
  constexpr int64_t channels_per_group() const { return groups == 0 ? 0 : channels / groups; }
  constexpr int64_t group_size() const { return channels_per_group() * inner; }
  constexpr int64_t num_groups_total() const { return batch * groups; }
  constexpr int64_t rows() const { return batch * channels; }
};

// The view of group_norm's (instance = false: attribute num_groups) or instance_norm's
// (instance = true: a group per channel) data; the errors name `op`, the values and the shape.
inline GroupNormView group_norm_view(const Shape& data, const Attrs& attrs, bool instance,
                                     const char* op) {
  PMX_CHECK(data.size() >= 3, op, ": data must have at least 3 dimensions (N, C, spatial...), "
            "got ", shape_str(data));
  GroupNormView v;
  v.batch = data[0];
  v.channels = data[1];
  for (size_t d = 2; d < data.size(); ++d) v.inner *= data[d];
  if (instance) {
    v.groups = v.channels;
  } else {
    v.groups = attrs.get_int("num_groups", 1);
    PMX_CHECK(v.groups >= 1, op, ": num_groups must be >= 1, got ", v.groups);
    PMX_CHECK(v.channels % v.groups == 0, op, ": num_groups ", v.groups, " does not divide the ",
              v.channels, " channels of data ", shape_str(data));
  }
  return v;
}

// eps: group_norm's default is 1e-5, instance_norm's 1e-3 (MXNet's defaults).
inline double group_norm_eps(const Attrs& attrs, bool instance) {
  const double eps = attrs.get_float("eps", instance ? 1e-3 : 1e-5);
  PMX_CHECK(eps >= 0, instance ? "instance_norm" : "group_norm", ": eps must be >= 0, got ", eps);
  return eps;
}

}  // namespace nn
}  // namespace pymx
