// Few-row float products against a transposed matrix (small_rows_product.h).
//
// Note [Small-row products]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A Dense layer computes y = x . W^T with W stored (units, inputs). At batch 1 that is a gemv
// (Note [Vector products]); at batch 2-8 it is a GEMM with 2-8 rows, and OpenBLAS's sgemm first
// copies (packs) all of W, then runs its kernels on a few rows: LeafNetwork's first Dense layer
// (100 x 21632, 8.6 MB) took ~330 us at batch 4 against ~85 us for the gemv at batch 1, which
// only streams W once. Here two rows of W at a time are streamed once, L floats per step (16 with
// AVX-512, 8 with AVX2), and each step is multiplied into every row of x, which stays in cache:
// 2 x m vector accumulators (at most 16). The k % L tail and the final sums of the lanes are
// scalar. Threads split the rows of W, so each output is one fixed-order sum whatever the thread
// count.
#include "ops/small_rows_product.h"

#include <algorithm>
#include <cstring>

#include "parallel.h"

namespace pymx {
namespace nn {
namespace {

constexpr int kMaxRows = 8;
constexpr int kRowsOfB = 2;                  // rows of B per step: kRowsOfB x m accumulators
constexpr int64_t kMinElementsOfB = 1 << 16;  // below this, packing B costs little

// Outputs C[:, j0:j1) for M rows of A. V is a GCC vector of L floats, compiled for the instruction
// set of the caller it is inlined in.
template <typename V, int M>
__attribute__((always_inline)) inline void columns(int64_t j0, int64_t j1, int64_t k, float alpha,
                                                   const float* a, int64_t lda, const float* b,
                                                   int64_t ldb, float beta, float* c,
                                                   int64_t ldc) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  const int64_t k_vectors = k / L * L;
  for (int64_t j = j0; j < j1; j += kRowsOfB) {
    const int rows_of_b = static_cast<int>(std::min<int64_t>(kRowsOfB, j1 - j));
    const float* b_rows[kRowsOfB];
    for (int q = 0; q < kRowsOfB; ++q)  // an odd last row is computed twice, used once
      b_rows[q] = b + (j + std::min(q, rows_of_b - 1)) * ldb;
    V acc[kRowsOfB][M] = {};
    for (int64_t p = 0; p < k_vectors; p += L) {
      V vb[kRowsOfB];
      for (int q = 0; q < kRowsOfB; ++q) std::memcpy(&vb[q], b_rows[q] + p, sizeof(V));
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        V va;
        std::memcpy(&va, a + r * lda + p, sizeof(V));
        for (int q = 0; q < kRowsOfB; ++q) acc[q][r] += va * vb[q];
      }
    }
    for (int q = 0; q < rows_of_b; ++q) {
      for (int r = 0; r < M; ++r) {
        float sum = 0.0f;
        for (int64_t l = 0; l < L; ++l) sum += acc[q][r][l];
        for (int64_t p = k_vectors; p < k; ++p) sum += a[r * lda + p] * b_rows[q][p];
        float& out = c[r * ldc + j + q];
        out = beta == 0.0f ? alpha * sum : alpha * sum + beta * out;
      }
    }
  }
}

typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats16 __attribute__((vector_size(64)));

// The product's columns [j0, j1) for m rows, m in [2, kMaxRows].
template <typename V>
__attribute__((always_inline)) inline void columns_for_rows(int m, int64_t j0, int64_t j1,
                                                            int64_t k, float alpha, const float* a,
                                                            int64_t lda, const float* b,
                                                            int64_t ldb, float beta, float* c,
                                                            int64_t ldc) {
  switch (m) {
#define PMX_SMALL_ROWS_CASE(M) \
  case M:                      \
    return columns<V, M>(j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
    PMX_SMALL_ROWS_CASE(2)
    PMX_SMALL_ROWS_CASE(3)
    PMX_SMALL_ROWS_CASE(4)
    PMX_SMALL_ROWS_CASE(5)
    PMX_SMALL_ROWS_CASE(6)
    PMX_SMALL_ROWS_CASE(7)
    PMX_SMALL_ROWS_CASE(8)
#undef PMX_SMALL_ROWS_CASE
  }
}

__attribute__((target("avx2,fma"))) void columns_avx2(int m, int64_t j0, int64_t j1, int64_t k,
                                                       float alpha, const float* a, int64_t lda,
                                                       const float* b, int64_t ldb, float beta,
                                                       float* c, int64_t ldc) {
  columns_for_rows<Floats8>(m, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

__attribute__((target("avx512f"))) void columns_avx512(int m, int64_t j0, int64_t j1, int64_t k,
                                                        float alpha, const float* a, int64_t lda,
                                                        const float* b, int64_t ldb, float beta,
                                                        float* c, int64_t ldc) {
  columns_for_rows<Floats16>(m, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

bool small_rows_product_handles(int64_t m, int64_t n, int64_t k, FmaLevel level) {
  return level != FmaLevel::kNone && m >= 2 && m <= kMaxRows && n * k >= kMinElementsOfB;
}

void small_rows_product_f32(int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                            int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                            int64_t ldc, FmaLevel level) {
  const int rows = static_cast<int>(m);
  const int64_t threads = parallel_max_threads();
  // About one chunk of B's rows per thread.
  const int64_t grain = std::max<int64_t>(kRowsOfB, (n + threads - 1) / threads);
  parallel_for(0, n, grain, [&](int64_t j0, int64_t j1) {
    if (level == FmaLevel::kAvx512) {
      columns_avx512(rows, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
    } else {
      columns_avx2(rows, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
  });
}

}  // namespace nn
}  // namespace pymx
