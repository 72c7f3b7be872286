// The sort keys of values on the GPU (Note [Sort keys] in engine/src/ops/sort_scan_geometry.h):
// sort, argsort and topk order by them, as the CPU does by engine/src/ops/sort_keys.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "ops/sort_scan_geometry.h"

namespace pymx {
namespace gpu {

template <typename T> struct SortKeyOf { using type = std::make_unsigned_t<T>; };
template <> struct SortKeyOf<bool> { using type = uint8_t; };
template <> struct SortKeyOf<float> { using type = uint32_t; };
template <> struct SortKeyOf<double> { using type = uint64_t; };
template <> struct SortKeyOf<__half> { using type = uint16_t; };
template <> struct SortKeyOf<__nv_bfloat16> { using type = uint16_t; };

// The key of `value` (Note [Sort keys]), complemented for descending order.
template <typename T>
__device__ __forceinline__ typename SortKeyOf<T>::type sort_key(T value, bool ascend) {
  using K = typename SortKeyOf<T>::type;
  K bits;
  memcpy(&bits, &value, sizeof bits);
  K key;
  if constexpr (std::is_same_v<T, float>) {
    key = nn::float_sort_key(bits, nn::kFloatInfBits);
  } else if constexpr (std::is_same_v<T, double>) {
    key = nn::float_sort_key(bits, nn::kDoubleInfBits);
  } else if constexpr (std::is_same_v<T, __half>) {
    key = nn::float_sort_key(bits, nn::kHalfInfBits);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    key = nn::float_sort_key(bits, nn::kBFloat16InfBits);
  } else {
    key = nn::integer_sort_key(bits, std::is_signed_v<T>);
  }
  return ascend ? key : K(~key);
}

}  // namespace gpu
}  // namespace pymx
