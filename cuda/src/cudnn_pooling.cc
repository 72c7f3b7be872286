// The pooling op and its backward through cuDNN (cudnn_nn.h), for the configurations where cuDNN
// computes exactly what the op defines (nn_pooling.cc); the own kernels in conv_pool.cu run the
// others. 1-D runs as 2-D with height 1; float32, float64, float16, bfloat16.
//  - max: windows always overlap the input (pad < kernel), and cuDNN's max ignores the padding as
//    the op's clipped windows do. Forward only: Note [Max pooling backward on the own kernel].
//  - avg: count_include_pad=True is CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING (windows then lie
//    inside the padded input, so both divide by the whole kernel), False is
//    CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING (both divide by the window's input elements).
//  - sum has no cuDNN mode.
//  - cuDNN's windows are those of pooling_convention='valid' with symmetric padding; 'full' runs
//    here only where it gives the same output extents (then the same windows). global_pool is a
//    'valid' window over the whole input.
//
// Note [Max pooling backward on the own kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The op sends each output's gradient to the first position of its window (row-major) holding
// the maximum; cuDNN sends it to one of the maxima without saying which. Ties are common (the
// zeros after a relu), so the max backward always runs the own kernel, which finds that position
// from the data and the forward output (the same maximum whichever forward computed it).
#include <vector>

#include "cudnn_nn.h"
#include "cudnn_util.h"

namespace pymx {
namespace gpu {
namespace {

using nn::PoolGeom;
using nn::PoolType;

// The descriptors of one pooling: data x, output y, and the pooling.
struct PoolDescs {
  TensorDesc x, y;
  PoolingDesc pool;
};

// Fills `d` for pooling `p` of `data` (N, C, spatial...) in `dtype`; false when cuDNN cannot
// compute it exactly (see the top of the file).
bool pool_descs(const PoolGeom& p, const Shape& data, DType dtype, PoolDescs* d) {
  cudnnDataType_t type;
  if (p.type == PoolType::kSum || !cudnn_data_type(dtype, &type)) return false;
  const int nd = p.nsp == 3 ? 3 : 2;
  std::vector<int64_t> x = {data[0], data[1]}, y = {data[0], data[1]};
  std::vector<int> window, pad, stride;
  for (int i = 3 - nd; i < 3; ++i) {
    if (p.out[i] != (p.in[i] + 2 * p.p[i] - p.k[i]) / p.s[i] + 1) return false;  // 'full' only
    x.push_back(p.in[i]);
    y.push_back(p.out[i]);
    window.push_back(static_cast<int>(p.k[i]));
    pad.push_back(static_cast<int>(p.p[i]));
    stride.push_back(static_cast<int>(p.s[i]));
  }
  std::vector<int> xi, yi;
  if (!cudnn_dims(x, &xi) || !cudnn_dims(y, &yi)) return false;
  d->x = tensor_desc(type, xi);
  d->y = tensor_desc(type, yi);
  const CudnnApi& api = cudnn();
  cudnnPoolingDescriptor_t raw = nullptr;
  check_cudnn(api.cudnnCreatePoolingDescriptor(&raw), "cudnnCreatePoolingDescriptor");
  d->pool.reset(raw);
  const cudnnPoolingMode_t mode = p.type == PoolType::kMax ? CUDNN_POOLING_MAX
                                  : p.count_include_pad
                                      ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                      : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  // A NaN never wins the op's max (its comparisons are false), so NaNs are not propagated.
  check_cudnn(api.cudnnSetPoolingNdDescriptor(raw, mode, CUDNN_NOT_PROPAGATE_NAN, nd,
                                              window.data(), pad.data(), stride.data()),
              "cudnnSetPoolingNdDescriptor");
  return true;
}

}  // namespace

bool cudnn_pooling(const OpContext& ctx, const PoolGeom& p, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  cudnnHandle_t h = cudnn_handle_for(ctx);
  PoolDescs d;
  const DType dtype = in[0].dtype;
  if (h == nullptr || !pool_descs(p, in[0].shape, dtype, &d)) return false;
  const cudnnStatus_t status =
      cudnn().cudnnPoolingForward(h, d.pool.get(), cudnn_one(dtype), d.x.get(), in[0].dptr,
                                  cudnn_zero(dtype), d.y.get(), out[0].dptr);
  return run_or_decline(status, "cudnnPoolingForward");
}

bool cudnn_pooling_backward(const OpContext& ctx, const PoolGeom& p,
                            const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  if (p.type == PoolType::kMax) return false;  // Note [Max pooling backward on the own kernel]
  cudnnHandle_t h = cudnn_handle_for(ctx);
  PoolDescs d;
  const DType dtype = in[1].dtype;
  if (h == nullptr || !pool_descs(p, in[1].shape, dtype, &d)) return false;
  // in: out_grad, data, out; dx is overwritten (beta = 0).
  const cudnnStatus_t status = cudnn().cudnnPoolingBackward(
      h, d.pool.get(), cudnn_one(dtype), d.y.get(), in[2].dptr, d.y.get(), in[0].dptr, d.x.get(),
      in[1].dptr, cudnn_zero(dtype), d.x.get(), out[0].dptr);
  return run_or_decline(status, "cudnnPoolingBackward");
}

}  // namespace gpu
}  // namespace pymx
