// Group and instance normalisation, forward and backward (CPU definitions and the maths:
// engine/src/ops/nn_group_norm.cc). Float dtypes; float16 and bfloat16 compute in float and
// statistics accumulate in double, like the CPU's.
//
// | op                                         | inputs                           | outputs                          |
// |--------------------------------------------|----------------------------------|----------------------------------|
// | group_norm instance_norm                   | data, gamma, beta                | out, mean, std                   |
// | group_norm_backward instance_norm_backward | out_grad, data, gamma, mean, std | data_grad, gamma_grad, beta_grad |
//
// A group (n, g) is one contiguous block of group_size elements and a row (n, c) one of `inner`
// elements (GroupNormView). The sums over groups (forward) and rows (backward) are segment sums
// spread over the whole GPU (Note [Segment sums in chunks]); small kernels with a thread per
// group or channel turn them into statistics and coefficients, and the passes that write data
// are elementwise.
#include "kernel_util.cuh"
#include "launch.h"
#include "ops/group_norm.h"
#include "segment_sums.cuh"

namespace pymx {
namespace gpu {
namespace {

using nn::GroupNormView;

// The forward's segment term: d and d^2 with d = x - (the group's first element) (Note
// [Group-norm statistics in one pass] in nn_group_norm.cc).
template <typename T>
struct ShiftedSquares {
  const T* x;
  int64_t size;
  __device__ Sums2 operator()(int64_t group, int64_t j) const {
    const double d = convert<double>(x[group * size + j]) - convert<double>(x[group * size]);
    return {d, d * d};
  }
};

// Per group: mean and std into the outputs, and (mean, 1 / std) in double into `stats`.
template <typename T>
__global__ void norm_stats_kernel(const T* x, const Sums2* sums, T* mean_out, T* std_out,
                                  Sums2* stats, GroupNormView v, double eps) {
  const int64_t size = v.group_size();
  PMX_GRID_STRIDE_LOOP(group, v.num_groups_total()) {
    const double shift = size > 0 ? convert<double>(x[group * size]) : 0.0;
    const double shifted_mean = sums[group].a / static_cast<double>(size);  // NaN when empty
    const double var =
        fmax(sums[group].b / static_cast<double>(size) - shifted_mean * shifted_mean, 0.0);
    const double mean = shift + shifted_mean;
    const double std_dev = sqrt(var + eps);
    mean_out[group] = convert<T>(mean);
    std_out[group] = convert<T>(std_dev);
    stats[group] = {mean, 1.0 / std_dev};
  }
}

// out = (x - mean) * (gamma_c / std) + beta_c, centred first as on the CPU.
template <typename T>
__global__ void norm_apply_kernel(const T* x, const T* gamma, const T* beta, const Sums2* stats,
                                  T* y, int64_t n, GroupNormView v) {
  using A = AccT<T>;
  const int64_t size = v.group_size();
  PMX_GRID_STRIDE_LOOP(i, n) {
    const int64_t group = i / size;
    const int64_t c = (i / v.inner) % v.channels;
    const A scale = A(convert<double>(gamma[c]) * stats[group].b);
    y[i] = convert<T>((convert<A>(x[i]) - A(stats[group].a)) * scale + convert<A>(beta[c]));
  }
}

// The backward's segment term over row r: dy and dy * (x - mean of r's group).
template <typename T>
struct GradSums {
  const T* dy;
  const T* x;
  const T* mean;
  GroupNormView v;
  __device__ Sums2 operator()(int64_t row, int64_t j) const {
    const int64_t group = row / v.channels * v.groups + row % v.channels / v.channels_per_group();
    const double g = convert<double>(dy[row * v.inner + j]);
    return {g, g * (convert<double>(x[row * v.inner + j]) - convert<double>(mean[group]))};
  }
};

// Per group, from its rows' sums: data_grad = a_c * dy + b * (x - mean) + shift with
// a_c = gamma_c / std, b = -mean(dxhat * xhat) / std^2 and shift = -mean(dxhat) / std, where
// dxhat = dy * gamma_c; (b, shift) go to coef[group].
template <typename T>
__global__ void norm_grad_coef_kernel(const T* gamma, const T* stdv, const Sums2* row_sums,
                                      Sums2* coef, GroupNormView v) {
  const int64_t per_group = v.channels_per_group();
  const double size = static_cast<double>(v.group_size());
  PMX_GRID_STRIDE_LOOP(group, v.num_groups_total()) {
    const int64_t first_row = group / v.groups * v.channels + group % v.groups * per_group;
    double sum_dxhat = 0, sum_dxhat_dev = 0;
    for (int64_t k = 0; k < per_group; ++k) {
      const double g = convert<double>(gamma[(first_row + k) % v.channels]);
      sum_dxhat += g * row_sums[first_row + k].a;
      sum_dxhat_dev += g * row_sums[first_row + k].b;
    }
    const double inv = 1.0 / convert<double>(stdv[group]);
    const double mean_dxhat_xhat = sum_dxhat_dev * inv / size;
    coef[group] = {-inv * inv * mean_dxhat_xhat, -inv * sum_dxhat / size};
  }
}

template <typename T>
__global__ void norm_data_grad_kernel(const T* dy, const T* x, const T* gamma, const T* mean,
                                      const T* stdv, const Sums2* coef, T* dx, int64_t n,
                                      GroupNormView v) {
  using A = AccT<T>;
  const int64_t size = v.group_size();
  PMX_GRID_STRIDE_LOOP(i, n) {
    const int64_t group = i / size;
    const int64_t c = (i / v.inner) % v.channels;
    const A a = A(convert<double>(gamma[c]) / convert<double>(stdv[group]));
    const A centred = convert<A>(x[i]) - A(convert<double>(mean[group]));
    dx[i] = convert<T>(a * convert<A>(dy[i]) + A(coef[group].a) * centred + A(coef[group].b));
  }
}

// gamma_grad_c = sum over n of row (n, c)'s sum(dy * (x - mean)) / std; beta_grad_c = the same of
// sum(dy). A thread per channel, adding the samples in order.
template <typename T>
__global__ void norm_param_grad_kernel(const T* stdv, const Sums2* row_sums, T* dgamma, T* dbeta,
                                       GroupNormView v) {
  const int64_t per_group = v.channels_per_group();
  PMX_GRID_STRIDE_LOOP(c, v.channels) {
    double dg = 0, db = 0;
    for (int64_t n = 0; n < v.batch; ++n) {
      const int64_t r = n * v.channels + c;
      dg += row_sums[r].b / convert<double>(stdv[n * v.groups + c / per_group]);
      db += row_sums[r].a;
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
  const int64_t groups = v.num_groups_total(), n = in[0].size();
  if (groups == 0) return;
  const SegmentPlan plan = plan_segments(groups, v.group_size());
  const size_t stats_bytes = workspace_aligned(groups * sizeof(Sums2));
  char* ws = static_cast<char*>(ctx.workspace(2 * stats_bytes + segment_scratch_bytes(plan)));
  auto* sums = reinterpret_cast<Sums2*>(ws);
  auto* stats = reinterpret_cast<Sums2*>(ws + stats_bytes);
  void* scratch = ws + 2 * stats_bytes;
  cudaStream_t s = stream_of(ctx);
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    const T* x = in[0].data<T>();
    if (v.group_size() > 0) {
      segment_sums(ShiftedSquares<T>{x, v.group_size()}, plan, scratch, sums, s);
    } else {  // empty groups: zero sums, so the statistics come out 0/0 = NaN as on the CPU
      PMX_CUDA_CHECK(cudaMemsetAsync(sums, 0, groups * sizeof(Sums2), s));
    }
    norm_stats_kernel<T><<<grid_for(groups), kBlock, 0, s>>>(
        x, sums, out[1].data<T>(), out[2].data<T>(), stats, v, eps);
    PMX_KERNEL_LAUNCH_CHECK();
    if (n > 0) {
      norm_apply_kernel<T><<<grid_for(n), kBlock, 0, s>>>(x, in[1].data<T>(), in[2].data<T>(),
                                                          stats, out[0].data<T>(), n, v);
      PMX_KERNEL_LAUNCH_CHECK();
    }
  });
}

template <bool kInstance>
void norm_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const char* op = kInstance ? "instance_norm_backward" : "group_norm_backward";
  const GroupNormView v = nn::group_norm_view(in[1].shape, *ctx.attrs, kInstance, op);
  if (v.channels == 0) return;  // no gamma/beta gradients, and data_grad is empty
  const int64_t rows = v.rows(), groups = v.num_groups_total(), n = in[1].size();
  const SegmentPlan plan = plan_segments(rows, v.inner);
  const size_t row_bytes = workspace_aligned(std::max<int64_t>(rows, 1) * sizeof(Sums2));
  const size_t coef_bytes = workspace_aligned(std::max<int64_t>(groups, 1) * sizeof(Sums2));
  char* ws = static_cast<char*>(
      ctx.workspace(row_bytes + coef_bytes + segment_scratch_bytes(plan)));
  auto* row_sums = reinterpret_cast<Sums2*>(ws);
  auto* coef = reinterpret_cast<Sums2*>(ws + row_bytes);
  void* scratch = ws + row_bytes + coef_bytes;
  cudaStream_t s = stream_of(ctx);
  PMX_GPU_FLOAT_SWITCH(in[1].dtype, T, {
    const T* dy = in[0].data<T>();
    const T* x = in[1].data<T>();
    const T* gamma = in[2].data<T>();
    const T* mean = in[3].data<T>();
    const T* stdv = in[4].data<T>();
    if (n > 0) {
      segment_sums(GradSums<T>{dy, x, mean, v}, plan, scratch, row_sums, s);
      norm_grad_coef_kernel<T><<<grid_for(groups), kBlock, 0, s>>>(gamma, stdv, row_sums, coef,
                                                                   v);
      PMX_KERNEL_LAUNCH_CHECK();
      norm_data_grad_kernel<T><<<grid_for(n), kBlock, 0, s>>>(dy, x, gamma, mean, stdv, coef,
                                                              out[0].data<T>(), n, v);
      PMX_KERNEL_LAUNCH_CHECK();
    } else if (rows > 0) {  // rows of no positions: their sums are 0
      PMX_CUDA_CHECK(cudaMemsetAsync(row_sums, 0, rows * sizeof(Sums2), s));
    }
    norm_param_grad_kernel<T><<<grid_for(v.channels), kBlock, 0, s>>>(
        stdv, row_sums, out[1].data<T>(), out[2].data<T>(), v);
    PMX_KERNEL_LAUNCH_CHECK();
  });
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
