// Dropout.
//
// | op                | inputs           | outputs     | attrs |
// |-------------------|------------------|-------------|-------|
// | dropout           | data             | out, mask   | p (0.5), mode (training | always), axes (()) |
// | dropout_backward  | out_grad, mask   | data_grad   | - |
//
// Active when mode == 'always' or the op runs in training mode (OpContext::is_train); otherwise
// out = data and mask = 1. When active, each element is kept with probability 1 - p and scaled
// by 1 / (1 - p): mask = keep / (1 - p) (0 when p == 1), out = data * mask. `axes` shares one
// draw along the listed axes (variational dropout). The mask has data's shape and dtype and is
// what the backward multiplies by. Random numbers: see Note [Counter-based random numbers].
#include <algorithm>
#include <cmath>

#include "ops/fma_level.h"
#include "ops/nn_common.h"
#include "parallel.h"

namespace pymx {
namespace {

double drop_probability(const Attrs& attrs) {
  const double p = attrs.get_float("p", 0.5);
  PMX_CHECK(p >= 0 && p <= 1, "dropout: p must be in [0, 1], got ", p);
  return p;
}

void dropout_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                   std::vector<Shape>* out, std::vector<DType>* out_dt) {
  drop_probability(attrs);
  const std::string mode = attrs.get_str("mode", "training");
  PMX_CHECK(mode == "training" || mode == "always", "dropout: mode '", mode,
            "' is not one of training, always");
  for (int64_t a : attrs.get_shape("axes", Shape()))
    nn::normalize_axis(a, static_cast<int>(in[0].size()), "dropout");
  nn::check_float(dt[0], "dropout", "data");
  *out = {in[0], in[0]};
  *out_dt = {dt[0], dt[0]};
}

// Note [Dropout draws]
// ~~~~~~~~~~~~~~~~~~~~
// Element i is kept when uniform01(seed, i) < keep. uniform01 is r * 2^-24 for the integer
// r = mix64(seed ^ mix64(i)) >> 40, and scaling by 2^24 is exact in float, so the test is
// r < keep * 2^24, i.e. r < ceil(keep * 2^24) in integers: the same mask (and the same mask as
// the GPU kernel) without a float conversion per element. The hashes are computed 8 lanes at a
// time (GCC vector extensions: one source, compiled for AVX-512, whose 64-bit multiplies do a
// lane each, and for the baseline ISA, chosen at run time), into a block of keep flags that the
// dtype's loop then reads. Each element depends only on its own index, so the loop is split
// over the intra-op threads in any way without changing a bit.
constexpr int64_t kGrain = 16384;
constexpr int64_t kBlock = 1024;  // keep flags per block (on the stack)

uint64_t keep_threshold(float keep) {
  return static_cast<uint64_t>(std::ceil(static_cast<double>(keep) * 16777216.0));
}

inline bool kept(uint64_t seed, uint64_t draw, uint64_t threshold) {
  return (nn::mix64(seed ^ nn::mix64(draw)) >> 40) < threshold;
}

typedef uint64_t Lanes8 __attribute__((vector_size(64)));

// flags[j] = whether draw first + j is kept, for j in [0, count).
__attribute__((always_inline)) inline void draw_keep_flags_lanes(
    uint64_t seed, uint64_t first, int64_t count, uint64_t threshold, uint8_t* flags) {
  int64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    Lanes8 h = Lanes8{0, 1, 2, 3, 4, 5, 6, 7} + (first + static_cast<uint64_t>(j));
    for (int round = 0; round < 2; ++round) {  // mix64(seed ^ mix64(draw)), as kept()
      if (round == 1) h ^= seed;
      h += 0x9E3779B97F4A7C15ull;
      h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
      h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
      h ^= h >> 31;
    }
    const auto keep = (h >> 40) < threshold;
    for (int lane = 0; lane < 8; ++lane) flags[j + lane] = keep[lane] != 0;
  }
  for (; j < count; ++j) flags[j] = kept(seed, first + static_cast<uint64_t>(j), threshold);
}

void draw_keep_flags_base(uint64_t seed, uint64_t first, int64_t count, uint64_t threshold,
                          uint8_t* flags) {
  draw_keep_flags_lanes(seed, first, count, threshold, flags);
}

__attribute__((target("avx512f,avx512dq"))) void draw_keep_flags_avx512(
    uint64_t seed, uint64_t first, int64_t count, uint64_t threshold, uint8_t* flags) {
  draw_keep_flags_lanes(seed, first, count, threshold, flags);
}

// The copy for this CPU, chosen once. Not by target_clones: its ifunc resolver runs while the
// program is being loaded, before a sanitizer's runtime has started (the ThreadSanitizer build
// of the engine tests crashed there).
void draw_keep_flags(uint64_t seed, uint64_t first, int64_t count, uint64_t threshold,
                     uint8_t* flags) {
  static const auto draw = nn::fma_level() == nn::FmaLevel::kAvx512 &&
                                   __builtin_cpu_supports("avx512dq")
                               ? draw_keep_flags_avx512
                               : draw_keep_flags_base;
  draw(seed, first, count, threshold, flags);
}

void dropout_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const Attrs& attrs = *ctx.attrs;
  const double p = drop_probability(attrs);
  const bool active = nn::dropout_draws_mask(attrs, ctx.is_train);
  const Shape shape = in[0].shape;
  const int ndim = in[0].ndim();
  // Strides of the index used for the draw: 0 along shared axes, so they reuse one number.
  std::vector<int64_t> draw_stride(ndim, 0);
  std::vector<bool> shared(ndim, false);
  for (int64_t a : attrs.get_shape("axes", Shape())) shared[nn::normalize_axis(a, ndim, "dropout")] = true;
  bool any_shared = false;
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    any_shared = any_shared || shared[d];
    draw_stride[d] = shared[d] ? 0 : s;
    if (!shared[d]) s *= shape[d];
  }
  const uint64_t threshold = keep_threshold(static_cast<float>(1 - p));  // Note [Dropout draws]
  const uint64_t seed = ctx.seed;
  const double scale = p < 1 ? 1.0 / (1 - p) : 0.0;
  const int64_t n = in[0].size();
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    using A = nn::acc_t<T>;
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    T* mask = out[1].data<T>();
    const T on = static_cast<T>(scale), off = static_cast<T>(0.0);
    if (!active) {
      parallel_for(0, n, kGrain, [=](int64_t lo, int64_t hi) {
        std::copy(x + lo, x + hi, y + lo);
        std::fill(mask + lo, mask + hi, T(1));
      });
    } else if (!any_shared) {
      parallel_for(0, n, kGrain, [=](int64_t lo, int64_t hi) {
        uint8_t flags[kBlock];
        for (int64_t start = lo; start < hi; start += kBlock) {
          const int64_t count = std::min(kBlock, hi - start);
          draw_keep_flags(seed, static_cast<uint64_t>(start), count, threshold, flags);
          for (int64_t j = 0; j < count; ++j) {
            const T m = flags[j] ? on : off;
            mask[start + j] = m;
            y[start + j] = static_cast<T>(static_cast<A>(x[start + j]) * static_cast<A>(m));
          }
        }
      });
    } else {
      parallel_for(0, n, kGrain, [&](int64_t lo, int64_t hi) {
        std::vector<int64_t> idx(ndim, 0);  // the multi-index of element lo
        int64_t r = lo;
        for (int d = ndim - 1; d >= 0; --d) {
          idx[d] = r % shape[d];
          r /= shape[d];
        }
        for (int64_t i = lo; i < hi; ++i) {
          int64_t draw = 0;
          for (int d = 0; d < ndim; ++d) draw += idx[d] * draw_stride[d];
          for (int d = ndim - 1; d >= 0 && ++idx[d] == shape[d]; --d) idx[d] = 0;
          const T m = kept(seed, static_cast<uint64_t>(draw), threshold) ? on : off;
          mask[i] = m;
          y[i] = static_cast<T>(static_cast<A>(x[i]) * static_cast<A>(m));
        }
      });
    }
  });
}

void dropout_backward_infer(const Attrs&, const std::vector<Shape>& in,
                            const std::vector<DType>& dt, std::vector<Shape>* out,
                            std::vector<DType>* out_dt) {
  PMX_CHECK(in[0] == in[1], "dropout_backward: out_grad ", shape_str(in[0]), " and mask ",
            shape_str(in[1]), " differ");
  nn::check_same_float(dt, "dropout_backward");
  *out = {in[0]};
  *out_dt = {dt[0]};
}

void dropout_backward(const OpContext&, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    const T* dy = in[0].data<T>();
    const T* mask = in[1].data<T>();
    T* dx = out[0].data<T>();
    parallel_for(0, in[0].size(), kGrain, [=](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        dx[i] = static_cast<T>(static_cast<nn::acc_t<T>>(dy[i]) *
                               static_cast<nn::acc_t<T>>(mask[i]));
    });
  });
}

PMX_REGISTER_OP(dropout)
    .set_num_outputs(2)
    .set_infer(dropout_infer)
    .set_cpu(dropout_forward)
    .set_uses_rng()
    .set_draws_random(nn::dropout_draws_mask)
    .set_gradient([](const GradContext& ctx) {
      return std::vector<NDArray>{
          invoke("dropout_backward", {ctx.out_grads[0], ctx.outputs[1]}, Attrs())[0]};
    });

PMX_REGISTER_OP(dropout_backward)
    .set_num_inputs(2)
    .set_infer(dropout_backward_infer)
    .set_cpu(dropout_backward);

}  // namespace
}  // namespace pymx
