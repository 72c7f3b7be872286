// Batch and layer normalisation.
//
// | op                   | inputs                                         | outputs                             | attrs |
// |----------------------|------------------------------------------------|-------------------------------------|-------|
// | batch_norm           | data, gamma, beta, moving_mean, moving_var     | out, mean, var                      | eps momentum fix_gamma use_global_stats axis cudnn_off |
// | batch_norm_backward  | out_grad, data, gamma, mean, var               | data_grad, gamma_grad, beta_grad    | same as forward |
// | layer_norm           | data, gamma, beta                              | out, mean, std                      | axis eps |
// | layer_norm_backward  | out_grad, data, gamma, mean, std               | data_grad, gamma_grad, beta_grad    | same as forward |
//
// batch_norm (MXNet defaults: eps 1e-3, momentum 0.9, fix_gamma True, axis 1): per channel c of
// `axis`, out = (x - mean_c) / sqrt(var_c + eps) * gamma_c + beta_c (gamma taken as 1 when
// fix_gamma). In training (OpContext::is_train and not use_global_stats) mean/var are the batch
// statistics (biased variance, as MXNet) and the kernel also updates, in place (mutate_inputs
// {3, 4}), moving = moving * momentum + batch * (1 - momentum). Otherwise the moving statistics are
// used. Outputs mean/var are the statistics used (the backward needs them). Parameters and
// statistics may be float32 while data is float16 (Gluon keeps them in float32).
// batch_norm_backward uses the batch-statistics formula when the backward runs in training mode
// and use_global_stats is off (MXNet's BatchNormBackward rule), else treats mean/var as constants.
// gamma_grad is zero when fix_gamma. cudnn_off (MXNet's): True keeps the GPU kernels off cuDNN
// (cuda/src/cudnn_batch_norm.cu); the CPU kernels only validate it.
//
// layer_norm (eps 1e-5, axis -1): normalises over `axis`; mean/std have data's shape with that
// axis of extent 1; std = sqrt(var + eps).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/fma_level.h"
#include "ops/nn_common.h"
#include "ops/through_float.h"
#include "parallel.h"

namespace pymx {
namespace {

using nn::AxisView;
using nn::axis_view;

// ---------------------------------------------------------------------------------------------
// batch_norm
// ---------------------------------------------------------------------------------------------
void bn_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
              std::vector<Shape>* out, std::vector<DType>* out_dt) {
  PMX_CHECK(!in[0].empty(), "batch_norm: data must have at least one dimension");
  nn::cudnn_off(attrs);  // validates it
  const int axis = nn::normalize_axis(attrs.get_int("axis", 1), static_cast<int>(in[0].size()),
                                      "batch_norm");
  const Shape c = {in[0][axis]};
  static const char* names[] = {"data", "gamma", "beta", "moving_mean", "moving_var"};
  for (int i = 1; i < 5; ++i) {
    PMX_CHECK(in[i] == c, "batch_norm: ", names[i], " shape ", shape_str(in[i]),
              " does not match the ", c[0], " channels of data ", shape_str(in[0]), " on axis ",
              axis);
    PMX_CHECK(dt[i] == dt[1], "batch_norm: ", names[i], " has dtype ", dtype_name(dt[i]),
              " but gamma has ", dtype_name(dt[1]));
  }
  nn::check_float(dt[0], "batch_norm", "data");
  PMX_CHECK(dt[1] == dt[0] || dt[1] == DType::kFloat32, "batch_norm: parameters have dtype ",
            dtype_name(dt[1]), "; they must be float32 or match data (", dtype_name(dt[0]), ")");
  *out = {in[0], c, c};
  *out_dt = {dt[0], dt[1], dt[1]};
}

// Note [Batch-norm memory passes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// batch_norm is bound by memory traffic, not arithmetic (LeafNetwork's first one normalises
// 31 MB). Around the channel axis the data is (outer, n, inner) (AxisView); the kernels take one
// of two routes.
//  - Channel runs (inner >= kMinRun: NCHW feature maps). Channels are split over the intra-op
//    pool, and a thread makes all its passes over one channel's runs (one per outer index,
//    `inner` long) before the next channel: the forward sums for the mean, for the variance, then
//    normalises; the backward takes its two sums in one pass, then writes data_grad. The first
//    pass over a channel comes from memory, the later ones from L2 (LeafNetwork's channels are
//    1 MB at most) or, for channels of several MB, from L3: a variance from a single read
//    (merging per-group moments) measured no faster at those sizes.
//  - Channel rows (inner < kMinRun: (N, C) after a dense layer, channel-last NHWC). A channel's
//    elements are strided, so every pass walks whole rows of n * inner elements instead, with one
//    double accumulator per position in the row; the rows are split into parts, each with its
//    own accumulators, and the parts are added in order.
// A run is summed in groups of at most kGroup elements, each in kLanes lanes (Note [Lane sums])
// of the accumulation type, float for float32 (so that it vectorises four to an SSE register),
// and each group's sum is added in double, so no float partial sum has more than
// kGroup / kLanes terms. The variance sums squared deviations from the mean (the second pass),
// so data far from 0 loses no precision to cancellation. Every sum is taken in a fixed order, so
// results do not depend on the threads' interleaving.
constexpr int64_t kMinRun = 32;
constexpr int64_t kGroup = 1024;

// Add sum(x) and sum((x - center)^2) over [0, n) to *total, in groups of kGroup (Note
// [Batch-norm memory passes]).
template <typename A, typename T>
void add_sums(const T* x, int64_t n, double* total) {
  for (int64_t lo = 0; lo < n; lo += kGroup)
    *total += static_cast<double>(nn::lane_sum<A>(x + lo, std::min(kGroup, n - lo)));
}

template <typename A, typename T>
void add_squared_deviation_sums(const T* x, int64_t n, A center, double* total) {
  for (int64_t lo = 0; lo < n; lo += kGroup) {
    *total +=
        static_cast<double>(nn::lane_sum_sq_dev<A>(x + lo, std::min(kGroup, n - lo), center));
  }
}

// Adds sum(dy) and sum(dy * (x - center)) over [0, n) to *sum_dy and *sum_dy_dev, in groups of
// kGroup (Note [Batch-norm memory passes]): the second sum re-reads the group's dy from L1.
template <typename A, typename T>
void add_grad_sums(const T* dy, const T* x, int64_t n, A center, double* sum_dy,
                   double* sum_dy_dev) {
  for (int64_t lo = 0; lo < n; lo += kGroup) {
    const int64_t len = std::min(kGroup, n - lo);
    *sum_dy += static_cast<double>(nn::lane_sum<A>(dy + lo, len));
    *sum_dy_dev += static_cast<double>(nn::lane_dot_dev<A>(dy + lo, x + lo, len, center));
  }
}

// Channel rows: a part of the rows is at least kRowPartElems elements.
constexpr int64_t kRowPartElems = int64_t(1) << 15;

int64_t row_grain(const AxisView& v) {
  return std::max<int64_t>(1, kRowPartElems / std::max<int64_t>(v.n * v.inner, 1));
}

// Channel rows: calls body(row offset, accumulators) for every row, where the accumulators are
// kSums sets of n * inner doubles of the row's part (in `scratch`, zeroed first); then adds the
// parts in order and writes set s's total for channel c, over its `inner` positions, to
// totals[s * n + c].
template <int kSums, typename Body>
void sum_rows(const AxisView& v, std::vector<double>* scratch, double* totals, const Body& body) {
  const int64_t width = kSums * v.n * v.inner;
  const int64_t parts = std::max<int64_t>(parallel_parts(v.outer, row_grain(v)), 1);
  scratch->assign(parts * width, 0.0);
  double* acc = scratch->data();
  parallel_for_parts(v.outer, row_grain(v), [&](int64_t part, int64_t first, int64_t last) {
    for (int64_t o = first; o < last; ++o) body(o * v.n * v.inner, acc + part * width);
  });
  for (int64_t part = 1; part < parts; ++part)
    for (int64_t j = 0; j < width; ++j) acc[j] += acc[part * width + j];
  for (int64_t c = 0; c < kSums * v.n; ++c) {
    double total = 0;
    for (int64_t i = 0; i < v.inner; ++i) total += acc[c * v.inner + i];
    totals[c] = total;
  }
}

template <typename T, typename P>
void bn_forward_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  using A = nn::acc_t<T>;
  const Attrs& attrs = *ctx.attrs;
  const int axis = nn::normalize_axis(attrs.get_int("axis", 1), in[0].ndim(), "batch_norm");
  const AxisView v = axis_view(in[0].shape, axis);
  const double eps = attrs.get_float("eps", 1e-3);
  const double momentum = attrs.get_float("momentum", 0.9);
  const bool fix_gamma = attrs.get_bool("fix_gamma", true);
  const bool batch_stats = ctx.is_train && !attrs.get_bool("use_global_stats", false);
  const T* x = in[0].data<T>();
  const P* gamma = in[1].data<P>();
  const P* beta = in[2].data<P>();
  P* moving_mean = in[3].data<P>();
  P* moving_var = in[4].data<P>();
  T* y = out[0].data<T>();
  P* mean_out = out[1].data<P>();
  P* var_out = out[2].data<P>();
  const double count = static_cast<double>(v.outer * v.inner);
  // Records channel c's statistics (batch or moving) and returns y = x * scale + shift's
  // coefficients.
  auto coefficients = [&](int64_t c, double mean, double var, A* scale, A* shift) {
    if (batch_stats) {
      moving_mean[c] = static_cast<P>(static_cast<double>(moving_mean[c]) * momentum +
                                      mean * (1 - momentum));
      moving_var[c] = static_cast<P>(static_cast<double>(moving_var[c]) * momentum +
                                     var * (1 - momentum));
    } else {
      mean = static_cast<double>(moving_mean[c]);
      var = static_cast<double>(moving_var[c]);
    }
    mean_out[c] = static_cast<P>(mean);
    var_out[c] = static_cast<P>(var);
    const double g = fix_gamma ? 1.0 : static_cast<double>(gamma[c]);
    const double k = g / std::sqrt(var + eps);
    *scale = static_cast<A>(k);
    *shift = static_cast<A>(static_cast<double>(beta[c]) - mean * k);
  };
  if (v.inner >= kMinRun) {
    // Channel runs. Channels are independent: each reads and writes only its own runs and
    // statistics.
    parallel_for(0, v.n, 1, [&](int64_t c_lo, int64_t c_hi) {
      for (int64_t c = c_lo; c < c_hi; ++c) {
        double mean = 0, var = 0;
        if (batch_stats && count > 0) {
          double sum = 0, sq = 0;
          for (int64_t o = 0; o < v.outer; ++o)
            add_sums<A>(x + (o * v.n + c) * v.inner, v.inner, &sum);
          mean = sum / count;
          for (int64_t o = 0; o < v.outer; ++o) {
            add_squared_deviation_sums(x + (o * v.n + c) * v.inner, v.inner,
                                       static_cast<A>(mean), &sq);
          }
          var = sq / count;
        }
        A scale, shift;
        coefficients(c, mean, var, &scale, &shift);
        for (int64_t o = 0; o < v.outer; ++o) {
          const int64_t base = (o * v.n + c) * v.inner;
          for (int64_t i = 0; i < v.inner; ++i)
            y[base + i] = static_cast<T>(static_cast<A>(x[base + i]) * scale + shift);
        }
      }
    });
    return;
  }
  // Channel rows.
  const int64_t width = v.n * v.inner;
  std::vector<double> mean(v.n, 0.0), var(v.n, 0.0);
  if (batch_stats) {
    std::vector<double> acc, center(width);
    sum_rows<1>(v, &acc, mean.data(), [&](int64_t row, double* a) {
      for (int64_t j = 0; j < width; ++j) a[j] += static_cast<double>(x[row + j]);
    });
    for (int64_t c = 0; c < v.n; ++c) mean[c] = count > 0 ? mean[c] / count : 0.0;
    for (int64_t j = 0; j < width; ++j) center[j] = mean[j / v.inner];
    sum_rows<1>(v, &acc, var.data(), [&](int64_t row, double* a) {
      for (int64_t j = 0; j < width; ++j) {
        const double d = static_cast<double>(x[row + j]) - center[j];
        a[j] += d * d;
      }
    });
    for (int64_t c = 0; c < v.n; ++c) var[c] = count > 0 ? var[c] / count : 0.0;
  }
  std::vector<A> scale(width), shift(width);
  for (int64_t c = 0; c < v.n; ++c) {
    A k, b;
    coefficients(c, mean[c], var[c], &k, &b);
    std::fill(scale.begin() + c * v.inner, scale.begin() + (c + 1) * v.inner, k);
    std::fill(shift.begin() + c * v.inner, shift.begin() + (c + 1) * v.inner, b);
  }
  parallel_for(0, v.outer, row_grain(v), [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o)
      for (int64_t j = 0; j < width; ++j)
        y[o * width + j] = static_cast<T>(static_cast<A>(x[o * width + j]) * scale[j] + shift[j]);
  });
}

// Runs body with T = data type and P = parameter type (equal, or P = float). float16 data comes
// widened to float (through_float).
#define PMX_BN_SWITCH(data_dt, param_dt, ...)                                     \
  PMX_FLOAT_BUT_HALF_SWITCH(data_dt, T, {                                                  \
    if ((param_dt) == DType::kFloat32) {                                          \
      using P = float;                                                            \
      __VA_ARGS__;                                                                \
    } else {                                                                      \
      using P = T;                                                                \
      __VA_ARGS__;                                                                \
    }                                                                             \
  })

void bn_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                const std::vector<TBlob>& out) {
  PMX_BN_SWITCH(in[0].dtype, in[1].dtype, { bn_forward_typed<T, P>(ctx, in, out); });
}

void bn_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                       const std::vector<DType>& dt, std::vector<Shape>* out,
                       std::vector<DType>* out_dt) {
  const char* op = "batch_norm_backward";
  PMX_CHECK(in[0] == in[1], op, ": out_grad ", shape_str(in[0]), " and data ", shape_str(in[1]),
            " differ");
  PMX_CHECK(!in[1].empty(), op, ": data must have at least one dimension");
  nn::cudnn_off(attrs);  // validates it
  const int axis = nn::normalize_axis(attrs.get_int("axis", 1), static_cast<int>(in[1].size()), op);
  const Shape c = {in[1][axis]};
  PMX_CHECK(in[2] == c && in[3] == c && in[4] == c, op, ": gamma ", shape_str(in[2]), ", mean ",
            shape_str(in[3]), " and var ", shape_str(in[4]), " must have shape ", shape_str(c),
            " for data ", shape_str(in[1]), " and axis ", axis);
  nn::check_same_float(dt, op, 0, 2);
  nn::check_same_float(dt, op, 2, 5);
  if (dt[2] != dt[1] && dt[2] != DType::kFloat32)
    PMX_THROW(Status::kType, op, ": parameters have dtype ", dtype_name(dt[2]),
              "; they must be float32 or match data (", dtype_name(dt[1]), ")");
  *out = {in[1], in[2], in[2]};
  *out_dt = {dt[1], dt[2], dt[2]};
}

template <typename T, typename P>
void bn_backward_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out) {
  using A = nn::acc_t<T>;
  const Attrs& attrs = *ctx.attrs;
  const int axis = nn::normalize_axis(attrs.get_int("axis", 1), in[1].ndim(), "batch_norm");
  const AxisView v = axis_view(in[1].shape, axis);
  const double eps = attrs.get_float("eps", 1e-3);
  const bool fix_gamma = attrs.get_bool("fix_gamma", true);
  const bool batch_stats = ctx.is_train && !attrs.get_bool("use_global_stats", false);
  const T* dy = in[0].data<T>();
  const T* x = in[1].data<T>();
  const P* gamma = in[2].data<P>();
  const P* mean = in[3].data<P>();
  const P* var = in[4].data<P>();
  T* dx = out[0].data<T>();
  P* dgamma = out[1].data<P>();
  P* dbeta = out[2].data<P>();
  const double count = static_cast<double>(v.outer * v.inner);
  // From channel c's sum(dy) and sum(dy * (x - mean)): writes its gamma and beta gradients and
  // returns the coefficients of dx = a * dy + b * x + shift.
  auto coefficients = [&](int64_t c, double sum_dy, double sum_dy_dev, A* a, A* b, A* shift) {
    const double m = static_cast<double>(mean[c]);
    const double invstd = 1.0 / std::sqrt(static_cast<double>(var[c]) + eps);
    const double sum_dy_xhat = sum_dy_dev * invstd;
    dgamma[c] = static_cast<P>(fix_gamma ? 0.0 : sum_dy_xhat);
    dbeta[c] = static_cast<P>(sum_dy);
    // Training: dx = g*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)); global: g*invstd*dy,
    // expanded to a*dy + b*x + shift with the coefficients in double.
    const double g = fix_gamma ? 1.0 : static_cast<double>(gamma[c]);
    const double k = g * invstd;
    const double mean_dy = batch_stats && count > 0 ? sum_dy / count : 0.0;
    const double mean_dy_xhat = batch_stats && count > 0 ? sum_dy_xhat / count : 0.0;
    *a = static_cast<A>(k);
    *b = static_cast<A>(-k * invstd * mean_dy_xhat);
    *shift = static_cast<A>(k * (m * invstd * mean_dy_xhat - mean_dy));
  };
  if (v.inner >= kMinRun) {
    // Channel runs (Note [Batch-norm memory passes]); channels are independent.
    parallel_for(0, v.n, 1, [&](int64_t c_lo, int64_t c_hi) {
      for (int64_t c = c_lo; c < c_hi; ++c) {
        const A center = static_cast<A>(mean[c]);
        double sum_dy = 0, sum_dy_dev = 0;
        for (int64_t o = 0; o < v.outer; ++o) {
          const int64_t base = (o * v.n + c) * v.inner;
          add_grad_sums(dy + base, x + base, v.inner, center, &sum_dy, &sum_dy_dev);
        }
        A a, b, shift;
        coefficients(c, sum_dy, sum_dy_dev, &a, &b, &shift);
        for (int64_t o = 0; o < v.outer; ++o) {
          const int64_t base = (o * v.n + c) * v.inner;
          for (int64_t i = 0; i < v.inner; ++i) {
            dx[base + i] = static_cast<T>(a * static_cast<A>(dy[base + i]) +
                                          b * static_cast<A>(x[base + i]) + shift);
          }
        }
      }
    });
    return;
  }
  // Channel rows.
  const int64_t width = v.n * v.inner;
  std::vector<double> center(width), acc, sums(2 * v.n);  // sum(dy), then sum(dy * (x - mean))
  for (int64_t j = 0; j < width; ++j) center[j] = static_cast<double>(mean[j / v.inner]);
  sum_rows<2>(v, &acc, sums.data(), [&](int64_t row, double* s) {
    for (int64_t j = 0; j < width; ++j) {
      const double g = static_cast<double>(dy[row + j]);
      s[j] += g;
      s[width + j] += g * (static_cast<double>(x[row + j]) - center[j]);
    }
  });
  std::vector<A> a(width), b(width), shift(width);
  for (int64_t c = 0; c < v.n; ++c) {
    A ac, bc, sc;
    coefficients(c, sums[c], sums[v.n + c], &ac, &bc, &sc);
    std::fill(a.begin() + c * v.inner, a.begin() + (c + 1) * v.inner, ac);
    std::fill(b.begin() + c * v.inner, b.begin() + (c + 1) * v.inner, bc);
    std::fill(shift.begin() + c * v.inner, shift.begin() + (c + 1) * v.inner, sc);
  }
  parallel_for(0, v.outer, row_grain(v), [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o)
      for (int64_t j = 0; j < width; ++j) {
        const int64_t k = o * width + j;
        dx[k] = static_cast<T>(a[j] * static_cast<A>(dy[k]) + b[j] * static_cast<A>(x[k]) +
                               shift[j]);
      }
  });
}

void bn_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                 const std::vector<TBlob>& out) {
  PMX_BN_SWITCH(in[1].dtype, in[2].dtype, { bn_backward_typed<T, P>(ctx, in, out); });
}

std::vector<NDArray> bn_gradient(const GradContext& ctx) {
  std::vector<NDArray> g = invoke(
      "batch_norm_backward",
      {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1], ctx.outputs[1], ctx.outputs[2]}, ctx.attrs);
  return {g[0], g[1], g[2], NDArray(), NDArray()};
}

PMX_REGISTER_OP(batch_norm)
    .set_num_inputs(5)
    .set_num_outputs(3)
    .set_infer(bn_infer)
    .set_cpu(nn::through_float(bn_forward, nn::Widen::kFloat16Only, {3, 4}))
    .set_gradient(bn_gradient)
    .set_mutate_inputs({3, 4});

PMX_REGISTER_OP(batch_norm_backward)
    .set_num_inputs(5)
    .set_num_outputs(3)
    .set_infer(bn_backward_infer)
    .set_cpu(nn::through_float(bn_backward, nn::Widen::kFloat16Only));

// ---------------------------------------------------------------------------------------------
// layer_norm
// ---------------------------------------------------------------------------------------------
void ln_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
              std::vector<Shape>* out, std::vector<DType>* out_dt) {
  PMX_CHECK(!in[0].empty(), "layer_norm: data must have at least one dimension");
  const int axis = nn::normalize_axis(attrs.get_int("axis", -1), static_cast<int>(in[0].size()),
                                      "layer_norm");
  const Shape c = {in[0][axis]};
  PMX_CHECK(in[1] == c && in[2] == c, "layer_norm: gamma ", shape_str(in[1]), " and beta ",
            shape_str(in[2]), " must have shape ", shape_str(c), " for data ", shape_str(in[0]),
            " and axis ", axis);
  nn::check_float(dt[0], "layer_norm", "data");
  PMX_CHECK(dt[1] == dt[0] && dt[2] == dt[0], "layer_norm: gamma/beta dtypes ",
            dtype_name(dt[1]), "/", dtype_name(dt[2]), " must match data (", dtype_name(dt[0]),
            ")");
  Shape stat = in[0];
  stat[axis] = 1;
  *out = {in[0], stat, stat};
  *out_dt = {dt[0], dt[0], dt[0]};
}

// Note [Layer-norm rows]
// ~~~~~~~~~~~~~~~~~~~~~~
// layer_norm normalises rows of n elements along `axis` (outer * inner of them), each on its own:
// rows are split over the intra-op threads (Note [Intra-op threads]) and a row's result does not
// depend on which thread computes it. Statistics are accumulated in double, in kRowLanes partial
// sums added as a tree (Note [Lane sums]): one running sum is bound by the latency of an add per
// element, which made a (1024, 256) layer_norm 8x slower than its memory passes. A row along
// an inner axis (inner > 1) is strided; it is gathered into a contiguous scratch row first, so
// that one row kernel serves both layouts. The backward's gamma_grad and beta_grad sum over
// rows: each block of rows sums its own (in row order), and the blocks are added in block order;
// the block size depends only on the row count, so the result is the same for any thread count.
//  - The forward's element pass, y = (x - mean) * (1 / std) * gamma + beta, runs in float for
//    float32, float16 and bfloat16 (double for float64), at twice the vector width of double
//    and without its conversions: it took half the forward's time in double. The mean enters
//    split into float hi + lo, (x - hi) - lo, so that x - mean keeps the double mean's accuracy
//    where x is close to it (Note [Softmax backward in float] does the same); the product and
//    the sum add a rounding each: y within ~3 float ulp of its terms, against one before.
//  - The row passes (conversions to double and back, lane sums, the element arithmetic) are
//    compiled for the baseline, AVX2 with FMA and AVX-512, and the widest set the CPU runs is
//    chosen (nn::fma_level), as softmax does (Note [Softmax per instruction set]): the baseline's
//    SSE2, two doubles an instruction, left the forward 3x slower than PyTorch's. The FMA builds
//    contract a * b + c to one rounding, so the last bit may differ between machines of different
//    instruction sets, never between runs, thread counts or engines on one machine.

// Partial sums per row (Note [Lane sums]): 32 doubles are eight AVX2 registers, enough chains of
// additions for the adds' latency not to bound a row (with nn::kLanes' 8, two chains, it did).
constexpr int kRowLanes = 32;

// The sum of part[0..kRowLanes) added as a tree, halves first: vector adds, where adding the
// lanes one after another was again a chain of 32 dependent adds per sum.
__attribute__((always_inline)) inline double ln_lanes_total(double* part) {
  for (int width = kRowLanes / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) part[j] += part[j + width];
  return part[0];
}

// Rows per parallel chunk: at least ~16k elements, for the pool's wake-up to pay.
int64_t ln_row_grain(int64_t n) {
  return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(n, 1));
}

// Where row r of view v starts (its elements lie v.inner apart).
inline int64_t ln_row_offset(const AxisView& v, int64_t r) {
  return (r / v.inner) * v.n * v.inner + r % v.inner;
}

// One contiguous row: y = (x - mean) / std * gamma + beta; returns {mean, std}.
template <typename T>
__attribute__((always_inline)) inline std::pair<double, double> ln_forward_row(
    const T* x, const T* gamma, const T* beta, int64_t n, double eps, T* y) {
  double part_sum[kRowLanes] = {}, part_sq[kRowLanes] = {};
  int64_t c = 0;
  for (; c + kRowLanes <= n; c += kRowLanes)
    for (int j = 0; j < kRowLanes; ++j) part_sum[j] += static_cast<double>(x[c + j]);
  double tail = 0;
  for (; c < n; ++c) tail += static_cast<double>(x[c]);
  const double mean = (ln_lanes_total(part_sum) + tail) / n;
  for (c = 0; c + kRowLanes <= n; c += kRowLanes)
    for (int j = 0; j < kRowLanes; ++j) {
      const double d = static_cast<double>(x[c + j]) - mean;
      part_sq[j] += d * d;
    }
  double sq_tail = 0;
  for (; c < n; ++c) {
    const double d = static_cast<double>(x[c]) - mean;
    sq_tail += d * d;
  }
  const double std_dev = std::sqrt((ln_lanes_total(part_sq) + sq_tail) / n + eps);
  // The element pass in A (Note [Layer-norm rows]), the mean split into hi + lo.
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const A mean_hi = static_cast<A>(mean);
  const A mean_lo = static_cast<A>(mean - static_cast<double>(mean_hi));
  const A inv = static_cast<A>(1.0 / std_dev);
  for (c = 0; c < n; ++c)
    y[c] = static_cast<T>(((static_cast<A>(x[c]) - mean_hi) - mean_lo) * inv *
                              static_cast<A>(gamma[c]) +
                          static_cast<A>(beta[c]));
  return {mean, std_dev};
}

template <typename T>
struct LnForward {
  AxisView v;
  double eps;
  const T *x, *gamma, *beta;
  T *y, *mean, *stdv;
};

// Rows [lo, hi) of the forward, inlined into one copy per instruction set.
template <typename T>
__attribute__((always_inline)) inline void ln_forward_rows(const LnForward<T>& a, int64_t lo,
                                                          int64_t hi) {
  const AxisView& v = a.v;
  std::vector<T> x_row(v.inner > 1 ? v.n : 0), y_row(x_row.size());
  for (int64_t r = lo; r < hi; ++r) {
    const int64_t offset = ln_row_offset(v, r);
    std::pair<double, double> stats;
    if (v.inner == 1) {
      stats = ln_forward_row(a.x + offset, a.gamma, a.beta, v.n, a.eps, a.y + offset);
    } else {
      for (int64_t c = 0; c < v.n; ++c) x_row[c] = a.x[offset + c * v.inner];
      stats = ln_forward_row(x_row.data(), a.gamma, a.beta, v.n, a.eps, y_row.data());
      for (int64_t c = 0; c < v.n; ++c) a.y[offset + c * v.inner] = y_row[c];
    }
    a.mean[r] = static_cast<T>(stats.first);
    a.stdv[r] = static_cast<T>(stats.second);
  }
}

template <typename T>
void ln_forward_rows_base(const LnForward<T>& a, int64_t lo, int64_t hi) {
  ln_forward_rows(a, lo, hi);
}
template <typename T>
__attribute__((target("avx2,fma"))) void ln_forward_rows_avx2(const LnForward<T>& a, int64_t lo,
                                                              int64_t hi) {
  ln_forward_rows(a, lo, hi);
}
template <typename T>
__attribute__((target("avx512f"))) void ln_forward_rows_avx512(const LnForward<T>& a, int64_t lo,
                                                               int64_t hi) {
  ln_forward_rows(a, lo, hi);
}

template <typename T>
void ln_forward_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  const int axis = nn::normalize_axis(ctx.attrs->get_int("axis", -1), in[0].ndim(), "layer_norm");
  const LnForward<T> a{axis_view(in[0].shape, axis), ctx.attrs->get_float("eps", 1e-5),
                       in[0].data<T>(), in[1].data<T>(), in[2].data<T>(),
                       out[0].data<T>(), out[1].data<T>(), out[2].data<T>()};
  const nn::FmaLevel level = nn::fma_level();
  const auto rows = level == nn::FmaLevel::kAvx512 ? ln_forward_rows_avx512<T>
                    : level == nn::FmaLevel::kAvx2 ? ln_forward_rows_avx2<T>
                                                   : ln_forward_rows_base<T>;
  // Rows in parallel (Note [Layer-norm rows]).
  parallel_for(0, a.v.outer * a.v.inner, ln_row_grain(a.v.n),
               [&](int64_t lo, int64_t hi) { rows(a, lo, hi); });
}

void ln_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                const std::vector<TBlob>& out) {
  PMX_FLOAT_BUT_HALF_SWITCH(in[0].dtype, T, { ln_forward_typed<T>(ctx, in, out); });
}

void ln_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                       const std::vector<DType>& dt, std::vector<Shape>* out,
                       std::vector<DType>* out_dt) {
  const char* op = "layer_norm_backward";
  PMX_CHECK(in[0] == in[1], op, ": out_grad ", shape_str(in[0]), " and data ", shape_str(in[1]),
            " differ");
  PMX_CHECK(!in[1].empty(), op, ": data must have at least one dimension");
  const int axis =
      nn::normalize_axis(attrs.get_int("axis", -1), static_cast<int>(in[1].size()), op);
  Shape stat = in[1];
  stat[axis] = 1;
  PMX_CHECK(in[2] == Shape({in[1][axis]}) && in[3] == stat && in[4] == stat, op, ": gamma ",
            shape_str(in[2]), ", mean ", shape_str(in[3]), " and std ", shape_str(in[4]),
            " do not match data ", shape_str(in[1]), " and axis ", axis, " (expected (",
            in[1][axis], ",), ", shape_str(stat), ", ", shape_str(stat), ")");
  nn::check_same_float(dt, op);
  *out = {in[1], in[2], in[2]};
  *out_dt = {dt[1], dt[1], dt[1]};
}

// One contiguous row of the backward: dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat *
// xhat)) with dxhat = dy * gamma and xhat = (x - mean) * inv; adds dy * xhat and dy to the row
// block's dgamma and dbeta.
template <typename T>
__attribute__((always_inline)) inline void ln_backward_row(const T* dy, const T* x,
                                                          const T* gamma, int64_t n, double mean,
                                                          double inv, T* dx, double* dgamma,
                                                          double* dbeta) {
  double part_dxhat[kRowLanes] = {}, part_dxhat_xhat[kRowLanes] = {};
  int64_t c = 0;
  for (; c + kRowLanes <= n; c += kRowLanes)
    for (int j = 0; j < kRowLanes; ++j) {
      const double dxhat = static_cast<double>(dy[c + j]) * static_cast<double>(gamma[c + j]);
      part_dxhat[j] += dxhat;
      part_dxhat_xhat[j] += dxhat * ((static_cast<double>(x[c + j]) - mean) * inv);
    }
  double tail_dxhat = 0, tail_dxhat_xhat = 0;
  for (; c < n; ++c) {
    const double dxhat = static_cast<double>(dy[c]) * static_cast<double>(gamma[c]);
    tail_dxhat += dxhat;
    tail_dxhat_xhat += dxhat * ((static_cast<double>(x[c]) - mean) * inv);
  }
  const double mean_dxhat = (ln_lanes_total(part_dxhat) + tail_dxhat) / n;
  const double mean_dxhat_xhat = (ln_lanes_total(part_dxhat_xhat) + tail_dxhat_xhat) / n;
  for (c = 0; c < n; ++c) {
    const double g = static_cast<double>(dy[c]);
    const double xhat = (static_cast<double>(x[c]) - mean) * inv;
    dx[c] = static_cast<T>(inv * (g * static_cast<double>(gamma[c]) - mean_dxhat -
                                  xhat * mean_dxhat_xhat));
    dgamma[c] += g * xhat;
    dbeta[c] += g;
  }
}

template <typename T>
struct LnBackward {
  AxisView v;
  int64_t rows, block_rows;
  const T *dy, *x, *gamma, *mean, *stdv;
  T* dx;
  double* sums;  // per block: dgamma (n), then dbeta (n)
};

// Row blocks [block_lo, block_hi) of the backward, inlined into one copy per instruction set.
template <typename T>
__attribute__((always_inline)) inline void ln_backward_blocks(const LnBackward<T>& a,
                                                             int64_t block_lo, int64_t block_hi) {
  const AxisView& v = a.v;
  std::vector<T> dy_row(v.inner > 1 ? v.n : 0), x_row(dy_row.size()), dx_row(dy_row.size());
  for (int64_t b = block_lo; b < block_hi; ++b) {
    double* dgamma = a.sums + b * 2 * v.n;
    double* dbeta = dgamma + v.n;
    for (int64_t r = b * a.block_rows; r < std::min(a.rows, (b + 1) * a.block_rows); ++r) {
      const int64_t offset = ln_row_offset(v, r);
      const double m = static_cast<double>(a.mean[r]);
      const double inv = 1.0 / static_cast<double>(a.stdv[r]);
      if (v.inner == 1) {
        ln_backward_row(a.dy + offset, a.x + offset, a.gamma, v.n, m, inv, a.dx + offset, dgamma,
                        dbeta);
      } else {
        for (int64_t c = 0; c < v.n; ++c) {
          dy_row[c] = a.dy[offset + c * v.inner];
          x_row[c] = a.x[offset + c * v.inner];
        }
        ln_backward_row(dy_row.data(), x_row.data(), a.gamma, v.n, m, inv, dx_row.data(), dgamma,
                        dbeta);
        for (int64_t c = 0; c < v.n; ++c) a.dx[offset + c * v.inner] = dx_row[c];
      }
    }
  }
}

template <typename T>
void ln_backward_blocks_base(const LnBackward<T>& a, int64_t lo, int64_t hi) {
  ln_backward_blocks(a, lo, hi);
}
template <typename T>
__attribute__((target("avx2,fma"))) void ln_backward_blocks_avx2(const LnBackward<T>& a,
                                                                 int64_t lo, int64_t hi) {
  ln_backward_blocks(a, lo, hi);
}
template <typename T>
__attribute__((target("avx512f"))) void ln_backward_blocks_avx512(const LnBackward<T>& a,
                                                                  int64_t lo, int64_t hi) {
  ln_backward_blocks(a, lo, hi);
}

template <typename T>
void ln_backward_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out) {
  const int axis = nn::normalize_axis(ctx.attrs->get_int("axis", -1), in[1].ndim(), "layer_norm");
  const AxisView v = axis_view(in[1].shape, axis);
  // Blocks of rows with their own gamma/beta sums, added in block order (Note [Layer-norm rows]).
  // Their scratch, 2 n doubles a block, stays within kScratchDoubles (32 MiB) however long the
  // rows, and never beyond kMaxBlocks blocks; both bounds depend on the shape alone.
  constexpr int64_t kMaxBlocks = 256;
  constexpr int64_t kScratchDoubles = int64_t{1} << 22;
  const int64_t max_blocks =
      std::clamp<int64_t>(kScratchDoubles / std::max<int64_t>(2 * v.n, 1), 1, kMaxBlocks);
  const int64_t rows = v.outer * v.inner;
  const int64_t block_rows =
      std::max<int64_t>(ln_row_grain(v.n), (rows + max_blocks - 1) / max_blocks);
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  std::vector<double> sums(static_cast<size_t>(blocks * 2 * v.n), 0.0);
  const LnBackward<T> a{v, rows, block_rows, in[0].data<T>(), in[1].data<T>(), in[2].data<T>(),
                        in[3].data<T>(), in[4].data<T>(), out[0].data<T>(), sums.data()};
  const nn::FmaLevel level = nn::fma_level();
  const auto run_blocks = level == nn::FmaLevel::kAvx512 ? ln_backward_blocks_avx512<T>
                          : level == nn::FmaLevel::kAvx2 ? ln_backward_blocks_avx2<T>
                                                         : ln_backward_blocks_base<T>;
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) { run_blocks(a, lo, hi); });
  for (int64_t c = 0; c < v.n; ++c) {
    double dgamma = 0, dbeta = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      dgamma += sums[b * 2 * v.n + c];
      dbeta += sums[b * 2 * v.n + v.n + c];
    }
    out[1].data<T>()[c] = static_cast<T>(dgamma);
    out[2].data<T>()[c] = static_cast<T>(dbeta);
  }
}

void ln_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                 const std::vector<TBlob>& out) {
  PMX_FLOAT_BUT_HALF_SWITCH(in[1].dtype, T, { ln_backward_typed<T>(ctx, in, out); });
}

std::vector<NDArray> ln_gradient(const GradContext& ctx) {
  return invoke("layer_norm_backward",
                {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1], ctx.outputs[1], ctx.outputs[2]},
                ctx.attrs);
}

PMX_REGISTER_OP(layer_norm)
    .set_num_inputs(3)
    .set_num_outputs(3)
    .set_infer(ln_infer)
    .set_cpu(nn::through_float(ln_forward, nn::Widen::kFloat16Only))
    .set_gradient(ln_gradient);

PMX_REGISTER_OP(layer_norm_backward)
    .set_num_inputs(5)
    .set_num_outputs(3)
    .set_infer(ln_backward_infer)
    .set_cpu(nn::through_float(ln_backward, nn::Widen::kFloat16Only));

}  // namespace
}  // namespace pymx
