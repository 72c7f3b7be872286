// Dtype dispatch for CPU kernels: PMX_TYPE_SWITCH(dtype, T, { body using T; }).
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/bfloat16.h"
#include "pymx/base.h"

namespace pymx {

// float16 on the CPU is the compiler's _Float16 (GCC >= 12, Clang): arithmetic goes through float.
using half_t = _Float16;

// float16 and bfloat16: stored in 16 bits, computed and accumulated in float.
template <typename T>
constexpr bool is_16bit_float_v = std::is_same_v<T, half_t> || std::is_same_v<T, bf16_t>;

// Arithmetic (and accumulation) type for a storage type: float for the 16-bit floats, else itself.
template <typename T>
using compute_t = std::conditional_t<is_16bit_float_v<T>, float, T>;

#define PMX_TYPE_CASE_(flag, ctype, T, ...) \
  case ::pymx::DType::flag: {               \
    using T = ctype;                        \
    __VA_ARGS__;                            \
    break;                                  \
  }

// Every dtype pymx supports.
#define PMX_TYPE_SWITCH(dtype, T, ...)                                                     \
  switch (dtype) {                                                                         \
    PMX_TYPE_CASE_(kFloat32, float, T, __VA_ARGS__)                                        \
    PMX_TYPE_CASE_(kFloat64, double, T, __VA_ARGS__)                                       \
    PMX_TYPE_CASE_(kFloat16, ::pymx::half_t, T, __VA_ARGS__)                               \
    PMX_TYPE_CASE_(kBFloat16, ::pymx::bf16_t, T, __VA_ARGS__)                              \
    PMX_TYPE_CASE_(kUint8, uint8_t, T, __VA_ARGS__)                                        \
    PMX_TYPE_CASE_(kInt8, int8_t, T, __VA_ARGS__)                                          \
    PMX_TYPE_CASE_(kInt32, int32_t, T, __VA_ARGS__)                                        \
    PMX_TYPE_CASE_(kInt64, int64_t, T, __VA_ARGS__)                                        \
    PMX_TYPE_CASE_(kBool, bool, T, __VA_ARGS__)                                            \
    default:                                                                               \
      PMX_THROW(::pymx::Status::kType, "unsupported dtype flag ", static_cast<int>(dtype)); \
  }

// Floating-point dtypes only (kernels that make no sense for integers).
#define PMX_FLOAT_SWITCH(dtype, T, ...)                                                          \
  switch (dtype) {                                                                               \
    PMX_TYPE_CASE_(kFloat32, float, T, __VA_ARGS__)                                              \
    PMX_TYPE_CASE_(kFloat64, double, T, __VA_ARGS__)                                             \
    PMX_TYPE_CASE_(kFloat16, ::pymx::half_t, T, __VA_ARGS__)                                     \
    PMX_TYPE_CASE_(kBFloat16, ::pymx::bf16_t, T, __VA_ARGS__)                                    \
    default:                                                                                     \
      PMX_THROW(::pymx::Status::kType, "expected a floating-point dtype, got ", dtype_name(dtype)); \
  }

// float32 and float64 only: kernels that take 16-bit floats widened (Note [16-bit floats through
// float kernels] in through_float.h).
#define PMX_FLOAT_WIDE_SWITCH(dtype, T, ...)                                                  \
  switch (dtype) {                                                                            \
    PMX_TYPE_CASE_(kFloat32, float, T, __VA_ARGS__)                                           \
    PMX_TYPE_CASE_(kFloat64, double, T, __VA_ARGS__)                                          \
    default:                                                                                  \
      PMX_THROW(::pymx::Status::kType, "expected float32 or float64, got ", dtype_name(dtype)); \
  }

// float32, float64 and bfloat16: kernels that take float16 widened (Widen::kFloat16Only).
#define PMX_FLOAT_BUT_HALF_SWITCH(dtype, T, ...)                                              \
  switch (dtype) {                                                                            \
    PMX_TYPE_CASE_(kFloat32, float, T, __VA_ARGS__)                                           \
    PMX_TYPE_CASE_(kFloat64, double, T, __VA_ARGS__)                                          \
    PMX_TYPE_CASE_(kBFloat16, ::pymx::bf16_t, T, __VA_ARGS__)                                 \
    default:                                                                                  \
      PMX_THROW(::pymx::Status::kType, "expected float32, float64 or bfloat16, got ",          \
                dtype_name(dtype));                                                           \
  }

}  // namespace pymx
