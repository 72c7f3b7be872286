// The activations' formulas and derivatives (activation_math.h) with their exp, expm1, log1p,
// tanh and erf computed by libmvec (Note [Vector math through libmvec] in vector_math.cc), for
// the CPU loops of the activation, mish and leaky_relu ops and of the fused recurrent gates
// (rnn_gates.cc), so that both round alike. Each function takes n <= kVectorBlock elements and
// computes every element from its own inputs alone, the formulas of activation_math.h in the same
// order with the libm call replaced: a change there goes here too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/activation_math.h"
#include "ops/vector_math.h"

namespace pymx {
namespace nn {

// Elements of the activations computed through libmvec per step: their intermediate results stay
// in stack buffers this long (and in cache).
constexpr int64_t kVectorBlock = 1024;

// Whether this machine's libmvec has the functions act's formula calls (tanh; exp for sigmoid and
// mish; exp and log1p for softrelu and log_sigmoid); the other activations have none to vectorise.
template <typename A>
bool has_vector_forward(Act act) {
  using ops::MathFn;
  using ops::has_vector_math;
  switch (act) {
    case Act::kTanh: return has_vector_math<A>(MathFn::kTanh);
    case Act::kSigmoid:
    case Act::kMish: return has_vector_math<A>(MathFn::kExp);
    case Act::kSoftRelu:
    case Act::kLogSigmoid: return has_vector_math<A>(MathFn::kExp) &&
                                  has_vector_math<A>(MathFn::kLog1p);
    default: return false;
  }
}

// y = act_forward(x) for n <= kVectorBlock elements, the same formulas with their exp, log1p and
// tanh by libmvec (Note [Vector math through libmvec]), which computes each element the same way
// wherever the blocks start; x and y may be the same buffer.
template <Act kAct, typename A>
void act_forward_vector(const A* x, A* y, int64_t n) {
  using ops::MathFn;
  using ops::vector_math;
  if constexpr (kAct == Act::kTanh) {
    vector_math(MathFn::kTanh, x, y, n);
    return;
  }
  A t[kVectorBlock];  // exp's and log1p's results
  if constexpr (kAct == Act::kSigmoid) {  // 1 / (1 + exp(-x))
    for (int64_t i = 0; i < n; ++i) t[i] = -x[i];
    vector_math(MathFn::kExp, t, t, n);
    for (int64_t i = 0; i < n; ++i) y[i] = A(1) / (A(1) + t[i]);
  } else if constexpr (kAct == Act::kSoftRelu) {  // x > 20 ? x : log1p(exp(x)) (nn::softrelu)
    vector_math(MathFn::kExp, x, t, n);
    vector_math(MathFn::kLog1p, t, t, n);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > A(20) ? x[i] : t[i];
  } else if constexpr (kAct == Act::kLogSigmoid) {  // min(x, 0) - log1p(exp(-|x|))
    for (int64_t i = 0; i < n; ++i) t[i] = -std::abs(x[i]);
    vector_math(MathFn::kExp, t, t, n);
    vector_math(MathFn::kLog1p, t, t, n);
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] < A(0) ? x[i] : A(0)) - t[i];
  } else if constexpr (kAct == Act::kMish) {  // x mish_tanh(x): x above 20
    for (int64_t i = 0; i < n; ++i) t[i] = x[i] > A(20) ? A(0) : x[i];  // exp(x) unused there
    vector_math(MathFn::kExp, t, t, n);
    for (int64_t i = 0; i < n; ++i) {
      const A p = t[i] * (t[i] + A(2));
      t[i] = x[i] * (p / (p + A(2)));
    }
    // Note [Select in a loop of its own]
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > A(20) ? x[i] : t[i];
  }
}

// Whether libmvec has what act_backward_vector calls for act: expm1 for log_sigmoid, exp for
// mish. The other derivatives are arithmetic on y (or run as other ops: softrelu, softsign).
template <typename A>
bool has_vector_backward(Act act) {
  using ops::MathFn;
  using ops::has_vector_math;
  switch (act) {
    case Act::kLogSigmoid: return has_vector_math<A>(MathFn::kExpm1);
    case Act::kMish: return has_vector_math<A>(MathFn::kExp);
    default: return false;
  }
}

// dx = dy * act_derivative(act, ...) for n <= kVectorBlock elements, `v` the one input the
// derivative reads: y for log_sigmoid (-expm1(y)), x for mish. dx may be the same buffer as dy
// or v.
template <Act kAct, typename A>
void act_backward_vector(const A* dy, const A* v, A* dx, int64_t n) {
  using ops::MathFn;
  using ops::vector_math;
  A t[kVectorBlock];
  if constexpr (kAct == Act::kLogSigmoid) {
    vector_math(MathFn::kExpm1, v, t, n);
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * -t[i];
  } else if constexpr (kAct == Act::kMish) {
    // t + x sigmoid(x) (1 - t^2) as act_derivative: mish_tanh's exp(x), and exp(-x).
    A e[kVectorBlock], one_minus_t[kVectorBlock];
    for (int64_t i = 0; i < n; ++i) {
      t[i] = v[i] > A(20) ? A(0) : v[i];
      e[i] = -v[i];
    }
    vector_math(MathFn::kExp, t, t, n);
    vector_math(MathFn::kExp, e, e, n);
    for (int64_t i = 0; i < n; ++i) {
      const A p = t[i] * (t[i] + A(2));
      t[i] = p / (p + A(2));
      one_minus_t[i] = A(2) / (p + A(2));
    }
    for (int64_t i = 0; i < n; ++i) {  // Note [Select in a loop of its own]
      const A x = v[i];
      const A tanh_part = x > A(20) ? A(1) : t[i];
      const A omt = x > A(20) ? A(0) : one_minus_t[i];
      dx[i] = dy[i] * (tanh_part + x / (A(1) + e[i]) * (omt * (A(2) - omt)));
    }
  }
}

// Note [Select in a loop of its own]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `x > 0 ? x : slope * t` runs the multiply conditionally (GCC keeps it so under -ftrapping-math,
// also when it is written into a variable before the select: Note [Leaky ReLU without a branch]),
// a branch on the data that made elu 10x slower on inputs of both signs. The functions below
// compute each branch's value for every element in one loop and select between loaded values in
// another, which GCC turns into compares and blends.

// Whether libmvec has what leaky_forward_vector and leaky_grad_vector call for act: expm1 and
// exp for elu and selu, erf and exp for gelu, exp for gelu_tanh. leaky and prelu call none.
template <typename A>
bool has_vector_leaky(Leaky act) {
  using ops::MathFn;
  using ops::has_vector_math;
  switch (act) {
    case Leaky::kElu:
    case Leaky::kSelu:
      return has_vector_math<A>(MathFn::kExpm1) && has_vector_math<A>(MathFn::kExp);
    case Leaky::kGelu: return has_vector_math<A>(MathFn::kErf) && has_vector_math<A>(MathFn::kExp);
    case Leaky::kGeluTanh: return has_vector_math<A>(MathFn::kExp);
    default: return false;
  }
}

// gelu_tanh's sigmoid(2 u) (gelu_tanh_sigmoid) for n <= kVectorBlock elements into s.
template <typename A>
void gelu_tanh_sigmoid_vector(const A* x, A* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const A u = A(kSqrt2OverPi) * x[i] * (A(1) + A(kGeluCubic) * x[i] * x[i]);
    s[i] = A(-2) * u;
  }
  ops::vector_math(ops::MathFn::kExp, s, s, n);
  for (int64_t i = 0; i < n; ++i) s[i] = A(1) / (A(1) + s[i]);
}

// y = leaky_forward(act, x, slope) for n <= kVectorBlock elements of elu, selu, gelu or
// gelu_tanh; x and y may be the same buffer.
template <Leaky kAct, typename A>
void leaky_forward_vector(const A* x, A* y, int64_t n, A slope) {
  using ops::MathFn;
  using ops::vector_math;
  A t[kVectorBlock];
  if constexpr (kAct == Leaky::kElu) {
    vector_math(MathFn::kExpm1, x, t, n);
    for (int64_t i = 0; i < n; ++i) t[i] = slope * t[i];
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > A(0) ? x[i] : t[i];
  } else if constexpr (kAct == Leaky::kSelu) {
    vector_math(MathFn::kExpm1, x, t, n);
    for (int64_t i = 0; i < n; ++i) t[i] = A(kSeluAlpha) * t[i];
    for (int64_t i = 0; i < n; ++i) y[i] = A(kSeluLambda) * (x[i] > A(0) ? x[i] : t[i]);
  } else if constexpr (kAct == Leaky::kGelu) {
    for (int64_t i = 0; i < n; ++i) t[i] = x[i] * A(kSqrtHalf);
    vector_math(MathFn::kErf, t, t, n);
    for (int64_t i = 0; i < n; ++i) y[i] = A(0.5) * x[i] * (A(1) + t[i]);
  } else if constexpr (kAct == Leaky::kGeluTanh) {
    gelu_tanh_sigmoid_vector(x, t, n);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * t[i];
  }
}

// dx = dy * leaky_derivative(act, x, slope) for n <= kVectorBlock elements of elu, selu, gelu or
// gelu_tanh; dx may be the same buffer as dy or x.
template <Leaky kAct, typename A>
void leaky_grad_vector(const A* dy, const A* x, A* dx, int64_t n, A slope) {
  using ops::MathFn;
  using ops::vector_math;
  A t[kVectorBlock];
  if constexpr (kAct == Leaky::kElu) {
    vector_math(MathFn::kExp, x, t, n);
    for (int64_t i = 0; i < n; ++i) t[i] = slope * t[i];
    for (int64_t i = 0; i < n; ++i) t[i] = x[i] > A(0) ? A(1) : t[i];
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * t[i];
  } else if constexpr (kAct == Leaky::kSelu) {
    vector_math(MathFn::kExp, x, t, n);
    for (int64_t i = 0; i < n; ++i) t[i] = A(kSeluAlpha) * t[i];
    for (int64_t i = 0; i < n; ++i) t[i] = x[i] > A(0) ? A(1) : t[i];
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (A(kSeluLambda) * t[i]);
  } else if constexpr (kAct == Leaky::kGelu) {  // Phi(x) + x phi(x)
    A g[kVectorBlock];
    for (int64_t i = 0; i < n; ++i) {
      t[i] = x[i] * A(kSqrtHalf);
      g[i] = A(-0.5) * x[i] * x[i];
    }
    vector_math(MathFn::kErf, t, t, n);
    vector_math(MathFn::kExp, g, g, n);
    for (int64_t i = 0; i < n; ++i)
      dx[i] = dy[i] * (A(0.5) * (A(1) + t[i]) + x[i] * A(kInvSqrt2Pi) * g[i]);
  } else if constexpr (kAct == Leaky::kGeluTanh) {
    gelu_tanh_sigmoid_vector(x, t, n);
    for (int64_t i = 0; i < n; ++i) {
      const A sig = t[i];
      dx[i] = dy[i] * (sig + A(2) * x[i] * sig * (A(1) - sig) * A(kSqrt2OverPi) *
                                 (A(1) + A(3 * kGeluCubic) * x[i] * x[i]));
    }
  }
}

// y = act_forward(act, x) over n elements of float or double (any n; x and y may be the same
// buffer): in kVectorBlock steps through libmvec where it has the functions, else element by
// element.
template <typename A>
void act_forward_span(Act act, const A* x, A* y, int64_t n) {
  if (!has_vector_forward<A>(act)) {
    for (int64_t i = 0; i < n; ++i) y[i] = act_forward<A>(act, x[i]);
    return;
  }
  for (int64_t first = 0; first < n; first += kVectorBlock) {
    const int64_t m = std::min(kVectorBlock, n - first);
    switch (act) {
      case Act::kTanh: act_forward_vector<Act::kTanh, A>(x + first, y + first, m); break;
      case Act::kSigmoid: act_forward_vector<Act::kSigmoid, A>(x + first, y + first, m); break;
      case Act::kSoftRelu: act_forward_vector<Act::kSoftRelu, A>(x + first, y + first, m); break;
      case Act::kMish: act_forward_vector<Act::kMish, A>(x + first, y + first, m); break;
      default: act_forward_vector<Act::kLogSigmoid, A>(x + first, y + first, m); break;
    }
  }
}

}  // namespace nn
}  // namespace pymx
