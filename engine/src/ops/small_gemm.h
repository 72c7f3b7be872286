// Float products with few rows, C = alpha * op(A) . op(B) + beta * C with op(A) m x k, stored
// m x k or k x m (a weight gradient's dY^T), and op(B) k x n, stored n x k (a Dense layer's
// weight, an LSTM's recurrent weight) or k x n (their data gradients): a register-blocked
// AVX-512 or AVX2+FMA kernel, chosen at run time, over panels of B packed per thread. nn::gemm
// (nn_common.h) calls it. See Note [Small GEMM] in small_gemm.cc.
#pragma once

#include <cstdint>

#include "ops/fma_level.h"

namespace pymx {
namespace nn {

// Whether the kernel takes an op(A) . op(B) product (m x k by k x n) at `level`, where it was
// measured faster than OpenBLAS: with AVX-512, at most 2048 rows; with AVX2, only A . B^T with at
// most 32 rows and k >= 64. At least 2 rows (one is a gemv), or for A . B^T at least 4, and 9
// when B has 2^20 elements or more (small_rows_product's range); n >= 16; m * n * k >= 2^18.
bool small_gemm_handles(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                        FmaLevel level = fma_level());

// Row-major C (m x n, row stride ldc) = alpha * op(A) . op(B) + beta * C; op(A) is A^T with A
// k x m (trans_a) or A itself, m x k, op(B) is B^T with B n x k (trans_b) or B itself, k x n;
// lda and ldb are the row strides of A and B as stored. beta == 0
// overwrites C (NaN in C does not propagate). The n columns are split across the intra-op
// threads; each output is the sum of its k products in order 0..k-1, so results depend neither
// on the thread count nor on `level`. Right for any m, n >= 1 and k >= 0; small_gemm_handles
// says where it is the faster way.
void small_gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc, FmaLevel level = fma_level());

// B^T packed once for many products with the same B (a recurrent weight over a sequence's steps):
// B (n x k, row stride ldb) as ceil(n / width) panels of width = small_gemm_panel_width(level)
// columns of B^T, each k x width contiguous, zero past n; small_gemm_packed_size floats in all.
int64_t small_gemm_panel_width(FmaLevel level = fma_level());
int64_t small_gemm_packed_size(int64_t n, int64_t k, FmaLevel level = fma_level());
void small_gemm_pack_bt(int64_t n, int64_t k, const float* b, int64_t ldb, float* packed,
                        FmaLevel level = fma_level());

// C[:, p0 * width : p1 * width) = A . B^T over panels [p0, p1) of small_gemm_pack_bt's `packed`,
// on the calling thread (the caller splits panels across threads); A is m x k (row stride lda),
// C holds whole panels (zero columns past n). Each output is the running sum of its k products in
// order 0..k-1, fused multiply-adds throughout: bitwise small_gemm_f32's value with alpha 1,
// beta 0. level must not be kNone.
void small_gemm_packed_f32(int64_t m, int64_t p0, int64_t p1, int64_t k, const float* a,
                           int64_t lda, const float* packed, float* c, int64_t ldc,
                           FmaLevel level = fma_level());

}  // namespace nn
}  // namespace pymx
