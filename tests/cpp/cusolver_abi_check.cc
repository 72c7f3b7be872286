// cuSOLVER's ABI as cuda/src/cusolver_loader.h declares it, checked at compile time against the
// real cusolverDn.h: the enum values we pass and the type of every entry point the loader
// resolves (by the symbol names cusolver_loader.cc looks up). Built as a ctest only where
// cusolverDn.h is found (tests/cpp/CMakeLists.txt); compiling is the check, running it only
// reports.
#include <cusolverDn.h>

#include <cstdio>
#include <type_traits>

#include "abi_check.h"
#include "cusolver_loader.h"

namespace ours = pymx::gpu;

// The handles: `struct cusolverDnContext*`, `struct cusolverDnParams*` and `struct gesvdjInfo*`
// on both sides (the real header declares the structs first here, so ours name the same ones).
static_assert(std::is_same_v<::cusolverDnHandle_t, ours::cusolverDnHandle_t>, "cusolverDnHandle_t");
static_assert(std::is_same_v<::gesvdjInfo_t, ours::gesvdjInfo_t>, "gesvdjInfo_t");
static_assert(std::is_same_v<::cusolverDnParams_t, ours::cusolverDnParams_t>, "cusolverDnParams_t");
// cusolverStatus_t is an enum there and an int here: same size, and success is 0.
template <>
struct abi_check::Ours<::cusolverStatus_t> {
  using type = ours::cusolverStatus_t;
};
static_assert(sizeof(::cusolverStatus_t) == sizeof(ours::cusolverStatus_t), "cusolverStatus_t size");
static_assert(CUSOLVER_STATUS_SUCCESS == 0, "CUSOLVER_STATUS_SUCCESS");

PMX_ABI_OURS(ours, cublasOperation_t)
PMX_ABI_OURS(ours, cublasFillMode_t)
PMX_ABI_OURS(ours, cusolverEigMode_t)
PMX_ABI_SAME_VALUE(ours, CUBLAS_OP_N)
PMX_ABI_SAME_VALUE(ours, CUBLAS_OP_T)
PMX_ABI_SAME_VALUE(ours, CUBLAS_FILL_MODE_LOWER)
PMX_ABI_SAME_VALUE(ours, CUBLAS_FILL_MODE_UPPER)
PMX_ABI_SAME_VALUE(ours, CUSOLVER_EIG_MODE_NOVECTOR)
PMX_ABI_SAME_VALUE(ours, CUSOLVER_EIG_MODE_VECTOR)

using Api = ours::CusolverApi;
PMX_ABI_SAME_FUNCTION(Api, cusolverDnCreate, create)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSetStream, set_stream)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSgetrf_bufferSize, getrf_buffer_size.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDgetrf_bufferSize, getrf_buffer_size.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSgetrf, getrf.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDgetrf, getrf.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSgetrs, getrs.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDgetrs, getrs.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSpotrf_bufferSize, potrf_buffer_size.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDpotrf_bufferSize, potrf_buffer_size.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSpotrf, potrf.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDpotrf, potrf.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSsyevd_bufferSize, syevd_buffer_size.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDsyevd_bufferSize, syevd_buffer_size.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSsyevd, syevd.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDsyevd, syevd.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSgeqrf_bufferSize, geqrf_buffer_size.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDgeqrf_bufferSize, geqrf_buffer_size.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSgeqrf, geqrf.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDgeqrf, geqrf.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSorgqr_bufferSize, orgqr_buffer_size.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDorgqr_bufferSize, orgqr_buffer_size.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSorgqr, orgqr.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDorgqr, orgqr.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnCreateGesvdjInfo, create_gesvdj_info)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDestroyGesvdjInfo, destroy_gesvdj_info)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSgesvdj_bufferSize, gesvdj_buffer_size.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDgesvdj_bufferSize, gesvdj_buffer_size.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnSgesvdj, gesvdj.s)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDgesvdj, gesvdj.d)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnCreateParams, create_params)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnDestroyParams, destroy_params)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnXgeev_bufferSize, xgeev_buffer_size)
PMX_ABI_SAME_FUNCTION(Api, cusolverDnXgeev, xgeev)

static_assert(sizeof(Api) == 34 * sizeof(void (*)()),
              "CusolverApi has a member that this check does not compare");

int main() {
  std::printf("cuda/src/cusolver_loader.h matches cusolverDn.h %d.%d.%d\n", CUSOLVER_VER_MAJOR,
              CUSOLVER_VER_MINOR, CUSOLVER_VER_PATCH);
  return 0;
}
