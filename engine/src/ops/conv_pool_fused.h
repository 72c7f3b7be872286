// Convolution + bias + relu + max pooling (+ batch_norm's inference transform) in one pass, for
// float32 NCHW inference: the kernel, and the internal operator _conv_relu_max_pool that runs it
// (conv_pool_fused.cc). A graph pass puts the operator in place of convolution(act_type='relu')
// -> pooling(max) [-> batch_norm with running statistics] where conv_relu_max_pool_handles says
// so. See Note [Fused convolution and max pooling] in conv_pool_fused.cc.
#pragma once

#include <cstdint>

#include "ops/conv_direct.h"
#include "ops/conv_geometry.h"
#include "ops/fma_level.h"
#include "ops/pool_geometry.h"
#include "pymx/op.h"

namespace pymx {
namespace nn {

struct ConvPoolGeometry {
  ConvGeometry conv;
  PoolGeom pool;  // over the convolution's output
};

// The geometry of _conv_relu_max_pool(data, weight, ...) from its attributes: the convolution's
// (kernel stride dilate pad num_filter num_group layout) and the pooling's (pool_kernel
// pool_stride pool_convention), each validated as convolution and pooling validate theirs; the
// errors name the values.
ConvPoolGeometry conv_relu_max_pool_geometry(const Attrs& attrs, const Shape& data,
                                             const Shape& weight);

// Whether conv_relu_max_pool_f32 at `level` handles g: a convolution that the direct kernel
// handles (conv2d_direct_f32_handles), then a max pooling that the vectorised forward kernel
// handles (max_pool_forward_f32_handles) with every window inside the convolution's output
// (the 'valid' convention).
bool conv_relu_max_pool_handles(const ConvPoolGeometry& g, FmaLevel level = fma_level());

// Floats of scratch conv_relu_max_pool_f32 needs for g.
int64_t conv_relu_max_pool_scratch(const ConvPoolGeometry& g);

// y = maxpool(relu(conv(x, w) + bias)) over the whole batch, then, when scale and shift (one per
// output channel) are not null, y * scale[c] + shift[c] in float: batch_norm's inference
// transform. Split across the intra-op threads (run serially when called from inside a parallel
// loop). Without the transform, y is bit for bit conv2d_direct_f32 with relu followed by
// max_pool_forward_f32. `scratch` holds conv_relu_max_pool_scratch(g) floats. Requires
// conv_relu_max_pool_handles(g, level); `level` must not be better than the CPU's.
void conv_relu_max_pool_f32(const ConvPoolGeometry& g, const float* x,
                            const DirectConvWeights& weights, const float* scale,
                            const float* shift, float* y, float* scratch,
                            FmaLevel level = fma_level());

}  // namespace nn
}  // namespace pymx
