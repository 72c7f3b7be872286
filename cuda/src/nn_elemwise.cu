// Elementwise NN operators: activations and dropout (CPU definitions: engine/src/ops/
// nn_activation.cc, nn_dropout.cc). Float dtypes; float16 computes in float.
//
// | op                   | inputs              | outputs   | attrs                                  |
// |----------------------|---------------------|-----------|----------------------------------------|
// | activation           | data                | out       | act_type: relu sigmoid tanh softrelu softsign log_sigmoid |
// | relu sigmoid mish    | data                | out       |                                        |
// | activation_backward  | out_grad, data, out | data_grad | act_type                               |
// | leaky_relu           | data, [gamma]       | out       | act_type: leaky prelu elu selu gelu gelu_tanh; slope (0.25) |
// | leaky_relu_backward  | out_grad, data, [gamma] | data_grad, [gamma_grad] | act_type, slope      |
// | dropout              | data                | out, mask | p (0.5), mode (training / always), axes |
// | dropout_backward     | out_grad, mask      | data_grad |                                        |
#include "kernel_util.cuh"
#include "ops/activation_math.h"
#include "ops/nn_common.h"
#include "random.cuh"
#include "segment_sums.cuh"

namespace pymx {
namespace gpu {
namespace {

using nn::Act;
using nn::act_derivative;
using nn::act_forward;
using nn::Leaky;
using nn::parse_act;

template <typename T>
__global__ void act_forward_kernel(const T* x, T* y, int64_t n, Act act) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) y[i] = convert<T>(act_forward<A>(act, convert<A>(x[i])));
}

template <typename T>
__global__ void act_backward_kernel(const T* dy, const T* x, const T* y, T* dx, int64_t n, Act act) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    if (act == Act::kRelu)  // a select, as on the CPU: dy * 0 would make an infinite dy NaN
      dx[i] = convert<A>(y[i]) > A(0) ? dy[i] : convert<T>(A(0));
    else
      dx[i] = convert<T>(convert<A>(dy[i]) *
                         act_derivative<A>(act, convert<A>(x[i]), convert<A>(y[i])));
  }
}

// prelu's slope for element i: gamma_c of its channel (Note [PReLU channel runs] in
// nn_activation.cc), or the op's slope for the other act_types (gamma null).
template <typename A, typename T>
__device__ __forceinline__ A leaky_slope(const T* gamma, A slope, int64_t i, int64_t inner,
                                         int64_t channels) {
  return gamma == nullptr ? slope : convert<A>(gamma[(i / inner) % channels]);
}

template <typename T>
__global__ void leaky_kernel(const T* x, const T* gamma, T* y, int64_t n, Leaky act,
                             double slope, int64_t inner, int64_t channels) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    const A s = leaky_slope(gamma, A(slope), i, inner, channels);
    y[i] = convert<T>(nn::leaky_forward<A>(act, convert<A>(x[i]), s));
  }
}

template <typename T>
__global__ void leaky_backward_kernel(const T* dy, const T* x, const T* gamma, T* dx, int64_t n,
                                      Leaky act, double slope, int64_t inner, int64_t channels) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    const A s = leaky_slope(gamma, A(slope), i, inner, channels);
    dx[i] = convert<T>(nn::leaky_grad<A>(act, convert<A>(x[i]), convert<A>(dy[i]), s));
  }
}

// prelu's gamma_grad_c = sum of dy * x where x <= 0 over channel c, whose (outer, inner)
// elements are strided: a segment sum per channel (Note [Segment sums in chunks]). The term is
// dy * (x > 0 ? 0 : x), as on the CPU: a NaN or infinite dy makes it NaN at a positive x too.
template <typename T>
struct PreluGammaTerms {
  const T* dy;
  const T* x;
  nn::PreluView v;
  __device__ Sums2 operator()(int64_t c, int64_t k) const {
    const int64_t i = ((k / v.inner) * v.channels + c) * v.inner + k % v.inner;
    const double xi = convert<double>(x[i]);
    return {convert<double>(dy[i]) * (xi > 0 ? 0.0 : xi), 0.0};
  }
};

template <typename T>
__global__ void sums_to_blob_kernel(const Sums2* sums, T* out, int64_t n) {
  PMX_GRID_STRIDE_LOOP(i, n) out[i] = convert<T>(sums[i].a);
}

// mask = keep / (1 - p); the draw for element i is uniform01(seed, draw_index(i)), where the
// index is 0 along the shared `axes` (see Note [Counter-based random numbers] in nn_common.h).
template <typename T>
__global__ void dropout_kernel(const T* x, T* y, T* mask, int64_t n, uint64_t seed, float keep,
                               double scale, bool shared, StridedIndex draw_index) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    const uint64_t draw = shared ? draw_index.offset(i) : i;
    const T m = convert<T>(uniform01(seed, draw) < keep ? scale : 0.0);  // rounded, as the CPU's
    mask[i] = m;
    y[i] = convert<T>(convert<A>(x[i]) * convert<A>(m));
  }
}

template <typename T>
__global__ void multiply_kernel(const T* a, const T* b, T* out, int64_t n) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) out[i] = convert<T>(convert<A>(a[i]) * convert<A>(b[i]));
}

template <typename T>
__global__ void dropout_identity_kernel(const T* x, T* y, T* mask, int64_t n) {
  PMX_GRID_STRIDE_LOOP(i, n) {
    y[i] = x[i];
    mask[i] = convert<T>(1.0f);
  }
}

void activation_compute(Act act, const OpContext& ctx, const std::vector<TBlob>& in,
                        const std::vector<TBlob>& out) {
  const int64_t n = in[0].size();
  if (n == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    act_forward_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(in[0].data<T>(),
                                                                       out[0].data<T>(), n, act);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void activation_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                                 const std::vector<TBlob>& out) {
  const int64_t n = in[0].size();
  if (n == 0) return;
  const Act act = parse_act(ctx.attrs->get_str("act_type", "relu"));
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    act_backward_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(), n, act);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void leaky_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const int64_t n = in[0].size();
  if (n == 0) return;
  const auto [act, slope] = nn::leaky_params(*ctx.attrs);
  const bool prelu = act == Leaky::kPrelu;
  const nn::PreluView v = prelu ? nn::prelu_view(in[0].shape, in[1].shape, "leaky_relu")
                                : nn::PreluView{};
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    leaky_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), prelu ? in[1].data<T>() : nullptr, out[0].data<T>(), n, act, slope,
        v.inner, v.channels);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void leaky_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                            const std::vector<TBlob>& out) {
  const int64_t n = in[0].size();
  const auto [act, slope] = nn::leaky_params(*ctx.attrs);
  const bool prelu = act == Leaky::kPrelu;
  const nn::PreluView v = prelu ? nn::prelu_view(in[1].shape, in[2].shape, "leaky_relu_backward")
                                : nn::PreluView{};
  cudaStream_t s = stream_of(ctx);
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    if (n > 0) {
      leaky_backward_kernel<T><<<grid_for(n), kBlock, 0, s>>>(
          in[0].data<T>(), in[1].data<T>(), prelu ? in[2].data<T>() : nullptr, out[0].data<T>(),
          n, act, slope, v.inner, v.channels);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    if (prelu) {
      const SegmentPlan plan = plan_segments(v.channels, n == 0 ? 0 : v.outer * v.inner);
      const size_t sums_bytes = workspace_aligned(v.channels * sizeof(Sums2));
      char* ws = static_cast<char*>(ctx.workspace(sums_bytes + segment_scratch_bytes(plan)));
      auto* sums = reinterpret_cast<Sums2*>(ws);
      if (plan.length > 0) {
        segment_sums(PreluGammaTerms<T>{in[0].data<T>(), in[1].data<T>(), v}, plan,
                     ws + sums_bytes, sums, s);
      } else {  // empty data: gamma_grad 0
        PMX_CUDA_CHECK(cudaMemsetAsync(sums, 0, v.channels * sizeof(Sums2), s));
      }
      sums_to_blob_kernel<T><<<grid_for(v.channels), kBlock, 0, s>>>(sums, out[1].data<T>(),
                                                                      v.channels);
      PMX_KERNEL_LAUNCH_CHECK();
    }
  });
}

void dropout_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const Attrs& attrs = *ctx.attrs;
  const int64_t n = in[0].size();
  if (n == 0) return;
  const double p = attrs.get_float("p", 0.5);
  PMX_CHECK(p >= 0 && p <= 1, "dropout: p must be in [0, 1], got ", p);
  const bool active = nn::dropout_draws_mask(attrs, ctx.is_train);
  const Shape& shape = in[0].shape;
  const int ndim = in[0].ndim();
  std::vector<bool> shared_axis(ndim, false);
  bool shared = false;
  for (int64_t a : attrs.get_shape("axes", Shape())) {
    PMX_CHECK(a >= -ndim && a < ndim, "dropout: axis ", a, " is out of range for an array with ",
              ndim, " dimensions");
    shared_axis[a < 0 ? a + ndim : a] = true;
    shared = true;
  }
  StridedIndex draw_index;
  if (shared) {
    PMX_CHECK(ndim <= kMaxDims, "dropout with axes on the GPU supports at most ", kMaxDims,
              " dimensions, got ", shape_str(shape));
    int64_t stride = 1;
    draw_index.ndim = ndim;
    for (int d = ndim - 1; d >= 0; --d) {
      draw_index.shape[d] = shape[d];
      draw_index.stride[d] = shared_axis[d] ? 0 : stride;
      if (!shared_axis[d]) stride *= shape[d];
    }
  }
  cudaStream_t s = stream_of(ctx);
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    if (active) {
      dropout_kernel<T><<<grid_for(n), kBlock, 0, s>>>(
          in[0].data<T>(), out[0].data<T>(), out[1].data<T>(), n, ctx.seed,
          static_cast<float>(1 - p), p < 1 ? 1.0 / (1 - p) : 0.0, shared, draw_index);
    } else {
      dropout_identity_kernel<T><<<grid_for(n), kBlock, 0, s>>>(in[0].data<T>(), out[0].data<T>(),
                                                                out[1].data<T>(), n);
    }
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void dropout_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                              const std::vector<TBlob>& out) {
  const int64_t n = in[0].size();
  if (n == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    multiply_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(in[0].data<T>(), in[1].data<T>(),
                                                                    out[0].data<T>(), n);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("activation")
      .set_gpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
        activation_compute(parse_act(ctx.attrs->get_str("act_type", "relu")), ctx, in, out);
      });
  op_registry::get_or_create("relu").set_gpu(
      [](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
        activation_compute(Act::kRelu, ctx, in, out);
      });
  op_registry::get_or_create("sigmoid").set_gpu(
      [](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
        activation_compute(Act::kSigmoid, ctx, in, out);
      });
  op_registry::get_or_create("mish").set_gpu(
      [](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
        activation_compute(Act::kMish, ctx, in, out);
      });
  op_registry::get_or_create("activation_backward").set_gpu(activation_backward_compute);
  op_registry::get_or_create("leaky_relu").set_gpu(leaky_compute);
  op_registry::get_or_create("leaky_relu_backward").set_gpu(leaky_backward_compute);
  op_registry::get_or_create("dropout").set_gpu(dropout_compute);
  op_registry::get_or_create("dropout_backward").set_gpu(dropout_backward_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
