// Pooling, 1-D/2-D/3-D, channel-first layouts (NCW / NCHW / NCDHW).
//
// | op                | inputs               | outputs    | attrs |
// |-------------------|----------------------|------------|-------|
// | pooling           | data                 | out        | kernel pool_type global_pool pooling_convention stride pad count_include_pad layout cudnn_off |
// | pooling_backward  | out_grad, data, out  | data_grad  | same as forward |
//
// pool_type: max (default), avg, sum. stride defaults to 1 and pad to 0 per spatial dim (MXNet's
// op defaults; Gluon's MaxPool2D passes stride = pool size). global_pool: the kernel is the whole
// input, pad 0, output 1 per spatial dim. Output extent: valid: (in + 2*pad - kernel) / stride + 1;
// full: ceil((in + 2*pad - kernel) / stride) + 1.
// Windows are clipped to the input (padding never wins a max). avg divides by the window clipped
// to the padded input when count_include_pad (default), else by the window clipped to the input.
// Backward: max sends each output gradient to the first position (row-major) in its window equal
// to the output value, as MXNet's unpool does; avg spreads it evenly; sum copies it.
// cudnn_off (MXNet's): True keeps the GPU kernel off cuDNN (cuda/src/cudnn_pooling.cc); the CPU
// kernel only validates it.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "ops/max_pool_2d.h"
#include "ops/nn_common.h"
#include "ops/pool_geometry.h"
#include "ops/through_float.h"
#include "parallel.h"

namespace pymx {
namespace {

using nn::PoolGeom;
using nn::PoolType;

Shape out_shape(const Shape& data, const PoolGeom& g) {
  Shape o = {data[0], data[1]};
  for (int i = 3 - g.nsp; i < 3; ++i) o.push_back(g.out[i]);
  return o;
}

void pool_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const PoolGeom g = nn::pool_geometry(attrs, in[0]);
  nn::cudnn_off(attrs);  // validates it
  nn::check_float(dt[0], "pooling", "data");
  *out = {out_shape(in[0], g)};
  *out_dt = {dt[0]};
}

// One window along one dimension: [lo, hi) clipped to the input, and its divisor extent.
struct Span {
  int64_t lo, hi, padded;
};
inline Span window(const PoolGeom& g, int dim, int64_t o) {
  const int64_t start = o * g.s[dim] - g.p[dim];
  const int64_t end = std::min(start + g.k[dim], g.in[dim] + g.p[dim]);
  return {std::max<int64_t>(start, 0), std::min(end, g.in[dim]), end - start};
}

// Calls fn(out_index, z, y, x spans) for every output position of one plane.
template <typename Fn>
void for_each_window(const PoolGeom& g, Fn fn) {
  for (int64_t oz = 0; oz < g.out[0]; ++oz) {
    const Span z = window(g, 0, oz);
    for (int64_t oy = 0; oy < g.out[1]; ++oy) {
      const Span y = window(g, 1, oy);
      for (int64_t ox = 0; ox < g.out[2]; ++ox) {
        fn((oz * g.out[1] + oy) * g.out[2] + ox, z, y, window(g, 2, ox));
      }
    }
  }
}

template <typename T>
T divisor(const PoolGeom& g, const Span& z, const Span& y, const Span& x) {
  if (g.type == PoolType::kSum) return T(1);
  if (g.count_include_pad) return static_cast<T>(z.padded * y.padded * x.padded);
  return static_cast<T>((z.hi - z.lo) * (y.hi - y.lo) * (x.hi - x.lo));
}

// Note [Separable max pooling]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Max over a kh x kw window = max over kw columns of (max over kh rows). For each output row we
// first take the elementwise max of its kh input rows (contiguous, vectorisable), then the max of
// each run of kw neighbours in that row (log2(kw) more vectorisable passes, in place), and pick
// every stride-th: a few cheap passes over a row instead of kh * kw scalar compares per output.
// Only windows clipped by the right edge ('full' convention) take the scalar path. `row` is
// scratch of in_width elements. Float planes that max_pool_2d.h's kernels handle (LeafNetwork's
// stride 2) go there instead; they keep this order of maxima.
template <typename T>
void max_pool_2d_plane(const PoolGeom& g, const T* x, T* y, T* row) {
  const int64_t W = g.in[2], kw = g.k[2], sx = g.s[2];
  const int64_t full_width = W - kw + 1;  // positions i whose window [i, i + kw) fits in the row
  for (int64_t oy = 0; oy < g.out[1]; ++oy) {
    const Span ys = window(g, 1, oy);
    std::copy(x + ys.lo * W, x + ys.lo * W + W, row);
    for (int64_t iy = ys.lo + 1; iy < ys.hi; ++iy) {
      const T* src = x + iy * W;
      for (int64_t i = 0; i < W; ++i) row[i] = src[i] > row[i] ? src[i] : row[i];
    }
    T* dst = y + oy * g.out[2];
    int64_t ox = 0;
    if (full_width > 0) {
      // Scalar tails first: they read row[] before the in-place passes below overwrite it.
      int64_t first_clipped = (full_width - 1) / sx + 1;
      for (int64_t o = first_clipped; o < g.out[2]; ++o) {
        const Span xs = window(g, 2, o);
        T m = row[xs.lo];
        for (int64_t i = xs.lo + 1; i < xs.hi; ++i) m = row[i] > m ? row[i] : m;
        dst[o] = m;
      }
      // Doubling: while row[i] holds the max of row[i, i + w) (for every i where that fits),
      // max(row[i], row[i + d]) with d <= w holds that of [i, i + w + d). Ascending i reads only
      // cells not yet updated in this pass.
      for (int64_t w = 1; w < kw;) {
        const int64_t d = std::min(w, kw - w);
        const int64_t fits = W - (w + d) + 1;
        for (int64_t i = 0; i < fits; ++i) row[i] = row[i + d] > row[i] ? row[i + d] : row[i];
        w += d;
      }
      for (; ox < first_clipped; ++ox) dst[ox] = row[ox * sx];
      continue;
    }
    for (; ox < g.out[2]; ++ox) {
      const Span xs = window(g, 2, ox);
      T m = row[xs.lo];
      for (int64_t i = xs.lo + 1; i < xs.hi; ++i) m = row[i] > m ? row[i] : m;
      dst[ox] = m;
    }
  }
}

// Planes per parallel chunk: a LeafNetwork plane is 4-64 KiB, so a few pay for a hand-off.
constexpr int64_t kPlaneGrain = 4;

#if defined(__SSE2__)
// Calls fn(plane, scratch) for every plane, in parallel; each part of the planes has its own
// scratch of max_pool_f32_scratch(g) floats for max_pool_2d.h's kernels.
template <typename Fn>
void for_each_plane_with_scratch(const OpContext& ctx, const PoolGeom& g, Fn fn) {
  const int64_t scratch_size = nn::max_pool_f32_scratch(g);
  const int64_t parts = parallel_parts(g.planes, kPlaneGrain);
  float* scratch = static_cast<float*>(ctx.workspace(parts * scratch_size * sizeof(float)));
  parallel_for_parts(g.planes, kPlaneGrain, [&](int64_t part, int64_t first, int64_t last) {
    for (int64_t plane = first; plane < last; ++plane) fn(plane, scratch + part * scratch_size);
  });
}

// Float max pooling with max_pool_2d.h's kernels.
void simd_max_pool_forward(const OpContext& ctx, const PoolGeom& g, const float* x, float* y) {
  const nn::SimdLevel level = nn::max_pool_simd_level();
  for_each_plane_with_scratch(ctx, g, [&](int64_t plane, float* scratch) {
    nn::max_pool_forward_f32(level, g, x + plane * g.in_sp, y + plane * g.out_sp, scratch);
  });
}

void simd_max_pool_backward(const OpContext& ctx, const PoolGeom& g, const float* dy,
                            const float* x, const float* y, float* dx) {
  const nn::SimdLevel level = nn::max_pool_simd_level();
  for_each_plane_with_scratch(ctx, g, [&](int64_t plane, float* scratch) {
    const int64_t in = plane * g.in_sp, out = plane * g.out_sp;
    nn::max_pool_backward_f32(level, g, dy + out, x + in, y + out, dx + in, scratch);
  });
}
#endif

template <typename T>
void pool_forward_typed(const OpContext& ctx, const PoolGeom& g, const T* x, T* y) {
#if defined(__SSE2__)
  if constexpr (std::is_same<T, float>::value) {
    if (nn::max_pool_forward_f32_handles(g)) return simd_max_pool_forward(ctx, g, x, y);
  }
#endif
  const bool separable = g.type == PoolType::kMax && g.nsp <= 2 && g.p[1] == 0 && g.p[2] == 0;
  // One scratch row per part (threads must not share it).
  const int64_t parts = parallel_parts(g.planes, kPlaneGrain);
  T* rows = separable ? static_cast<T*>(ctx.workspace(parts * g.in[2] * sizeof(T))) : nullptr;
  parallel_for_parts(g.planes, kPlaneGrain, [&](int64_t part, int64_t first, int64_t last) {
    for (int64_t plane = first; plane < last; ++plane) {
      const T* xp = x + plane * g.in_sp;
      T* yp = y + plane * g.out_sp;
      if (separable) {
        max_pool_2d_plane(g, xp, yp, rows + part * g.in[2]);
        continue;
      }
      for_each_window(g, [&](int64_t o, const Span& z, const Span& ys, const Span& xs) {
        T acc = g.type == PoolType::kMax ? -std::numeric_limits<T>::infinity() : T(0);
        for (int64_t iz = z.lo; iz < z.hi; ++iz)
          for (int64_t iy = ys.lo; iy < ys.hi; ++iy)
            for (int64_t ix = xs.lo; ix < xs.hi; ++ix) {
              const T v = xp[(iz * g.in[1] + iy) * g.in[2] + ix];
              acc = g.type == PoolType::kMax ? (v > acc ? v : acc) : acc + v;
            }
        if (g.type != PoolType::kMax) acc /= divisor<T>(g, z, ys, xs);
        yp[o] = static_cast<T>(acc);
      });
    }
  });
}

void pool_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const PoolGeom g = nn::pool_geometry(*ctx.attrs, in[0].shape);
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T,
                   { pool_forward_typed<T>(ctx, g, in[0].data<T>(), out[0].data<T>()); });
}

void pool_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                         const std::vector<DType>& dt, std::vector<Shape>* out,
                         std::vector<DType>* out_dt) {
  const PoolGeom g = nn::pool_geometry(attrs, in[1]);
  nn::cudnn_off(attrs);  // validates it
  const Shape o = out_shape(in[1], g);
  PMX_CHECK(in[0] == o && in[2] == o, "pooling_backward: out_grad ", shape_str(in[0]), " and out ",
            shape_str(in[2]), " must have the output shape ", shape_str(o));
  nn::check_same_float(dt, "pooling_backward");
  *out = {in[1]};
  *out_dt = {dt[1]};
}

template <typename T>
void pool_backward_typed(const OpContext& ctx, const PoolGeom& g, const T* dy, const T* x,
                         const T* y, T* dx) {
#if defined(__SSE2__)
  if constexpr (std::is_same<T, float>::value) {
    if (nn::max_pool_backward_f32_handles(nn::max_pool_simd_level(), g)) {
      return simd_max_pool_backward(ctx, g, dy, x, y, dx);
    }
  }
#endif
  // Planes are independent (each writes only its own dx plane), so they run in parallel.
  parallel_for(0, g.planes, kPlaneGrain, [&](int64_t first, int64_t last) {
    for (int64_t plane = first; plane < last; ++plane) {
      const T* xp = x + plane * g.in_sp;
      const T* yp = y + plane * g.out_sp;
      const T* dyp = dy + plane * g.out_sp;
      T* dxp = dx + plane * g.in_sp;
      // Zeroed plane by plane, just before the scatter: zeroing a whole chunk first evicted the
      // planes from the cache before the scatter came back to them.
      std::fill(dxp, dxp + g.in_sp, T(0));
      for_each_window(g, [&](int64_t o, const Span& z, const Span& ys, const Span& xs) {
        if (g.type == PoolType::kMax) {
          for (int64_t iz = z.lo; iz < z.hi; ++iz)
            for (int64_t iy = ys.lo; iy < ys.hi; ++iy)
              for (int64_t ix = xs.lo; ix < xs.hi; ++ix) {
                const int64_t i = (iz * g.in[1] + iy) * g.in[2] + ix;
                if (xp[i] == yp[o]) {
                  dxp[i] += dyp[o];
                  return;
                }
              }
          return;
        }
        const T share = dyp[o] / divisor<T>(g, z, ys, xs);
        for (int64_t iz = z.lo; iz < z.hi; ++iz)
          for (int64_t iy = ys.lo; iy < ys.hi; ++iy)
            for (int64_t ix = xs.lo; ix < xs.hi; ++ix) {
              T& d = dxp[(iz * g.in[1] + iy) * g.in[2] + ix];
              d += share;
            }
      });
    }
  });
}

void pool_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const PoolGeom g = nn::pool_geometry(*ctx.attrs, in[1].shape);
  PMX_FLOAT_WIDE_SWITCH(in[1].dtype, T, {
    pool_backward_typed<T>(ctx, g, in[0].data<T>(), in[1].data<T>(), in[2].data<T>(),
                           out[0].data<T>());
  });
}

std::vector<NDArray> pool_gradient(const GradContext& ctx) {
  return invoke("pooling_backward", {ctx.out_grads[0], ctx.inputs[0], ctx.outputs[0]}, ctx.attrs);
}

PMX_REGISTER_OP(pooling)
    .set_num_inputs(1)
    .set_infer(pool_infer)
    .set_cpu(nn::through_float(pool_forward))
    .set_gradient(pool_gradient);

PMX_REGISTER_OP(pooling_backward)
    .set_num_inputs(3)
    .set_infer(pool_backward_infer)
    .set_cpu(nn::through_float(pool_backward));

}  // namespace
}  // namespace pymx
