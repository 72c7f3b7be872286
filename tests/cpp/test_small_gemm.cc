// The few-row product of engine/src/ops/small_gemm.h at every level this CPU runs (AVX2 and,
// where the CPU has it, AVX-512; the Python tests reach only the best one), against a float64
// reference: A stored m x k and k x m, B stored n x k and k x n, row counts at the tile,
// row-block and range boundaries, column counts that are not multiples of a panel or that cross
// a column block, k across several packed blocks and with tails, padded leading dimensions,
// alpha, and beta = 0 (C's NaN overwritten) and beta != 0. Also: AVX2 and AVX-512 agree bitwise,
// and computing C's columns in two calls gives the bits of one call (what makes results
// independent of the thread split); products over B^T packed once give the same bits.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "blas.h"
#include "ops/small_gemm.h"
#include "test_util.h"

using pymx::nn::FmaLevel;

namespace {

struct Problem {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c;
};

Problem make_problem(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     float beta, std::mt19937* rng) {
  Problem p{trans_a, trans_b, m, n, k, alpha, beta, (trans_a ? m : k) + 3, (trans_b ? k : n) + 5,
            n + 2, {}, {}, {}};
  std::normal_distribution<float> normal;
  p.a.resize((trans_a ? k : m) * p.lda);
  p.b.resize((trans_b ? n : k) * p.ldb);
  p.c.resize(m * p.ldc);
  for (float& v : p.a) v = normal(*rng);
  for (float& v : p.b) v = normal(*rng);
  for (float& v : p.c) v = beta == 0.0f ? NAN : normal(*rng);
  return p;
}

std::vector<float> run(const Problem& p, FmaLevel level) {
  std::vector<float> c = p.c;
  pymx::nn::small_gemm_f32(p.trans_a, p.trans_b, p.m, p.n, p.k, p.alpha, p.a.data(), p.lda,
                           p.b.data(), p.ldb, p.beta, c.data(), p.ldc, level);
  return c;
}

bool same_bits(float x, float y) { return std::memcmp(&x, &y, sizeof(float)) == 0; }

void check(FmaLevel level, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           float beta, std::mt19937* rng) {
  const std::string what = pymx::str_cat(level == FmaLevel::kAvx512 ? "avx512" : "avx2",
                                         trans_a ? " A^T" : " A", trans_b ? ".B^T" : ".B", " m ",
                                         m, " n ", n, " k ", k, " alpha ", alpha, " beta ", beta);
  const Problem p = make_problem(trans_a, trans_b, m, n, k, alpha, beta, rng);
  const std::vector<float> c = run(p, level);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < p.ldc; ++j) {
      const float got = c[r * p.ldc + j];
      const float before = p.c[r * p.ldc + j];
      if (j >= n) {  // the padding of C's rows is left alone
        EXPECT(std::isnan(got) ? std::isnan(before) : got == before, what, ": C[", r, "][", j,
               "] beyond n was written");
        continue;
      }
      double dot = 0.0;
      for (int64_t q = 0; q < k; ++q) {
        const float b_qj = trans_b ? p.b[j * p.ldb + q] : p.b[q * p.ldb + j];
        const float a_rq = trans_a ? p.a[q * p.lda + r] : p.a[r * p.lda + q];
        dot += double(a_rq) * b_qj;
      }
      const double want = alpha * dot + (beta == 0.0f ? 0.0 : double(beta) * before);
      // float32 sums of k products of N(0, 1) values: error ~ sqrt(k) ulps of the terms.
      const double tolerance = 1e-5 * std::sqrt(double(k) + 1.0) * (1.0 + std::fabs(want));
      EXPECT(std::fabs(got - want) <= tolerance, what, ": C[", r, "][", j, "] is ", got,
             ", expected ", want);
    }
  }
}

// AVX2 and AVX-512 give the same bits, and so do C[:, :split] and C[:, split:] computed apart.
void check_bitwise(FmaLevel best, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   int64_t split, std::mt19937* rng) {
  const std::string what = pymx::str_cat(trans_a ? "A^T" : "A", trans_b ? ".B^T" : ".B", " m ", m,
                                         " n ", n, " k ", k);
  const Problem p = make_problem(trans_a, trans_b, m, n, k, 1.5f, 0.5f, rng);
  const std::vector<float> whole = run(p, best);
  if (best == FmaLevel::kAvx512) {
    const std::vector<float> avx2 = run(p, FmaLevel::kAvx2);
    for (size_t i = 0; i < whole.size(); ++i)
      EXPECT(same_bits(whole[i], avx2[i]), what, ": AVX2 and AVX-512 differ at ", i);
  }
  std::vector<float> halves = p.c;
  const float* b_right = p.b.data() + (trans_b ? split * p.ldb : split);
  pymx::nn::small_gemm_f32(trans_a, trans_b, m, split, k, p.alpha, p.a.data(), p.lda,
                           p.b.data(), p.ldb, p.beta, halves.data(), p.ldc, best);
  pymx::nn::small_gemm_f32(trans_a, trans_b, m, n - split, k, p.alpha, p.a.data(), p.lda,
                           b_right, p.ldb, p.beta, halves.data() + split, p.ldc, best);
  for (size_t i = 0; i < whole.size(); ++i)
    EXPECT(same_bits(whole[i], halves[i]), what, ": split at column ", split, " differs at ", i);
}

// small_gemm_packed_f32 over B^T packed once gives small_gemm_f32's bits (alpha 1, beta 0), for
// all panels in one call and for the panels split at `split` into two calls.
void check_packed(FmaLevel level, int64_t m, int64_t n, int64_t k, int64_t split,
                  std::mt19937* rng) {
  const std::string what = pymx::str_cat("packed m ", m, " n ", n, " k ", k);
  const Problem p = make_problem(false, true, m, n, k, 1.0f, 0.0f, rng);
  const std::vector<float> want = run(p, level);
  const int64_t width = pymx::nn::small_gemm_panel_width(level);
  const int64_t panels = (n + width - 1) / width, ldc = panels * width;
  std::vector<float> packed(pymx::nn::small_gemm_packed_size(n, k, level), NAN);
  pymx::nn::small_gemm_pack_bt(n, k, p.b.data(), p.ldb, packed.data(), level);
  std::vector<float> whole(m * ldc, NAN), halves(m * ldc, NAN);
  pymx::nn::small_gemm_packed_f32(m, 0, panels, k, p.a.data(), p.lda, packed.data(),
                                  whole.data(), ldc, level);
  pymx::nn::small_gemm_packed_f32(m, 0, split, k, p.a.data(), p.lda, packed.data(),
                                  halves.data(), ldc, level);
  pymx::nn::small_gemm_packed_f32(m, split, panels, k, p.a.data(), p.lda, packed.data(),
                                  halves.data(), ldc, level);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float expected = j < n ? want[r * p.ldc + j] : 0.0f;  // zero past n
      EXPECT(same_bits(whole[r * ldc + j], expected), what, ": row ", r, " column ", j);
      EXPECT(same_bits(halves[r * ldc + j], expected), what, ": split at panel ", split,
             ", row ", r, " column ", j);
    }
  }
}

}  // namespace

int main() {
  const FmaLevel best = pymx::nn::fma_level();
  if (best == FmaLevel::kNone) {
    std::printf("test_small_gemm: this CPU has neither AVX2+FMA nor AVX-512\n");
    return 0;
  }
  std::vector<FmaLevel> levels = {FmaLevel::kAvx2};
  if (best == FmaLevel::kAvx512) levels.push_back(FmaLevel::kAvx512);
  std::mt19937 rng(2024);
  int cases = 0;
  for (FmaLevel level : levels) {
    for (int ops = 0; ops < 4; ++ops) {
      const bool trans_a = ops & 1, trans_b = ops & 2;
      // Tile boundaries (6 rows with AVX2, 8 with AVX-512) and the range's ends.
      for (int64_t m : {1, 2, 5, 6, 7, 8, 9, 13, 16, 17, 32, 63, 64}) {
        check(level, trans_a, trans_b, m, 100, 600, 1.0f, 0.0f, &rng);  // 3 packed blocks
        check(level, trans_a, trans_b, m, 17, 37, 0.5f, 1.0f, &rng);    // one partial panel
        cases += 2;
      }
      check(level, trans_a, trans_b, 32, 1024, 256, 1.0f, 1.0f, &rng);  // an LSTM's recurrence
      check(level, trans_a, trans_b, 130, 40, 300, 1.0f, 0.5f, &rng);   // row blocks 64, 64, 2
      check(level, trans_a, trans_b, 9, 300, 8, 2.0f, 0.0f, &rng);      // 2 column blocks
      check(level, trans_a, trans_b, 3, 40, 1, 1.0f, 0.0f, &rng);       // k of 1
      check(level, trans_a, trans_b, 4, 33, 0, 1.0f, 0.5f, &rng);       // k of 0: C = beta * C
      check(level, trans_a, trans_b, 4, 33, 0, 1.0f, 0.0f, &rng);
      cases += 6;
    }
  }
  for (int ops = 0; ops < 4; ++ops) {
    const bool trans_a = ops & 1, trans_b = ops & 2;
    check_bitwise(best, trans_a, trans_b, 32, 1024, 256, 512, &rng);
    check_bitwise(best, trans_a, trans_b, 13, 300, 777, 32, &rng);
    cases += 2;
  }
  // Products over B^T packed once: tile boundaries, partial panels, one and several panels.
  for (FmaLevel level : levels) {
    for (int64_t m : {1, 7, 9, 32}) {
      check_packed(level, m, 100, 300, 1, &rng);
      check_packed(level, m, 17, 37, 0, &rng);
      check_packed(level, m, 1024, 256, 3, &rng);  // an LSTM's recurrence
      cases += 3;
    }
  }
  // Where each level takes products (the measured ranges of Note [Small GEMM]).
  for (FmaLevel level : levels) {
    const bool avx512 = level == FmaLevel::kAvx512;
    // Against OpenBLAS's own AVX-512 kernels the kernel stops at 256 rows.
    const int64_t max_rows = !avx512 ? 32 : pymx::blas::runs_avx512_kernels() ? 256 : 2048;
    EXPECT(pymx::nn::small_gemm_handles(false, true, 32, 1024, 256, level), "an LSTM's recurrence");
    EXPECT(pymx::nn::small_gemm_handles(false, true, max_rows, 1024, 256, level), "the most rows");
    EXPECT(!pymx::nn::small_gemm_handles(false, true, max_rows + 1, 1024, 256, level),
           "too many rows");
    EXPECT(pymx::nn::small_gemm_handles(false, true, 4, 1024, 256, level), "4 rows, B of 1 MB");
    EXPECT(!pymx::nn::small_gemm_handles(false, true, 3, 1024, 256, level),
           "3 rows of A.B^T are small_rows_product's");
    EXPECT(!pymx::nn::small_gemm_handles(false, true, 8, 100, 21632, level),
           "8 rows of A.B^T with a B of 8 MB are small_rows_product's");
    EXPECT(pymx::nn::small_gemm_handles(false, true, 9, 100, 21632, level), "9 rows, B of 8 MB");
    EXPECT(!pymx::nn::small_gemm_handles(false, true, 32, 8, 4096, level), "n = 8 wastes a panel");
    EXPECT(!pymx::nn::small_gemm_handles(false, true, 16, 16, 16, level),
           "tiny products stay with sgemm");
    EXPECT(!pymx::nn::small_gemm_handles(false, false, 1, 1024, 256, level), "m = 1 is gemv's");
    // AVX2 keeps to A . B^T with k >= 64; AVX-512 takes every layout.
    EXPECT(pymx::nn::small_gemm_handles(false, true, 16, 4096, 32, level) == avx512, "k = 32");
    EXPECT(pymx::nn::small_gemm_handles(false, false, 2, 21632, 100, level) == avx512,
           "a Dense data gradient");
    EXPECT(pymx::nn::small_gemm_handles(true, false, 64, 256, 32, level) == avx512,
           "a weight gradient");
    EXPECT(pymx::nn::small_gemm_handles(true, true, 2, 1024, 256, level) == avx512, "A^T.B^T");
  }
  EXPECT(!pymx::nn::small_gemm_handles(false, true, 32, 1024, 256, FmaLevel::kNone),
         "no AVX2, no kernel");
  std::printf("test_small_gemm: ok (%d cases)\n", cases);
  return 0;
}
