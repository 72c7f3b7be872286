// Pooling's attribute parsing and window geometry, shared by the CPU op (nn_pooling.cc) and the
// GPU op (cuda/src/conv_pool.cu), which must agree on both. Plain host code; PoolGeom is
// trivially copyable so that GPU kernels take it by value, and covering_outputs is constexpr so
// that they call it too.
#pragma once

#include <string>

#include "ops/nn_common.h"
#include "pymx/op.h"

namespace pymx {
namespace nn {

enum class PoolType { kMax, kAvg, kSum };

// Spatial extents right-aligned into 3 dims (depth, height, width), leading ones 1.
struct PoolGeom {
  int nsp = 0;
  PoolType type = PoolType::kMax;
  bool count_include_pad = true;
  int64_t planes = 0;  // batch * channels
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, p[3] = {0, 0, 0};
  int64_t in_sp = 1, out_sp = 1;
};

inline PoolType parse_pool_type(const std::string& t) {
  if (t == "max" || t == "None") return PoolType::kMax;
  if (t == "avg") return PoolType::kAvg;
  if (t == "sum") return PoolType::kSum;
  PMX_THROW(Status::kInvalidArg, "pooling: pool_type '", t, "' is not one of max, avg, sum");
}

// The validated geometry of pooling(data) with MXNet's attributes (see nn_pooling.cc).
inline PoolGeom pool_geometry(const Attrs& attrs, const Shape& data) {
  PoolGeom g;
  g.type = parse_pool_type(attrs.get_str("pool_type", "max"));
  g.count_include_pad = attrs.get_bool("count_include_pad", true);
  const bool global = attrs.get_bool("global_pool", false);
  PMX_CHECK(data.size() >= 3 && data.size() <= 5, "pooling: data shape ", shape_str(data),
            " must have 3, 4 or 5 dimensions (NCW, NCHW or NCDHW)");
  g.nsp = static_cast<int>(data.size()) - 2;
  const std::string layout = attrs.get_str("layout", "None");
  static const char* layouts[] = {"NCW", "NCHW", "NCDHW"};
  PMX_CHECK(layout == "None" || layout == layouts[g.nsp - 1], "pooling: layout '", layout,
            "' is not supported for data ", shape_str(data), " (use ", layouts[g.nsp - 1], ")");
  Shape kernel, stride, pad;
  if (global) {
    kernel.assign(data.begin() + 2, data.end());
    stride = Shape(g.nsp, 1);
    pad = Shape(g.nsp, 0);
  } else {
    kernel = attrs.get_shape("kernel", Shape());
    PMX_CHECK(static_cast<int>(kernel.size()) == g.nsp, "pooling: kernel ", shape_str(kernel),
              " must have one value per spatial dimension of data ", shape_str(data));
    stride = spatial_attr(attrs, "stride", g.nsp, 1, "pooling");
    pad = spatial_attr(attrs, "pad", g.nsp, 0, "pooling");
  }
  const std::string convention = attrs.get_str("pooling_convention", "valid");
  PMX_CHECK(convention == "valid" || convention == "full" || convention == "None",
            "pooling: pooling_convention '", convention, "' is not one of valid, full");
  const bool full = convention == "full";
  g.planes = data[0] * data[1];
  const int off = 3 - g.nsp;
  for (int i = 0; i < g.nsp; ++i) {
    const int64_t extent = data[2 + i];
    PMX_CHECK(kernel[i] >= 1 && stride[i] >= 1 && pad[i] >= 0, "pooling: kernel ",
              shape_str(kernel), " and stride ", shape_str(stride), " must be >= 1, pad ",
              shape_str(pad), " >= 0");
    PMX_CHECK(pad[i] < kernel[i], "pooling: pad ", shape_str(pad), " must be smaller than kernel ",
              shape_str(kernel));
    PMX_CHECK(extent + 2 * pad[i] >= kernel[i], "pooling: kernel ", shape_str(kernel),
              " is larger than the padded input ", shape_str(data), " with pad ", shape_str(pad));
    const int64_t room = extent + 2 * pad[i] - kernel[i];
    g.out[off + i] = (full ? (room + stride[i] - 1) / stride[i] : room / stride[i]) + 1;
    // As PyTorch's ceil_mode: with 'full', a last window starting past the input is dropped.
    if (full && (g.out[off + i] - 1) * stride[i] >= extent + pad[i]) --g.out[off + i];
    g.in[off + i] = extent;
    g.k[off + i] = kernel[i];
    g.s[off + i] = stride[i];
    g.p[off + i] = pad[i];
  }
  g.in_sp = g.in[0] * g.in[1] * g.in[2];
  g.out_sp = g.out[0] * g.out[1] * g.out[2];
  return g;
}

// Outputs first..last (none when first > last) along `dim`.
struct OutputRange {
  int64_t first, last;
};

// The outputs along `dim` whose windows cover input position i (0 <= i < g.in[dim]): output o's
// window starts at o * s - p and covers k positions (its clipping to the input never drops
// one), so o * s - p <= i < o * s - p + k. For the backward as a gather (Note [Deterministic
// mode]).
constexpr OutputRange covering_outputs(const PoolGeom& g, int dim, int64_t i) {
  const int64_t s = g.s[dim], reach = i + g.p[dim];
  const int64_t first = reach < g.k[dim] ? 0 : (reach - g.k[dim]) / s + 1;
  const int64_t last = reach / s < g.out[dim] - 1 ? reach / s : g.out[dim] - 1;
  return {first, last};
}

}  // namespace nn
}  // namespace pymx
