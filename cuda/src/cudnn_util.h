// What the cuDNN paths of convolution, pooling and batch_norm share (cudnn_convolution.cu,
// cudnn_pooling.cc, cudnn_batch_norm.cu): the decision to use cuDNN at all, dtypes, scaling
// factors and packed tensor descriptors. Host code, called on an engine GPU worker.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <vector>

#include "cudnn_loader.h"
#include "launch.h"
#include "ops/nn_common.h"
#include "pymx/op.h"

namespace pymx {
namespace gpu {

// The cuDNN handle on the op's stream, or null when the op must run its own kernel: cuDNN is not
// available (cudnn_loader.h), the op has cudnn_off=True, or no handle could be made here.
inline cudnnHandle_t cudnn_handle_for(const OpContext& ctx) {
  if (nn::cudnn_off(*ctx.attrs) || !cudnn_available()) return nullptr;
  return cudnn_handle(ctx.run.device.id, static_cast<cudaStream_t>(ctx.run.stream));
}

// cuDNN's type for the float dtypes; false for the others.
inline bool cudnn_data_type(DType dtype, cudnnDataType_t* type) {
  switch (dtype) {
    case DType::kFloat32: *type = CUDNN_DATA_FLOAT; return true;
    case DType::kFloat64: *type = CUDNN_DATA_DOUBLE; return true;
    case DType::kFloat16: *type = CUDNN_DATA_HALF; return true;
    case DType::kBFloat16: *type = CUDNN_DATA_BFLOAT16; return true;
    default: return false;
  }
}

// The scaling factors alpha = 1 and beta = 0 (overwrite the output), in the type cuDNN reads
// them in for data of `dtype`: double for double data, float otherwise.
inline const void* cudnn_one(DType dtype) {
  static const float one_f = 1.0f;
  static const double one_d = 1.0;
  return dtype == DType::kFloat64 ? static_cast<const void*>(&one_d) : &one_f;
}
inline const void* cudnn_zero(DType dtype) {
  static const float zero_f = 0.0f;
  static const double zero_d = 0.0;
  return dtype == DType::kFloat64 ? static_cast<const void*>(&zero_d) : &zero_f;
}

// Whether a call's `status` says that cuDNN does not cover it (its bad-parameter and
// not-supported statuses, returned before anything runs) rather than a failure to report: the op
// then runs its own kernel.
inline bool cudnn_declines(cudnnStatus_t status) {
  return status >= CUDNN_STATUS_BAD_PARAM && status < CUDNN_STATUS_INTERNAL_ERROR;
}

// True when the call succeeded, false when cuDNN declines it (cudnn_declines); throws otherwise.
inline bool run_or_decline(cudnnStatus_t status, const char* call) {
  if (cudnn_declines(status)) return false;
  check_cudnn(status, call);
  return true;
}

// `dims` as cuDNN's int dimensions; false when a tensor of them has more elements than cuDNN's
// int strides and sizes can address (the op then runs its own kernel) or has none.
inline bool cudnn_dims(const std::vector<int64_t>& dims, std::vector<int>* out) {
  int64_t count = 1;
  for (int64_t d : dims) {
    count *= d;
    if (d < 1 || count > INT_MAX) return false;
  }
  out->assign(dims.begin(), dims.end());
  return true;
}

// A cuDNN descriptor owned like a unique_ptr, destroyed with the loaded API's `kDestroy`.
template <typename Struct, auto kDestroy>
struct DescDeleter {
  void operator()(Struct* desc) const { (cudnn().*kDestroy)(desc); }
};
template <typename Struct, auto kDestroy>
using Desc = std::unique_ptr<Struct, DescDeleter<Struct, kDestroy>>;

using TensorDesc = Desc<cudnnTensorStruct, &CudnnApi::cudnnDestroyTensorDescriptor>;
using FilterDesc = Desc<cudnnFilterStruct, &CudnnApi::cudnnDestroyFilterDescriptor>;
using ConvolutionDesc =
    Desc<cudnnConvolutionStruct, &CudnnApi::cudnnDestroyConvolutionDescriptor>;
using PoolingDesc = Desc<cudnnPoolingStruct, &CudnnApi::cudnnDestroyPoolingDescriptor>;

// A packed (row-major) tensor of `dims` (4 or 5 of them).
inline TensorDesc tensor_desc(cudnnDataType_t type, const std::vector<int>& dims) {
  cudnnTensorDescriptor_t raw = nullptr;
  check_cudnn(cudnn().cudnnCreateTensorDescriptor(&raw), "cudnnCreateTensorDescriptor");
  TensorDesc desc(raw);
  std::vector<int> strides(dims.size());
  int stride = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= dims[i];
  }
  check_cudnn(cudnn().cudnnSetTensorNdDescriptor(raw, type, static_cast<int>(dims.size()),
                                                 dims.data(), strides.data()),
              "cudnnSetTensorNdDescriptor");
  return desc;
}

}  // namespace gpu
}  // namespace pymx
