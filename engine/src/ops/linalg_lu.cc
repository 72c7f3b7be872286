// np.linalg operators built on the LU factorisation (LAPACK getrf), batched over leading axes.
//
//   op              inputs  attrs  outputs
//   linalg_inv      a       -      inv (..., n, n)
//   linalg_det      a       -      det (...)
//   linalg_slogdet  a       -      sign (...), logabsdet (...)
//   linalg_solve    a, b    -      x (..., n, k) with a x = b; a (..., n, n) and b (..., n, k)
//                                  share their batch shape (pymx.numpy.linalg broadcasts and
//                                  handles vector right-hand sides)
//
// float32 and float64; the matrices of a batch are spread over the intra-op threads
// (parallel_for). inv and solve raise LinAlgError on a singular matrix; det gives 0 and slogdet
// (0, -inf) for one, as NumPy does. A 0 x 0 matrix has determinant 1.
#include <algorithm>
#include <cmath>
#include <limits>
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
using ops::call;

// Matrices per parallel_for chunk: enough that a chunk does ~32k multiply-adds.
int64_t batch_grain(int64_t n) { return std::max<int64_t>(1, 32768 / (n * n * n + 1)); }

void infer_square_same(const char* op, const std::vector<Shape>& in, const std::vector<DType>& dt,
                       std::vector<Shape>* out, std::vector<DType>* odt) {
  linalg::check_float(dt[0], op);
  linalg::square_stack(in[0], op);
  (*out)[0] = in[0];
  (*odt)[0] = dt[0];
}

// Fails loudly on getrf/getri/getrs's info < 0: an argument pymx passed was wrong.
void check_arguments(int info, const char* routine) {
  PMX_ASSERT(info >= 0, routine, " rejected argument ", -info);
}

template <typename T>
void inv_cpu(const T* a, T* out, int64_t batch, int64_t n) {
  const lapack::lint ln = static_cast<lapack::lint>(n);
  // getri's optimal workspace is the same for every matrix of the batch.
  T query = 0;
  lapack::lint info = 0;
  lapack::getri(ln, static_cast<T*>(nullptr), nullptr, &query, -1, &info);
  const lapack::lint lwork = std::max<lapack::lint>(1, static_cast<lapack::lint>(query));
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  parallel_for(0, batch, batch_grain(n), [&](int64_t lo, int64_t hi) {
    std::vector<lapack::lint> ipiv(static_cast<size_t>(n));
    std::vector<T> work(static_cast<size_t>(lwork));
    for (int64_t i = lo; i < hi; ++i) {
      // The row-major block is A^T to LAPACK; inv(A^T) = inv(A)^T reads back row-major as inv(A).
      T* m = out + i * n * n;
      std::copy(a + i * n * n, a + (i + 1) * n * n, m);
      lapack::lint f = 0;
      lapack::getrf(ln, m, ipiv.data(), &f);
      check_arguments(f, "getrf");
      if (f > 0) {
        infos[i] = f;
        continue;
      }
      lapack::getri(ln, m, ipiv.data(), work.data(), lwork, &f);
      check_arguments(f, "getri");
      infos[i] = f;
    }
  });
  linalg::check_singular(infos, "inv", "getrf");
}

// Calls visit(i, lu, ipiv, info) with getrf's factors of each matrix i of the batch (of the
// transposed view LAPACK reads: det(A^T) = det(A), so the determinants need no transpose).
template <typename T, typename Visit>
void for_each_lu(const T* a, int64_t batch, int64_t n, const Visit& visit) {
  const lapack::lint ln = static_cast<lapack::lint>(n);
  parallel_for(0, batch, batch_grain(n), [&](int64_t lo, int64_t hi) {
    std::vector<T> lu(static_cast<size_t>(n * n));
    std::vector<lapack::lint> ipiv(static_cast<size_t>(n));
    for (int64_t i = lo; i < hi; ++i) {
      std::copy(a + i * n * n, a + (i + 1) * n * n, lu.begin());
      lapack::lint f = 0;
      if (n > 0) lapack::getrf(ln, lu.data(), ipiv.data(), &f);
      check_arguments(f, "getrf");
      visit(i, lu.data(), ipiv.data(), f);
    }
  });
}

// sign and log|det| of each matrix from its LU factors; a singular one gives (0, -inf).
template <typename T>
void slogdet_cpu(const T* a, T* sign, T* logabs, int64_t batch, int64_t n) {
  for_each_lu(a, batch, n, [&](int64_t i, const T* lu, const lapack::lint* ipiv,
                               lapack::lint info) {
    T s = 1, l = 0;
    for (int64_t j = 0; j < n; ++j) {
      const T u = lu[j * n + j];
      if (ipiv[j] != j + 1) s = -s;
      if (u < 0) s = -s;
      l += std::log(std::abs(u));
    }
    if (info > 0) {
      s = 0;
      l = -std::numeric_limits<T>::infinity();
    }
    sign[i] = s;
    logabs[i] = l;
  });
}

// det as the product of U's diagonal (NumPy's way: no overflow guard, exact for small integers).
template <typename T>
void det_cpu(const T* a, T* det, int64_t batch, int64_t n) {
  for_each_lu(a, batch, n, [&](int64_t i, const T* lu, const lapack::lint* ipiv,
                               lapack::lint) {
    T d = 1;
    for (int64_t j = 0; j < n; ++j) d *= ipiv[j] != j + 1 ? -lu[j * n + j] : lu[j * n + j];
    det[i] = d;
  });
}

template <typename T>
void solve_cpu(const T* a, const T* b, T* x, int64_t batch, int64_t n, int64_t k) {
  const lapack::lint ln = static_cast<lapack::lint>(n), lk = static_cast<lapack::lint>(k);
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  parallel_for(0, batch, batch_grain(n), [&](int64_t lo, int64_t hi) {
    std::vector<T> lu(static_cast<size_t>(n * n));
    std::vector<T> rhs(static_cast<size_t>(n * k));
    std::vector<lapack::lint> ipiv(static_cast<size_t>(n));
    for (int64_t i = lo; i < hi; ++i) {
      // getrf factors A^T (the row-major block); getrs with 'T' then solves A X = B, with B
      // and X column-major n x k (transposed in and out of the row-major blocks).
      std::copy(a + i * n * n, a + (i + 1) * n * n, lu.begin());
      lapack::lint f = 0;
      lapack::getrf(ln, lu.data(), ipiv.data(), &f);
      check_arguments(f, "getrf");
      if (f > 0) {
        infos[i] = f;
        continue;
      }
      const T* bi = b + i * n * k;
      T* xi = x + i * n * k;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c) rhs[c * n + r] = bi[r * k + c];
      lapack::getrs('T', ln, lk, lu.data(), ipiv.data(), rhs.data(), &f);
      check_arguments(f, "getrs");
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c) xi[r * k + c] = rhs[c * n + r];
    }
  });
  linalg::check_singular(infos, "solve", "getrf");
}

// inv(A)^T, the factor every determinant gradient shares.
NDArray inv_transposed(const NDArray& a) { return mT(call("linalg_inv", {a})); }

}  // namespace

PMX_REGISTER_OP(linalg_inv)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      infer_square_same("inv", in, dt, out, odt);
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "inv");
      if (s.batch == 0 || s.rows == 0) return;
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        inv_cpu<T>(in[0].data<T>(), out[0].data<T>(), s.batch, s.rows);
      });
    })
    // d inv(A) = -inv(A) dA inv(A), so A-bar = -inv(A)^T G inv(A)^T.
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray yt = mT(g.outputs[0]);
      return {call("negative", {mm(mm(yt, g.out_grads[0]), yt)})};
    })
    .set_grad_uses({}, {0});

PMX_REGISTER_OP(linalg_det)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      linalg::check_float(dt[0], "det");
      (*out)[0] = linalg::square_stack(in[0], "det").batch_shape;
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "det");
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        det_cpu<T>(in[0].data<T>(), out[0].data<T>(), s.batch, s.rows);
      });
    })
    // d det(A) = det(A) tr(inv(A) dA): A-bar = g det(A) inv(A)^T (raises on a singular A, whose
    // gradient this formula cannot give).
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray scale = call("multiply", {g.out_grads[0], g.outputs[0]});
      return {call("multiply", {linalg::with_unit_axes(scale, 2), inv_transposed(g.inputs[0])})};
    });

PMX_REGISTER_OP(linalg_slogdet)
    .set_num_outputs(2)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      linalg::check_float(dt[0], "slogdet");
      const Shape batch = linalg::square_stack(in[0], "slogdet").batch_shape;
      (*out)[0] = (*out)[1] = batch;
      (*odt)[0] = (*odt)[1] = dt[0];
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "slogdet");
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        slogdet_cpu<T>(in[0].data<T>(), out[0].data<T>(), out[1].data<T>(), s.batch, s.rows);
      });
    })
    // sign is piecewise constant; d log|det(A)| = tr(inv(A) dA).
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      return {call("multiply", {linalg::with_unit_axes(g.out_grads[1], 2), inv_transposed(g.inputs[0])})};
    })
    .set_grad_uses({0}, {});

PMX_REGISTER_OP(linalg_solve)
    .set_num_inputs(2)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      linalg::check_float(dt[0], "solve");
      PMX_CHECK(dt[0] == dt[1], "solve: a and b must have the same dtype, got ", dtype_name(dt[0]),
                " and ", dtype_name(dt[1]));
      const linalg::MatrixStack a = linalg::square_stack(in[0], "solve");
      const linalg::MatrixStack b = linalg::matrix_stack(in[1], "solve");
      PMX_CHECK(a.batch_shape == b.batch_shape && b.rows == a.rows, "solve: b of shape ",
                shape_str(in[1]), " does not match a of shape ", shape_str(in[0]),
                " (expected b of shape (..., ", a.rows, ", K) with the batch shape of a)");
      (*out)[0] = in[1];
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const linalg::MatrixStack a = linalg::square_stack(in[0].shape, "solve");
      const int64_t k = in[1].shape.back();
      if (a.batch == 0 || a.rows == 0 || k == 0) return;
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        solve_cpu<T>(in[0].data<T>(), in[1].data<T>(), out[0].data<T>(), a.batch, a.rows, k);
      });
    })
    // X = inv(A) B: B-bar = inv(A)^T G, A-bar = -B-bar X^T.
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray gb = linalg::solve(mT(g.inputs[0]), g.out_grads[0]);
      return {call("negative", {mm(gb, mT(g.outputs[0]))}), gb};
    })
    .set_grad_uses({0}, {0});

}  // namespace pymx
