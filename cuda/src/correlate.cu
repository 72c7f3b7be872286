// 1-D cross-correlation on the GPU (CPU definition and the attrs: engine/src/ops/correlate.cc).
// One thread per output: out[k] = sum over the taps j with a[k + j + shift] inside a of
// a[k + j + shift] * v[j], summed in AccT (float for 16-bit floats) in the CPU's order.
#include <algorithm>

#include "kernel_util.cuh"
#include "launch.h"

namespace pymx {
namespace gpu {
namespace {

template <typename T>
__global__ void correlate_kernel(const T* a, int64_t n, const T* v, int64_t m, int64_t shift,
                                 T* y, int64_t count) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(k, count) {
    const int64_t first = max(int64_t(0), -(k + shift)), last = min(m, n - (k + shift));
    A sum = A(0);
    for (int64_t j = first; j < last; ++j)
      sum = A(sum + convert<A>(a[k + j + shift]) * convert<A>(v[j]));
    y[k] = convert<T>(sum);
  }
}

void correlate_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out) {
  const int64_t count = out[0].size();
  if (count == 0) return;
  PMX_GPU_TYPE_SWITCH(out[0].dtype, T, {
    correlate_kernel<T><<<grid_for(count), kBlock, 0, stream_of(ctx)>>>(
        static_cast<const T*>(in[0].dptr), in[0].size(), static_cast<const T*>(in[1].dptr),
        in[1].size(), ctx.attrs->get_int("shift"), static_cast<T*>(out[0].dptr), count);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("correlate").set_gpu(correlate_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
