// bfloat16 on the CPU: a 16-bit storage type whose arithmetic goes through float.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace pymx {

// Note [bfloat16 on the CPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// bfloat16 is the top half of an IEEE float32: 1 sign bit, 8 exponent bits (float32's range) and
// 7 stored significand bits (8 with the implicit one), so one rounding costs up to 2^-8 relative.
// GCC 12, the CPU compiler, has no __bf16 arithmetic, hence this value type: it stores the 16
// bits and converts to float (exact: append 16 zero bits) for every operation, as float16's
// _Float16 does. float -> bfloat16 rounds to nearest, ties to even, on the float32 bit pattern
// (what MXNet, PyTorch and CUDA's __float2bfloat16 do); a value at or past the midpoint between
// the largest finite bfloat16 and 2^128 becomes inf, as IEEE overflow does. A NaN is never
// rounded (its top half could read as inf): it keeps its sign and top payload bits and gets the
// quiet bit. Doubles and integers convert through float, as MXNet does.
struct bf16_t {
  uint16_t bits = 0;

  bf16_t() = default;
  // Implicit both ways, like _Float16, so kernels written for float16 compile unchanged.
  bf16_t(float value) : bits(round_to_bfloat16(value)) {}  // NOLINT(runtime/explicit)
  operator float() const {
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof(value));
    return value;
  }

  static bf16_t from_bits(uint16_t bits) {
    bf16_t value;
    value.bits = bits;
    return value;
  }

  // The 16 bits nearest `value` (see the Note above).
  static uint16_t round_to_bfloat16(float value) {
    uint32_t wide;
    std::memcpy(&wide, &value, sizeof(wide));
    if (std::isnan(value)) return static_cast<uint16_t>((wide >> 16) | 0x0040);
    const uint32_t lsb = (wide >> 16) & 1;  // ties go to the even neighbour
    return static_cast<uint16_t>((wide + 0x7fff + lsb) >> 16);
  }

  // Compound assignment needs an lvalue, which the conversion to float cannot give.
  bf16_t& operator+=(float rhs) { return *this = bf16_t(float(*this) + rhs); }
  bf16_t& operator-=(float rhs) { return *this = bf16_t(float(*this) - rhs); }
  bf16_t& operator*=(float rhs) { return *this = bf16_t(float(*this) * rhs); }
  bf16_t& operator/=(float rhs) { return *this = bf16_t(float(*this) / rhs); }
};

static_assert(sizeof(bf16_t) == 2, "bf16_t must be exactly its 16 storage bits");

}  // namespace pymx

namespace std {

template <>
class numeric_limits<pymx::bf16_t> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 8;
  static pymx::bf16_t min() { return pymx::bf16_t::from_bits(0x0080); }
  static pymx::bf16_t lowest() { return pymx::bf16_t::from_bits(0xff7f); }
  static pymx::bf16_t max() { return pymx::bf16_t::from_bits(0x7f7f); }
  static pymx::bf16_t epsilon() { return pymx::bf16_t::from_bits(0x3c00); }
  static pymx::bf16_t infinity() { return pymx::bf16_t::from_bits(0x7f80); }
  static pymx::bf16_t quiet_NaN() { return pymx::bf16_t::from_bits(0x7fc0); }
  static pymx::bf16_t denorm_min() { return pymx::bf16_t::from_bits(0x0001); }
};

}  // namespace std
