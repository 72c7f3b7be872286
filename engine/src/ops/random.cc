// Random sampling (uses_rng: invoke() hands each call its own seed, see Note [RNG seeds] in
// invoke.cc). Numbers come from a counter-based generator, element i from hash(seed, i), so a
// result depends only on the seed, never on threads.
//
//   op           attrs                                   output
//   uniform      low (0), high (1), shape, dtype          U[low, high)
//   normal       loc (0), scale (1), shape, dtype         N(loc, scale^2)
//   randint      low, high (None: [0, low)), shape, dtype (int64)   integers in [low, high)
//   permutation  n, dtype (int64)                        a random permutation of 0..n-1
//
// The other distributions: random_distributions.cc (gamma, poisson, binomial) and
// pymx/numpy/random.py (compositions of these ops).
//
// Note [Normal draws in blocks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Box-Muller spent nearly all its time in glibc's scalar log and cos (25 ns an element). The
// kernel now draws a block of uniforms, takes their log and cos by libmvec (Note [Vector math
// through libmvec]) and combines them, in double as before. Element i still uses the uniforms
// 2i and 2i+1, so np.random.seed gives the same draws as before; the values can differ from the
// scalar loop's by libmvec's 1-4 ulp of double, which rounding to float32 almost always hides.
// Every element is computed the same way wherever its block starts, and the blocks are split
// over the intra-op threads, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu_isa.h"
#include "ops/elemwise.h"
#include "ops/random_samplers.h"
#include "ops/uniform_cap.h"
#include "ops/vector_math.h"
#include "parallel.h"

namespace pymx {
namespace {

// The i-th 64 random bits of the stream `seed`.
uint64_t bits(uint64_t seed, uint64_t i) { return rng::splitmix(seed ^ rng::splitmix(i)); }

// Uniform in [0, 1) with 53 random bits.
double unit(uint64_t seed, uint64_t i) { return static_cast<double>(bits(seed, i) >> 11) * 0x1.0p-53; }

Shape random_shape(const Attrs& attrs, const char* op) {
  const Shape shape = attrs.get_shape("shape", Shape());
  for (int64_t d : shape)
    PMX_CHECK(d >= 0, op, ": negative dimensions are not allowed (shape ", shape_str(shape), ")");
  return shape;
}

InferFn infer_random(const char* op, DType default_dtype) {
  return [op, default_dtype](const Attrs& attrs, const std::vector<Shape>&,
                             const std::vector<DType>&, std::vector<Shape>* out,
                             std::vector<DType>* odt) {
    (*out)[0] = random_shape(attrs, op);
    (*odt)[0] = attrs.get_dtype("dtype", default_dtype);
  };
}

// randint draws from [low, high); every value in it must be representable in the output dtype,
// or the cast would silently wrap.
void check_randint_bounds(int64_t low, int64_t high, DType dtype) {
  int64_t lo = 0, hi = 0;  // representable values [lo, hi]
  switch (dtype) {
    case DType::kBool: lo = 0; hi = 1; break;
    case DType::kUint8: lo = 0; hi = 255; break;
    case DType::kInt8: lo = -128; hi = 127; break;
    case DType::kInt32: lo = INT32_MIN; hi = INT32_MAX; break;
    default: return;  // int64 holds any int64 bound; floats hold every value, if inexactly
  }
  PMX_CHECK(low >= lo && high - 1 <= hi, "randint: the range [", low, ", ", high,
            ") does not fit dtype ", dtype_name(dtype), " (values ", lo, " to ", hi, ")");
}

// Elements per parallel chunk of the samplers: enough work to pay for handing it to a thread.
constexpr int64_t kGrain = 16384;

// out[i] = sample(i) converted to out's dtype, over the intra-op threads (each element depends
// only on i and the seed).
template <typename F>
void generate(const TBlob& out, F sample) {
  const int64_t n = out.size();
  PMX_TYPE_SWITCH(out.dtype, T, {
    T* y = out.data<T>();
    parallel_for(0, n, kGrain, [=](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        y[i] = static_cast<T>(static_cast<ops::compute_t<T>>(sample(i)));
    });
  });
}

// Standard normal draws per block (Note [Normal draws in blocks]).
constexpr int64_t kNormalBlock = 512;

// v[i] = fn(v[i]) for i < n, by libmvec where this machine has it.
void math_span(ops::MathFn fn, double (*scalar)(double), double* v, int64_t n) {
  if (ops::has_vector_math<double>(fn)) {
    ops::vector_math(fn, v, v, n);
  } else {
    for (int64_t i = 0; i < n; ++i) v[i] = scalar(v[i]);
  }
}

// radius[j] = 1 - u(2i) and angle[j] = 2 pi u(2i + 1) for i = first + j, j < m: the uniforms of
// Box-Muller (1 - u keeps the log finite), each computed exactly as unit() does.
__attribute__((always_inline)) inline void box_muller_uniforms(uint64_t seed, int64_t first,
                                                               int64_t m, double* radius,
                                                               double* angle) {
  for (int64_t j = 0; j < m; ++j) {
    const uint64_t i = static_cast<uint64_t>(first + j);
    radius[j] = 1.0 - unit(seed, 2 * i);
    angle[j] = 2.0 * M_PI * unit(seed, 2 * i + 1);
  }
}

// The hashes' 64-bit multiplies vectorise only with AVX-512DQ (vpmullq): this copy took the
// uniforms from ~60 % of a normal draw's time to ~20 % (Note [Normal draws in blocks]). Integer
// arithmetic and exact conversions give the same values as the baseline copy (1 - u, were it
// fused, is exact either way: u is a multiple of 2^-53 below 1).
__attribute__((target("avx512f,avx512dq"))) void box_muller_uniforms_avx512(
    uint64_t seed, int64_t first, int64_t m, double* radius, double* angle) {
  box_muller_uniforms(seed, first, m, radius, angle);
}

bool has_avx512dq() {
  static const bool has = cpu_isa() == CpuIsa::kAvx512 && __builtin_cpu_supports("avx512dq");
  return has;
}

// out[i] = loc + scale * N_i for i < out.size(), N_i Box-Muller's normal from the uniforms 2i
// and 2i + 1 of the stream `seed`.
void generate_normal(const TBlob& out, uint64_t seed, double loc, double scale) {
  PMX_TYPE_SWITCH(out.dtype, T, {
    T* y = out.data<T>();
    parallel_for(0, out.size(), kGrain, [=](int64_t lo, int64_t hi) {
      double radius[kNormalBlock], angle[kNormalBlock];
      for (int64_t first = lo; first < hi; first += kNormalBlock) {
        const int64_t m = std::min(kNormalBlock, hi - first);
        if (has_avx512dq()) {
          box_muller_uniforms_avx512(seed, first, m, radius, angle);
        } else {
          box_muller_uniforms(seed, first, m, radius, angle);
        }
        math_span(ops::MathFn::kLog, [](double v) { return std::log(v); }, radius, m);
        math_span(ops::MathFn::kCos, [](double v) { return std::cos(v); }, angle, m);
        for (int64_t j = 0; j < m; ++j) {
          const double value = loc + scale * std::sqrt(-2.0 * radius[j]) * angle[j];
          y[first + j] = static_cast<T>(static_cast<ops::compute_t<T>>(value));
        }
      }
    });
  });
}

// The value of T just below t.
template <typename T>
T next_below(T t) {
  if constexpr (is_16bit_float_v<T>) {
    uint16_t bits;
    std::memcpy(&bits, &t, sizeof bits);
    // +0 and -0 step to the negative subnormal nearest zero; negative values grow in magnitude.
    bits = (bits & 0x7fff) == 0 ? 0x8001 : (bits & 0x8000) ? bits + 1 : bits - 1;
    std::memcpy(&t, &bits, sizeof bits);
    return t;
  } else {
    return std::nextafter(t, -std::numeric_limits<T>::infinity());
  }
}

}  // namespace

double uniform_cap(double low, double high, DType dtype) {
  double cap = std::numeric_limits<double>::infinity();
  PMX_TYPE_SWITCH(dtype, T, {
    if constexpr (!std::is_integral_v<T>) {
      T t = static_cast<T>(static_cast<ops::compute_t<T>>(high));  // high or a neighbour
      if (static_cast<double>(t) >= high) t = next_below(t);
      cap = std::max(static_cast<double>(t), low);
    }
  });
  return cap;
}

PMX_REGISTER_OP(uniform)
    .set_num_inputs(0)
    .set_uses_rng()
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      attrs.get_float("low", 0.0);  // unparseable bounds are refused here, not in the kernel
      attrs.get_float("high", 1.0);
      infer_random("uniform", DType::kFloat32)(attrs, in, dt, out, odt);
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
      const double low = ctx.attrs->get_float("low", 0.0), high = ctx.attrs->get_float("high", 1.0);
      const double cap = uniform_cap(low, high, out[0].dtype);
      const uint64_t seed = ctx.seed;
      generate(out[0], [&](int64_t i) { return std::min(low + (high - low) * unit(seed, i), cap); });
    });

PMX_REGISTER_OP(normal)
    .set_num_inputs(0)
    .set_uses_rng()
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      PMX_CHECK(attrs.get_float("scale", 1.0) >= 0, "normal: scale must be non-negative, got ",
                attrs.get_float("scale", 1.0));
      attrs.get_float("loc", 0.0);  // an unparseable mean is refused here, not in the kernel
      infer_random("normal", DType::kFloat32)(attrs, in, dt, out, odt);
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
      const double loc = ctx.attrs->get_float("loc", 0.0), scale = ctx.attrs->get_float("scale", 1.0);
      generate_normal(out[0], ctx.seed, loc, scale);
    });

PMX_REGISTER_OP(randint)
    .set_num_inputs(0)
    .set_uses_rng()
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      const int64_t low = attrs.has("high") ? attrs.get_int("low", 0) : 0;
      const int64_t high = attrs.has("high") ? attrs.get_int("high") : attrs.get_int("low");
      PMX_CHECK(low < high, "randint: low >= high (low=", low, ", high=", high, ")");
      infer_random("randint", DType::kInt64)(attrs, in, dt, out, odt);
      check_randint_bounds(low, high, (*odt)[0]);
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
      const bool has_high = ctx.attrs->has("high");
      const int64_t low = has_high ? ctx.attrs->get_int("low", 0) : 0;
      const int64_t high = has_high ? ctx.attrs->get_int("high") : ctx.attrs->get_int("low");
      // Unsigned subtraction: high - low may exceed INT64_MAX (e.g. [-2^62, 2^62 + 1)).
      const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low), seed = ctx.seed;
      // The modulo bias is below span / 2^64: negligible for any array we can hold.
      // An int64 sample, not a double: values beyond 2^53 must not round.
      generate(out[0], [&](int64_t i) { return static_cast<int64_t>(static_cast<uint64_t>(low) + bits(seed, i) % span); });
    });

PMX_REGISTER_OP(permutation)
    .set_num_inputs(0)
    .set_uses_rng()
    .set_infer([](const Attrs& attrs, const std::vector<Shape>&, const std::vector<DType>&,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      const int64_t n = attrs.get_int("n");
      PMX_CHECK(n >= 0, "permutation: n must be non-negative, got ", n);
      (*out)[0] = {n};
      (*odt)[0] = attrs.get_dtype("dtype", DType::kInt64);
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
      const int64_t n = out[0].size();
      std::vector<int64_t> p(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) p[i] = i;
      for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
        std::swap(p[i], p[static_cast<int64_t>(bits(ctx.seed, i) % static_cast<uint64_t>(i + 1))]);
      PMX_TYPE_SWITCH(out[0].dtype, T, {
        T* y = out[0].data<T>();
        for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(static_cast<ops::compute_t<T>>(p[i]));
      });
    });

}  // namespace pymx
