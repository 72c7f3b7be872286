// Error policy for every CUDA runtime call in cuda/src. Each call site picks one:
//   PMX_CUDA_CHECK(call)      throw Error(kCuda) naming the error and the call text
//   PMX_CUDA_IGNORE(call)     destructors and cleanup paths only: the error is dropped
//   PMX_KERNEL_LAUNCH_CHECK() directly after every kernel launch (bad configs surface here)
#pragma once

#include <cuda_runtime.h>

#include "pymx/base.h"

namespace pymx {
namespace gpu {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file,
                                          int line) {
  // The runtime keeps a failed call's error as the thread's last error, which the next
  // PMX_KERNEL_LAUNCH_CHECK on this worker would report against an unrelated op.
  (void)cudaGetLastError();
  throw Error(Status::kCuda, str_cat("CUDA error ", cudaGetErrorName(err), " (",
                                     cudaGetErrorString(err), ") from ", call, " at ", file, ":",
                                     line));
}

}  // namespace gpu
}  // namespace pymx

#define PMX_CUDA_CHECK(call)                                                       \
  do {                                                                             \
    cudaError_t pmx_cuda_err_ = (call);                                            \
    if (pmx_cuda_err_ != cudaSuccess)                                              \
      ::pymx::gpu::throw_cuda_error(pmx_cuda_err_, #call, __FILE__, __LINE__);     \
  } while (0)

#define PMX_CUDA_IGNORE(call)                                 \
  do {                                                        \
    cudaError_t pmx_cuda_err_ = (call);                       \
    if (pmx_cuda_err_ != cudaSuccess) (void)cudaGetLastError(); \
  } while (0)

#define PMX_KERNEL_LAUNCH_CHECK() PMX_CUDA_CHECK(cudaGetLastError())
