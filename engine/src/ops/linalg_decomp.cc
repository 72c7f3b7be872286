// np.linalg decompositions (LAPACK potrf, syevd, geev, gesdd, geqrf/orgqr), batched over
// leading axes.
//
//   op               inputs  attrs                  outputs
//   linalg_cholesky  a       -                      l (..., n, n), lower, a = l l^T
//   linalg_eigh      a       UPLO: "L" (default)    w (..., n) ascending, v (..., n, n) with the
//                            or "U"                 eigenvectors in its columns
//   linalg_eig       a       -                      w (..., n) in LAPACK's order, v (..., n, n)
//                                                   with unit-norm eigenvectors in its columns;
//                                                   real eigenvalues only (Note [Complex
//                                                   eigenvalues of eig] in linalg_common.h)
//   linalg_svd       a       -                      u (..., m, k), s (..., k) descending,
//                                                   vh (..., k, n); k = min(m, n), a = u s vh
//   linalg_qr        a       -                      q (..., m, k), r (..., k, n); k = min(m, n)
//
// float32 and float64; the matrices of a batch are spread over the intra-op threads. cholesky
// and eigh read only one triangle of their input (see Note [Gradients of functions of a
// symmetric matrix] in linalg_grad.h). A matrix that is not positive definite (cholesky), one
// with complex eigenvalues or infs or NaNs (eig), one with NaNs (svd) or an iteration that does
// not converge (eigh, eig, svd) raises LinAlgError naming the matrix.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/dispatch.h"
#include "ops/linalg_common.h"
#include "ops/linalg_grad.h"
#include "ops/linalg_lapack.h"
#include "parallel.h"
#include "pymx/op.h"

namespace pymx {
namespace {

using linalg::mm;
using linalg::mT;
using linalg::solve;
using linalg::with_unit_axes;
using ops::call;

int64_t batch_grain(int64_t m, int64_t n) {
  return std::max<int64_t>(1, 32768 / (m * n * std::min(m, n) + 1));
}

void check_arguments(int info, const char* routine) {
  PMX_ASSERT(info >= 0, routine, " rejected argument ", -info);
}

// eigh's UPLO attribute: true for "L".
bool uplo_lower(const Attrs& attrs) {
  const std::string uplo = attrs.get_str("UPLO", "L");
  PMX_CHECK(uplo == "L" || uplo == "U", "eigh: UPLO must be 'L' or 'U', got '", uplo, "'");
  return uplo == "L";
}

template <typename T>
void cholesky_cpu(const T* a, T* l, int64_t batch, int64_t n) {
  const lapack::lint ln = static_cast<lapack::lint>(n);
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  parallel_for(0, batch, batch_grain(n, n), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      // The row-major lower triangle is LAPACK's upper one: potrf('U') gives U with A = U^T U,
      // which reads back row-major as L = U^T with A = L L^T.
      T* li = l + i * n * n;
      std::copy(a + i * n * n, a + (i + 1) * n * n, li);
      lapack::lint f = 0;
      lapack::potrf('U', ln, li, &f);
      check_arguments(f, "potrf");
      infos[i] = f;
      for (int64_t r = 0; r < n; ++r) std::fill(li + r * n + r + 1, li + (r + 1) * n, T(0));
    }
  });
  linalg::check_positive_definite(infos, "cholesky", "potrf");
}

template <typename T>
void eigh_cpu(const T* a, T* w, T* v, int64_t batch, int64_t n, bool lower) {
  const lapack::lint ln = static_cast<lapack::lint>(n);
  // Row-major lower = LAPACK's upper (the block is A^T to it, and A^T has A's triangles swapped).
  const char uplo = lower ? 'U' : 'L';
  T query = 0;
  lapack::lint iquery = 0, info = 0;
  lapack::syevd('V', uplo, ln, static_cast<T*>(nullptr), nullptr, &query, -1, &iquery, -1, &info);
  const lapack::lint lwork = std::max<lapack::lint>(1, static_cast<lapack::lint>(query));
  const lapack::lint liwork = std::max<lapack::lint>(1, iquery);
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  parallel_for(0, batch, batch_grain(n, n), [&](int64_t lo, int64_t hi) {
    std::vector<T> work(static_cast<size_t>(lwork)), vecs(static_cast<size_t>(n * n));
    std::vector<lapack::lint> iwork(static_cast<size_t>(liwork));
    for (int64_t i = lo; i < hi; ++i) {
      std::copy(a + i * n * n, a + (i + 1) * n * n, vecs.begin());
      lapack::lint f = 0;
      lapack::syevd('V', uplo, ln, vecs.data(), w + i * n, work.data(), lwork, iwork.data(), liwork, &f);
      check_arguments(f, "syevd");
      infos[i] = f;
      // LAPACK's columns are eigenvectors; column-major storage reads row-major as V^T.
      T* vi = v + i * n * n;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < n; ++c) vi[r * n + c] = vecs[c * n + r];
    }
  });
  linalg::check_converged(infos, "eigh", "syevd");
}

template <typename T>
void eig_cpu(const T* a, T* w, T* v, int64_t batch, int64_t n) {
  for (int64_t i = 0; i < batch * n * n; ++i)
    if (!std::isfinite(a[i]))
      PMX_THROW(Status::kLinAlg, "eig: matrix ", i / (n * n),
                " of the batch contains infs or NaNs; the array must not contain infs or NaNs");
  const lapack::lint ln = static_cast<lapack::lint>(n);
  T query = 0;
  lapack::lint info = 0;
  lapack::geev(ln, static_cast<T*>(nullptr), nullptr, nullptr, nullptr, &query, -1, &info);
  const lapack::lint lwork = std::max<lapack::lint>(1, static_cast<lapack::lint>(query));
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  std::vector<T> imaginary(static_cast<size_t>(batch * n));
  parallel_for(0, batch, batch_grain(n, n), [&](int64_t lo, int64_t hi) {
    std::vector<T> work(static_cast<size_t>(lwork)), col(static_cast<size_t>(n * n)),
        vecs(static_cast<size_t>(n * n));
    for (int64_t i = lo; i < hi; ++i) {
      // geev needs the matrix itself column-major (the row-major block is its transpose, whose
      // right eigenvectors are not A's), so each block is transposed into `col`.
      const T* ai = a + i * n * n;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < n; ++c) col[c * n + r] = ai[r * n + c];
      lapack::lint f = 0;
      lapack::geev(ln, col.data(), w + i * n, imaginary.data() + i * n, vecs.data(), work.data(),
                   lwork, &f);
      check_arguments(f, "geev");
      infos[i] = f;
      // Column j of VR is eigenvector j; column-major storage reads row-major as V^T.
      T* vi = v + i * n * n;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < n; ++c) vi[r * n + c] = vecs[c * n + r];
    }
  });
  linalg::check_converged(infos, "eig", "geev");
  for (int64_t i = 0; i < batch; ++i)
    linalg::check_real_eigenvalues(w + i * n, imaginary.data() + i * n, n, i, "eig");
}

// gesdd's info for a matrix holding a NaN (its argument 4, the matrix, rejected).
constexpr int kGesddNaN = -4;

template <typename T>
void svd_cpu(const T* a, T* u, T* s, T* vh, int64_t batch, int64_t m, int64_t n) {
  const int64_t k = std::min(m, n);
  // LAPACK sees each row-major block as A^T (n x m) = V S U^T: its U is our V, stored
  // column-major (n x k) = row-major Vh; its V^T is our U^T, stored column-major (k x m) =
  // row-major U. So gesdd writes u and vh in place, with the roles swapped.
  const lapack::lint lm = static_cast<lapack::lint>(n), ln = static_cast<lapack::lint>(m);
  T query = 0;
  lapack::lint info = 0;
  lapack::gesdd(lm, ln, static_cast<T*>(nullptr), nullptr, nullptr, nullptr, &query, -1, nullptr, &info);
  const lapack::lint lwork = std::max<lapack::lint>(1, static_cast<lapack::lint>(query));
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  parallel_for(0, batch, batch_grain(m, n), [&](int64_t lo, int64_t hi) {
    std::vector<T> work(static_cast<size_t>(lwork)), copy(static_cast<size_t>(m * n));
    std::vector<lapack::lint> iwork(static_cast<size_t>(8 * k));
    for (int64_t i = lo; i < hi; ++i) {
      std::copy(a + i * m * n, a + (i + 1) * m * n, copy.begin());
      lapack::lint f = 0;
      lapack::gesdd(lm, ln, copy.data(), s + i * k, vh + i * k * n, u + i * m * k, work.data(), lwork,
                    iwork.data(), &f);
      if (f != kGesddNaN) check_arguments(f, "gesdd");
      infos[i] = f;
    }
  });
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i] == kGesddNaN)
      linalg::throw_linalg_error("svd", static_cast<int64_t>(i), "gesdd", kGesddNaN,
                                 "the matrix contains NaNs");
  linalg::check_converged(infos, "svd", "gesdd");
}

template <typename T>
void qr_cpu(const T* a, T* q, T* r, int64_t batch, int64_t m, int64_t n) {
  const int64_t k = std::min(m, n);
  const lapack::lint lm = static_cast<lapack::lint>(m), ln = static_cast<lapack::lint>(n),
                     lk = static_cast<lapack::lint>(k);
  T query_qr = 0, query_q = 0;
  lapack::lint info = 0;
  lapack::geqrf(lm, ln, static_cast<T*>(nullptr), nullptr, &query_qr, -1, &info);
  lapack::orgqr(lm, lk, static_cast<T*>(nullptr), nullptr, &query_q, -1, &info);
  const lapack::lint lwork = std::max<lapack::lint>(
      1, static_cast<lapack::lint>(std::max(query_qr, query_q)));
  parallel_for(0, batch, batch_grain(m, n), [&](int64_t lo, int64_t hi) {
    // QR needs the matrix itself column-major (not its transpose), so each block is transposed
    // into `col` and the factors out of it.
    std::vector<T> work(static_cast<size_t>(lwork)), col(static_cast<size_t>(m * n)),
        tau(static_cast<size_t>(k));
    for (int64_t i = lo; i < hi; ++i) {
      const T* ai = a + i * m * n;
      for (int64_t row = 0; row < m; ++row)
        for (int64_t c = 0; c < n; ++c) col[c * m + row] = ai[row * n + c];
      lapack::lint f = 0;
      lapack::geqrf(lm, ln, col.data(), tau.data(), work.data(), lwork, &f);
      check_arguments(f, "geqrf");
      T* ri = r + i * k * n;
      for (int64_t row = 0; row < k; ++row)
        for (int64_t c = 0; c < n; ++c) ri[row * n + c] = c >= row ? col[c * m + row] : T(0);
      lapack::orgqr(lm, lk, col.data(), tau.data(), work.data(), lwork, &f);
      check_arguments(f, "orgqr");
      T* qi = q + i * m * k;
      for (int64_t row = 0; row < m; ++row)
        for (int64_t c = 0; c < k; ++c) qi[row * k + c] = col[c * m + row];
    }
  });
}

// The last axis of x sliced to [begin, end).
NDArray slice_last(const NDArray& x, int64_t begin, int64_t end) {
  Shape b(x.shape().size(), 0), e = x.shape();
  b.back() = begin;
  e.back() = end;
  return call("slice", {x}, Attrs{{"begin", ops::shape_attr(b)}, {"end", ops::shape_attr(e)}});
}

// x R^{-T} for an upper-triangular R (k x k), as (R^{-1} x^T)^T.
NDArray solve_right_transposed(const NDArray& x, const NDArray& r) { return mT(solve(r, mT(x))); }

// The QR gradient for m >= n, where R is square (k = n): with M = Q^T Q-bar - (Q^T Q-bar)^T +
// R R-bar^T - (R R-bar^T)^T (antisymmetric) and tril its lower triangle,
// A-bar = Q (R-bar + tril R^{-T}) + (Q-bar - Q Q^T Q-bar) R^{-T}.
NDArray qr_grad_tall(const NDArray& q, const NDArray& r, const NDArray& dq, const NDArray& dr) {
  const NDArray qdq = mm(mT(q), dq);
  const NDArray rdr = mm(r, mT(dr));
  const NDArray antisym = call("add", {call("subtract", {qdq, mT(qdq)}), call("subtract", {rdr, mT(rdr)})});
  // The diagonal of an antisymmetric matrix is zero, so tril_half is its lower triangle.
  const NDArray lower = linalg::tril_half(antisym);
  const NDArray from_r = mm(q, call("add", {dr, solve_right_transposed(lower, r)}));
  const NDArray from_q = solve_right_transposed(call("subtract", {dq, mm(q, qdq)}), r);
  return call("add", {from_r, from_q});
}

}  // namespace

PMX_REGISTER_OP(linalg_cholesky)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      linalg::check_float(dt[0], "cholesky");
      linalg::square_stack(in[0], "cholesky");
      (*out)[0] = in[0];
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "cholesky");
      if (s.batch == 0 || s.rows == 0) return;
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        cholesky_cpu<T>(in[0].data<T>(), out[0].data<T>(), s.batch, s.rows);
      });
    })
    // dL = L Phi(L^{-1} dA L^{-T}) gives, for symmetric dA, S = L^{-T} Phi(L^T L-bar) L^{-1}
    // (Phi: the lower triangle with its diagonal halved), folded onto the lower triangle.
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray& l = g.outputs[0];
      const NDArray lt = mT(l);
      const NDArray phi = linalg::tril_half(mm(lt, g.out_grads[0]));
      const NDArray s = mT(solve(lt, mT(solve(lt, phi))));
      return {linalg::fold_triangle(s, true)};
    })
    .set_grad_uses({}, {0});

PMX_REGISTER_OP(linalg_eigh)
    .set_num_outputs(2)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      linalg::check_float(dt[0], "eigh");
      uplo_lower(attrs);
      const linalg::MatrixStack s = linalg::square_stack(in[0], "eigh");
      Shape w = s.batch_shape;
      w.push_back(s.rows);
      (*out)[0] = w;
      (*out)[1] = in[0];
      (*odt)[0] = (*odt)[1] = dt[0];
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "eigh");
      if (s.batch == 0 || s.rows == 0) return;
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        eigh_cpu<T>(in[0].data<T>(), out[0].data<T>(), out[1].data<T>(), s.batch, s.rows,
                    uplo_lower(*ctx.attrs));
      });
    })
    // dw_i = v_i^T dA v_i and dV = V (F o (V^T dA V)) with F_ij = 1 / (w_j - w_i) off the
    // diagonal, 0 on it: S = V (diag(w-bar) + F o (V^T V-bar)) V^T, folded onto the triangle read.
    // Repeated eigenvalues make F, and the gradient through V, infinite.
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray& w = g.outputs[0];
      const NDArray& v = g.outputs[1];
      const NDArray gap_inverse = call("_linalg_gap_inverse", {w});
      const NDArray from_v = mm(mm(v, call("multiply", {gap_inverse, mm(mT(v), g.out_grads[1])})), mT(v));
      // V diag(w-bar) V^T, with the diagonal matrix as a scaling of V's columns.
      const NDArray from_w = mm(call("multiply", {v, mT(with_unit_axes(g.out_grads[0], 1))}), mT(v));
      return {linalg::fold_triangle(call("add", {from_v, from_w}), uplo_lower(g.attrs))};
    })
    .set_grad_uses({}, {0, 1});

PMX_REGISTER_OP(linalg_eig)
    .set_num_outputs(2)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      linalg::check_float(dt[0], "eig");
      const linalg::MatrixStack s = linalg::square_stack(in[0], "eig");
      Shape w = s.batch_shape;
      w.push_back(s.rows);
      (*out)[0] = w;
      (*out)[1] = in[0];
      (*odt)[0] = (*odt)[1] = dt[0];
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "eig");
      if (s.batch == 0 || s.rows == 0) return;
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        eig_cpu<T>(in[0].data<T>(), out[0].data<T>(), out[1].data<T>(), s.batch, s.rows);
      });
    })
    // For real distinct eigenvalues, A V = V diag(w) and unit-norm columns of V give, with
    // F_ij = 1 / (w_j - w_i) off the diagonal (0 on it) and D = diag(V^T V-bar):
    // A-bar = V^{-T} [diag(w-bar) + F o (V^T V-bar - V^T V D)] V^T. The V^T V D term is the
    // normalisation's (V^T V is not I for a non-symmetric A). Repeated eigenvalues make F, and
    // the gradient through V, infinite.
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray& w = g.outputs[0];
      const NDArray& v = g.outputs[1];
      const NDArray& dv = g.out_grads[1];
      const NDArray vt = mT(v);
      // D as a row (..., 1, n), which scales the columns of V^T V: the column sums of V o V-bar.
      const NDArray d_row = call("sum", {call("multiply", {v, dv})},
                                 Attrs{{"axis", "-2"}, {"keepdims", "True"}});
      const NDArray normalised = call("subtract", {mm(vt, dv), call("multiply", {mm(vt, v), d_row})});
      const NDArray from_v = mm(call("multiply", {call("_linalg_gap_inverse", {w}), normalised}), vt);
      // diag(w-bar) V^T, with the diagonal matrix as a scaling of V^T's rows.
      const NDArray from_w = call("multiply", {with_unit_axes(g.out_grads[0], 1), vt});
      return {solve(vt, call("add", {from_v, from_w}))};
    })
    .set_grad_uses({}, {0, 1});

PMX_REGISTER_OP(linalg_svd)
    .set_num_outputs(3)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      linalg::check_float(dt[0], "svd");
      const linalg::MatrixStack s = linalg::matrix_stack(in[0], "svd");
      const int64_t k = std::min(s.rows, s.cols);
      Shape u = s.batch_shape, sv = s.batch_shape, vh = s.batch_shape;
      u.insert(u.end(), {s.rows, k});
      sv.push_back(k);
      vh.insert(vh.end(), {k, s.cols});
      (*out)[0] = u;
      (*out)[1] = sv;
      (*out)[2] = vh;
      (*odt)[0] = (*odt)[1] = (*odt)[2] = dt[0];
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const linalg::MatrixStack s = linalg::matrix_stack(in[0].shape, "svd");
      if (s.batch == 0 || s.rows == 0 || s.cols == 0) return;
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        svd_cpu<T>(in[0].data<T>(), out[0].data<T>(), out[1].data<T>(), out[2].data<T>(), s.batch,
                   s.rows, s.cols);
      });
    })
    // With V = Vh^T, F_ij = 1 / (s_j^2 - s_i^2) off the diagonal and skew(X) = X - X^T:
    // A-bar = U [(F o skew(U^T U-bar)) S + S (F o skew(V^T V-bar)) + diag(s-bar)] Vh
    //         + (I - U U^T) U-bar S^{-1} Vh   (only when m > k)
    //         + U S^{-1} V-bar^T (I - V V^T)  (only when n > k).
    // Repeated singular values make F infinite, zero ones make S^{-1} infinite.
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray& u = g.outputs[0];
      const NDArray& s = g.outputs[1];
      const NDArray& vh = g.outputs[2];
      const NDArray& du = g.out_grads[0];
      const NDArray& dvh = g.out_grads[2];
      const int64_t m = u.shape()[u.shape().size() - 2], k = s.shape().back();
      const int64_t n = vh.shape().back();
      const NDArray f = call("_linalg_gap_inverse", {call("square", {s})});
      const NDArray utdu = mm(mT(u), du);
      const NDArray vtdv = mm(vh, mT(dvh));
      const NDArray j = call("multiply", {f, call("subtract", {utdu, mT(utdu)})});
      const NDArray kk = call("multiply", {f, call("subtract", {vtdv, mT(vtdv)})});
      const NDArray s_row = with_unit_axes(s, 1);  // scales rows: S X
      const NDArray s_col = mT(s_row);              // scales columns: X S
      const NDArray inner = call("add", {call("multiply", {j, s_col}), call("multiply", {s_row, kk})});
      // U diag(s-bar) Vh, with the diagonal matrix as a scaling of U's columns.
      const NDArray from_s = mm(call("multiply", {u, mT(with_unit_axes(g.out_grads[1], 1))}), vh);
      NDArray grad = call("add", {mm(mm(u, inner), vh), from_s});
      const NDArray inv_s_col = mT(with_unit_axes(call("reciprocal", {s}), 1));
      if (m > k) {
        const NDArray du_perp = call("subtract", {du, mm(u, utdu)});
        grad = call("add", {grad, mm(call("multiply", {du_perp, inv_s_col}), vh)});
      }
      if (n > k) {
        const NDArray dvh_perp = call("subtract", {dvh, mm(mm(dvh, mT(vh)), vh)});
        grad = call("add", {grad, mm(call("multiply", {u, inv_s_col}), dvh_perp)});
      }
      return {grad};
    })
    .set_grad_uses({}, {0, 1, 2});

PMX_REGISTER_OP(linalg_qr)
    .set_num_outputs(2)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      linalg::check_float(dt[0], "qr");
      const linalg::MatrixStack s = linalg::matrix_stack(in[0], "qr");
      const int64_t k = std::min(s.rows, s.cols);
      Shape q = s.batch_shape, r = s.batch_shape;
      q.insert(q.end(), {s.rows, k});
      r.insert(r.end(), {k, s.cols});
      (*out)[0] = q;
      (*out)[1] = r;
      (*odt)[0] = (*odt)[1] = dt[0];
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const linalg::MatrixStack s = linalg::matrix_stack(in[0].shape, "qr");
      if (s.batch == 0 || s.rows == 0 || s.cols == 0) return;
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        qr_cpu<T>(in[0].data<T>(), out[0].data<T>(), out[1].data<T>(), s.batch, s.rows, s.cols);
      });
    })
    // For m >= n see qr_grad_tall. For m < n, split A = [X | Y] and R = [U | V] after m columns:
    // X = Q U is a square QR, Y = Q V, so Y-bar = Q V-bar and X gets qr_grad_tall with
    // Q-bar + Y V-bar^T. R must be nonsingular (A of full rank).
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray& q = g.outputs[0];
      const NDArray& r = g.outputs[1];
      const NDArray& dq = g.out_grads[0];
      const NDArray& dr = g.out_grads[1];
      const int64_t m = q.shape()[q.shape().size() - 2], n = r.shape().back();
      if (m >= n) return {qr_grad_tall(q, r, dq, dr)};
      const NDArray y = slice_last(g.inputs[0], m, n);
      const NDArray dv = slice_last(dr, m, n);
      const NDArray dx = qr_grad_tall(q, slice_last(r, 0, m), call("add", {dq, mm(y, mT(dv))}),
                                      slice_last(dr, 0, m));
      return {call("concatenate", {dx, mm(q, dv)}, Attrs{{"axis", "-1"}})};
    });

}  // namespace pymx
