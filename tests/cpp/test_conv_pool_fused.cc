// The fused convolution + relu + max pooling kernel of engine/src/ops/conv_pool_fused.h at every
// level this CPU runs (AVX2 and, where the CPU has it, AVX-512; the Python tests reach only the
// best one): bit for bit the direct convolution followed by the vectorised max pooling, and with
// the per-channel transform (batch_norm's float expression, and against a float64 reference).
// LeafNetwork's three blocks at batch 1 and 2, and odd geometries: widths and heights not a
// multiple of the vector, channel counts not a multiple of the 8-channel block, padding, a NaN
// input, pooling with stride 1 or with rows between its windows, and enough pooled rows for
// several chunks and bands. Then pooling inputs chosen to show the order the maxima are taken
// in: windows of zeros and repeated maxima, and NaNs at every window position.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conv_reference.h"
#include "ops/conv_direct.h"
#include "ops/conv_pool_fused.h"
#include "ops/max_pool_2d.h"
#include "test_util.h"

using pymx::Attrs;
using pymx::Shape;
using pymx::nn::ConvGeometry;
using pymx::nn::ConvPoolGeometry;
using pymx::nn::FmaLevel;
using pymx::nn::PoolGeom;

namespace {

struct Case {
  Shape data, weight;  // (N, C, H, W), (F, C, kh, kw)
  std::string pad, pool_kernel, pool_stride;
  bool nan;  // one input is NaN
};

ConvPoolGeometry geometry(const Case& c) {
  const Attrs attrs{{"kernel", pymx::shape_str({c.weight[2], c.weight[3]})},
                    {"pad", c.pad},
                    {"num_filter", std::to_string(c.weight[0])},
                    {"pool_kernel", c.pool_kernel},
                    {"pool_stride", c.pool_stride}};
  return pymx::nn::conv_relu_max_pool_geometry(attrs, c.data, c.weight);
}

// relu(conv(x, w) + bias) in float64, then max pooling: (N, F, pooled rows, pooled columns).
std::vector<double> reference(const ConvPoolGeometry& cp, const std::vector<float>& x,
                              const std::vector<float>& w, const std::vector<float>& bias) {
  const ConvGeometry& g = cp.conv;
  const PoolGeom& p = cp.pool;
  const int64_t OH = g.out[1], OW = g.out[2];
  std::vector<double> conv(g.batch * g.out_c * OH * OW);
  pymx::test::conv2d_reference(g, x, w, bias.data(), /*relu=*/true, &conv);
  std::vector<double> pooled(g.batch * g.out_c * p.out_sp);
  for (int64_t plane = 0; plane < g.batch * g.out_c; ++plane)
    for (int64_t py = 0; py < p.out[1]; ++py)
      for (int64_t px = 0; px < p.out[2]; ++px) {
        double m = -INFINITY;
        for (int64_t r = py * p.s[1]; r < py * p.s[1] + p.k[1]; ++r)
          for (int64_t col = px * p.s[2]; col < px * p.s[2] + p.k[2]; ++col) {
            const double v = conv[(plane * OH + r) * OW + col];
            m = std::isnan(v) || v > m ? v : m;
          }
        pooled[(plane * p.out[1] + py) * p.out[2] + px] = m;
      }
  return pooled;
}

// The direct convolution with relu, then max pooling plane by plane: the floats the fused
// kernel must give without the transform.
std::vector<float> run_apart(const ConvPoolGeometry& cp, const std::vector<float>& x,
                             const pymx::nn::DirectConvWeights& packed, FmaLevel level) {
  const ConvGeometry& g = cp.conv;
  const PoolGeom& p = cp.pool;
  std::vector<float> conv(g.batch * g.out_c * g.out_sp);
  std::vector<float> conv_scratch(pymx::nn::conv2d_direct_f32_scratch(g));
  pymx::nn::conv2d_direct_f32(g, x.data(), packed, true, conv.data(),
                              conv_scratch.empty() ? nullptr : conv_scratch.data(), level);
  const pymx::nn::SimdLevel pool_level =
      level == FmaLevel::kAvx512 ? pymx::nn::SimdLevel::kAvx512 : pymx::nn::SimdLevel::kSse2;
  std::vector<float> apart(g.batch * g.out_c * p.out_sp);
  std::vector<float> pool_scratch(pymx::nn::max_pool_f32_scratch(p));
  for (int64_t plane = 0; plane < g.batch * g.out_c; ++plane) {
    pymx::nn::max_pool_forward_f32(pool_level, p, conv.data() + plane * g.out_sp,
                                   apart.data() + plane * p.out_sp, pool_scratch.data());
  }
  return apart;
}

std::vector<float> run_fused(const ConvPoolGeometry& cp, const std::vector<float>& x,
                             const pymx::nn::DirectConvWeights& packed, const float* scale,
                             const float* shift, FmaLevel level) {
  std::vector<float> scratch(pymx::nn::conv_relu_max_pool_scratch(cp));
  std::vector<float> fused(cp.conv.batch * cp.conv.out_c * cp.pool.out_sp, -7.0f);
  pymx::nn::conv_relu_max_pool_f32(cp, x.data(), packed, scale, shift, fused.data(),
                                   scratch.data(), level);
  return fused;
}

void expect_same_bits(const std::vector<float>& fused, const std::vector<float>& apart,
                      const std::string& what) {
  for (size_t i = 0; i < fused.size(); ++i) {
    uint32_t f, a;
    std::memcpy(&f, &fused[i], sizeof f);
    std::memcpy(&a, &apart[i], sizeof a);
    EXPECT(f == a, what, ": output ", i, " is ", fused[i], " (bits ", f, ") fused but ",
           apart[i], " (bits ", a, ") apart");
  }
}

void check(const Case& c, FmaLevel level, std::mt19937* rng) {
  const ConvPoolGeometry cp = geometry(c);
  const ConvGeometry& g = cp.conv;
  const PoolGeom& p = cp.pool;
  const std::string what = pymx::str_cat(level == FmaLevel::kAvx512 ? "avx512" : "avx2",
                                         " data ", pymx::shape_str(c.data), " weight ",
                                         pymx::shape_str(c.weight), " pad ", c.pad, " pool ",
                                         c.pool_kernel, " stride ", c.pool_stride);
  EXPECT(pymx::nn::conv_relu_max_pool_handles(cp, level), what);
  std::vector<float> x = pymx::test::normal_floats(g.batch * g.in_c * g.in_sp, rng);
  const std::vector<float> w = pymx::test::normal_floats(g.out_c * g.in_c * g.k_sp, rng);
  const std::vector<float> b = pymx::test::normal_floats(g.out_c, rng);
  if (c.nan) x[x.size() / 3] = NAN;
  const pymx::nn::DirectConvWeights packed =
      pymx::nn::conv2d_direct_f32_pack(g, w.data(), b.data());
  const std::vector<float> apart = run_apart(cp, x, packed, level);
  const std::vector<float> fused = run_fused(cp, x, packed, nullptr, nullptr, level);
  expect_same_bits(fused, apart, what);

  // With the transform: y * scale + shift per channel, as batch_norm's float expression (the
  // product rounded to float, then the sum; each exact in double and rounded once, so no fused
  // multiply-add can creep in here) and against float64.
  const std::vector<float> scale = pymx::test::normal_floats(g.out_c, rng);
  const std::vector<float> shift = pymx::test::normal_floats(g.out_c, rng);
  const std::vector<float> normalized =
      run_fused(cp, x, packed, scale.data(), shift.data(), level);
  for (size_t i = 0; i < normalized.size(); ++i) {
    const int64_t channel = i / p.out_sp % g.out_c;
    const float product = static_cast<float>(double(fused[i]) * scale[channel]);
    const float expected = static_cast<float>(double(product) + shift[channel]);
    EXPECT(std::memcmp(&normalized[i], &expected, sizeof(float)) == 0 ||
           (std::isnan(normalized[i]) && std::isnan(expected)),
           what, ": output ", i, " is ", normalized[i], " with the transform, expected ",
           expected);
  }
  const std::vector<double> expected = reference(cp, x, w, b);
  const double taps = double(g.in_c * g.k_sp);
  int64_t nans = 0;
  for (size_t i = 0; i < normalized.size(); ++i) {
    const int64_t channel = i / p.out_sp % g.out_c;
    const double k = scale[channel], s = shift[channel], v = expected[i];
    // Which NaNs the pooling passes on is its own rule (checked bit for bit above).
    if (std::isnan(fused[i])) {
      EXPECT(std::isnan(normalized[i]), what, ": output ", i, " is ", normalized[i],
             ", expected NaN");
      ++nans;
      continue;
    }
    if (std::isnan(v)) continue;
    // The float32 convolution (a few ulps per tap, as test_conv_direct) scaled by k, plus two
    // float roundings of the transform.
    const double tolerance = std::fabs(k) * 1e-6 * taps * (1.0 + std::fabs(v)) +
                             2.4e-7 * (std::fabs(v * k) + std::fabs(s));
    EXPECT(std::fabs(normalized[i] - (v * k + s)) <= tolerance, what, ": output ", i, " is ",
           normalized[i], ", expected ", v * k + s);
  }
  EXPECT(!c.nan || nans > 0, what, ": the NaN input reached no output");
}

// Convolution outputs chosen directly, to make the pooling order show: a 1x1 convolution of
// weight 1 and bias -0 passes its input through (NaN payloads included) and relu makes negatives
// +0. Windows of zeros and of repeated maxima, and NaNs with their own payloads at each of a
// window's 16 positions, on planes whose widths take every path of the AVX-512 pooling (one and
// two groups of 16 outputs per strip, two strips, a partial last vector): the fused kernel must
// give the separate ops' bits. The inputs have -0s too; today the convolution turns them into +0
// (its sums start from +0 + bias), and if it ever passed them on they would test ties of +0 and
// -0 here.
void check_ties_and_nans(FmaLevel level, std::mt19937* rng) {
  uint32_t payloads[3] = {0x7fc00001u, 0x7fc00002u, 0xffc00003u};
  float nans[3];
  std::memcpy(nans, payloads, sizeof nans);
  const float values[5] = {0.f, -0.f, -1.f, 1.f, 2.f};  // mostly zeros: many all-zero windows
  std::discrete_distribution<int> pick({35, 35, 10, 10, 10});
  std::uniform_int_distribution<int> which_nan(0, 2);
  for (int64_t width : {18, 38, 70, 127}) {
    const Case c = {{2, 1, 20, width}, {1, 1, 1, 1}, "(0, 0)", "(4, 4)", "(2, 2)", false};
    const ConvPoolGeometry cp = geometry(c);
    const float one = 1.f, minus_zero = -0.f;
    const pymx::nn::DirectConvWeights packed =
        pymx::nn::conv2d_direct_f32_pack(cp.conv, &one, &minus_zero);
    const std::string what = pymx::str_cat(level == FmaLevel::kAvx512 ? "avx512" : "avx2",
                                           " width ", width);
    std::vector<float> x(2 * 20 * width);
    auto expect_as_apart = [&](const std::string& data) {
      expect_same_bits(run_fused(cp, x, packed, nullptr, nullptr, level),
                       run_apart(cp, x, packed, level), pymx::str_cat(what, ", ", data));
    };
    for (int trial = 0; trial < 20; ++trial) {
      for (float& e : x) e = values[pick(*rng)];
      expect_as_apart("ties");
      for (size_t i = trial; i < x.size(); i += 23) x[i] = nans[which_nan(*rng)];
      expect_as_apart("ties and NaNs");
    }
    // One window (pooled row 3, column 5 of image 1) of zeros with a NaN at each position and
    // a 2 at each other position.
    float* corner = x.data() + 20 * width + 6 * width + 10;
    for (int64_t nan_at = 0; nan_at < 16; ++nan_at) {
      for (int64_t two_at = 0; two_at < 16; ++two_at) {
        if (two_at == nan_at) continue;
        for (float& e : x) e = values[pick(*rng) % 2];
        corner[two_at / 4 * width + two_at % 4] = 2.f;
        corner[nan_at / 4 * width + nan_at % 4] = nans[nan_at % 3];
        expect_as_apart(pymx::str_cat("NaN at window position ", nan_at, ", 2 at ", two_at));
      }
    }
  }
}

// Geometries outside the kernel: handles() says no.
void check_refused(FmaLevel level) {
  const Case strided_conv = {{1, 3, 40, 40}, {8, 3, 2, 2}, "(0, 0)", "(4, 4)", "(2, 2)", false};
  ConvPoolGeometry cp = geometry(strided_conv);
  EXPECT(pymx::nn::conv_relu_max_pool_handles(cp, level), "the unchanged geometry");
  cp.conv.s[1] = cp.conv.s[2] = 3;
  EXPECT(!pymx::nn::conv_relu_max_pool_handles(cp, level), "a stride-3 convolution");
  const Case pool_stride1 = {{1, 3, 40, 40}, {8, 3, 2, 2}, "(0, 0)", "(2, 2)", "(1, 1)", false};
  EXPECT(!pymx::nn::conv_relu_max_pool_handles(geometry(pool_stride1), level),
         "a pooling of stride 1 along the width");
  const Case narrow = {{1, 3, 40, 7}, {8, 3, 2, 2}, "(0, 0)", "(2, 2)", "(2, 2)", false};
  EXPECT(!pymx::nn::conv_relu_max_pool_handles(geometry(narrow), level),
         "output rows narrower than a vector");
}

}  // namespace

int main() {
  const FmaLevel best = pymx::nn::fma_level();
  if (best == FmaLevel::kNone) {
    std::printf("test_conv_pool_fused: this CPU has neither AVX2+FMA nor AVX-512; "
                "nothing to test\n");
    return 0;
  }
  std::vector<FmaLevel> levels = {FmaLevel::kAvx2};
  if (best == FmaLevel::kAvx512) levels.push_back(FmaLevel::kAvx512);
  std::vector<Case> cases;
  for (int64_t batch : {1, 2}) {  // LeafNetwork's blocks
    cases.push_back({{batch, 3, 128, 128}, {32, 3, 2, 2}, "(0, 0)", "(4, 4)", "(2, 2)", false});
    cases.push_back({{batch, 32, 62, 62}, {64, 32, 2, 2}, "(0, 0)", "(4, 4)", "(2, 2)", false});
    cases.push_back({{batch, 64, 29, 29}, {128, 64, 2, 2}, "(0, 0)", "(4, 4)", "(2, 2)", false});
  }
  // Odd sizes, 13 filters, padding, a NaN, pooling 3x3 with stride 1 down the rows.
  cases.push_back({{1, 5, 37, 41}, {13, 5, 3, 3}, "(1, 1)", "(3, 3)", "(1, 2)", true});
  // 300 rows of 11 filters: bands at batch 1, each of several chunks.
  cases.push_back({{1, 3, 300, 40}, {11, 3, 2, 2}, "(0, 0)", "(4, 4)", "(2, 2)", false});
  // A 1x1 convolution, pooling 2x3 with stride 3 down the rows (rows between the windows),
  // 2 images.
  cases.push_back({{2, 4, 30, 50}, {9, 4, 1, 1}, "(0, 0)", "(2, 3)", "(3, 2)", false});
  std::mt19937 rng(2024);
  for (FmaLevel level : levels) {
    for (const Case& c : cases) check(c, level, &rng);
    check_ties_and_nans(level, &rng);
    check_refused(level);
  }
  std::printf("test_conv_pool_fused: ok (%zu levels x %zu cases)\n", levels.size(), cases.size());
  return 0;
}
