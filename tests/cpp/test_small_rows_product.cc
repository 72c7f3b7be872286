// The few-row product of engine/src/ops/small_rows_product.h at every level this CPU runs (AVX2
// and, where the CPU has it, AVX-512; the Python tests reach only the best one), against a float64
// reference: every row count it takes, odd and even column counts, k with and without a tail of
// less than a vector, leading dimensions larger than the rows, alpha, and beta = 0 (C's NaN
// overwritten) and beta != 0 (C accumulated).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ops/small_rows_product.h"
#include "test_util.h"

using pymx::nn::FmaLevel;

namespace {

void check(FmaLevel level, int64_t m, int64_t n, int64_t k, float alpha, float beta,
           std::mt19937* rng) {
  const std::string what = pymx::str_cat(level == FmaLevel::kAvx512 ? "avx512" : "avx2",
                                         " m ", m, " n ", n, " k ", k, " alpha ", alpha, " beta ",
                                         beta);
  EXPECT(pymx::nn::small_rows_product_handles(m, n, k, level), what);
  const int64_t lda = k + 3, ldb = k + 5, ldc = n + 2;  // padded rows
  std::normal_distribution<float> normal;
  std::vector<float> a(m * lda), b(n * ldb), c(m * ldc);
  for (float& v : a) v = normal(*rng);
  for (float& v : b) v = normal(*rng);
  for (float& v : c) v = beta == 0.0f ? NAN : normal(*rng);
  std::vector<float> c_before = c;
  pymx::nn::small_rows_product_f32(m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(),
                                   ldc, level);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[r * ldc + j];
      if (j >= n) {  // the padding of C's rows is left alone
        EXPECT(std::isnan(got) ? std::isnan(c_before[r * ldc + j]) : got == c_before[r * ldc + j],
               what, ": C[", r, "][", j, "] beyond n was written");
        continue;
      }
      double dot = 0.0;
      for (int64_t p = 0; p < k; ++p) dot += double(a[r * lda + p]) * b[j * ldb + p];
      const double want = alpha * dot + (beta == 0.0f ? 0.0 : double(beta) * c_before[r * ldc + j]);
      // float32 sums of k products of N(0, 1) values: error ~ sqrt(k) ulps of the terms.
      const double tolerance = 1e-5 * std::sqrt(double(k)) * (1.0 + std::fabs(want));
      EXPECT(std::fabs(got - want) <= tolerance, what, ": C[", r, "][", j, "] is ", got,
             ", expected ", want);
    }
  }
}

}  // namespace

int main() {
  const FmaLevel best = pymx::nn::fma_level();
  if (best == FmaLevel::kNone) {
    std::printf("test_small_rows_product: this CPU has neither AVX2+FMA nor AVX-512\n");
    return 0;
  }
  std::vector<FmaLevel> levels = {FmaLevel::kAvx2};
  if (best == FmaLevel::kAvx512) levels.push_back(FmaLevel::kAvx512);
  std::mt19937 rng(2024);
  int cases = 0;
  for (FmaLevel level : levels) {
    for (int64_t m = 2; m <= 8; ++m) {
      check(level, m, 100, 21632, 1.0f, 0.0f, &rng);  // LeafNetwork's first Dense layer
      check(level, m, 7, 10007, 0.5f, 0.0f, &rng);    // odd n, k with a tail
      check(level, m, 33, 2051, 2.0f, 1.0f, &rng);    // accumulate into C
      cases += 3;
    }
  }
  EXPECT(!pymx::nn::small_rows_product_handles(1, 100, 21632, best), "m = 1 is gemv's");
  EXPECT(!pymx::nn::small_rows_product_handles(9, 100, 21632, best), "m = 9 is too many rows");
  EXPECT(!pymx::nn::small_rows_product_handles(4, 10, 100, best), "a small B stays with sgemm");
  std::printf("test_small_rows_product: ok (%d cases)\n", cases);
  return 0;
}
