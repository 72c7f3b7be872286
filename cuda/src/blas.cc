// GEMM on the GPU through the dlopened cuBLAS (cublas_loader.h).
#include <cuda_fp16.h>

#include <limits>

#include "cublas_loader.h"
#include "launch.h"

namespace pymx {
namespace gpu {

void gemm(const OpContext& ctx, DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n,
          int64_t k, double alpha, const void* a, int64_t lda, const void* b, int64_t ldb,
          double beta, void* c, int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b,
          int64_t stride_c) {
  if (m == 0 || n == 0 || batch == 0) return;
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  PMX_CHECK(m <= kIntMax && n <= kIntMax && k <= kIntMax && lda <= kIntMax && ldb <= kIntMax &&
                ldc <= kIntMax && batch <= kIntMax,
            "GPU matrix product too large for cuBLAS: m=", m, " n=", n, " k=", k,
            " batch=", batch);
  const CublasApi& api = cublas();
  cublasHandle_t handle = cublas_handle(ctx.run.device.id, static_cast<cudaStream_t>(ctx.run.stream));
  // cuBLAS is column-major: a row-major C is C^T there, and C^T = op(B)^T op(A)^T, so the
  // operands swap places and keep their transpose flags.
  const auto op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  const int ibatch = static_cast<int>(batch);
  switch (dtype) {
    case DType::kFloat32: {
      const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
      check_cublas(api.sgemm_strided_batched(handle, op_b, op_a, in, im, ik, &fa,
                                             static_cast<const float*>(b), int(ldb), stride_b,
                                             static_cast<const float*>(a), int(lda), stride_a, &fb,
                                             static_cast<float*>(c), int(ldc), stride_c, ibatch),
                   "cublasSgemmStridedBatched");
      break;
    }
    case DType::kFloat64:
      check_cublas(api.dgemm_strided_batched(handle, op_b, op_a, in, im, ik, &alpha,
                                             static_cast<const double*>(b), int(ldb), stride_b,
                                             static_cast<const double*>(a), int(lda), stride_a,
                                             &beta, static_cast<double*>(c), int(ldc), stride_c,
                                             ibatch),
                   "cublasDgemmStridedBatched");
      break;
    case DType::kFloat16:
    case DType::kBFloat16: {
      // 16-bit storage, float accumulation (the CPU path accumulates in float too).
      const cudaDataType type = dtype == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
      const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
      check_cublas(api.gemm_strided_batched_ex(handle, op_b, op_a, in, im, ik, &fa, b, type,
                                               int(ldb), stride_b, a, type, int(lda), stride_a,
                                               &fb, c, type, int(ldc), stride_c, ibatch,
                                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx");
      break;
    }
    default:
      PMX_THROW(Status::kType, "matrix products on the GPU need float32, float64, float16 or "
                "bfloat16, got ", dtype_name(dtype));
  }
}

}  // namespace gpu
}  // namespace pymx
