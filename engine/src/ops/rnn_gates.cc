// The gate arithmetic of one LSTM or GRU step as one operator each (formulas: rnn_gates_math.h),
// called by pymx/gluon/rnn/rnn_cell.py's lstm_step and gru_step in place of ~10 elementwise
// operators per step.
//
// | op                   | inputs                      | outputs                 |
// |----------------------|-----------------------------|-------------------------|
// | lstm_gates           | i2h, h2h, c                 | h_next, c_next          |
// | lstm_gates_backward  | dh_next, dc_next, i2h, h2h, c | d_gates, d_c          |
// | gru_gates            | i2h, h2h, h                 | h_next                  |
// | gru_gates_backward   | dh_next, i2h, h2h, h        | d_i2h, d_h2h, d_h       |
//
// i2h and h2h are the input and recurrent projections of the step, biases included: (..., 4H)
// with gates i, f, g, o for LSTM, (..., 3H) with gates r, z, n for GRU; the state c or h is
// (..., H) with the same leading axes. LSTM's i2h and h2h enter only through their sum, so
// they share one gradient, d_gates. Float dtypes, all inputs of one; float16 and bfloat16
// compute in float.
//
// The backward ops recompute the gates from the inputs instead of reading gates that the forward
// saved: the forward then writes only its results, and a training step keeps no (N, 4H) array
// alive per step beyond the inputs, which the recurrent matrix products keep anyway.
#include <algorithm>
#include <cstdint>

#include "ops/elemwise.h"
#include "ops/nn_common.h"
#include "ops/rnn_gates_math.h"
#include "parallel.h"

namespace pymx {
namespace {

// Hidden units per parallel chunk: each costs five exp/tanh calls, tens of ns.
constexpr int64_t kGrainUnits = 2048;

int64_t row_grain(int64_t hidden) { return std::max<int64_t>(1, kGrainUnits / std::max<int64_t>(hidden, 1)); }

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

void check_grad_shape(const Shape& grad, const Shape& state, const char* op, const char* name) {
  PMX_CHECK(grad == state, op, ": ", name, " shape ", shape_str(grad), " differs from the state ",
            shape_str(state));
}

// ---- LSTM ---------------------------------------------------------------------------------------

template <typename T>
void lstm_forward(const T* i2h, const T* h2h, const T* c, T* h_next, T* c_next, int64_t rows,
                  int64_t hidden) {
  using A = nn::acc_t<T>;
  // Captures by value: through references GCC reloads the pointers on every element.
  parallel_for(0, rows, row_grain(hidden), [=](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      const T* x = i2h + n * 4 * hidden;
      const T* y = h2h + n * 4 * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        const auto pre = [&](int gate) {
          return static_cast<A>(x[gate * hidden + j]) + static_cast<A>(y[gate * hidden + j]);
        };
        const int64_t k = n * hidden + j;
        const nn::LstmUnit<A> u = nn::lstm_unit<A>(pre(0), pre(1), pre(2), pre(3), static_cast<A>(c[k]));
        h_next[k] = static_cast<T>(u.h_next);
        c_next[k] = static_cast<T>(u.c_next);
      }
    }
  });
}

template <typename T>
void lstm_backward(const T* dh_next, const T* dc_next, const T* i2h, const T* h2h, const T* c,
                   T* d_gates, T* d_c, int64_t rows, int64_t hidden) {
  using A = nn::acc_t<T>;
  parallel_for(0, rows, row_grain(hidden), [=](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      const T* x = i2h + n * 4 * hidden;
      const T* y = h2h + n * 4 * hidden;
      T* dx = d_gates + n * 4 * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        const auto pre = [&](int gate) {
          return static_cast<A>(x[gate * hidden + j]) + static_cast<A>(y[gate * hidden + j]);
        };
        const int64_t k = n * hidden + j;
        const A c_k = static_cast<A>(c[k]);
        const nn::LstmUnit<A> u = nn::lstm_unit<A>(pre(0), pre(1), pre(2), pre(3), c_k);
        const nn::LstmUnitGrad<A> g = nn::lstm_unit_grad<A>(u, c_k, static_cast<A>(dh_next[k]),
                                                            static_cast<A>(dc_next[k]));
        dx[j] = static_cast<T>(g.d_i);
        dx[hidden + j] = static_cast<T>(g.d_f);
        dx[2 * hidden + j] = static_cast<T>(g.d_g);
        dx[3 * hidden + j] = static_cast<T>(g.d_o);
        d_c[k] = static_cast<T>(g.d_c);
      }
    }
  });
}

void lstm_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                std::vector<Shape>* out, std::vector<DType>* out_dt) {
  nn::check_same_float(dt, "lstm_gates");
  check_step_shapes(in[0], in[1], in[2], 4, "lstm_gates", "c");
  *out = {in[2], in[2]};
  *out_dt = {dt[0], dt[0]};
}

void lstm_backward_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                         std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const char* op = "lstm_gates_backward";
  nn::check_same_float(dt, op);
  check_step_shapes(in[2], in[3], in[4], 4, op, "c");
  check_grad_shape(in[0], in[4], op, "dh_next");
  check_grad_shape(in[1], in[4], op, "dc_next");
  *out = {in[2], in[4]};
  *out_dt = {dt[0], dt[0]};
}

void lstm_compute(const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t hidden = in[2].shape.back();
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    lstm_forward<T>(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(),
                    out[1].data<T>(), leading_size(in[2].shape), hidden);
  });
}

void lstm_backward_compute(const OpContext&, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const int64_t hidden = in[4].shape.back();
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    lstm_backward<T>(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(),
                     in[4].data<T>(), out[0].data<T>(), out[1].data<T>(),
                     leading_size(in[4].shape), hidden);
  });
}

// ---- GRU ----------------------------------------------------------------------------------------

template <typename T>
void gru_forward(const T* i2h, const T* h2h, const T* h, T* h_next, int64_t rows, int64_t hidden) {
  using A = nn::acc_t<T>;
  parallel_for(0, rows, row_grain(hidden), [=](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      const T* x = i2h + n * 3 * hidden;
      const T* y = h2h + n * 3 * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        const int64_t k = n * hidden + j;
        const nn::GruUnit<A> u = nn::gru_unit<A>(
            static_cast<A>(x[j]), static_cast<A>(y[j]), static_cast<A>(x[hidden + j]),
            static_cast<A>(y[hidden + j]), static_cast<A>(x[2 * hidden + j]),
            static_cast<A>(y[2 * hidden + j]), static_cast<A>(h[k]));
        h_next[k] = static_cast<T>(u.h_next);
      }
    }
  });
}

template <typename T>
void gru_backward(const T* dh_next, const T* i2h, const T* h2h, const T* h, T* d_i2h, T* d_h2h,
                  T* d_h, int64_t rows, int64_t hidden) {
  using A = nn::acc_t<T>;
  parallel_for(0, rows, row_grain(hidden), [=](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      const T* x = i2h + n * 3 * hidden;
      const T* y = h2h + n * 3 * hidden;
      T* dx = d_i2h + n * 3 * hidden;
      T* dy = d_h2h + n * 3 * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        const int64_t k = n * hidden + j;
        const A h_n = static_cast<A>(y[2 * hidden + j]);
        const A h_k = static_cast<A>(h[k]);
        const nn::GruUnit<A> u = nn::gru_unit<A>(
            static_cast<A>(x[j]), static_cast<A>(y[j]), static_cast<A>(x[hidden + j]),
            static_cast<A>(y[hidden + j]), static_cast<A>(x[2 * hidden + j]), h_n, h_k);
        const nn::GruUnitGrad<A> g = nn::gru_unit_grad<A>(u, h_n, h_k, static_cast<A>(dh_next[k]));
        dx[j] = dy[j] = static_cast<T>(g.d_r);
        dx[hidden + j] = dy[hidden + j] = static_cast<T>(g.d_z);
        dx[2 * hidden + j] = static_cast<T>(g.d_i_n);
        dy[2 * hidden + j] = static_cast<T>(g.d_h_n);
        d_h[k] = static_cast<T>(g.d_h);
      }
    }
  });
}

void gru_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
               std::vector<Shape>* out, std::vector<DType>* out_dt) {
  nn::check_same_float(dt, "gru_gates");
  check_step_shapes(in[0], in[1], in[2], 3, "gru_gates", "h");
  *out = {in[2]};
  *out_dt = {dt[0]};
}

void gru_backward_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                        std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const char* op = "gru_gates_backward";
  nn::check_same_float(dt, op);
  check_step_shapes(in[1], in[2], in[3], 3, op, "h");
  check_grad_shape(in[0], in[3], op, "dh_next");
  *out = {in[1], in[1], in[3]};
  *out_dt = {dt[0], dt[0], dt[0]};
}

void gru_compute(const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t hidden = in[2].shape.back();
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    gru_forward<T>(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(),
                   leading_size(in[2].shape), hidden);
  });
}

void gru_backward_compute(const OpContext&, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  const int64_t hidden = in[3].shape.back();
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    gru_backward<T>(in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(),
                    out[0].data<T>(), out[1].data<T>(), out[2].data<T>(),
                    leading_size(in[3].shape), hidden);
  });
}

PMX_REGISTER_OP(lstm_gates)
    .set_num_inputs(3)
    .set_num_outputs(2)
    .set_infer(lstm_infer)
    .set_cpu(lstm_compute)
    .set_gradient([](const GradContext& ctx) -> std::vector<NDArray> {
      const std::vector<NDArray> grads =
          invoke("lstm_gates_backward", {ctx.out_grads[0], ctx.out_grads[1], ctx.inputs[0],
                                         ctx.inputs[1], ctx.inputs[2]});
      return {grads[0], grads[0], grads[1]};  // i2h and h2h enter through their sum
    })
    .set_grad_uses({0, 1, 2}, {});

PMX_REGISTER_OP(lstm_gates_backward)
    .set_num_inputs(5)
    .set_num_outputs(2)
    .set_infer(lstm_backward_infer)
    .set_cpu(lstm_backward_compute);

PMX_REGISTER_OP(gru_gates)
    .set_num_inputs(3)
    .set_infer(gru_infer)
    .set_cpu(gru_compute)
    .set_gradient([](const GradContext& ctx) {
      return invoke("gru_gates_backward",
                    {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]});
    })
    .set_grad_uses({0, 1, 2}, {});

PMX_REGISTER_OP(gru_gates_backward)
    .set_num_inputs(4)
    .set_num_outputs(3)
    .set_infer(gru_backward_infer)
    .set_cpu(gru_backward_compute);

}  // namespace
}  // namespace pymx
