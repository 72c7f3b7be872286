// roi_pooling and roi_align on GPUs, forward and backward (CPU definitions, attributes and the
// maths: engine/src/ops/roi.cc and roi_geometry.h). float16 and bfloat16 compute in float.
//
// | op                                       | inputs                 | outputs     |
// |------------------------------------------|------------------------|-------------|
// | roi_pooling                              | data, rois             | out, argmax |
// | roi_pooling_backward                     | out_grad, argmax, rois | data_grad   |
// | roi_align                                | data, rois             | out         |
// | roi_align_backward                       | out_grad, rois         | data_grad   |
//
// The forwards take a thread per output element. The rois are copied to the host first, to check
// their batch indices (the error names the row); they are few. The backwards add each output's
// gradient into its pixels with atomic adds in the compute type (float for 16-bit floats, into a
// float buffer rounded once at the end), whose order varies from run to run; in the
// deterministic mode (Note [Deterministic mode]) a thread per channel adds the regions in order,
// as the CPU does.
#include <algorithm>
#include <vector>

#include "determinism.h"
#include "kernel_util.cuh"
#include "launch.h"
#include "ops/roi_geometry.h"

namespace pymx {
namespace gpu {
namespace {

using roi::RoiGeom;

// A rois row in the compute type.
template <typename T>
struct Row {
  AccT<T> v[5];
  __device__ explicit Row(const T* rois, int64_t r) {
    for (int k = 0; k < 5; ++k) v[k] = convert<AccT<T>>(rois[r * 5 + k]);
  }
  __device__ int64_t batch() const { return static_cast<int64_t>(v[0]); }
};

// Copies rois to the host (through `scratch`, R * 5 doubles of device memory) and checks them.
void check_rois_on_host(const OpContext& ctx, const TBlob& rois, const RoiGeom& g, bool align,
                        double* scratch, const char* op) {
  if (g.num_rois == 0) return;
  std::vector<double> host(static_cast<size_t>(rois.size()));
  cast_blob(rois, TBlob{scratch, rois.shape, DType::kFloat64, rois.device}, ctx.run.stream);
  PMX_CUDA_CHECK(cudaMemcpyAsync(host.data(), scratch, host.size() * sizeof(double),
                                 cudaMemcpyDeviceToHost, stream_of(ctx)));
  PMX_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
  roi::check_rois(host.data(), g, align, op);
}

// The device scratch of a kernel run: the rois as doubles, then (for a 16-bit backward) a float
// accumulator of data_grad's size.
struct Scratch {
  double* rois;
  float* acc;
};

Scratch take_scratch(const OpContext& ctx, const TBlob& rois, int64_t acc_elems) {
  const size_t rois_bytes = workspace_aligned(std::max<int64_t>(rois.size(), 1) * sizeof(double));
  char* ws = static_cast<char*>(ctx.workspace(rois_bytes + acc_elems * sizeof(float)));
  return {reinterpret_cast<double*>(ws), reinterpret_cast<float*>(ws + rois_bytes)};
}

// ---------------------------------------------------------------------------------------------
// roi_pooling
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void roi_pool_kernel(const T* x, const T* rois, T* y, int64_t* argmax, RoiGeom g) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(o, g.num_rois * g.channels * g.bins()) {
    const int64_t pw = o % g.pooled_w, ph = o / g.pooled_w % g.pooled_h;
    const int64_t c = o / g.bins() % g.channels, r = o / (g.bins() * g.channels);
    const Row<T> row(rois, r);
    const roi::PixelBin b = roi::pool_bin(row.v, g, ph, pw);
    const T* plane = x + (row.batch() * g.channels + c) * g.plane();
    A best = b.empty() ? A(0) : static_cast<A>(roi::kPoolStart);
    int64_t best_at = -1;
    for (int64_t h = b.h0; h < b.h1; ++h)
      for (int64_t w = b.w0; w < b.w1; ++w) {
        const A v = convert<A>(plane[h * g.width + w]);
        if (v > best) {
          best = v;
          best_at = h * g.width + w;
        }
      }
    y[o] = convert<T>(best);
    argmax[o] = best_at;
  }
}

void roi_pooling_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                         const std::vector<TBlob>& out) {
  const RoiGeom g = roi::roi_geometry(*ctx.attrs, in[0].shape, in[1].shape, false, "roi_pooling");
  const Scratch s = take_scratch(ctx, in[1], 0);
  check_rois_on_host(ctx, in[1], g, false, s.rois, "roi_pooling");
  const int64_t n = out[0].size();
  if (n == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    roi_pool_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), out[0].data<T>(), out[1].data<int64_t>(), g);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// A thread per output: its gradient to the pixel it took.
template <typename T, typename A>
__global__ void roi_pool_grad_atomic_kernel(const T* dy, const int64_t* argmax, const T* rois,
                                            A* dx, RoiGeom g) {
  PMX_GRID_STRIDE_LOOP(o, g.num_rois * g.channels * g.bins()) {
    if (argmax[o] < 0) continue;
    const int64_t c = o / g.bins() % g.channels, r = o / (g.bins() * g.channels);
    const int64_t batch = Row<T>(rois, r).batch();
    atomicAdd(dx + (batch * g.channels + c) * g.plane() + argmax[o], convert<A>(dy[o]));
  }
}

// A thread per channel, adding the regions in order (the deterministic mode).
template <typename T, typename A>
__global__ void roi_pool_grad_ordered_kernel(const T* dy, const int64_t* argmax, const T* rois,
                                             A* dx, RoiGeom g) {
  PMX_GRID_STRIDE_LOOP(c, g.channels) {
    for (int64_t r = 0; r < g.num_rois; ++r) {
      A* plane = dx + (Row<T>(rois, r).batch() * g.channels + c) * g.plane();
      const int64_t first = (r * g.channels + c) * g.bins();
      for (int64_t k = 0; k < g.bins(); ++k)
        if (argmax[first + k] >= 0) plane[argmax[first + k]] += convert<A>(dy[first + k]);
    }
  }
}

// Runs `launch(acc)` with acc the zeroed accumulator of data_grad (out itself, or for 16-bit
// floats the float buffer of `s`, rounded into out afterwards).
template <typename T, typename Launch>
void accumulate_into(const OpContext& ctx, const TBlob& out, const Scratch& s, Launch launch) {
  using A = AccT<T>;
  A* acc = kIs16BitFloat<T> ? reinterpret_cast<A*>(s.acc) : reinterpret_cast<A*>(out.dptr);
  PMX_CUDA_CHECK(cudaMemsetAsync(acc, 0, out.size() * sizeof(A), stream_of(ctx)));
  launch(acc);
  PMX_KERNEL_LAUNCH_CHECK();
  if (kIs16BitFloat<T>)
    cast_blob(TBlob{acc, out.shape, DType::kFloat32, out.device}, out, ctx.run.stream);
}

void roi_pooling_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                                  const std::vector<TBlob>& out) {
  const char* op = "roi_pooling_backward";
  const RoiGeom g = roi::roi_geometry(*ctx.attrs, out[0].shape, in[2].shape, false, op);
  if (out[0].size() == 0) return;
  const bool half = is_16bit_float(out[0].dtype);
  const Scratch s = take_scratch(ctx, in[2], half ? out[0].size() : 0);
  check_rois_on_host(ctx, in[2], g, false, s.rois, op);
  const bool ordered = deterministic();
  const int64_t n = in[0].size();
  PMX_GPU_FLOAT_SWITCH(out[0].dtype, T, {
    accumulate_into<T>(ctx, out[0], s, [&](AccT<T>* acc) {
      if (n == 0) return;
      if (ordered) {
        roi_pool_grad_ordered_kernel<T><<<grid_for(g.channels), kBlock, 0, stream_of(ctx)>>>(
            in[0].data<T>(), in[1].data<int64_t>(), in[2].data<T>(), acc, g);
      } else {
        roi_pool_grad_atomic_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
            in[0].data<T>(), in[1].data<int64_t>(), in[2].data<T>(), acc, g);
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// roi_align
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void roi_align_kernel(const T* x, const T* rois, T* y, RoiGeom g) {
  using A = AccT<T>;
  const int64_t channels = g.out_channels();
  PMX_GRID_STRIDE_LOOP(o, g.num_rois * channels * g.bins()) {
    const int64_t pw = o % g.pooled_w, ph = o / g.pooled_w % g.pooled_h;
    const int64_t c = o / g.bins() % channels, r = o / (g.bins() * channels);
    const Row<T> row(rois, r);
    if (row.batch() < 0) {  // a skipped region
      y[o] = convert<T>(A(0));
      continue;
    }
    const roi::AlignRoi<A> a = roi::align_roi(row.v, g);
    const T* plane = x + (row.batch() * g.channels + roi::align_channel(g, c, ph, pw)) * g.plane();
    A sum = A(0);
    for (int64_t iy = 0; iy < a.grid_h; ++iy) {
      const A sy = roi::sample_y(a, ph, iy);
      for (int64_t ix = 0; ix < a.grid_w; ++ix) {
        const roi::Bilinear<A> s = roi::bilinear(sy, roi::sample_x(a, pw, ix), g.height, g.width);
        if (s.pos[0] < 0) continue;
        sum += s.w[0] * convert<A>(plane[s.pos[0]]) + s.w[1] * convert<A>(plane[s.pos[1]]) +
               s.w[2] * convert<A>(plane[s.pos[2]]) + s.w[3] * convert<A>(plane[s.pos[3]]);
      }
    }
    y[o] = convert<T>(sum / static_cast<A>(a.grid_h * a.grid_w));
  }
}

void roi_align_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out) {
  const RoiGeom g = roi::roi_geometry(*ctx.attrs, in[0].shape, in[1].shape, true, "roi_align");
  const Scratch s = take_scratch(ctx, in[1], 0);
  check_rois_on_host(ctx, in[1], g, true, s.rois, "roi_align");
  const int64_t n = out[0].size();
  if (n == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    roi_align_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), out[0].data<T>(), g);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// Adds output o's gradient (bin (ph, pw) of output channel c of region `row`) to its samples'
// pixels; `add(pointer, value)` is an atomic or a plain add.
template <typename T, typename A, typename Add>
__device__ void align_grad_bin(const Row<T>& row, int64_t c, int64_t ph, int64_t pw, A grad,
                               A* dx, const RoiGeom& g, Add add) {
  const roi::AlignRoi<A> a = roi::align_roi(row.v, g);
  const A count = static_cast<A>(a.grid_h * a.grid_w);
  A* plane = dx + (row.batch() * g.channels + roi::align_channel(g, c, ph, pw)) * g.plane();
  for (int64_t iy = 0; iy < a.grid_h; ++iy) {
    const A sy = roi::sample_y(a, ph, iy);
    for (int64_t ix = 0; ix < a.grid_w; ++ix) {
      const roi::Bilinear<A> s = roi::bilinear(sy, roi::sample_x(a, pw, ix), g.height, g.width);
      if (s.pos[0] < 0) continue;
      for (int k = 0; k < 4; ++k) add(plane + s.pos[k], grad * s.w[k] / count);
    }
  }
}

template <typename T, typename A>
__global__ void roi_align_grad_atomic_kernel(const T* dy, const T* rois, A* dx, RoiGeom g) {
  const int64_t channels = g.out_channels();
  PMX_GRID_STRIDE_LOOP(o, g.num_rois * channels * g.bins()) {
    const int64_t pw = o % g.pooled_w, ph = o / g.pooled_w % g.pooled_h;
    const int64_t c = o / g.bins() % channels, r = o / (g.bins() * channels);
    const Row<T> row(rois, r);
    if (row.batch() < 0) continue;
    align_grad_bin(row, c, ph, pw, convert<A>(dy[o]), dx, g,
                   [](A* p, A v) { atomicAdd(p, v); });
  }
}

// A thread per output channel (its planes are its own, see roi.cc), regions in order.
template <typename T, typename A>
__global__ void roi_align_grad_ordered_kernel(const T* dy, const T* rois, A* dx, RoiGeom g) {
  const int64_t channels = g.out_channels();
  PMX_GRID_STRIDE_LOOP(c, channels) {
    for (int64_t r = 0; r < g.num_rois; ++r) {
      const Row<T> row(rois, r);
      if (row.batch() < 0) continue;
      for (int64_t ph = 0; ph < g.pooled_h; ++ph)
        for (int64_t pw = 0; pw < g.pooled_w; ++pw)
          align_grad_bin(row, c, ph, pw,
                         convert<A>(dy[(r * channels + c) * g.bins() + ph * g.pooled_w + pw]),
                         dx, g, [](A* p, A v) { *p += v; });
    }
  }
}

void roi_align_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                                const std::vector<TBlob>& out) {
  const char* op = "roi_align_backward";
  const RoiGeom g = roi::roi_geometry(*ctx.attrs, out[0].shape, in[1].shape, true, op);
  if (out[0].size() == 0) return;
  const bool half = is_16bit_float(out[0].dtype);
  const Scratch s = take_scratch(ctx, in[1], half ? out[0].size() : 0);
  check_rois_on_host(ctx, in[1], g, true, s.rois, op);
  const bool ordered = deterministic();
  const int64_t n = in[0].size();
  PMX_GPU_FLOAT_SWITCH(out[0].dtype, T, {
    accumulate_into<T>(ctx, out[0], s, [&](AccT<T>* acc) {
      if (n == 0) return;
      if (ordered) {
        roi_align_grad_ordered_kernel<T><<<grid_for(g.out_channels()), kBlock, 0,
                                           stream_of(ctx)>>>(in[0].data<T>(), in[1].data<T>(),
                                                             acc, g);
      } else {
        roi_align_grad_atomic_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
            in[0].data<T>(), in[1].data<T>(), acc, g);
      }
    });
  });
}

const bool registered = [] {
  op_registry::get_or_create("roi_pooling").set_gpu(roi_pooling_compute);
  op_registry::get_or_create("roi_pooling_backward").set_gpu(roi_pooling_backward_compute);
  op_registry::get_or_create("roi_align").set_gpu(roi_align_compute);
  op_registry::get_or_create("roi_align_backward").set_gpu(roi_align_backward_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
