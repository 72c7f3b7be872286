// Activation functions.
//
// | op                    | inputs                | outputs    | attrs |
// |-----------------------|-----------------------|------------|-------|
// | activation            | data                  | out        | act_type: relu sigmoid tanh softrelu softsign |
// | relu                  | data                  | out        | - |
// | sigmoid               | data                  | out        | - |
// | activation_backward   | out_grad, data, out   | data_grad  | act_type |
// | leaky_relu            | data                  | out        | act_type: leaky (default) elu; slope (0.25) |
// | leaky_relu_backward   | out_grad, data        | data_grad  | act_type, slope |
//
// softrelu(x) = log(1 + exp(x)); softsign(x) = x / (1 + |x|); leaky: x > 0 ? x : slope*x;
// elu: x > 0 ? x : slope*(exp(x) - 1). Float dtypes; float16 computes in float.
#include <cmath>
#include <type_traits>

#include "ops/elemwise.h"
#include "ops/nn_common.h"
#include "parallel.h"

namespace pymx {
namespace {

using nn::Act;
using nn::parse_act;

template <typename A>
A act_forward(Act act, A x) {
  switch (act) {
    case Act::kRelu: return x > A(0) || x != x ? x : A(0);  // NaN stays NaN, as MXNet's
    case Act::kSigmoid: return A(1) / (A(1) + std::exp(-x));
    case Act::kTanh: return std::tanh(x);
    case Act::kSoftRelu: return x > A(20) ? x : std::log1p(std::exp(x));  // exact in float above 20
    case Act::kSoftSign: return x / (A(1) + std::abs(x));
  }
  return x;
}

// d out / d x, from the input x and the output y.
template <typename A>
A act_derivative(Act act, A x, A y) {
  switch (act) {
    case Act::kRelu: return y > A(0) ? A(1) : A(0);
    case Act::kSigmoid: return y * (A(1) - y);
    case Act::kTanh: return A(1) - y * y;
    case Act::kSoftRelu: return A(1) / (A(1) + std::exp(-x));
    case Act::kSoftSign: {
      const A d = A(1) + std::abs(x);
      return A(1) / (d * d);
    }
  }
  return A(1);
}

void same_shape_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                      std::vector<Shape>* out, std::vector<DType>* out_dt) {
  nn::check_float(dt[0], "activation", "data");
  *out = {in[0]};
  *out_dt = {dt[0]};
}

// Backward ops: data_grad has the shape and dtype of out_grad, which every input must share.
void grad_infer(const std::vector<Shape>& in, const std::vector<DType>& dt, const char* op,
                std::vector<Shape>* out, std::vector<DType>* out_dt) {
  for (size_t i = 1; i < in.size(); ++i)
    PMX_CHECK(in[i] == in[0], op, ": input ", i, " shape ", shape_str(in[i]),
              " differs from out_grad ", shape_str(in[0]));
  nn::check_same_float(dt, op);
  *out = {in[0]};
  *out_dt = {dt[0]};
}

// Elements per parallel chunk of the elementwise kernels: ~64 KiB of float, enough to pay for
// handing a chunk to another thread.
constexpr int64_t kGrain = 16384;

// The loops are instantiated per activation so that the switch is outside them: a per-element
// switch through a jump table (and ReLU's data-dependent branch) ran ~10x slower than these
// loops, which the compiler vectorises for relu.
template <Act kAct, typename T>
void act_forward_loop(const T* x, T* y, int64_t n) {
  using A = nn::acc_t<T>;
  // Captures by value: through references GCC reloaded the pointers on every element.
  parallel_for(0, n, kGrain, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      y[i] = static_cast<T>(act_forward<A>(kAct, static_cast<A>(x[i])));
  });
}

template <Act kAct, typename T>
void act_backward_loop(const T* dy, const T* x, const T* y, T* dx, int64_t n) {
  using A = nn::acc_t<T>;
  parallel_for(0, n, kGrain, [=](int64_t lo, int64_t hi) {
    if constexpr (kAct == Act::kRelu) {
      // A select, as PyTorch's threshold_backward: `dy * (y > 0 ? 1 : 0)` compiled to a branch on
      // the data (GCC keeps the multiply conditional under -ftrapping-math), mispredicted half
      // the time on real activations, where this vectorises to compare-and-mask.
      // Both loads are unconditional so that GCC may if-convert (it will not invent a load).
      for (int64_t i = lo; i < hi; ++i) {
        const T grad = dy[i], out = y[i];
        dx[i] = out > T(0) ? grad : T(0);
      }
    } else {
      for (int64_t i = lo; i < hi; ++i) {
        dx[i] = static_cast<T>(static_cast<A>(dy[i]) *
                               act_derivative<A>(kAct, static_cast<A>(x[i]), static_cast<A>(y[i])));
      }
    }
  });
}

// Calls body(std::integral_constant<Act, act>) so that `act` is a compile-time constant inside.
template <typename Body>
void with_act(Act act, Body body) {
  switch (act) {
    case Act::kRelu: return body(std::integral_constant<Act, Act::kRelu>());
    case Act::kSigmoid: return body(std::integral_constant<Act, Act::kSigmoid>());
    case Act::kTanh: return body(std::integral_constant<Act, Act::kTanh>());
    case Act::kSoftRelu: return body(std::integral_constant<Act, Act::kSoftRelu>());
    case Act::kSoftSign: return body(std::integral_constant<Act, Act::kSoftSign>());
  }
}

ComputeFn act_kernel(std::function<Act(const Attrs&)> which) {
  return [which](const OpContext& ctx, const std::vector<TBlob>& in,
                 const std::vector<TBlob>& out) {
    const Act act = which(*ctx.attrs);
    PMX_FLOAT_SWITCH(in[0].dtype, T, {
      with_act(act, [&](auto a) {
        act_forward_loop<decltype(a)::value, T>(in[0].data<T>(), out[0].data<T>(), in[0].size());
      });
    });
  };
}

Act act_from_attrs(const Attrs& a) { return parse_act(a.get_str("act_type", "relu")); }

void act_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const Act act = act_from_attrs(*ctx.attrs);
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    with_act(act, [&](auto a) {
      act_backward_loop<decltype(a)::value, T>(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(),
                                               out[0].data<T>(), in[0].size());
    });
  });
}

// Reads only the output (the ops declare set_grad_uses({}, {0})), so that training frees each
// activation's input, typically a convolution's result, as soon as the next layer has run.
// relu, sigmoid and tanh have derivatives of y alone: activation_backward, on CPU and GPU,
// ignores its data input for them, which gets y too. softrelu and softsign are written in y:
// softrelu' = sigmoid(x) = 1 - exp(-y) (expm1 keeps it exact for small y), and softsign' =
// 1 / (1 + |x|)^2 = (1 - |y|)^2.
GradFn act_gradient(const char* fixed_act_type) {
  return [fixed_act_type](const GradContext& ctx) -> std::vector<NDArray> {
    const std::string act_type = fixed_act_type ? fixed_act_type : ctx.attrs.get_str("act_type", "relu");
    const NDArray& dy = ctx.out_grads[0];
    const NDArray& y = ctx.outputs[0];
    using ops::call;
    using ops::scalar_op;
    if (act_type == "softrelu") {
      NDArray derivative = call("negative", {call("expm1", {call("negative", {y})})});
      return {call("multiply", {dy, derivative})};
    }
    if (act_type == "softsign") {
      NDArray derivative = call("square", {scalar_op("subtract_scalar", call("abs", {y}), 1.0, true)});
      return {call("multiply", {dy, derivative})};
    }
    return invoke("activation_backward", {dy, y, y}, Attrs{{"act_type", act_type}});
  };
}

PMX_REGISTER_OP(activation)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
      act_from_attrs(attrs);  // a bad act_type fails at the call, not later in the worker
      same_shape_infer(attrs, in, dt, out, out_dt);
    })
    .set_cpu(act_kernel(act_from_attrs))
    .set_gradient(act_gradient(nullptr))
    .set_grad_uses({}, {0});

PMX_REGISTER_OP(relu)
    .set_infer(same_shape_infer)
    .set_cpu(act_kernel([](const Attrs&) { return Act::kRelu; }))
    .set_gradient(act_gradient("relu"))
    .set_grad_uses({}, {0});

PMX_REGISTER_OP(sigmoid)
    .set_infer(same_shape_infer)
    .set_cpu(act_kernel([](const Attrs&) { return Act::kSigmoid; }))
    .set_gradient(act_gradient("sigmoid"))
    .set_grad_uses({}, {0});

PMX_REGISTER_OP(activation_backward)
    .set_num_inputs(3)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
      act_from_attrs(attrs);
      grad_infer(in, dt, "activation_backward", out, out_dt);
    })
    .set_cpu(act_backward);

// ---------------------------------------------------------------------------------------------
// leaky_relu
// ---------------------------------------------------------------------------------------------
void leaky_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const auto [elu, slope] = nn::leaky_params(*ctx.attrs);
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    using A = nn::acc_t<T>;
    const A s = static_cast<A>(slope);
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t i = 0; i < in[0].size(); ++i) {
      const A v = static_cast<A>(x[i]);
      y[i] = static_cast<T>(v > A(0) ? v : (elu ? s * std::expm1(v) : s * v));
    }
  });
}

void leaky_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const auto [elu, slope] = nn::leaky_params(*ctx.attrs);
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    using A = nn::acc_t<T>;
    const A s = static_cast<A>(slope);
    const T* dy = in[0].data<T>();
    const T* x = in[1].data<T>();
    T* dx = out[0].data<T>();
    for (int64_t i = 0; i < in[0].size(); ++i) {
      const A v = static_cast<A>(x[i]);
      const A d = v > A(0) ? A(1) : (elu ? s * std::exp(v) : s);
      dx[i] = static_cast<T>(static_cast<A>(dy[i]) * d);
    }
  });
}

PMX_REGISTER_OP(leaky_relu)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
      nn::leaky_params(attrs);  // bad attributes fail at the call, not in the worker
      same_shape_infer(attrs, in, dt, out, out_dt);
    })
    .set_cpu(leaky_forward)
    .set_gradient([](const GradContext& ctx) {
      return invoke("leaky_relu_backward", {ctx.out_grads[0], ctx.inputs[0]}, ctx.attrs);
    });

PMX_REGISTER_OP(leaky_relu_backward)
    .set_num_inputs(2)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
      nn::leaky_params(attrs);
      grad_infer(in, dt, "leaky_relu_backward", out, out_dt);
    })
    .set_cpu(leaky_backward);

}  // namespace
}  // namespace pymx
