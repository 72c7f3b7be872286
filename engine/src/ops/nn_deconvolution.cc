// Transposed convolution ("deconvolution"), 1-D/2-D/3-D, channel-first, by GEMM + col2im.
//
// | op                      | inputs                  | outputs                             | attrs |
// |-------------------------|-------------------------|-------------------------------------|-------|
// | deconvolution           | data, weight, [bias]    | out                                 | kernel stride dilate pad adj target_shape num_filter num_group no_bias layout |
// | deconvolution_backward  | out_grad, data, weight  | [data_grad], weight_grad, [bias_grad] | same as forward, need_data_grad |
//
// data is (N, C_in, in...), weight (C_in, num_filter/num_group, kernel...) as in MXNet, bias
// (num_filter,); out is (N, num_filter, out...) with out = (in-1)*stride - 2*pad +
// dilate*(kernel-1) + 1 + adj per spatial dim (adj < stride), or target_shape when given (then
// pad and adj are derived from it). layout: NCW / NCHW / NCDHW only. workspace / cudnn_* attributes
// of MXNet are not parameters here. The maths is in Note [Transposed convolution as the adjoint
// of a convolution] (conv_geometry.h); the backward op shares one im2col of out_grad between the
// data and weight gradients. need_data_grad=False (set by the gradient function when the data
// needs no gradient, nn_common.h) drops the data_grad output and its GEMM.
#include <algorithm>

#include "ops/conv_geometry.h"
#include "ops/through_float.h"
#include "parallel.h"

namespace pymx {
namespace {

using nn::ConvGeometry;

void deconv_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const bool no_bias = attrs.get_bool("no_bias", false);
  const size_t expected = no_bias ? 2 : 3;
  PMX_CHECK(in.size() == expected, "deconvolution: expected ", expected, " inputs (data, weight",
            no_bias ? "" : ", bias", ") with no_bias=", no_bias, ", got ", in.size());
  const ConvGeometry g = nn::deconv_geometry(attrs, in[0], in[1]);
  const Shape w = nn::deconv_weight_shape(g);
  PMX_CHECK(in[1] == w, "deconvolution: weight shape ", shape_str(in[1]), " does not match data ",
            shape_str(in[0]), " with num_filter ", g.in_c, ", num_group ", g.groups,
            " (expected ", shape_str(w), ")");
  if (!no_bias) {
    PMX_CHECK(in[2] == Shape({g.in_c}), "deconvolution: bias shape ", shape_str(in[2]),
              " does not match num_filter=", g.in_c);
  }
  nn::check_float(dt[0], "deconvolution", "data");
  for (size_t i = 1; i < dt.size(); ++i) {
    PMX_CHECK(dt[i] == dt[0], "deconvolution: input ", i, " has dtype ", dtype_name(dt[i]),
              " but data has ", dtype_name(dt[0]));
  }
  *out = {nn::deconv_out_shape(g)};
  *out_dt = {dt[0]};
}

// Elements of one group's column matrix, rounded up to 64 bytes so that parts stay aligned.
template <typename T>
int64_t col_elements(const ConvGeometry& g) {
  const int64_t bytes = g.col_rows() * g.out_sp * static_cast<int64_t>(sizeof(T));
  return ((bytes + 63) & ~int64_t(63)) / static_cast<int64_t>(sizeof(T));
}

template <typename T>
void deconv_forward_typed(const OpContext& ctx, const ConvGeometry& g,
                          const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t K = g.col_rows(), col_size = col_elements<T>(g);
  const int64_t parts = parallel_parts(g.batch, 1);
  T* cols = static_cast<T*>(ctx.workspace(parts * col_size * sizeof(T)));
  const T* x = in[0].data<T>();
  const T* w = in[1].data<T>();
  const T* b = in.size() == 3 ? in[2].data<T>() : nullptr;
  T* y = out[0].data<T>();
  // Images are independent: each part of the batch has its own column buffer.
  parallel_for_parts(g.batch, 1, [&](int64_t part, int64_t first, int64_t last) {
    T* col = cols + part * col_size;
    std::fill(y + first * g.in_c * g.in_sp, y + last * g.in_c * g.in_sp, T(0));
    for (int64_t n = first; n < last; ++n) {
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const T* xg = x + (n * g.out_c + grp * g.out_cg()) * g.out_sp;
        T* yg = y + (n * g.in_c + grp * g.in_cg()) * g.in_sp;
        // col (K x in_sp of x) = W_g^T (K x C_in/g) . x_g (C_in/g x in_sp of x)
        nn::gemm(true, false, K, g.out_sp, g.out_cg(), T(1), w + grp * g.out_cg() * K, K, xg,
                 g.out_sp, T(0), col, g.out_sp);
        nn::col2im_add(g, g.in_cg(), col, yg);
        if (!b) continue;
        for (int64_t c = 0; c < g.in_cg(); ++c) {
          T* yc = yg + c * g.in_sp;
          const T bc = b[grp * g.in_cg() + c];
          for (int64_t i = 0; i < g.in_sp; ++i) yc[i] += bc;
        }
      }
    }
  });
}

void deconv_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const ConvGeometry g = nn::deconv_geometry(*ctx.attrs, in[0].shape, in[1].shape);
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, { deconv_forward_typed<T>(ctx, g, in, out); });
}

void deconv_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                           const std::vector<DType>& dt, std::vector<Shape>* out,
                           std::vector<DType>* out_dt) {
  PMX_CHECK(in.size() == 3, "deconvolution_backward: expected (out_grad, data, weight), got ",
            in.size(), " inputs");
  const ConvGeometry g = nn::deconv_geometry(attrs, in[1], in[2]);
  PMX_CHECK(in[0] == nn::deconv_out_shape(g), "deconvolution_backward: out_grad shape ",
            shape_str(in[0]), " does not match the output shape ",
            shape_str(nn::deconv_out_shape(g)));
  nn::check_float(dt[1], "deconvolution_backward", "data");
  for (size_t i : {size_t(0), size_t(2)}) {
    PMX_CHECK(dt[i] == dt[1], "deconvolution_backward: input ", i, " has dtype ",
              dtype_name(dt[i]), " but data has ", dtype_name(dt[1]));
  }
  out->clear();
  if (nn::need_data_grad(attrs)) out->push_back(in[1]);
  out->push_back(in[2]);
  if (!attrs.get_bool("no_bias", false)) out->push_back({g.in_c});
  *out_dt = std::vector<DType>(out->size(), dt[1]);
}

template <typename T>
void deconv_backward_typed(const OpContext& ctx, const ConvGeometry& g,
                           const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t K = g.col_rows(), col_size = col_elements<T>(g);
  const int64_t w_size = in[2].size(), w_pad = (w_size + 63) & ~int64_t(63);
  const int64_t parts = parallel_parts(g.batch, 1);
  T* cols = static_cast<T*>(
      ctx.workspace((parts * col_size + std::max<int64_t>(parts - 1, 0) * w_pad) * sizeof(T)));
  T* dw_parts = cols + parts * col_size;
  const T* dy = in[0].data<T>();
  const T* x = in[1].data<T>();
  const T* w = in[2].data<T>();
  const bool want_dx = nn::need_data_grad(*ctx.attrs);
  T* dx = want_dx ? out[0].data<T>() : nullptr;
  T* dw = out[want_dx ? 1 : 0].data<T>();
  // data_grad rows are disjoint per image; weight_grad is summed per part into its own buffer and
  // the parts are added in order, so the result does not depend on the thread interleaving.
  parallel_for_parts(g.batch, 1, [&](int64_t part, int64_t first, int64_t last) {
    T* col = cols + part * col_size;
    T* dw_part = part == 0 ? dw : dw_parts + (part - 1) * w_pad;
    for (int64_t n = first; n < last; ++n) {
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        nn::im2col(g, g.in_cg(), dy + (n * g.in_c + grp * g.in_cg()) * g.in_sp, col);
        const T* wg = w + grp * g.out_cg() * K;
        const int64_t x_off = (n * g.out_c + grp * g.out_cg()) * g.out_sp;
        // data_grad_g (C_in/g x in_sp of x) = W_g (C_in/g x K) . col (K x in_sp of x)
        if (dx) {
          nn::gemm(false, false, g.out_cg(), g.out_sp, K, T(1), wg, K, col, g.out_sp, T(0),
                   dx + x_off, g.out_sp);
        }
        // weight_grad_g (C_in/g x K) (+)= x_g (C_in/g x in_sp of x) . col^T
        nn::gemm(false, true, g.out_cg(), K, g.out_sp, T(1), x + x_off, g.out_sp, col, g.out_sp,
                 T(n == first ? 0 : 1), dw_part + grp * g.out_cg() * K, K);
      }
    }
  });
  // The parts are added in order; each element by one thread, so the result does not depend on
  // how the elements are split across the threads.
  parallel_for(0, w_size, 1 << 14, [&](int64_t lo, int64_t hi) {
    for (int64_t part = 1; part < parts; ++part) {
      const T* src = dw_parts + (part - 1) * w_pad;
      for (int64_t i = lo; i < hi; ++i) dw[i] += src[i];
    }
  });
  if (g.batch == 0) std::fill(dw, dw + w_size, T(0));
  if (out.size() == (want_dx ? 3u : 2u)) {
    T* db = out.back().data<T>();
    for (int64_t c = 0; c < g.in_c; ++c) {
      T sum = 0;
      for (int64_t n = 0; n < g.batch; ++n)
        sum += nn::lane_sum<T>(dy + (n * g.in_c + c) * g.in_sp, g.in_sp);
      db[c] = static_cast<T>(sum);
    }
  }
}

void deconv_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const ConvGeometry g = nn::deconv_geometry(*ctx.attrs, in[1].shape, in[2].shape);
  PMX_FLOAT_WIDE_SWITCH(in[1].dtype, T, { deconv_backward_typed<T>(ctx, g, in, out); });
}

std::vector<NDArray> deconv_gradient(const GradContext& ctx) {
  return nn::backward_skipping_data_grad("deconvolution_backward", ctx,
                                         {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1]});
}

PMX_REGISTER_OP(deconvolution)
    .set_num_inputs(-1)
    .set_infer(deconv_infer)
    .set_cpu(nn::through_float(deconv_forward))
    .set_gradient(deconv_gradient);

PMX_REGISTER_OP(deconvolution_backward)
    .set_num_inputs(3)
    .set_num_outputs([](const Attrs& a) {
      return 1 + int(nn::need_data_grad(a)) + int(!a.get_bool("no_bias", false));
    })
    .set_infer(deconv_backward_infer)
    .set_cpu(nn::through_float(deconv_backward));

}  // namespace
}  // namespace pymx
