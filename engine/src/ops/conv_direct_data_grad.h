// Direct data gradient of a 2-D float32 convolution of any stride, vectorised over input
// channels, for the convolution's backward (nn_convolution.cc), which uses a GEMM + col2im image
// by image otherwise. AVX-512 only: on other CPUs handles() is false. See Note [Direct data
// gradient by phases] in conv_direct_data_grad.cc.
#pragma once

#include <cstdint>

#include "ops/conv_geometry.h"
#include "ops/fma_level.h"

namespace pymx {
namespace nn {

// Whether the kernel at `level` handles g: AVX-512, 2-D, channel-first, one group, dilation 1,
// a kernel of more than one tap (a 1x1 kernel's data gradient is one GEMM, as fast or faster),
// at least 32 input channels (a whole vector block), out_c * kh * kw <= 4608, and every column
// phase of the input (the columns of one remainder modulo the stride across) at least 7 wide,
// i.e. in[2] / s[2] >= 7.
bool conv2d_data_grad_f32_handles(const ConvGeometry& g, FmaLevel level = fma_level());

// Floats of scratch a call needs: the weight in the kernel's layout and the out_grad with zero
// columns on both sides.
int64_t conv2d_data_grad_f32_scratch(const ConvGeometry& g);

// dx (batch, in_c, H, W) = the data gradient of the convolution g with weight w (out_c, in_c,
// kh, kw) for out_grad dy (batch, out_c, OH, OW), over the whole batch, split across the intra-op
// threads. With `keep` (the convolution's output, same shape as dy) non-null, dy is first masked
// by relu's derivative: dy where keep > 0, else 0. `scratch` holds
// conv2d_data_grad_f32_scratch(g) floats. Requires conv2d_data_grad_f32_handles(g).
void conv2d_data_grad_f32(const ConvGeometry& g, const float* dy, const float* keep,
                          const float* w, float* dx, float* scratch);

}  // namespace nn
}  // namespace pymx
