// Row-wise NN operators: softmax, log_softmax, batch_norm and layer_norm, forward and backward
// (CPU definitions: engine/src/ops/nn_softmax.cc, nn_norm.cc). Float dtypes; float16 computes
// in float; statistics accumulate in double like the CPU's. batch_norm tries its cuDNN path first
// (cudnn_batch_norm.cu); these kernels run where it declines.
//
// | op                    | inputs                                     | outputs                          | attrs |
// |-----------------------|--------------------------------------------|----------------------------------|-------|
// | softmax log_softmax   | data                                       | out                              | axis (-1), temperature |
// | softmax_backward      | out_grad, out                              | data_grad                        | axis, temperature |
// | log_softmax_backward  | out_grad, out                              | data_grad                        | axis, temperature |
// | batch_norm            | data, gamma, beta, moving_mean, moving_var | out, mean, var                   | eps momentum fix_gamma use_global_stats axis cudnn_off |
// | batch_norm_backward   | out_grad, data, gamma, mean, var           | data_grad, gamma_grad, beta_grad | same |
// | layer_norm            | data, gamma, beta                          | out, mean, std                   | axis (-1), eps (1e-5) |
// | layer_norm_backward   | out_grad, data, gamma, mean, std           | data_grad, gamma_grad, beta_grad | same |
//
// Every op views data as (outer, n, inner) around its axis. A "row" is the n elements of one
// (outer, inner) pair (softmax, layer_norm); a "channel" is the outer*inner elements of one
// index along the axis (batch_norm, layer_norm's gamma/beta gradients). Each row or channel is
// reduced by a group of threads, as in Note [GPU reductions: a group of threads per output].
#include "cudnn_nn.h"
#include "kernel_util.cuh"
#include "launch.h"
#include "ops/nn_common.h"

namespace pymx {
namespace gpu {
namespace {

using nn::AxisView;
using nn::axis_view;

int group_for(int64_t n) { return n >= 1024 ? kBlock : 32; }

unsigned groups_grid(int64_t count, int group) { return grid_for(count, kBlock / group); }

__device__ __forceinline__ double dsum(double v, int group) {
  return group_reduce(v, group, [](double a, double b) { return a + b; });
}

// Runs body(item, lane, valid) for every item, `group` threads per item. The loop count is
// uniform across the block, so bodies may call group_reduce.
#define PMX_FOR_EACH_GROUP(count, group, item, lane, valid, ...)                            \
  {                                                                                          \
    const int per_block_ = kBlock / (group);                                                 \
    const int g_ = threadIdx.x / (group);                                                    \
    const int lane = threadIdx.x % (group);                                                  \
    for (int64_t base_ = int64_t(blockIdx.x) * per_block_; base_ < (count);                  \
         base_ += int64_t(gridDim.x) * per_block_) {                                         \
      const int64_t item = base_ + g_;                                                       \
      const bool valid = item < (count);                                                     \
      __VA_ARGS__                                                                            \
    }                                                                                        \
  }

// ---------------------------------------------------------------------------------------------
// softmax / log_softmax
// ---------------------------------------------------------------------------------------------
template <typename T, bool kLog>
__global__ void softmax_kernel(const T* x, T* y, AxisView v, int group, double inv_t) {
  PMX_FOR_EACH_GROUP(v.outer * v.inner, group, row, lane, valid, {
    const int64_t base = valid ? (row / v.inner) * v.n * v.inner + row % v.inner : 0;
    double mx = -INFINITY;
    if (valid)
      for (int64_t k = lane; k < v.n; k += group) mx = fmax(mx, convert<double>(x[base + k * v.inner]));
    mx = group_reduce(mx, group, [](double a, double b) { return fmax(a, b); });
    double sum = 0;
    if (valid)
      for (int64_t k = lane; k < v.n; k += group)
        sum += exp((convert<double>(x[base + k * v.inner]) - mx) * inv_t);
    sum = dsum(sum, group);
    const double log_sum = log(sum);
    if (valid) {
      for (int64_t k = lane; k < v.n; k += group) {
        const double z = (convert<double>(x[base + k * v.inner]) - mx) * inv_t;
        y[base + k * v.inner] = convert<T>(kLog ? z - log_sum : exp(z) / sum);
      }
    }
  })
}

template <typename T, bool kLog>
__global__ void softmax_backward_kernel(const T* dy, const T* y, T* dx, AxisView v, int group,
                                        double inv_t) {
  PMX_FOR_EACH_GROUP(v.outer * v.inner, group, row, lane, valid, {
    const int64_t base = valid ? (row / v.inner) * v.n * v.inner + row % v.inner : 0;
    double sum = 0;
    if (valid) {
      for (int64_t k = lane; k < v.n; k += group) {
        const int64_t j = base + k * v.inner;
        sum += kLog ? convert<double>(dy[j]) : convert<double>(dy[j]) * convert<double>(y[j]);
      }
    }
    sum = dsum(sum, group);
    if (valid) {
      for (int64_t k = lane; k < v.n; k += group) {
        const int64_t j = base + k * v.inner;
        const double g = convert<double>(dy[j]), o = convert<double>(y[j]);
        dx[j] = convert<T>((kLog ? g - exp(o) * sum : o * (g - sum)) * inv_t);
      }
    }
  })
}

double temperature(const Attrs& attrs, const char* op) {
  const double t = attrs.get_float("temperature", 1.0);
  PMX_CHECK(t > 0, op, ": temperature must be > 0, got ", t);
  return t;
}

template <bool kLog>
void softmax_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const char* op = kLog ? "log_softmax" : "softmax";
  const AxisView v = axis_view(in[0].shape, ctx.attrs->get_int("axis", -1), op);
  if (in[0].size() == 0) return;
  const double inv_t = 1.0 / temperature(*ctx.attrs, op);
  const int group = group_for(v.n);
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    softmax_kernel<T, kLog><<<groups_grid(v.outer * v.inner, group), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), out[0].data<T>(), v, group, inv_t);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

template <bool kLog>
void softmax_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                              const std::vector<TBlob>& out) {
  const char* op = kLog ? "log_softmax" : "softmax";
  const AxisView v = axis_view(in[1].shape, ctx.attrs->get_int("axis", -1), op);
  if (in[0].size() == 0) return;
  const double inv_t = 1.0 / temperature(*ctx.attrs, op);
  const int group = group_for(v.n);
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    softmax_backward_kernel<T, kLog><<<groups_grid(v.outer * v.inner, group), kBlock, 0,
                                       stream_of(ctx)>>>(in[0].data<T>(), in[1].data<T>(),
                                                         out[0].data<T>(), v, group, inv_t);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------------------------
// batch_norm: one block per channel
// ---------------------------------------------------------------------------------------------
struct BnArgs {
  AxisView v;
  double eps, momentum;
  bool fix_gamma, batch_stats;
};

// Element j of channel c, for j in [0, outer * inner).
__device__ __forceinline__ int64_t channel_index(const AxisView& v, int64_t c, int64_t j) {
  return ((j / v.inner) * v.n + c) * v.inner + j % v.inner;
}

template <typename T, typename P>
__global__ void bn_forward_kernel(const T* x, const P* gamma, const P* beta, P* moving_mean,
                                  P* moving_var, T* y, P* mean_out, P* var_out, BnArgs a) {
  const AxisView& v = a.v;
  const int64_t count = v.outer * v.inner;
  for (int64_t c = blockIdx.x; c < v.n; c += gridDim.x) {
    double mean, var;
    if (a.batch_stats) {
      double sum = 0;
      for (int64_t j = threadIdx.x; j < count; j += kBlock) sum += convert<double>(x[channel_index(v, c, j)]);
      mean = count > 0 ? dsum(sum, kBlock) / count : 0.0;
      double sq = 0;
      for (int64_t j = threadIdx.x; j < count; j += kBlock) {
        const double d = convert<double>(x[channel_index(v, c, j)]) - mean;
        sq += d * d;
      }
      var = count > 0 ? dsum(sq, kBlock) / count : 0.0;
      if (threadIdx.x == 0) {
        moving_mean[c] = convert<P>(convert<double>(moving_mean[c]) * a.momentum + mean * (1 - a.momentum));
        moving_var[c] = convert<P>(convert<double>(moving_var[c]) * a.momentum + var * (1 - a.momentum));
      }
    } else {
      mean = convert<double>(moving_mean[c]);
      var = convert<double>(moving_var[c]);
    }
    if (threadIdx.x == 0) {
      mean_out[c] = convert<P>(mean);
      var_out[c] = convert<P>(var);
    }
    // float for float16/float32 data, double for float64, as the CPU's acc_t.
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const double g = a.fix_gamma ? 1.0 : convert<double>(gamma[c]);
    const double k = g / sqrt(var + a.eps);
    const A scale = static_cast<A>(k), shift = static_cast<A>(convert<double>(beta[c]) - mean * k);
    for (int64_t j = threadIdx.x; j < count; j += kBlock) {
      const int64_t i = channel_index(v, c, j);
      y[i] = convert<T>(convert<A>(x[i]) * scale + shift);
    }
  }
}

template <typename T, typename P>
__global__ void bn_backward_kernel(const T* dy, const T* x, const P* gamma, const P* mean,
                                   const P* var, T* dx, P* dgamma, P* dbeta, BnArgs a) {
  const AxisView& v = a.v;
  const int64_t count = v.outer * v.inner;
  for (int64_t c = blockIdx.x; c < v.n; c += gridDim.x) {
    const double m = convert<double>(mean[c]);
    const double invstd = 1.0 / sqrt(convert<double>(var[c]) + a.eps);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t j = threadIdx.x; j < count; j += kBlock) {
      const int64_t i = channel_index(v, c, j);
      const double g = convert<double>(dy[i]);
      sum_dy += g;
      sum_dy_xhat += g * (convert<double>(x[i]) - m) * invstd;
    }
    sum_dy = dsum(sum_dy, kBlock);
    sum_dy_xhat = dsum(sum_dy_xhat, kBlock);
    if (threadIdx.x == 0) {
      dgamma[c] = convert<P>(a.fix_gamma ? 0.0 : sum_dy_xhat);
      dbeta[c] = convert<P>(sum_dy);
    }
    const double k = (a.fix_gamma ? 1.0 : convert<double>(gamma[c])) * invstd;
    const double mean_dy = a.batch_stats && count > 0 ? sum_dy / count : 0.0;
    const double mean_dy_xhat = a.batch_stats && count > 0 ? sum_dy_xhat / count : 0.0;
    for (int64_t j = threadIdx.x; j < count; j += kBlock) {
      const int64_t i = channel_index(v, c, j);
      const double xhat = (convert<double>(x[i]) - m) * invstd;
      dx[i] = convert<T>(k * (convert<double>(dy[i]) - mean_dy - xhat * mean_dy_xhat));
    }
  }
}

BnArgs bn_args(const OpContext& ctx, const Shape& data) {
  const Attrs& attrs = *ctx.attrs;
  BnArgs a;
  a.v = axis_view(data, attrs.get_int("axis", 1), "batch_norm");
  a.eps = attrs.get_float("eps", 1e-3);
  a.momentum = attrs.get_float("momentum", 0.9);
  a.fix_gamma = attrs.get_bool("fix_gamma", true);
  a.batch_stats = ctx.is_train && !attrs.get_bool("use_global_stats", false);
  return a;
}

// Runs body with T = data type and P = parameter type (equal, or P = float).
#define PMX_GPU_BN_SWITCH(data_dt, param_dt, ...) \
  PMX_GPU_FLOAT_SWITCH(data_dt, T, {              \
    if ((param_dt) == DType::kFloat32) {          \
      using P = float;                            \
      __VA_ARGS__;                                \
    } else {                                      \
      using P = T;                                \
      __VA_ARGS__;                                \
    }                                             \
  })

void bn_forward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                        const std::vector<TBlob>& out) {
  const BnArgs a = bn_args(ctx, in[0].shape);
  if (a.v.n == 0 || cudnn_batch_norm(ctx, in, out)) return;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(a.v.n, 65535));
  PMX_GPU_BN_SWITCH(in[0].dtype, in[1].dtype, {
    bn_forward_kernel<T, P><<<grid, kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<P>(), in[2].data<P>(), in[3].data<P>(), in[4].data<P>(),
        out[0].data<T>(), out[1].data<P>(), out[2].data<P>(), a);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void bn_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                         const std::vector<TBlob>& out) {
  const BnArgs a = bn_args(ctx, in[1].shape);
  if (a.v.n == 0 || cudnn_batch_norm_backward(ctx, in, out)) return;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(a.v.n, 65535));
  PMX_GPU_BN_SWITCH(in[1].dtype, in[2].dtype, {
    bn_backward_kernel<T, P><<<grid, kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<P>(), in[3].data<P>(), in[4].data<P>(),
        out[0].data<T>(), out[1].data<P>(), out[2].data<P>(), a);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------------------------
// layer_norm: a group per row; gamma/beta gradients a block per channel
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void ln_forward_kernel(const T* x, const T* gamma, const T* beta, T* y, T* mean_out,
                                  T* std_out, AxisView v, int group, double eps) {
  PMX_FOR_EACH_GROUP(v.outer * v.inner, group, row, lane, valid, {
    const int64_t base = valid ? (row / v.inner) * v.n * v.inner + row % v.inner : 0;
    double sum = 0;
    if (valid)
      for (int64_t c = lane; c < v.n; c += group) sum += convert<double>(x[base + c * v.inner]);
    const double mean = dsum(sum, group) / v.n;
    double sq = 0;
    if (valid) {
      for (int64_t c = lane; c < v.n; c += group) {
        const double d = convert<double>(x[base + c * v.inner]) - mean;
        sq += d * d;
      }
    }
    const double std_dev = sqrt(dsum(sq, group) / v.n + eps);
    if (valid) {
      if (lane == 0) {
        mean_out[row] = convert<T>(mean);
        std_out[row] = convert<T>(std_dev);
      }
      for (int64_t c = lane; c < v.n; c += group) {
        const int64_t j = base + c * v.inner;
        y[j] = convert<T>((convert<double>(x[j]) - mean) / std_dev * convert<double>(gamma[c]) +
                          convert<double>(beta[c]));
      }
    }
  })
}

template <typename T>
__global__ void ln_backward_data_kernel(const T* dy, const T* x, const T* gamma, const T* mean,
                                        const T* stdv, T* dx, AxisView v, int group) {
  PMX_FOR_EACH_GROUP(v.outer * v.inner, group, row, lane, valid, {
    const int64_t base = valid ? (row / v.inner) * v.n * v.inner + row % v.inner : 0;
    const double m = valid ? convert<double>(mean[row]) : 0.0;
    const double inv = valid ? 1.0 / convert<double>(stdv[row]) : 0.0;
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    if (valid) {
      for (int64_t c = lane; c < v.n; c += group) {
        const int64_t j = base + c * v.inner;
        const double xhat = (convert<double>(x[j]) - m) * inv;
        const double dxhat = convert<double>(dy[j]) * convert<double>(gamma[c]);
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * xhat;
      }
    }
    const double mean_dxhat = dsum(sum_dxhat, group) / v.n;
    const double mean_dxhat_xhat = dsum(sum_dxhat_xhat, group) / v.n;
    if (valid) {
      for (int64_t c = lane; c < v.n; c += group) {
        const int64_t j = base + c * v.inner;
        const double xhat = (convert<double>(x[j]) - m) * inv;
        const double dxhat = convert<double>(dy[j]) * convert<double>(gamma[c]);
        dx[j] = convert<T>(inv * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
      }
    }
  })
}

template <typename T>
__global__ void ln_backward_param_kernel(const T* dy, const T* x, const T* mean, const T* stdv,
                                         T* dgamma, T* dbeta, AxisView v) {
  const int64_t rows = v.outer * v.inner;
  for (int64_t c = blockIdx.x; c < v.n; c += gridDim.x) {
    double sum_g = 0, sum_gx = 0;
    for (int64_t r = threadIdx.x; r < rows; r += kBlock) {
      const int64_t j = (r / v.inner) * v.n * v.inner + c * v.inner + r % v.inner;
      const double g = convert<double>(dy[j]);
      sum_g += g;
      sum_gx += g * (convert<double>(x[j]) - convert<double>(mean[r])) / convert<double>(stdv[r]);
    }
    sum_g = dsum(sum_g, kBlock);
    sum_gx = dsum(sum_gx, kBlock);
    if (threadIdx.x == 0) {
      dgamma[c] = convert<T>(sum_gx);
      dbeta[c] = convert<T>(sum_g);
    }
  }
}

void ln_forward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                        const std::vector<TBlob>& out) {
  const AxisView v = axis_view(in[0].shape, ctx.attrs->get_int("axis", -1), "layer_norm");
  if (in[0].size() == 0) {  // an empty axis has no mean or deviation: NaN, as on the CPU
    fill_blob(out[1], NAN, ctx.run.stream);
    fill_blob(out[2], NAN, ctx.run.stream);
    return;
  }
  const double eps = ctx.attrs->get_float("eps", 1e-5);
  const int group = group_for(v.n);
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    ln_forward_kernel<T><<<groups_grid(v.outer * v.inner, group), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(), out[1].data<T>(),
        out[2].data<T>(), v, group, eps);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void ln_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                         const std::vector<TBlob>& out) {
  const AxisView v = axis_view(in[1].shape, ctx.attrs->get_int("axis", -1), "layer_norm");
  if (v.n == 0) return;
  const int group = group_for(v.n);
  cudaStream_t s = stream_of(ctx);
  PMX_GPU_FLOAT_SWITCH(in[1].dtype, T, {
    if (in[1].size() > 0) {
      ln_backward_data_kernel<T><<<groups_grid(v.outer * v.inner, group), kBlock, 0, s>>>(
          in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(), in[4].data<T>(),
          out[0].data<T>(), v, group);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    ln_backward_param_kernel<T><<<static_cast<unsigned>(std::min<int64_t>(v.n, 65535)), kBlock, 0, s>>>(
        in[0].data<T>(), in[1].data<T>(), in[3].data<T>(), in[4].data<T>(), out[1].data<T>(),
        out[2].data<T>(), v);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("softmax").set_gpu(softmax_compute<false>);
  op_registry::get_or_create("log_softmax").set_gpu(softmax_compute<true>);
  op_registry::get_or_create("softmax_backward").set_gpu(softmax_backward_compute<false>);
  op_registry::get_or_create("log_softmax_backward").set_gpu(softmax_backward_compute<true>);
  op_registry::get_or_create("batch_norm").set_gpu(bn_forward_compute);
  op_registry::get_or_create("batch_norm_backward").set_gpu(bn_backward_compute);
  op_registry::get_or_create("layer_norm").set_gpu(ln_forward_compute);
  op_registry::get_or_create("layer_norm_backward").set_gpu(ln_backward_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
