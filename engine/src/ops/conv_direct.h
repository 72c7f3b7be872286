// Direct 2-D convolution for float32 (stride 1 or 2 across), for the convolution op's forward
// (nn_convolution.cc), which uses im2col + GEMM otherwise. The kernel comes for AVX2+FMA and AVX-512, chosen at run
// time; on a CPU with neither, handles() is false. See Note [Direct convolution] in
// conv_direct.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ops/conv_geometry.h"
#include "ops/fma_level.h"
#include "pymx/op.h"

namespace pymx {
namespace nn {

// Whether the direct kernel at `level` handles g: 2-D, channel-first, one group, stride 1 across
// or stride 2 with a kernel at least 2 wide (Note [Strided direct convolution]), any stride
// down, dilation 1, in_c * kh * kw <= 4608, and at least one vector of outputs per row.
bool conv2d_direct_f32_handles(const ConvGeometry& g,
                               FmaLevel level = fma_level());

// Floats of scratch the call needs (each thread's zero-padded input rows of one band; 0 without
// padding and stride 2 across).
int64_t conv2d_direct_f32_scratch(const ConvGeometry& g);

// Output channels are computed in blocks of this many.
constexpr int kDirectConvBlockChannels = 8;

// The weight (out_c, in_c, kh, kw) and bias (out_c; may be null) in the kernel's layout, made once
// for any number of calls.
struct DirectConvWeights {
  std::vector<float> weight;  // [channel block][tap][kDirectConvBlockChannels], zero-padded
  std::vector<float> bias;    // [channel block][kDirectConvBlockChannels]
};
DirectConvWeights conv2d_direct_f32_pack(const ConvGeometry& g, const float* w, const float* bias);

// conv2d_direct_f32_pack(g, w, bias) for an operator call whose weight is ctx's input
// `weight_input` and bias its input `bias_input` (-1: none): kept across inference calls in the
// packed weight cache when the call may use it (Note [Packed weight cache]), else packed now.
// The same floats either way.
std::shared_ptr<const DirectConvWeights> conv2d_direct_f32_weights(
    const OpContext& ctx, const ConvGeometry& g, int weight_input, const float* w,
    int bias_input, const float* bias);

// y = relu?(conv(x, w) + bias) over the whole batch, split across the intra-op threads (run
// serially when called from inside a parallel loop). `scratch` holds conv2d_direct_f32_scratch(g)
// floats (may be null when that is 0). Requires conv2d_direct_f32_handles(g, level); `level` must
// not be better than the CPU's.
void conv2d_direct_f32(const ConvGeometry& g, const float* x, const DirectConvWeights& weights,
                       bool relu, float* y, float* scratch,
                       FmaLevel level = fma_level());

// Floats of scratch one conv2d_direct_f32_rows call for `rows` output rows needs (the zero-padded
// input rows it reads; 0 without padding and stride 2 across).
int64_t conv2d_direct_f32_rows_scratch(const ConvGeometry& g, int64_t rows);

// Output rows [first_row, last_row) of image `image` for the output channels of block `block`
// ([8 * block, 8 * block + 8), those below out_c), on the calling thread: row r of the block's
// channel c goes to y + c * channel_stride + (r - first_row) * g.out[2]. The same floats as
// conv2d_direct_f32 computes for them. For kernels that consume the output while it is in cache
// (conv_pool_fused.h). `scratch` holds conv2d_direct_f32_rows_scratch(g, last_row - first_row)
// floats. Requires conv2d_direct_f32_handles(g, level).
void conv2d_direct_f32_rows(const ConvGeometry& g, const float* x,
                            const DirectConvWeights& weights, bool relu, int64_t image,
                            int64_t block, int64_t first_row, int64_t last_row, float* y,
                            int64_t channel_stride, float* scratch, FmaLevel level = fma_level());

}  // namespace nn
}  // namespace pymx
