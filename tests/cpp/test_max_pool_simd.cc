// The float max-pooling kernels of engine/src/ops/max_pool_2d.h at every SIMD level this CPU runs
// (SSE2 always, AVX-512 where the CPU has it; the Python tests reach only the best one), against a
// scalar reference of the pooling op's semantics: forward and backward bit for bit, with ties in a
// window, signed zeros, NaN, windows clipped by the edges, odd widths and the 16-output blocks'
// edges.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/max_pool_2d.h"
#include "ops/pool_geometry.h"
#include "test_util.h"

using pymx::Attrs;
using pymx::Shape;
using pymx::nn::PoolGeom;
using pymx::nn::SimdLevel;

namespace {

struct Case {
  Shape data;  // N, C, [H,] W
  std::string kernel, stride, pad, convention;
};

std::string describe(const Case& c, SimdLevel level) {
  return pymx::str_cat(level == SimdLevel::kAvx512 ? "avx512" : "sse2", " data ",
                       pymx::shape_str(c.data), " kernel ", c.kernel, " stride ", c.stride,
                       " pad ", c.pad, " ", c.convention);
}

// Input rows (dim 1) or columns (dim 2) [lo, hi) of output o, clipped to the input.
void window(const PoolGeom& g, int dim, int64_t o, int64_t* lo, int64_t* hi) {
  const int64_t start = o * g.s[dim] - g.p[dim];
  *lo = std::max<int64_t>(start, 0);
  *hi = std::min(start + g.k[dim], g.in[dim]);
}

// The max of each window: the leftmost column maximum that no later column exceeds, each column
// maximum being the topmost of its rows that no later row exceeds (so -0 and +0 tie as the
// generic code resolves them). Inputs without NaN.
void reference_forward(const PoolGeom& g, const float* x, float* y) {
  for (int64_t oy = 0; oy < g.out[1]; ++oy) {
    for (int64_t ox = 0; ox < g.out[2]; ++ox) {
      int64_t r0, r1, c0, c1;
      window(g, 1, oy, &r0, &r1);
      window(g, 2, ox, &c0, &c1);
      float best = 0;
      for (int64_t c = c0; c < c1; ++c) {
        float column = x[r0 * g.in[2] + c];
        for (int64_t r = r0 + 1; r < r1; ++r) {
          if (x[r * g.in[2] + c] > column) column = x[r * g.in[2] + c];
        }
        if (c == c0 || column > best) best = column;
      }
      y[oy * g.out[2] + ox] = best;
    }
  }
}

// dx: zero, plus each output's gradient at the first (row-major) input of its window equal to the
// output, added in output order.
void reference_backward(const PoolGeom& g, const float* dy, const float* x, const float* y,
                        float* dx) {
  std::fill(dx, dx + g.in_sp, 0.f);
  for (int64_t oy = 0; oy < g.out[1]; ++oy) {
    for (int64_t ox = 0; ox < g.out[2]; ++ox) {
      int64_t r0, r1, c0, c1;
      window(g, 1, oy, &r0, &r1);
      window(g, 2, ox, &c0, &c1);
      const int64_t o = oy * g.out[2] + ox;
      bool done = false;
      for (int64_t r = r0; r < r1 && !done; ++r) {
        for (int64_t c = c0; c < c1 && !done; ++c) {
          if (x[r * g.in[2] + c] == y[o]) {
            dx[r * g.in[2] + c] += dy[o];
            done = true;
          }
        }
      }
    }
  }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Post-ReLU-like data: a third exact zeros (some -0), small integers for repeated maxima in
// different rows and columns, and fractions. With `nan`, a few NaNs too.
std::vector<float> make_data(int64_t n, std::mt19937* rng, bool nan) {
  std::uniform_int_distribution<int> kind(0, 9), small(0, 3);
  std::uniform_real_distribution<float> frac(0.f, 4.f);
  std::vector<float> v(n);
  for (float& e : v) {
    const int k = kind(*rng);
    e = k < 3 ? (k == 0 ? -0.f : 0.f) : k < 6 ? static_cast<float>(small(*rng)) : frac(*rng);
    if (nan && k == 9 && small(*rng) == 0) e = NAN;
  }
  return v;
}

void check_case(const Case& c, SimdLevel level, std::mt19937* rng) {
  Attrs attrs{{"kernel", c.kernel}, {"stride", c.stride}, {"pad", c.pad},
              {"pooling_convention", c.convention}};
  const PoolGeom g = pymx::nn::pool_geometry(attrs, c.data);
  const std::string what = describe(c, level);
  // Height padding: the forward is the generic code's, the backward still vectorised.
  const bool forward = pymx::nn::max_pool_forward_f32_handles(g);
  EXPECT(forward == (g.p[1] == 0), what);
  EXPECT(pymx::nn::max_pool_backward_f32_handles(level, g), what);
  std::vector<float> scratch(pymx::nn::max_pool_f32_scratch(g));

  for (int data = 0; data < 3; ++data) {  // 0: ties, 1: all zeros, 2: with NaN
    const bool nan = data == 2;
    std::vector<float> x = data == 1 ? std::vector<float>(g.planes * g.in_sp, 0.f)
                                     : make_data(g.planes * g.in_sp, rng, nan);
    std::vector<float> y(g.planes * g.out_sp, 7.f), y_ref(y.size());
    for (int64_t p = 0; p < g.planes; ++p) {
      reference_forward(g, x.data() + p * g.in_sp, y_ref.data() + p * g.out_sp);
      if (!forward) continue;
      pymx::nn::max_pool_forward_f32(level, g, x.data() + p * g.in_sp, y.data() + p * g.out_sp,
                                     scratch.data());
    }
    if (forward && !nan) EXPECT(same_bits(y, y_ref), what, ": forward differs from the reference");

    // Gradients that make the order of the sums show; some outputs that match nothing (NaN, or a
    // value not in the window) send none.
    std::vector<float> dy = make_data(y.size(), rng, false);
    for (float& e : dy) e = e * 1.37f - 2.11f;
    std::vector<float> y_back = forward && nan ? y : y_ref;  // y_ref is off where NaN is
    for (size_t i = 0; i < y_back.size(); i += 7) y_back[i] = i % 2 ? NAN : 1e9f;
    std::vector<float> dx(x.size(), 12345.f), dx_ref(x.size());
    for (int64_t p = 0; p < g.planes; ++p) {
      const int64_t in = p * g.in_sp, out = p * g.out_sp;
      pymx::nn::max_pool_backward_f32(level, g, dy.data() + out, x.data() + in,
                                      y_back.data() + out, dx.data() + in, scratch.data());
      reference_backward(g, dy.data() + out, x.data() + in, y_back.data() + out,
                         dx_ref.data() + in);
    }
    EXPECT(same_bits(dx, dx_ref), what, ": backward differs from the reference (data ", data,
           ")");
  }
}

// What one level computes, another must compute bit for bit, NaN included.
void check_levels_agree(const Case& c, std::mt19937* rng) {
  Attrs attrs{{"kernel", c.kernel}, {"stride", c.stride}, {"pad", c.pad},
              {"pooling_convention", c.convention}};
  const PoolGeom g = pymx::nn::pool_geometry(attrs, c.data);
  if (!pymx::nn::max_pool_forward_f32_handles(g)) return;
  std::vector<float> scratch(pymx::nn::max_pool_f32_scratch(g));
  const std::vector<float> x = make_data(g.planes * g.in_sp, rng, true);
  std::vector<float> y_sse2(g.planes * g.out_sp), y_avx512(y_sse2.size());
  for (int64_t p = 0; p < g.planes; ++p) {
    pymx::nn::max_pool_forward_f32(SimdLevel::kSse2, g, x.data() + p * g.in_sp,
                                   y_sse2.data() + p * g.out_sp, scratch.data());
    pymx::nn::max_pool_forward_f32(SimdLevel::kAvx512, g, x.data() + p * g.in_sp,
                                   y_avx512.data() + p * g.out_sp, scratch.data());
  }
  EXPECT(same_bits(y_sse2, y_avx512), describe(c, SimdLevel::kAvx512), ": levels differ");
}

const std::vector<Case> kCases = {
    // LeafNetwork's three pools (two planes each).
    {{1, 2, 127, 127}, "(4, 4)", "(2, 2)", "(0, 0)", "valid"},
    {{1, 2, 61, 61}, "(4, 4)", "(2, 2)", "(0, 0)", "valid"},
    {{2, 1, 28, 28}, "(4, 4)", "(2, 2)", "(0, 0)", "valid"},
    // 'full': the last column and row windows clipped by the edge.
    {{1, 3, 9, 10}, "(4, 4)", "(2, 2)", "(0, 0)", "full"},
    {{1, 2, 12, 13}, "(3, 3)", "(2, 2)", "(0, 0)", "full"},
    // Other kernel widths, heights and strides along the height; height padding.
    {{1, 3, 11, 12}, "(3, 3)", "(2, 2)", "(0, 0)", "valid"},
    {{2, 2, 7, 9}, "(2, 2)", "(2, 2)", "(0, 0)", "valid"},
    {{1, 2, 8, 11}, "(3, 1)", "(1, 2)", "(0, 0)", "valid"},
    {{1, 2, 13, 15}, "(4, 4)", "(3, 2)", "(1, 0)", "full"},
    {{1, 2, 6, 17}, "(2, 3)", "(1, 2)", "(1, 0)", "valid"},
    // Widths at the edges of 4- and 16-output blocks (16 outputs fit exactly at width 34).
    {{1, 2, 5, 4}, "(4, 4)", "(2, 2)", "(0, 0)", "valid"},
    {{1, 2, 5, 33}, "(4, 4)", "(2, 2)", "(0, 0)", "valid"},
    {{1, 2, 5, 34}, "(4, 4)", "(2, 2)", "(0, 0)", "valid"},
    {{1, 2, 5, 35}, "(4, 4)", "(2, 2)", "(0, 0)", "full"},
    {{1, 2, 5, 66}, "(4, 4)", "(2, 2)", "(0, 0)", "valid"},
    {{1, 2, 5, 67}, "(3, 3)", "(2, 2)", "(0, 0)", "full"},
    // 1-D pooling (NCW).
    {{2, 3, 37}, "(4,)", "(2,)", "(0,)", "valid"},
    {{1, 2, 38}, "(3,)", "(2,)", "(0,)", "full"},
};

// Shapes the SSE2 backward leaves to the generic code (kernel taller than 4), the AVX-512 one
// takes.
const std::vector<Case> kTallCases = {
    {{1, 2, 14, 21}, "(5, 4)", "(1, 2)", "(0, 0)", "valid"},
    {{1, 2, 20, 19}, "(9, 2)", "(3, 2)", "(2, 0)", "full"},
};

void check_handles() {
  auto geometry = [](const std::string& kernel, const std::string& stride, const std::string& pad,
                     const std::string& type = "max") {
    Attrs attrs{{"kernel", kernel}, {"stride", stride}, {"pad", pad}, {"pool_type", type}};
    return pymx::nn::pool_geometry(attrs, {1, 1, 9, 9});
  };
  auto forward = [](const PoolGeom& g) { return pymx::nn::max_pool_forward_f32_handles(g); };
  auto backward = [](SimdLevel level, const PoolGeom& g) {
    return pymx::nn::max_pool_backward_f32_handles(level, g);
  };
  EXPECT(forward(geometry("(4, 4)", "(2, 2)", "(0, 0)")));
  EXPECT(!forward(geometry("(4, 4)", "(2, 1)", "(0, 0)")));
  EXPECT(!forward(geometry("(4, 5)", "(2, 2)", "(0, 0)")));
  EXPECT(!forward(geometry("(4, 4)", "(2, 2)", "(0, 1)")));
  EXPECT(!forward(geometry("(4, 4)", "(2, 2)", "(1, 0)")));
  EXPECT(!forward(geometry("(4, 4)", "(2, 2)", "(0, 0)", "avg")));
  EXPECT(backward(SimdLevel::kSse2, geometry("(3, 3)", "(1, 1)", "(1, 1)")));
  EXPECT(!backward(SimdLevel::kSse2, geometry("(5, 4)", "(1, 2)", "(0, 0)")));
  EXPECT(backward(SimdLevel::kAvx512, geometry("(5, 4)", "(1, 2)", "(0, 0)")));
  EXPECT(backward(SimdLevel::kAvx512, geometry("(5, 4)", "(1, 2)", "(1, 0)")));
  EXPECT(!backward(SimdLevel::kAvx512, geometry("(5, 5)", "(1, 1)", "(0, 0)")));
  EXPECT(!backward(SimdLevel::kAvx512, geometry("(3, 3)", "(2, 2)", "(0, 0)", "sum")));
}

}  // namespace

int main() {
  std::mt19937 rng(20240611);
  check_handles();
  std::vector<SimdLevel> levels = {SimdLevel::kSse2};
  if (pymx::nn::max_pool_simd_level() == SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx512);
  for (SimdLevel level : levels) {
    for (const Case& c : kCases) check_case(c, level, &rng);
  }
  if (levels.size() == 2) {
    for (const Case& c : kTallCases) check_case(c, SimdLevel::kAvx512, &rng);
    for (const Case& c : kCases) check_levels_agree(c, &rng);
  }
  std::printf("test_max_pool_simd: ok (%s)\n",
              levels.size() == 2 ? "sse2 and avx512" : "sse2 only: this CPU lacks AVX-512F");
  return 0;
}
