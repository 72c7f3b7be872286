// cuDNN's ABI as cuda/src/cudnn_loader.h declares it, checked at compile time against the real
// cudnn.h: the values and sizes of the enums, the layout of the measured-algorithm structs, and
// the type of every entry point the loader resolves (PMX_CUDNN_API). Built as a ctest only where
// cudnn.h is found (tests/cpp/CMakeLists.txt); compiling is the check, running it only reports.
#include <cudnn.h>

#include <cstddef>
#include <cstdio>
#include <type_traits>

#include "abi_check.h"
#include "cudnn_loader.h"

namespace ours = pymx::gpu;

// Each of our enums passes as cuDNN's (a 32-bit integer) and each struct has its layout.
PMX_ABI_OURS(ours, cudnnStatus_t)
PMX_ABI_OURS(ours, cudnnDataType_t)
PMX_ABI_OURS(ours, cudnnMathType_t)
PMX_ABI_OURS(ours, cudnnNanPropagation_t)
PMX_ABI_OURS(ours, cudnnTensorFormat_t)
PMX_ABI_OURS(ours, cudnnDeterminism_t)
PMX_ABI_OURS(ours, cudnnConvolutionMode_t)
PMX_ABI_OURS(ours, cudnnConvolutionFwdAlgo_t)
PMX_ABI_OURS(ours, cudnnConvolutionBwdDataAlgo_t)
PMX_ABI_OURS(ours, cudnnConvolutionBwdFilterAlgo_t)
PMX_ABI_OURS(ours, cudnnPoolingMode_t)
PMX_ABI_OURS(ours, cudnnBatchNormMode_t)
PMX_ABI_OURS(ours, cudnnConvolutionFwdAlgoPerf_t)
PMX_ABI_OURS(ours, cudnnConvolutionBwdDataAlgoPerf_t)
PMX_ABI_OURS(ours, cudnnConvolutionBwdFilterAlgoPerf_t)

PMX_ABI_SAME_VALUE(ours, CUDNN_STATUS_SUCCESS)
PMX_ABI_SAME_VALUE(ours, CUDNN_STATUS_BAD_PARAM)
PMX_ABI_SAME_VALUE(ours, CUDNN_STATUS_NOT_SUPPORTED)
PMX_ABI_SAME_VALUE(ours, CUDNN_STATUS_INTERNAL_ERROR)
PMX_ABI_SAME_VALUE(ours, CUDNN_DATA_FLOAT)
PMX_ABI_SAME_VALUE(ours, CUDNN_DATA_DOUBLE)
PMX_ABI_SAME_VALUE(ours, CUDNN_DATA_HALF)
PMX_ABI_SAME_VALUE(ours, CUDNN_DATA_BFLOAT16)
PMX_ABI_SAME_VALUE(ours, CUDNN_DEFAULT_MATH)
PMX_ABI_SAME_VALUE(ours, CUDNN_TENSOR_OP_MATH)
PMX_ABI_SAME_VALUE(ours, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
PMX_ABI_SAME_VALUE(ours, CUDNN_FMA_MATH)
PMX_ABI_SAME_VALUE(ours, CUDNN_NOT_PROPAGATE_NAN)
PMX_ABI_SAME_VALUE(ours, CUDNN_PROPAGATE_NAN)
PMX_ABI_SAME_VALUE(ours, CUDNN_TENSOR_NCHW)
PMX_ABI_SAME_VALUE(ours, CUDNN_NON_DETERMINISTIC)
PMX_ABI_SAME_VALUE(ours, CUDNN_DETERMINISTIC)
PMX_ABI_SAME_VALUE(ours, CUDNN_CONVOLUTION)
PMX_ABI_SAME_VALUE(ours, CUDNN_CROSS_CORRELATION)
PMX_ABI_SAME_VALUE(ours, CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
PMX_ABI_SAME_VALUE(ours, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
PMX_ABI_SAME_VALUE(ours, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT)
PMX_ABI_SAME_VALUE(ours, CUDNN_POOLING_MAX)
PMX_ABI_SAME_VALUE(ours, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING)
PMX_ABI_SAME_VALUE(ours, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING)
PMX_ABI_SAME_VALUE(ours, CUDNN_BATCHNORM_PER_ACTIVATION)
PMX_ABI_SAME_VALUE(ours, CUDNN_BATCHNORM_SPATIAL)
static_assert(CUDNN_BN_MIN_EPSILON == ours::kCudnnBnMinEpsilon, "CUDNN_BN_MIN_EPSILON");

// The three measured-algorithm structs, field by field.
#define PMX_SAME_FIELD(name, field)                                                   \
  static_assert(offsetof(::name, field) == offsetof(ours::name, field), #name "::" #field); \
  static_assert(std::is_same_v<abi_check::Ours<decltype(::name::field)>::type,                   \
                               decltype(ours::name::field)>,                          \
                #name "::" #field " type");
#define PMX_SAME_PERF(name)             \
  PMX_SAME_FIELD(name, algo)            \
  PMX_SAME_FIELD(name, status)          \
  PMX_SAME_FIELD(name, time)            \
  PMX_SAME_FIELD(name, memory)          \
  PMX_SAME_FIELD(name, determinism)     \
  PMX_SAME_FIELD(name, mathType)        \
  PMX_SAME_FIELD(name, reserved)
PMX_SAME_PERF(cudnnConvolutionFwdAlgoPerf_t)
PMX_SAME_PERF(cudnnConvolutionBwdDataAlgoPerf_t)
PMX_SAME_PERF(cudnnConvolutionBwdFilterAlgoPerf_t)
#undef PMX_SAME_PERF
#undef PMX_SAME_FIELD

// Every entry point the loader resolves has cudnn.h's type, and CudnnApi has no other member.
#define PMX_SAME_FUNCTION(name) PMX_ABI_SAME_FUNCTION(ours::CudnnApi, name, name)
PMX_CUDNN_API(PMX_SAME_FUNCTION)
#undef PMX_SAME_FUNCTION

namespace {

#define PMX_COUNT(name) +1
constexpr int kEntryPoints = 0 PMX_CUDNN_API(PMX_COUNT);
#undef PMX_COUNT
static_assert(sizeof(ours::CudnnApi) == kEntryPoints * sizeof(void (*)()),
              "CudnnApi has a member that PMX_CUDNN_API does not list");

}  // namespace

int main() {
  std::printf("cuda/src/cudnn_loader.h matches cudnn.h %d.%d.%d (%d entry points)\n", CUDNN_MAJOR,
              CUDNN_MINOR, CUDNN_PATCHLEVEL, kEntryPoints);
  return 0;
}
