// The error function and its inverse, elementwise (CPU definitions: engine/src/ops/erf.cc).
//
// | op          | input | output dtype               |
// |-------------|-------|----------------------------|
// | erf erfinv  | x     | x's if float, else float32 |
//
// CUDA's erf / erfinv (erff / erfinvf in float, which float16 and bfloat16 compute in).
#include "kernel_util.cuh"
#include "launch.h"

namespace pymx {
namespace gpu {
namespace {

template <typename T, bool kInverse>
__global__ void erf_kernel(const T* x, T* y, int64_t n) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    const A v = convert<A>(x[i]);
    if constexpr (std::is_same_v<A, float>) {
      y[i] = convert<T>(kInverse ? erfinvf(v) : erff(v));
    } else {
      y[i] = convert<T>(kInverse ? erfinv(v) : erf(v));
    }
  }
}

template <bool kInverse>
void erf_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                 const std::vector<TBlob>& out) {
  const int64_t n = out[0].size();
  if (n == 0) return;
  const TBlob x = blobs_as(ctx, in, out[0].dtype)[0];  // integers compute in float32
  PMX_GPU_FLOAT_SWITCH(out[0].dtype, T, {
    erf_kernel<T, kInverse><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(x.data<T>(),
                                                                         out[0].data<T>(), n);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("erf").set_gpu(erf_compute<false>);
  op_registry::get_or_create("erfinv").set_gpu(erf_compute<true>);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
