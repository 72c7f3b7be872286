// Image operators for the data pipeline (MXNet's npx.image; reference/mxnet-behaviour.md §7.3).
// Images are HWC, batches NHWC (any dtype; uint8 is the usual), except where noted.
//
// | op                         | inputs | outputs | attrs |
// |----------------------------|--------|---------|-------|
// | image_to_tensor            | data   | out     | - (HWC -> CHW / NHWC -> NCHW, float32, divided by 255) |
// | image_normalize            | data   | out     | mean, std (tuples of 1 or C values); CHW or NCHW float |
// | image_resize               | data   | out     | size (w, h) or (s,), keep_ratio (False), interp (1 bilinear; 0 nearest) |
// | image_crop                 | data   | out     | x, y, width, height |
// | image_flip_left_right      | data   | out     | - |
// | image_flip_top_bottom      | data   | out     | - |
// | image_adjust_brightness    | data   | out     | factor: out = x * factor |
// | image_adjust_contrast      | data   | out     | factor: out = x * f + mean_gray * (1 - f), mean_gray over the image |
// | image_adjust_saturation    | data   | out     | factor: out = x * f + gray * (1 - f), gray per pixel |
//
// Gray is 0.299 R + 0.587 G + 0.114 B (MXNet's coefficients; the adjust ops need 3 channels).
// Integer outputs are rounded to nearest and saturated to the dtype's range (OpenCV's
// saturate_cast); float outputs are not clipped.
// resize: an int size with keep_ratio makes the short edge `size` and the long edge
// int(long * size / short); without keep_ratio the output is size x size. Bilinear follows OpenCV's
// INTER_LINEAR: source coordinate (dst + 0.5) * in / out - 0.5, clamped at the borders (OpenCV
// computes uint8 in fixed point, so results may differ from it by 1).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/image_common.h"
#include "ops/nn_common.h"

namespace pymx {
namespace {

using image::Hwc;
using image::hwc_of;
using image::hwc_shape;
using image::per_channel;
using image::Tap;

// Rounds and saturates for integer T; plain conversion for float T.
template <typename T>
T saturate(double v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    return static_cast<T>(std::min(std::max(std::nearbyint(v), lo), hi));
  } else {
    return static_cast<T>(v);
  }
}

// ---------------------------------------------------------------------------------------------
// to_tensor / normalize
// ---------------------------------------------------------------------------------------------
void to_tensor_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>&,
                     std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const Hwc g = hwc_of(in[0], "image_to_tensor");
  *out = {g.batched ? Shape{g.n, g.c, g.h, g.w} : Shape{g.c, g.h, g.w}};
  *out_dt = {DType::kFloat32};
}

void to_tensor(const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const Hwc g = hwc_of(in[0].shape, "image_to_tensor");
  const int64_t plane = g.h * g.w;
  float* y = out[0].data<float>();
  PMX_TYPE_SWITCH(in[0].dtype, T, {
    const T* x = in[0].data<T>();
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t p = 0; p < plane; ++p)
        for (int64_t c = 0; c < g.c; ++c)
          y[(n * g.c + c) * plane + p] = static_cast<float>(x[(n * plane + p) * g.c + c]) / 255.0f;
  });
}

void normalize_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                     std::vector<Shape>* out, std::vector<DType>* out_dt) {
  PMX_CHECK(in[0].size() == 3 || in[0].size() == 4,
            "image_normalize: expected a CHW image or NCHW batch, got shape ", shape_str(in[0]));
  nn::check_float(dt[0], "image_normalize", "data");
  const int64_t c = in[0][in[0].size() - 3];
  const std::vector<double> std_dev = per_channel(attrs, "std", 1.0, c);
  per_channel(attrs, "mean", 0.0, c);
  for (double s : std_dev) PMX_CHECK(s != 0, "image_normalize: std must not contain 0");
  *out = {in[0]};
  *out_dt = {dt[0]};
}

void normalize(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const Shape& s = in[0].shape;
  const int64_t c = s[s.size() - 3], plane = s[s.size() - 2] * s[s.size() - 1];
  const int64_t n = s.size() == 4 ? s[0] : 1;
  const std::vector<double> mean = per_channel(*ctx.attrs, "mean", 0.0, c);
  const std::vector<double> std_dev = per_channel(*ctx.attrs, "std", 1.0, c);
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        const float m = static_cast<float>(mean[ch]), inv = static_cast<float>(1.0 / std_dev[ch]);
        const int64_t base = (b * c + ch) * plane;
        for (int64_t p = 0; p < plane; ++p)
          y[base + p] = static_cast<T>((static_cast<float>(x[base + p]) - m) * inv);
      }
  });
}

// ---------------------------------------------------------------------------------------------
// resize
// ---------------------------------------------------------------------------------------------
void resize_target(const Attrs& attrs, const Hwc& g, int64_t* out_h, int64_t* out_w) {
  const Shape size = attrs.get_shape("size");
  PMX_CHECK(size.size() == 1 || size.size() == 2, "image_resize: size ", shape_str(size),
            " must be an int or (width, height)");
  for (int64_t v : size) PMX_CHECK(v > 0, "image_resize: size ", shape_str(size), " must be > 0");
  if (size.size() == 2) {
    *out_w = size[0];
    *out_h = size[1];
  } else if (attrs.get_bool("keep_ratio", false)) {
    PMX_CHECK(g.h > 0 && g.w > 0, "image_resize: cannot keep the ratio of an empty image ",
              g.h, "x", g.w);
    if (g.h <= g.w) {
      *out_h = size[0];
      *out_w = static_cast<int64_t>(static_cast<double>(g.w) * size[0] / g.h);
    } else {
      *out_w = size[0];
      *out_h = static_cast<int64_t>(static_cast<double>(g.h) * size[0] / g.w);
    }
  } else {
    *out_h = *out_w = size[0];
  }
}

void resize_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const Hwc g = hwc_of(in[0], "image_resize");
  const int64_t interp = attrs.get_int("interp", 1);
  PMX_CHECK(interp == 0 || interp == 1, "image_resize: interp ", interp,
            " is not supported (0 nearest, 1 bilinear)");
  // An empty batch resizes to an empty batch; an image without pixels has nothing to sample.
  PMX_CHECK(g.n == 0 || (g.h > 0 && g.w > 0), "image_resize: cannot resize an empty image ", g.h,
            "x", g.w, " (input shape ", shape_str(in[0]), ")");
  int64_t h, w;
  resize_target(attrs, g, &h, &w);
  *out = {hwc_shape(g, h, w)};
  *out_dt = {dt[0]};
}

void resize(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const Hwc g = hwc_of(in[0].shape, "image_resize");
  const Hwc o = hwc_of(out[0].shape, "image_resize");
  if (o.h == 0 || o.w == 0 || g.n == 0) return;
  const bool nearest = ctx.attrs->get_int("interp", 1) == 0;
  std::vector<Tap> ys(o.h), xs(o.w);
  image::resize_taps(g.h, o.h, nearest, ys.data());
  image::resize_taps(g.w, o.w, nearest, xs.data());
  PMX_TYPE_SWITCH(in[0].dtype, T, {
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t n = 0; n < g.n; ++n) {
      const T* img = x + n * g.h * g.w * g.c;
      for (int64_t dy = 0; dy < o.h; ++dy) {
        const Tap& ty = ys[dy];
        const T* r0 = img + ty.i0 * g.w * g.c;
        const T* r1 = img + ty.i1 * g.w * g.c;
        T* dst = y + ((n * o.h + dy) * o.w) * g.c;
        for (int64_t dx = 0; dx < o.w; ++dx) {
          const Tap& tx = xs[dx];
          for (int64_t c = 0; c < g.c; ++c) {
            const float top = static_cast<float>(r0[tx.i0 * g.c + c]) * (1 - tx.frac) +
                              static_cast<float>(r0[tx.i1 * g.c + c]) * tx.frac;
            const float bottom = static_cast<float>(r1[tx.i0 * g.c + c]) * (1 - tx.frac) +
                                 static_cast<float>(r1[tx.i1 * g.c + c]) * tx.frac;
            dst[dx * g.c + c] = saturate<T>(top * (1 - ty.frac) + bottom * ty.frac);
          }
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// crop and flips
// ---------------------------------------------------------------------------------------------
void crop_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const Hwc g = hwc_of(in[0], "image_crop");
  const int64_t x = attrs.get_int("x"), y = attrs.get_int("y");
  const int64_t w = attrs.get_int("width"), h = attrs.get_int("height");
  PMX_CHECK(x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= g.w && y + h <= g.h,
            "image_crop: box x=", x, ", y=", y, ", width=", w, ", height=", h,
            " does not fit in the ", g.w, "x", g.h, " (width x height) image");
  *out = {hwc_shape(g, h, w)};
  *out_dt = {dt[0]};
}

void crop(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const Hwc g = hwc_of(in[0].shape, "image_crop");
  const Hwc o = hwc_of(out[0].shape, "image_crop");
  const int64_t x0 = ctx.attrs->get_int("x"), y0 = ctx.attrs->get_int("y");
  const size_t elem = dtype_size(in[0].dtype);
  const size_t row_bytes = o.w * g.c * elem;
  const char* src = static_cast<const char*>(in[0].dptr);
  char* dst = static_cast<char*>(out[0].dptr);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t r = 0; r < o.h; ++r)
      std::memcpy(dst + ((n * o.h + r) * o.w * g.c) * elem,
                  src + (((n * g.h + y0 + r) * g.w + x0) * g.c) * elem, row_bytes);
}

template <bool kLeftRight>
void flip(const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const Hwc g = hwc_of(in[0].shape, kLeftRight ? "image_flip_left_right" : "image_flip_top_bottom");
  const size_t px = g.c * dtype_size(in[0].dtype);
  const char* src = static_cast<const char*>(in[0].dptr);
  char* dst = static_cast<char*>(out[0].dptr);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t r = 0; r < g.h; ++r) {
      if (kLeftRight) {
        const char* s = src + ((n * g.h + r) * g.w) * px;
        char* d = dst + ((n * g.h + r) * g.w) * px;
        for (int64_t col = 0; col < g.w; ++col) std::memcpy(d + col * px, s + (g.w - 1 - col) * px, px);
      } else {
        std::memcpy(dst + ((n * g.h + r) * g.w) * px, src + ((n * g.h + (g.h - 1 - r)) * g.w) * px,
                    g.w * px);
      }
    }
}

void hwc_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
               std::vector<Shape>* out, std::vector<DType>* out_dt) {
  hwc_of(in[0], "image flip");
  *out = {in[0]};
  *out_dt = {dt[0]};
}

// ---------------------------------------------------------------------------------------------
// colour adjustments
// ---------------------------------------------------------------------------------------------
enum class Adjust { kBrightness, kContrast, kSaturation };

template <Adjust kWhat>
void adjust_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const Hwc g = hwc_of(in[0], "image_adjust");
  attrs.get_float("factor");
  PMX_CHECK(kWhat == Adjust::kBrightness || g.c == 3,
            "image_adjust_contrast/saturation: expected 3 (RGB) channels, got ", g.c);
  *out = {in[0]};
  *out_dt = {dt[0]};
}

template <Adjust kWhat>
void adjust(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const Hwc g = hwc_of(in[0].shape, "image_adjust");
  const double f = ctx.attrs->get_float("factor");
  const int64_t pixels = g.h * g.w;
  PMX_TYPE_SWITCH(in[0].dtype, T, {
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    auto gray = [&](const T* p) {
      return 0.299 * static_cast<double>(p[0]) + 0.587 * static_cast<double>(p[1]) +
             0.114 * static_cast<double>(p[2]);
    };
    for (int64_t n = 0; n < g.n; ++n) {
      const T* img = x + n * pixels * g.c;
      T* res = y + n * pixels * g.c;
      double mean_gray = 0;
      if (kWhat == Adjust::kContrast) {
        for (int64_t p = 0; p < pixels; ++p) mean_gray += gray(img + p * g.c);
        mean_gray = pixels > 0 ? mean_gray / pixels : 0.0;
      }
      for (int64_t p = 0; p < pixels; ++p) {
        const double blend = kWhat == Adjust::kContrast ? mean_gray
                             : kWhat == Adjust::kSaturation ? gray(img + p * g.c) : 0.0;
        for (int64_t c = 0; c < g.c; ++c) {
          const int64_t i = p * g.c + c;
          res[i] = saturate<T>(static_cast<double>(img[i]) * f + blend * (1 - f));
        }
      }
    }
  });
}

PMX_REGISTER_OP(image_to_tensor).set_infer(to_tensor_infer).set_cpu(to_tensor);
PMX_REGISTER_OP(image_normalize).set_infer(normalize_infer).set_cpu(normalize);
PMX_REGISTER_OP(image_resize).set_infer(resize_infer).set_cpu(resize);
PMX_REGISTER_OP(image_crop).set_infer(crop_infer).set_cpu(crop);
PMX_REGISTER_OP(image_flip_left_right).set_infer(hwc_infer).set_cpu(flip<true>);
PMX_REGISTER_OP(image_flip_top_bottom).set_infer(hwc_infer).set_cpu(flip<false>);
PMX_REGISTER_OP(image_adjust_brightness)
    .set_infer(adjust_infer<Adjust::kBrightness>).set_cpu(adjust<Adjust::kBrightness>);
PMX_REGISTER_OP(image_adjust_contrast)
    .set_infer(adjust_infer<Adjust::kContrast>).set_cpu(adjust<Adjust::kContrast>);
PMX_REGISTER_OP(image_adjust_saturation)
    .set_infer(adjust_infer<Adjust::kSaturation>).set_cpu(adjust<Adjust::kSaturation>);

}  // namespace
}  // namespace pymx
