// A float64 reference of the 2-D convolution (NCHW, one group, dilation 1; stride and padding
// taken from the geometry) for the native tests of the CPU convolution kernels, with the geometry
// and random operands of their cases.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/conv_geometry.h"

namespace pymx {
namespace test {

// `n` draws from the standard normal distribution.
inline std::vector<float> normal_floats(int64_t n, std::mt19937* rng) {
  std::normal_distribution<float> normal;
  std::vector<float> values(n);
  for (float& v : values) v = normal(*rng);
  return values;
}

// The geometry of a convolution of `data` (N, C, H, W) with `weight` (F, C, kh, kw), `pad`
// ("(ph, pw)") and `stride` ("(sh, sw)").
inline nn::ConvGeometry conv2d_geometry(const Shape& data, const Shape& weight,
                                        const std::string& pad,
                                        const std::string& stride = "(1, 1)") {
  const Attrs attrs{{"kernel", shape_str({weight[2], weight[3]})},
                    {"pad", pad},
                    {"stride", stride},
                    {"num_filter", std::to_string(weight[0])}};
  return nn::conv_geometry(attrs, data, weight);
}

// y = conv(x, w) + bias (bias may be null), then relu when asked (NaN kept), in float64.
inline void conv2d_reference(const nn::ConvGeometry& g, const std::vector<float>& x,
                             const std::vector<float>& w, const float* bias, bool relu,
                             std::vector<double>* y) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t f = 0; f < g.out_c; ++f)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          double sum = bias ? bias[f] : 0.0;
          for (int64_t c = 0; c < g.in_c; ++c)
            for (int64_t ky = 0; ky < g.k[1]; ++ky)
              for (int64_t kx = 0; kx < g.k[2]; ++kx) {
                const int64_t iy = oy * g.s[1] + ky - g.p[1], ix = ox * g.s[2] + kx - g.p[2];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                sum += double(x[((n * g.in_c + c) * H + iy) * W + ix]) *
                       w[((f * g.in_c + c) * g.k[1] + ky) * g.k[2] + kx];
              }
          if (relu && sum < 0) sum = 0;
          (*y)[((n * g.out_c + f) * OH + oy) * OW + ox] = sum;
        }
}

}  // namespace test
}  // namespace pymx
