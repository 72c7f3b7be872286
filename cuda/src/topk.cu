// topk on the GPU (CPU definition: engine/src/ops/nn_indexing.cc; the attribute parsing and row
// geometry both use: engine/src/ops/topk_geometry.h).
//
// | op            | inputs                  | outputs               | attrs |
// |---------------|-------------------------|-----------------------|-------|
// | topk          | data                    | 1 or 2 (ret_typ both) | axis (-1 or None), k (1), ret_typ (indices | value | both | mask), is_ascend (False), dtype (float32: of indices) |
// | topk_backward | out_grad, data, indices | data_grad             | axis, k |
//
// Note [GPU topk by the rows' sort]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The CPU op stable-sorts each row's positions by sort key (Note [Sort keys]: NaN above +inf,
// -0.0 tied with +0.0; complemented for largest first), so ties keep the lower index first.
// argsort's GPU sort of the rows (sorted_positions, sort_keys.cuh) is stable on the same keys,
// so keeping the first k of its positions in each row gives the same indices bit for bit.
#include "kernel_util.cuh"
#include "launch.h"
#include "sort_keys.cuh"
#include "ops/topk_geometry.h"

namespace pymx {
namespace gpu {
namespace {

using nn::RetTyp;
using nn::TopkGeom;

// Writes the first k sorted entries of every row: values (may be null) and indices (may be
// null) at (o * k + j) * inner + i, or 1 into `mask` at the source position.
template <typename T, typename I>
__global__ void write_topk_kernel(const T* x, const int32_t* sorted, TopkGeom g, T* values,
                                  I* indices, T* mask) {
  PMX_GRID_STRIDE_LOOP(e, g.outer * g.inner * g.k) {
    const int64_t j = e % g.k, r = e / g.k, o = r / g.inner, i = r % g.inner;
    const int64_t src = sorted[r * g.n + j];
    const int64_t dst = (o * g.k + j) * g.inner + i;
    if (values) values[dst] = x[(o * g.n + src) * g.inner + i];
    if (indices) indices[dst] = convert<I>(src);
    if (mask) mask[(o * g.n + src) * g.inner + i] = convert<T>(1.0f);
  }
}

template <typename T>
void write_topk(const OpContext& ctx, const TopkGeom& g, RetTyp ret, const int32_t* sorted,
                const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  cudaStream_t s = stream_of(ctx);
  const T* x = in[0].data<T>();
  const unsigned grid = grid_for(g.outer * g.inner * g.k);
  switch (ret) {
    case RetTyp::kValue:
      write_topk_kernel<T, int32_t><<<grid, kBlock, 0, s>>>(x, sorted, g, out[0].data<T>(),
                                                            nullptr, nullptr);
      break;
    case RetTyp::kMask:
      fill_blob(out[0], 0.0, s);
      write_topk_kernel<T, int32_t><<<grid, kBlock, 0, s>>>(x, sorted, g, nullptr, nullptr,
                                                            out[0].data<T>());
      break;
    case RetTyp::kIndices:
      PMX_GPU_TYPE_SWITCH(out[0].dtype, I, {
        write_topk_kernel<T, I><<<grid, kBlock, 0, s>>>(x, sorted, g, nullptr, out[0].data<I>(),
                                                        nullptr);
      });
      break;
    case RetTyp::kBoth:
      PMX_GPU_TYPE_SWITCH(out[1].dtype, I, {
        write_topk_kernel<T, I><<<grid, kBlock, 0, s>>>(x, sorted, g, out[0].data<T>(),
                                                        out[1].data<I>(), nullptr);
      });
      break;
  }
  PMX_KERNEL_LAUNCH_CHECK();
}

void topk_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const TopkGeom g = nn::topk_geom(*ctx.attrs, in[0].shape);
  const RetTyp ret = nn::parse_ret_typ(*ctx.attrs);
  if (in[0].size() == 0) return;  // every output is empty too
  const bool ascend = ctx.attrs->get_bool("is_ascend", false);
  const int32_t* sorted = sorted_positions(ctx, in[0], {g.outer, g.n, g.inner}, ascend, "topk");
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, { write_topk<T>(ctx, g, ret, sorted, in, out); });
}

// dx[(o * n + indices[pos]) * inner + i] = dy[pos] for every output position pos.
template <typename T, typename I>
__global__ void topk_scatter_kernel(const T* dy, const I* indices, T* dx, TopkGeom g) {
  PMX_GRID_STRIDE_LOOP(pos, g.outer * g.k * g.inner) {
    const int64_t i = pos % g.inner, o = pos / (g.k * g.inner);
    const int64_t k = convert<int64_t>(indices[pos]);
    // The gradient recomputes the indices with topk, so they are in range; an index from
    // elsewhere that is not must not write outside dx (the CPU kernel raises on it).
    if (k >= 0 && k < g.n) dx[(o * g.n + k) * g.inner + i] = dy[pos];
  }
}

void topk_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const TopkGeom g = nn::topk_geom(*ctx.attrs, in[1].shape);
  cudaStream_t s = stream_of(ctx);
  fill_blob(out[0], 0.0, s);
  const int64_t n = in[0].size();
  if (n == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[1].dtype, T, {
    PMX_GPU_TYPE_SWITCH(in[2].dtype, I, {
      topk_scatter_kernel<T, I><<<grid_for(n), kBlock, 0, s>>>(in[0].data<T>(), in[2].data<I>(),
                                                              out[0].data<T>(), g);
    });
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("topk").set_gpu(topk_compute);
  op_registry::get_or_create("topk_backward").set_gpu(topk_backward_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
