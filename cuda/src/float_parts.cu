// GPU kernels of the operators that take floats apart or need a series (the CPU definitions,
// dtypes and gradients are in engine/src/ops/float_parts.cc; the element functions are shared
// through ops/float_parts_math.h).
//
// | op                  | input | outputs                         | out dtypes              |
// |---------------------|-------|---------------------------------|-------------------------|
// | signbit             | x     | sign bit set                    | bool                    |
// | spacing i0 bessel_i1| x     | value                           | x's if float, else f32  |
// | frexp               | x     | mantissa, exponent              | x's (f32), int32        |
// | modf                | x     | fractional part, integral part  | x's (f32)               |
#include <cmath>

#include "kernel_util.cuh"
#include "launch.h"
#include "ops/float_parts_math.h"

namespace pymx {
namespace gpu {
namespace {

template <typename T>
__global__ void signbit_kernel(const T* x, bool* out, int64_t n) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    const A v = convert<A>(x[i]);
    if constexpr (std::is_floating_point_v<A>) out[i] = signbit(v);
    else if constexpr (std::is_signed_v<A>) out[i] = v < A(0);
    else out[i] = false;
  }
}

template <typename T>
constexpr ops::FloatFormat format_of() {
  if constexpr (std::is_same_v<T, __half>) return ops::kFloat16Format;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return ops::kBFloat16Format;
  else if constexpr (std::is_same_v<T, float>) return ops::kFloat32Format;
  else return ops::kFloat64Format;
}

enum class Fn { kSpacing, kI0, kI1 };

template <typename T, Fn kFn>
__global__ void float_fn_kernel(const T* x, T* out, int64_t n) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    const A v = convert<A>(x[i]);
    if constexpr (kFn == Fn::kSpacing) out[i] = convert<T>(ops::spacing_of(v, format_of<T>()));
    else if constexpr (kFn == Fn::kI0) out[i] = convert<T>(static_cast<A>(ops::bessel_i0(v)));
    else out[i] = convert<T>(static_cast<A>(ops::bessel_i1(v)));
  }
}

template <typename T>
__global__ void frexp_kernel(const T* x, T* mantissa, int32_t* exponent, int64_t n) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    const A v = convert<A>(x[i]);
    // CUDA's frexp leaves the exponent of inf and NaN unspecified; the CPU's is 0, with x itself
    // as the mantissa (as in NumPy).
    int e = 0;
    mantissa[i] = isfinite(v) ? convert<T>(static_cast<A>(frexp(v, &e))) : x[i];
    exponent[i] = e;
  }
}

template <typename T>
__global__ void modf_kernel(const T* x, T* fraction, T* integral, int64_t n) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    A whole;
    fraction[i] = convert<T>(static_cast<A>(modf(convert<A>(x[i]), &whole)));
    integral[i] = convert<T>(whole);
  }
}

void signbit_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const int64_t n = out[0].size();
  if (n == 0) return;
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
    signbit_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(in[0].data<T>(),
                                                                   out[0].data<bool>(), n);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

template <Fn kFn>
void float_fn_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  const int64_t n = out[0].size();
  if (n == 0) return;
  const TBlob x = blobs_as(ctx, in, out[0].dtype)[0];  // integers compute in float32
  PMX_GPU_FLOAT_SWITCH(out[0].dtype, T, {
    float_fn_kernel<T, kFn><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(x.data<T>(),
                                                                         out[0].data<T>(), n);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void frexp_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const int64_t n = out[0].size();
  if (n == 0) return;
  const TBlob x = blobs_as(ctx, in, out[0].dtype)[0];
  PMX_GPU_FLOAT_SWITCH(out[0].dtype, T, {
    frexp_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        x.data<T>(), out[0].data<T>(), out[1].data<int32_t>(), n);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void modf_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const int64_t n = out[0].size();
  if (n == 0) return;
  const TBlob x = blobs_as(ctx, in, out[0].dtype)[0];
  PMX_GPU_FLOAT_SWITCH(out[0].dtype, T, {
    modf_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(x.data<T>(), out[0].data<T>(),
                                                                out[1].data<T>(), n);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("signbit").set_gpu(signbit_compute);
  op_registry::get_or_create("spacing").set_gpu(float_fn_compute<Fn::kSpacing>);
  op_registry::get_or_create("i0").set_gpu(float_fn_compute<Fn::kI0>);
  op_registry::get_or_create("bessel_i1").set_gpu(float_fn_compute<Fn::kI1>);
  op_registry::get_or_create("frexp").set_gpu(frexp_compute);
  op_registry::get_or_create("modf").set_gpu(modf_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
