// Group and instance normalisation.
//
// | op                      | inputs                          | outputs                          | attrs |
// |-------------------------|---------------------------------|----------------------------------|-------|
// | group_norm              | data, gamma, beta               | out, mean, std                   | num_groups (1), eps (1e-5) |
// | group_norm_backward     | out_grad, data, gamma, mean, std | data_grad, gamma_grad, beta_grad | same as forward |
// | instance_norm           | data, gamma, beta               | out, mean, std                   | eps (1e-3) |
// | instance_norm_backward  | out_grad, data, gamma, mean, std | data_grad, gamma_grad, beta_grad | eps |
//
// data is (N, C, spatial...) with at least 3 dimensions; gamma and beta are (C,). group_norm
// splits the C channels of each sample into num_groups groups of C / num_groups channels and
// normalises each group over its channels and positions: out = (x - mean) / std * gamma_c +
// beta_c with std = sqrt(var + eps) (biased variance). mean and std are (N, num_groups).
// instance_norm is group_norm with a group per channel: mean and std are (N, C).
// Float dtypes; gamma and beta share data's dtype; float16 runs through the float kernels
// (through_float.h), bfloat16 computes in float. An empty group has NaN statistics.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/group_norm.h"
#include "ops/nn_common.h"
#include "ops/through_float.h"
#include "parallel.h"

namespace pymx {
namespace {

using nn::GroupNormView;

const char* op_name(bool instance) { return instance ? "instance_norm" : "group_norm"; }

void norm_infer(bool instance, const Attrs& attrs, const std::vector<Shape>& in,
                const std::vector<DType>& dt, std::vector<Shape>* out,
                std::vector<DType>* out_dt) {
  const char* op = op_name(instance);
  const GroupNormView v = nn::group_norm_view(in[0], attrs, instance, op);
  nn::group_norm_eps(attrs, instance);
  const Shape c = {v.channels};
  PMX_CHECK(in[1] == c && in[2] == c, op, ": gamma ", shape_str(in[1]), " and beta ",
            shape_str(in[2]), " must have shape ", shape_str(c), ", the channels of data ",
            shape_str(in[0]));
  nn::check_same_float(dt, op);
  const Shape stat = {v.batch, v.groups};
  *out = {in[0], stat, stat};
  *out_dt = {dt[0], dt[0], dt[0]};
}

void norm_backward_infer(bool instance, const Attrs& attrs, const std::vector<Shape>& in,
                         const std::vector<DType>& dt, std::vector<Shape>* out,
                         std::vector<DType>* out_dt) {
  const std::string op = std::string(op_name(instance)) + "_backward";
  PMX_CHECK(in[0] == in[1], op, ": out_grad ", shape_str(in[0]), " and data ", shape_str(in[1]),
            " differ");
  const GroupNormView v = nn::group_norm_view(in[1], attrs, instance, op.c_str());
  const Shape c = {v.channels}, stat = {v.batch, v.groups};
  PMX_CHECK(in[2] == c && in[3] == stat && in[4] == stat, op, ": gamma ", shape_str(in[2]),
            ", mean ", shape_str(in[3]), " and std ", shape_str(in[4]), " must be ",
            shape_str(c), ", ", shape_str(stat), " and ", shape_str(stat), " for data ",
            shape_str(in[1]));
  nn::check_same_float(dt, op.c_str());
  *out = {in[1], in[2], in[2]};
  *out_dt = {dt[1], dt[1], dt[1]};
}

// Note [Group-norm statistics in one pass]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A group is one contiguous block of memory (data is (N, C, spatial...) and a group is whole
// channels of one sample), so each thread takes whole groups and reads each once for its
// statistics: sum(d) and sum(d^2) with d = x - x[0], the group's first element. Shifting by a
// value of the data keeps var = sum(d^2) / n - (sum(d) / n)^2 free of the cancellation that
// sum(x^2) / n - mean^2 suffers for data far from 0 (it is exact for constant data). The sums
// run in kChunk-element chunks of kLanes lanes of the accumulation type (float for float32, so
// that they vectorise; Note [Lane sums]) and each chunk is added in double, so no float partial
// sum has more than kChunk / kLanes terms. Every sum is taken in a fixed order: results do not
// depend on the threads.
constexpr int64_t kChunk = 1024;
// Elements per parallel chunk (~64 KiB of float): enough to pay for handing it to a thread.
constexpr int64_t kGrain = 16384;

// Adds sum(x - shift) and sum((x - shift)^2) over [0, n) to *sum and *sum_sq.
template <typename A, typename T>
void add_shifted_sums(const T* x, int64_t n, A shift, double* sum, double* sum_sq) {
  for (int64_t lo = 0; lo < n; lo += kChunk) {
    const int64_t len = std::min(kChunk, n - lo);
    A part[nn::kLanes] = {}, part_sq[nn::kLanes] = {};
    int64_t i = 0;
    for (; i + nn::kLanes <= len; i += nn::kLanes) {
      for (int j = 0; j < nn::kLanes; ++j) {
        const A d = static_cast<A>(x[lo + i + j]) - shift;
        part[j] += d;
        part_sq[j] += d * d;
      }
    }
    double s = 0, sq = 0;
    for (; i < len; ++i) {
      const A d = static_cast<A>(x[lo + i]) - shift;
      s += static_cast<double>(d);
      sq += static_cast<double>(d * d);
    }
    for (int j = 0; j < nn::kLanes; ++j) {
      s += static_cast<double>(part[j]);
      sq += static_cast<double>(part_sq[j]);
    }
    *sum += s;
    *sum_sq += sq;
  }
}

template <typename T>
void norm_forward_typed(bool instance, const OpContext& ctx, const std::vector<TBlob>& in,
                        const std::vector<TBlob>& out) {
  using A = nn::acc_t<T>;
  const char* op = op_name(instance);
  const GroupNormView v = nn::group_norm_view(in[0].shape, *ctx.attrs, instance, op);
  const double eps = nn::group_norm_eps(*ctx.attrs, instance);
  const int64_t size = v.group_size(), per_group = v.channels_per_group();
  const T* x = in[0].data<T>();
  const T* gamma = in[1].data<T>();
  const T* beta = in[2].data<T>();
  T* y = out[0].data<T>();
  T* mean_out = out[1].data<T>();
  T* std_out = out[2].data<T>();
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(size, 1));
  // Groups are independent: each reads and writes only its own block and statistics.
  parallel_for(0, v.num_groups_total(), grain, [&](int64_t lo, int64_t hi) {
    for (int64_t group = lo; group < hi; ++group) {
      const T* xg = x + group * size;
      T* yg = y + group * size;
      const A shift = size > 0 ? static_cast<A>(xg[0]) : A(0);
      double sum = 0, sum_sq = 0;
      add_shifted_sums(xg, size, shift, &sum, &sum_sq);
      const double shifted_mean = sum / static_cast<double>(size);  // NaN for an empty group
      const double var =
          std::max(sum_sq / static_cast<double>(size) - shifted_mean * shifted_mean, 0.0);
      const double mean = static_cast<double>(shift) + shifted_mean;
      const double std_dev = std::sqrt(var + eps);
      mean_out[group] = static_cast<T>(mean);
      std_out[group] = static_cast<T>(std_dev);
      // out = (x - mean) * scale + beta: centring first keeps the precision of data far from 0,
      // which x * scale + (beta - mean * scale) would lose to cancellation.
      const A m = static_cast<A>(mean);
      const int64_t first_channel = (group % v.groups) * per_group;
      for (int64_t k = 0; k < per_group; ++k) {
        const A scale = static_cast<A>(static_cast<double>(gamma[first_channel + k]) / std_dev);
        const A b = static_cast<A>(beta[first_channel + k]);
        const T* xc = xg + k * v.inner;
        T* yc = yg + k * v.inner;
        for (int64_t i = 0; i < v.inner; ++i)
          yc[i] = static_cast<T>((static_cast<A>(xc[i]) - m) * scale + b);
      }
    }
  });
}

// Adds sum(dy) and sum(dy * (x - center)) over [0, n) to *sum_dy and *sum_dy_dev, in chunks of
// kChunk added in double (Note [Group-norm statistics in one pass]).
template <typename A, typename T>
void add_grad_sums(const T* dy, const T* x, int64_t n, A center, double* sum_dy,
                   double* sum_dy_dev) {
  for (int64_t lo = 0; lo < n; lo += kChunk) {
    const int64_t len = std::min(kChunk, n - lo);
    *sum_dy += static_cast<double>(nn::lane_sum<A>(dy + lo, len));
    *sum_dy_dev += static_cast<double>(nn::lane_dot_dev<A>(dy + lo, x + lo, len, center));
  }
}

// With xhat = (x - mean) / std and dxhat = dy * gamma_c, over each group of size L:
//   data_grad = (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) / std
//   gamma_grad_c = sum over n and positions of dy * xhat, beta_grad_c = the same of dy.
// Pass 1 takes each row's (channel of a sample's) sum(dy) and sum(dy * (x - mean)); the groups'
// means and the parameter gradients follow from those per-row sums, and pass 2 writes
// data_grad = a * dy + b * (x - mean) + shift with per-row coefficients (centred, as the
// forward, for data far from 0).
template <typename T>
void norm_backward_typed(bool instance, const OpContext& ctx, const std::vector<TBlob>& in,
                         const std::vector<TBlob>& out) {
  using A = nn::acc_t<T>;
  const char* op = instance ? "instance_norm_backward" : "group_norm_backward";
  const GroupNormView v = nn::group_norm_view(in[1].shape, *ctx.attrs, instance, op);
  const T* dy = in[0].data<T>();
  const T* x = in[1].data<T>();
  const T* gamma = in[2].data<T>();
  const T* mean = in[3].data<T>();
  const T* stdv = in[4].data<T>();
  T* dx = out[0].data<T>();
  T* dgamma = out[1].data<T>();
  T* dbeta = out[2].data<T>();
  const int64_t rows = v.rows(), per_group = v.channels_per_group();
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(v.inner, 1));
  const auto group_of = [&](int64_t row) { return row / v.channels * v.groups +
                                                  row % v.channels / per_group; };
  std::vector<double> sum_dy(rows, 0.0), sum_dy_dev(rows, 0.0);
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      add_grad_sums(dy + r * v.inner, x + r * v.inner, v.inner,
                    static_cast<A>(mean[group_of(r)]), &sum_dy[r], &sum_dy_dev[r]);
    }
  });
  const double size = static_cast<double>(v.group_size());
  std::vector<A> a(rows), b(rows), shift(rows), center(rows);
  for (int64_t group = 0; group < v.num_groups_total(); ++group) {
    const int64_t first_row = group / v.groups * v.channels + group % v.groups * per_group;
    const double m = static_cast<double>(mean[group]);
    const double inv = 1.0 / static_cast<double>(stdv[group]);
    double sum_dxhat = 0, sum_dxhat_dev = 0;  // sum(dxhat), sum(dxhat * (x - mean))
    for (int64_t k = 0; k < per_group; ++k) {
      const double g = static_cast<double>(gamma[first_row % v.channels + k]);
      sum_dxhat += g * sum_dy[first_row + k];
      sum_dxhat_dev += g * sum_dy_dev[first_row + k];
    }
    const double mean_dxhat = sum_dxhat / size;
    const double mean_dxhat_xhat = sum_dxhat_dev * inv / size;
    for (int64_t k = 0; k < per_group; ++k) {
      const int64_t r = first_row + k;
      a[r] = static_cast<A>(inv * static_cast<double>(gamma[r % v.channels]));
      b[r] = static_cast<A>(-inv * inv * mean_dxhat_xhat);
      shift[r] = static_cast<A>(-inv * mean_dxhat);
      center[r] = static_cast<A>(m);
    }
  }
  for (int64_t c = 0; c < v.channels; ++c) {
    double dg = 0, db = 0;
    for (int64_t n = 0; n < v.batch; ++n) {
      const int64_t r = n * v.channels + c;
      dg += sum_dy_dev[r] / static_cast<double>(stdv[group_of(r)]);
      db += sum_dy[r];
    }
    dgamma[c] = static_cast<T>(dg);
    dbeta[c] = static_cast<T>(db);
  }
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const A ar = a[r], br = b[r], sr = shift[r], mr = center[r];
      const T* dyr = dy + r * v.inner;
      const T* xr = x + r * v.inner;
      T* dxr = dx + r * v.inner;
      for (int64_t i = 0; i < v.inner; ++i) {
        dxr[i] = static_cast<T>(ar * static_cast<A>(dyr[i]) + br * (static_cast<A>(xr[i]) - mr) +
                                sr);
      }
    }
  });
}

template <bool kInstance>
void norm_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  PMX_FLOAT_BUT_HALF_SWITCH(in[0].dtype, T, { norm_forward_typed<T>(kInstance, ctx, in, out); });
}

template <bool kInstance>
void norm_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  PMX_FLOAT_BUT_HALF_SWITCH(in[1].dtype, T, { norm_backward_typed<T>(kInstance, ctx, in, out); });
}

// The gradient reads data, gamma, mean and std (not beta or out).
GradFn norm_gradient(const char* backward_op) {
  return [backward_op](const GradContext& ctx) {
    return invoke(backward_op, {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1], ctx.outputs[1],
                                ctx.outputs[2]},
                  ctx.attrs);
  };
}

template <bool kInstance>
void norm_infer_as(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                   std::vector<Shape>* out, std::vector<DType>* out_dt) {
  norm_infer(kInstance, attrs, in, dt, out, out_dt);
}

template <bool kInstance>
void norm_backward_infer_as(const Attrs& attrs, const std::vector<Shape>& in,
                            const std::vector<DType>& dt, std::vector<Shape>* out,
                            std::vector<DType>* out_dt) {
  norm_backward_infer(kInstance, attrs, in, dt, out, out_dt);
}

PMX_REGISTER_OP(group_norm)
    .set_num_inputs(3)
    .set_num_outputs(3)
    .set_infer(norm_infer_as<false>)
    .set_cpu(nn::through_float(norm_forward<false>, nn::Widen::kFloat16Only))
    .set_gradient(norm_gradient("group_norm_backward"))
    .set_grad_uses({0, 1}, {1, 2});

PMX_REGISTER_OP(group_norm_backward)
    .set_num_inputs(5)
    .set_num_outputs(3)
    .set_infer(norm_backward_infer_as<false>)
    .set_cpu(nn::through_float(norm_backward<false>, nn::Widen::kFloat16Only));

PMX_REGISTER_OP(instance_norm)
    .set_num_inputs(3)
    .set_num_outputs(3)
    .set_infer(norm_infer_as<true>)
    .set_cpu(nn::through_float(norm_forward<true>, nn::Widen::kFloat16Only))
    .set_gradient(norm_gradient("instance_norm_backward"))
    .set_grad_uses({0, 1}, {1, 2});

PMX_REGISTER_OP(instance_norm_backward)
    .set_num_inputs(5)
    .set_num_outputs(3)
    .set_infer(norm_backward_infer_as<true>)
    .set_cpu(nn::through_float(norm_backward<true>, nn::Widen::kFloat16Only));

}  // namespace
}  // namespace pymx
