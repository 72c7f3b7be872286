// Direct 2-D convolution for float32 (stride 1), for the convolution op's forward
// (nn_convolution.cc), which uses im2col + GEMM otherwise. The kernel comes for AVX2+FMA and AVX-512, chosen at run
// time; on a CPU with neither, handles() is false. See Note [Direct convolution] in
// conv_direct.cc.
#pragma once

#include <cstdint>

#include "ops/conv_geometry.h"

namespace pymx {
namespace nn {

// Instruction sets the kernel comes in; kNone: the CPU has neither.
enum class DirectConvLevel { kNone, kAvx2, kAvx512 };

// The best level this CPU runs (AVX-512F, else AVX2 with FMA). Thread-safe, computed once.
DirectConvLevel conv2d_direct_level();

// Whether the direct kernel at `level` handles g: 2-D, channel-first, one group, stride 1,
// dilation 1, in_c * kh * kw <= 4608, and at least one vector of outputs per row.
bool conv2d_direct_f32_handles(const ConvGeometry& g,
                               DirectConvLevel level = conv2d_direct_level());

// Floats of scratch each thread needs (the zero-padded input rows of one band; 0 without padding).
int64_t conv2d_direct_f32_scratch(const ConvGeometry& g);

// y = relu?(conv(x, w) + bias) over the whole batch, split across the intra-op threads; `bias`
// may be null. `scratch` holds conv2d_direct_f32_scratch(g) floats (may be null when that is 0).
// Requires conv2d_direct_f32_handles(g, level); `level` must not be better than the CPU's.
void conv2d_direct_f32(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                       bool relu, float* y, float* scratch,
                       DirectConvLevel level = conv2d_direct_level());

}  // namespace nn
}  // namespace pymx
