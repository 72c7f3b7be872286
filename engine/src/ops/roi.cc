// Region-of-interest pooling (MXNet's ROIPooling, npx.roi_pooling) and ROI Align (MXNet's
// contrib ROIAlign, npx.roi_align). The bin geometry is in roi_geometry.h.
//
// | op                    | inputs                   | outputs          | attrs |
// |-----------------------|--------------------------|------------------|-------|
// | roi_pooling           | data, rois               | out, argmax      | pooled_size (h, w), spatial_scale |
// | roi_pooling_backward  | out_grad, argmax, rois   | data_grad        | the same, data_shape |
// | roi_align             | data, rois               | out              | pooled_size, spatial_scale, sample_ratio (-1), position_sensitive (False), aligned (False) |
// | roi_align_backward    | out_grad, rois           | data_grad        | the same, data_shape |
//
// data is (N, C, H, W), rois (R, 5) rows [batch_index, x1, y1, x2, y2] of data's float dtype;
// out is (R, C, pooled_h, pooled_w) (C / (pooled_h * pooled_w) channels with
// position_sensitive). argmax (int64, out's shape) holds the offset in its H x W plane of the
// pixel each output took, -1 for none; it is hidden from Python and routes the gradient: each
// output's gradient goes to that pixel (summed over the bins and regions that took it), none to
// rois. roi_align's gradient spreads each output's gradient over its samples' four pixels with
// their bilinear weights, divided by the samples per bin.
// A batch index outside [0, N) is an error (roi_align skips a negative one: its output is 0); it
// is found when the kernel runs, so it surfaces at the next wait. 16-bit floats compute in float
// (through_float.h).
#include <algorithm>
#include <vector>

#include "ops/elemwise.h"
#include "ops/nn_common.h"
#include "ops/roi_geometry.h"
#include "ops/through_float.h"
#include "parallel.h"

namespace pymx {
namespace {

using roi::RoiGeom;

void check_float_pair(const std::vector<DType>& dt, const char* op) {
  nn::check_float(dt[0], op, "data");
  if (dt[1] != dt[0])
    PMX_THROW(Status::kType, op, ": rois has dtype ", dtype_name(dt[1]), " but data has dtype ",
              dtype_name(dt[0]), "; they must match");
}

Shape out_shape(const RoiGeom& g) { return {g.num_rois, g.out_channels(), g.pooled_h, g.pooled_w}; }

// ---------------------------------------------------------------------------------------------
// roi_pooling
// ---------------------------------------------------------------------------------------------
void roi_pooling_infer(const Attrs& attrs, const std::vector<Shape>& in,
                       const std::vector<DType>& dt, std::vector<Shape>* out,
                       std::vector<DType>* out_dt) {
  const RoiGeom g = roi::roi_geometry(attrs, in[0], in[1], false, "roi_pooling");
  check_float_pair(dt, "roi_pooling");
  *out = {out_shape(g), out_shape(g)};
  *out_dt = {dt[0], DType::kInt64};
}

template <typename T>
void roi_pooling_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out) {
  const RoiGeom g = roi::roi_geometry(*ctx.attrs, in[0].shape, in[1].shape, false, "roi_pooling");
  const T* x = in[0].data<T>();
  const T* rois = in[1].data<T>();
  roi::check_rois(rois, g, false, "roi_pooling");
  T* y = out[0].data<T>();
  int64_t* argmax = out[1].data<int64_t>();
  const int64_t bins = g.bins();
  // Every (region, channel) writes its own bins.
  parallel_for(0, g.num_rois * g.channels, std::max<int64_t>(1, 4096 / std::max<int64_t>(bins, 1)),
               [&](int64_t lo, int64_t hi) {
    for (int64_t rc = lo; rc < hi; ++rc) {
      const T* row = rois + rc / g.channels * 5;
      const int64_t batch = static_cast<int64_t>(row[0]);
      const T* plane = x + (batch * g.channels + rc % g.channels) * g.plane();
      for (int64_t ph = 0; ph < g.pooled_h; ++ph)
        for (int64_t pw = 0; pw < g.pooled_w; ++pw) {
          const roi::PixelBin b = roi::pool_bin(row, g, ph, pw);
          T best = b.empty() ? T(0) : static_cast<T>(roi::kPoolStart);
          int64_t best_at = -1;
          for (int64_t h = b.h0; h < b.h1; ++h)
            for (int64_t w = b.w0; w < b.w1; ++w)
              if (plane[h * g.width + w] > best) {  // the first of equal maxima; NaN never wins
                best = plane[h * g.width + w];
                best_at = h * g.width + w;
              }
          const int64_t o = rc * bins + ph * g.pooled_w + pw;
          y[o] = best;
          argmax[o] = best_at;
        }
    }
  });
}

void roi_pooling_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                         const std::vector<TBlob>& out) {
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, { roi_pooling_typed<T>(ctx, in, out); });
}

Shape backward_data_shape(const Attrs& attrs, const char* op) {
  const Shape data = attrs.get_shape("data_shape");
  PMX_CHECK(data.size() == 4, op, ": data_shape must be 4-d, got ", shape_str(data));
  return data;
}

void roi_pooling_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                                const std::vector<DType>& dt, std::vector<Shape>* out,
                                std::vector<DType>* out_dt) {
  const char* op = "roi_pooling_backward";
  const Shape data = backward_data_shape(attrs, op);
  const RoiGeom g = roi::roi_geometry(attrs, data, in[2], false, op);
  PMX_CHECK(in[0] == out_shape(g) && in[1] == out_shape(g), op, ": out_grad ", shape_str(in[0]),
            " and argmax ", shape_str(in[1]), " must have the output's shape ",
            shape_str(out_shape(g)));
  nn::check_float(dt[0], op, "out_grad");
  PMX_CHECK(dt[1] == DType::kInt64, op, ": argmax must be int64, got ", dtype_name(dt[1]));
  *out = {data};
  *out_dt = {dt[0]};
}

template <typename T>
void roi_pooling_backward_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                                const std::vector<TBlob>& out) {
  const char* op = "roi_pooling_backward";
  const RoiGeom g = roi::roi_geometry(*ctx.attrs, out[0].shape, in[2].shape, false, op);
  const T* dy = in[0].data<T>();
  const int64_t* argmax = in[1].data<int64_t>();
  const T* rois = in[2].data<T>();
  roi::check_rois(rois, g, false, op);
  T* dx = out[0].data<T>();
  std::fill(dx, dx + out[0].size(), T(0));
  const int64_t bins = g.bins();
  // A thread per channel: the channel's planes take only its own outputs, added region by
  // region in order, so sums do not depend on the threads.
  parallel_for(0, g.channels, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c)
      for (int64_t r = 0; r < g.num_rois; ++r) {
        T* plane = dx + (static_cast<int64_t>(rois[r * 5]) * g.channels + c) * g.plane();
        const int64_t first = (r * g.channels + c) * bins;
        for (int64_t k = 0; k < bins; ++k)
          if (argmax[first + k] >= 0) plane[argmax[first + k]] += dy[first + k];
      }
  });
}

void roi_pooling_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, { roi_pooling_backward_typed<T>(ctx, in, out); });
}

// The gradient reads rois and argmax only; data's shape goes as an attribute.
std::vector<NDArray> roi_pooling_gradient(const GradContext& ctx) {
  Attrs attrs = ctx.attrs;
  attrs.set("data_shape", ops::shape_attr(ctx.input_shapes[0]));
  NDArray dx = invoke("roi_pooling_backward", {ctx.out_grads[0], ctx.outputs[1], ctx.inputs[1]},
                      attrs)[0];
  return {dx, NDArray()};
}

// ---------------------------------------------------------------------------------------------
// roi_align
// ---------------------------------------------------------------------------------------------
void roi_align_infer(const Attrs& attrs, const std::vector<Shape>& in,
                     const std::vector<DType>& dt, std::vector<Shape>* out,
                     std::vector<DType>* out_dt) {
  const RoiGeom g = roi::roi_geometry(attrs, in[0], in[1], true, "roi_align");
  check_float_pair(dt, "roi_align");
  *out = {out_shape(g)};
  *out_dt = {dt[0]};
}

template <typename T>
void roi_align_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const RoiGeom g = roi::roi_geometry(*ctx.attrs, in[0].shape, in[1].shape, true, "roi_align");
  const T* x = in[0].data<T>();
  const T* rois = in[1].data<T>();
  roi::check_rois(rois, g, true, "roi_align");
  T* y = out[0].data<T>();
  const int64_t channels = g.out_channels(), bins = g.bins();
  parallel_for(0, g.num_rois * channels, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t rc = lo; rc < hi; ++rc) {
      const T* row = rois + rc / channels * 5;
      const int64_t batch = static_cast<int64_t>(row[0]);
      T* yr = y + rc * bins;
      if (batch < 0) {  // a skipped region
        std::fill(yr, yr + bins, T(0));
        continue;
      }
      const roi::AlignRoi<T> a = roi::align_roi(row, g);
      const T count = static_cast<T>(a.grid_h * a.grid_w);
      for (int64_t ph = 0; ph < g.pooled_h; ++ph)
        for (int64_t pw = 0; pw < g.pooled_w; ++pw) {
          const int64_t channel = roi::align_channel(g, rc % channels, ph, pw);
          const T* plane = x + (batch * g.channels + channel) * g.plane();
          T sum = 0;
          for (int64_t iy = 0; iy < a.grid_h; ++iy) {
            const T sy = roi::sample_y(a, ph, iy);
            for (int64_t ix = 0; ix < a.grid_w; ++ix) {
              const roi::Bilinear<T> s = roi::bilinear(sy, roi::sample_x(a, pw, ix), g.height,
                                                       g.width);
              if (s.pos[0] < 0) continue;
              sum += s.w[0] * plane[s.pos[0]] + s.w[1] * plane[s.pos[1]] +
                     s.w[2] * plane[s.pos[2]] + s.w[3] * plane[s.pos[3]];
            }
          }
          yr[ph * g.pooled_w + pw] = sum / count;
        }
    }
  });
}

void roi_align_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out) {
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, { roi_align_typed<T>(ctx, in, out); });
}

void roi_align_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                              const std::vector<DType>& dt, std::vector<Shape>* out,
                              std::vector<DType>* out_dt) {
  const char* op = "roi_align_backward";
  const Shape data = backward_data_shape(attrs, op);
  const RoiGeom g = roi::roi_geometry(attrs, data, in[1], true, op);
  PMX_CHECK(in[0] == out_shape(g), op, ": out_grad ", shape_str(in[0]),
            " must have the output's shape ", shape_str(out_shape(g)));
  check_float_pair(dt, op);
  *out = {data};
  *out_dt = {dt[0]};
}

template <typename T>
void roi_align_backward_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                              const std::vector<TBlob>& out) {
  const char* op = "roi_align_backward";
  const RoiGeom g = roi::roi_geometry(*ctx.attrs, out[0].shape, in[1].shape, true, op);
  const T* dy = in[0].data<T>();
  const T* rois = in[1].data<T>();
  roi::check_rois(rois, g, true, op);
  T* dx = out[0].data<T>();
  std::fill(dx, dx + out[0].size(), T(0));
  const int64_t channels = g.out_channels(), bins = g.bins();
  // A thread per output channel: with position_sensitive its bins read distinct data channels,
  // without it the channel itself, so no two threads write one plane. Each adds its regions in
  // order: sums do not depend on the threads.
  parallel_for(0, channels, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c)
      for (int64_t r = 0; r < g.num_rois; ++r) {
        const T* row = rois + r * 5;
        const int64_t batch = static_cast<int64_t>(row[0]);
        if (batch < 0) continue;
        const roi::AlignRoi<T> a = roi::align_roi(row, g);
        const T count = static_cast<T>(a.grid_h * a.grid_w);
        for (int64_t ph = 0; ph < g.pooled_h; ++ph)
          for (int64_t pw = 0; pw < g.pooled_w; ++pw) {
            T* plane = dx + (batch * g.channels + roi::align_channel(g, c, ph, pw)) * g.plane();
            const T grad = dy[(r * channels + c) * bins + ph * g.pooled_w + pw];
            for (int64_t iy = 0; iy < a.grid_h; ++iy) {
              const T sy = roi::sample_y(a, ph, iy);
              for (int64_t ix = 0; ix < a.grid_w; ++ix) {
                const roi::Bilinear<T> s = roi::bilinear(sy, roi::sample_x(a, pw, ix), g.height,
                                                         g.width);
                if (s.pos[0] < 0) continue;
                for (int k = 0; k < 4; ++k) plane[s.pos[k]] += grad * s.w[k] / count;
              }
            }
          }
      }
  });
}

void roi_align_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                        const std::vector<TBlob>& out) {
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, { roi_align_backward_typed<T>(ctx, in, out); });
}

std::vector<NDArray> roi_align_gradient(const GradContext& ctx) {
  Attrs attrs = ctx.attrs;
  attrs.set("data_shape", ops::shape_attr(ctx.input_shapes[0]));
  NDArray dx = invoke("roi_align_backward", {ctx.out_grads[0], ctx.inputs[1]}, attrs)[0];
  return {dx, NDArray()};
}

PMX_REGISTER_OP(roi_pooling)
    .set_num_inputs(2)
    .set_num_outputs(2)
    .set_infer(roi_pooling_infer)
    .set_cpu(nn::through_float(roi_pooling_forward))
    .set_gradient(roi_pooling_gradient)
    .set_grad_uses({1}, {1});

PMX_REGISTER_OP(roi_pooling_backward)
    .set_num_inputs(3)
    .set_infer(roi_pooling_backward_infer)
    .set_cpu(nn::through_float(roi_pooling_backward));

PMX_REGISTER_OP(roi_align)
    .set_num_inputs(2)
    .set_infer(roi_align_infer)
    .set_cpu(nn::through_float(roi_align_forward))
    .set_gradient(roi_align_gradient)
    .set_grad_uses({1}, {});

PMX_REGISTER_OP(roi_align_backward)
    .set_num_inputs(2)
    .set_infer(roi_align_backward_infer)
    .set_cpu(nn::through_float(roi_align_backward));

}  // namespace
}  // namespace pymx
