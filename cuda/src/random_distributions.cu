// The rejection samplers on the GPU (CPU definitions and the op table:
// engine/src/ops/random_distributions.cc). Each thread runs the shared sampler of
// engine/src/ops/random_samplers.h on its element's own stream, so a GPU draw uses exactly the
// uniforms its CPU twin uses. Counts equal the CPU's unless a CUDA logarithm or exponential one
// ulp away from the host's flips an acceptance test (probability about 1e-16 per test); gamma and
// beta draws equal the CPU's to a few ulps of double.
#include <cmath>
#include <type_traits>

#include "kernel_util.cuh"
#include "launch.h"
#include "ops/random_samplers.h"

namespace pymx {
namespace gpu {
namespace {

enum class Sampler : int { kGamma, kBeta, kPoisson, kBinomial };

// y[i] = the sampler's draw with parameters a[i] (and b[i]), converted to an integer output by
// rng::to_count.
template <typename T>
__global__ void sample_kernel(T* y, const double* a, const double* b, int64_t n, uint64_t seed,
                              Sampler sampler) {
  PMX_GRID_STRIDE_LOOP(i, n) {
    rng::ElementStream stream(seed, static_cast<uint64_t>(i));
    double v;
    switch (sampler) {
      case Sampler::kGamma: v = rng::sample_gamma(a[i], stream); break;
      case Sampler::kBeta: v = rng::sample_beta(a[i], b[i], stream); break;
      case Sampler::kPoisson: v = rng::sample_poisson(a[i], stream); break;
      default: v = rng::sample_binomial(a[i], b[i], stream); break;  // kBinomial
    }
    if constexpr (std::is_integral_v<T>) {
      y[i] = rng::to_count<T>(v);
    } else {
      y[i] = static_cast<T>(v);
    }
  }
}

void sample(const OpContext& ctx, const std::vector<TBlob>& in, const TBlob& out, Sampler sampler) {
  const int64_t n = out.size();
  if (n == 0) return;
  const double* a = in[0].data<double>();
  const double* b = in.size() > 1 ? in[1].data<double>() : nullptr;
  // Output dtypes: float32 and float64 (gamma, beta), also int32 and int64 (counts); see the
  // op's infer.
  switch (out.dtype) {
    case DType::kFloat32:
      sample_kernel<float><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(out.data<float>(), a, b, n,
                                                                       ctx.seed, sampler);
      break;
    case DType::kFloat64:
      sample_kernel<double><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(out.data<double>(), a, b,
                                                                        n, ctx.seed, sampler);
      break;
    case DType::kInt32:
      sample_kernel<int32_t><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(out.data<int32_t>(), a,
                                                                         b, n, ctx.seed, sampler);
      break;
    case DType::kInt64:
      sample_kernel<int64_t><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(out.data<int64_t>(), a,
                                                                         b, n, ctx.seed, sampler);
      break;
    default:
      PMX_ASSERT(false, "random sampler: dtype ", dtype_name(out.dtype), " passed inference");
  }
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  using Blobs = const std::vector<TBlob>&;
  const auto kernel = [](Sampler sampler) {
    return [sampler](const OpContext& ctx, Blobs in, Blobs out) {
      sample(ctx, in, out[0], sampler);
    };
  };
  op_registry::get_or_create("random_gamma").set_gpu(kernel(Sampler::kGamma));
  op_registry::get_or_create("random_beta").set_gpu(kernel(Sampler::kBeta));
  op_registry::get_or_create("random_poisson").set_gpu(kernel(Sampler::kPoisson));
  op_registry::get_or_create("random_binomial").set_gpu(kernel(Sampler::kBinomial));
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
