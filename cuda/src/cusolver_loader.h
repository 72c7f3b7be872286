// cuSOLVER (dense), loaded with dlopen at first use like cuBLAS (cublas_loader.h): never linked,
// so CPU users need not install it, and the toolkit here ships no cusolverDn.h. We declare the
// few entry points np.linalg calls ourselves; their C ABI (cusolverDn<t><routine>, int sizes,
// device info pointers) has been stable since CUDA 7, and that of the 64-bit generic
// cusolverDnXgeev (typed by cudaDataType, sizes int64_t) since CUDA 12.6. tests/cpp/cusolver_abi_check.cc checks these
// declarations against the real cusolverDn.h where one is found.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cublas_loader.h"

namespace pymx {
namespace gpu {

using cusolverDnHandle_t = struct cusolverDnContext*;
using cusolverDnParams_t = struct cusolverDnParams*;
using gesvdjInfo_t = struct gesvdjInfo*;
using cusolverStatus_t = int;  // 0 = CUSOLVER_STATUS_SUCCESS
enum cublasFillMode_t { CUBLAS_FILL_MODE_LOWER = 0, CUBLAS_FILL_MODE_UPPER = 1 };
enum cusolverEigMode_t { CUSOLVER_EIG_MODE_NOVECTOR = 0, CUSOLVER_EIG_MODE_VECTOR = 1 };

// One routine for float and double: `s` and `d` hold cusolverDnS<name> and cusolverDnD<name>.
template <typename FloatFn, typename DoubleFn>
struct Typed {
  FloatFn s;
  DoubleFn d;
};

struct CusolverApi {
  cusolverStatus_t (*create)(cusolverDnHandle_t*);
  cusolverStatus_t (*set_stream)(cusolverDnHandle_t, cudaStream_t);
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, int, int, float*, int, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, int, int, double*, int, int*)>
      getrf_buffer_size;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, int, int, float*, int, float*, int*, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, int, int, double*, int, double*, int*, int*)>
      getrf;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, cublasOperation_t, int, int, const float*, int,
                             const int*, float*, int, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, cublasOperation_t, int, int, const double*, int,
                             const int*, double*, int, int*)>
      getrs;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, cublasFillMode_t, int, float*, int, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, cublasFillMode_t, int, double*, int, int*)>
      potrf_buffer_size;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, cublasFillMode_t, int, float*, int, float*, int, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, cublasFillMode_t, int, double*, int, double*, int, int*)>
      potrf;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int,
                             const float*, int, const float*, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int,
                             const double*, int, const double*, int*)>
      syevd_buffer_size;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int, float*,
                             int, float*, float*, int, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int, double*,
                             int, double*, double*, int, int*)>
      syevd;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, int, int, float*, int, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, int, int, double*, int, int*)>
      geqrf_buffer_size;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, int, int, float*, int, float*, float*, int, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, int, int, double*, int, double*, double*, int, int*)>
      geqrf;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, int, int, int, const float*, int, const float*, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, int, int, int, const double*, int, const double*, int*)>
      orgqr_buffer_size;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, int, int, int, float*, int, const float*, float*, int, int*),
        cusolverStatus_t (*)(cusolverDnHandle_t, int, int, int, double*, int, const double*, double*, int, int*)>
      orgqr;
  cusolverStatus_t (*create_gesvdj_info)(gesvdjInfo_t*);
  cusolverStatus_t (*destroy_gesvdj_info)(gesvdjInfo_t);
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, cusolverEigMode_t, int, int, int, const float*, int,
                             const float*, const float*, int, const float*, int, int*, gesvdjInfo_t),
        cusolverStatus_t (*)(cusolverDnHandle_t, cusolverEigMode_t, int, int, int, const double*, int,
                             const double*, const double*, int, const double*, int, int*, gesvdjInfo_t)>
      gesvdj_buffer_size;
  Typed<cusolverStatus_t (*)(cusolverDnHandle_t, cusolverEigMode_t, int, int, int, float*, int, float*,
                             float*, int, float*, int, float*, int, int*, gesvdjInfo_t),
        cusolverStatus_t (*)(cusolverDnHandle_t, cusolverEigMode_t, int, int, int, double*, int, double*,
                             double*, int, double*, int, double*, int, int*, gesvdjInfo_t)>
      gesvdj;
  cusolverStatus_t (*create_params)(cusolverDnParams_t*);
  cusolverStatus_t (*destroy_params)(cusolverDnParams_t);
  cusolverStatus_t (*xgeev_buffer_size)(cusolverDnHandle_t, cusolverDnParams_t, cusolverEigMode_t jobvl,
                                        cusolverEigMode_t jobvr, int64_t n, cudaDataType type_a,
                                        const void* a, int64_t lda, cudaDataType type_w, const void* w,
                                        cudaDataType type_vl, const void* vl, int64_t ldvl,
                                        cudaDataType type_vr, const void* vr, int64_t ldvr,
                                        cudaDataType compute_type, size_t* device_bytes,
                                        size_t* host_bytes);
  cusolverStatus_t (*xgeev)(cusolverDnHandle_t, cusolverDnParams_t, cusolverEigMode_t jobvl,
                            cusolverEigMode_t jobvr, int64_t n, cudaDataType type_a, void* a, int64_t lda,
                            cudaDataType type_w, void* w, cudaDataType type_vl, void* vl, int64_t ldvl,
                            cudaDataType type_vr, void* vr, int64_t ldvr, cudaDataType compute_type,
                            void* device_buffer, size_t device_bytes, void* host_buffer,
                            size_t host_bytes, int* info);
};

// The loaded API; the first call loads the library. Throws Error(kCuda) naming the library and
// the places searched when it cannot be loaded. Thread-safe.
const CusolverApi& cusolver();

// The cuSOLVER handle bound to `stream` on pymx device `device_id`, created on first use and kept
// for the life of the process (engine worker streams live as long). Thread-safe.
cusolverDnHandle_t cusolver_handle(int device_id, cudaStream_t stream);

// Throws Error(kCuda) naming the call and the status when `status` is not success.
void check_cusolver(cusolverStatus_t status, const char* call);

}  // namespace gpu
}  // namespace pymx
