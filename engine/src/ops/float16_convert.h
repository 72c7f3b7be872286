// float16 <-> float over whole arrays, with the CPU's conversion instructions where it has them.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/dispatch.h"

namespace pymx {

// dst[i] = float(src[i]) for i < n: exact.
void float16_to_float(const half_t* src, float* dst, int64_t n);

// dst[i] = half_t(src[i]) for i < n: to nearest, ties to even, overflow to inf, NaN stays NaN
// (IEEE, as static_cast<half_t> rounds).
void float_to_float16(const float* src, half_t* dst, int64_t n);

// dst[i] = To(src[i]) for i < n, as NumPy's astype (float -> integer truncates); float16 from
// and to float by the two functions above, the other 16-bit conversions through float.
template <typename To, typename From>
void convert_span(const From* src, To* dst, int64_t n) {
  if constexpr (std::is_same_v<From, half_t> && std::is_same_v<To, float>) {
    float16_to_float(src, dst, n);
  } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, half_t>) {
    float_to_float16(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<To>(static_cast<compute_t<To>>(static_cast<compute_t<From>>(src[i])));
  }
}

}  // namespace pymx
