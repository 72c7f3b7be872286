// What the np.linalg operators share between their CPU (linalg_*.cc) and GPU (cuda/src/linalg*)
// kernels: the shape checks of their inference and the LinAlgError they raise.
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "pymx/base.h"

namespace pymx {
namespace linalg {

// A stack of matrices (..., rows, cols) seen as `batch` matrices of rows x cols.
struct MatrixStack {
  Shape batch_shape;
  int64_t batch = 1;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Throws Error(kType) unless `dtype` is float32 or float64 (LAPACK's real types).
inline void check_float(DType dtype, const char* op) {
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64)
    PMX_THROW(Status::kType, op, ": expected float32 or float64 input, got ", dtype_name(dtype));
}

// Checks ndim >= 2 and that each matrix has fewer than 2^31 rows and columns (LAPACK's int).
inline MatrixStack matrix_stack(const Shape& shape, const char* op) {
  PMX_CHECK(shape.size() >= 2, op, ": expected an array of at least 2 dimensions (..., M, N), got shape ",
            shape_str(shape));
  MatrixStack s;
  s.batch_shape.assign(shape.begin(), shape.end() - 2);
  s.batch = shape_size(s.batch_shape);
  s.rows = shape[shape.size() - 2];
  s.cols = shape[shape.size() - 1];
  PMX_CHECK(s.rows <= INT_MAX && s.cols <= INT_MAX, op, ": matrices of shape (", s.rows, ", ",
            s.cols, ") exceed LAPACK's limit of ", INT_MAX, " rows and columns");
  return s;
}

// matrix_stack, and the matrices must be square.
inline MatrixStack square_stack(const Shape& shape, const char* op) {
  const MatrixStack s = matrix_stack(shape, op);
  PMX_CHECK(s.rows == s.cols, op, ": the last 2 dimensions of the array must be square, got shape ",
            shape_str(shape));
  return s;
}

// The first nonzero entry of `infos` (one LAPACK info per matrix of the batch), or -1.
inline int64_t first_failure(const std::vector<int>& infos) {
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i] != 0) return static_cast<int64_t>(i);
  return -1;
}

// Throws Error(kLinAlg) (np.linalg.LinAlgError): "<op>: <what> (matrix <index> of the batch;
// <routine> info <info>)". `what` says what the info value means for that routine.
template <typename... What>
[[noreturn]] void throw_linalg_error(const char* op, int64_t index, const char* routine, int info,
                                     const What&... what) {
  PMX_THROW(Status::kLinAlg, op, ": ", what..., " (matrix ", index, " of the batch; ", routine,
            " info ", info, ")");
}

// Raises the LinAlgError of a singular matrix when getrf reported one: info k > 0 means
// U[k-1, k-1] is exactly zero.
inline void check_singular(const std::vector<int>& infos, const char* op, const char* routine) {
  const int64_t i = first_failure(infos);
  if (i >= 0) throw_linalg_error(op, i, routine, infos[i], "singular matrix");
}

// Raises the LinAlgError of a matrix that is not positive definite when potrf reported one:
// info k > 0 means the leading minor of order k is not positive.
inline void check_positive_definite(const std::vector<int>& infos, const char* op, const char* routine) {
  const int64_t i = first_failure(infos);
  if (i >= 0)
    throw_linalg_error(op, i, routine, infos[i], "matrix is not positive definite (its leading minor of order ",
                       infos[i], " is not positive)");
}

// Raises the LinAlgError of an eigenvalue or SVD iteration that did not converge.
inline void check_converged(const std::vector<int>& infos, const char* op, const char* routine) {
  const int64_t i = first_failure(infos);
  if (i >= 0) throw_linalg_error(op, i, routine, infos[i], "the iteration did not converge");
}

// Note [Complex eigenvalues of eig]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A real matrix that is not symmetric may have complex eigenvalues (in conjugate pairs) and
// complex eigenvectors, which NumPy returns as complex arrays. pymx has no complex dtype, so eig
// does what MXNet's does: it returns the real eigenvalues and eigenvectors when every
// eigenvalue's imaginary part is at most 1e-15 in magnitude (MXNet's threshold; LAPACK and
// cuSOLVER report exactly 0 for the eigenvalues they find real) and otherwise raises
// LinAlgError naming the matrix and its first complex eigenvalue, rather than dropping the
// imaginary parts.
constexpr double kRealEigenvalueTolerance = 1e-15;

// Raises the LinAlgError of Note [Complex eigenvalues of eig] when matrix `index` of the batch,
// with real parts wr[0..n) and imaginary parts wi[0..n), has a complex eigenvalue, and NumPy's
// for infs or NaNs when one is not finite (what infs or NaNs in the matrix lead to).
template <typename T>
void check_real_eigenvalues(const T* wr, const T* wi, int64_t n, int64_t index, const char* op) {
  for (int64_t j = 0; j < n; ++j) {
    if (!std::isfinite(static_cast<double>(wr[j])) || !std::isfinite(static_cast<double>(wi[j])))
      PMX_THROW(Status::kLinAlg, op, ": matrix ", index, " of the batch has a non-finite "
                "eigenvalue; the array must not contain infs or NaNs");
    if (std::fabs(static_cast<double>(wi[j])) > kRealEigenvalueTolerance)
      PMX_THROW(Status::kLinAlg, op, ": matrix ", index, " of the batch has complex eigenvalues (",
                static_cast<double>(wr[j]), " +- ", std::fabs(static_cast<double>(wi[j])),
                "i), which pymx cannot return (it has no complex dtype); eig supports only "
                "matrices whose eigenvalues are all real");
  }
}

}  // namespace linalg
}  // namespace pymx
