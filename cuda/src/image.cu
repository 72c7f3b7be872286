// Image operators on the GPU (CPU definitions: engine/src/ops/image.cc; the geometry, attribute
// parsing and resize taps both use: engine/src/ops/image_common.h). Images are HWC, batches NHWC,
// except normalize (CHW / NCHW).
//
// | op                         | inputs | outputs | attrs |
// |----------------------------|--------|---------|-------|
// | image_to_tensor            | data   | out     | - (HWC -> CHW / NHWC -> NCHW, float32, divided by 255) |
// | image_normalize            | data   | out     | mean, std (tuples of 1 or C values) |
// | image_resize               | data   | out     | size, keep_ratio, interp (1 bilinear; 0 nearest) |
// | image_crop                 | data   | out     | x, y, width, height |
// | image_flip_left_right      | data   | out     | - |
// | image_flip_top_bottom      | data   | out     | - |
// | image_adjust_brightness    | data   | out     | factor |
// | image_adjust_contrast      | data   | out     | factor |
// | image_adjust_saturation    | data   | out     | factor |
//
// Note [GPU image ops reproduce the CPU arithmetic]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The outputs must equal the CPU kernels', uint8 included, so each kernel does the CPU's
// operations in the CPU's precision and order: resize taps are computed on the host by the same
// double formula and copied over, and the sums of products use __fmul_rn / __fadd_rn (and the
// double twins) so that nvcc cannot contract them into FMAs (the CPU build does not). The one
// difference is the order of contrast's per-image gray sum (a block reduction in double), which
// moves the mean by ~1e-16 relative.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernel_util.cuh"
#include "launch.h"
#include "ops/image_common.h"

namespace pymx {
namespace gpu {
namespace {

using image::Hwc;
using image::Tap;

// The CPU's saturate: integers rounded to nearest even and clamped to their range; floats and
// bool plainly converted (float16 straight from double, as the CPU's cast).
template <typename T>
__device__ __forceinline__ T saturate(double v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    return static_cast<T>(fmin(fmax(rint(v), lo), hi));
  } else if constexpr (std::is_same_v<T, __half>) {
    return __double2half(v);
  } else {
    return convert<T>(v);
  }
}

// Copies a host vector into the op's workspace (the one workspace call of the kernel run).
template <typename V>
V* to_device(const OpContext& ctx, const std::vector<V>& host) {
  V* dev = static_cast<V*>(ctx.workspace(host.size() * sizeof(V)));
  copy_host_to_device(dev, host.data(), host.size() * sizeof(V), ctx.run.stream);
  return dev;
}

// ---------------------------------------------------------------------------------------------
// to_tensor / normalize
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void to_tensor_kernel(const T* x, float* y, Hwc g) {
  const int64_t plane = g.h * g.w;
  PMX_GRID_STRIDE_LOOP(e, g.n * g.c * plane) {
    const int64_t p = e % plane, c = (e / plane) % g.c, n = e / (plane * g.c);
    y[e] = convert<float>(x[(n * plane + p) * g.c + c]) / 255.0f;
  }
}

void to_tensor(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const Hwc g = image::hwc_of(in[0].shape, "image_to_tensor");
  const int64_t n = out[0].size();
  if (n == 0) return;
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
    to_tensor_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(in[0].data<T>(),
                                                                    out[0].data<float>(), g);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// params holds the channels' means, then their 1/std, as float (the CPU's precision).
template <typename T>
__global__ void normalize_kernel(const T* x, T* y, const float* params, int64_t channels,
                                 int64_t plane, int64_t total) {
  PMX_GRID_STRIDE_LOOP(e, total) {
    const int64_t c = (e / plane) % channels;
    y[e] = convert<T>(__fmul_rn(convert<float>(x[e]) - params[c], params[channels + c]));
  }
}

void normalize(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const Shape& s = in[0].shape;
  const int64_t c = s[s.size() - 3], plane = s[s.size() - 2] * s[s.size() - 1];
  const int64_t total = in[0].size();
  if (total == 0) return;
  const std::vector<double> mean = image::per_channel(*ctx.attrs, "mean", 0.0, c);
  const std::vector<double> std_dev = image::per_channel(*ctx.attrs, "std", 1.0, c);
  std::vector<float> params(2 * c);
  for (int64_t ch = 0; ch < c; ++ch) {
    params[ch] = static_cast<float>(mean[ch]);
    params[c + ch] = static_cast<float>(1.0 / std_dev[ch]);
  }
  const float* dev_params = to_device(ctx, params);
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    normalize_kernel<T><<<grid_for(total), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), out[0].data<T>(), dev_params, c, plane, total);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------------------------
// resize
// ---------------------------------------------------------------------------------------------
// a * (1 - f) + b * f in float, without FMA contraction (see the Note).
__device__ __forceinline__ float lerp_rn(float a, float b, float f) {
  return __fadd_rn(__fmul_rn(a, 1.0f - f), __fmul_rn(b, f));
}

// taps: o.h row taps, then o.w column taps.
template <typename T>
__global__ void resize_kernel(const T* x, T* y, const Tap* taps, Hwc g, Hwc o) {
  PMX_GRID_STRIDE_LOOP(e, o.n * o.h * o.w * o.c) {
    const int64_t c = e % o.c, dx = (e / o.c) % o.w, dy = (e / (o.c * o.w)) % o.h;
    const int64_t n = e / (o.c * o.w * o.h);
    const Tap ty = taps[dy], tx = taps[o.h + dx];
    const T* img = x + n * g.h * g.w * g.c;
    const T* r0 = img + ty.i0 * g.w * g.c;
    const T* r1 = img + ty.i1 * g.w * g.c;
    const float top = lerp_rn(convert<float>(r0[tx.i0 * g.c + c]),
                              convert<float>(r0[tx.i1 * g.c + c]), tx.frac);
    const float bottom = lerp_rn(convert<float>(r1[tx.i0 * g.c + c]),
                                 convert<float>(r1[tx.i1 * g.c + c]), tx.frac);
    y[e] = saturate<T>(lerp_rn(top, bottom, ty.frac));
  }
}

void resize(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const Hwc g = image::hwc_of(in[0].shape, "image_resize");
  const Hwc o = image::hwc_of(out[0].shape, "image_resize");
  if (out[0].size() == 0) return;
  const bool nearest = ctx.attrs->get_int("interp", 1) == 0;
  std::vector<Tap> taps(o.h + o.w);
  image::resize_taps(g.h, o.h, nearest, taps.data());
  image::resize_taps(g.w, o.w, nearest, taps.data() + o.h);
  const Tap* dev_taps = to_device(ctx, taps);
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
    resize_kernel<T><<<grid_for(out[0].size()), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), out[0].data<T>(), dev_taps, g, o);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------------------------
// crop and flips: one thread per output element, reading the source element it copies
// ---------------------------------------------------------------------------------------------
enum class Move { kCrop, kFlipLeftRight, kFlipTopBottom };

// For a crop, (x0, y0) is the box's corner in the source g; o is the output's geometry.
template <Move kMove, typename T>
__global__ void move_kernel(const T* x, T* y, Hwc g, Hwc o, int64_t x0, int64_t y0) {
  PMX_GRID_STRIDE_LOOP(e, o.n * o.h * o.w * o.c) {
    const int64_t c = e % o.c, col = (e / o.c) % o.w, row = (e / (o.c * o.w)) % o.h;
    const int64_t n = e / (o.c * o.w * o.h);
    int64_t src_row = row, src_col = col;
    if (kMove == Move::kCrop) {
      src_row = row + y0;
      src_col = col + x0;
    } else if (kMove == Move::kFlipLeftRight) {
      src_col = g.w - 1 - col;
    } else {
      src_row = g.h - 1 - row;
    }
    y[e] = x[((n * g.h + src_row) * g.w + src_col) * g.c + c];
  }
}

template <Move kMove>
void move(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const char* op = kMove == Move::kCrop            ? "image_crop"
                   : kMove == Move::kFlipLeftRight ? "image_flip_left_right"
                                                   : "image_flip_top_bottom";
  const Hwc g = image::hwc_of(in[0].shape, op);
  const Hwc o = image::hwc_of(out[0].shape, op);
  const int64_t n = out[0].size();
  if (n == 0) return;
  const int64_t x0 = kMove == Move::kCrop ? ctx.attrs->get_int("x") : 0;
  const int64_t y0 = kMove == Move::kCrop ? ctx.attrs->get_int("y") : 0;
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
    move_kernel<kMove, T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), out[0].data<T>(), g, o, x0, y0);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------------------------
// colour adjustments
// ---------------------------------------------------------------------------------------------
enum class Adjust { kBrightness, kContrast, kSaturation };

// 0.299 R + 0.587 G + 0.114 B in double, summed left to right like the CPU.
template <typename T>
__device__ __forceinline__ double gray_of(const T* p) {
  return __dadd_rn(__dadd_rn(__dmul_rn(0.299, convert<double>(p[0])),
                             __dmul_rn(0.587, convert<double>(p[1]))),
                   __dmul_rn(0.114, convert<double>(p[2])));
}

// mean_gray[n] = the mean gray level of image n: a block per image.
template <typename T>
__global__ void mean_gray_kernel(const T* x, double* mean_gray, Hwc g) {
  const int64_t pixels = g.h * g.w;
  for (int64_t n = blockIdx.x; n < g.n; n += gridDim.x) {
    const T* img = x + n * pixels * g.c;
    double sum = 0;
    for (int64_t p = threadIdx.x; p < pixels; p += kBlock) sum += gray_of(img + p * g.c);
    sum = group_reduce(sum, kBlock, [](double a, double b) { return a + b; });
    if (threadIdx.x == 0) mean_gray[n] = pixels > 0 ? sum / pixels : 0.0;
  }
}

// out = x * f + blend * (1 - f): blend 0 (brightness), the image's mean gray (contrast) or the
// pixel's gray (saturation).
template <Adjust kWhat, typename T>
__global__ void adjust_kernel(const T* x, T* y, const double* mean_gray, Hwc g, double f) {
  PMX_GRID_STRIDE_LOOP(e, g.n * g.h * g.w * g.c) {
    const int64_t pixel = e / g.c, n = pixel / (g.h * g.w);
    const double blend = kWhat == Adjust::kContrast     ? mean_gray[n]
                         : kWhat == Adjust::kSaturation ? gray_of(x + pixel * g.c)
                                                        : 0.0;
    y[e] = saturate<T>(__dadd_rn(__dmul_rn(convert<double>(x[e]), f), __dmul_rn(blend, 1 - f)));
  }
}

template <Adjust kWhat>
void adjust(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const Hwc g = image::hwc_of(in[0].shape, "image_adjust");
  const double f = ctx.attrs->get_float("factor");
  const int64_t n = in[0].size();
  if (n == 0) return;
  cudaStream_t s = stream_of(ctx);
  double* mean_gray = nullptr;
  if (kWhat == Adjust::kContrast) {
    mean_gray = static_cast<double*>(ctx.workspace(g.n * sizeof(double)));
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(g.n, 65535));
    PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
      mean_gray_kernel<T><<<blocks, kBlock, 0, s>>>(in[0].data<T>(), mean_gray, g);
    });
    PMX_KERNEL_LAUNCH_CHECK();
  }
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
    adjust_kernel<kWhat, T><<<grid_for(n), kBlock, 0, s>>>(in[0].data<T>(), out[0].data<T>(),
                                                           mean_gray, g, f);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("image_to_tensor").set_gpu(to_tensor);
  op_registry::get_or_create("image_normalize").set_gpu(normalize);
  op_registry::get_or_create("image_resize").set_gpu(resize);
  op_registry::get_or_create("image_crop").set_gpu(move<Move::kCrop>);
  op_registry::get_or_create("image_flip_left_right").set_gpu(move<Move::kFlipLeftRight>);
  op_registry::get_or_create("image_flip_top_bottom").set_gpu(move<Move::kFlipTopBottom>);
  op_registry::get_or_create("image_adjust_brightness").set_gpu(adjust<Adjust::kBrightness>);
  op_registry::get_or_create("image_adjust_contrast").set_gpu(adjust<Adjust::kContrast>);
  op_registry::get_or_create("image_adjust_saturation").set_gpu(adjust<Adjust::kSaturation>);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
