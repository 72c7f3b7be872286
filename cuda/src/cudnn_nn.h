// The cuDNN paths of convolution, pooling and batch_norm, tried first by their GPU kernels
// (conv_pool.cu, norm_softmax.cu) with the same blobs. Each returns true when it has computed the
// op through cuDNN, and false when cuDNN cannot compute this call with the op's exact semantics:
// cuDNN not available or disabled (PYMX_CUDNN=0, cudnn_off=True), a dtype, size or configuration
// it does not cover or rejects (cudnn_declines). The caller then runs its own kernel, which
// writes every output (measuring convolution algorithms may have scribbled on them).
#pragma once

#include <vector>

#include "ops/conv_geometry.h"
#include "ops/pool_geometry.h"
#include "pymx/op.h"

namespace pymx {
namespace gpu {

// cudnn_convolution.cu; `g` is the op's channel-first geometry.
bool cudnn_convolution(const OpContext& ctx, const nn::ConvGeometry& g,
                       const std::vector<TBlob>& in, const std::vector<TBlob>& out);
bool cudnn_convolution_backward(const OpContext& ctx, const nn::ConvGeometry& g,
                                const std::vector<TBlob>& in, const std::vector<TBlob>& out);

// cudnn_pooling.cc; `p` is the op's geometry.
bool cudnn_pooling(const OpContext& ctx, const nn::PoolGeom& p, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out);
bool cudnn_pooling_backward(const OpContext& ctx, const nn::PoolGeom& p,
                            const std::vector<TBlob>& in, const std::vector<TBlob>& out);

// cudnn_batch_norm.cu
bool cudnn_batch_norm(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out);
bool cudnn_batch_norm_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                               const std::vector<TBlob>& out);

}  // namespace gpu
}  // namespace pymx
