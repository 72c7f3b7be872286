// Samplers with per-element rejection loops (uses_rng: invoke() hands each call its own seed,
// Note [RNG seeds] in invoke.cc; element streams: Note [Per-element random streams] in
// random_samplers.h, where the algorithms are). Parameters come as float64 arrays of the output's
// shape (pymx.np.random broadcasts them); element i of the output uses element i of each. None is
// differentiable: the scale of a gamma is applied by pymx.np.random, so its gradient flows.
//
//   op               inputs          attrs                      output
//   random_gamma     alpha           dtype (float32|float64)    Gamma(alpha, 1)
//   random_beta      a, b            dtype (float32|float64)    Beta(a, b)
//   random_poisson   lam             dtype (int64 default; int32, float32, float64)   Poisson(lam)
//   random_binomial  n, p            dtype (as random_poisson)  Binomial(n, p)
//
// Invalid parameters (pymx.np.random refuses them before it launches) give NaN in a float output
// and -1 in an integer one; counts beyond an integer dtype's range saturate at its maximum.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "ops/elemwise.h"
#include "ops/random_samplers.h"
#include "parallel.h"

namespace pymx {
namespace {

// Elements per parallel chunk: each costs tens of nanoseconds to a microsecond.
constexpr int64_t kGrain = 2048;

bool is_count_dtype(DType dtype) {
  return dtype == DType::kInt64 || dtype == DType::kInt32 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}

// Every parameter is a float64 array of one shape, the output's.
InferFn infer_sampler(const char* op, DType default_dtype, bool counts) {
  return [op, default_dtype, counts](const Attrs& attrs, const std::vector<Shape>& in,
                                     const std::vector<DType>& dt, std::vector<Shape>* out,
                                     std::vector<DType>* odt) {
    for (size_t i = 0; i < in.size(); ++i) {
      PMX_CHECK(dt[i] == DType::kFloat64, op, ": parameter ", i, " must be float64, got ",
                dtype_name(dt[i]));
      PMX_CHECK(in[i] == in[0], op, ": parameters have different shapes ", shape_str(in[0]),
                " and ", shape_str(in[i]));
    }
    const DType dtype = attrs.get_dtype("dtype", default_dtype);
    const bool supported = counts ? is_count_dtype(dtype)
                                  : dtype == DType::kFloat32 || dtype == DType::kFloat64;
    PMX_CHECK(supported, op, ": dtype ", dtype_name(dtype), " is not supported (",
              counts ? "int32, int64, float32 or float64" : "float32 or float64", ")");
    (*out)[0] = in[0];
    (*odt)[0] = dtype;
  };
}

// y[i] = draw(params at i, stream of element i), converted to the output dtype.
template <typename Draw>
void sample(const OpContext& ctx, const std::vector<TBlob>& in, const TBlob& out, Draw draw) {
  const int64_t n = out.size();
  const uint64_t seed = ctx.seed;
  const double* a = in[0].data<double>();
  const double* b = in.size() > 1 ? in[1].data<double>() : nullptr;
  PMX_TYPE_SWITCH(out.dtype, T, {
    T* y = out.data<T>();
    parallel_for(0, n, kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        rng::ElementStream stream(seed, static_cast<uint64_t>(i));
        const double v = draw(a[i], b ? b[i] : 0.0, stream);
        if constexpr (std::is_integral_v<T>) {
          y[i] = rng::to_count<T>(v);
        } else {
          y[i] = static_cast<T>(static_cast<ops::compute_t<T>>(v));
        }
      }
    });
  });
}

}  // namespace

PMX_REGISTER_OP(random_gamma)
    .set_num_inputs(1)
    .set_uses_rng()
    .set_infer(infer_sampler("random_gamma", DType::kFloat32, false))
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      sample(ctx, in, out[0], [](double alpha, double, rng::ElementStream& s) {
        return rng::sample_gamma(alpha, s);
      });
    });

PMX_REGISTER_OP(random_beta)
    .set_num_inputs(2)
    .set_uses_rng()
    .set_infer(infer_sampler("random_beta", DType::kFloat32, false))
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      sample(ctx, in, out[0], [](double a, double b, rng::ElementStream& s) {
        return rng::sample_beta(a, b, s);
      });
    });

PMX_REGISTER_OP(random_poisson)
    .set_num_inputs(1)
    .set_uses_rng()
    .set_infer(infer_sampler("random_poisson", DType::kInt64, true))
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      sample(ctx, in, out[0], [](double lam, double, rng::ElementStream& s) {
        return rng::sample_poisson(lam, s);
      });
    });

PMX_REGISTER_OP(random_binomial)
    .set_num_inputs(2)
    .set_uses_rng()
    .set_infer(infer_sampler("random_binomial", DType::kInt64, true))
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      sample(ctx, in, out[0], [](double n, double p, rng::ElementStream& s) {
        return rng::sample_binomial(n, p, s);
      });
    });

}  // namespace pymx
