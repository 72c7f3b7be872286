// The sort keys of values on the CPU (Note [Sort keys] in sort_scan_geometry.h): sort and
// argsort radix-sort them, topk stable-sorts by them, so NaN, -0.0 and +0.0 order alike in all
// three and on both devices (cuda/src/sort_keys.cuh is the GPU's copy, over CUDA's 16-bit
// float types).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops/dispatch.h"
#include "ops/sort_scan_geometry.h"

namespace pymx {
namespace nn {

template <typename T> struct RadixKeyOf { using type = std::make_unsigned_t<T>; };
template <> struct RadixKeyOf<bool> { using type = uint8_t; };
template <> struct RadixKeyOf<float> { using type = uint32_t; };
template <> struct RadixKeyOf<double> { using type = uint64_t; };
template <> struct RadixKeyOf<half_t> { using type = uint16_t; };
template <> struct RadixKeyOf<bf16_t> { using type = uint16_t; };

// The key of `value`, complemented for descending order.
template <typename T>
typename RadixKeyOf<T>::type sort_key(T value, bool ascend) {
  using K = typename RadixKeyOf<T>::type;
  K bits;
  std::memcpy(&bits, &value, sizeof bits);
  K key;
  if constexpr (std::is_same_v<T, float>) {
    key = nn::float_sort_key(bits, nn::kFloatInfBits);
  } else if constexpr (std::is_same_v<T, double>) {
    key = nn::float_sort_key(bits, nn::kDoubleInfBits);
  } else if constexpr (std::is_same_v<T, half_t>) {
    key = nn::float_sort_key(bits, nn::kHalfInfBits);
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    key = nn::float_sort_key(bits, nn::kBFloat16InfBits);
  } else {
    key = nn::integer_sort_key(bits, std::is_signed_v<T>);
  }
  return ascend ? key : K(~key);
}

}  // namespace nn
}  // namespace pymx
