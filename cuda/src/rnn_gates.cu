// The gate arithmetic of one LSTM or GRU step (CPU definitions, shapes, gradients and the saved
// gates: engine/src/ops/rnn_gates.cc; formulas: rnn_gates_math.h). One thread per (row, hidden
// unit); float16 and bfloat16 compute in float.
//
// | op                   | inputs                     | outputs                |
// |----------------------|----------------------------|------------------------|
// | lstm_gates           | i2h, h2h, c                | h_next, c_next, gates  |
// | lstm_gates_backward  | dh_next, dc_next, c, gates | d_gates, d_c           |
// | gru_gates            | i2h, h2h, h                | h_next, gates          |
// | gru_gates_backward   | dh_next, h, gates          | d_i2h, d_h2h, d_h      |
#include "kernel_util.cuh"
#include "ops/rnn_gates_math.h"

namespace pymx {
namespace gpu {
namespace {

// Unit k = n * hidden + j of a row of `parts` blocks of `hidden` values: the index of its value
// in block `part`, n * parts * hidden + part * hidden + j.
__device__ __forceinline__ int64_t part_index(int64_t k, int64_t hidden, int parts, int part) {
  const int64_t n = k / hidden;
  return (n * parts + part) * hidden + (k - n * hidden);
}

template <typename T>
__global__ void lstm_forward_kernel(const T* i2h, const T* h2h, const T* c, T* h_next, T* c_next,
                                    T* gates, int64_t units, int64_t hidden) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(k, units) {
    A pre[4];
    for (int gate = 0; gate < 4; ++gate) {
      const int64_t g = part_index(k, hidden, 4, gate);
      pre[gate] = convert<A>(i2h[g]) + convert<A>(h2h[g]);
    }
    nn::LstmGates<A> u;
    u.in = nn::gate_sigmoid(pre[0]);
    u.forget = nn::gate_sigmoid(pre[1]);
    u.cand = nn::gate_tanh(pre[2]);
    u.out = nn::gate_sigmoid(pre[3]);
    const A c_new = nn::lstm_c_next(u.in, u.forget, u.cand, convert<A>(c[k]));
    u.tanh_c_next = nn::gate_tanh(c_new);
    c_next[k] = convert<T>(c_new);
    h_next[k] = convert<T>(nn::lstm_h_next(u.out, u.tanh_c_next));
    gates[part_index(k, hidden, 5, 0)] = convert<T>(u.in);
    gates[part_index(k, hidden, 5, 1)] = convert<T>(u.forget);
    gates[part_index(k, hidden, 5, 2)] = convert<T>(u.cand);
    gates[part_index(k, hidden, 5, 3)] = convert<T>(u.out);
    gates[part_index(k, hidden, 5, 4)] = convert<T>(u.tanh_c_next);
  }
}

template <typename T>
__global__ void lstm_backward_kernel(const T* dh_next, const T* dc_next, const T* c,
                                     const T* gates, T* d_gates, T* d_c, int64_t units,
                                     int64_t hidden) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(k, units) {
    const nn::LstmGates<A> u{convert<A>(gates[part_index(k, hidden, 5, 0)]),
                             convert<A>(gates[part_index(k, hidden, 5, 1)]),
                             convert<A>(gates[part_index(k, hidden, 5, 2)]),
                             convert<A>(gates[part_index(k, hidden, 5, 3)]),
                             convert<A>(gates[part_index(k, hidden, 5, 4)])};
    const nn::LstmUnitGrad<A> grad = nn::lstm_unit_grad<A>(
        u, convert<A>(c[k]), convert<A>(dh_next[k]), convert<A>(dc_next[k]));
    d_gates[part_index(k, hidden, 4, 0)] = convert<T>(grad.d_i);
    d_gates[part_index(k, hidden, 4, 1)] = convert<T>(grad.d_f);
    d_gates[part_index(k, hidden, 4, 2)] = convert<T>(grad.d_g);
    d_gates[part_index(k, hidden, 4, 3)] = convert<T>(grad.d_o);
    d_c[k] = convert<T>(grad.d_c);
  }
}

template <typename T>
__global__ void gru_forward_kernel(const T* i2h, const T* h2h, const T* h, T* h_next, T* gates,
                                   int64_t units, int64_t hidden) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(k, units) {
    const int64_t r = part_index(k, hidden, 3, 0), z = part_index(k, hidden, 3, 1),
                  n = part_index(k, hidden, 3, 2);
    nn::GruGates<A> u;
    u.reset = nn::gate_sigmoid(convert<A>(i2h[r]) + convert<A>(h2h[r]));
    u.update = nn::gate_sigmoid(convert<A>(i2h[z]) + convert<A>(h2h[z]));
    u.h_n = convert<A>(h2h[n]);
    u.cand = nn::gate_tanh(nn::gru_cand_pre(convert<A>(i2h[n]), u.reset, u.h_n));
    h_next[k] = convert<T>(nn::gru_h_next(u.cand, u.update, convert<A>(h[k])));
    gates[part_index(k, hidden, 4, 0)] = convert<T>(u.reset);
    gates[part_index(k, hidden, 4, 1)] = convert<T>(u.update);
    gates[part_index(k, hidden, 4, 2)] = convert<T>(u.cand);
    gates[part_index(k, hidden, 4, 3)] = convert<T>(u.h_n);
  }
}

template <typename T>
__global__ void gru_backward_kernel(const T* dh_next, const T* h, const T* gates, T* d_i2h,
                                    T* d_h2h, T* d_h, int64_t units, int64_t hidden) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(k, units) {
    const nn::GruGates<A> u{convert<A>(gates[part_index(k, hidden, 4, 0)]),
                            convert<A>(gates[part_index(k, hidden, 4, 1)]),
                            convert<A>(gates[part_index(k, hidden, 4, 2)]),
                            convert<A>(gates[part_index(k, hidden, 4, 3)])};
    const nn::GruUnitGrad<A> grad = nn::gru_unit_grad<A>(u, convert<A>(h[k]), convert<A>(dh_next[k]));
    const int64_t r = part_index(k, hidden, 3, 0), z = part_index(k, hidden, 3, 1),
                  n = part_index(k, hidden, 3, 2);
    const T d_r = convert<T>(grad.d_r), d_z = convert<T>(grad.d_z);
    d_i2h[r] = d_r;
    d_h2h[r] = d_r;
    d_i2h[z] = d_z;
    d_h2h[z] = d_z;
    d_i2h[n] = convert<T>(grad.d_i_n);
    d_h2h[n] = convert<T>(grad.d_h_n);
    d_h[k] = convert<T>(grad.d_h);
  }
}

// The state's (..., H) shape gives the units and H; the ops' inference checked the shapes.
void lstm_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t units = in[2].size();
  if (units == 0) return;
  const int64_t hidden = in[2].shape.back();
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    lstm_forward_kernel<T><<<grid_for(units), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(), out[1].data<T>(),
        out[2].data<T>(), units, hidden);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void lstm_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const int64_t units = in[2].size();
  if (units == 0) return;
  const int64_t hidden = in[2].shape.back();
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    lstm_backward_kernel<T><<<grid_for(units), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(), out[0].data<T>(),
        out[1].data<T>(), units, hidden);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void gru_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t units = in[2].size();
  if (units == 0) return;
  const int64_t hidden = in[2].shape.back();
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    gru_forward_kernel<T><<<grid_for(units), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(), out[1].data<T>(),
        units, hidden);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void gru_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  const int64_t units = in[1].size();
  if (units == 0) return;
  const int64_t hidden = in[1].shape.back();
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    gru_backward_kernel<T><<<grid_for(units), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(), out[1].data<T>(),
        out[2].data<T>(), units, hidden);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("lstm_gates").set_gpu(lstm_compute);
  op_registry::get_or_create("lstm_gates_backward").set_gpu(lstm_backward_compute);
  op_registry::get_or_create("gru_gates").set_gpu(gru_compute);
  op_registry::get_or_create("gru_gates_backward").set_gpu(gru_backward_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
