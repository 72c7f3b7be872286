// The gate arithmetic of one LSTM or GRU step as one operator each (formulas: rnn_gates_math.h;
// the CPU's row loops, shared with rnn_sequence.cc: rnn_gates_rows.h), called by
// pymx/gluon/rnn/rnn_cell.py's lstm_step and gru_step in place of ~10 elementwise operators per
// step.
//
// | op                   | inputs                   | outputs                  |
// |----------------------|--------------------------|--------------------------|
// | lstm_gates           | i2h, h2h, c              | h_next, c_next, gates    |
// | lstm_gates_backward  | dh_next, dc_next, c, gates | d_gates, d_c           |
// | gru_gates            | i2h, h2h, h              | h_next, gates            |
// | gru_gates_backward   | dh_next, h, gates        | d_i2h, d_h2h, d_h        |
//
// i2h and h2h are the input and recurrent projections of the step, biases included: (..., 4H)
// with gates i, f, g, o for LSTM, (..., 3H) with gates r, z, n for GRU; the state c or h is
// (..., H) with the same leading axes. `gates` is what the backward reads (Note [Saved gates]);
// no gradient flows back through it. LSTM's i2h and h2h enter only through their sum, so they
// share one gradient, d_gates. Float dtypes, all inputs of one; float16 and bfloat16 compute in
// float.
//
// Note [Saved gates]
// ~~~~~~~~~~~~~~~~~~
// The forward saves the activated gates, LSTM (..., 5H): sigmoid(i), sigmoid(f), tanh(g),
// sigmoid(o), tanh(c'); GRU (..., 4H): r, z, n and the recurrent projection h_n that r scales.
// The backward then runs no exp or tanh: recomputing them made it as slow as the forward, of
// which tanh is most (N 32, H 256 on a 2-core machine: 530 us recomputing, 18 us reading the
// gates). It also costs less memory than recomputing: autograd keeps `gates` and the state
// alive until the backward, not i2h and h2h (8H for LSTM, 6H for GRU). An inference step writes
// them too: five stores per unit beside two tanh and three exp calls.
//
// Note [Gate loops per row]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The CPU forward computes a row one gate at a time (all sigmoids, then all tanhs, ...) in a
// scratch row of the arithmetic type rather than unit by unit: each step is then one span of
// one function, which the activation op's vector path computes (libmvec's exp and tanh,
// activation_vector.h: the same values as the activation op, so the fused step equals the
// composed one), and the arithmetic between the spans vectorises. Gate by gate with scalar libm
// calls already ran 1.7x faster than unit by unit (N 32, H 256, one thread: 217 us against
// 375 us).
#include <cstdint>
#include <vector>

#include "ops/elemwise.h"
#include "ops/nn_common.h"
#include "ops/rnn_gates_rows.h"
#include "parallel.h"

namespace pymx {
namespace {

int64_t leading_size(const Shape& s) {
  int64_t n = 1;
  for (size_t d = 0; d + 1 < s.size(); ++d) n *= s[d];
  return n;
}

// Checks i2h, h2h (..., gates * H) and the state (..., H); returns H.
int64_t check_step_shapes(const Shape& i2h, const Shape& h2h, const Shape& state, int gates,
                          const char* op, const char* state_name) {
  PMX_CHECK(!i2h.empty() && i2h.back() % gates == 0, op, ": i2h must have a last axis of ",
            gates, " * hidden_size, got shape ", shape_str(i2h));
  PMX_CHECK(h2h == i2h, op, ": h2h shape ", shape_str(h2h), " differs from i2h ", shape_str(i2h));
  const int64_t hidden = i2h.back() / gates;
  Shape expected(i2h);
  expected.back() = hidden;
  PMX_CHECK(state == expected, op, ": ", state_name, " must have shape ", shape_str(expected),
            " for i2h ", shape_str(i2h), ", got ", shape_str(state));
  return hidden;
}

// `state` with its last axis multiplied by `factor`.
Shape widened(const Shape& state, int64_t factor) {
  Shape s(state);
  if (!s.empty()) s.back() *= factor;
  return s;
}

// Checks the backward's state, gradient and saved gates (..., saved * H).
void check_backward_shapes(const Shape& grad, const Shape& state, const Shape& gates, int saved,
                           const char* op, const char* state_name) {
  PMX_CHECK(!state.empty(), op, ": ", state_name, " must have at least one axis");
  PMX_CHECK(grad == state, op, ": dh_next shape ", shape_str(grad), " differs from ", state_name,
            " ", shape_str(state));
  PMX_CHECK(gates == widened(state, saved), op, ": gates must have shape ",
            shape_str(widened(state, saved)), " for ", state_name, " ", shape_str(state),
            ", got ", shape_str(gates));
}

// ---- LSTM ---------------------------------------------------------------------------------------

template <typename T>
void lstm_forward(const T* i2h, const T* h2h, const T* c, T* h_next, T* c_next, T* gates,
                  int64_t rows, int64_t hidden) {
  const int64_t H = hidden;
  // Captures by value: through references GCC reloads the pointers on every element.
  parallel_for(0, rows, nn::gate_row_grain(hidden), [=](int64_t lo, int64_t hi) {
    std::vector<nn::acc_t<T>> scratch(5 * H);
    for (int64_t n = lo; n < hi; ++n)
      nn::lstm_row_forward<T>(i2h + n * 4 * H, h2h + n * 4 * H, c + n * H, h_next + n * H,
                              c_next + n * H, gates + n * 5 * H, scratch.data(), H);
  });
}

template <typename T>
void lstm_backward(const T* dh_next, const T* dc_next, const T* c, const T* gates, T* d_gates,
                   T* d_c, int64_t rows, int64_t hidden) {
  const int64_t H = hidden;
  parallel_for(0, rows, nn::gate_row_grain(hidden), [=](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n)
      nn::lstm_row_backward<T>(dh_next + n * H, dc_next + n * H, c + n * H, gates + n * 5 * H,
                               d_gates + n * 4 * H, d_c + n * H, H);
  });
}

void lstm_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                std::vector<Shape>* out, std::vector<DType>* out_dt) {
  nn::check_same_float(dt, "lstm_gates");
  check_step_shapes(in[0], in[1], in[2], 4, "lstm_gates", "c");
  *out = {in[2], in[2], widened(in[2], 5)};
  *out_dt = {dt[0], dt[0], dt[0]};
}

void lstm_backward_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                         std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const char* op = "lstm_gates_backward";
  nn::check_same_float(dt, op);
  check_backward_shapes(in[0], in[2], in[3], 5, op, "c");
  PMX_CHECK(in[1] == in[2], op, ": dc_next shape ", shape_str(in[1]), " differs from c ",
            shape_str(in[2]));
  *out = {widened(in[2], 4), in[2]};
  *out_dt = {dt[0], dt[0]};
}

void lstm_compute(const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    lstm_forward<T>(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(),
                    out[1].data<T>(), out[2].data<T>(), leading_size(in[2].shape),
                    in[2].shape.back());
  });
}

void lstm_backward_compute(const OpContext&, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    lstm_backward<T>(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(),
                     out[0].data<T>(), out[1].data<T>(), leading_size(in[2].shape),
                     in[2].shape.back());
  });
}

// ---- GRU ----------------------------------------------------------------------------------------

template <typename T>
void gru_forward(const T* i2h, const T* h2h, const T* h, T* h_next, T* gates, int64_t rows,
                 int64_t hidden) {
  const int64_t H = hidden;
  parallel_for(0, rows, nn::gate_row_grain(hidden), [=](int64_t lo, int64_t hi) {
    std::vector<nn::acc_t<T>> scratch(4 * H);
    for (int64_t n = lo; n < hi; ++n)
      nn::gru_row_forward<T>(i2h + n * 3 * H, h2h + n * 3 * H, h + n * H, h_next + n * H,
                             gates + n * 4 * H, scratch.data(), H);
  });
}

template <typename T>
void gru_backward(const T* dh_next, const T* h, const T* gates, T* d_i2h, T* d_h2h, T* d_h,
                  int64_t rows, int64_t hidden) {
  const int64_t H = hidden;
  parallel_for(0, rows, nn::gate_row_grain(hidden), [=](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n)
      nn::gru_row_backward<T>(dh_next + n * H, h + n * H, gates + n * 4 * H, d_i2h + n * 3 * H,
                              d_h2h + n * 3 * H, d_h + n * H, H);
  });
}

void gru_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
               std::vector<Shape>* out, std::vector<DType>* out_dt) {
  nn::check_same_float(dt, "gru_gates");
  check_step_shapes(in[0], in[1], in[2], 3, "gru_gates", "h");
  *out = {in[2], widened(in[2], 4)};
  *out_dt = {dt[0], dt[0]};
}

void gru_backward_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                        std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const char* op = "gru_gates_backward";
  nn::check_same_float(dt, op);
  check_backward_shapes(in[0], in[1], in[2], 4, op, "h");
  *out = {widened(in[1], 3), widened(in[1], 3), in[1]};
  *out_dt = {dt[0], dt[0], dt[0]};
}

void gru_compute(const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    gru_forward<T>(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(),
                   out[1].data<T>(), leading_size(in[2].shape), in[2].shape.back());
  });
}

void gru_backward_compute(const OpContext&, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    gru_backward<T>(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(),
                    out[1].data<T>(), out[2].data<T>(), leading_size(in[1].shape),
                    in[1].shape.back());
  });
}

PMX_REGISTER_OP(lstm_gates)
    .set_num_inputs(3)
    .set_num_outputs(3)
    .set_infer(lstm_infer)
    .set_cpu(lstm_compute)
    .set_gradient([](const GradContext& ctx) -> std::vector<NDArray> {
      const std::vector<NDArray> grads = invoke(
          "lstm_gates_backward", {ctx.out_grads[0], ctx.out_grads[1], ctx.inputs[2], ctx.outputs[2]});
      return {grads[0], grads[0], grads[1]};  // i2h and h2h enter through their sum
    })
    .set_grad_uses({2}, {2});

PMX_REGISTER_OP(lstm_gates_backward)
    .set_num_inputs(4)
    .set_num_outputs(2)
    .set_infer(lstm_backward_infer)
    .set_cpu(lstm_backward_compute);

PMX_REGISTER_OP(gru_gates)
    .set_num_inputs(3)
    .set_num_outputs(2)
    .set_infer(gru_infer)
    .set_cpu(gru_compute)
    .set_gradient([](const GradContext& ctx) {
      return invoke("gru_gates_backward", {ctx.out_grads[0], ctx.inputs[2], ctx.outputs[1]});
    })
    .set_grad_uses({2}, {1});

PMX_REGISTER_OP(gru_gates_backward)
    .set_num_inputs(3)
    .set_num_outputs(3)
    .set_infer(gru_backward_infer)
    .set_cpu(gru_backward_compute);

}  // namespace
}  // namespace pymx
