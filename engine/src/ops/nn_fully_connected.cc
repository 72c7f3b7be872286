// Fully connected (dense) layer.
//
// | op                        | inputs                          | outputs                                | attrs                          |
// |---------------------------|---------------------------------|----------------------------------------|--------------------------------|
// | fully_connected           | data, weight, [bias]            | out                                    | num_hidden, no_bias, flatten   |
// | fully_connected_backward  | out_grad, data, weight          | data_grad, weight_grad, [bias_grad]    | same as forward                |
//
// flatten=True (default): data (N, d1, d2, ...) is read as (N, d1*d2*...), out is (N, num_hidden).
// flatten=False: data (..., in_units) -> out (..., num_hidden).
// weight is (num_hidden, in_units), bias (num_hidden,): out = data . weight^T + bias.
// Backward: data_grad = out_grad . weight, weight_grad = out_grad^T . data, bias_grad = sum of
// out_grad over rows. All float dtypes; data, weight and bias share one dtype.
#include "ops/nn_common.h"

namespace pymx {
namespace {

// Rows and columns of `data` seen as a matrix (rows, in_units).
void fc_matrix_dims(const Shape& data, bool flatten, int64_t* rows, int64_t* in_units) {
  if (flatten) {
    *rows = data.empty() ? 1 : data[0];
    *in_units = data.empty() ? 1 : nn::prod(data, 1, static_cast<int>(data.size()));
  } else {
    *in_units = data.empty() ? 1 : data.back();
    *rows = data.empty() ? 1 : nn::prod(data, 0, static_cast<int>(data.size()) - 1);
  }
}

// The output shape for `data` and `weight`; checks that they fit together and num_hidden.
Shape fc_out_shape(const Attrs& attrs, const Shape& data, const Shape& w, const char* op) {
  PMX_CHECK(!data.empty(), op, ": data must have at least one dimension");
  const bool flatten = attrs.get_bool("flatten", true);
  int64_t rows, in_units;
  fc_matrix_dims(data, flatten, &rows, &in_units);
  PMX_CHECK(w.size() == 2 && w[1] == in_units, op, ": weight shape ", shape_str(w),
            " does not match data shape ", shape_str(data), " (expected (num_hidden, ", in_units,
            "))");
  const int64_t num_hidden = attrs.get_int("num_hidden", w[0]);
  PMX_CHECK(num_hidden == w[0], op, ": num_hidden=", num_hidden, " but weight has shape ",
            shape_str(w));
  Shape o;
  if (flatten) {
    o = {data[0], num_hidden};
  } else {
    o = data;
    o.back() = num_hidden;
  }
  return o;
}

void fc_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
              std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const bool no_bias = attrs.get_bool("no_bias", false);
  const size_t expected = no_bias ? 2 : 3;
  PMX_CHECK(in.size() == expected, "fully_connected: expected ", expected,
            " inputs (data, weight", no_bias ? "" : ", bias", ") with no_bias=", no_bias, ", got ",
            in.size());
  const Shape o = fc_out_shape(attrs, in[0], in[1], "fully_connected");
  if (!no_bias) {
    PMX_CHECK(in[2] == Shape({o.back()}), "fully_connected: bias shape ", shape_str(in[2]),
              " does not match num_hidden=", o.back());
  }
  for (size_t i = 1; i < dt.size(); ++i) {
    PMX_CHECK(dt[i] == dt[0], "fully_connected: input ", i, " has dtype ", dtype_name(dt[i]),
              " but data has ", dtype_name(dt[0]));
  }
  nn::check_float(dt[0], "fully_connected", "data");
  *out = {o};
  *out_dt = {dt[0]};
}

void fc_forward(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const bool no_bias = ctx.attrs->get_bool("no_bias", false);
  int64_t rows, in_units;
  fc_matrix_dims(in[0].shape, ctx.attrs->get_bool("flatten", true), &rows, &in_units);
  const int64_t hidden = in[1].shape[0];
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    T* y = out[0].data<T>();
    using A = nn::acc_t<T>;
    if (no_bias) {
      nn::gemm(false, true, rows, hidden, in_units, A(1), in[0].data<T>(), in_units,
               in[1].data<T>(), in_units, A(0), y, hidden);
    } else {
      // Broadcast the bias into the output, then accumulate the product onto it (beta = 1).
      const T* b = in[2].data<T>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < hidden; ++h) y[r * hidden + h] = b[h];
      nn::gemm(false, true, rows, hidden, in_units, A(1), in[0].data<T>(), in_units,
               in[1].data<T>(), in_units, A(1), y, hidden);
    }
  });
}

void fc_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                       const std::vector<DType>& dt, std::vector<Shape>* out,
                       std::vector<DType>* out_dt) {
  PMX_CHECK(in.size() == 3, "fully_connected_backward: expected (out_grad, data, weight), got ",
            in.size(), " inputs");
  const Shape o = fc_out_shape(attrs, in[1], in[2], "fully_connected_backward");
  PMX_CHECK(in[0] == o, "fully_connected_backward: out_grad shape ", shape_str(in[0]),
            " does not match the output shape ", shape_str(o));
  nn::check_same_float(dt, "fully_connected_backward");
  *out = {in[1], in[2]};
  if (!attrs.get_bool("no_bias", false)) out->push_back({in[2][0]});
  *out_dt = std::vector<DType>(out->size(), dt[1]);
}

void fc_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                 const std::vector<TBlob>& out) {
  int64_t rows, in_units;
  fc_matrix_dims(in[1].shape, ctx.attrs->get_bool("flatten", true), &rows, &in_units);
  const int64_t hidden = in[2].shape[0];
  PMX_FLOAT_SWITCH(in[1].dtype, T, {
    using A = nn::acc_t<T>;
    const T* dy = in[0].data<T>();
    // data_grad (rows, in) = dy (rows, hidden) . W (hidden, in)
    nn::gemm(false, false, rows, in_units, hidden, A(1), dy, hidden, in[2].data<T>(), in_units,
             A(0), out[0].data<T>(), in_units);
    // weight_grad (hidden, in) = dy^T (hidden, rows) . X (rows, in)
    nn::gemm(true, false, hidden, in_units, rows, A(1), dy, hidden, in[1].data<T>(), in_units,
             A(0), out[1].data<T>(), in_units);
    if (out.size() == 3) {
      std::vector<A> sums(hidden, A(0));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < hidden; ++h) sums[h] += static_cast<A>(dy[r * hidden + h]);
      T* db = out[2].data<T>();
      for (int64_t h = 0; h < hidden; ++h) db[h] = static_cast<T>(sums[h]);
    }
  });
}

std::vector<NDArray> fc_gradient(const GradContext& ctx) {
  std::vector<NDArray> in = {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1]};
  // The gradients go where autograd offers (GradContext::grad_targets), else to new arrays.
  return invoke(op_registry::get("fully_connected_backward"), in, ctx.attrs,
                ctx.out_grads[0].device(), ctx.grad_targets);
}

PMX_REGISTER_OP(fully_connected)
    .set_num_inputs(-1)
    .set_infer(fc_infer)
    .set_cpu(fc_forward)
    .set_gradient(fc_gradient);

PMX_REGISTER_OP(fully_connected_backward)
    .set_num_inputs(3)
    .set_num_outputs([](const Attrs& a) { return a.get_bool("no_bias", false) ? 2 : 3; })
    .set_infer(fc_backward_infer)
    .set_cpu(fc_backward);

}  // namespace
}  // namespace pymx
