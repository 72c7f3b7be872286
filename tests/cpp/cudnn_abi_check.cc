// cuDNN's ABI as cuda/src/cudnn_loader.h declares it, checked at compile time against the real
// cudnn.h: the values and sizes of the enums, the layout of the measured-algorithm structs, and
// the type of every entry point the loader resolves (PMX_CUDNN_API). Built as a ctest only where
// cudnn.h is found (tests/cpp/CMakeLists.txt); compiling is the check, running it only reports.
#include <cudnn.h>

#include <cstddef>
#include <cstdio>
#include <type_traits>

#include "cudnn_loader.h"

namespace ours = pymx::gpu;

namespace {

// Ours<T>::type: T with cudnn.h's enum and struct types replaced by cudnn_loader.h's, through
// pointers, const and function signatures. Handles, descriptors and cudaStream_t are the same
// types in both and stay as they are.
template <typename T>
struct Ours {
  using type = T;
};
template <typename T>
struct Ours<T*> {
  using type = typename Ours<T>::type*;
};
template <typename T>
struct Ours<const T> {
  using type = const typename Ours<T>::type;
};
template <typename R, typename... Args>
struct Ours<R (*)(Args...)> {
  using type = typename Ours<R>::type (*)(typename Ours<Args>::type...);
};

// Each of our enums passes as cuDNN's (a 32-bit integer) and each struct has its layout.
#define PMX_OURS(name)                                                 \
  template <>                                                          \
  struct Ours<::name> {                                                \
    using type = ours::name;                                           \
  };                                                                   \
  static_assert(sizeof(::name) == sizeof(ours::name), #name " size");  \
  static_assert(alignof(::name) == alignof(ours::name), #name " alignment");
PMX_OURS(cudnnStatus_t)
PMX_OURS(cudnnDataType_t)
PMX_OURS(cudnnMathType_t)
PMX_OURS(cudnnNanPropagation_t)
PMX_OURS(cudnnTensorFormat_t)
PMX_OURS(cudnnDeterminism_t)
PMX_OURS(cudnnConvolutionMode_t)
PMX_OURS(cudnnConvolutionFwdAlgo_t)
PMX_OURS(cudnnConvolutionBwdDataAlgo_t)
PMX_OURS(cudnnConvolutionBwdFilterAlgo_t)
PMX_OURS(cudnnPoolingMode_t)
PMX_OURS(cudnnBatchNormMode_t)
PMX_OURS(cudnnConvolutionFwdAlgoPerf_t)
PMX_OURS(cudnnConvolutionBwdDataAlgoPerf_t)
PMX_OURS(cudnnConvolutionBwdFilterAlgoPerf_t)
#undef PMX_OURS

#define PMX_SAME_VALUE(name) \
  static_assert(static_cast<long long>(::name) == static_cast<long long>(ours::name), #name);
PMX_SAME_VALUE(CUDNN_STATUS_SUCCESS)
PMX_SAME_VALUE(CUDNN_STATUS_BAD_PARAM)
PMX_SAME_VALUE(CUDNN_STATUS_NOT_SUPPORTED)
PMX_SAME_VALUE(CUDNN_STATUS_INTERNAL_ERROR)
PMX_SAME_VALUE(CUDNN_DATA_FLOAT)
PMX_SAME_VALUE(CUDNN_DATA_DOUBLE)
PMX_SAME_VALUE(CUDNN_DATA_HALF)
PMX_SAME_VALUE(CUDNN_DEFAULT_MATH)
PMX_SAME_VALUE(CUDNN_TENSOR_OP_MATH)
PMX_SAME_VALUE(CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
PMX_SAME_VALUE(CUDNN_FMA_MATH)
PMX_SAME_VALUE(CUDNN_NOT_PROPAGATE_NAN)
PMX_SAME_VALUE(CUDNN_PROPAGATE_NAN)
PMX_SAME_VALUE(CUDNN_TENSOR_NCHW)
PMX_SAME_VALUE(CUDNN_NON_DETERMINISTIC)
PMX_SAME_VALUE(CUDNN_DETERMINISTIC)
PMX_SAME_VALUE(CUDNN_CONVOLUTION)
PMX_SAME_VALUE(CUDNN_CROSS_CORRELATION)
PMX_SAME_VALUE(CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
PMX_SAME_VALUE(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
PMX_SAME_VALUE(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT)
PMX_SAME_VALUE(CUDNN_POOLING_MAX)
PMX_SAME_VALUE(CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING)
PMX_SAME_VALUE(CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING)
PMX_SAME_VALUE(CUDNN_BATCHNORM_PER_ACTIVATION)
PMX_SAME_VALUE(CUDNN_BATCHNORM_SPATIAL)
#undef PMX_SAME_VALUE
static_assert(CUDNN_BN_MIN_EPSILON == ours::kCudnnBnMinEpsilon, "CUDNN_BN_MIN_EPSILON");

// The three measured-algorithm structs, field by field.
#define PMX_SAME_FIELD(name, field)                                                   \
  static_assert(offsetof(::name, field) == offsetof(ours::name, field), #name "::" #field); \
  static_assert(std::is_same_v<Ours<decltype(::name::field)>::type,                   \
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
#define PMX_SAME_FUNCTION(name)                                                               \
  static_assert(std::is_same_v<Ours<decltype(&::name)>::type, decltype(ours::CudnnApi::name)>, \
                #name ": cudnn_loader.h declares another type");
PMX_CUDNN_API(PMX_SAME_FUNCTION)
#undef PMX_SAME_FUNCTION
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
