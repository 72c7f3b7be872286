// The gamma function, ln|gamma| and digamma, elementwise (CPU definitions: engine/src/ops/gamma.cc).
//
// | op                       | input | output dtype               |
// |--------------------------|-------|----------------------------|
// | gamma gammaln _digamma   | x     | x's if float, else float32 |
//
// CUDA's tgamma / lgamma (tgammaf / lgammaf in float, which float16 and bfloat16 compute in) and
// the digamma of ops/gamma_math.h, the same function as on the CPU.
#include "kernel_util.cuh"
#include "launch.h"
#include "ops/gamma_math.h"

namespace pymx {
namespace gpu {
namespace {

enum class Fn { kGamma, kGammaln, kDigamma };

template <Fn kFn, typename A>
__device__ __forceinline__ A apply(A x) {
  if constexpr (kFn == Fn::kDigamma) {
    return ops::digamma(x);
  } else if constexpr (std::is_same_v<A, float>) {
    return kFn == Fn::kGamma ? tgammaf(x) : lgammaf(x);
  } else {
    return kFn == Fn::kGamma ? tgamma(x) : lgamma(x);
  }
}

template <typename T, Fn kFn>
__global__ void gamma_kernel(const T* x, T* y, int64_t n) {
  PMX_GRID_STRIDE_LOOP(i, n) {
    y[i] = convert<T>(apply<kFn>(convert<AccT<T>>(x[i])));
  }
}

template <Fn kFn>
void gamma_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t n = out[0].size();
  if (n == 0) return;
  const TBlob x = blobs_as(ctx, in, out[0].dtype)[0];  // integers compute in float32
  PMX_GPU_FLOAT_SWITCH(out[0].dtype, T, {
    gamma_kernel<T, kFn><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(x.data<T>(), out[0].data<T>(), n);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("gamma").set_gpu(gamma_compute<Fn::kGamma>);
  op_registry::get_or_create("gammaln").set_gpu(gamma_compute<Fn::kGammaln>);
  op_registry::get_or_create("_digamma").set_gpu(gamma_compute<Fn::kDigamma>);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
