// The activation functions of the activation, mish and leaky_relu ops and their derivatives, one
// definition for the CPU kernels (nn_activation.cc) and the GPU kernels (cuda/src/nn_elemwise.cu),
// so that both compute the same formulas. A is the arithmetic type: float (also for float16 and
// bfloat16 data) or double. The CPU kernels compute the formulas that call exp, expm1, log1p,
// tanh or erf a block at a time, those functions by libmvec (activation_vector.h): a change here
// goes there too.
//
// | name        | f(x)                                           | f'(x)                                   |
// |-------------|------------------------------------------------|-----------------------------------------|
// | relu        | max(x, 0) (NaN stays NaN)                      | y > 0                                   |
// | sigmoid     | 1 / (1 + exp(-x))                              | y (1 - y)                               |
// | tanh        | tanh(x)                                        | 1 - y^2                                 |
// | softrelu    | log(1 + exp(x))                                | sigmoid(x)                              |
// | softsign    | x / (1 + |x|)                                  | 1 / (1 + |x|)^2                         |
// | log_sigmoid | log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)) | 1 - sigmoid(x) = -expm1(y)              |
// | mish        | x tanh(softrelu(x))                            | t + x sigmoid(x) (1 - t^2), t = tanh(softrelu(x)) |
// | leaky       | x > 0 ? x : slope x                            | x > 0 ? 1 : slope                       |
// | prelu       | x > 0 ? x : gamma_c x (gamma per channel)      | x > 0 ? 1 : gamma_c                     |
// | elu         | x > 0 ? x : slope expm1(x)                     | x > 0 ? 1 : slope exp(x)                |
// | selu        | lambda (x > 0 ? x : alpha expm1(x))            | lambda (x > 0 ? 1 : alpha exp(x))       |
// | gelu        | x Phi(x) = x (1 + erf(x / sqrt 2)) / 2         | Phi(x) + x phi(x)                       |
// | gelu_tanh   | x (1 + tanh(u)) / 2, u = sqrt(2/pi) (x + 0.044715 x^3) | (1 + t) / 2 + x (1 - t^2) u' / 2 |
//
// selu's constants are those of Klambauer et al. (2017), as MXNet's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "ops/host_device.h"
#include "pymx/op.h"

namespace pymx {
namespace nn {

constexpr double kSeluLambda = 1.0507009873554804934193349852946;
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSqrtHalf = 0.70710678118654752440084436210485;      // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267793994605993438;    // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;   // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

// The activation op's act_type (mish runs as its own op: Note [Why mish is its own op] in
// nn_activation.cc).
enum class Act { kRelu, kSigmoid, kTanh, kSoftRelu, kSoftSign, kLogSigmoid, kMish };

inline Act parse_act(const std::string& name) {
  if (name == "relu") return Act::kRelu;
  if (name == "sigmoid") return Act::kSigmoid;
  if (name == "tanh") return Act::kTanh;
  if (name == "softrelu") return Act::kSoftRelu;
  if (name == "softsign") return Act::kSoftSign;
  if (name == "log_sigmoid") return Act::kLogSigmoid;
  if (name == "mish") return Act::kMish;
  PMX_THROW(Status::kInvalidArg, "activation: act_type '", name,
            "' is not one of relu, sigmoid, tanh, softrelu, softsign, log_sigmoid, mish");
}

// leaky_relu's act_type.
enum class Leaky { kLeaky, kPrelu, kElu, kSelu, kGelu, kGeluTanh };

struct LeakyParams {
  Leaky act;
  double slope;  // leaky and elu only
};

// Reads and validates leaky_relu's attributes. 'gelu_erf' (MXNet's later name) is 'gelu'.
inline LeakyParams leaky_params(const Attrs& attrs) {
  const std::string t = attrs.get_str("act_type", "leaky");
  const double slope = attrs.get_float("slope", 0.25);
  if (t == "leaky") return {Leaky::kLeaky, slope};
  if (t == "prelu") return {Leaky::kPrelu, slope};
  if (t == "elu") return {Leaky::kElu, slope};
  if (t == "selu") return {Leaky::kSelu, slope};
  if (t == "gelu" || t == "gelu_erf") return {Leaky::kGelu, slope};
  if (t == "gelu_tanh") return {Leaky::kGeluTanh, slope};
  PMX_THROW(Status::kInvalidArg, "leaky_relu: act_type '", t,
            "' is not one of leaky, prelu, elu, selu, gelu (gelu_erf), gelu_tanh");
}

// prelu's data as (outer, channels, inner) around its channel axis; a one-element gamma is one
// channel of the whole array.
struct PreluView {
  int64_t outer = 1, channels = 1, inner = 1;
};

// Checks that gamma is (1,) or (C,), with C the extent of data's channel axis (1, or 0 for
// one-dimensional data, as MXNet broadcasts it), and returns the view of data.
inline PreluView prelu_view(const Shape& data, const Shape& gamma, const char* op) {
  const int axis = data.size() >= 2 ? 1 : 0;
  int64_t size = 1;
  for (int64_t d : data) size *= d;
  if (gamma == Shape{1}) return {1, 1, std::max<int64_t>(size, 1)};
  PMX_CHECK(!data.empty(), op, ": prelu gamma shape ", shape_str(gamma),
            " must be (1,) for 0-dimensional data");
  PMX_CHECK(gamma == Shape{data[axis]}, op, ": prelu gamma shape ", shape_str(gamma),
            " must be (1,) or (", data[axis], ",) for data ", shape_str(data),
            " (channels on axis ", axis, ")");
  PreluView v;
  for (int d = 0; d < axis; ++d) v.outer *= data[d];
  v.channels = data[axis];
  for (size_t d = axis + 1; d < data.size(); ++d) v.inner *= data[d];
  return v;
}

// log(1 + exp(x)); exact in float above 20, where exp would overflow first.
template <typename A>
PMX_HOST_DEVICE A softrelu(A x) {
  using std::exp;
  using std::log1p;
  return x > A(20) ? x : log1p(exp(x));
}

// mish's tanh(softrelu(x)) from one exp: with n = exp(x), tanh(log(1 + n)) = p / (p + 2) where
// p = n (n + 2); three libm calls (exp, log1p, tanh) made mish 5x slower. Above 20 it is 1 in
// double (1 - t = 2 / (p + 2) < 1e-17), and p would overflow float past 44.
template <typename A>
PMX_HOST_DEVICE A mish_tanh(A x, A* one_minus_t) {
  using std::exp;
  if (x > A(20)) {
    *one_minus_t = A(0);
    return A(1);
  }
  const A n = exp(x);
  const A p = n * (n + A(2));
  *one_minus_t = A(2) / (p + A(2));  // exact where t is close to 1, unlike 1 - t
  return p / (p + A(2));
}

// gelu_tanh's (1 + tanh(u)) / 2 as sigmoid(2 u): one exp instead of tanh (4x faster on the CPU).
template <typename A>
PMX_HOST_DEVICE A gelu_tanh_sigmoid(A x) {
  using std::exp;
  const A u = A(kSqrt2OverPi) * x * (A(1) + A(kGeluCubic) * x * x);
  return A(1) / (A(1) + exp(A(-2) * u));
}

template <typename A>
PMX_HOST_DEVICE A act_forward(Act act, A x) {
  using std::abs;
  using std::exp;
  using std::log1p;
  using std::tanh;
  switch (act) {
    case Act::kRelu: return x > A(0) || x != x ? x : A(0);  // NaN stays NaN, as MXNet's
    case Act::kSigmoid: return A(1) / (A(1) + exp(-x));
    case Act::kTanh: return tanh(x);
    case Act::kSoftRelu: return softrelu(x);
    case Act::kSoftSign: return x / (A(1) + abs(x));
    case Act::kLogSigmoid: return (x < A(0) ? x : A(0)) - log1p(exp(-abs(x)));
    case Act::kMish: {
      A one_minus_t;
      return x * mish_tanh(x, &one_minus_t);
    }
  }
  return x;
}

// d out / d x, from the input x and the output y.
template <typename A>
PMX_HOST_DEVICE A act_derivative(Act act, A x, A y) {
  using std::abs;
  using std::exp;
  using std::expm1;
  switch (act) {
    case Act::kRelu: return y > A(0) ? A(1) : A(0);
    case Act::kSigmoid: return y * (A(1) - y);
    case Act::kTanh: return A(1) - y * y;
    case Act::kSoftRelu: return A(1) / (A(1) + exp(-x));
    case Act::kSoftSign: {
      const A d = A(1) + abs(x);
      return A(1) / (d * d);
    }
    case Act::kLogSigmoid: return -expm1(y);  // y alone: the backward may be given y for x
    case Act::kMish: {  // t + x sigmoid(x) (1 - t^2), with 1 - t^2 = (1 - t)(2 - (1 - t))
      A one_minus_t;
      const A t = mish_tanh(x, &one_minus_t);
      return t + x / (A(1) + exp(-x)) * (one_minus_t * (A(2) - one_minus_t));
    }
  }
  return A(1);
}

// Note [Leaky ReLU without a branch]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `x > 0 ? x : slope * x` (and `x * (x > 0 ? 1 : slope)`, which GCC turns back into it) compiles
// to a branch on the data: under -ftrapping-math GCC will not execute the multiply for elements
// that do not need it, so the loop does not vectorise, and the branch is mispredicted half the
// time on real activations (4 ns an element, 25x relu's). `(x > 0 ? x : 0) + slope * (x > 0 ?
// 0 : x)` multiplies every element, so it vectorises to compares, blends, a multiply and an add.
// It equals the branchy form for every x but -0, whose result is +0 instead of -0.
template <typename A>
PMX_HOST_DEVICE A leaky_select(bool positive, A value, A slope) {
  return (positive ? value : A(0)) + slope * (positive ? A(0) : value);
}

// leaky_relu's function; `slope` is the op's slope, or gamma_c for prelu.
template <typename A>
PMX_HOST_DEVICE A leaky_forward(Leaky act, A x, A slope) {
  using std::erf;
  using std::expm1;
  switch (act) {
    case Leaky::kLeaky:
    case Leaky::kPrelu: return leaky_select(x > A(0), x, slope);
    case Leaky::kElu: return x > A(0) ? x : slope * expm1(x);
    case Leaky::kSelu: return A(kSeluLambda) * (x > A(0) ? x : A(kSeluAlpha) * expm1(x));
    case Leaky::kGelu: return A(0.5) * x * (A(1) + erf(x * A(kSqrtHalf)));
    case Leaky::kGeluTanh: return x * gelu_tanh_sigmoid(x);
  }
  return x;
}

template <typename A>
PMX_HOST_DEVICE A leaky_derivative(Leaky act, A x, A slope) {
  using std::erf;
  using std::exp;
  switch (act) {
    case Leaky::kLeaky:
    case Leaky::kPrelu: return x > A(0) ? A(1) : slope;
    case Leaky::kElu: return x > A(0) ? A(1) : slope * exp(x);
    case Leaky::kSelu: return A(kSeluLambda) * (x > A(0) ? A(1) : A(kSeluAlpha) * exp(x));
    case Leaky::kGelu:
      return A(0.5) * (A(1) + erf(x * A(kSqrtHalf))) +
             x * A(kInvSqrt2Pi) * exp(A(-0.5) * x * x);
    case Leaky::kGeluTanh: {  // s + 2 x s (1 - s) u', s = sigmoid(2 u) = (1 + tanh(u)) / 2
      const A sig = gelu_tanh_sigmoid(x);
      return sig + A(2) * x * sig * (A(1) - sig) * A(kSqrt2OverPi) *
                       (A(1) + A(3 * kGeluCubic) * x * x);
    }
  }
  return A(1);
}

// dy * f'(x); the leaky and prelu cases without a branch (Note [Leaky ReLU without a branch]).
template <typename A>
PMX_HOST_DEVICE A leaky_grad(Leaky act, A x, A dy, A slope) {
  if (act == Leaky::kLeaky || act == Leaky::kPrelu) return leaky_select(x > A(0), dy, slope);
  return dy * leaky_derivative(act, x, slope);
}

}  // namespace nn
}  // namespace pymx
