// cuBLAS's ABI as cuda/src/cublas_loader.h declares it, checked at compile time against the real
// cublas_api.h: the enum values we pass and the type of every entry point the loader resolves
// (by the symbol names cublas_loader.cc looks up). Built as a ctest only where cublas_api.h is
// found (tests/cpp/CMakeLists.txt); compiling is the check, running it only reports.
#include <cublas_api.h>

#include <cstdio>
#include <type_traits>

#include "abi_check.h"
#include "cublas_loader.h"

namespace ours = pymx::gpu;

// The handle: `struct cublasContext*` on both sides (the real header declares the struct first
// here, so ours names the same one).
static_assert(std::is_same_v<::cublasHandle_t, ours::cublasHandle_t>, "cublasHandle_t");
// cublasStatus_t is an enum there and an int here: same size, and success is 0.
template <>
struct abi_check::Ours<::cublasStatus_t> {
  using type = ours::cublasStatus_t;
};
static_assert(sizeof(::cublasStatus_t) == sizeof(ours::cublasStatus_t), "cublasStatus_t size");
static_assert(CUBLAS_STATUS_SUCCESS == 0, "CUBLAS_STATUS_SUCCESS");

PMX_ABI_OURS(ours, cublasOperation_t)
PMX_ABI_OURS(ours, cublasComputeType_t)
PMX_ABI_OURS(ours, cublasGemmAlgo_t)
PMX_ABI_SAME_VALUE(ours, CUBLAS_OP_N)
PMX_ABI_SAME_VALUE(ours, CUBLAS_OP_T)
PMX_ABI_SAME_VALUE(ours, CUBLAS_COMPUTE_32F)
PMX_ABI_SAME_VALUE(ours, CUBLAS_GEMM_DEFAULT)

PMX_ABI_SAME_FUNCTION(ours::CublasApi, cublasCreate_v2, create)
PMX_ABI_SAME_FUNCTION(ours::CublasApi, cublasSetStream_v2, set_stream)
PMX_ABI_SAME_FUNCTION(ours::CublasApi, cublasSetWorkspace_v2, set_workspace)
PMX_ABI_SAME_FUNCTION(ours::CublasApi, cublasSgemmStridedBatched, sgemm_strided_batched)
PMX_ABI_SAME_FUNCTION(ours::CublasApi, cublasDgemmStridedBatched, dgemm_strided_batched)

// In C++ the header adds an inline overload of cublasGemmStridedBatchedEx taking the compute
// type as a cudaDataType; the exported symbol is the one taking a cublasComputeType_t.
using ExportedGemmStridedBatchedEx = decltype(static_cast<cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
    cudaDataType, int, long long, const void*, cudaDataType, int, long long, const void*, void*,
    cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t)>(
    &::cublasGemmStridedBatchedEx));
static_assert(std::is_same_v<abi_check::Ours<ExportedGemmStridedBatchedEx>::type,
                             decltype(ours::CublasApi::gemm_strided_batched_ex)>,
              "cublasGemmStridedBatchedEx: pymx declares another type");

static_assert(sizeof(ours::CublasApi) == 6 * sizeof(void (*)()),
              "CublasApi has a member that this check does not compare");

int main() {
  std::printf("cuda/src/cublas_loader.h matches cublas_api.h %d.%d.%d\n", CUBLAS_VER_MAJOR,
              CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
  return 0;
}
