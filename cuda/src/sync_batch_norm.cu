// Cross-device batch normalisation on the GPU (_contrib_SyncBatchNorm and its backward; CPU
// definitions, the maths and Note [Cross-device batch statistics]: engine/src/ops/
// nn_sync_batch_norm.cc). float32 and float64; statistics in double.
//
// A device's kernel reduces its channels (one block per channel, grid-stride over channels) into
// a small double buffer of its own (storage::alloc on its stream), copies that to the host for the
// rendezvous, and returns. The round's `finish` for this device runs on whichever thread
// completed the round: it makes this GPU current (restoring the thread's own afterwards), copies
// the combined statistics back into the buffer, and enqueues the elementwise pass on this
// device's stream; the engine then records this op's completion event on that stream.
#include <atomic>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "kernel_util.cuh"
#include "launch.h"
#include "ops/sync_batch_norm.h"
#include "pymx/storage.h"

namespace pymx {
namespace gpu {
namespace {

using nn::SyncBnArrival;
using nn::SyncBnAttrs;
using nn::SyncBnView;

// Makes gpu(`device`)'s physical GPU the calling thread's current one for the scope (a finish
// may run on another GPU's worker, whose current device must survive it). gpu(i) is a logical
// device (Note [Logical GPUs] in device.cc): CUDA knows it as physical_device(i), not i.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    const int physical = physical_device(device);
    PMX_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != physical) PMX_CUDA_CHECK(cudaSetDevice(physical));
  }
  ~CurrentDevice() { PMX_CUDA_IGNORE(cudaSetDevice(previous_)); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

// Element i (of count = outer * inner) of channel c.
__device__ __forceinline__ int64_t channel_element(int64_t c, int64_t i, SyncBnView v) {
  const int64_t o = i / v.inner;
  return (o * v.channels + c) * v.inner + (i - o * v.inner);
}

__device__ __forceinline__ double block_sum(double value) {
  return group_reduce(value, kBlock, [](double a, double b) { return a + b; });
}

// stats[c] = mean of channel c, stats[C + c] = sum of squared deviations from it (M2).
template <typename T>
__global__ void local_moments_kernel(const T* x, SyncBnView v, double* stats) {
  const int64_t n = v.count();
  for (int64_t c = blockIdx.x; c < v.channels; c += gridDim.x) {
    double sum = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      sum += static_cast<double>(x[channel_element(c, i, v)]);
    const double mean = block_sum(sum) / static_cast<double>(n);
    double m2 = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const double d = static_cast<double>(x[channel_element(c, i, v)]) - mean;
      m2 += d * d;
    }
    m2 = block_sum(m2);
    if (threadIdx.x == 0) {
      stats[c] = mean;
      stats[v.channels + c] = m2;
    }
  }
}

// From the combined (mean, M2) over `total` elements: the outputs mean and var, the moving
// statistics updated, and stats rewritten as (mean, 1 / sqrt(var + eps)) for the apply pass.
template <typename T>
__global__ void global_stats_kernel(double* stats, int64_t total, T* mean_out, T* var_out,
                                    T* moving_mean, T* moving_var, int64_t channels, double eps,
                                    double momentum) {
  PMX_GRID_STRIDE_LOOP(c, channels) {
    const double mean = stats[c];
    const double var = stats[channels + c] / static_cast<double>(total);
    mean_out[c] = static_cast<T>(mean);
    var_out[c] = static_cast<T>(var);
    moving_mean[c] = static_cast<T>(static_cast<double>(moving_mean[c]) * momentum +
                                    mean * (1 - momentum));
    moving_var[c] = static_cast<T>(static_cast<double>(moving_var[c]) * momentum +
                                   var * (1 - momentum));
    stats[channels + c] = 1.0 / sqrt(var + eps);
  }
}

// Inference: stats = (moving mean, 1 / sqrt(moving var + eps)), the outputs mean/var copies.
template <typename T>
__global__ void moving_stats_kernel(const T* moving_mean, const T* moving_var, T* mean_out,
                                    T* var_out, double* stats, int64_t channels, double eps) {
  PMX_GRID_STRIDE_LOOP(c, channels) {
    mean_out[c] = moving_mean[c];
    var_out[c] = moving_var[c];
    stats[c] = static_cast<double>(moving_mean[c]);
    stats[channels + c] = 1.0 / sqrt(static_cast<double>(moving_var[c]) + eps);
  }
}

// y = (x - mean_c) * inv_std_c * gamma_c + beta_c (gamma 1 when fix_gamma).
template <typename T>
__global__ void apply_kernel(const T* x, const T* gamma, const T* beta, const double* stats,
                             T* y, int64_t size, SyncBnView v, bool fix_gamma) {
  PMX_GRID_STRIDE_LOOP(k, size) {
    const int64_t c = (k / v.inner) % v.channels;
    const double g = fix_gamma ? 1.0 : static_cast<double>(gamma[c]);
    y[k] = static_cast<T>((static_cast<double>(x[k]) - stats[c]) * stats[v.channels + c] * g +
                          static_cast<double>(beta[c]));
  }
}

// Per channel: sums[c] = sum dy, sums[C + c] = sum dy * x_hat; gamma_grad and beta_grad are this
// device's sums.
template <typename T>
__global__ void grad_sums_kernel(const T* dy, const T* x, const T* mean, const T* var,
                                 SyncBnView v, double eps, bool fix_gamma, double* sums,
                                 T* gamma_grad, T* beta_grad) {
  const int64_t n = v.count();
  for (int64_t c = blockIdx.x; c < v.channels; c += gridDim.x) {
    const double m = static_cast<double>(mean[c]);
    const double inv_std = 1.0 / sqrt(static_cast<double>(var[c]) + eps);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const int64_t k = channel_element(c, i, v);
      const double g = static_cast<double>(dy[k]);
      sum_dy += g;
      sum_dy_xhat += g * (static_cast<double>(x[k]) - m) * inv_std;
    }
    sum_dy = block_sum(sum_dy);
    sum_dy_xhat = block_sum(sum_dy_xhat);
    if (threadIdx.x == 0) {
      sums[c] = sum_dy;
      sums[v.channels + c] = sum_dy_xhat;
      gamma_grad[c] = static_cast<T>(fix_gamma ? 0.0 : sum_dy_xhat);
      beta_grad[c] = static_cast<T>(sum_dy);
    }
  }
}

// dx = gamma_c inv_std_c (dy - sum_dy_c / n - x_hat sum_dy_xhat_c / n) with the combined sums
// (`sums` null: the statistics were constants, dx = gamma_c inv_std_c dy).
template <typename T>
__global__ void data_grad_kernel(const T* dy, const T* x, const T* gamma, const T* mean,
                                 const T* var, const double* sums, int64_t total, T* dx,
                                 int64_t size, SyncBnView v, double eps, bool fix_gamma) {
  PMX_GRID_STRIDE_LOOP(k, size) {
    const int64_t c = (k / v.inner) % v.channels;
    const double inv_std = 1.0 / sqrt(static_cast<double>(var[c]) + eps);
    const double scale = (fix_gamma ? 1.0 : static_cast<double>(gamma[c])) * inv_std;
    double g = static_cast<double>(dy[k]);
    if (sums != nullptr) {
      const double x_hat = (static_cast<double>(x[k]) - static_cast<double>(mean[c])) * inv_std;
      g -= (sums[c] + x_hat * sums[v.channels + c]) / static_cast<double>(total);
    }
    dx[k] = static_cast<T>(scale * g);
  }
}

unsigned channel_grid(int64_t channels) {
  return static_cast<unsigned>(channels < 1 ? 1 : (channels > 65536 ? 65536 : channels));
}

// A device buffer of 2 * channels doubles on the op's stream, freed stream-ordered.
StorageHandle stats_buffer(const OpContext& ctx, int64_t channels) {
  return storage::alloc(2 * channels * sizeof(double), ctx.run.device, ctx.run.stream);
}

// One device's op between its kernel and its completion: the stats buffer and the op's
// OnComplete, released exactly once by whichever comes first of the finish, the round failing,
// or the finish throwing midway (the rendezvous then calls `complete` too). The op is completed
// even when freeing fails, or the other devices' ops and every reader of its outputs would wait
// forever.
class PendingOp {
 public:
  PendingOp(StorageHandle buffer, OnComplete complete)
      : buffer_(buffer), complete_(std::move(complete)) {}

  const StorageHandle& buffer() const { return buffer_; }

  // Frees the buffer after the work queued on its stream and completes the op, with this GPU
  // current: the engine records the completion event, and may create it (which selects the
  // event's GPU and leaves it current), from a thread that may be another device's worker.
  void release(std::exception_ptr error) {
    if (released_.exchange(true)) return;
    std::exception_ptr failure = std::move(error);
    std::unique_ptr<CurrentDevice> current;
    try {
      current = std::make_unique<CurrentDevice>(buffer_.device.id);
      storage::free(buffer_);
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    complete_(failure);
  }

 private:
  const StorageHandle buffer_;
  const OnComplete complete_;
  std::atomic<bool> released_{false};
};

// Frees `buffer` unless the scope hands it over (an error before the op reaches the rendezvous).
class BufferGuard {
 public:
  explicit BufferGuard(const StorageHandle& buffer) : buffer_(&buffer) {}
  ~BufferGuard() {
    if (buffer_ == nullptr) return;
    try {
      storage::free(*buffer_);
    } catch (...) {  // the error that unwinds this scope is the one to report
    }
  }
  void hand_over() { buffer_ = nullptr; }
  BufferGuard(const BufferGuard&) = delete;
  BufferGuard& operator=(const BufferGuard&) = delete;

 private:
  const StorageHandle* buffer_;
};

// Copies the local sums to the host (the rendezvous reads them there). Blocks this worker until
// the reduction is done: a few kernels' time, not another device's.
std::vector<double> to_host(const double* device_sums, int64_t channels, cudaStream_t s) {
  std::vector<double> host(2 * channels);
  if (channels > 0) {
    PMX_CUDA_CHECK(cudaMemcpyAsync(host.data(), device_sums, host.size() * sizeof(double),
                                   cudaMemcpyDeviceToHost, s));
    PMX_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  return host;
}

// Copies the round's combined numbers into `buffer` (pageable source: the call returns once the
// source is staged, so `total` may go away after it).
void to_device(const std::vector<double>& total, const StorageHandle& buffer, cudaStream_t s) {
  if (total.empty()) return;
  PMX_CUDA_CHECK(cudaMemcpyAsync(buffer.dptr, total.data(), total.size() * sizeof(double),
                                 cudaMemcpyHostToDevice, s));
}

template <typename T>
void forward_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const SyncBnAttrs a = nn::sync_bn_attrs(*ctx.attrs);
  const SyncBnView v = nn::sync_bn_view(in[0].shape);
  const int64_t size = v.count() * v.channels;
  const bool batch_stats = ctx.is_train && !a.use_global_stats;
  if (batch_stats) nn::sync_bn_check_engine(a);
  cudaStream_t s = stream_of(ctx);
  const StorageHandle buffer = stats_buffer(ctx, v.channels);
  BufferGuard guard(buffer);
  double* stats = static_cast<double*>(buffer.dptr);
  if (!batch_stats) {
    if (v.channels > 0) {
      moving_stats_kernel<T><<<grid_for(v.channels), kBlock, 0, s>>>(
          in[3].data<T>(), in[4].data<T>(), out[1].data<T>(), out[2].data<T>(), stats,
          v.channels, a.eps);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    if (size > 0) {
      apply_kernel<T><<<grid_for(size), kBlock, 0, s>>>(in[0].data<T>(), in[1].data<T>(),
                                                        in[2].data<T>(), stats, out[0].data<T>(),
                                                        size, v, a.fix_gamma);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    guard.hand_over();
    storage::free(buffer);
    ctx.complete();
    return;
  }
  SyncBnArrival arrival;
  arrival.device = ctx.run.device;
  arrival.moments = true;
  arrival.count = v.count();
  if (v.count() > 0 && v.channels > 0) {
    local_moments_kernel<T><<<channel_grid(v.channels), kBlock, 0, s>>>(in[0].data<T>(), v,
                                                                         stats);
    PMX_KERNEL_LAUNCH_CHECK();
    arrival.sums = to_host(stats, v.channels, s);
  } else {
    arrival.sums.assign(2 * v.channels, 0.0);
  }
  guard.hand_over();
  const auto pending = std::make_shared<PendingOp>(buffer, ctx.complete);
  arrival.complete = OnComplete([pending](std::exception_ptr error) {
    pending->release(std::move(error));
  });
  // The op's own stream (the engine records its completion there), not the buffer's: an empty
  // buffer has none.
  arrival.finish = [in, out, a, v, size, s, pending](const std::vector<double>& total,
                                                     int64_t n) {
    const StorageHandle& buffer = pending->buffer();
    CurrentDevice current(buffer.device.id);
    double* stats = static_cast<double*>(buffer.dptr);
    to_device(total, buffer, s);
    if (v.channels > 0) {
      global_stats_kernel<T><<<grid_for(v.channels), kBlock, 0, s>>>(
          stats, n, out[1].data<T>(), out[2].data<T>(), in[3].data<T>(), in[4].data<T>(),
          v.channels, a.eps, a.momentum);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    if (size > 0) {
      apply_kernel<T><<<grid_for(size), kBlock, 0, s>>>(in[0].data<T>(), in[1].data<T>(),
                                                        in[2].data<T>(), stats, out[0].data<T>(),
                                                        size, v, a.fix_gamma);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    pending->release(nullptr);
  };
  nn::sync_bn_arrive(a.key + "/forward", a.ndev, std::move(arrival));
}

template <typename T>
void backward_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const SyncBnAttrs a = nn::sync_bn_attrs(*ctx.attrs);
  const SyncBnView v = nn::sync_bn_view(in[1].shape);
  const int64_t size = v.count() * v.channels;
  if (!a.use_global_stats) nn::sync_bn_check_engine(a);
  cudaStream_t s = stream_of(ctx);
  const StorageHandle buffer = stats_buffer(ctx, v.channels);
  BufferGuard guard(buffer);
  double* sums = static_cast<double*>(buffer.dptr);
  if (v.channels > 0) {
    if (v.count() > 0) {
      grad_sums_kernel<T><<<channel_grid(v.channels), kBlock, 0, s>>>(
          in[0].data<T>(), in[1].data<T>(), in[3].data<T>(), in[4].data<T>(), v, a.eps,
          a.fix_gamma, sums, out[1].data<T>(), out[2].data<T>());
      PMX_KERNEL_LAUNCH_CHECK();
    } else {
      PMX_CUDA_CHECK(cudaMemsetAsync(sums, 0, 2 * v.channels * sizeof(double), s));
      PMX_CUDA_CHECK(cudaMemsetAsync(out[1].dptr, 0, v.channels * sizeof(T), s));
      PMX_CUDA_CHECK(cudaMemsetAsync(out[2].dptr, 0, v.channels * sizeof(T), s));
    }
  }
  if (a.use_global_stats) {
    if (size > 0) {
      data_grad_kernel<T><<<grid_for(size), kBlock, 0, s>>>(
          in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(), in[4].data<T>(),
          nullptr, 0, out[0].data<T>(), size, v, a.eps, a.fix_gamma);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    guard.hand_over();
    storage::free(buffer);
    ctx.complete();
    return;
  }
  SyncBnArrival arrival;
  arrival.device = ctx.run.device;
  arrival.count = v.count();
  arrival.sums = to_host(sums, v.channels, s);
  guard.hand_over();
  const auto pending = std::make_shared<PendingOp>(buffer, ctx.complete);
  arrival.complete = OnComplete([pending](std::exception_ptr error) {
    pending->release(std::move(error));
  });
  // The op's own stream (the engine records its completion there), not the buffer's: an empty
  // buffer has none.
  arrival.finish = [in, out, a, v, size, s, pending](const std::vector<double>& total,
                                                     int64_t n) {
    const StorageHandle& buffer = pending->buffer();
    CurrentDevice current(buffer.device.id);
    to_device(total, buffer, s);
    if (size > 0) {
      data_grad_kernel<T><<<grid_for(size), kBlock, 0, s>>>(
          in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(), in[4].data<T>(),
          static_cast<const double*>(buffer.dptr), n, out[0].data<T>(), size, v, a.eps,
          a.fix_gamma);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    pending->release(nullptr);
  };
  nn::sync_bn_arrive(a.key + "/backward", a.ndev, std::move(arrival));
}

void forward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  switch (in[0].dtype) {
    case DType::kFloat32: return forward_typed<float>(ctx, in, out);
    case DType::kFloat64: return forward_typed<double>(ctx, in, out);
    default:
      PMX_THROW(Status::kType, "_contrib_SyncBatchNorm: data must be float32 or float64, got ",
                dtype_name(in[0].dtype));
  }
}

void backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  switch (in[1].dtype) {
    case DType::kFloat32: return backward_typed<float>(ctx, in, out);
    case DType::kFloat64: return backward_typed<double>(ctx, in, out);
    default:
      PMX_THROW(Status::kType, "_contrib_SyncBatchNorm_backward: data must be float32 or "
                "float64, got ", dtype_name(in[1].dtype));
  }
}

const bool registered = [] {
  op_registry::get_or_create("_contrib_SyncBatchNorm").set_gpu(forward_compute);
  op_registry::get_or_create("_contrib_SyncBatchNorm_backward").set_gpu(backward_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
