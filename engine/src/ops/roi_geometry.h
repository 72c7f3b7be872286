// The geometry of roi_pooling and roi_align, shared by their CPU kernels (roi.cc) and GPU kernels
// (cuda/src/roi.cu), which must agree on it to the bit: attribute parsing and validation on the
// host, and the per-bin maths (which device code calls too) for one region of interest.
//
// A region is a row [batch_index, x1, y1, x2, y2] of rois (R, 5), in input-image coordinates;
// spatial_scale maps them onto the (N, C, H, W) feature map. Bin arithmetic runs in the
// kernel's compute type T (float for float32 and the 16-bit floats, double for float64), as
// MXNet's kernels do in their data type.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/host_device.h"
#include "pymx/op.h"

namespace pymx {
namespace roi {

// The attributes and shapes of one call. Trivially copyable: GPU kernels take it by value.
struct RoiGeom {
  int64_t batch = 0, channels = 0, height = 0, width = 0;  // data (N, C, H, W)
  int64_t num_rois = 0;
  int64_t pooled_h = 1, pooled_w = 1;
  float spatial_scale = 1;  // a float, as MXNet's parameter: float64 kernels see the same value
  // roi_align only.
  int64_t sample_ratio = -1;  // <= 0: ceil(roi extent / pooled extent) samples per bin side
  bool position_sensitive = false;  // output channel c, bin (ph, pw) reads data channel
                                    // (c * pooled_h + ph) * pooled_w + pw
  bool aligned = false;             // pixel centres at +0.5: the region shifts by -0.5
  // Output channels: channels / (pooled_h * pooled_w) when position-sensitive.
  PMX_HOST_DEVICE int64_t out_channels() const {
    return position_sensitive ? channels / (pooled_h * pooled_w) : channels;
  }
  PMX_HOST_DEVICE int64_t plane() const { return height * width; }
  PMX_HOST_DEVICE int64_t bins() const { return pooled_h * pooled_w; }
};

// Parses and checks pooled_size, spatial_scale (and for roi_align sample_ratio,
// position_sensitive, aligned) against data (N, C, H, W) and rois (R, 5); the errors name `op`
// and the values.
inline RoiGeom roi_geometry(const Attrs& attrs, const Shape& data, const Shape& rois,
                            bool align, const char* op) {
  PMX_CHECK(data.size() == 4, op, ": data must be 4-d (N, C, H, W), got shape ", shape_str(data));
  PMX_CHECK(rois.size() == 2 && rois[1] == 5, op,
            ": rois must have shape (R, 5) with rows [batch_index, x1, y1, x2, y2], got shape ",
            shape_str(rois));
  const Shape pooled = attrs.get_shape("pooled_size");
  PMX_CHECK(pooled.size() == 2 && pooled[0] > 0 && pooled[1] > 0, op,
            ": pooled_size must be two positive integers (height, width), got ",
            shape_str(pooled));
  RoiGeom g;
  g.batch = data[0];
  g.channels = data[1];
  g.height = data[2];
  g.width = data[3];
  g.num_rois = rois[0];
  g.pooled_h = pooled[0];
  g.pooled_w = pooled[1];
  g.spatial_scale = static_cast<float>(attrs.get_float("spatial_scale"));
  // MXNet bounds it by 1 too: a feature map is not larger than its image.
  PMX_CHECK(g.spatial_scale > 0 && g.spatial_scale <= 1, op,
            ": spatial_scale must be in (0, 1], got ", g.spatial_scale);
  if (align) {
    g.sample_ratio = attrs.get_int("sample_ratio", -1);
    g.position_sensitive = attrs.get_bool("position_sensitive", false);
    g.aligned = attrs.get_bool("aligned", false);
    PMX_CHECK(!g.position_sensitive || g.channels % g.bins() == 0, op, ": with position_sensitive,"
              " the ", g.channels, " channels of data must divide by pooled_size ",
              shape_str(pooled), " (", g.bins(), " bins)");
  }
  return g;
}

// Checks every row of `rois` (host memory, R x 5): its batch index lies in [0, N) (roi_align
// also takes a negative index: the region is skipped and its output is 0), and with aligned
// roi_align, x2 > x1 and y2 > y1 (such a region has no interior to sample). The error names the
// row and its values. Runs on the kernel's worker: the error surfaces at the next wait.
template <typename T>
void check_rois(const T* rois, const RoiGeom& g, bool align, const char* op) {
  for (int64_t r = 0; r < g.num_rois; ++r) {
    const T* row = rois + r * 5;
    const double b = std::trunc(static_cast<double>(row[0]));  // kernels truncate it to an int
    const bool skipped = align && b < 0;
    PMX_CHECK(skipped || (b >= 0 && b < static_cast<double>(g.batch)), op, ": rois row ", r,
              " has batch index ", static_cast<double>(row[0]), ", outside [0, ", g.batch,
              ") for data of batch size ", g.batch);
    if (align && g.aligned && !skipped) {
      const double x1 = static_cast<double>(row[1]), y1 = static_cast<double>(row[2]);
      const double x2 = static_cast<double>(row[3]), y2 = static_cast<double>(row[4]);
      PMX_CHECK(x2 > x1 && y2 > y1, op, ": with aligned=True, rois row ", r, " (x1=", x1,
                ", y1=", y1, ", x2=", x2, ", y2=", y2, ") must have x2 > x1 and y2 > y1");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// roi_pooling: max over the bins of the region rounded to whole pixels
// ---------------------------------------------------------------------------------------------

// A bin's pixels: rows [h0, h1), columns [w0, w1) of the feature map (empty when h1 <= h0 or
// w1 <= w0).
struct PixelBin {
  int64_t h0, h1, w0, w1;
  PMX_HOST_DEVICE bool empty() const { return h1 <= h0 || w1 <= w0; }
};

// Bin (ph, pw) of the region `row` (5 values). The corners round half away from zero after
// scaling; the region is at least 1 x 1 pixel and includes its end pixel; bin edges are floor and
// ceil of multiples of (extent / pooled), offset by the start and clipped to the map.
template <typename T>
PMX_HOST_DEVICE PixelBin pool_bin(const T* row, const RoiGeom& g, int64_t ph, int64_t pw) {
  const T scale = static_cast<T>(g.spatial_scale);
  const int64_t start_w = static_cast<int64_t>(round(row[1] * scale));
  const int64_t start_h = static_cast<int64_t>(round(row[2] * scale));
  const int64_t end_w = static_cast<int64_t>(round(row[3] * scale));
  const int64_t end_h = static_cast<int64_t>(round(row[4] * scale));
  const int64_t roi_h = end_h - start_h + 1 > 1 ? end_h - start_h + 1 : 1;
  const int64_t roi_w = end_w - start_w + 1 > 1 ? end_w - start_w + 1 : 1;
  const T bin_h = static_cast<T>(roi_h) / static_cast<T>(g.pooled_h);
  const T bin_w = static_cast<T>(roi_w) / static_cast<T>(g.pooled_w);
  const auto clip = [](int64_t v, int64_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); };
  PixelBin b;
  b.h0 = clip(static_cast<int64_t>(floor(static_cast<T>(ph) * bin_h)) + start_h, g.height);
  b.h1 = clip(static_cast<int64_t>(ceil(static_cast<T>(ph + 1) * bin_h)) + start_h, g.height);
  b.w0 = clip(static_cast<int64_t>(floor(static_cast<T>(pw) * bin_w)) + start_w, g.width);
  b.w1 = clip(static_cast<int64_t>(ceil(static_cast<T>(pw + 1) * bin_w)) + start_w, g.width);
  return b;
}

// A non-empty bin starts its max at -FLT_MAX (whatever T): a bin of NaN or -inf only keeps it,
// with no argmax (-1), as MXNet's kernels do. An empty bin gives 0.
constexpr float kPoolStart = -3.402823466e+38f;

// ---------------------------------------------------------------------------------------------
// roi_align: the average of bilinear samples on a regular grid in each bin
// ---------------------------------------------------------------------------------------------

// One region's sampling grid.
template <typename T>
struct AlignRoi {
  T start_h, start_w, bin_h, bin_w;
  int64_t grid_h, grid_w;  // samples per bin side
};

template <typename T>
PMX_HOST_DEVICE AlignRoi<T> align_roi(const T* row, const RoiGeom& g) {
  const T scale = static_cast<T>(g.spatial_scale);
  const T offset = g.aligned ? static_cast<T>(0.5) : static_cast<T>(0);
  AlignRoi<T> a;
  a.start_w = row[1] * scale - offset;
  a.start_h = row[2] * scale - offset;
  T roi_w = row[3] * scale - offset - a.start_w;
  T roi_h = row[4] * scale - offset - a.start_h;
  if (!g.aligned) {  // without alignment a malformed region is taken as 1 x 1
    roi_w = roi_w > T(1) ? roi_w : T(1);
    roi_h = roi_h > T(1) ? roi_h : T(1);
  }
  a.bin_h = roi_h / static_cast<T>(g.pooled_h);
  a.bin_w = roi_w / static_cast<T>(g.pooled_w);
  a.grid_h = g.sample_ratio > 0 ? g.sample_ratio
                                : static_cast<int64_t>(ceil(roi_h / static_cast<T>(g.pooled_h)));
  a.grid_w = g.sample_ratio > 0 ? g.sample_ratio
                                : static_cast<int64_t>(ceil(roi_w / static_cast<T>(g.pooled_w)));
  return a;
}

// The four pixels (offsets in the plane) and weights of a bilinear sample at (y, x). A sample
// more than one pixel outside the map has zero weights (pos -1); coordinates in (-1, 0] read
// the border, and those past the last row or column clamp to it.
template <typename T>
struct Bilinear {
  int64_t pos[4];
  T w[4];
};

template <typename T>
PMX_HOST_DEVICE Bilinear<T> bilinear(T y, T x, int64_t height, int64_t width) {
  Bilinear<T> s;
  if (y < T(-1) || y > static_cast<T>(height) || x < T(-1) || x > static_cast<T>(width)) {
    for (int k = 0; k < 4; ++k) {
      s.pos[k] = -1;
      s.w[k] = T(0);
    }
    return s;
  }
  if (y <= T(0)) y = T(0);
  if (x <= T(0)) x = T(0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x);
  int64_t y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<T>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<T>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const T ly = y - static_cast<T>(y_low), lx = x - static_cast<T>(x_low);
  const T hy = T(1) - ly, hx = T(1) - lx;
  s.pos[0] = y_low * width + x_low;
  s.pos[1] = y_low * width + x_high;
  s.pos[2] = y_high * width + x_low;
  s.pos[3] = y_high * width + x_high;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

// Sample (iy, ix) of bin (ph, pw).
template <typename T>
PMX_HOST_DEVICE T sample_y(const AlignRoi<T>& a, int64_t ph, int64_t iy) {
  return a.start_h + static_cast<T>(ph) * a.bin_h +
         (static_cast<T>(iy) + static_cast<T>(0.5)) * a.bin_h / static_cast<T>(a.grid_h);
}
template <typename T>
PMX_HOST_DEVICE T sample_x(const AlignRoi<T>& a, int64_t pw, int64_t ix) {
  return a.start_w + static_cast<T>(pw) * a.bin_w +
         (static_cast<T>(ix) + static_cast<T>(0.5)) * a.bin_w / static_cast<T>(a.grid_w);
}

// The data channel that output channel c reads in bin (ph, pw).
PMX_HOST_DEVICE int64_t align_channel(const RoiGeom& g, int64_t c, int64_t ph, int64_t pw) {
  return g.position_sensitive ? (c * g.pooled_h + ph) * g.pooled_w + pw : c;
}

}  // namespace roi
}  // namespace pymx
