// Two small operators that the np.linalg gradients (linalg_grad.h) are built from; not exposed in
// pymx.numpy.
//
//   op                   inputs  attrs                 output
//   _linalg_tril_half    x       lower: True (default)  the lower (or upper) triangle of each
//                                                       matrix (..., n, n), diagonal halved,
//                                                       the rest zero
//   _linalg_gap_inverse  w       -                      f (..., n, n), f_ij = 1 / (w_j - w_i)
//                                                       for i != j and 0 on the diagonal
//
// float32 and float64. _linalg_tril_half is linear and self-adjoint, so its gradient is itself;
// _linalg_gap_inverse is not differentiable (eigh and svd have first-order gradients only).
#include <algorithm>
#include <vector>

#include "ops/dispatch.h"
#include "ops/linalg_common.h"
#include "ops/linalg_grad.h"
#include "parallel.h"
#include "pymx/op.h"

namespace pymx {
namespace {

template <typename T>
void tril_half_cpu(const T* x, T* y, int64_t batch, int64_t n, bool lower) {
  parallel_for(0, batch, std::max<int64_t>(1, 4096 / (n * n + 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      const T* xb = x + b * n * n;
      T* yb = y + b * n * n;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const bool kept = lower ? j < i : j > i;
          yb[i * n + j] = i == j ? xb[i * n + j] / T(2) : kept ? xb[i * n + j] : T(0);
        }
    }
  });
}

template <typename T>
void gap_inverse_cpu(const T* w, T* f, int64_t batch, int64_t n) {
  parallel_for(0, batch, std::max<int64_t>(1, 4096 / (n * n + 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      const T* wb = w + b * n;
      T* fb = f + b * n * n;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) fb[i * n + j] = i == j ? T(0) : T(1) / (wb[j] - wb[i]);
    }
  });
}

}  // namespace

PMX_REGISTER_OP(_linalg_tril_half)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      linalg::check_float(dt[0], "_linalg_tril_half");
      linalg::square_stack(in[0], "_linalg_tril_half");
      (*out)[0] = in[0];
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "_linalg_tril_half");
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        tril_half_cpu<T>(in[0].data<T>(), out[0].data<T>(), s.batch, s.rows,
                         ctx.attrs->get_bool("lower", true));
      });
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      return {linalg::tril_half(g.out_grads[0], g.attrs.get_bool("lower", true))};
    })
    .set_grad_uses({}, {});

PMX_REGISTER_OP(_linalg_gap_inverse)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      linalg::check_float(dt[0], "_linalg_gap_inverse");
      PMX_CHECK(!in[0].empty(), "_linalg_gap_inverse: expected an array of at least 1 dimension, got shape ()");
      Shape s = in[0];
      s.push_back(in[0].back());
      (*out)[0] = s;
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const int64_t n = in[0].shape.back();
      const int64_t batch = n == 0 ? 0 : in[0].size() / n;
      PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, {
        gap_inverse_cpu<T>(in[0].data<T>(), out[0].data<T>(), batch, n);
      });
    });

}  // namespace pymx
