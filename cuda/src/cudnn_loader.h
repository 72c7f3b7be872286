// cuDNN 9, loaded with dlopen at first use and never linked (CPU users need not install it, and
// the toolkit on build machines ships no cudnn.h). We declare the few types, enums and entry
// points of the legacy API that convolution, pooling and batch_norm call; their values, layouts
// and signatures are checked against the real cudnn.h by tests/cpp/cudnn_abi_check.cc.
// A missing or unusable library is not an error: cudnn_available() is false and the ops run
// pymx's own kernels (cudnn_nn.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

// cuDNN's opaque handle and descriptor structs, at global scope like cudnn.h's own, so that both
// declarations name the same types.
struct cudnnContext;
struct cudnnTensorStruct;
struct cudnnFilterStruct;
struct cudnnConvolutionStruct;
struct cudnnPoolingStruct;

namespace pymx {
namespace gpu {

using cudnnHandle_t = cudnnContext*;
using cudnnTensorDescriptor_t = cudnnTensorStruct*;
using cudnnFilterDescriptor_t = cudnnFilterStruct*;
using cudnnConvolutionDescriptor_t = cudnnConvolutionStruct*;
using cudnnPoolingDescriptor_t = cudnnPoolingStruct*;

// Enums hold the values we use (cuDNN passes every enum as a 32-bit integer). A fixed underlying
// type keeps values we do not list (statuses, say) well defined.
enum cudnnStatus_t : int {
  CUDNN_STATUS_SUCCESS = 0,
  CUDNN_STATUS_BAD_PARAM = 2000,       // 2000-2999: bad parameters
  CUDNN_STATUS_NOT_SUPPORTED = 3000,   // 3000-3999: not supported
  CUDNN_STATUS_INTERNAL_ERROR = 4000,  // 4000-: internal and execution failures
};
enum cudnnDataType_t : int {
  CUDNN_DATA_FLOAT = 0,
  CUDNN_DATA_DOUBLE = 1,
  CUDNN_DATA_HALF = 2,
  CUDNN_DATA_BFLOAT16 = 9,
};
enum cudnnMathType_t : int {
  CUDNN_DEFAULT_MATH = 0,
  CUDNN_TENSOR_OP_MATH = 1,
  CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
  CUDNN_FMA_MATH = 3,
};
enum cudnnNanPropagation_t : int { CUDNN_NOT_PROPAGATE_NAN = 0, CUDNN_PROPAGATE_NAN = 1 };
enum cudnnTensorFormat_t : int { CUDNN_TENSOR_NCHW = 0 };
enum cudnnDeterminism_t : int { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 };
enum cudnnConvolutionMode_t : int { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 };
// The algorithms are opaque to us (the counts size the arrays of measured results).
enum cudnnConvolutionFwdAlgo_t : int { CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8 };
enum cudnnConvolutionBwdDataAlgo_t : int { CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6 };
enum cudnnConvolutionBwdFilterAlgo_t : int { CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT = 7 };
enum cudnnPoolingMode_t : int {
  CUDNN_POOLING_MAX = 0,
  CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING = 1,
  CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING = 2,
};
enum cudnnBatchNormMode_t : int { CUDNN_BATCHNORM_PER_ACTIVATION = 0, CUDNN_BATCHNORM_SPATIAL = 1 };

// The smallest epsilon batch normalisation accepts (CUDNN_BN_MIN_EPSILON).
constexpr double kCudnnBnMinEpsilon = 0.0;

// One measured (Find) or ranked (Get) convolution algorithm; the three structs share a layout.
template <typename Algo>
struct cudnnAlgoPerf {
  Algo algo;
  cudnnStatus_t status;
  float time;     // ms
  size_t memory;  // workspace bytes
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
};
using cudnnConvolutionFwdAlgoPerf_t = cudnnAlgoPerf<cudnnConvolutionFwdAlgo_t>;
using cudnnConvolutionBwdDataAlgoPerf_t = cudnnAlgoPerf<cudnnConvolutionBwdDataAlgo_t>;
using cudnnConvolutionBwdFilterAlgoPerf_t = cudnnAlgoPerf<cudnnConvolutionBwdFilterAlgo_t>;

// The entry points, named as in cudnn.h. Every member is listed once in PMX_CUDNN_API below
// (the loader resolves, and the ABI check verifies, exactly that list).
struct CudnnApi {
  size_t (*cudnnGetVersion)();
  const char* (*cudnnGetErrorString)(cudnnStatus_t);
  cudnnStatus_t (*cudnnCreate)(cudnnHandle_t*);
  cudnnStatus_t (*cudnnDestroy)(cudnnHandle_t);
  cudnnStatus_t (*cudnnSetStream)(cudnnHandle_t, cudaStream_t);

  cudnnStatus_t (*cudnnCreateTensorDescriptor)(cudnnTensorDescriptor_t*);
  cudnnStatus_t (*cudnnDestroyTensorDescriptor)(cudnnTensorDescriptor_t);
  cudnnStatus_t (*cudnnSetTensorNdDescriptor)(cudnnTensorDescriptor_t, cudnnDataType_t, int,
                                              const int*, const int*);
  cudnnStatus_t (*cudnnCreateFilterDescriptor)(cudnnFilterDescriptor_t*);
  cudnnStatus_t (*cudnnDestroyFilterDescriptor)(cudnnFilterDescriptor_t);
  cudnnStatus_t (*cudnnSetFilterNdDescriptor)(cudnnFilterDescriptor_t, cudnnDataType_t,
                                              cudnnTensorFormat_t, int, const int*);
  cudnnStatus_t (*cudnnCreateConvolutionDescriptor)(cudnnConvolutionDescriptor_t*);
  cudnnStatus_t (*cudnnDestroyConvolutionDescriptor)(cudnnConvolutionDescriptor_t);
  cudnnStatus_t (*cudnnSetConvolutionNdDescriptor)(cudnnConvolutionDescriptor_t, int, const int*,
                                                   const int*, const int*, cudnnConvolutionMode_t,
                                                   cudnnDataType_t);
  cudnnStatus_t (*cudnnSetConvolutionGroupCount)(cudnnConvolutionDescriptor_t, int);
  cudnnStatus_t (*cudnnSetConvolutionMathType)(cudnnConvolutionDescriptor_t, cudnnMathType_t);
  cudnnStatus_t (*cudnnCreatePoolingDescriptor)(cudnnPoolingDescriptor_t*);
  cudnnStatus_t (*cudnnDestroyPoolingDescriptor)(cudnnPoolingDescriptor_t);
  cudnnStatus_t (*cudnnSetPoolingNdDescriptor)(cudnnPoolingDescriptor_t, cudnnPoolingMode_t,
                                               cudnnNanPropagation_t, int, const int*, const int*,
                                               const int*);

  // Convolution forward: y = conv(x, w).
  cudnnStatus_t (*cudnnGetConvolutionForwardAlgorithm_v7)(
      cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t,
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, int, int*,
      cudnnConvolutionFwdAlgoPerf_t*);
  cudnnStatus_t (*cudnnFindConvolutionForwardAlgorithmEx)(
      cudnnHandle_t, cudnnTensorDescriptor_t, const void*, cudnnFilterDescriptor_t, const void*,
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, void*, int, int*,
      cudnnConvolutionFwdAlgoPerf_t*, void*, size_t);
  cudnnStatus_t (*cudnnGetConvolutionForwardWorkspaceSize)(
      cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t,
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, cudnnConvolutionFwdAlgo_t, size_t*);
  cudnnStatus_t (*cudnnConvolutionForward)(cudnnHandle_t, const void*, cudnnTensorDescriptor_t,
                                           const void*, cudnnFilterDescriptor_t, const void*,
                                           cudnnConvolutionDescriptor_t,
                                           cudnnConvolutionFwdAlgo_t, void*, size_t, const void*,
                                           cudnnTensorDescriptor_t, void*);
  // Convolution data gradient: dx from w and dy.
  cudnnStatus_t (*cudnnGetConvolutionBackwardDataAlgorithm_v7)(
      cudnnHandle_t, cudnnFilterDescriptor_t, cudnnTensorDescriptor_t,
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, int, int*,
      cudnnConvolutionBwdDataAlgoPerf_t*);
  cudnnStatus_t (*cudnnFindConvolutionBackwardDataAlgorithmEx)(
      cudnnHandle_t, cudnnFilterDescriptor_t, const void*, cudnnTensorDescriptor_t, const void*,
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, void*, int, int*,
      cudnnConvolutionBwdDataAlgoPerf_t*, void*, size_t);
  cudnnStatus_t (*cudnnGetConvolutionBackwardDataWorkspaceSize)(
      cudnnHandle_t, cudnnFilterDescriptor_t, cudnnTensorDescriptor_t,
      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, cudnnConvolutionBwdDataAlgo_t,
      size_t*);
  cudnnStatus_t (*cudnnConvolutionBackwardData)(cudnnHandle_t, const void*,
                                                cudnnFilterDescriptor_t, const void*,
                                                cudnnTensorDescriptor_t, const void*,
                                                cudnnConvolutionDescriptor_t,
                                                cudnnConvolutionBwdDataAlgo_t, void*, size_t,
                                                const void*, cudnnTensorDescriptor_t, void*);
  // Convolution weight gradient: dw from x and dy.
  cudnnStatus_t (*cudnnGetConvolutionBackwardFilterAlgorithm_v7)(
      cudnnHandle_t, cudnnTensorDescriptor_t, cudnnTensorDescriptor_t,
      cudnnConvolutionDescriptor_t, cudnnFilterDescriptor_t, int, int*,
      cudnnConvolutionBwdFilterAlgoPerf_t*);
  cudnnStatus_t (*cudnnFindConvolutionBackwardFilterAlgorithmEx)(
      cudnnHandle_t, cudnnTensorDescriptor_t, const void*, cudnnTensorDescriptor_t, const void*,
      cudnnConvolutionDescriptor_t, cudnnFilterDescriptor_t, void*, int, int*,
      cudnnConvolutionBwdFilterAlgoPerf_t*, void*, size_t);
  cudnnStatus_t (*cudnnGetConvolutionBackwardFilterWorkspaceSize)(
      cudnnHandle_t, cudnnTensorDescriptor_t, cudnnTensorDescriptor_t,
      cudnnConvolutionDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionBwdFilterAlgo_t,
      size_t*);
  cudnnStatus_t (*cudnnConvolutionBackwardFilter)(cudnnHandle_t, const void*,
                                                  cudnnTensorDescriptor_t, const void*,
                                                  cudnnTensorDescriptor_t, const void*,
                                                  cudnnConvolutionDescriptor_t,
                                                  cudnnConvolutionBwdFilterAlgo_t, void*, size_t,
                                                  const void*, cudnnFilterDescriptor_t, void*);
  cudnnStatus_t (*cudnnConvolutionBackwardBias)(cudnnHandle_t, const void*,
                                                cudnnTensorDescriptor_t, const void*, const void*,
                                                cudnnTensorDescriptor_t, void*);

  cudnnStatus_t (*cudnnPoolingForward)(cudnnHandle_t, cudnnPoolingDescriptor_t, const void*,
                                       cudnnTensorDescriptor_t, const void*, const void*,
                                       cudnnTensorDescriptor_t, void*);
  cudnnStatus_t (*cudnnPoolingBackward)(cudnnHandle_t, cudnnPoolingDescriptor_t, const void*,
                                        cudnnTensorDescriptor_t, const void*,
                                        cudnnTensorDescriptor_t, const void*,
                                        cudnnTensorDescriptor_t, const void*, const void*,
                                        cudnnTensorDescriptor_t, void*);

  cudnnStatus_t (*cudnnBatchNormalizationForwardTraining)(
      cudnnHandle_t, cudnnBatchNormMode_t, const void*, const void*, cudnnTensorDescriptor_t,
      const void*, cudnnTensorDescriptor_t, void*, cudnnTensorDescriptor_t, const void*,
      const void*, double, void*, void*, double, void*, void*);
  cudnnStatus_t (*cudnnBatchNormalizationForwardInference)(
      cudnnHandle_t, cudnnBatchNormMode_t, const void*, const void*, cudnnTensorDescriptor_t,
      const void*, cudnnTensorDescriptor_t, void*, cudnnTensorDescriptor_t, const void*,
      const void*, const void*, const void*, double);
  cudnnStatus_t (*cudnnBatchNormalizationBackward)(
      cudnnHandle_t, cudnnBatchNormMode_t, const void*, const void*, const void*, const void*,
      cudnnTensorDescriptor_t, const void*, cudnnTensorDescriptor_t, const void*,
      cudnnTensorDescriptor_t, void*, cudnnTensorDescriptor_t, const void*, void*, void*, double,
      const void*, const void*);
};

#define PMX_CUDNN_API(X)                                                                       \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)  \
  X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor) X(cudnnSetTensorNdDescriptor) \
  X(cudnnCreateFilterDescriptor) X(cudnnDestroyFilterDescriptor) X(cudnnSetFilterNdDescriptor) \
  X(cudnnCreateConvolutionDescriptor) X(cudnnDestroyConvolutionDescriptor)                     \
  X(cudnnSetConvolutionNdDescriptor) X(cudnnSetConvolutionGroupCount)                          \
  X(cudnnSetConvolutionMathType) X(cudnnCreatePoolingDescriptor)                               \
  X(cudnnDestroyPoolingDescriptor) X(cudnnSetPoolingNdDescriptor)                              \
  X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnFindConvolutionForwardAlgorithmEx)          \
  X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnConvolutionForward)                        \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7) X(cudnnFindConvolutionBackwardDataAlgorithmEx) \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize) X(cudnnConvolutionBackwardData)              \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                                             \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx)                                             \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize) X(cudnnConvolutionBackwardFilter)          \
  X(cudnnConvolutionBackwardBias) X(cudnnPoolingForward) X(cudnnPoolingBackward)               \
  X(cudnnBatchNormalizationForwardTraining) X(cudnnBatchNormalizationForwardInference)         \
  X(cudnnBatchNormalizationBackward)

// Whether the GPU ops may use cuDNN: PYMX_CUDNN is not 0 (config.h) and cuDNN 9 loaded with every
// entry point above. The first call loads the library; later calls return the cached answer.
// Thread-safe.
bool cudnn_available();

// The loaded API. Only after cudnn_available() returned true.
const CudnnApi& cudnn();

// The cuDNN handle bound to `stream` on device `device_id`, created on first use and kept for the
// life of the process (engine worker streams live as long); null when cuDNN cannot create one
// there (the ops then run their own kernels). Only after cudnn_available(). Thread-safe.
cudnnHandle_t cudnn_handle(int device_id, cudaStream_t stream);

// Throws Error(kCuda) naming the call, the status and cuDNN's text for it when `status` is not
// success.
void check_cudnn(cudnnStatus_t status, const char* call);

}  // namespace gpu
}  // namespace pymx
