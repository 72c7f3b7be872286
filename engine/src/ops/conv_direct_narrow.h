// Direct 2-D convolution for float32 with narrow output rows (7 to 15 wide: resnet's 14x14 and
// 7x7 layers), vectorised over output channels, for the convolution op's forward
// (nn_convolution.cc). AVX-512 only; see Note [Narrow direct convolution] in
// conv_direct_narrow.cc.
#pragma once

#include <cstdint>

#include "ops/conv_geometry.h"
#include "ops/fma_level.h"

namespace pymx {
namespace nn {

// Whether the kernel at `level` handles g: AVX-512, 2-D, channel-first, one group, dilation 1,
// stride 1 or 2 across (any down), a kernel of more than one tap (a 1x1 kernel is a plain GEMM
// over the input, or its subsampling), in_c * kh * kw <= 4608, and output rows 7 to 15 wide.
bool conv2d_narrow_f32_handles(const ConvGeometry& g, FmaLevel level = fma_level());

// Output channels per block of the kernel's weight layout for g (32 or 64).
int64_t conv2d_narrow_f32_block_channels(const ConvGeometry& g);

// Floats of the weights and bias in the kernel's layout.
int64_t conv2d_narrow_f32_packed_floats(const ConvGeometry& g);

// Writes w (out_c, in_c, kh, kw) and bias (out_c; may be null) into `packed` (holding
// conv2d_narrow_f32_packed_floats(g) floats) in the kernel's layout, split across the intra-op
// threads. Requires conv2d_narrow_f32_handles(g).
void conv2d_narrow_f32_pack(const ConvGeometry& g, const float* w, const float* bias,
                            float* packed);

// Floats of scratch a call needs: the zero-padded input (0 without padding).
int64_t conv2d_narrow_f32_scratch(const ConvGeometry& g);

// y = relu?(conv(x, w) + bias) over the whole batch, split across the intra-op threads, with w
// and bias packed by conv2d_narrow_f32_pack. `scratch` holds conv2d_narrow_f32_scratch(g) floats
// (may be null when that is 0). Requires conv2d_narrow_f32_handles(g).
void conv2d_narrow_f32(const ConvGeometry& g, const float* x, const float* packed, bool relu,
                       float* y, float* scratch);

}  // namespace nn
}  // namespace pymx
