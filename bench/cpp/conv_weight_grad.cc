// The direct weight gradient (engine/src/ops/conv_weight_grad.h) on LeafNetwork's three
// convolutions, on one thread, in GFLOP/s: the figures Note [Direct weight gradient] quotes,
// to read against fma_peak's one-thread ceiling.
//
//   conv_weight_grad [images]   (default 64)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ops/conv_geometry.h"
#include "ops/conv_weight_grad.h"

namespace {

struct Layer {
  const char* name;
  int64_t in_c, size, filters;  // Conv2D(kernel 2) on (in_c, size, size) images
};

constexpr Layer kLayers[] = {{"conv1", 3, 128, 32}, {"conv2", 32, 62, 64}, {"conv3", 64, 29, 128}};

}  // namespace

int main(int argc, char** argv) {
  if (pymx::nn::fma_level() != pymx::nn::FmaLevel::kAvx512) {
    std::printf("conv_weight_grad: this CPU has no AVX-512; the kernel is not used here\n");
    return 0;
  }
  const int64_t images = argc > 1 ? std::atol(argv[1]) : 64;
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::printf("%-6s %10s %10s\n", "layer", "ms", "GFLOP/s");
  for (const Layer& layer : kLayers) {
    const pymx::Attrs attrs{{"kernel", "(2, 2)"}, {"num_filter", std::to_string(layer.filters)}};
    const pymx::nn::ConvGeometry g = pymx::nn::conv_geometry(
        attrs, {images, layer.in_c, layer.size, layer.size}, {layer.filters, layer.in_c, 2, 2});
    std::vector<float> x(g.batch * g.in_c * g.in_sp), dy(g.batch * g.out_c * g.out_sp);
    for (float& v : x) v = normal(rng);
    for (float& v : dy) v = normal(rng);
    std::vector<float> dwt(g.out_c * g.in_c * g.k_sp);
    std::vector<float> scratch(pymx::nn::conv2d_weight_grad_f32_scratch(g) + 1);
    double best = 1e30;
    for (int round = 0; round < 3; ++round) {
      const auto start = std::chrono::steady_clock::now();
      for (int64_t n = 0; n < g.batch; ++n)
        pymx::nn::conv2d_weight_grad_f32_image(g, x.data() + n * g.in_c * g.in_sp,
                                               dy.data() + n * g.out_c * g.out_sp, dwt.data(),
                                               scratch.data(), 0,
                                               pymx::nn::conv2d_weight_grad_f32_tiles(g));
      const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
      best = std::min(best, seconds.count());
    }
    const double flops = 2.0 * g.batch * g.out_sp * g.out_c * g.in_c * g.k_sp;
    std::printf("%-6s %10.2f %10.1f\n", layer.name, best * 1e3, flops / best * 1e-9);
  }
  return 0;
}
