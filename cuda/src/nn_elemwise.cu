// Elementwise NN operators: activations and dropout (CPU definitions: engine/src/ops/
// nn_activation.cc, nn_dropout.cc). Float dtypes; float16 computes in float.
//
// | op                   | inputs              | outputs   | attrs                                  |
// |----------------------|---------------------|-----------|----------------------------------------|
// | activation           | data                | out       | act_type: relu sigmoid tanh softrelu softsign |
// | relu sigmoid         | data                | out       |                                        |
// | activation_backward  | out_grad, data, out | data_grad | act_type                               |
// | leaky_relu           | data                | out       | act_type: leaky elu; slope (0.25)      |
// | leaky_relu_backward  | out_grad, data      | data_grad | act_type, slope                        |
// | dropout              | data                | out, mask | p (0.5), mode (training / always), axes |
// | dropout_backward     | out_grad, mask      | data_grad |                                        |
#include "kernel_util.cuh"
#include "ops/nn_common.h"
#include "random.cuh"

namespace pymx {
namespace gpu {
namespace {

using nn::Act;
using nn::parse_act;

template <typename A>
__device__ __forceinline__ A act_forward(Act act, A x) {
  switch (act) {
    case Act::kRelu: return x > A(0) || x != x ? x : A(0);  // NaN stays NaN, as on the CPU
    case Act::kSigmoid: return A(1) / (A(1) + exp(-x));
    case Act::kTanh: return tanh(x);
    case Act::kSoftRelu: return x > A(20) ? x : log1p(exp(x));
    case Act::kSoftSign: return x / (A(1) + fabs(x));
  }
  return x;
}

template <typename A>
__device__ __forceinline__ A act_derivative(Act act, A x, A y) {
  switch (act) {
    case Act::kRelu: return y > A(0) ? A(1) : A(0);
    case Act::kSigmoid: return y * (A(1) - y);
    case Act::kTanh: return A(1) - y * y;
    case Act::kSoftRelu: return A(1) / (A(1) + exp(-x));
    case Act::kSoftSign: {
      const A d = A(1) + fabs(x);
      return A(1) / (d * d);
    }
  }
  return A(1);
}

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

template <typename T>
__global__ void leaky_kernel(const T* x, T* y, int64_t n, bool elu, double slope) {
  using A = AccT<T>;
  const A s = A(slope);
  PMX_GRID_STRIDE_LOOP(i, n) {
    const A v = convert<A>(x[i]);
    y[i] = convert<T>(v > A(0) ? v : (elu ? s * A(expm1(v)) : s * v));
  }
}

template <typename T>
__global__ void leaky_backward_kernel(const T* dy, const T* x, T* dx, int64_t n, bool elu,
                                      double slope) {
  using A = AccT<T>;
  const A s = A(slope);
  PMX_GRID_STRIDE_LOOP(i, n) {
    const A v = convert<A>(x[i]);
    const A d = v > A(0) ? A(1) : (elu ? s * A(exp(v)) : s);
    dx[i] = convert<T>(convert<A>(dy[i]) * d);
  }
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
  const auto [elu, slope] = nn::leaky_params(*ctx.attrs);
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    leaky_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(in[0].data<T>(), out[0].data<T>(),
                                                                 n, elu, slope);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void leaky_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                            const std::vector<TBlob>& out) {
  const int64_t n = in[0].size();
  if (n == 0) return;
  const auto [elu, slope] = nn::leaky_params(*ctx.attrs);
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    leaky_backward_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), out[0].data<T>(), n, elu, slope);
  });
  PMX_KERNEL_LAUNCH_CHECK();
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
