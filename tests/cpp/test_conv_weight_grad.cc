// The direct weight gradient of engine/src/ops/conv_weight_grad.h against a float64 reference:
// tap counts and filter counts that are and are not multiples of the 4 x 6 tile, output widths
// that are and are not multiples of the 16-lane vector (the masked last vector), padding, rows
// split into several bands, 1x1 and 3x3 kernels, stride 2 across (the input split into column
// phases) with odd and even widths and stride 2 down; and non-finite values: an infinity in the
// input or in dy must give each sum exactly the infinity or NaN the float64 sum has, and no other
// sum may change.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "conv_reference.h"
#include "ops/conv_geometry.h"
#include "ops/conv_weight_grad.h"
#include "test_util.h"

using pymx::Shape;
using pymx::nn::ConvGeometry;
using pymx::nn::FmaLevel;

namespace {

struct Case {
  Shape data, weight;  // (N, C, H, W), (F, C, kh, kw)
  std::string pad;
  std::string stride = "(1, 1)";
};

// dw[f][tap] = sum over images and output positions of dy * x, in float64, for K = C * kh * kw
// taps in the weight's order. Outside the image x is 0, multiplied like any value (an infinite
// dy there makes NaN), as the GEMM's zero-padded columns are.
std::vector<double> reference(const ConvGeometry& g, const std::vector<float>& x,
                              const std::vector<float>& dy) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2], K = g.in_c * g.k_sp;
  std::vector<double> dw(g.out_c * K, 0.0);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t f = 0; f < g.out_c; ++f)
      for (int64_t c = 0; c < g.in_c; ++c)
        for (int64_t ky = 0; ky < g.k[1]; ++ky)
          for (int64_t kx = 0; kx < g.k[2]; ++kx) {
            double sum = 0.0;
            for (int64_t oy = 0; oy < OH; ++oy)
              for (int64_t ox = 0; ox < OW; ++ox) {
                const int64_t iy = oy * g.s[1] + ky - g.p[1], ix = ox * g.s[2] + kx - g.p[2];
                const bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
                sum += double(dy[((n * g.out_c + f) * OH + oy) * OW + ox]) *
                       (inside ? x[((n * g.in_c + c) * H + iy) * W + ix] : 0.0f);
              }
            dw[f * K + (c * g.k[1] + ky) * g.k[2] + kx] += sum;
          }
  return dw;
}

// The kernel's sums over the batch, image by image, as the convolution's backward calls it,
// returned in the weight's (F, K) order; each image's filter tiles in calls of `tiles_per_call`.
std::vector<float> direct(const ConvGeometry& g, const std::vector<float>& x,
                          const std::vector<float>& dy, int64_t tiles_per_call = 1000) {
  const int64_t K = g.in_c * g.k_sp, tiles = pymx::nn::conv2d_weight_grad_f32_tiles(g);
  std::vector<float> dwt(K * g.out_c, 0.0f), scratch(pymx::nn::conv2d_weight_grad_f32_scratch(g));
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t first = 0; first < tiles; first += tiles_per_call)
      pymx::nn::conv2d_weight_grad_f32_image(g, x.data() + n * g.in_c * g.in_sp,
                                             dy.data() + n * g.out_c * g.out_sp, dwt.data(),
                                             scratch.empty() ? nullptr : scratch.data(), first,
                                             std::min(first + tiles_per_call, tiles));
  std::vector<float> dw(g.out_c * K);
  for (int64_t f = 0; f < g.out_c; ++f)
    for (int64_t k = 0; k < K; ++k) dw[f * K + k] = dwt[k * g.out_c + f];
  return dw;
}

ConvGeometry geometry(const Case& c) {
  return pymx::test::conv2d_geometry(c.data, c.weight, c.pad, c.stride);
}

std::string describe(const Case& c) {
  return pymx::str_cat("data ", pymx::shape_str(c.data), " weight ", pymx::shape_str(c.weight),
                       " pad ", c.pad, " stride ", c.stride);
}

// Every sum within float32 rounding of the float64 one; non-finite sums must match exactly in
// kind (NaN, +inf, -inf).
void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  int64_t terms, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(want[i])) {
      EXPECT(std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i], what, ": sum ", i,
             " is ", got[i], ", expected ", want[i]);
      continue;
    }
    // float32 products of |dy x| ~ 1 summed over `terms` positions: a few ulps per term.
    const double tolerance = 1e-6 * terms * (1.0 + std::fabs(want[i]));
    EXPECT(std::fabs(got[i] - want[i]) <= tolerance, what, ": sum ", i, " is ", got[i],
           ", expected ", want[i]);
  }
}

void check(const Case& c, std::mt19937* rng) {
  const ConvGeometry g = geometry(c);
  const std::string what = describe(c);
  EXPECT(pymx::nn::conv2d_weight_grad_f32_handles(g), what);
  std::vector<float> x = pymx::test::normal_floats(g.batch * g.in_c * g.in_sp, rng);
  std::vector<float> dy = pymx::test::normal_floats(g.batch * g.out_c * g.out_sp, rng);
  const std::vector<float> whole = direct(g, x, dy);
  expect_close(whole, reference(g, x, dy), g.batch * g.out_sp, what);
  // Threads share an image by filter tiles (Note [Fewer images than threads]): the same floats.
  EXPECT(direct(g, x, dy, 1) == whole, what, ": computed one tile at a time, the sums differ");
}

// An infinity at the start of an input row and one at the end of a dy row: positions that a
// row's masked last vector overlaps, or that reading past a row would reach.
void check_non_finite(const Case& c, std::mt19937* rng) {
  const ConvGeometry g = geometry(c);
  const std::string what = describe(c) + " with infinities";
  std::vector<float> x = pymx::test::normal_floats(g.batch * g.in_c * g.in_sp, rng);
  std::vector<float> dy = pymx::test::normal_floats(g.batch * g.out_c * g.out_sp, rng);
  x[(g.in_c - 1) * g.in_sp + 3 * g.in[2]] = INFINITY;         // row 3 of the last channel, column 0
  dy[g.out_c / 2 * g.out_sp + 2 * g.out[2] - 1] = -INFINITY;  // row 1's last output of a filter
  const std::vector<double> want = reference(g, x, dy);
  int64_t finite = 0;
  for (double v : want) finite += std::isfinite(v);
  EXPECT(finite > 0 && finite < static_cast<int64_t>(want.size()), what,
         ": the case must mix finite and non-finite sums (", finite, " of ", want.size(),
         " finite)");
  expect_close(direct(g, x, dy), want, g.batch * g.out_sp, what);
}

}  // namespace

int main() {
  const ConvGeometry narrow = geometry({{1, 2, 9, 16}, {3, 2, 2, 2}, "(0, 0)"});  // 15 wide
  const ConvGeometry strided = geometry({{1, 3, 40, 40}, {4, 3, 2, 2}, "(0, 0)", "(2, 2)"});
  const ConvGeometry many_taps =
      geometry({{1, 64, 40, 40}, {4, 64, 3, 3}, "(1, 1)", "(2, 2)"});  // 576 taps
  const ConvGeometry pointwise = geometry({{1, 8, 40, 40}, {4, 8, 1, 1}, "(0, 0)", "(2, 2)"});
  const ConvGeometry stride3 = geometry({{1, 3, 60, 60}, {4, 3, 2, 2}, "(0, 0)", "(3, 3)"});
  EXPECT(!pymx::nn::conv2d_weight_grad_f32_handles(narrow, FmaLevel::kAvx512),
         "outputs narrower than a vector go to the GEMM");
  EXPECT(pymx::nn::conv2d_weight_grad_f32_handles(strided, FmaLevel::kAvx512),
         "stride 2 across with 12 taps");
  EXPECT(!pymx::nn::conv2d_weight_grad_f32_handles(many_taps, FmaLevel::kAvx512),
         "stride 2 across with more than 256 taps goes to the GEMM");
  EXPECT(!pymx::nn::conv2d_weight_grad_f32_handles(pointwise, FmaLevel::kAvx512),
         "a 1x1 kernel of stride 2 goes to the GEMM");
  EXPECT(!pymx::nn::conv2d_weight_grad_f32_handles(stride3, FmaLevel::kAvx512),
         "stride 3 across goes to the GEMM");
  const ConvGeometry wide = geometry({{1, 3, 40, 40}, {4, 3, 2, 2}, "(0, 0)"});
  EXPECT(pymx::nn::conv2d_weight_grad_f32_handles(wide, FmaLevel::kAvx512), "a 39-wide output");
  EXPECT(!pymx::nn::conv2d_weight_grad_f32_handles(wide, FmaLevel::kAvx2),
         "the kernel is AVX-512 only");
  if (pymx::nn::fma_level() != FmaLevel::kAvx512) {
    std::printf("test_conv_weight_grad: this CPU has no AVX-512; the kernel is not used here\n");
    return 0;
  }
  const std::vector<Case> cases = {
      {{2, 3, 24, 128}, {32, 3, 2, 2}, "(0, 0)"},   // LeafNetwork's conv1 (127 wide), 3 bands
      {{1, 32, 20, 62}, {64, 32, 2, 2}, "(0, 0)"},  // conv2's width: 61 = 3 vectors + 13
      {{3, 64, 11, 29}, {128, 64, 2, 2}, "(0, 0)"}, // conv3: 28 wide, K = 256
      {{2, 3, 13, 40}, {13, 3, 3, 3}, "(1, 1)"},    // 3x3 padded: K = 27, 13 filters
      {{1, 5, 9, 17}, {7, 5, 1, 1}, "(0, 0)"},      // 1x1: K = 5, 17 wide
      {{2, 1, 18, 20}, {5, 1, 5, 5}, "(2, 1)"},     // 5x5, uneven padding: 18 wide
      {{1, 2, 70, 32}, {6, 2, 2, 3}, "(0, 1)"},     // 32 wide (no masked vector), 3 bands
      // stride 2: the stem's 7x7/2 (odd padded width, 17 wide), an even padded width (18
      // wide: phases of equal length), a 2x2 kernel without padding, 2 down only, 2 across
      // only in several bands
      {{2, 3, 21, 33}, {8, 3, 7, 7}, "(3, 3)", "(2, 2)"},
      {{1, 7, 9, 36}, {9, 7, 3, 3}, "(1, 1)", "(2, 2)"},
      {{1, 4, 8, 32}, {5, 4, 2, 2}, "(0, 0)", "(2, 2)"},
      {{2, 3, 19, 20}, {6, 3, 3, 3}, "(1, 1)", "(2, 1)"},
      {{1, 2, 200, 64}, {4, 2, 3, 3}, "(1, 1)", "(1, 2)"},
  };
  std::mt19937 rng(2024);
  for (const Case& c : cases) check(c, &rng);
  for (const Case& c : {cases[2], cases[3], cases[8]}) check_non_finite(c, &rng);
  std::printf("test_conv_weight_grad: ok (%zu cases, 3 with infinities)\n", cases.size());
  return 0;
}
