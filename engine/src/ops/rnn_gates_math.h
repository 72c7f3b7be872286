// The gate arithmetic of one LSTM or GRU step and its derivatives, for one hidden unit: one
// definition for the CPU kernels (rnn_gates.cc) and the GPU kernels (cuda/src/rnn_gates.cu), so
// that both compute the same formulas. A is the arithmetic type: float (also for float16 and
// bfloat16 data) or double. The operations run in the order of the composed step in
// pymx/gluon/rnn/rnn_cell.py (lstm_step, gru_step), so that float32 and float64 results equal
// it to rounding; sigmoid and tanh are the activation op's (activation_math.h).
//
// LSTM, gates i, f, g, o from the pre-activations x = i2h + h2h:
//   c' = sigmoid(f) c + sigmoid(i) tanh(g),  h' = sigmoid(o) tanh(c')
// GRU, gates r, z, n, the reset gate scaling the recurrent projection (cuDNN's form):
//   r = sigmoid(i_r + h_r), z = sigmoid(i_z + h_z), n = tanh(i_n + r h_n),  h' = n + z (h - n)
#pragma once

#include "ops/activation_math.h"

namespace pymx {
namespace nn {

template <typename A>
PMX_HOST_DEVICE A gate_sigmoid(A x) {
  return act_forward<A>(Act::kSigmoid, x);
}

template <typename A>
PMX_HOST_DEVICE A gate_tanh(A x) {
  return act_forward<A>(Act::kTanh, x);
}

// The saved gates of one LSTM unit: what its gradient reads (Note [Saved gates] in rnn_gates.cc).
template <typename A>
struct LstmGates {
  A in, forget, cand, out;  // sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
  A tanh_c_next;
};

template <typename A>
PMX_HOST_DEVICE A lstm_c_next(A in, A forget, A cand, A c) {
  return forget * c + in * cand;
}

template <typename A>
PMX_HOST_DEVICE A lstm_h_next(A out, A tanh_c_next) {
  return out * tanh_c_next;
}

// Gradients of one LSTM unit's gate pre-activations and of c, from those of h' and c'.
template <typename A>
struct LstmUnitGrad {
  A d_i, d_f, d_g, d_o, d_c;
};

template <typename A>
PMX_HOST_DEVICE LstmUnitGrad<A> lstm_unit_grad(const LstmGates<A>& u, A c, A dh_next, A dc_next) {
  // c' reaches the loss directly and through h' = o tanh(c').
  const A dc_total = dc_next + dh_next * u.out * (A(1) - u.tanh_c_next * u.tanh_c_next);
  LstmUnitGrad<A> g;
  g.d_i = dc_total * u.cand * (u.in * (A(1) - u.in));
  g.d_f = dc_total * c * (u.forget * (A(1) - u.forget));
  g.d_g = dc_total * u.in * (A(1) - u.cand * u.cand);
  g.d_o = dh_next * u.tanh_c_next * (u.out * (A(1) - u.out));
  g.d_c = dc_total * u.forget;
  return g;
}

// The saved gates of one GRU unit (Note [Saved gates] in rnn_gates.cc).
template <typename A>
struct GruGates {
  A reset, update, cand;  // r, z, n
  A h_n;                  // the recurrent projection of n, which r scales
};

template <typename A>
PMX_HOST_DEVICE A gru_cand_pre(A i_n, A reset, A h_n) {
  return i_n + reset * h_n;
}

template <typename A>
PMX_HOST_DEVICE A gru_h_next(A cand, A update, A h) {
  return cand + update * (h - cand);
}

// Gradients of one GRU unit's pre-activations and of h, from that of h'. The r and z parts of
// i2h and h2h share one gradient; the n parts differ: d h_n = r d i_n.
template <typename A>
struct GruUnitGrad {
  A d_r, d_z, d_i_n, d_h_n, d_h;
};

template <typename A>
PMX_HOST_DEVICE GruUnitGrad<A> gru_unit_grad(const GruGates<A>& u, A h, A dh_next) {
  GruUnitGrad<A> g;
  g.d_i_n = dh_next * (A(1) - u.update) * (A(1) - u.cand * u.cand);
  g.d_h_n = g.d_i_n * u.reset;
  g.d_r = g.d_i_n * u.h_n * (u.reset * (A(1) - u.reset));
  g.d_z = dh_next * (h - u.cand) * (u.update * (A(1) - u.update));
  g.d_h = dh_next * u.update;
  return g;
}

}  // namespace nn
}  // namespace pymx
