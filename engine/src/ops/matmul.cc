// Matrix products.
//
//   op      inputs  attrs                     output
//   matmul  a, b    transpose_a (false),      a (..., n, k) @ b (..., k, m) -> (..., n, m); batch
//                   transpose_b (false)       axes broadcast, dtypes promoted. transpose_a reads
//                                             a as (..., k, n) with its last two axes swapped,
//                                             transpose_b reads b as (..., m, k): in place, as BLAS
//                                             reads a transposed operand (npx.batch_dot's flags,
//                                             and matmul's own gradients, use them instead of
//                                             copying a swapaxes). Both inputs need ndim >= 2:
//                                             pymx.numpy promotes 1-d operands (and builds dot /
//                                             tensordot / inner) around this op.
// The float dtypes go through nn::gemm (OpenBLAS or pymx's few-row kernels; float16 and bfloat16
// through float); other dtypes use a plain loop in the compute type.
//
// Note [Batched products]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A batch of products (einsum's bij,bjk->bik, attention's scores, npx.batch_dot, and matmul's own
// gradients) with at least as many matrices as intra-op threads is split over the batch: each
// thread runs whole products, each on one thread (nn::gemm's own split, Note [Parallel GEMM],
// runs serially inside a parallel_for chunk, and OpenBLAS never starts threads of its own).
// Splitting every product over the threads instead cost a synchronisation per matrix and
// products too small to split well: 64 x (128 x 128 . 128 x 128) took 2.6 ms against 1.5 ms for
// PyTorch. Every matrix is still computed by the same code whoever runs it, so results do not
// depend on the thread count.
#include <algorithm>

#include "ops/elemwise.h"
#include "ops/nn_common.h"
#include "parallel.h"

namespace pymx {
namespace {

using ops::call;

struct MatmulDims {
  Shape batch;  // broadcast batch shape
  int64_t n, k, m;
  bool trans_a, trans_b;
};

MatmulDims matmul_dims(const Attrs& attrs, const Shape& a, const Shape& b) {
  PMX_CHECK(a.size() >= 2 && b.size() >= 2, "matmul: operands need at least 2 dimensions, got ",
            shape_str(a), " and ", shape_str(b));
  MatmulDims d;
  d.trans_a = attrs.get_bool("transpose_a", false);
  d.trans_b = attrs.get_bool("transpose_b", false);
  const int64_t a_rows = a[a.size() - 2], a_cols = a[a.size() - 1];
  const int64_t b_rows = b[b.size() - 2], b_cols = b[b.size() - 1];
  d.n = d.trans_a ? a_cols : a_rows;
  d.k = d.trans_a ? a_rows : a_cols;
  d.m = d.trans_b ? b_rows : b_cols;
  const int64_t b_k = d.trans_b ? b_cols : b_rows;
  PMX_CHECK(b_k == d.k, "matmul: input operand 1 has a mismatch in its core dimension 0 "
            "(size ", b_k, " is different from ", d.k, "); shapes ", shape_str(a), " and ",
            shape_str(b), " (transpose_a=", d.trans_a ? "True" : "False", ", transpose_b=",
            d.trans_b ? "True" : "False", ")");
  const Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  for (size_t i = 1; i <= std::min(batch_a.size(), batch_b.size()); ++i) {
    const int64_t x = batch_a[batch_a.size() - i], y = batch_b[batch_b.size() - i];
    PMX_CHECK(x == y || x == 1 || y == 1, "matmul: the batch axes of shapes ", shape_str(a),
              " and ", shape_str(b), " do not broadcast together");
  }
  d.batch = ops::broadcast_shapes(batch_a, batch_b, "matmul");
  return d;
}

// The matrix index of operand `s` (batch part) for each batch index of the broadcast shape.
std::vector<int64_t> batch_offsets(const Shape& s, const Shape& batch) {
  const Shape own(s.begin(), s.end() - 2);
  const std::vector<int64_t> st = ops::contiguous_strides(own);
  std::vector<int64_t> strides(batch.size(), 0);
  const size_t lead = batch.size() - own.size();
  for (size_t d = 0; d < own.size(); ++d) strides[lead + d] = own[d] == 1 ? 0 : st[d];
  std::vector<int64_t> offsets(static_cast<size_t>(shape_size(batch)));
  std::vector<int64_t> index(batch.size(), 0);
  int64_t off = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    offsets[i] = off;
    for (int d = static_cast<int>(batch.size()) - 1; d >= 0; --d) {
      off += strides[d];
      if (++index[d] < batch[d]) break;
      off -= strides[d] * batch[d];
      index[d] = 0;
    }
  }
  return offsets;
}

// c (n x m) = op(a) . op(b), op(a) n x k and op(b) k x m, op transposing when the flag is set
// (a stored k x n, b stored m x k): the float dtypes through nn::gemm (BLAS), integers here.
template <typename T>
void gemm(const MatmulDims& d, const T* a, const T* b, T* c) {
  using C = ops::compute_t<T>;
  const int64_t n = d.n, k = d.k, m = d.m;
  if constexpr (std::is_floating_point_v<T> || is_16bit_float_v<T>) {
    nn::gemm(d.trans_a, d.trans_b, n, m, k, C(1), a, d.trans_a ? n : k, b, d.trans_b ? k : m,
             C(0), c, m);
  } else {
    // Element strides of op(a)'s rows and columns and op(b)'s, in the stored layouts.
    const int64_t a_row = d.trans_a ? 1 : k, a_col = d.trans_a ? n : 1;
    const int64_t b_row = d.trans_b ? 1 : m, b_col = d.trans_b ? k : 1;
    std::vector<C> row(static_cast<size_t>(m));
    for (int64_t i = 0; i < n; ++i) {
      std::fill(row.begin(), row.end(), C(0));
      for (int64_t p = 0; p < k; ++p) {
        const C av = static_cast<C>(a[i * a_row + p * a_col]);
        const T* brow = b + p * b_row;
        for (int64_t j = 0; j < m; ++j)
          row[j] = static_cast<C>(row[j] + av * static_cast<C>(brow[j * b_col]));
      }
      for (int64_t j = 0; j < m; ++j) c[i * m + j] = static_cast<T>(row[j]);
    }
  }
}

NDArray product(const NDArray& a, const NDArray& b, bool trans_a, bool trans_b) {
  return call("matmul", {a, b}, Attrs{{"transpose_a", trans_a ? "True" : "False"},
                                      {"transpose_b", trans_b ? "True" : "False"}});
}

NDArray fit(const NDArray& grad, const NDArray& x) {
  if (!is_float(x.dtype())) return NDArray();
  NDArray g = ops::sum_to_shape(grad, x.shape());
  return g.dtype() == x.dtype() ? g : call("cast", {g}, Attrs{{"dtype", dtype_name(x.dtype())}});
}

}  // namespace

PMX_REGISTER_OP(matmul)
    .set_num_inputs(2)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      const MatmulDims d = matmul_dims(attrs, in[0], in[1]);
      Shape s = d.batch;
      s.push_back(d.n);
      s.push_back(d.m);
      (*out)[0] = s;
      (*odt)[0] = ops::promote(dt[0], dt[1]);
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& inputs, const std::vector<TBlob>& out) {
      const std::vector<TBlob> in = ops::inputs_as(ctx, inputs, out[0].dtype);
      const MatmulDims d = matmul_dims(*ctx.attrs, in[0].shape, in[1].shape);
      const std::vector<int64_t> oa = batch_offsets(in[0].shape, d.batch);
      const std::vector<int64_t> ob = batch_offsets(in[1].shape, d.batch);
      PMX_TYPE_SWITCH(out[0].dtype, T, {
        const T* a = in[0].data<T>();
        const T* b = in[1].data<T>();
        T* c = out[0].data<T>();
        const auto products = [&](int64_t lo, int64_t hi) {  // the batch's matrices [lo, hi)
          for (int64_t i = lo; i < hi; ++i) {
            T* ci = c + i * d.n * d.m;
            if (d.k == 0) {
              std::fill(ci, ci + d.n * d.m, static_cast<T>(0));
            } else if (d.n * d.m > 0) {
              gemm<T>(d, a + oa[i] * d.n * d.k, b + ob[i] * d.k * d.m, ci);
            }
          }
        };
        const int64_t batch = static_cast<int64_t>(oa.size());
        if (batch >= parallel_max_threads()) {  // Note [Batched products]
          parallel_for(0, batch, 1, products);
        } else {
          products(0, batch);
        }
      });
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray& a = g.inputs[0];
      const NDArray& b = g.inputs[1];
      const NDArray& dy = g.out_grads[0];
      // c = op(a) . op(b); each gradient is one product reading its operands in place.
      const bool ta = g.attrs.get_bool("transpose_a", false);
      const bool tb = g.attrs.get_bool("transpose_b", false);
      const NDArray da = ta ? product(b, dy, tb, true) : product(dy, b, false, !tb);
      const NDArray db = tb ? product(dy, a, true, ta) : product(a, dy, !ta, false);
      return {fit(da, a), fit(db, b)};
    });

}  // namespace pymx
