// Softmax and log-softmax along one axis.
//
// | op                     | inputs          | outputs    | attrs |
// |------------------------|-----------------|------------|-------|
// | softmax                | data            | out        | axis (-1), temperature (None = 1) |
// | log_softmax            | data            | out        | axis (-1), temperature (None = 1) |
// | softmax_backward       | out_grad, out   | data_grad  | axis, temperature |
// | log_softmax_backward   | out_grad, out   | data_grad  | axis, temperature |
//
// softmax(x)_i = exp((x_i - max x) / t) / sum_j exp((x_j - max x) / t) (max subtracted for
// stability). Backward from the output y: softmax: dx = y * (dy - sum(dy * y)) / t;
// log_softmax: dx = (dy - exp(y) * sum(dy)) / t. Float dtypes; sums accumulate in double.
#include <cmath>

#include "ops/nn_common.h"

namespace pymx {
namespace {

using nn::AxisView;

AxisView layout_of(const Attrs& attrs, const Shape& s, const char* op) {
  return nn::axis_view(s, attrs.get_int("axis", -1), op);
}

double temperature(const Attrs& attrs, const char* op) {
  const double t = attrs.get_float("temperature", 1.0);
  PMX_CHECK(t > 0, op, ": temperature must be > 0, got ", t);
  return t;
}

void softmax_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                   std::vector<Shape>* out, std::vector<DType>* out_dt) {
  layout_of(attrs, in[0], "softmax");
  temperature(attrs, "softmax");
  nn::check_float(dt[0], "softmax", "data");
  *out = {in[0]};
  *out_dt = {dt[0]};
}

template <bool kLog>
void softmax_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const char* op = kLog ? "log_softmax" : "softmax";
  const AxisView L = layout_of(*ctx.attrs, in[0].shape, op);
  if (L.n == 0) return;  // an empty axis: the output is empty too
  const double inv_t = 1.0 / temperature(*ctx.attrs, op);
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    using A = nn::acc_t<T>;
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t o = 0; o < L.outer; ++o) {
      for (int64_t i = 0; i < L.inner; ++i) {
        const int64_t base = o * L.n * L.inner + i;
        A mx = static_cast<A>(x[base]);
        for (int64_t k = 1; k < L.n; ++k) mx = std::max(mx, static_cast<A>(x[base + k * L.inner]));
        double sum = 0;
        for (int64_t k = 0; k < L.n; ++k)
          sum += std::exp((static_cast<double>(x[base + k * L.inner]) - mx) * inv_t);
        const double log_sum = std::log(sum);
        for (int64_t k = 0; k < L.n; ++k) {
          const double z = (static_cast<double>(x[base + k * L.inner]) - mx) * inv_t;
          y[base + k * L.inner] = static_cast<T>(kLog ? z - log_sum : std::exp(z) / sum);
        }
      }
    }
  });
}

template <bool kLog>
void backward_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                    std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const char* op = kLog ? "log_softmax_backward" : "softmax_backward";
  PMX_CHECK(in[0] == in[1], op, ": out_grad ", shape_str(in[0]), " and out ", shape_str(in[1]),
            " differ");
  layout_of(attrs, in[1], op);
  temperature(attrs, op);
  nn::check_same_float(dt, op);
  *out = {in[0]};
  *out_dt = {dt[0]};
}

template <bool kLog>
void softmax_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  const char* op = kLog ? "log_softmax" : "softmax";
  const AxisView L = layout_of(*ctx.attrs, in[1].shape, op);
  const double inv_t = 1.0 / temperature(*ctx.attrs, op);
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    const T* dy = in[0].data<T>();
    const T* y = in[1].data<T>();
    T* dx = out[0].data<T>();
    for (int64_t o = 0; o < L.outer; ++o) {
      for (int64_t i = 0; i < L.inner; ++i) {
        const int64_t base = o * L.n * L.inner + i;
        double sum = 0;
        for (int64_t k = 0; k < L.n; ++k) {
          const int64_t j = base + k * L.inner;
          sum += kLog ? static_cast<double>(dy[j])
                      : static_cast<double>(dy[j]) * static_cast<double>(y[j]);
        }
        for (int64_t k = 0; k < L.n; ++k) {
          const int64_t j = base + k * L.inner;
          const double g = static_cast<double>(dy[j]), v = static_cast<double>(y[j]);
          dx[j] = static_cast<T>((kLog ? g - std::exp(v) * sum : v * (g - sum)) * inv_t);
        }
      }
    }
  });
}

PMX_REGISTER_OP(softmax)
    .set_infer(softmax_infer)
    .set_cpu(softmax_forward<false>)
    .set_gradient([](const GradContext& ctx) {
      return invoke("softmax_backward", {ctx.out_grads[0], ctx.outputs[0]}, ctx.attrs);
    });

PMX_REGISTER_OP(log_softmax)
    .set_infer(softmax_infer)
    .set_cpu(softmax_forward<true>)
    .set_gradient([](const GradContext& ctx) {
      return invoke("log_softmax_backward", {ctx.out_grads[0], ctx.outputs[0]}, ctx.attrs);
    });

PMX_REGISTER_OP(softmax_backward)
    .set_num_inputs(2)
    .set_infer(backward_infer<false>)
    .set_cpu(softmax_backward<false>);

PMX_REGISTER_OP(log_softmax_backward)
    .set_num_inputs(2)
    .set_infer(backward_infer<true>)
    .set_cpu(softmax_backward<true>);

}  // namespace
}  // namespace pymx
