// cuBLAS, loaded with dlopen at first use (never linked: CPU users need not install it, and the
// toolkit here ships no cublas_v2.h). We declare the few entry points we call ourselves; their
// C ABI has been stable since CUDA 4 (the _v2 names). tests/cpp/cublas_abi_check.cc checks
// these declarations against the real cublas_api.h where one is found.
#pragma once

#include <cuda_runtime.h>
#include <library_types.h>

namespace pymx {
namespace gpu {

using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;  // 0 = CUBLAS_STATUS_SUCCESS
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t);
  cublasStatus_t (*sgemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                          int, int, int, const float*, const float*, int,
                                          long long, const float*, int, long long, const float*,
                                          float*, int, long long, int);
  cublasStatus_t (*dgemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                          int, int, int, const double*, const double*, int,
                                          long long, const double*, int, long long,
                                          const double*, double*, int, long long, int);
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                            int, int, int, const void*, const void*,
                                            cudaDataType, int, long long, const void*,
                                            cudaDataType, int, long long, const void*, void*,
                                            cudaDataType, int, long long, int,
                                            cublasComputeType_t, cublasGemmAlgo_t);
};

// The loaded API; the first call loads the library. Throws Error(kCuda) naming the library and
// the places searched when it cannot be loaded. Thread-safe.
const CublasApi& cublas();

// The cuBLAS handle bound to `stream` on pymx device `device_id`, created on first use with a
// workspace of its own (see cublas_loader.cc) and kept for the life of the process (engine worker
// streams live as long). Thread-safe.
cublasHandle_t cublas_handle(int device_id, cudaStream_t stream);

// Throws Error(kCuda) naming the call and the status when `status` is not success.
void check_cublas(cublasStatus_t status, const char* call);

}  // namespace gpu
}  // namespace pymx
