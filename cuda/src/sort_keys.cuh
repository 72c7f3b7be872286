// The sort keys of values on the GPU (Note [Sort keys] in engine/src/ops/sort_scan_geometry.h),
// and the stable sort of rows by them that sort, argsort and topk share: they order as the CPU
// does by engine/src/ops/sort_keys.h.
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

// Stable-sorts each of the v.outer * v.inner rows of x (element j of row (o, i) at
// (o * n + j) * inner + i) by sort key, descending unless `ascend`, so ties keep the lower index
// first; returns every row's positions in sorted order (row r at r * n), v.outer * v.inner * v.n
// int32s in the op's workspace (this takes ctx.workspace). `op` names the caller in errors.
// Defined in sort_scan.cu (Note [GPU sort by a stable segmented sort]).
const int32_t* sorted_positions(const OpContext& ctx, const TBlob& x, const nn::AxisView& v,
                                bool ascend, const char* op);

}  // namespace gpu
}  // namespace pymx
