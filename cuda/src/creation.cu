// Creation and random sampling on the GPU (CPU definitions: engine/src/ops/init.cc, random.cc).
// Values are computed in double and converted like the CPU's (through float for float16).
// Random ops use the same counter-based stream as the CPU (element i from hash(seed, i)), so a
// GPU draw equals the CPU draw with the same seed up to rounding of the transcendental functions.
//
// | op           | attrs                                    | output |
// |--------------|------------------------------------------|--------|
// | zeros ones   | shape, dtype                             | all 0 / all 1 |
// | full         | shape, dtype, value ("True"/"False" ok)  | all value |
// | empty        | shape, dtype                             | uninitialised |
// | arange       | start, stop (None: [0, start)), step, dtype | start + i * step |
// | linspace     | start, stop, num, endpoint, dtype        | NumPy's linspace |
// | eye          | N, M, k, dtype                           | ones on the k-th diagonal |
// | uniform      | low, high, shape, dtype                  | U[low, high) |
// | normal       | loc, scale, shape, dtype                 | N(loc, scale^2), Box-Muller |
// | randint      | low, high, shape, dtype                  | integers in [low, high) |
// | permutation  | n, dtype                                 | a random permutation of 0..n-1 |
#include <algorithm>
#include <cmath>

#include "kernel_util.cuh"
#include "launch.h"
#include "ops/elemwise.h"
#include "ops/uniform_cap.h"
#include "random.cuh"

namespace pymx {
namespace gpu {
namespace {

// The i-th 64 random bits of stream `seed`, and a uniform in [0, 1) with 53 bits (random.cc).
__host__ __device__ __forceinline__ uint64_t random_bits(uint64_t seed, uint64_t i) {
  return mix64(seed ^ mix64(i));
}
__device__ __forceinline__ double unit53(uint64_t seed, uint64_t i) {
  return static_cast<double>(random_bits(seed, i) >> 11) * 0x1.0p-53;
}

enum class Gen : int { kLinear, kUniform, kNormal, kRandint, kIntLinear };

// y[i] = a + i * b (linear), min(low + (high - low) * U, cap) (uniform, cap: uniform_cap.h),
// loc + scale * N (normal), low + bits % span (randint, in integers: values beyond 2^53 must not
// round), low + i * span in int64 (int linear: integer arange and full, exact beyond 2^53).
struct GenArgs {
  Gen gen;
  double a, b;
  uint64_t seed, span;
  int64_t low;
  double cap;
};

template <typename T>
__global__ void generate_kernel(T* y, int64_t n, GenArgs g) {
  using C = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    if (g.gen == Gen::kRandint) {
      const uint64_t r = static_cast<uint64_t>(g.low) + random_bits(g.seed, i) % g.span;
      y[i] = convert<T>(static_cast<C>(static_cast<int64_t>(r)));
      continue;
    }
    if (g.gen == Gen::kIntLinear) {  // two's complement, as ops::IntRange::at
      const uint64_t r = static_cast<uint64_t>(g.low) + static_cast<uint64_t>(i) * g.span;
      y[i] = convert<T>(static_cast<C>(static_cast<int64_t>(r)));
      continue;
    }
    // Rounded products and sums (no FMA contraction), as the CPU computes them: arange into an
    // integer dtype truncates, where one rounding less can change the integer.
    double v;
    switch (g.gen) {
      case Gen::kLinear: v = __dadd_rn(g.a, __dmul_rn(static_cast<double>(i), g.b)); break;
      case Gen::kUniform:
        v = fmin(__dadd_rn(g.a, __dmul_rn(g.b - g.a, unit53(g.seed, i))), g.cap);
        break;
      default: {  // kNormal
        const double u1 = 1.0 - unit53(g.seed, 2 * i), u2 = unit53(g.seed, 2 * i + 1);
        v = g.a + g.b * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
        break;
      }
    }
    y[i] = convert<T>(static_cast<C>(v));
  }
}

template <typename T>
__global__ void eye_kernel(T* y, int64_t n, int64_t m, int64_t k) {
  PMX_GRID_STRIDE_LOOP(i, n) {
    if (i + k >= 0 && i + k < m) y[i * m + i + k] = convert<T>(1.0f);
  }
}

void generate(const OpContext& ctx, const TBlob& out, GenArgs args) {
  const int64_t n = out.size();
  if (n == 0) return;
  PMX_GPU_TYPE_SWITCH(out.dtype, T, {
    generate_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(out.data<T>(), n, args);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void fill_compute(const OpContext& ctx, const TBlob& out, double value) {
  fill_blob(out, value, ctx.run.stream);
}

double fill_value(const Attrs& attrs) {
  const std::string text = attrs.get_str("value", "0");
  if (text == "True") return 1.0;
  if (text == "False") return 0.0;
  return attrs.get_float("value");
}

// full: an integer literal into an integer dtype goes through int64, not double (See Note
// [Integer scalars are read as int64] in engine/src/ops/elemwise.h).
void full_compute(const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
  const std::string text = ctx.attrs->get_str("value", "0");
  if (!is_float(out[0].dtype) && out[0].dtype != DType::kBool && ops::scalar_text_is_int(text)) {
    generate(ctx, out[0], {Gen::kIntLinear, 0.0, 0.0, 0, 0, ops::scalar_int(text, "full")});
  } else {
    fill_compute(ctx, out[0], fill_value(*ctx.attrs));
  }
}

void arange_compute(const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
  if (const std::optional<ops::IntRange> ints = ops::int_arange_range(*ctx.attrs, out[0].dtype)) {
    generate(ctx, out[0], {Gen::kIntLinear, 0.0, 0.0, 0, static_cast<uint64_t>(ints->step),
                           ints->start});
    return;
  }
  double start = ctx.attrs->get_float("start", 0.0);
  const double step = ctx.attrs->get_float("step", 1.0);
  if (!ctx.attrs->has("stop")) start = 0.0;  // arange(n) is [0, n)
  generate(ctx, out[0], {Gen::kLinear, start, step, 0, 0});
}

void linspace_compute(const OpContext& ctx, const std::vector<TBlob>&,
                      const std::vector<TBlob>& out) {
  const double start = ctx.attrs->get_float("start"), stop = ctx.attrs->get_float("stop");
  const int64_t num = out[0].size();
  const bool endpoint = ctx.attrs->get_bool("endpoint", true);
  const int64_t div = endpoint ? num - 1 : num;
  const double step = div > 0 ? (stop - start) / static_cast<double>(div) : 0.0;
  generate(ctx, out[0], {Gen::kLinear, start, step, 0, 0});
  if (endpoint && num > 1) {  // the last sample is exactly `stop`, as in NumPy
    TBlob last = out[0];
    last.dptr = static_cast<char*>(out[0].dptr) + (num - 1) * dtype_size(out[0].dtype);
    last.shape = {1};
    fill_blob(last, stop, ctx.run.stream);
  }
}

void eye_compute(const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
  fill_blob(out[0], 0.0, ctx.run.stream);
  const int64_t n = out[0].shape[0], m = out[0].shape[1], k = ctx.attrs->get_int("k", 0);
  if (n == 0 || m == 0) return;
  PMX_GPU_TYPE_SWITCH(out[0].dtype, T, {
    eye_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(out[0].data<T>(), n, m, k);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void randint_compute(const OpContext& ctx, const std::vector<TBlob>&,
                     const std::vector<TBlob>& out) {
  const bool has_high = ctx.attrs->has("high");
  const int64_t low = has_high ? ctx.attrs->get_int("low", 0) : 0;
  const int64_t high = has_high ? ctx.attrs->get_int("high") : ctx.attrs->get_int("low");
  // Unsigned subtraction, as on the CPU: high - low may exceed INT64_MAX.
  generate(ctx, out[0], {Gen::kRandint, 0.0, 0.0, ctx.seed,
                         static_cast<uint64_t>(high) - static_cast<uint64_t>(low), low});
}

// Fisher-Yates is sequential: shuffle on the host with the CPU's stream, then copy. The copy
// from pageable memory returns only after the data is staged, so `p` may die right after.
void permutation_compute(const OpContext& ctx, const std::vector<TBlob>&,
                         const std::vector<TBlob>& out) {
  const int64_t n = out[0].size();
  if (n == 0) return;
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(p[i], p[static_cast<int64_t>(random_bits(ctx.seed, i) % static_cast<uint64_t>(i + 1))]);
  // int64 goes straight into the output; other dtypes through the workspace and a cast.
  TBlob staged = out[0];
  staged.dtype = DType::kInt64;
  if (out[0].dtype != DType::kInt64) staged.dptr = ctx.workspace(n * sizeof(int64_t));
  PMX_CUDA_CHECK(cudaMemcpyAsync(staged.dptr, p.data(), n * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, stream_of(ctx)));
  if (out[0].dtype != DType::kInt64) cast_blob(staged, out[0], ctx.run.stream);
}

const bool registered = [] {
  using Blobs = const std::vector<TBlob>&;
  op_registry::get_or_create("zeros").set_gpu(
      [](const OpContext& ctx, Blobs, Blobs out) { fill_compute(ctx, out[0], 0.0); });
  op_registry::get_or_create("ones").set_gpu(
      [](const OpContext& ctx, Blobs, Blobs out) { fill_compute(ctx, out[0], 1.0); });
  op_registry::get_or_create("full").set_gpu(full_compute);
  op_registry::get_or_create("empty").set_gpu([](const OpContext&, Blobs, Blobs) {});
  op_registry::get_or_create("arange").set_gpu(arange_compute);
  op_registry::get_or_create("linspace").set_gpu(linspace_compute);
  op_registry::get_or_create("eye").set_gpu(eye_compute);
  op_registry::get_or_create("uniform").set_gpu([](const OpContext& ctx, Blobs, Blobs out) {
    const double low = ctx.attrs->get_float("low", 0.0), high = ctx.attrs->get_float("high", 1.0);
    generate(ctx, out[0],
             {Gen::kUniform, low, high, ctx.seed, 0, 0, uniform_cap(low, high, out[0].dtype)});
  });
  op_registry::get_or_create("normal").set_gpu([](const OpContext& ctx, Blobs, Blobs out) {
    generate(ctx, out[0], {Gen::kNormal, ctx.attrs->get_float("loc", 0.0),
                           ctx.attrs->get_float("scale", 1.0), ctx.seed, 0});
  });
  op_registry::get_or_create("randint").set_gpu(randint_compute);
  op_registry::get_or_create("permutation").set_gpu(permutation_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
