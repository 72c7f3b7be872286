// The direct float convolution of engine/src/ops/conv_direct.h at every level this CPU runs
// (AVX2 and, where the CPU has it, AVX-512; the Python tests reach only the best one), against a
// float64 reference: few and many taps, padding, output widths that are and are not a multiple of
// the vector, channel counts that are not a multiple of the 8-channel block, odd row counts (the
// two-row blocks), stride 2 across and strides down, bias or none, relu (NaN kept), several
// images and bands.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ops/conv_direct.h"
#include "conv_reference.h"
#include "ops/conv_geometry.h"
#include "test_util.h"

using pymx::Shape;
using pymx::nn::ConvGeometry;
using pymx::nn::FmaLevel;

namespace {

struct Case {
  Shape data, weight;  // (N, C, H, W), (F, C, kh, kw)
  std::string pad;
  bool bias, relu;
  std::string stride = "(1, 1)";
};

void check(const Case& c, FmaLevel level, std::mt19937* rng) {
  const ConvGeometry g = pymx::test::conv2d_geometry(c.data, c.weight, c.pad, c.stride);
  const std::string what = pymx::str_cat(level == FmaLevel::kAvx512 ? "avx512" : "avx2",
                                         " data ", pymx::shape_str(c.data), " weight ",
                                         pymx::shape_str(c.weight), " pad ", c.pad,
                                         " stride ", c.stride,
                                         c.bias ? " bias" : "", c.relu ? " relu" : "");
  EXPECT(pymx::nn::conv2d_direct_f32_handles(g, level), what);
  std::vector<float> x = pymx::test::normal_floats(g.batch * g.in_c * g.in_sp, rng);
  const std::vector<float> w = pymx::test::normal_floats(g.out_c * g.in_c * g.k_sp, rng);
  const std::vector<float> b = pymx::test::normal_floats(g.out_c, rng);
  if (c.relu) x[x.size() / 2] = NAN;  // a NaN input makes NaN outputs, which relu keeps
  std::vector<float> y(g.batch * g.out_c * g.out_sp, -7.0f);
  std::vector<float> scratch(pymx::nn::conv2d_direct_f32_scratch(g));
  const pymx::nn::DirectConvWeights packed =
      pymx::nn::conv2d_direct_f32_pack(g, w.data(), c.bias ? b.data() : nullptr);
  pymx::nn::conv2d_direct_f32(g, x.data(), packed, c.relu, y.data(),
                              scratch.empty() ? nullptr : scratch.data(), level);
  std::vector<double> expected(y.size());
  pymx::test::conv2d_reference(g, x, w, c.bias ? b.data() : nullptr, c.relu, &expected);
  const double taps = double(g.in_c * g.k_sp);
  int64_t nans = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT(std::isnan(y[i]), what, ": output ", i, " is ", y[i], ", expected NaN");
      ++nans;
      continue;
    }
    // float32 products summed over `taps` terms of |x w| ~ 1: a few ulps per term.
    const double tolerance = 1e-6 * taps * (1.0 + std::fabs(expected[i]));
    EXPECT(std::fabs(y[i] - expected[i]) <= tolerance, what, ": output ", i, " is ", y[i],
           ", expected ", expected[i]);
  }
  EXPECT(!c.relu || nans > 0, what, ": the NaN input reached no output");
}

}  // namespace

int main() {
  const FmaLevel best = pymx::nn::fma_level();
  if (best == FmaLevel::kNone) {
    std::printf("test_conv_direct: this CPU has neither AVX2+FMA nor AVX-512; nothing to test\n");
    return 0;
  }
  std::vector<FmaLevel> levels = {FmaLevel::kAvx2};
  if (best == FmaLevel::kAvx512) levels.push_back(FmaLevel::kAvx512);
  const std::vector<Case> cases = {
      {{1, 3, 128, 128}, {32, 3, 2, 2}, "(0, 0)", true, true},   // LeafNetwork's conv1
      {{2, 3, 33, 40}, {13, 3, 3, 3}, "(1, 1)", true, false},    // RGB 3x3, 13 filters
      {{3, 1, 20, 17}, {5, 1, 5, 5}, "(2, 2)", false, true},     // 5x5, width 17
      {{1, 2, 19, 31}, {9, 2, 4, 4}, "(0, 3)", true, true},      // 32 taps, uneven padding
      {{2, 4, 9, 16}, {16, 4, 1, 1}, "(0, 0)", false, false},    // pointwise, one vector wide
      {{1, 64, 14, 29}, {24, 64, 2, 2}, "(0, 0)", true, true},   // LeafNetwork's conv3: K = 256
      {{2, 16, 11, 20}, {12, 16, 3, 3}, "(1, 1)", true, false},  // K = 144, padded
      // Stride 2 across (rows split into even and odd columns): odd and even widths, 17 and 16
      // outputs, no padding, the stem's 7x7 with pad 3, an even kernel, stride 3 down.
      {{2, 5, 9, 33}, {11, 5, 3, 3}, "(1, 1)", true, true, "(2, 2)"},
      {{1, 3, 13, 32}, {9, 3, 3, 3}, "(1, 1)", false, false, "(2, 2)"},
      {{1, 6, 12, 37}, {13, 6, 3, 3}, "(0, 0)", true, false, "(2, 2)"},
      {{1, 3, 23, 61}, {16, 3, 7, 7}, "(3, 3)", true, true, "(2, 2)"},
      {{2, 3, 10, 40}, {7, 3, 4, 4}, "(1, 1)", false, true, "(2, 2)"},
      {{1, 4, 13, 36}, {9, 4, 3, 3}, "(2, 0)", true, false, "(3, 2)"},
      {{2, 3, 11, 20}, {5, 3, 3, 3}, "(1, 1)", true, true, "(3, 1)"},
  };
  std::mt19937 rng(12345);
  for (FmaLevel level : levels)
    for (const Case& c : cases) check(c, level, &rng);
  std::printf("test_conv_direct: ok (%zu levels x %zu cases)\n", levels.size(), cases.size());
  return 0;
}
