// The CPU kernel of the unary ops computed in the output's float type (elemwise.cc's
// float_unary ops, erf): f in compute_t<T> element by element, or libmvec's routine for it
// (Note [Vector math through libmvec] in vector_math.cc) where this machine has one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "ops/elemwise.h"
#include "ops/float16_convert.h"
#include "ops/vector_math.h"
#include "parallel.h"

namespace pymx {
namespace ops {

// Elements per parallel chunk of the float unary ops: ~64 KiB of float, enough to pay for handing
// a chunk to another thread.
constexpr int64_t kUnaryGrain = 16384;
// Elements a 16-bit float chunk widens to float at a time, in a buffer on the stack.
constexpr int64_t kWidenBlock = 1024;

// dst[i] = f(src[i]) for i < n over the intra-op threads; through libmvec's routine for
// `vector_fn` where this machine has it (Note [Vector math through libmvec]), which computes each
// element the same way wherever the chunks split, so results do not depend on the thread count.
template <typename T, typename F>
void float_unary_loop(const T* src, T* dst, int64_t n, F f, std::optional<MathFn> vector_fn) {
  using C = compute_t<T>;  // float for float16 and bfloat16
  const bool vector = vector_fn && has_vector_math<C>(*vector_fn);
  parallel_for(0, n, kUnaryGrain, [=](int64_t lo, int64_t hi) {
    if (!vector) {
      for (int64_t i = lo; i < hi; ++i) dst[i] = static_cast<T>(f(static_cast<C>(src[i])));
    } else if constexpr (std::is_same_v<T, C>) {
      vector_math(*vector_fn, src + lo, dst + lo, hi - lo);
    } else {
      C wide[kWidenBlock];
      for (int64_t first = lo; first < hi; first += kWidenBlock) {
        const int64_t m = std::min(kWidenBlock, hi - first);
        convert_span(src + first, wide, m);
        vector_math(*vector_fn, wide, wide, m);
        convert_span(wide, dst + first, m);
      }
    }
  });
}

// The shape and dtype inference of these ops: x's shape, x's dtype if float, else float32.
inline void float_unary_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                              std::vector<Shape>* out, std::vector<DType>* out_dt) {
  *out = {in[0]};
  *out_dt = {is_float(dt[0]) ? dt[0] : DType::kFloat32};  // integers compute in float32
}

// The op's CPU kernel: converts an integer input to the output's float type (float32), then runs
// float_unary_loop.
template <typename F>
ComputeFn float_unary_kernel(F f, std::optional<MathFn> vector_fn = std::nullopt) {
  return [f, vector_fn](const OpContext& ctx, const std::vector<TBlob>& inputs,
                        const std::vector<TBlob>& outputs) {
    const TBlob x = inputs_as(ctx, inputs, outputs[0].dtype)[0];
    PMX_FLOAT_SWITCH(x.dtype, T, {
      float_unary_loop(x.data<T>(), outputs[0].data<T>(), x.size(), f, vector_fn);
    });
  };
}

}  // namespace ops
}  // namespace pymx
