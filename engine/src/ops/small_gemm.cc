// Float products with few rows (small_gemm.h).
//
// Note [Small GEMM]
// ~~~~~~~~~~~~~~~~~
// An LSTM's recurrent product (32 x 256) . (1024 x 256)^T, a Dense layer at batch 9-64, their
// data gradients (dY . W) and weight gradients (dY^T . X, few inner terms) are GEMMs with a
// small dimension. OpenBLAS's sgemm packs A and B into its own layouts on every call and runs
// its AVX2 kernels here (OPENBLAS_CORETYPE=Haswell): the recurrent product ran at ~77 GFLOP/s
// on two cores. Here:
//  - C is computed in blocks of at most 64 rows by 256 columns, whose sums stay in cache.
//  - Each thread owns a range of C's columns (whole panels of NR = two vectors, 32 floats with
//    AVX-512 and 16 with AVX2), so B is read once per block of rows.
//  - op(B) is taken kDepth rows at a time; each panel's kDepth x NR block is copied (packed)
//    contiguously, zero-padded past n, into the thread's scratch: O(nk) copying against O(mnk)
//    arithmetic, and for B stored n x k the copy is also the transpose (8 x 8 blocks through
//    registers). Whole panels of B stored k x n are read in place.
//  - The micro-kernel multiplies R rows of op(A) (R = 8 with AVX-512's 32 registers, 6 with
//    AVX2's 16; A is read in place, either way round) by one panel: R x 2 vector accumulators in
//    registers, one broadcast of A and one fused multiply-add per accumulator per step. Between
//    the kDepth blocks the accumulators live in the block's sums (a float store and load are
//    exact); alpha and beta are applied once at the end.
// Every output is therefore one running sum of its k products in the order 0..k-1, fused
// multiply-adds throughout: the same value whatever the thread count, the split or the vector
// width (AVX2 and AVX-512 agree bitwise; tests/cpp/test_small_gemm.cc checks it).
// A B used for many products (a recurrent weight over a sequence's steps) can be packed once
// (small_gemm_pack_bt: the same panels, each over all k rows) and multiplied panel by panel on
// the caller's thread (small_gemm_packed_f32, the same micro-kernel and order of terms, so the
// same values); rnn_sequence.cc's Note [Gates beside their product] uses them.
// bench/cpp/small_gemm.cc, against sgemm split over the threads as nn::gemm does, two cores
// (AVX-512): the recurrent product 1.9x (~100 -> ~195 GFLOP/s), its data gradient 2.3x, the
// weight gradients 1.3-1.6x, LeafNetwork's first Dense layer at batch 9-64 1.5-3x.
#include "ops/small_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <immintrin.h>

#include "blas.h"
#include "parallel.h"

namespace pymx {
namespace nn {
namespace {

// The ranges below were measured against OpenBLAS's sgemm split over the threads
// (bench/cpp/small_gemm.cc; OpenBLAS runs its AVX2 kernels here, OPENBLAS_CORETYPE=Haswell), and
// on one thread at the shapes of convolutions' products. With AVX-512 this kernel ran 1.3-2.5x
// faster at every shape tried, either operand transposed, up to 2048 x 2048 x 2048. With AVX2,
// the width of OpenBLAS's kernels, it gained only on A . B^T with few rows (1.75x at 9 rows,
// 1.1-1.2x at 16-32) and lost on A . B with a wide B (1.3-2x) and with fewer than 64 inner terms.
// Where OpenBLAS runs its own AVX-512 kernels (OPENBLAS_CORETYPE unset on this machine), they
// reach ~450 GFLOP/s on two cores from a few hundred rows, this kernel ~400-430: it still won
// at 16-128 rows (Dense at 16 x 512 -> 512: 1.7x; LeafNetwork's first Dense at batch 64: 1.05x),
// tied at 256 and lost 5-12 % from 512 rows, so it stops at 256 rows there.
constexpr int64_t kMaxRowsAvx512 = 2048;
constexpr int64_t kMaxRowsAgainstAvx512Blas = 256;
constexpr int64_t kMaxRowsAvx2 = 32;
constexpr int64_t kMinDepthAvx2 = 64;
// A . B^T with 2-8 rows: small_rows_product streams B once without copying it, which wins once B
// outgrows the caches (4 MB); below that, from 4 rows, packing wins (4 x 256 . (1024 x 256)^T:
// 27 against 36 us; 8 rows: 34 against 63 us).
constexpr int64_t kMinRowsTransposed = 4;
constexpr int64_t kMinRowsTransposedLargeB = 9;
constexpr int64_t kLargeB = int64_t(1) << 20;  // elements of B
constexpr int64_t kMinColumns = 16;  // one AVX2 panel: narrower products waste most of one
constexpr int64_t kMinWork = int64_t(1) << 18;  // m * n * k; below, sgemm's overheads are small
constexpr int64_t kDepth = 256;  // rows of op(B) per packed block: a block of 32 KB with AVX-512
// C is computed in blocks of kRowBlock x kColumnBlock, whose sums (64 KB) stay in cache.
constexpr int64_t kRowBlock = 64;
constexpr int64_t kColumnBlock = 256;

typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats16 __attribute__((vector_size(64)));

// acc (R x 2L floats, row stride ld_acc) += op(A) (R x depth) . panel (depth x 2L, row stride
// ld_panel), with A stored R x depth (row stride lda) or, kTransA, depth x R. V is a GCC vector
// of L floats, compiled for the instruction set of the caller it is inlined in.
template <typename V, int R, bool kTransA>
__attribute__((always_inline)) inline void tile(int64_t depth, const float* a, int64_t lda,
                                                const float* panel, int64_t ld_panel, float* acc,
                                                int64_t ld_acc) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  V sum[R][2];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 2; ++v) std::memcpy(&sum[r][v], acc + r * ld_acc + v * L, sizeof(V));
  for (int64_t p = 0; p < depth; ++p) {
    V b0, b1;
    std::memcpy(&b0, panel + p * ld_panel, sizeof(V));
    std::memcpy(&b1, panel + p * ld_panel + L, sizeof(V));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float x = kTransA ? a[p * lda + r] : a[r * lda + p];
      sum[r][0] += x * b0;
      sum[r][1] += x * b1;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 2; ++v) std::memcpy(acc + r * ld_acc + v * L, &sum[r][v], sizeof(V));
}

// tile<V, R, kTransA> for R = rows in [1, kTileRows].
template <typename V, int kTileRows, bool kTransA>
__attribute__((always_inline)) inline void tile_of(int rows, int64_t depth, const float* a,
                                                   int64_t lda, const float* panel,
                                                   int64_t ld_panel, float* acc, int64_t ld_acc) {
  static_assert(kTileRows <= 8, "tile_of dispatches at most 8 rows");
  switch (rows) {
#define PMX_SMALL_GEMM_TILE(R) \
  case R:                      \
    if constexpr (R <= kTileRows) {                                                          \
      return tile<V, R, kTransA>(depth, a, lda, panel, ld_panel, acc, ld_acc);                 \
    }                                                                                          \
    break;
    PMX_SMALL_GEMM_TILE(1)
    PMX_SMALL_GEMM_TILE(2)
    PMX_SMALL_GEMM_TILE(3)
    PMX_SMALL_GEMM_TILE(4)
    PMX_SMALL_GEMM_TILE(5)
    PMX_SMALL_GEMM_TILE(6)
    PMX_SMALL_GEMM_TILE(7)
    PMX_SMALL_GEMM_TILE(8)
#undef PMX_SMALL_GEMM_TILE
  }
}

// dst (8 x 8, row stride ldd) = the transpose of src (8 x 8, row stride lds).
__attribute__((target("avx2"))) void transpose8x8(const float* src, int64_t lds, float* dst,
                                                   int64_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {  // interleave pairs of rows
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {  // then pairs of pairs: columns in each 128-bit half
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {  // and the halves of rows 0-3 with those of rows 4-7
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

// panel (depth x width, zero past `cols`) = op(B)[p0 : p0 + depth, j : j + cols].
void pack(bool trans_b, const float* b, int64_t ldb, int64_t p0, int64_t depth, int64_t j,
          int64_t cols, int64_t width, float* panel) {
  if (cols < width) std::fill(panel, panel + depth * width, 0.0f);
  if (!trans_b) {
    for (int64_t p = 0; p < depth; ++p)
      std::memcpy(panel + p * width, b + (p0 + p) * ldb + j, cols * sizeof(float));
    return;
  }
  // B is n x k: column jj of the panel is row j + jj of B. A scalar copy would store one float
  // per cycle, a third of the time of the arithmetic at 32 rows; 8 x 8 blocks go through
  // registers instead.
  const float* rows = b + j * ldb + p0;
  const int64_t cols8 = cols / 8 * 8, depth8 = depth / 8 * 8;
  for (int64_t jj = 0; jj < cols8; jj += 8)
    for (int64_t p = 0; p < depth8; p += 8)
      transpose8x8(rows + jj * ldb + p, ldb, panel + p * width + jj, width);
  for (int64_t jj = 0; jj < cols; ++jj) {
    const int64_t p_start = jj < cols8 ? depth8 : 0;  // the rest of the full blocks' rows
    for (int64_t p = p_start; p < depth; ++p) panel[p * width + jj] = rows[jj * ldb + p];
  }
}

// C[:, j0:j1) of the product; j0 is a multiple of the panel width 2L.
template <typename V, int kTileRows, bool kTransA>
__attribute__((always_inline)) inline void columns(bool trans_b, int64_t m, int64_t j0, int64_t j1,
                                                   int64_t k, float alpha, const float* a,
                                                   int64_t lda, const float* b, int64_t ldb,
                                                   float beta, float* c, int64_t ldc) {
  constexpr int64_t kPanel = 2 * sizeof(V) / sizeof(float);
  std::vector<float> acc(static_cast<size_t>(std::min(m, kRowBlock) * kColumnBlock));
  std::vector<float> panel(static_cast<size_t>(kDepth * kPanel));
  for (int64_t block = j0; block < j1; block += kColumnBlock) {
    const int64_t block_end = std::min(j1, block + kColumnBlock);
    for (int64_t r0 = 0; r0 < m; r0 += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, m - r0);
      // Rows per tile as even as kTileRows allows: 9 rows are tiles of 4 and 5, not 8 and 1.
      const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t p0 = 0; p0 < k; p0 += kDepth) {
        const int64_t depth = std::min(kDepth, k - p0);
        for (int64_t j = block; j < block_end; j += kPanel) {
          const int64_t cols = std::min(kPanel, block_end - j);
          // A whole panel of B stored k x n is read in place; the rest is packed.
          const bool in_place = !trans_b && cols == kPanel;
          if (!in_place) pack(trans_b, b, ldb, p0, depth, j, cols, kPanel, panel.data());
          const float* panel_start = in_place ? b + p0 * ldb + j : panel.data();
          const int64_t ld_panel = in_place ? ldb : kPanel;
          for (int64_t t = 0, r = 0; t < tiles; ++t) {
            const int64_t tile_rows = (rows - r) / (tiles - t);
            const float* a_tile = kTransA ? a + p0 * lda + r0 + r : a + (r0 + r) * lda + p0;
            tile_of<V, kTileRows, kTransA>(static_cast<int>(tile_rows), depth, a_tile, lda,
                                           panel_start, ld_panel,
                                           acc.data() + r * kColumnBlock + (j - block),
                                           kColumnBlock);
            r += tile_rows;
          }
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const float* sums = acc.data() + r * kColumnBlock;
        float* out = c + (r0 + r) * ldc;
        if (beta == 0.0f) {
          for (int64_t j = block; j < block_end; ++j) out[j] = alpha * sums[j - block];
        } else {  // one explicit rounding order, whether or not the compiler contracts
          for (int64_t j = block; j < block_end; ++j)
            out[j] = std::fma(alpha, sums[j - block], beta * out[j]);
        }
      }
    }
  }
}

__attribute__((target("avx2,fma"))) void columns_avx2(bool trans_a, bool trans_b, int64_t m,
                                                       int64_t j0, int64_t j1, int64_t k,
                                                       float alpha, const float* a, int64_t lda,
                                                       const float* b, int64_t ldb, float beta,
                                                       float* c, int64_t ldc) {
  if (trans_a) {
    columns<Floats8, 6, true>(trans_b, m, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    columns<Floats8, 6, false>(trans_b, m, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

__attribute__((target("avx512f"))) void columns_avx512(bool trans_a, bool trans_b, int64_t m,
                                                        int64_t j0, int64_t j1, int64_t k,
                                                        float alpha, const float* a, int64_t lda,
                                                        const float* b, int64_t ldb, float beta,
                                                        float* c, int64_t ldc) {
  if (trans_a) {
    columns<Floats16, 8, true>(trans_b, m, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    columns<Floats16, 8, false>(trans_b, m, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

// C[:, panels [p0, p1)) = A . packed panels (small_gemm_pack_bt), rows in tiles of at most
// kTileRows; every tile sums all k terms in registers, starting from zero.
template <typename V, int kTileRows>
__attribute__((always_inline)) inline void packed_panels(int64_t m, int64_t p0, int64_t p1,
                                                         int64_t k, const float* a, int64_t lda,
                                                         const float* packed, float* c,
                                                         int64_t ldc) {
  constexpr int64_t kPanel = 2 * sizeof(V) / sizeof(float);
  for (int64_t p = p0; p < p1; ++p) {
    const float* panel = packed + p * k * kPanel;
    float* c_panel = c + p * kPanel;
    for (int64_t r = 0; r < m; ++r) std::fill_n(c_panel + r * ldc, kPanel, 0.0f);
    const int64_t tiles = (m + kTileRows - 1) / kTileRows;
    for (int64_t t = 0, r = 0; t < tiles; ++t) {
      const int64_t tile_rows = (m - r) / (tiles - t);  // as even as kTileRows allows
      tile_of<V, kTileRows, false>(static_cast<int>(tile_rows), k, a + r * lda, lda, panel,
                                   kPanel, c_panel + r * ldc, ldc);
      r += tile_rows;
    }
  }
}

__attribute__((target("avx2,fma"))) void packed_panels_avx2(int64_t m, int64_t p0, int64_t p1,
                                                             int64_t k, const float* a,
                                                             int64_t lda, const float* packed,
                                                             float* c, int64_t ldc) {
  packed_panels<Floats8, 6>(m, p0, p1, k, a, lda, packed, c, ldc);
}

__attribute__((target("avx512f"))) void packed_panels_avx512(int64_t m, int64_t p0, int64_t p1,
                                                              int64_t k, const float* a,
                                                              int64_t lda, const float* packed,
                                                              float* c, int64_t ldc) {
  packed_panels<Floats16, 8>(m, p0, p1, k, a, lda, packed, c, ldc);
}

}  // namespace

int64_t small_gemm_panel_width(FmaLevel level) { return level == FmaLevel::kAvx512 ? 32 : 16; }

int64_t small_gemm_packed_size(int64_t n, int64_t k, FmaLevel level) {
  const int64_t width = small_gemm_panel_width(level);
  return (n + width - 1) / width * width * k;
}

void small_gemm_pack_bt(int64_t n, int64_t k, const float* b, int64_t ldb, float* packed,
                        FmaLevel level) {
  const int64_t width = small_gemm_panel_width(level);
  for (int64_t j = 0; j < n; j += width)
    pack(true, b, ldb, 0, k, j, std::min(width, n - j), width, packed + j * k);
}

void small_gemm_packed_f32(int64_t m, int64_t p0, int64_t p1, int64_t k, const float* a,
                           int64_t lda, const float* packed, float* c, int64_t ldc,
                           FmaLevel level) {
  if (level == FmaLevel::kAvx512) {
    packed_panels_avx512(m, p0, p1, k, a, lda, packed, c, ldc);
  } else {
    packed_panels_avx2(m, p0, p1, k, a, lda, packed, c, ldc);
  }
}

bool small_gemm_handles(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                        FmaLevel level) {
  if (level == FmaLevel::kNone) return false;
  if (level == FmaLevel::kAvx2 && (trans_a || !trans_b || m > kMaxRowsAvx2 || k < kMinDepthAvx2))
    return false;
  const int64_t min_rows = trans_a || !trans_b ? 2
                           : n * k < kLargeB  ? kMinRowsTransposed
                                              : kMinRowsTransposedLargeB;
  const int64_t max_rows =
      blas::runs_avx512_kernels() ? kMaxRowsAgainstAvx512Blas : kMaxRowsAvx512;
  return m >= min_rows && m <= max_rows && n >= kMinColumns && m * n * k >= kMinWork;
}

void small_gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc, FmaLevel level) {
  const int64_t panel = level == FmaLevel::kAvx512 ? 32 : 16;  // columns per packed panel
  const int64_t panels = (n + panel - 1) / panel;
  const int64_t threads = parallel_max_threads();
  // About one range of whole panels per thread.
  const int64_t grain = (panels + threads - 1) / threads;
  parallel_for(0, panels, grain, [&](int64_t lo, int64_t hi) {
    const int64_t j0 = lo * panel, j1 = std::min(n, hi * panel);
    if (level == FmaLevel::kAvx512) {
      columns_avx512(trans_a, trans_b, m, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
    } else {
      columns_avx2(trans_a, trans_b, m, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
  });
}

}  // namespace nn
}  // namespace pymx
