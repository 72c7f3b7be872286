// What Note [Parallel GEMM] and Note [Vector products] (engine/src/ops/nn_common.h) rely on, on the
// machine that runs this test: OpenBLAS's gemm computed in two calls split at a row that is a
// multiple of kExactRowSplit, and its untransposed gemv split at a multiple of kExactGemvSplit,
// give the bits of one call (float and double, either operand transposed, padded leading
// dimensions); and nn::gemm_in_parallel gives those same bits for tall products, and for wide
// ones the bits of its column blocks computed one after another, whatever the pool's threads.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/nn_common.h"
#include "test_util.h"

namespace {

using pymx::nn::Blas;

template <typename T>
struct Product {
  bool trans_a, trans_b;
  int64_t m, n, k, lda, ldb, ldc;
  std::vector<T> a, b, c;

  Product(bool ta, bool tb, int64_t rows, int64_t cols, int64_t depth, std::mt19937* rng)
      : trans_a(ta), trans_b(tb), m(rows), n(cols), k(depth), lda((ta ? rows : depth) + 3),
        ldb((tb ? depth : cols) + 5), ldc(cols + 2) {
    std::normal_distribution<T> normal;
    a.resize((ta ? depth : rows) * lda);
    b.resize((tb ? cols : depth) * ldb);
    c.resize(rows * ldc);
    for (T& v : a) v = normal(*rng);
    for (T& v : b) v = normal(*rng);
    for (T& v : c) v = normal(*rng);
  }

  std::string name() const {
    return pymx::str_cat(sizeof(T) == 4 ? "float " : "double ", trans_a ? "A^T" : "A",
                         trans_b ? ".B^T" : ".B", " m ", m, " n ", n, " k ", k);
  }

  // C[first:first + rows, :] by one OpenBLAS call (alpha 1.5, beta 0.5).
  void blas_rows(int64_t first, int64_t rows, std::vector<T>* out) const {
    Blas<T>::gemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                  trans_b ? CblasTrans : CblasNoTrans, rows, n, k, T(1.5),
                  trans_a ? a.data() + first : a.data() + first * lda, lda, b.data(), ldb, T(0.5),
                  out->data() + first * ldc, ldc);
  }

  // C[:, first:first + cols] by one OpenBLAS call.
  void blas_columns(int64_t first, int64_t cols, std::vector<T>* out) const {
    Blas<T>::gemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                  trans_b ? CblasTrans : CblasNoTrans, m, cols, k, T(1.5), a.data(), lda,
                  trans_b ? b.data() + first * ldb : b.data() + first, ldb, T(0.5),
                  out->data() + first, ldc);
  }

  std::vector<T> in_parallel() const {
    std::vector<T> out = c;
    pymx::nn::gemm_in_parallel<T>(trans_a, trans_b, m, n, k, T(1.5), a.data(), lda, b.data(), ldb,
                                  T(0.5), out.data(), ldc);
    return out;
  }
};

template <typename T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT(std::memcmp(&got[i], &want[i], sizeof(T)) == 0, what, ": differs at ", i);
}

template <typename T>
void check_row_splits(const Product<T>& p) {
  std::vector<T> whole = p.c;
  p.blas_rows(0, p.m, &whole);
  for (int64_t split = pymx::nn::kExactRowSplit; split < p.m; split += pymx::nn::kExactRowSplit) {
    std::vector<T> halves = p.c;
    p.blas_rows(0, split, &halves);
    p.blas_rows(split, p.m - split, &halves);
    expect_same_bits(halves, whole, pymx::str_cat(p.name(), ", rows split at ", split));
  }
  if (p.m >= p.n) expect_same_bits(p.in_parallel(), whole, p.name() + ", gemm_in_parallel");
}

template <typename T>
void check_column_blocks(const Product<T>& p) {
  std::vector<T> blocks = p.c;
  const int64_t width = pymx::nn::column_block(p.n);
  for (int64_t first = 0; first < p.n; first += width)
    p.blas_columns(first, std::min(width, p.n - first), &blocks);
  expect_same_bits(p.in_parallel(), blocks, p.name() + ", gemm_in_parallel by column blocks");
}

template <typename T>
void check_gemv_splits(int64_t rows, int64_t depth, std::mt19937* rng) {
  std::normal_distribution<T> normal;
  std::vector<T> matrix(rows * depth), x(depth), whole(rows), halves(rows);
  for (T& v : matrix) v = normal(*rng);
  for (T& v : x) v = normal(*rng);
  Blas<T>::gemv(CblasRowMajor, CblasNoTrans, rows, depth, T(1), matrix.data(), depth, x.data(), 1,
                T(0), whole.data(), 1);
  for (int64_t split = pymx::nn::kExactGemvSplit; split < rows; split += 7 * pymx::nn::kExactGemvSplit) {
    Blas<T>::gemv(CblasRowMajor, CblasNoTrans, split, depth, T(1), matrix.data(), depth, x.data(),
                  1, T(0), halves.data(), 1);
    Blas<T>::gemv(CblasRowMajor, CblasNoTrans, rows - split, depth, T(1),
                  matrix.data() + split * depth, depth, x.data(), 1, T(0), halves.data() + split, 1);
    expect_same_bits(halves, whole, pymx::str_cat("gemv ", rows, " x ", depth, " split at ", split));
  }
}

template <typename T>
void check_all(std::mt19937* rng) {
  for (int ops = 0; ops < 4; ++ops) {
    const bool trans_a = ops & 1, trans_b = ops & 2;
    // Tall products (one K block and several), then wide ones (a convolution at batch 1).
    for (auto [m, n, k] : {std::tuple{148, 140, 280}, {500, 64, 300}, {300, 50, 2000}}) {
      check_row_splits(Product<T>(trans_a, trans_b, m, n, k, rng));
    }
    for (auto [m, n, k] : {std::tuple{32, 3136, 147}, {64, 1000, 576}, {40, 300, 1000}}) {
      check_column_blocks(Product<T>(trans_a, trans_b, m, n, k, rng));
    }
  }
  check_gemv_splits<T>(1000, 1100, rng);
  check_gemv_splits<T>(4096, 300, rng);
}

}  // namespace

int main() {
  std::mt19937 rng(7);
  check_all<float>(&rng);
  check_all<double>(&rng);
  std::printf("test_blas_splits: ok\n");
  return 0;
}
