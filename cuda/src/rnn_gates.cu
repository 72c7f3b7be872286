// The gate arithmetic of one LSTM or GRU step (CPU definitions, shapes and gradients: engine/src/
// ops/rnn_gates.cc; formulas: rnn_gates_math.h). One thread per (row, hidden unit); float16 and
// bfloat16 compute in float.
//
// | op                   | inputs                        | outputs            |
// |----------------------|-------------------------------|--------------------|
// | lstm_gates           | i2h, h2h, c                   | h_next, c_next     |
// | lstm_gates_backward  | dh_next, dc_next, i2h, h2h, c | d_gates, d_c       |
// | gru_gates            | i2h, h2h, h                   | h_next             |
// | gru_gates_backward   | dh_next, i2h, h2h, h          | d_i2h, d_h2h, d_h  |
#include "kernel_util.cuh"
#include "ops/rnn_gates_math.h"

namespace pymx {
namespace gpu {
namespace {

// Unit k = n * hidden + j reads gate `gate` of row n at n * gates * hidden + gate * hidden + j.
__device__ __forceinline__ int64_t gate_index(int64_t k, int64_t hidden, int gates, int gate) {
  const int64_t n = k / hidden;
  return (n * gates + gate) * hidden + (k - n * hidden);
}

template <typename T>
__global__ void lstm_forward_kernel(const T* i2h, const T* h2h, const T* c, T* h_next, T* c_next,
                                    int64_t units, int64_t hidden) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(k, units) {
    A pre[4];
    for (int gate = 0; gate < 4; ++gate) {
      const int64_t g = gate_index(k, hidden, 4, gate);
      pre[gate] = convert<A>(i2h[g]) + convert<A>(h2h[g]);
    }
    const nn::LstmUnit<A> u = nn::lstm_unit<A>(pre[0], pre[1], pre[2], pre[3], convert<A>(c[k]));
    h_next[k] = convert<T>(u.h_next);
    c_next[k] = convert<T>(u.c_next);
  }
}

template <typename T>
__global__ void lstm_backward_kernel(const T* dh_next, const T* dc_next, const T* i2h,
                                     const T* h2h, const T* c, T* d_gates, T* d_c, int64_t units,
                                     int64_t hidden) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(k, units) {
    A pre[4];
    for (int gate = 0; gate < 4; ++gate) {
      const int64_t g = gate_index(k, hidden, 4, gate);
      pre[gate] = convert<A>(i2h[g]) + convert<A>(h2h[g]);
    }
    const A c_k = convert<A>(c[k]);
    const nn::LstmUnit<A> u = nn::lstm_unit<A>(pre[0], pre[1], pre[2], pre[3], c_k);
    const nn::LstmUnitGrad<A> grad =
        nn::lstm_unit_grad<A>(u, c_k, convert<A>(dh_next[k]), convert<A>(dc_next[k]));
    d_gates[gate_index(k, hidden, 4, 0)] = convert<T>(grad.d_i);
    d_gates[gate_index(k, hidden, 4, 1)] = convert<T>(grad.d_f);
    d_gates[gate_index(k, hidden, 4, 2)] = convert<T>(grad.d_g);
    d_gates[gate_index(k, hidden, 4, 3)] = convert<T>(grad.d_o);
    d_c[k] = convert<T>(grad.d_c);
  }
}

template <typename T>
__device__ __forceinline__ nn::GruUnit<AccT<T>> gru_unit_at(const T* i2h, const T* h2h, const T* h,
                                                          int64_t k, int64_t hidden) {
  using A = AccT<T>;
  const int64_t r = gate_index(k, hidden, 3, 0), z = gate_index(k, hidden, 3, 1),
                n = gate_index(k, hidden, 3, 2);
  return nn::gru_unit<A>(convert<A>(i2h[r]), convert<A>(h2h[r]), convert<A>(i2h[z]),
                         convert<A>(h2h[z]), convert<A>(i2h[n]), convert<A>(h2h[n]),
                         convert<A>(h[k]));
}

template <typename T>
__global__ void gru_forward_kernel(const T* i2h, const T* h2h, const T* h, T* h_next,
                                   int64_t units, int64_t hidden) {
  PMX_GRID_STRIDE_LOOP(k, units) h_next[k] = convert<T>(gru_unit_at(i2h, h2h, h, k, hidden).h_next);
}

template <typename T>
__global__ void gru_backward_kernel(const T* dh_next, const T* i2h, const T* h2h, const T* h,
                                    T* d_i2h, T* d_h2h, T* d_h, int64_t units, int64_t hidden) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(k, units) {
    const int64_t r = gate_index(k, hidden, 3, 0), z = gate_index(k, hidden, 3, 1),
                  n = gate_index(k, hidden, 3, 2);
    const nn::GruUnit<A> u = gru_unit_at(i2h, h2h, h, k, hidden);
    const nn::GruUnitGrad<A> grad =
        nn::gru_unit_grad<A>(u, convert<A>(h2h[n]), convert<A>(h[k]), convert<A>(dh_next[k]));
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

// The state's (..., H) shape gives the units and H; shapes were checked by the op's inference.
void lstm_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t units = in[2].size();
  if (units == 0) return;
  const int64_t hidden = in[2].shape.back();
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    lstm_forward_kernel<T><<<grid_for(units), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(), out[1].data<T>(),
        units, hidden);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void lstm_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const int64_t units = in[4].size();
  if (units == 0) return;
  const int64_t hidden = in[4].shape.back();
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    lstm_backward_kernel<T><<<grid_for(units), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(), in[4].data<T>(),
        out[0].data<T>(), out[1].data<T>(), units, hidden);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void gru_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t units = in[2].size();
  if (units == 0) return;
  const int64_t hidden = in[2].shape.back();
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    gru_forward_kernel<T><<<grid_for(units), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(), units, hidden);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void gru_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  const int64_t units = in[3].size();
  if (units == 0) return;
  const int64_t hidden = in[3].shape.back();
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    gru_backward_kernel<T><<<grid_for(units), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(), out[0].data<T>(),
        out[1].data<T>(), out[2].data<T>(), units, hidden);
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
