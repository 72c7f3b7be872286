// Geometry of convolutions, shared by the CPU and GPU kernels of convolution (nn_convolution.cc,
// cuda/src/conv_pool.cu) and of the transposed convolution (nn_deconvolution.cc,
// cuda/src/deconvolution.cu), which must agree on the attribute parsing and output extents; plus
// the CPU im2col / col2im over that geometry.
//
// Note [Transposed convolution as the adjoint of a convolution]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// deconvolution(x, W) is the data gradient of the convolution whose *output* has x's shape and
// whose *input* has the deconvolution output's shape, with the same weight: MXNet's deconvolution
// weight (C_in, num_filter/groups, k...) is exactly that convolution's weight (out_c, in_c/groups,
// k...). So ConvGeometry describes that convolution: `in` is the deconvolution output (num_filter
// channels), `out` the deconvolution input (C_in channels). Then
//   forward        col_g = W_g^T . x_g, y = col2im(col)          (+ bias)
//   data grad      dx_g = W_g . im2col(dy)_g                     (a convolution of dy)
//   weight grad    dW_g = x_g . im2col(dy)_g^T
// and the output extent per dim is (in-1)*stride - 2*pad + dilate*(kernel-1) + 1 + adj.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "ops/nn_common.h"
#include "pymx/op.h"

namespace pymx {
namespace nn {

struct ConvGeometry {
  int nsp = 0;  // spatial dims, 1-3
  bool channel_last = false;  // NWC / NHWC / NDHWC (convolution only)
  int64_t batch = 0, in_c = 0, out_c = 0, groups = 1;
  // Spatial extents right-aligned into 3 dims (depth, height, width), leading ones 1.
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
  int64_t in_sp = 1, out_sp = 1, k_sp = 1;

  int64_t in_cg() const { return in_c / groups; }
  int64_t out_cg() const { return out_c / groups; }
  int64_t col_rows() const { return in_cg() * k_sp; }  // rows of one group's im2col matrix
  // A 1x1 kernel with stride 1 and no padding: the image is its own im2col matrix.
  bool is_pointwise() const {
    for (int i = 0; i < 3; ++i)
      if (k[i] != 1 || s[i] != 1 || p[i] != 0) return false;
    return true;
  }

  void finish() {
    in_sp = in[0] * in[1] * in[2];
    out_sp = out[0] * out[1] * out[2];
    k_sp = k[0] * k[1] * k[2];
  }
};

// Whether `layout` is channel-last for nsp spatial dims (None and channel-first are not).
inline bool conv_layout_is_last(const std::string& layout, int nsp) {
  static const char* first[] = {"NCW", "NCHW", "NCDHW"};
  static const char* last[] = {"NWC", "NHWC", "NDHWC"};
  if (layout == "None" || layout == first[nsp - 1]) return false;
  if (layout == last[nsp - 1]) return true;
  PMX_THROW(Status::kInvalidArg, "convolution: layout '", layout, "' does not fit ", nsp,
            "-D convolution (use ", first[nsp - 1], " or ", last[nsp - 1], ")");
}

// The geometry of convolution(data, weight) with MXNet's attributes (kernel stride dilate pad
// num_filter num_group layout), validated against the data and weight shapes; the errors carry
// the numbers. Shared by the CPU op (nn_convolution.cc) and the GPU op (cuda/src/conv_pool.cu).
inline ConvGeometry conv_geometry(const Attrs& attrs, const Shape& data, const Shape& weight) {
  ConvGeometry g;
  const Shape kernel = attrs.get_shape("kernel");
  g.nsp = static_cast<int>(kernel.size());
  PMX_CHECK(g.nsp >= 1 && g.nsp <= 3, "convolution: kernel ", shape_str(kernel),
            " must have 1, 2 or 3 values");
  PMX_CHECK(static_cast<int>(data.size()) == g.nsp + 2, "convolution: data shape ",
            shape_str(data), " must have ", g.nsp + 2, " dimensions for kernel ", shape_str(kernel));
  g.channel_last = conv_layout_is_last(attrs.get_str("layout", "None"), g.nsp);
  const Shape stride = spatial_attr(attrs, "stride", g.nsp, 1, "convolution");
  const Shape pad = spatial_attr(attrs, "pad", g.nsp, 0, "convolution");
  const Shape dilate = spatial_attr(attrs, "dilate", g.nsp, 1, "convolution");
  g.batch = data[0];
  g.in_c = g.channel_last ? data.back() : data[1];
  g.groups = attrs.get_int("num_group", 1);
  g.out_c = attrs.get_int("num_filter", weight.empty() ? 0 : weight[0]);
  PMX_CHECK(g.groups >= 1, "convolution: num_group must be >= 1, got ", g.groups);
  PMX_CHECK(g.out_c >= 1, "convolution: num_filter must be >= 1, got ", g.out_c);
  PMX_CHECK(g.in_c % g.groups == 0 && g.out_c % g.groups == 0, "convolution: input channels ",
            g.in_c, " and num_filter ", g.out_c, " must both be divisible by num_group ", g.groups);
  const int off = 3 - g.nsp;
  for (int i = 0; i < g.nsp; ++i) {
    const int64_t extent = g.channel_last ? data[1 + i] : data[2 + i];
    PMX_CHECK(kernel[i] >= 1 && stride[i] >= 1 && dilate[i] >= 1 && pad[i] >= 0,
              "convolution: kernel ", shape_str(kernel), ", stride ", shape_str(stride),
              ", dilate ", shape_str(dilate), " must be >= 1 and pad ", shape_str(pad), " >= 0");
    const int64_t span = dilate[i] * (kernel[i] - 1) + 1;
    PMX_CHECK(extent + 2 * pad[i] >= span, "convolution: kernel ", shape_str(kernel),
              " (dilate ", shape_str(dilate), ") is larger than the padded input ",
              shape_str(data), " with pad ", shape_str(pad));
    g.in[off + i] = extent;
    g.k[off + i] = kernel[i];
    g.s[off + i] = stride[i];
    g.p[off + i] = pad[i];
    g.d[off + i] = dilate[i];
    g.out[off + i] = (extent + 2 * pad[i] - span) / stride[i] + 1;
  }
  g.finish();
  return g;
}

// The convolution geometry of deconvolution(data, weight) (see the Note), with MXNet's attributes:
// kernel stride dilate pad adj target_shape num_filter num_group layout. A non-empty
// target_shape (not all zeros) overrides pad and adj: the padding is chosen so that the output
// has exactly that extent (MXNet's InferPad). Only channel-first layouts are supported.
inline ConvGeometry deconv_geometry(const Attrs& attrs, const Shape& data, const Shape& weight) {
  static const char* kOp = "deconvolution";
  ConvGeometry g;
  const Shape kernel = attrs.get_shape("kernel");
  g.nsp = static_cast<int>(kernel.size());
  PMX_CHECK(g.nsp >= 1 && g.nsp <= 3, kOp, ": kernel ", shape_str(kernel),
            " must have 1, 2 or 3 values");
  PMX_CHECK(static_cast<int>(data.size()) == g.nsp + 2, kOp, ": data shape ", shape_str(data),
            " must have ", g.nsp + 2, " dimensions for kernel ", shape_str(kernel));
  static const char* first[] = {"NCW", "NCHW", "NCDHW"};
  const std::string layout = attrs.get_str("layout", "None");
  PMX_CHECK(layout == "None" || layout == first[g.nsp - 1], kOp, ": layout '", layout,
            "' is not supported (use ", first[g.nsp - 1], "; transpose channel-last data first)");
  const Shape stride = spatial_attr(attrs, "stride", g.nsp, 1, kOp);
  const Shape dilate = spatial_attr(attrs, "dilate", g.nsp, 1, kOp);
  Shape pad = spatial_attr(attrs, "pad", g.nsp, 0, kOp);
  Shape adj = spatial_attr(attrs, "adj", g.nsp, 0, kOp);
  const Shape target = attrs.get_shape("target_shape", Shape());
  const bool use_target =
      std::any_of(target.begin(), target.end(), [](int64_t t) { return t != 0; });
  PMX_CHECK(!use_target || static_cast<int>(target.size()) == g.nsp, kOp, ": target_shape ",
            shape_str(target), " must have one value per spatial dimension (", g.nsp, ")");
  g.batch = data[0];
  g.out_c = data[1];  // the adjoint convolution's output channels are the data's channels
  g.groups = attrs.get_int("num_group", 1);
  PMX_CHECK(g.groups >= 1, kOp, ": num_group must be >= 1, got ", g.groups);
  PMX_CHECK(weight.size() == data.size(), kOp, ": weight shape ", shape_str(weight), " must have ",
            data.size(), " dimensions (C_in, num_filter/num_group, kernel...)");
  g.in_c = attrs.get_int("num_filter", weight[1] * g.groups);
  PMX_CHECK(g.in_c >= 1, kOp, ": num_filter must be >= 1, got ", g.in_c);
  PMX_CHECK(g.out_c % g.groups == 0 && g.in_c % g.groups == 0, kOp, ": input channels ", g.out_c,
            " and num_filter ", g.in_c, " must both be divisible by num_group ", g.groups);
  const int off = 3 - g.nsp;
  for (int i = 0; i < g.nsp; ++i) {
    PMX_CHECK(kernel[i] >= 1 && stride[i] >= 1 && dilate[i] >= 1 && pad[i] >= 0 && adj[i] >= 0,
              kOp, ": kernel ", shape_str(kernel), ", stride ", shape_str(stride), ", dilate ",
              shape_str(dilate), " must be >= 1 and pad ", shape_str(pad), ", adj ",
              shape_str(adj), " >= 0");
    const int64_t extent = data[2 + i];
    const int64_t full = stride[i] * (extent - 1) + dilate[i] * (kernel[i] - 1) + 1;
    if (use_target) {
      PMX_CHECK(target[i] >= 1 && target[i] <= full, kOp, ": target_shape ", shape_str(target),
                " must lie in [1, ", full, "] along spatial dim ", i, " for data ",
                shape_str(data));
      const int64_t total_pad = full - target[i];
      adj[i] = total_pad % 2;
      pad[i] = (total_pad + 1) / 2;
    }
    PMX_CHECK(adj[i] < stride[i], kOp, ": adj ", shape_str(adj), " must be smaller than stride ",
              shape_str(stride), " in every dimension");
    const int64_t o = full - 2 * pad[i] + adj[i];
    PMX_CHECK(o >= 1, kOp, ": pad ", shape_str(pad), " leaves no output for data ",
              shape_str(data), " with kernel ", shape_str(kernel), " and stride ",
              shape_str(stride));
    g.out[off + i] = extent;
    g.in[off + i] = o;
    g.k[off + i] = kernel[i];
    g.s[off + i] = stride[i];
    g.p[off + i] = pad[i];
    g.d[off + i] = dilate[i];
  }
  g.finish();
  return g;
}

// MXNet's weight shape for the deconvolution of `g`: (C_in, num_filter/num_group, kernel...).
inline Shape deconv_weight_shape(const ConvGeometry& g) {
  Shape w = {g.out_c, g.in_cg()};
  for (int i = 3 - g.nsp; i < 3; ++i) w.push_back(g.k[i]);
  return w;
}

// The deconvolution output shape (N, num_filter, out...).
inline Shape deconv_out_shape(const ConvGeometry& g) {
  Shape o = {g.batch, g.in_c};
  for (int i = 3 - g.nsp; i < 3; ++i) o.push_back(g.in[i]);
  return o;
}

// The output columns [lo, hi) along width whose input column ox*s + offset lies in [0, width).
inline void valid_columns(int64_t out_w, int64_t stride, int64_t offset, int64_t width,
                          int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = out_w;
  while (*lo < out_w && *lo * stride + offset < 0) ++*lo;
  while (*hi > *lo && (*hi - 1) * stride + offset >= width) --*hi;
}

// Walks the (channel, kernel offset, output row) rows of the im2col matrix of `channels`
// channel-first channels at `x`: calls row_fn(col_row, x_row, lo, hi) with col_row the
// out[2]-long row of `col`, x_row the input row shifted so that x_row[ox * s[2]] is the input
// under column ox, and [lo, hi) the columns inside the input; x_row is null when the whole row
// falls into the padding.
template <typename T, typename ColT, typename RowFn>
void for_each_col_row(const ConvGeometry& g, int64_t channels, T* x, ColT* col, RowFn row_fn) {
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t kz = 0; kz < g.k[0]; ++kz) {
      for (int64_t ky = 0; ky < g.k[1]; ++ky) {
        for (int64_t kx = 0; kx < g.k[2]; ++kx) {
          ColT* row = col + (((c * g.k[0] + kz) * g.k[1] + ky) * g.k[2] + kx) * g.out_sp;
          const int64_t x_off = kx * g.d[2] - g.p[2];
          int64_t lo, hi;
          valid_columns(g.out[2], g.s[2], x_off, g.in[2], &lo, &hi);
          for (int64_t oz = 0; oz < g.out[0]; ++oz) {
            const int64_t iz = oz * g.s[0] - g.p[0] + kz * g.d[0];
            for (int64_t oy = 0; oy < g.out[1]; ++oy) {
              const int64_t iy = oy * g.s[1] - g.p[1] + ky * g.d[1];
              const bool inside = iz >= 0 && iz < g.in[0] && iy >= 0 && iy < g.in[1];
              T* x_row = inside ? x + ((c * g.in[0] + iz) * g.in[1] + iy) * g.in[2] + x_off
                                : nullptr;
              row_fn(row + (oz * g.out[1] + oy) * g.out[2], x_row, lo, hi);
            }
          }
        }
      }
    }
  }
}

// col (channels * k_sp, out_sp) = the receptive fields of `channels` channels at x (zeros in
// the padding).
template <typename T>
void im2col(const ConvGeometry& g, int64_t channels, const T* x, T* col) {
  const int64_t s = g.s[2], width = g.out[2];
  for_each_col_row(g, channels, x, col, [&](T* dst, const T* src, int64_t lo, int64_t hi) {
    if (!src) {
      std::fill(dst, dst + width, T(0));
      return;
    }
    std::fill(dst, dst + lo, T(0));
    for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * s];
    std::fill(dst + hi, dst + width, T(0));
  });
}

// x += col2im(col): adds every column entry back onto the input element it was read from.
template <typename T>
void col2im_add(const ConvGeometry& g, int64_t channels, const T* col, T* x) {
  using A = acc_t<T>;
  const int64_t s = g.s[2];
  for_each_col_row(g, channels, x, col, [&](const T* src, T* dst, int64_t lo, int64_t hi) {
    if (!dst) return;
    for (int64_t ox = lo; ox < hi; ++ox)
      dst[ox * s] = static_cast<T>(static_cast<A>(dst[ox * s]) + static_cast<A>(src[ox]));
  });
}

}  // namespace nn
}  // namespace pymx
