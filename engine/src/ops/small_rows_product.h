// Float products with few rows against a large transposed matrix, C = alpha * A . B^T + beta * C
// with A m x k (m small) and B stored n x k: a Dense layer at batch 2-8. OpenBLAS's sgemm packs
// all of B on every call (8.6 MB for LeafNetwork's first Dense layer), which costs more than the
// arithmetic; this kernel streams each row of B once and reuses it for every row of A. AVX-512 or
// AVX2+FMA, chosen at run time; nn::gemm (nn_common.h) calls it for the products that
// small_gemm.h does not take (with 4-8 rows it does when B has fewer than 2^20 elements and stays
// in cache, where packing it wins). See Note [Small-row products] in small_rows_product.cc.
#pragma once

#include <cstdint>

#include "ops/fma_level.h"

namespace pymx {
namespace nn {

// Whether the kernel takes an m x k . (n x k)^T product at `level`: 2 <= m <= 8 and B large
// enough (n * k >= 65536 elements) for packing it to matter.
bool small_rows_product_handles(int64_t m, int64_t n, int64_t k,
                                FmaLevel level = fma_level());

// Row-major C (m x n, row stride ldc) = alpha * A (m x k, row stride lda) . B^T + beta * C, with
// B n x k (row stride ldb); beta == 0 overwrites C (NaN in C does not propagate). The n rows of B
// are split across the intra-op threads; each output is one thread's fixed-order sum, so results
// do not depend on the thread count. Requires small_rows_product_handles(m, n, k, level).
void small_rows_product_f32(int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                            int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                            int64_t ldc, FmaLevel level = fma_level());

}  // namespace nn
}  // namespace pymx
