// The activations' forward formulas (activation_math.h) with their exp, log1p and tanh computed
// by libmvec (Note [Vector math through libmvec] in vector_math.cc), for the CPU loops of the
// activation op and of the fused recurrent gates (rnn_gates.cc), so that both round alike.
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

// Whether this machine's libmvec has the functions act's formula calls (tanh; exp for sigmoid;
// exp and log1p for softrelu and log_sigmoid); the other activations have none to vectorise.
template <typename A>
bool has_vector_forward(Act act) {
  using ops::MathFn;
  using ops::has_vector_math;
  switch (act) {
    case Act::kTanh: return has_vector_math<A>(MathFn::kTanh);
    case Act::kSigmoid: return has_vector_math<A>(MathFn::kExp);
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
      default: act_forward_vector<Act::kLogSigmoid, A>(x + first, y + first, m); break;
    }
  }
}

}  // namespace nn
}  // namespace pymx
