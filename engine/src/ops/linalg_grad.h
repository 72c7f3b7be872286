// Building blocks of the np.linalg gradients (linalg_*.cc). Each gradient is written with other
// operators, so it runs on every device that has their kernels and is itself differentiable
// where they are.
#pragma once

#include <string>

#include "ops/elemwise.h"

namespace pymx {
namespace linalg {

// x with its last two axes swapped (the transpose of each matrix).
inline NDArray mT(const NDArray& x) {
  return ops::call("swapaxes", {x}, Attrs{{"axis1", "-1"}, {"axis2", "-2"}});
}

inline NDArray mm(const NDArray& a, const NDArray& b) { return ops::call("matmul", {a, b}); }

// x (...) as (..., 1, 1), or (..., 1) with one axis: a per-matrix (or per-row) scalar that
// broadcasts against matrices.
inline NDArray with_unit_axes(const NDArray& x, int axes) {
  Shape s = x.shape();
  for (int i = 0; i < axes; ++i) s.push_back(1);
  return ops::call("reshape", {x}, Attrs{{"newshape", ops::shape_attr(s)}});
}

// The solution X of A X = B for stacks of matrices (the linalg_solve operator).
inline NDArray solve(const NDArray& a, const NDArray& b) { return ops::call("linalg_solve", {a, b}); }

// The lower (or upper) triangle of each matrix with its diagonal halved: Phi in the Cholesky
// gradient, and how a gradient with respect to a symmetric matrix folds onto the triangle that
// LAPACK reads (fold_triangle).
inline NDArray tril_half(const NDArray& x, bool lower = true) {
  return ops::call("_linalg_tril_half", {x}, Attrs{{"lower", lower ? "True" : "False"}});
}

// Note [Gradients of functions of a symmetric matrix]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cholesky and eigh read one triangle of their input (LAPACK's uplo); the other is never looked
// at. Their gradient is the exact derivative of that function: with S the gradient with respect
// to a symmetric matrix (perturbing a_ij and a_ji together), entry (i, j) of the read triangle
// gets S_ij + S_ji off the diagonal and S_ii on it, and the unread triangle gets zero. That is
// tril_half(S + S^T). What finite differences measure element by element, and for any symmetric
// input built upstream (A = X X^T) it gives the same gradient to X as the symmetric form
// (S + S^T)/2 that MXNet returns, since both have the same A-bar + A-bar^T.
inline NDArray fold_triangle(const NDArray& s, bool lower) {
  return tril_half(ops::call("add", {s, mT(s)}), lower);
}

}  // namespace linalg
}  // namespace pymx
