// float16_to_float / float_to_float16 (engine/src/ops/float16_convert.h) against the compiler's
// scalar _Float16 conversions: every one of the 65536 float16 patterns widened, and special
// floats, every float16 midpoint (ties), and a million random float bit patterns narrowed, at
// lengths that exercise both the 8-wide instructions and the scalar tail. NaNs compare as NaN.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ops/float16_convert.h"
#include "test_util.h"

using pymx::half_t;

namespace {

uint16_t bits_of(half_t h) { return bit_cast<uint16_t>(h); }

half_t half_of_bits(uint16_t bits) { return bit_cast<half_t>(bits); }

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return bit_cast<uint32_t>(a) == bit_cast<uint32_t>(b);  // bitwise: keeps -0 apart from +0
}

void check_widening() {
  std::vector<half_t> all(65536 + 3);  // + 3: a tail after the last group of 8
  for (size_t i = 0; i < all.size(); ++i) all[i] = half_of_bits(static_cast<uint16_t>(i));
  std::vector<float> wide(all.size());
  pymx::float16_to_float(all.data(), wide.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < all.size(); ++i)
    EXPECT(same_float(wide[i], static_cast<float>(all[i])), "float16 pattern ", i, " widened to ",
           wide[i], ", want ", static_cast<float>(all[i]));
}

void check_narrowing(const std::vector<float>& values) {
  std::vector<half_t> narrow(values.size());
  pymx::float_to_float16(values.data(), narrow.data(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const half_t want = static_cast<half_t>(values[i]);
    const bool ok = std::isnan(values[i]) ? std::isnan(static_cast<float>(narrow[i]))
                                          : bits_of(narrow[i]) == bits_of(want);
    EXPECT(ok, "float ", values[i], " narrowed to pattern ", bits_of(narrow[i]), ", want ",
           bits_of(want));
  }
}

}  // namespace

int main() {
  check_widening();

  std::vector<float> special = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.996f, 65520.0f, 1e6f,
                                -1e6f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 1e-10f,
                                std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::denorm_min()};
  // Midpoints between neighbouring finite float16 values: ties, which go to the even one.
  for (uint32_t bits = 0; bits < 0x7bff; ++bits) {
    const float lo = static_cast<float>(half_of_bits(static_cast<uint16_t>(bits)));
    const float hi = static_cast<float>(half_of_bits(static_cast<uint16_t>(bits + 1)));
    special.push_back((lo + hi) / 2);  // exact in float: float16 has 11 significant bits
    special.push_back(-(lo + hi) / 2);
  }
  check_narrowing(special);

  std::mt19937 rng(7);
  std::vector<float> random(1000003);
  for (float& value : random) value = bit_cast<float>(static_cast<uint32_t>(rng()));
  check_narrowing(random);
  std::printf("test_float16_convert: ok\n");
  return 0;
}
