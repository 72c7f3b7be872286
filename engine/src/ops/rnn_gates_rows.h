// The CPU gate arithmetic of LSTM and GRU steps, one row (one sequence of the batch) at a time:
// what the lstm_gates / gru_gates operators (rnn_gates.cc) and the whole-sequence rnn_sequence
// operator (rnn_sequence.cc) run per row, so that both give the same values. The per-unit
// formulas are rnn_gates_math.h's; the layout of the saved gates is Note [Saved gates] and the
// gate-by-gate order Note [Gate loops per row], both in rnn_gates.cc. Every pointer is one row:
// i2h and h2h have gates * H values, states H, the saved gates 5H (LSTM) or 4H (GRU). `scratch`
// holds 5H (LSTM) or 4H (GRU) values of the arithmetic type.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/activation_vector.h"
#include "ops/nn_common.h"
#include "ops/rnn_gates_math.h"

namespace pymx {
namespace nn {

// Rows per parallel chunk of a step's gate arithmetic: each hidden unit costs two tanh and three
// exp calls, tens of ns, and a chunk should hold about 2048 units.
inline int64_t gate_row_grain(int64_t hidden) {
  constexpr int64_t kGrainUnits = 2048;
  return std::max<int64_t>(1, kGrainUnits / std::max<int64_t>(hidden, 1));
}

// h' and c' of `units` hidden units of one LSTM row from their projections and c; saves the 5
// activated gates. Each gate's values start `stride` apart: i2h_stride in i2h, h2h_stride in h2h
// and gates_stride in gates (a row's H, or the width of a block of units, Note [Gates beside
// their product] in rnn_sequence.cc). `scratch` holds 5 * units values.
template <typename T, typename A = acc_t<T>>
void lstm_units_forward(const T* i2h, int64_t i2h_stride, const T* h2h, int64_t h2h_stride,
                        const T* c, T* h_next, T* c_next, T* gates, int64_t gates_stride,
                        A* scratch, int64_t units) {
  const int64_t U = units;
  A* v = scratch;  // i, f, g, o, then c' and tanh(c')
  for (int64_t g = 0; g < 4; ++g) {
    for (int64_t j = 0; j < U; ++j)
      v[g * U + j] = static_cast<A>(i2h[g * i2h_stride + j]) +
                     static_cast<A>(h2h[g * h2h_stride + j]);
  }
  act_forward_span<A>(Act::kSigmoid, v, v, 2 * U);
  act_forward_span<A>(Act::kTanh, v + 2 * U, v + 2 * U, U);
  act_forward_span<A>(Act::kSigmoid, v + 3 * U, v + 3 * U, U);
  for (int64_t j = 0; j < U; ++j) {
    v[4 * U + j] = lstm_c_next(v[j], v[U + j], v[2 * U + j], static_cast<A>(c[j]));
    c_next[j] = static_cast<T>(v[4 * U + j]);
  }
  act_forward_span<A>(Act::kTanh, v + 4 * U, v + 4 * U, U);
  for (int64_t j = 0; j < U; ++j)
    h_next[j] = static_cast<T>(lstm_h_next(v[3 * U + j], v[4 * U + j]));
  for (int64_t g = 0; g < 5; ++g) {
    for (int64_t j = 0; j < U; ++j) gates[g * gates_stride + j] = static_cast<T>(v[g * U + j]);
  }
}

// h' and c' of one LSTM row from its projections and c; saves the 5H activated gates.
template <typename T, typename A = acc_t<T>>
void lstm_row_forward(const T* i2h, const T* h2h, const T* c, T* h_next, T* c_next, T* gates,
                      A* scratch, int64_t hidden) {
  lstm_units_forward<T, A>(i2h, hidden, h2h, hidden, c, h_next, c_next, gates, hidden, scratch,
                           hidden);
}

// The gradients of `units` hidden units of one LSTM row: of their gate pre-activations (4 gates,
// `stride` apart in d_gates, as the 5 saved gates are in gates) and of c, from those of h' and c'.
template <typename T, typename A = acc_t<T>>
void lstm_units_backward(const T* dh_next, const T* dc_next, const T* c, const T* gates,
                         T* d_gates, T* d_c, int64_t stride, int64_t units) {
  const int64_t H = stride;
  for (int64_t j = 0; j < units; ++j) {
    const LstmGates<A> u{static_cast<A>(gates[j]), static_cast<A>(gates[H + j]),
                         static_cast<A>(gates[2 * H + j]), static_cast<A>(gates[3 * H + j]),
                         static_cast<A>(gates[4 * H + j])};
    const LstmUnitGrad<A> g = lstm_unit_grad<A>(u, static_cast<A>(c[j]),
                                                static_cast<A>(dh_next[j]),
                                                static_cast<A>(dc_next[j]));
    d_gates[j] = static_cast<T>(g.d_i);
    d_gates[H + j] = static_cast<T>(g.d_f);
    d_gates[2 * H + j] = static_cast<T>(g.d_g);
    d_gates[3 * H + j] = static_cast<T>(g.d_o);
    d_c[j] = static_cast<T>(g.d_c);
  }
}

// The gradients of one LSTM row's gate pre-activations (4H) and of c, from those of h' and c'.
template <typename T, typename A = acc_t<T>>
void lstm_row_backward(const T* dh_next, const T* dc_next, const T* c, const T* gates, T* d_gates,
                       T* d_c, int64_t hidden) {
  lstm_units_backward<T, A>(dh_next, dc_next, c, gates, d_gates, d_c, hidden, hidden);
}

// h' of `units` hidden units of one GRU row from their projections (h2h with its bias) and h;
// saves the 4 gates. Strides as for lstm_units_forward; `scratch` holds 4 * units values.
template <typename T, typename A = acc_t<T>>
void gru_units_forward(const T* i2h, int64_t i2h_stride, const T* h2h, int64_t h2h_stride,
                       const T* h, T* h_next, T* gates, int64_t gates_stride, A* scratch,
                       int64_t units) {
  const int64_t U = units;
  A* v = scratch;  // r, z, n, h_n
  for (int64_t g = 0; g < 2; ++g) {
    for (int64_t j = 0; j < U; ++j)
      v[g * U + j] = static_cast<A>(i2h[g * i2h_stride + j]) +
                     static_cast<A>(h2h[g * h2h_stride + j]);
  }
  act_forward_span<A>(Act::kSigmoid, v, v, 2 * U);
  for (int64_t j = 0; j < U; ++j) {
    v[3 * U + j] = static_cast<A>(h2h[2 * h2h_stride + j]);
    v[2 * U + j] = gru_cand_pre(static_cast<A>(i2h[2 * i2h_stride + j]), v[j], v[3 * U + j]);
  }
  act_forward_span<A>(Act::kTanh, v + 2 * U, v + 2 * U, U);
  for (int64_t j = 0; j < U; ++j)
    h_next[j] = static_cast<T>(gru_h_next(v[2 * U + j], v[U + j], static_cast<A>(h[j])));
  for (int64_t g = 0; g < 4; ++g) {
    for (int64_t j = 0; j < U; ++j) gates[g * gates_stride + j] = static_cast<T>(v[g * U + j]);
  }
}

// h' of one GRU row from its projections (h2h with its bias) and h; saves the 4H gates.
template <typename T, typename A = acc_t<T>>
void gru_row_forward(const T* i2h, const T* h2h, const T* h, T* h_next, T* gates, A* scratch,
                     int64_t hidden) {
  gru_units_forward<T, A>(i2h, hidden, h2h, hidden, h, h_next, gates, hidden, scratch, hidden);
}

// The gradients of `units` hidden units of one GRU row: of their input and recurrent projections
// (3 gates, `stride` apart, as the 4 saved gates are in gates) and of h, from that of h'.
template <typename T, typename A = acc_t<T>>
void gru_units_backward(const T* dh_next, const T* h, const T* gates, T* d_i2h, T* d_h2h, T* d_h,
                        int64_t stride, int64_t units) {
  const int64_t H = stride;
  for (int64_t j = 0; j < units; ++j) {
    const GruGates<A> u{static_cast<A>(gates[j]), static_cast<A>(gates[H + j]),
                        static_cast<A>(gates[2 * H + j]), static_cast<A>(gates[3 * H + j])};
    const GruUnitGrad<A> g = gru_unit_grad<A>(u, static_cast<A>(h[j]),
                                              static_cast<A>(dh_next[j]));
    d_i2h[j] = d_h2h[j] = static_cast<T>(g.d_r);
    d_i2h[H + j] = d_h2h[H + j] = static_cast<T>(g.d_z);
    d_i2h[2 * H + j] = static_cast<T>(g.d_i_n);
    d_h2h[2 * H + j] = static_cast<T>(g.d_h_n);
    d_h[j] = static_cast<T>(g.d_h);
  }
}

// The gradients of one GRU row's input projection, recurrent projection (3H each) and h, from
// that of h'.
template <typename T, typename A = acc_t<T>>
void gru_row_backward(const T* dh_next, const T* h, const T* gates, T* d_i2h, T* d_h2h, T* d_h,
                      int64_t hidden) {
  gru_units_backward<T, A>(dh_next, h, gates, d_i2h, d_h2h, d_h, hidden, hidden);
}

}  // namespace nn
}  // namespace pymx
