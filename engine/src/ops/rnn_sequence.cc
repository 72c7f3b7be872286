// One layer and direction of a recurrent layer over a whole sequence as one operator (see Note
// [Recurrent time loop in one operator]); pymx/gluon/rnn/rnn_layer.py calls it on the CPU.
//
// | op                     | inputs                                        | outputs                               |
// |------------------------|-----------------------------------------------|---------------------------------------|
// | rnn_sequence           | i2h, weight, h0, [c0 (lstm) or bias (gru)]    | out, h_last, [c_last (lstm)], [saved] |
// | rnn_sequence_backward  | d_out, d_h_last, [d_c_last], weight, h0, [c0], out, [saved] | d_i2h, d_weight, d_h0, [d_c0 or d_bias] |
//
// Attributes: mode, required: 'lstm', 'gru', 'rnn_tanh' or 'rnn_relu' (G = 4, 3, 1, 1 gate
// blocks); reverse (False: steps 0..T-1; True: T-1..0, for a layer's backward direction, without
// copying the sequence).
// i2h (T, N, G*H) is the input projection of every step with its biases (the layer folds the
// recurrent bias into it, except GRU's: Note [Recurrent bias in the projection] in
// rnn_layer.py); weight (G*H, H) the recurrent weight; bias (G*H,) GRU's recurrent bias, which
// the reset gate scales; h0 and c0 (N, H) the begin states. Gates in the order i, f, g, o (LSTM)
// and r, z, n (GRU). out (T, N, H) holds every step's h (in time order also when reversed),
// h_last and c_last the states after the last step taken. saved is what the backward reads and
// takes no gradient: LSTM (T, N, 6H) the five gates of Note [Saved gates] (rnn_gates.cc) then
// the cell state c_t; GRU (T, N, 4H) those gates. An Elman step's derivative needs only its
// output. Float dtypes, all inputs of one; float16 and bfloat16 compute in float.
//
// Note [Recurrent time loop in one operator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Composed from per-step operators, a layer's time loop records per step a slice of the input
// projection, the recurrent fully_connected and the gate operator; its backward runs per step
// the gate backward, the recurrent product's data and weight gradients and an add accumulating
// the (G*H, H) weight gradient (for H 256, a 1 MB matrix read and written T times). Here one
// operator runs the loop:
//  - forward, per step: the recurrent product and the gate arithmetic of rnn_gates_rows.h,
//    writing h_t straight into out[t]; in float, one parallel loop over blocks of hidden units
//    with the weight packed once per call (Note [Gates beside their product]), else the product
//    through nn::gemm (as fully_connected calls it) and a pass over rows;
//  - backward, steps in reverse: the gate gradients written straight into d_i2h[t] (the layer's
//    input projection takes them as one (T, N, G*H) tensor) and the recurrent data gradient
//    d_gates . weight carried to the step before (in float, in the same blocks of units: the
//    data gradient of a block's units, then their gate gradients of the step before, one
//    parallel loop per step); then the weight gradient as ONE product over
//    all T*N rows, d_weight = d_gates^T . h_prev with h_prev the (T*N, H) stack of each step's
//    previous state (h0 and out shifted by one step), and GRU's bias gradient as one sum over
//    those rows. One (G*H x T*N) . (T*N x H) product keeps the weight gradient's sums in
//    registers over all T*N terms instead of writing the matrix back every N terms.
// Nothing is recorded per step, so autograd and a hybridized graph see one node per layer and
// direction, and the engine pushes one operation instead of ~3T (forward) and ~5T (backward).
// Results equal the composed path's to float rounding: the products sum their terms in the same
// order as nn::gemm's small_gemm_f32 (another kernel where nn::gemm takes one) and the gate
// formulas are the same functions; only sums change order (the weight gradient over all rows at
// once, the state gradients' two terms). Deterministic: a step's rows or units are split into
// parts that write disjoint outputs, and each product sums its terms in a fixed order whatever
// the thread count or the split (Note [Small GEMM], Note [Parallel GEMM]).
// CPU only: a GPU keeps the composed per-step path (rnn_layer.py chooses by device), whose
// per-step kernels are already one launch each; this operator registers no CUDA kernel.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/activation_math.h"
#include "ops/nn_common.h"
#include "ops/rnn_gates_rows.h"
#include "ops/small_gemm.h"
#include "parallel.h"

namespace pymx {
namespace {

using nn::Act;

enum class Mode { kLstm, kGru, kRnnTanh, kRnnRelu };

Mode mode_from_attrs(const Attrs& attrs, const char* op) {
  const std::string mode = attrs.get_str("mode", "");
  if (mode == "lstm") return Mode::kLstm;
  if (mode == "gru") return Mode::kGru;
  if (mode == "rnn_tanh") return Mode::kRnnTanh;
  if (mode == "rnn_relu") return Mode::kRnnRelu;
  PMX_THROW(Status::kInvalidArg, op, ": unknown mode '", mode,
            "'; expected one of 'lstm', 'gru', 'rnn_tanh', 'rnn_relu'");
}

int gate_blocks(Mode mode) {
  switch (mode) {
    case Mode::kLstm: return 4;
    case Mode::kGru: return 3;
    default: return 1;
  }
}

// Values per row of `saved`: LSTM's five gates and c_t, GRU's four gates; Elman saves nothing.
int saved_blocks(Mode mode) {
  switch (mode) {
    case Mode::kLstm: return 6;
    case Mode::kGru: return 4;
    default: return 0;
  }
}

int num_outputs(Mode mode) {
  return mode == Mode::kLstm ? 4 : mode == Mode::kGru ? 3 : 2;
}

// The sizes of one call, and the order in which its forward takes the steps.
struct Sequence {
  Mode mode;
  bool reverse;
  int64_t steps, batch, hidden;
  int64_t gates() const { return gate_blocks(mode) * hidden; }  // G*H
  int64_t saved() const { return saved_blocks(mode) * hidden; }
  // The time index of the forward's s-th step.
  int64_t time_of(int64_t s) const { return reverse ? steps - 1 - s : s; }
  // The time index of the step before t in the forward's order; t must not be its first step.
  int64_t prev_of(int64_t t) const { return reverse ? t + 1 : t - 1; }
  bool is_first(int64_t t) const { return t == time_of(0); }
};

Sequence sequence_of(const Attrs& attrs, const Shape& i2h, const Shape& weight, const char* op) {
  return {mode_from_attrs(attrs, op), attrs.get_bool("reverse", false), i2h[0], i2h[1],
          weight[1]};
}

// Checks the forward's inputs (also those the backward repeats); returns the sequence.
Sequence check_inputs(const Attrs& attrs, const std::vector<Shape>& in,
                      const std::vector<DType>& dt, const char* op) {
  const Mode mode = mode_from_attrs(attrs, op);
  const size_t expected = mode == Mode::kRnnTanh || mode == Mode::kRnnRelu ? 3 : 4;
  const char* names = mode == Mode::kLstm  ? "i2h, weight, h0, c0"
                      : mode == Mode::kGru ? "i2h, weight, h0, bias"
                                           : "i2h, weight, h0";
  PMX_CHECK(in.size() == expected, op, ": mode '", attrs.get_str("mode", ""), "' takes ",
            expected, " inputs (", names, "), got ", in.size());
  nn::check_same_float(dt, op);
  const Shape &i2h = in[0], &weight = in[1], &h0 = in[2];
  const int blocks = gate_blocks(mode);
  PMX_CHECK(weight.size() == 2 && weight[0] == blocks * weight[1], op,
            ": weight must have shape (", blocks, " * hidden_size, hidden_size), got ",
            shape_str(weight));
  PMX_CHECK(i2h.size() == 3 && i2h[2] == weight[0], op, ": i2h must have shape (T, N, ",
            weight[0], ") for weight ", shape_str(weight), ", got ", shape_str(i2h));
  const Shape state = {i2h[1], weight[1]};
  PMX_CHECK(h0 == state, op, ": h0 must have shape ", shape_str(state), " for i2h ",
            shape_str(i2h), " and weight ", shape_str(weight), ", got ", shape_str(h0));
  if (mode == Mode::kLstm) {
    PMX_CHECK(in[3] == state, op, ": c0 must have shape ", shape_str(state), ", got ",
              shape_str(in[3]));
  }
  if (mode == Mode::kGru) {
    PMX_CHECK(in[3] == Shape({weight[0]}), op, ": bias must have shape (", weight[0], ",), got ",
              shape_str(in[3]));
  }
  return sequence_of(attrs, i2h, weight, op);
}

void forward_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                   std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const Sequence seq = check_inputs(attrs, in, dt, "rnn_sequence");
  const Shape state = {seq.batch, seq.hidden};
  *out = {{seq.steps, seq.batch, seq.hidden}, state};
  if (seq.mode == Mode::kLstm) out->push_back(state);
  if (seq.saved() > 0) out->push_back({seq.steps, seq.batch, seq.saved()});
  *out_dt = std::vector<DType>(out->size(), dt[0]);
}

// Scratch arrays of T carved from one workspace, each starting on a cache line.
template <typename T>
class Scratch {
 public:
  explicit Scratch(std::vector<int64_t> sizes) : sizes_(std::move(sizes)) {}
  size_t bytes() const {
    size_t total = 0;
    for (int64_t n : sizes_) total += padded(n);
    return total;
  }
  std::vector<T*> carve(void* space) const {
    std::vector<T*> parts;
    char* p = static_cast<char*>(space);
    for (int64_t n : sizes_) {
      parts.push_back(reinterpret_cast<T*>(p));
      p += padded(n);
    }
    return parts;
  }

 private:
  static size_t padded(int64_t n) { return (static_cast<size_t>(n) * sizeof(T) + 63) / 64 * 64; }
  std::vector<int64_t> sizes_;
};

// ---- forward ------------------------------------------------------------------------------------

// h' of `units` hidden units of one Elman row from their projections.
template <typename T>
void elman_units_forward(Act act, const T* i2h, const T* h2h, T* h_next, nn::acc_t<T>* scratch,
                         int64_t units) {
  using A = nn::acc_t<T>;
  for (int64_t j = 0; j < units; ++j)
    scratch[j] = static_cast<A>(i2h[j]) + static_cast<A>(h2h[j]);
  nn::act_forward_span<A>(act, scratch, scratch, units);
  for (int64_t j = 0; j < units; ++j) h_next[j] = static_cast<T>(scratch[j]);
}

// Where one forward step reads and writes: its time index t, the previous state and the step's
// slices of i2h, out and saved.
template <typename T>
struct ForwardStep {
  bool first;
  const T *h_prev, *x, *saved_prev;
  T *h_next, *saved_t;
};

template <typename T>
ForwardStep<T> forward_step(const Sequence& seq, int64_t s, const T* i2h, const T* h0, T* h_out,
                            T* saved) {
  const int64_t N = seq.batch, H = seq.hidden, S = seq.saved();
  const int64_t t = seq.time_of(s);
  const bool first = seq.is_first(t);
  const int64_t prev = first ? 0 : seq.prev_of(t);
  return {first,
          first ? h0 : h_out + prev * N * H,
          i2h + t * N * seq.gates(),
          saved && !first ? saved + prev * N * S : nullptr,
          h_out + t * N * H,
          saved ? saved + t * N * S : nullptr};
}

// The gates of hidden units [u0, u0 + units) of row n, from their recurrent projections h2h
// (gate g's values start g * h2h_stride in) and the step's input projections.
template <typename T>
void units_forward(const Sequence& seq, const ForwardStep<T>& step, const T* c0, int64_t n,
                   int64_t u0, int64_t units, const T* h2h, int64_t h2h_stride,
                   nn::acc_t<T>* scratch) {
  const int64_t H = seq.hidden, GH = seq.gates(), S = seq.saved();
  const T* x = step.x + n * GH + u0;
  T* h_next = step.h_next + n * H + u0;
  switch (seq.mode) {
    case Mode::kLstm: {
      // c_t is stored after the five gates of its row.
      const T* c_prev = step.first ? c0 + n * H + u0 : step.saved_prev + n * S + 5 * H + u0;
      T* gates = step.saved_t + n * S + u0;
      nn::lstm_units_forward<T>(x, H, h2h, h2h_stride, c_prev, h_next, gates + 5 * H, gates, H,
                                scratch, units);
      break;
    }
    case Mode::kGru:
      nn::gru_units_forward<T>(x, H, h2h, h2h_stride, step.h_prev + n * H + u0, h_next,
                               step.saved_t + n * S + u0, H, scratch, units);
      break;
    default:
      elman_units_forward<T>(seq.mode == Mode::kRnnRelu ? Act::kRelu : Act::kTanh, x, h2h, h_next,
                             scratch, units);
  }
}

// The steps through nn::gemm and a pass over rows: any float dtype, any CPU.
template <typename T>
void steps_through_gemm(const OpContext& ctx, const Sequence& seq, const T* i2h, const T* weight,
                        const T* h0, const T* c0, const T* bias, T* h_out, T* saved) {
  using A = nn::acc_t<T>;
  const int64_t N = seq.batch, H = seq.hidden, GH = seq.gates();
  const Scratch<T> scratch({N * GH});
  T* h2h = scratch.carve(ctx.workspace(scratch.bytes()))[0];
  for (int64_t s = 0; s < seq.steps; ++s) {
    const ForwardStep<T> step = forward_step(seq, s, i2h, h0, h_out, saved);
    // The recurrent product, as fully_connected computes it (GRU's with its bias).
    if (bias) {
      for (int64_t n = 0; n < N; ++n) std::copy_n(bias, GH, h2h + n * GH);
    }
    nn::gemm(false, true, N, GH, H, A(1), step.h_prev, H, weight, H, A(bias ? 1 : 0), h2h, GH);
    // Captures by value: through references GCC reloads the pointers on every element.
    parallel_for(0, N, nn::gate_row_grain(H), [=](int64_t lo, int64_t hi) {
      std::vector<A> row(5 * H);  // the gate functions' scratch row
      for (int64_t n = lo; n < hi; ++n)
        units_forward<T>(seq, step, c0, n, 0, H, h2h + n * GH, H, row.data());
    });
  }
}

// Note [Gates beside their product]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Through nn::gemm a float step is two parallel loops: small_gemm_f32 splits the product's columns
// across the threads, packing (transposing) the whole recurrent weight again every step (1 MB for
// LSTM(256)), then a loop over rows reads the (N, G*H) product back for the gates. Here the
// weight is packed once per call (small_gemm_pack_bt), its rows reordered into blocks of U hidden
// units holding the G gates of the same units: block b, gate g, unit u is packed column
// (b * G + g) * U + u, zero past H. A step is one parallel loop over the blocks: each block's
// product (N x G*U, small_gemm_packed_f32) goes into that block's scratch and its units' gates
// are computed from it while it is in cache, writing h_t, c_t and the saved gates.
// U is a whole number of panels, about H / threads, so each thread takes one block; sizes left
// over go to a last, narrower block. The values do not depend on U or the thread count: each
// product is small_gemm_f32's value bitwise (its k terms summed in order 0..k-1; nn::gemm takes
// small_gemm_f32 for the recurrent product at most batch sizes, and another kernel, to float
// rounding, at the rest), the gates are per-unit formulas, and libmvec computes each element
// alike wherever a span starts (activation_vector.h). The backward's steps take the same blocks
// (backward_steps_in_unit_blocks).
// Measured on two AVX-512 cores shared with other jobs (load 3-5), LSTM(256) at batch 32: a
// forward step's CPU time on one core 122 -> 110 us (the product ~75 us at ~225 GFLOP/s, the gates
// ~20 us; batch 4: 30 -> 15 us, H 1024: 1960 -> 1450 us); bench/measure_pymx.py lstm --mode
// infer --hybridize on both cores ~1340 -> ~1640 samples/s (medians of 4 interleaved runs).

// Hidden units per block of Note [Gates beside their product]: about H / threads, whole panels.
int64_t units_per_block(int64_t hidden) {
  const int64_t width = nn::small_gemm_panel_width();
  const int64_t per_thread = (hidden + parallel_max_threads() - 1) / parallel_max_threads();
  return (per_thread + width - 1) / width * width;
}

void steps_in_unit_blocks(const OpContext& ctx, const Sequence& seq, const float* i2h,
                          const float* weight, const float* h0, const float* c0,
                          const float* bias, float* h_out, float* saved) {
  const int64_t N = seq.batch, H = seq.hidden, G = gate_blocks(seq.mode);
  const int64_t width = nn::small_gemm_panel_width();
  const int64_t U = units_per_block(H);
  const int64_t blocks = (H + U - 1) / U, columns = blocks * G * U;
  const Scratch<float> scratch({columns * H, N * columns, blocks * 5 * U});
  const std::vector<float*> parts = scratch.carve(ctx.workspace(scratch.bytes()));
  float* packed = parts[0];
  float* h2h = parts[1];  // block b's product: N x G*U values from h2h + b * N * G * U
  float* gate_scratch = parts[2];
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t u0 = b * U, units = std::min(U, H - u0);
    for (int64_t g = 0; g < G; ++g) {
      float* panels = packed + (b * G + g) * U * H;
      if (units < U) std::fill_n(panels, U * H, 0.0f);
      nn::small_gemm_pack_bt(units, H, weight + (g * H + u0) * H, H, panels);
    }
  }
  const int64_t panels_per_block = G * U / width;
  for (int64_t s = 0; s < seq.steps; ++s) {
    const ForwardStep<float> step = forward_step(seq, s, i2h, h0, h_out, saved);
    parallel_for(0, blocks, 1, [=](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) {
        const int64_t u0 = b * U, units = std::min(U, H - u0);
        float* product = h2h + b * N * G * U;
        // The block's panels are its product's columns 0..G*U.
        nn::small_gemm_packed_f32(N, 0, panels_per_block, H, step.h_prev, H,
                                  packed + b * G * U * H, product, G * U);
        for (int64_t n = 0; n < N; ++n) {
          float* row = product + n * G * U;
          if (bias) {  // as fully_connected adds it: one rounding of product + bias
            for (int64_t g = 0; g < G; ++g)
              for (int64_t j = 0; j < units; ++j) row[g * U + j] += bias[g * H + u0 + j];
          }
          units_forward<float>(seq, step, c0, n, u0, units, row, U, gate_scratch + b * 5 * U);
        }
      }
    });
  }
}

template <typename T>
void sequence_forward(const OpContext& ctx, const Sequence& seq, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  const int64_t N = seq.batch, H = seq.hidden, S = seq.saved();
  const T* i2h = in[0].data<T>();
  const T* weight = in[1].data<T>();
  const T* h0 = in[2].data<T>();
  const T* c0 = seq.mode == Mode::kLstm ? in[3].data<T>() : nullptr;
  const T* bias = seq.mode == Mode::kGru ? in[3].data<T>() : nullptr;
  T* h_out = out[0].data<T>();
  T* saved = S > 0 ? out.back().data<T>() : nullptr;
  if (N * H == 0) return;
  if (seq.steps == 0) {  // the states pass through
    std::copy_n(h0, N * H, out[1].data<T>());
    if (c0) std::copy_n(c0, N * H, out[2].data<T>());
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (nn::fma_level() != nn::FmaLevel::kNone) {
      steps_in_unit_blocks(ctx, seq, i2h, weight, h0, c0, bias, h_out, saved);
    } else {
      steps_through_gemm<T>(ctx, seq, i2h, weight, h0, c0, bias, h_out, saved);
    }
  } else {
    steps_through_gemm<T>(ctx, seq, i2h, weight, h0, c0, bias, h_out, saved);
  }
  const int64_t last = seq.time_of(seq.steps - 1);
  std::copy_n(h_out + last * N * H, N * H, out[1].data<T>());
  if (seq.mode == Mode::kLstm) {
    T* c_last = out[2].data<T>();
    for (int64_t n = 0; n < N; ++n)
      std::copy_n(saved + (last * N + n) * S + 5 * H, H, c_last + n * H);
  }
}

void forward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const Sequence seq = sequence_of(*ctx.attrs, in[0].shape, in[1].shape, "rnn_sequence");
  PMX_FLOAT_SWITCH(in[0].dtype, T, { sequence_forward<T>(ctx, seq, in, out); });
}

// ---- backward -----------------------------------------------------------------------------------

// The backward's inputs by name: the gradients of the forward's outputs but `saved`, then the
// forward's weight, begin states, out and saved.
struct BackwardInputs {
  int d_out = 0, d_h_last = 1, d_c_last = -1, weight, h0, c0 = -1, out, saved = -1;
  explicit BackwardInputs(Mode mode) {
    int i = 2;
    if (mode == Mode::kLstm) d_c_last = i++;
    weight = i++;
    h0 = i++;
    if (mode == Mode::kLstm) c0 = i++;
    out = i++;
    if (saved_blocks(mode) > 0) saved = i++;
  }
  int count() const { return saved >= 0 ? saved + 1 : out + 1; }
};

void backward_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                    std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const char* op = "rnn_sequence_backward";
  const Mode mode = mode_from_attrs(attrs, op);
  const BackwardInputs at(mode);
  PMX_CHECK(static_cast<int>(in.size()) == at.count(), op, ": mode '",
            attrs.get_str("mode", ""), "' takes ", at.count(), " inputs, got ", in.size());
  nn::check_same_float(dt, op);
  const Shape& weight = in[at.weight];
  const Shape& y = in[at.out];
  PMX_CHECK(weight.size() == 2 && weight[0] == gate_blocks(mode) * weight[1] && y.size() == 3 &&
                y[2] == weight[1],
            op, ": out ", shape_str(y), " does not fit weight ", shape_str(weight));
  const Sequence seq{mode, attrs.get_bool("reverse", false), y[0], y[1], weight[1]};
  const Shape state = {seq.batch, seq.hidden};
  const auto expect = [&](int index, const Shape& shape, const char* name) {
    PMX_CHECK(in[index] == shape, op, ": ", name, " must have shape ", shape_str(shape), ", got ",
              shape_str(in[index]));
  };
  expect(at.d_out, y, "d_out");
  expect(at.d_h_last, state, "d_h_last");
  expect(at.h0, state, "h0");
  if (mode == Mode::kLstm) {
    expect(at.d_c_last, state, "d_c_last");
    expect(at.c0, state, "c0");
  }
  if (at.saved >= 0) expect(at.saved, {seq.steps, seq.batch, seq.saved()}, "saved");
  *out = {{seq.steps, seq.batch, seq.gates()}, weight, state};
  if (mode == Mode::kLstm) out->push_back(state);
  if (mode == Mode::kGru) out->push_back({seq.gates()});
  *out_dt = std::vector<DType>(out->size(), dt[0]);
}

// Where one backward step reads and writes: the forward's step at time t, its previous state and
// saved values, the gradients of its output, and where its gate gradients go.
template <typename T>
struct BackwardStep {
  bool first;
  const T *h_prev, *dy, *y, *saved_t, *saved_prev;
  T *dx, *dr;
};

template <typename T>
BackwardStep<T> backward_step(const Sequence& seq, int64_t s, const T* d_out, const T* h0,
                              const T* h_out, const T* saved, T* d_i2h, T* d_h2h) {
  const int64_t N = seq.batch, H = seq.hidden, GH = seq.gates(), S = seq.saved();
  const int64_t t = seq.time_of(s);
  const bool first = seq.is_first(t);
  const int64_t prev = first ? 0 : seq.prev_of(t);
  return {first,
          first ? h0 : h_out + prev * N * H,
          d_out + t * N * H,
          h_out + t * N * H,
          saved ? saved + t * N * S : nullptr,
          saved && !first ? saved + prev * N * S : nullptr,
          d_i2h + t * N * GH,
          d_h2h + t * N * GH};
}

// The gate gradients of hidden units [u0, u0 + units) of row n from d_total, their output's whole
// gradient (`units` values); updates d_c (LSTM), writes d_h's direct part (GRU).
template <typename T>
void units_backward(const Sequence& seq, const BackwardStep<T>& step, const T* c0, int64_t n,
                    int64_t u0, int64_t units, const T* d_total, T* d_h, T* d_c) {
  using A = nn::acc_t<T>;
  const int64_t H = seq.hidden, GH = seq.gates(), S = seq.saved();
  T* dx = step.dx + n * GH + u0;
  switch (seq.mode) {
    case Mode::kLstm: {
      const T* c_prev = step.first ? c0 + n * H + u0 : step.saved_prev + n * S + 5 * H + u0;
      nn::lstm_units_backward<T>(d_total, d_c + n * H + u0, c_prev, step.saved_t + n * S + u0, dx,
                                 d_c + n * H + u0, H, units);
      break;
    }
    case Mode::kGru:  // d_h gets the direct part; the recurrent product adds the rest
      nn::gru_units_backward<T>(d_total, step.h_prev + n * H + u0, step.saved_t + n * S + u0, dx,
                                step.dr + n * GH + u0, d_h + n * H + u0, H, units);
      break;
    default: {
      const Act act = seq.mode == Mode::kRnnRelu ? Act::kRelu : Act::kTanh;
      const T* y = step.y + n * H + u0;
      for (int64_t j = 0; j < units; ++j) {
        const A out_j = static_cast<A>(y[j]);
        dx[j] = static_cast<T>(static_cast<A>(d_total[j]) *
                               nn::act_derivative<A>(act, out_j, out_j));
      }
    }
  }
}

// The backward's steps through nn::gemm and a pass over rows: any float dtype, any CPU. d_total
// holds N * H values.
template <typename T>
void backward_steps_through_gemm(const Sequence& seq, const T* d_out, const T* weight,
                                 const T* h0, const T* c0, const T* h_out, const T* saved,
                                 T* d_i2h, T* d_h2h, T* d_h, T* d_c, T* d_total) {
  using A = nn::acc_t<T>;
  const int64_t N = seq.batch, H = seq.hidden, GH = seq.gates();
  for (int64_t s = seq.steps - 1; s >= 0; --s) {
    const BackwardStep<T> step = backward_step(seq, s, d_out, h0, h_out, saved, d_i2h, d_h2h);
    for (int64_t k = 0; k < N * H; ++k)
      d_total[k] = static_cast<T>(static_cast<A>(step.dy[k]) + static_cast<A>(d_h[k]));
    parallel_for(0, N, nn::gate_row_grain(H), [=](int64_t lo, int64_t hi) {
      for (int64_t n = lo; n < hi; ++n)
        units_backward<T>(seq, step, c0, n, 0, H, d_total + n * H, d_h, d_c);
    });
    // The recurrent data gradient, d_h2h . weight: replaces d_h (LSTM, Elman) or adds to the
    // direct part (GRU).
    nn::gemm(false, false, N, H, GH, A(1), step.dr, GH, weight, H,
             A(seq.mode == Mode::kGru ? 1 : 0), d_h, H);
  }
}

// The backward's steps in blocks of hidden units (Note [Gates beside their product]): one
// parallel loop per step over the blocks, each computing the recurrent data gradient of its
// units from the gate gradients of the step after (small_gemm_f32 on the block's columns of the
// weight, a value independent of the split) and then its units' gate gradients of this step.
// A last loop gives h0's gradient. d_total holds U values per block.
void backward_steps_in_unit_blocks(const Sequence& seq, const float* d_out, const float* weight,
                                   const float* h0, const float* c0, const float* h_out,
                                   const float* saved, float* d_i2h, float* d_h2h, float* d_h,
                                   float* d_c, float* d_total) {
  const int64_t N = seq.batch, H = seq.hidden, GH = seq.gates();
  const int64_t U = units_per_block(H), blocks = (H + U - 1) / U;
  const float beta = seq.mode == Mode::kGru ? 1.0f : 0.0f;  // GRU: d_h holds the direct part
  for (int64_t s = seq.steps - 1; s >= -1; --s) {
    const float* dr_after = s + 1 < seq.steps ? d_h2h + seq.time_of(s + 1) * N * GH : nullptr;
    const BackwardStep<float> step =
        s >= 0 ? backward_step(seq, s, d_out, h0, h_out, saved, d_i2h, d_h2h)
               : BackwardStep<float>{};
    parallel_for(0, blocks, 1, [=](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) {
        const int64_t u0 = b * U, units = std::min(U, H - u0);
        if (dr_after) {  // nested in this loop, small_gemm_f32 runs on this thread
          nn::small_gemm_f32(false, false, N, units, GH, 1.0f, dr_after, GH, weight + u0, H, beta,
                             d_h + u0, H);
        }
        if (s < 0) continue;
        float* total = d_total + b * U;
        for (int64_t n = 0; n < N; ++n) {
          for (int64_t j = 0; j < units; ++j)
            total[j] = step.dy[n * H + u0 + j] + d_h[n * H + u0 + j];
          units_backward<float>(seq, step, c0, n, u0, units, total, d_h, d_c);
        }
      }
    });
  }
}

template <typename T>
void sequence_backward(const OpContext& ctx, const Sequence& seq, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out) {
  using A = nn::acc_t<T>;
  const BackwardInputs at(seq.mode);
  const int64_t N = seq.batch, H = seq.hidden, GH = seq.gates();
  const int64_t rows = seq.steps * N;  // of the whole sequence
  const T* d_out = in[at.d_out].data<T>();
  const T* weight = in[at.weight].data<T>();
  const T* h0 = in[at.h0].data<T>();
  const T* c0 = seq.mode == Mode::kLstm ? in[at.c0].data<T>() : nullptr;
  const T* h_out = in[at.out].data<T>();
  const T* saved = at.saved >= 0 ? in[at.saved].data<T>() : nullptr;
  T* d_i2h = out[0].data<T>();
  T* d_weight = out[1].data<T>();
  // The gradients reaching the current step's begin states from the steps after it: first those
  // of h_last and c_last, at the end those of h0 and c0.
  T* d_h = out[2].data<T>();
  T* d_c = seq.mode == Mode::kLstm ? out[3].data<T>() : nullptr;
  T* d_bias = seq.mode == Mode::kGru ? out[3].data<T>() : nullptr;
  std::copy_n(in[at.d_h_last].data<T>(), N * H, d_h);
  if (d_c) std::copy_n(in[at.d_c_last].data<T>(), N * H, d_c);
  if (rows * H == 0) {  // nothing ran: no gradient reaches the weights
    std::fill_n(d_weight, GH * H, static_cast<T>(0.0f));
    if (d_bias) std::fill_n(d_bias, GH, static_cast<T>(0.0f));
    return;
  }
  // d_total: the output gradient of a step (all rows) or of a block of units (one row per
  // block); d_h2h: GRU's recurrent projection gradients, which differ from d_i2h in the n gate;
  // h_prev: each step's previous state, in time order.
  const int64_t U = units_per_block(H), blocks = (H + U - 1) / U;
  const Scratch<T> scratch(
      {std::max(N * H, blocks * U), seq.mode == Mode::kGru ? rows * GH : 0, rows * H});
  const std::vector<T*> parts = scratch.carve(ctx.workspace(scratch.bytes()));
  T* d_total = parts[0];
  T* d_h2h = seq.mode == Mode::kGru ? parts[1] : d_i2h;  // LSTM, Elman: the same gradient
  T* h_prev_stack = parts[2];
  if constexpr (std::is_same_v<T, float>) {
    if (nn::fma_level() != nn::FmaLevel::kNone) {
      backward_steps_in_unit_blocks(seq, d_out, weight, h0, c0, h_out, saved, d_i2h, d_h2h, d_h,
                                    d_c, d_total);
    } else {
      backward_steps_through_gemm<T>(seq, d_out, weight, h0, c0, h_out, saved, d_i2h, d_h2h, d_h,
                                     d_c, d_total);
    }
  } else {
    backward_steps_through_gemm<T>(seq, d_out, weight, h0, c0, h_out, saved, d_i2h, d_h2h, d_h,
                                   d_c, d_total);
  }
  // The previous state of every step in time order: h0 where the forward began, out shifted by
  // one step elsewhere.
  const int64_t begin = seq.time_of(0);
  std::copy_n(h0, N * H, h_prev_stack + begin * N * H);
  std::copy_n(h_out + (seq.reverse ? N * H : 0), (rows - N) * H,
              h_prev_stack + (seq.reverse ? 0 : N * H));
  // d_h2h is read in place although its rows are 4 KB apart for LSTM(256), a stride that maps a
  // column's values to one cache set: small_gemm_f32 on a copy with an odd number of cache lines
  // per row ran 10-15 % faster (2.8 -> 2.5 ms, one core), but for LSTM and Elman (d_h2h is
  // d_i2h) writing that copy cost more than it saved (the backward's step on one core ~177 ->
  // ~184 us, bench/measure_pymx.py lstm --mode train on two cores ~827 -> ~802 samples/s), and
  // for GRU's own stack and a padded h_prev the gain was within the noise.
  nn::gemm(true, false, GH, H, rows, A(1), d_h2h, GH, h_prev_stack, H, A(0), d_weight, H);
  if (d_bias) {  // the sum over rows in order, as fully_connected_backward sums its bias
    std::vector<A> sums(GH, A(0));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < GH; ++k) sums[k] += static_cast<A>(d_h2h[r * GH + k]);
    for (int64_t k = 0; k < GH; ++k) d_bias[k] = static_cast<T>(sums[k]);
  }
}

void backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  const char* op = "rnn_sequence_backward";
  const Mode mode = mode_from_attrs(*ctx.attrs, op);
  const BackwardInputs at(mode);
  const Shape& y = in[at.out].shape;
  const Sequence seq{mode, ctx.attrs->get_bool("reverse", false), y[0], y[1], y[2]};
  PMX_FLOAT_SWITCH(in[0].dtype, T, { sequence_backward<T>(ctx, seq, in, out); });
}

std::vector<NDArray> sequence_gradient(const GradContext& ctx) {
  const Mode mode = mode_from_attrs(ctx.attrs, "rnn_sequence");
  std::vector<NDArray> in = {ctx.out_grads[0], ctx.out_grads[1]};  // d_out, d_h_last
  if (mode == Mode::kLstm) in.push_back(ctx.out_grads[2]);         // d_c_last
  in.push_back(ctx.inputs[1]);                                     // weight
  in.push_back(ctx.inputs[2]);                                     // h0
  if (mode == Mode::kLstm) in.push_back(ctx.inputs[3]);            // c0
  in.push_back(ctx.outputs[0]);                                    // out
  if (saved_blocks(mode) > 0) in.push_back(ctx.outputs.back());    // saved
  // The gradients, in the order of the forward's inputs, go where autograd offers.
  return invoke(op_registry::get("rnn_sequence_backward"), in, ctx.attrs,
                ctx.out_grads[0].device(), ctx.grad_targets);
}

PMX_REGISTER_OP(rnn_sequence)
    .set_num_inputs(-1)
    .set_num_outputs([](const Attrs& a) { return num_outputs(mode_from_attrs(a, "rnn_sequence")); })
    .set_infer(forward_infer)
    .set_cpu(forward_compute)
    .set_gradient(sequence_gradient)
    // The weight, the begin states (GRU's bias too, input 3 in that mode), out, and saved
    // (output 2 or 3; LSTM's c_last, output 2, comes along).
    .set_grad_uses({1, 2, 3}, {0, 2, 3});

PMX_REGISTER_OP(rnn_sequence_backward)
    .set_num_inputs(-1)
    .set_num_outputs([](const Attrs& a) {
      return num_outputs(mode_from_attrs(a, "rnn_sequence_backward")) == 2 ? 3 : 4;
    })
    .set_infer(backward_infer)
    .set_cpu(backward_compute);

}  // namespace
}  // namespace pymx
