// Group and instance normalisation, forward and backward (CPU definitions and the maths:
// engine/src/ops/nn_group_norm.cc). Float dtypes; float16 and bfloat16 compute in float and
// statistics accumulate in double, like the CPU's.
//
// | op                                      | inputs                           | outputs                          |
// |-----------------------------------------|----------------------------------|----------------------------------|
// | group_norm instance_norm                | data, gamma, beta                | out, mean, std                   |
// | group_norm_backward instance_norm_backward | out_grad, data, gamma, mean, std | data_grad, gamma_grad, beta_grad |
//
// A group (n, g) is one contiguous block of group_size elements (GroupNormView). The forward and
// the data gradient run a block of threads per group, which reduces the group's sums through
// shared memory; the backward's per-row sums run a block per row (channel of a sample).
#include "kernel_util.cuh"
#include "launch.h"
#include "ops/group_norm.h"

namespace pymx {
namespace gpu {
namespace {

using nn::GroupNormView;

__device__ __forceinline__ double block_sum(double v) {
  return group_reduce(v, kBlock, [](double a, double b) { return a + b; });
}

// Blocks for `count` items of a block each.
unsigned blocks_for(int64_t count) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(count, 65535)));
}

// Statistics from sums of d = x - x[0] (Note [Group-norm statistics in one pass] in
// nn_group_norm.cc), then out = (x - mean) * (gamma_c / std) + beta_c.
template <typename T>
__global__ void norm_forward_kernel(const T* x, const T* gamma, const T* beta, T* y, T* mean_out,
                                    T* std_out, GroupNormView v, double eps) {
  using A = AccT<T>;
  const int64_t size = v.group_size(), per_group = v.channels_per_group();
  for (int64_t group = blockIdx.x; group < v.num_groups_total(); group += gridDim.x) {
    const T* xg = x + group * size;
    T* yg = y + group * size;
    const double shift = size > 0 ? convert<double>(xg[0]) : 0.0;
    double sum = 0, sum_sq = 0;
    for (int64_t i = threadIdx.x; i < size; i += kBlock) {
      const double d = convert<double>(xg[i]) - shift;
      sum += d;
      sum_sq += d * d;
    }
    sum = block_sum(sum);
    sum_sq = block_sum(sum_sq);
    const double shifted_mean = sum / static_cast<double>(size);  // NaN for an empty group
    const double var = fmax(sum_sq / static_cast<double>(size) - shifted_mean * shifted_mean, 0.0);
    const double mean = shift + shifted_mean;
    const double std_dev = sqrt(var + eps);
    if (threadIdx.x == 0) {
      mean_out[group] = convert<T>(mean);
      std_out[group] = convert<T>(std_dev);
    }
    const int64_t first_channel = (group % v.groups) * per_group;
    const A m = A(mean);
    for (int64_t i = threadIdx.x; i < size; i += kBlock) {
      const int64_t c = first_channel + i / v.inner;
      const A scale = A(convert<double>(gamma[c]) / std_dev);
      yg[i] = convert<T>((convert<A>(xg[i]) - m) * scale + convert<A>(beta[c]));
    }
  }
}

// Per row r (channel of a sample): sum(dy) and sum(dy * (x - mean)) into row_sums[r] and
// row_sums[rows + r].
template <typename T>
__global__ void norm_row_sums_kernel(const T* dy, const T* x, const T* mean, double* row_sums,
                                     GroupNormView v) {
  const int64_t rows = v.rows(), per_group = v.channels_per_group();
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const double m =
        convert<double>(mean[r / v.channels * v.groups + r % v.channels / per_group]);
    double s = 0, s_dev = 0;
    for (int64_t i = threadIdx.x; i < v.inner; i += kBlock) {
      const double g = convert<double>(dy[r * v.inner + i]);
      s += g;
      s_dev += g * (convert<double>(x[r * v.inner + i]) - m);
    }
    s = block_sum(s);
    s_dev = block_sum(s_dev);
    if (threadIdx.x == 0) {
      row_sums[r] = s;
      row_sums[rows + r] = s_dev;
    }
  }
}

// data_grad = (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) / std over each group, the
// means taken from the rows' sums.
template <typename T>
__global__ void norm_data_grad_kernel(const T* dy, const T* x, const T* gamma, const T* mean,
                                      const T* stdv, const double* row_sums, T* dx,
                                      GroupNormView v) {
  using A = AccT<T>;
  const int64_t size = v.group_size(), per_group = v.channels_per_group(), rows = v.rows();
  for (int64_t group = blockIdx.x; group < v.num_groups_total(); group += gridDim.x) {
    const int64_t first_row = group / v.groups * v.channels + group % v.groups * per_group;
    const int64_t first_channel = first_row % v.channels;
    double sum_dxhat = 0, sum_dxhat_dev = 0;
    for (int64_t k = threadIdx.x; k < per_group; k += kBlock) {
      const double g = convert<double>(gamma[first_channel + k]);
      sum_dxhat += g * row_sums[first_row + k];
      sum_dxhat_dev += g * row_sums[rows + first_row + k];
    }
    sum_dxhat = block_sum(sum_dxhat);
    sum_dxhat_dev = block_sum(sum_dxhat_dev);
    const double m = convert<double>(mean[group]);
    const double inv = 1.0 / convert<double>(stdv[group]);
    const double mean_dxhat = sum_dxhat / static_cast<double>(size);
    const double mean_dxhat_xhat = sum_dxhat_dev * inv / static_cast<double>(size);
    const A b = A(-inv * inv * mean_dxhat_xhat);
    const A shift = A(-inv * mean_dxhat);
    const A center = A(m);
    const int64_t offset = group * size;
    for (int64_t i = threadIdx.x; i < size; i += kBlock) {
      const A a = A(inv * convert<double>(gamma[first_channel + i / v.inner]));
      dx[offset + i] = convert<T>(a * convert<A>(dy[offset + i]) +
                                  b * (convert<A>(x[offset + i]) - center) + shift);
    }
  }
}

// gamma_grad_c = sum over n of row (n, c)'s sum(dy * (x - mean)) / std; beta_grad_c = the same of
// sum(dy). A thread per channel, adding the samples in order.
template <typename T>
__global__ void norm_param_grad_kernel(const T* stdv, const double* row_sums, T* dgamma, T* dbeta,
                                       GroupNormView v) {
  const int64_t rows = v.rows(), per_group = v.channels_per_group();
  PMX_GRID_STRIDE_LOOP(c, v.channels) {
    double dg = 0, db = 0;
    for (int64_t n = 0; n < v.batch; ++n) {
      const int64_t r = n * v.channels + c;
      dg += row_sums[rows + r] / convert<double>(stdv[n * v.groups + c / per_group]);
      db += row_sums[r];
    }
    dgamma[c] = convert<T>(dg);
    dbeta[c] = convert<T>(db);
  }
}

template <bool kInstance>
void norm_forward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  const char* op = kInstance ? "instance_norm" : "group_norm";
  const GroupNormView v = nn::group_norm_view(in[0].shape, *ctx.attrs, kInstance, op);
  const double eps = nn::group_norm_eps(*ctx.attrs, kInstance);
  if (v.num_groups_total() == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    norm_forward_kernel<T><<<blocks_for(v.num_groups_total()), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(), out[1].data<T>(),
        out[2].data<T>(), v, eps);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

template <bool kInstance>
void norm_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const char* op = kInstance ? "instance_norm_backward" : "group_norm_backward";
  const GroupNormView v = nn::group_norm_view(in[1].shape, *ctx.attrs, kInstance, op);
  if (v.channels == 0) return;  // no gamma/beta gradients, and data_grad is empty
  cudaStream_t s = stream_of(ctx);
  auto* row_sums = static_cast<double*>(ctx.workspace(2 * v.rows() * sizeof(double) + 1));
  PMX_GPU_FLOAT_SWITCH(in[1].dtype, T, {
    if (v.rows() > 0) {
      norm_row_sums_kernel<T><<<blocks_for(v.rows()), kBlock, 0, s>>>(
          in[0].data<T>(), in[1].data<T>(), in[3].data<T>(), row_sums, v);
      PMX_KERNEL_LAUNCH_CHECK();
      norm_data_grad_kernel<T><<<blocks_for(v.num_groups_total()), kBlock, 0, s>>>(
          in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(), in[4].data<T>(),
          row_sums, out[0].data<T>(), v);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    norm_param_grad_kernel<T><<<grid_for(v.channels), kBlock, 0, s>>>(
        in[4].data<T>(), row_sums, out[1].data<T>(), out[2].data<T>(), v);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("group_norm").set_gpu(norm_forward_compute<false>);
  op_registry::get_or_create("group_norm_backward").set_gpu(norm_backward_compute<false>);
  op_registry::get_or_create("instance_norm").set_gpu(norm_forward_compute<true>);
  op_registry::get_or_create("instance_norm_backward").set_gpu(norm_backward_compute<true>);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
