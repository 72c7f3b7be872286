// Direct weight gradient of a 2-D float32 convolution (stride 1 or 2 across), for the convolution's
// backward (nn_convolution.cc), which uses im2col + GEMM otherwise. AVX-512 only: on other CPUs
// handles() is false. See Note [Direct weight gradient] in conv_weight_grad.cc.
#pragma once

#include <cstdint>

#include "ops/conv_geometry.h"
#include "ops/fma_level.h"

namespace pymx {
namespace nn {

// Whether the direct weight gradient at `level` handles g: AVX-512, 2-D, channel-first, one
// group, stride 1 across (any down) or stride 2 across with a kernel of 2 to 256 taps
// (in_c * kh * kw), dilation 1, and at least a vector's width (16) of outputs per row.
bool conv2d_weight_grad_f32_handles(const ConvGeometry& g, FmaLevel level = fma_level());

// Floats of scratch one conv2d_weight_grad_f32_image call needs (the zero-padded image, split
// into column phases with stride 2 across; 0 without padding and stride 2).
int64_t conv2d_weight_grad_f32_scratch(const ConvGeometry& g);

// Filters are computed in tiles of this many; a tile's sums do not depend on the other tiles.
constexpr int64_t kWeightGradTileFilters = 6;

// Adds one image's weight gradient to `dwt`, transposed: with K = in_c * kh * kw taps in the
// weight's order (channel, ky, kx), element (k, f) is dwt[k * g.out_c + f] and gains
// sum over output positions p of dy[f][p] * x[c][p + (ky, kx) - pad]. `x` is the image's input
// (in_c, H, W), `dy` its output gradient (out_c, OH, OW). Only filters [first_tile, last_tile)
// * kWeightGradTileFilters (those below out_c), so that threads can share an image's filters.
// Runs on the calling thread. Requires conv2d_weight_grad_f32_handles(g); `scratch` holds
// conv2d_weight_grad_f32_scratch(g) floats (may be null when that is 0).
void conv2d_weight_grad_f32_image(const ConvGeometry& g, const float* x, const float* dy,
                                  float* dwt, float* scratch, int64_t first_tile,
                                  int64_t last_tile);

// The number of filter tiles of g.
inline int64_t conv2d_weight_grad_f32_tiles(const ConvGeometry& g) {
  return (g.out_c + kWeightGradTileFilters - 1) / kWeightGradTileFilters;
}

}  // namespace nn
}  // namespace pymx
