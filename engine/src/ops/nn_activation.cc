// Activation functions (formulas and derivatives: activation_math.h).
//
// | op                    | inputs                   | outputs                | attrs |
// |-----------------------|--------------------------|------------------------|-------|
// | activation            | data                     | out                    | act_type: relu sigmoid tanh softrelu softsign log_sigmoid |
// | relu sigmoid mish     | data                     | out                    | - |
// | activation_backward   | out_grad, data, out      | data_grad              | act_type (also mish) |
// | leaky_relu            | data, [gamma]            | out                    | act_type: leaky (default) prelu elu selu gelu gelu_tanh; slope (0.25) |
// | leaky_relu_backward   | out_grad, data, [gamma]  | data_grad, [gamma_grad] | act_type, slope |
//
// leaky_relu takes gamma, and its backward returns gamma_grad, for act_type prelu only. prelu's
// gamma has one element (one slope for all) or one per channel: data.shape[1], or data.shape[0]
// for one-dimensional data (MXNet's rule). Float dtypes; float16 and bfloat16 compute in float.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/activation_math.h"
#include "ops/activation_vector.h"
#include "ops/elemwise.h"
#include "ops/float16_convert.h"
#include "ops/nn_common.h"
#include "parallel.h"

namespace pymx {
namespace {

using nn::Act;
using nn::act_backward_vector;
using nn::act_derivative;
using nn::act_forward;
using nn::act_forward_vector;
using nn::has_vector_backward;
using nn::has_vector_forward;
using nn::has_vector_leaky;
using nn::kVectorBlock;
using nn::Leaky;
using nn::parse_act;

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

// Calls block(a, b, out, m) over [lo, hi) in kVectorBlock steps, with a, b and out the spans of
// in0, in1 (nullptr when there is none) and out as A: the arrays themselves where T is A, float
// copies on the stack for float16 and bfloat16. out may be in0's copy: the blocks write out[i]
// after reading element i.
template <typename A, typename T, typename Block>
void in_vector_blocks(int64_t lo, int64_t hi, const T* in0, const T* in1, T* out, Block block) {
  for (int64_t first = lo; first < hi; first += kVectorBlock) {
    const int64_t m = std::min(kVectorBlock, hi - first);
    if constexpr (std::is_same_v<T, A>) {
      block(in0 + first, in1 ? in1 + first : nullptr, out + first, m);
    } else {
      A wide0[kVectorBlock], wide1[kVectorBlock];
      convert_span(in0 + first, wide0, m);
      if (in1) convert_span(in1 + first, wide1, m);
      block(wide0, in1 ? wide1 : nullptr, wide0, m);
      convert_span(wide0, out + first, m);
    }
  }
}

// The loops are instantiated per activation so that the switch is outside them: a per-element
// switch through a jump table (and ReLU's data-dependent branch) ran ~10x slower than these
// loops, which the compiler vectorises for relu. The activations whose formulas call exp, tanh,
// log1p, expm1 or erf go through libmvec where this machine has it (activation_vector.h):
// glibc's scalar tanhf alone took 20 ns an element.
template <Act kAct, typename T>
void act_forward_loop(const T* x, T* y, int64_t n) {
  using A = nn::acc_t<T>;
  if (has_vector_forward<A>(kAct)) {
    parallel_for(0, n, kGrain, [=](int64_t lo, int64_t hi) {
      in_vector_blocks<A>(lo, hi, x, static_cast<const T*>(nullptr), y,
                          [](const A* v, const A*, A* out, int64_t m) {
                            act_forward_vector<kAct, A>(v, out, m);
                          });
    });
    return;
  }
  // Captures by value: through references GCC reloaded the pointers on every element.
  parallel_for(0, n, kGrain, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      y[i] = static_cast<T>(act_forward<A>(kAct, static_cast<A>(x[i])));
  });
}

template <Act kAct, typename T>
void act_backward_loop(const T* dy, const T* x, const T* y, T* dx, int64_t n) {
  using A = nn::acc_t<T>;
  if (has_vector_backward<A>(kAct)) {
    const T* read = kAct == Act::kMish ? x : y;  // what the derivative reads
    parallel_for(0, n, kGrain, [=](int64_t lo, int64_t hi) {
      in_vector_blocks<A>(lo, hi, dy, read, dx, [](const A* g, const A* v, A* out, int64_t m) {
        act_backward_vector<kAct, A>(g, v, out, m);
      });
    });
    return;
  }
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
    case Act::kLogSigmoid: return body(std::integral_constant<Act, Act::kLogSigmoid>());
    case Act::kMish: return body(std::integral_constant<Act, Act::kMish>());
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
// relu, sigmoid, tanh and log_sigmoid have derivatives of y alone: activation_backward, on CPU
// and GPU, ignores its data input for them, which gets y too. softrelu and softsign are written
// in y: softrelu' = sigmoid(x) = 1 - exp(-y) (expm1 keeps it exact for small y), and softsign' =
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

// Note [Why mish is its own op]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// mish is not monotonic (its minimum is near x = -1.19), so its derivative is no function of its
// output: the backward needs x. The activation op's gradient reads y alone, which lets training
// free every activation's input early (act_gradient); keeping x alive for all of them, for the
// sake of one act_type, would cost that. So mish is an op of its own whose gradient reads x and
// y, and npx.activation(act_type='mish') calls it; the activation op refuses 'mish'.
Act activation_act(const Attrs& attrs) {
  const Act act = act_from_attrs(attrs);
  PMX_CHECK(act != Act::kMish, "activation: act_type 'mish' runs as the mish op, whose gradient "
            "reads the input (npx.activation calls it)");
  return act;
}

PMX_REGISTER_OP(activation)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
      activation_act(attrs);  // a bad act_type fails at the call, not later in the worker
      same_shape_infer(attrs, in, dt, out, out_dt);
    })
    .set_cpu(act_kernel(activation_act))
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

PMX_REGISTER_OP(mish)
    .set_infer(same_shape_infer)
    .set_cpu(act_kernel([](const Attrs&) { return Act::kMish; }))
    .set_gradient([](const GradContext& ctx) {
      // mish's derivative reads x alone: x stands in for activation_backward's output input.
      return invoke("activation_backward", {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[0]},
                    Attrs{{"act_type", "mish"}});
    })
    .set_grad_uses({0}, {});

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
bool is_prelu(const Attrs& attrs) { return nn::leaky_params(attrs).act == Leaky::kPrelu; }

// Checks leaky_relu's (and its backward's) data and gamma: prelu takes gamma after `data_index`
// inputs, the others nothing more.
void check_leaky_inputs(const Attrs& attrs, const std::vector<Shape>& in,
                        const std::vector<DType>& dt, size_t data_index, const char* op) {
  const bool prelu = is_prelu(attrs);
  const size_t expected = data_index + (prelu ? 2 : 1);
  PMX_CHECK(in.size() == expected, op, ": act_type '", attrs.get_str("act_type", "leaky"),
            "' takes ", expected, " inputs", prelu ? " (gamma last)" : "", ", got ", in.size());
  if (prelu) {
    nn::prelu_view(in[data_index], in[data_index + 1], op);
    nn::check_same_float(dt, op);
  }
}

// Calls body(std::integral_constant<Leaky, act>) so that `act` is a compile-time constant inside.
template <typename Body>
void with_leaky(Leaky act, Body body) {
  switch (act) {
    case Leaky::kLeaky: return body(std::integral_constant<Leaky, Leaky::kLeaky>());
    case Leaky::kPrelu: return body(std::integral_constant<Leaky, Leaky::kPrelu>());
    case Leaky::kElu: return body(std::integral_constant<Leaky, Leaky::kElu>());
    case Leaky::kSelu: return body(std::integral_constant<Leaky, Leaky::kSelu>());
    case Leaky::kGelu: return body(std::integral_constant<Leaky, Leaky::kGelu>());
    case Leaky::kGeluTanh: return body(std::integral_constant<Leaky, Leaky::kGeluTanh>());
  }
}

// Note [PReLU channel runs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// prelu's data is (outer, channels, inner) around its channel axis (prelu_view): element i has
// channel (i / inner) % channels, constant over runs of `inner` elements. The kernels split the
// elements, not the channels, across threads (a one-element gamma makes one channel of the whole
// array), and walk each chunk run by run, so the per-element work has no division.

// Calls run(lo, hi, slope) over the runs of [first, last) that share one slope: the op's slope,
// or prelu's gamma_c for the channel c of the run (Note [PReLU channel runs]).
template <typename A, typename T, typename Run>
void for_each_slope_run(const nn::PreluView& v, const T* gamma, double slope, int64_t first,
                        int64_t last, Run run) {
  if (gamma == nullptr) {
    run(first, last, static_cast<A>(slope));
    return;
  }
  while (first < last) {
    const int64_t row = first / v.inner;
    const int64_t end = std::min(last, (row + 1) * v.inner);
    run(first, end, static_cast<A>(gamma[row % v.channels]));
    first = end;
  }
}

void leaky_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const auto [act, slope] = nn::leaky_params(*ctx.attrs);
  const bool prelu = act == Leaky::kPrelu;
  const nn::PreluView v = prelu ? nn::prelu_view(in[0].shape, in[1].shape, "leaky_relu")
                                : nn::PreluView{};
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    using A = nn::acc_t<T>;
    const T* x = in[0].data<T>();
    const T* gamma = prelu ? in[1].data<T>() : nullptr;
    T* y = out[0].data<T>();
    with_leaky(act, [&](auto a) {
      constexpr Leaky kAct = decltype(a)::value;
      if constexpr (kAct != Leaky::kLeaky && kAct != Leaky::kPrelu) {
        if (has_vector_leaky<A>(kAct)) {
          const A s = static_cast<A>(slope);
          parallel_for(0, in[0].size(), kGrain, [=](int64_t lo, int64_t hi) {
            in_vector_blocks<A>(lo, hi, x, static_cast<const T*>(nullptr), y,
                                [s](const A* xs, const A*, A* out, int64_t m) {
                                  nn::leaky_forward_vector<kAct, A>(xs, out, m, s);
                                });
          });
          return;
        }
      }
      parallel_for(0, in[0].size(), kGrain, [=](int64_t lo, int64_t hi) {
        for_each_slope_run<A>(v, gamma, slope, lo, hi, [=](int64_t first, int64_t last, A s) {
          for (int64_t i = first; i < last; ++i)
            y[i] = static_cast<T>(nn::leaky_forward<A>(kAct, static_cast<A>(x[i]), s));
        });
      });
    });
  });
}

// prelu's data_grad over [first, last), elements of one channel whose slope is `slope`; returns
// their sum of dy * x where x <= 0. The sum runs in kLanes lanes of A over chunks of
// kGammaChunk elements, each chunk added in double (Note [Lane sums]): a double add per element
// made the backward 20x slower than leaky's. It is a second pass over the chunk (from L1):
// fused into the data_grad loop, neither vectorised.
constexpr int64_t kGammaChunk = 1024;

template <typename A, typename T>
double prelu_backward_run(const T* dy, const T* x, T* dx, int64_t first, int64_t last, A slope) {
  double total = 0;
  for (int64_t lo = first; lo < last; lo += kGammaChunk) {
    const int64_t hi = std::min(last, lo + kGammaChunk);
    for (int64_t i = lo; i < hi; ++i) {
      dx[i] = static_cast<T>(
          nn::leaky_grad<A>(Leaky::kPrelu, static_cast<A>(x[i]), static_cast<A>(dy[i]), slope));
    }
    // x selected, then the product (Note [Leaky ReLU without a branch]).
    const auto term = [=](int64_t i) {
      const A xi = static_cast<A>(x[i]);
      return static_cast<A>(dy[i]) * (xi > A(0) ? A(0) : xi);
    };
    A part[nn::kLanes] = {};
    int64_t i = lo;
    for (; i + nn::kLanes <= hi; i += nn::kLanes)
      for (int j = 0; j < nn::kLanes; ++j) part[j] += term(i + j);
    for (; i < hi; ++i) part[0] += term(i);
    for (int j = 0; j < nn::kLanes; ++j) total += static_cast<double>(part[j]);
  }
  return total;
}

// dx = dy * f'(x); for prelu also gamma_grad_c = sum over channel c of dy * x where x <= 0. Each
// part of the elements sums into its own per-channel row of doubles, and the rows are added in
// part order, so the result does not depend on the threads.
void leaky_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const auto [act, slope] = nn::leaky_params(*ctx.attrs);
  const bool prelu = act == Leaky::kPrelu;
  const nn::PreluView v = prelu ? nn::prelu_view(in[1].shape, in[2].shape, "leaky_relu_backward")
                                : nn::PreluView{};
  const int64_t n = in[0].size();
  const int64_t parts = std::max<int64_t>(parallel_parts(n, kGrain), 1);
  std::vector<double> gamma_sums(prelu ? parts * v.channels : 0, 0.0);
  double* sums = gamma_sums.data();
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    using A = nn::acc_t<T>;
    const T* dy = in[0].data<T>();
    const T* x = in[1].data<T>();
    const T* gamma = prelu ? in[2].data<T>() : nullptr;
    T* dx = out[0].data<T>();
    const bool vector = has_vector_leaky<A>(act);
    with_leaky(act, [&](auto a) {
      constexpr Leaky kAct = decltype(a)::value;
      parallel_for_parts(n, kGrain, [=](int64_t part, int64_t lo, int64_t hi) {
        for_each_slope_run<A>(v, gamma, slope, lo, hi, [=](int64_t first, int64_t last, A s) {
          if constexpr (kAct == Leaky::kPrelu) {
            sums[part * v.channels + (first / v.inner) % v.channels] +=
                prelu_backward_run<A>(dy, x, dx, first, last, s);
          } else if (vector) {
            in_vector_blocks<A>(first, last, dy, x, dx,
                                [a, s](const A* g, const A* xs, A* out, int64_t m) {
                                  nn::leaky_grad_vector<decltype(a)::value, A>(g, xs, out, m, s);
                                });
          } else {
            for (int64_t i = first; i < last; ++i) {
              dx[i] = static_cast<T>(
                  nn::leaky_grad<A>(kAct, static_cast<A>(x[i]), static_cast<A>(dy[i]), s));
            }
          }
        });
      });
    });
    if (prelu) {
      T* gamma_grad = out[1].data<T>();
      for (int64_t c = 0; c < v.channels; ++c) {
        double total = 0;
        for (int64_t p = 0; p < parts; ++p) total += sums[p * v.channels + c];
        gamma_grad[c] = static_cast<T>(total);
      }
    }
  });
}

PMX_REGISTER_OP(leaky_relu)
    .set_num_inputs(-1)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
      check_leaky_inputs(attrs, in, dt, 0, "leaky_relu");  // bad attributes fail at the call
      same_shape_infer(attrs, in, dt, out, out_dt);
    })
    .set_cpu(leaky_forward)
    .set_gradient([](const GradContext& ctx) {
      std::vector<NDArray> inputs = {ctx.out_grads[0], ctx.inputs[0]};
      if (ctx.inputs.size() > 1) inputs.push_back(ctx.inputs[1]);  // prelu's gamma
      return invoke("leaky_relu_backward", inputs, ctx.attrs);
    });

PMX_REGISTER_OP(leaky_relu_backward)
    .set_num_inputs(-1)
    .set_num_outputs([](const Attrs& attrs) { return is_prelu(attrs) ? 2 : 1; })
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
      const char* op = "leaky_relu_backward";
      check_leaky_inputs(attrs, in, dt, 1, op);
      PMX_CHECK(in[1] == in[0], op, ": data ", shape_str(in[1]), " differs from out_grad ",
                shape_str(in[0]));
      nn::check_same_float(dt, op);
      *out = {in[0]};
      *out_dt = {dt[0]};
      if (in.size() == 3) {  // prelu: gamma_grad
        out->push_back(in[2]);
        out_dt->push_back(dt[2]);
      }
    })
    .set_cpu(leaky_backward);

}  // namespace
}  // namespace pymx
