// bf16_t (engine/src/ops/bfloat16.h): widening is exact for every one of the 65536 patterns, and
// float -> bfloat16 matches an independent round-to-nearest-even (the nearer of the two
// neighbouring patterns by distance in double, ties to the even one, past the largest finite
// value to inf) on every special float and on millions of random float bit patterns. NaNs stay
// quiet NaNs with their sign.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "ops/bfloat16.h"
#include "test_util.h"

using pymx::bf16_t;

namespace {

// The magnitude a finite bfloat16 pattern (sign cleared) stands for; 0x7f80 stands for 2^128,
// the first value past the largest finite one, so that overflow rounds like any other step.
double magnitude(uint32_t pattern) {
  const int exponent = static_cast<int>(pattern >> 7);
  const int mantissa = static_cast<int>(pattern & 0x7f);
  if (exponent == 0) return std::ldexp(mantissa, -133);  // subnormal: mantissa * 2^-126 / 2^7
  return std::ldexp(128 + mantissa, exponent - 134);
}

// Round to nearest, ties to even, of a finite or infinite float: the pattern below |value|
// (truncation) and the one above, whichever is nearer.
uint16_t reference_round(float value) {
  const uint32_t bits = bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000;
  const uint32_t below = (bits >> 16) & 0x7fff;
  if (below >= 0x7f80) return static_cast<uint16_t>(sign | below);  // inf stays inf
  const double x = std::fabs(static_cast<double>(value));
  const double down = x - magnitude(below), up = magnitude(below + 1) - x;
  const bool take_up = up < down || (up == down && (below & 1) == 1);
  return static_cast<uint16_t>(sign | (take_up ? below + 1 : below));
}

void check_round(float value) {
  const uint16_t got = bf16_t(value).bits;
  const uint32_t bits = bit_cast<uint32_t>(value);
  if (std::isnan(value)) {
    EXPECT((got & 0x7f80) == 0x7f80 && (got & 0x0040) != 0, "NaN ", bits, " gave ", got);
    EXPECT((got & 0x8000) == ((bits >> 16) & 0x8000), "NaN ", bits, " lost its sign");
    return;
  }
  const uint16_t want = reference_round(value);
  EXPECT(got == want, "float ", value, " (bits ", bits, ") gave ", got, ", want ", want);
}

void test_widening_is_exact() {
  for (uint32_t pattern = 0; pattern < 0x10000; ++pattern) {
    const float wide = bf16_t::from_bits(static_cast<uint16_t>(pattern));
    EXPECT(bit_cast<uint32_t>(wide) == pattern << 16, "pattern ", pattern);
    if (!std::isnan(wide)) EXPECT(bf16_t(wide).bits == pattern, "round trip of ", pattern);
  }
}

void test_special_values() {
  const float max = std::numeric_limits<float>::max();
  const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f,
                            1.0f + 0x1p-8f,           // tie between 1 and 1 + 2^-7: to 1 (even)
                            1.0f + 0x3p-8f,           // tie: to 1 + 2^-6 (even)
                            1.0f + 0x1p-8f + 0x1p-20f,  // just above the tie: up
                            max,                      // above 0x7f7f + half a step: inf
                            bit_cast<float>(uint32_t{0x7f7f7fff}),  // just below that midpoint: finite max
                            bit_cast<float>(uint32_t{0x7f7f8000}),  // the midpoint, odd below: inf
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(),  // rounds to 0
                            bit_cast<float>(uint32_t{0x00008000}),  // subnormal tie, even below: 0
                            bit_cast<float>(uint32_t{0x00018000}),  // subnormal tie, odd below: up
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            bit_cast<float>(uint32_t{0x7f800001}),  // signalling NaN whose top half is inf
                            bit_cast<float>(uint32_t{0xff800001})};
  for (float value : specials) check_round(value);
  EXPECT(bf16_t(max).bits == 0x7f80, "max float rounds to inf");
  EXPECT(bf16_t(bit_cast<float>(uint32_t{0x7f7f7fff})).bits == 0x7f7f, "finite max kept");
  EXPECT(bf16_t(1.0f + 0x1p-8f).bits == 0x3f80, "tie to even, down");
  EXPECT(bf16_t(1.0f + 0x3p-8f).bits == 0x3f82, "tie to even, up");
}

void test_random_patterns() {
  std::mt19937 rng(12);
  for (int i = 0; i < 4000000; ++i) check_round(bit_cast<float>(static_cast<uint32_t>(rng())));
  // Near ties: the low 16 bits at and around 0x8000.
  for (int i = 0; i < 200000; ++i) {
    const uint32_t high = static_cast<uint32_t>(rng()) & 0xffff0000u;
    const uint32_t low = 0x8000u + static_cast<uint32_t>(rng() % 3) - 1u;
    check_round(bit_cast<float>(high | low));
  }
}

void test_arithmetic_goes_through_float() {
  const bf16_t a = 1.5f, b = 2.25f;
  EXPECT(a + b == 3.75f && a * b == 3.375f && b - a == 0.75f && -a == -1.5f && a < b);
  bf16_t c = 1.0f;
  c += 0x1p-9f;  // below half a step: the stored value does not change
  EXPECT(c.bits == 0x3f80, "1 + 2^-9 kept ", c.bits);
  c *= 3.0f;
  EXPECT(float(c) == 3.0f);
  EXPECT(float(std::numeric_limits<bf16_t>::max()) == 0x1.fep127f);
  EXPECT(float(std::numeric_limits<bf16_t>::lowest()) == -0x1.fep127f);
  EXPECT(float(std::numeric_limits<bf16_t>::epsilon()) == 0x1p-7f);
  EXPECT(std::isinf(float(std::numeric_limits<bf16_t>::infinity())));
  EXPECT(std::isnan(float(std::numeric_limits<bf16_t>::quiet_NaN())));
}

}  // namespace

int main() {
  test_widening_is_exact();
  test_special_values();
  test_random_patterns();
  test_arithmetic_goes_through_float();
  std::printf("test_bfloat16: ok\n");
  return 0;
}
