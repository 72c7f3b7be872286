// Convolution (im2col + cuBLAS), pooling, and fully_connected on the GPU, forward and backward
// (CPU definitions: engine/src/ops/nn_convolution.cc, nn_pooling.cc, nn_fully_connected.cc, whose
// attribute parsing and output extents are mirrored here; the convolution's geometry is shared:
// engine/src/ops/conv_geometry.h); channel-last layouts through channel-first copies (Note
// [Channel-last convolution on the GPU]); float dtypes. Convolution and pooling try their cuDNN path first (cudnn_nn.h); these kernels run
// where it declines (no cuDNN, PYMX_CUDNN=0, cudnn_off=True, configurations it does not cover).
//
// | op                        | inputs                 | outputs                             | attrs |
// |---------------------------|------------------------|-------------------------------------|-------|
// | convolution               | data, weight, [bias]   | out                                 | kernel stride dilate pad num_filter num_group no_bias layout act_type cudnn_off cudnn_tune workspace |
// | convolution_backward      | out_grad, data, weight, [out] | [data_grad], weight_grad, [bias_grad] | same, need_data_grad |
// | pooling                   | data                   | out                                 | kernel pool_type global_pool pooling_convention stride pad count_include_pad layout cudnn_off |
// | pooling_backward          | out_grad, data, out    | data_grad                           | same |
// | fully_connected           | data, weight, [bias]   | out                                 | num_hidden no_bias flatten |
// | fully_connected_backward  | out_grad, data, weight | data_grad, weight_grad, [bias_grad] | same |
//
// Note [GPU convolution: im2col over a chunk of the batch]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// im2col writes `col` as (K, B * out_sp), K = C/groups * prod(kernel) rows per group, with the
// B images of a chunk side by side in the columns. Then every product is ONE cuBLAS GEMM per
// group and chunk instead of one per image:
//   forward        Yt (out_c/g, B*out_sp) = W_g . col_g, then y = transpose(Yt) + bias;
//   weight grad    dW_g += dYt_g . col_g^T   (dYt is dy transposed the same way);
//   data grad      dcol_g = W_g^T . dYt_g, then col2im gathers dcol back into dx.
// Chunks bound the workspace (kWorkspaceBudget); col2im gathers (one thread per input element
// summing the columns that read it), so no atomics are needed.
// act_type='relu' (Note [Fused convolution + relu] in nn_convolution.cc) applies the relu in the
// untranspose + bias epilogue; the backward op masks out_grad by out > 0 while transposing it, so
// the masked dyt feeds both GEMMs and the bias sum. need_data_grad=False skips dcol and col2im.
#include <algorithm>

#include "conv_im2col.cuh"
#include "cudnn_nn.h"
#include "determinism.h"
#include "kernel_util.cuh"
#include "launch.h"
#include "ops/elemwise.h"
#include "ops/pool_geometry.h"
#include "pymx/storage.h"

namespace pymx {
namespace gpu {
namespace {

// y[b][c][o] = yt[c][b * out_sp + o] + bias[c] (bias may be null), then max(., 0) with relu.
template <typename T>
__global__ void untranspose_bias_kernel(const T* yt, const T* bias, T* y, int64_t channels,
                                        int64_t images, int64_t out_sp, bool relu) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(e, images * channels * out_sp) {
    const int64_t o = e % out_sp, c = (e / out_sp) % channels, b = e / (out_sp * channels);
    A v = convert<A>(yt[c * images * out_sp + b * out_sp + o]);
    if (bias) v += convert<A>(bias[c]);
    if (relu && v < A(0)) v = A(0);  // max(v, 0) as on the CPU: NaN stays NaN
    y[e] = convert<T>(v);
  }
}

// dyt[c][b * out_sp + o] = dy[b][c][o], or 0 where the relu output y (when given) is not positive.
template <typename T>
__global__ void transpose_dy_kernel(const T* dy, const T* y, T* dyt, int64_t channels,
                                    int64_t images, int64_t out_sp) {
  PMX_GRID_STRIDE_LOOP(e, images * channels * out_sp) {
    const int64_t o = e % out_sp, c = (e / out_sp) % channels, b = e / (out_sp * channels);
    const bool keep = !y || convert<AccT<T>>(y[e]) > AccT<T>(0);
    dyt[c * images * out_sp + b * out_sp + o] = keep ? dy[e] : convert<T>(0.0f);
  }
}

// out[r] (+)= sum of row r of a (rows, width) matrix: a block per row.
template <typename T>
__global__ void row_sum_kernel(const T* m, T* out, int64_t rows, int64_t width, bool accumulate) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < width; j += kBlock) sum += convert<double>(m[r * width + j]);
    sum = group_reduce(sum, kBlock, [](double a, double b) { return a + b; });
    if (threadIdx.x == 0) out[r] = convert<T>(accumulate ? sum + convert<double>(out[r]) : sum);
  }
}

unsigned rows_grid(int64_t rows) { return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(rows, 65535))); }

template <typename T>
void conv_forward_typed(const OpContext& ctx, const ConvGeometry& g,
                        const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t K = g.col_rows();
  const size_t per_image = (g.in_c * g.k_sp + g.out_c) * g.out_sp * sizeof(T);
  const int64_t chunk = chunk_images(g.batch, per_image);
  T* col = static_cast<T*>(ctx.workspace(chunk * per_image));
  T* yt = col + g.in_c * g.k_sp * chunk * g.out_sp;
  const T* bias = in.size() == 3 ? in[2].data<T>() : nullptr;
  const bool relu = nn::conv_fused_relu(*ctx.attrs);
  cudaStream_t s = stream_of(ctx);
  for (int64_t b0 = 0; b0 < g.batch; b0 += chunk) {
    const int64_t B = std::min(chunk, g.batch - b0), width = B * g.out_sp;
    im2col_kernel<T><<<grid_for(g.in_c * g.k_sp * width), kBlock, 0, s>>>(
        in[0].data<T>() + b0 * g.in_c * g.in_sp, col, g, B);
    PMX_KERNEL_LAUNCH_CHECK();
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      gemm(ctx, in[0].dtype, false, false, g.out_cg(), width, K, 1.0,
           in[1].data<T>() + grp * g.out_cg() * K, K, col + grp * K * width, width, 0.0,
           yt + grp * g.out_cg() * width, width);
    }
    untranspose_bias_kernel<T><<<grid_for(B * g.out_c * g.out_sp), kBlock, 0, s>>>(
        yt, bias, out[0].data<T>() + b0 * g.out_c * g.out_sp, g.out_c, B, g.out_sp, relu);
    PMX_KERNEL_LAUNCH_CHECK();
  }
}

template <typename T>
void conv_backward_typed(const OpContext& ctx, const ConvGeometry& g,
                         const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t K = g.col_rows();
  const size_t per_image = (2 * g.in_c * g.k_sp + g.out_c) * g.out_sp * sizeof(T);
  const int64_t chunk = chunk_images(g.batch, per_image);
  T* col = static_cast<T*>(ctx.workspace(chunk * per_image));
  T* dcol = col + g.in_c * g.k_sp * chunk * g.out_sp;
  T* dyt = dcol + g.in_c * g.k_sp * chunk * g.out_sp;
  const T* relu_out = in.size() == 4 ? in[3].data<T>() : nullptr;
  const bool want_dx = nn::need_data_grad(*ctx.attrs);
  const TBlob& dw = out[want_dx ? 1 : 0];
  const TBlob* db = out.size() == (want_dx ? 3u : 2u) ? &out.back() : nullptr;
  cudaStream_t s = stream_of(ctx);
  if (g.batch == 0) {
    fill_blob(dw, 0.0, s);
    if (db) fill_blob(*db, 0.0, s);
    return;
  }
  for (int64_t b0 = 0; b0 < g.batch; b0 += chunk) {
    const int64_t B = std::min(chunk, g.batch - b0), width = B * g.out_sp;
    const double beta = b0 == 0 ? 0.0 : 1.0;  // weight/bias grads accumulate over chunks
    const int64_t y_off = b0 * g.out_c * g.out_sp;
    transpose_dy_kernel<T><<<grid_for(B * g.out_c * g.out_sp), kBlock, 0, s>>>(
        in[0].data<T>() + y_off, relu_out ? relu_out + y_off : nullptr, dyt, g.out_c, B,
        g.out_sp);
    PMX_KERNEL_LAUNCH_CHECK();
    im2col_kernel<T><<<grid_for(g.in_c * g.k_sp * width), kBlock, 0, s>>>(
        in[1].data<T>() + b0 * g.in_c * g.in_sp, col, g, B);
    PMX_KERNEL_LAUNCH_CHECK();
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* w_g = in[2].data<T>() + grp * g.out_cg() * K;
      const T* dyt_g = dyt + grp * g.out_cg() * width;
      gemm(ctx, in[1].dtype, false, true, g.out_cg(), K, width, 1.0, dyt_g, width,
           col + grp * K * width, width, beta, dw.data<T>() + grp * g.out_cg() * K, K);
      if (want_dx) {
        gemm(ctx, in[1].dtype, true, false, K, width, g.out_cg(), 1.0, w_g, K, dyt_g, width, 0.0,
             dcol + grp * K * width, width);
      }
    }
    if (want_dx) {
      col2im_kernel<T><<<grid_for(B * g.in_c * g.in_sp), kBlock, 0, s>>>(
          dcol, nullptr, out[0].data<T>() + b0 * g.in_c * g.in_sp, g, B);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    if (db) {
      row_sum_kernel<T><<<rows_grid(g.out_c), kBlock, 0, s>>>(dyt, db->data<T>(), g.out_c,
                                                              width, b0 != 0);
      PMX_KERNEL_LAUNCH_CHECK();
    }
  }
}

// Note [Channel-last convolution on the GPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With layout NWC / NHWC / NDHWC the channel-first paths (cuDNN or the own kernels) run on
// channel-first copies of the operands, (N, S..., C) -> (N, C, S...) and the weight
// (F, K..., C/g) -> (F, C/g, K...), and the results are copied back into the channel-last
// outputs: one pass over each operand each way, as the CPU op does. The copies share one block
// from the caching allocator, handed back on the op's stream once the kernels are queued; a bulk
// replay that meets it is not captured into a CUDA graph (no allocation inside a capture).

// A channel-last shape in channel-first order, and the element strides with which a contiguous
// channel-last buffer is read in that order.
Shape channel_first_shape(const Shape& last) {
  Shape first = {last[0], last.back()};
  first.insert(first.end(), last.begin() + 1, last.end() - 1);
  return first;
}
std::vector<int64_t> channel_last_strides_in_first_order(const Shape& last) {
  const std::vector<int64_t> strides = ops::contiguous_strides(last);
  std::vector<int64_t> first = {strides[0], strides.back()};
  first.insert(first.end(), strides.begin() + 1, strides.end() - 1);
  return first;
}
// The element strides with which a contiguous channel-first buffer is read in channel-last order.
std::vector<int64_t> channel_first_strides_in_last_order(const Shape& last) {
  const std::vector<int64_t> strides = ops::contiguous_strides(channel_first_shape(last));
  std::vector<int64_t> in_last = {strides[0]};
  in_last.insert(in_last.end(), strides.begin() + 2, strides.end());
  in_last.push_back(strides[1]);
  return in_last;
}

using ConvRun = void (*)(const OpContext&, const ConvGeometry&, const std::vector<TBlob>&,
                         const std::vector<TBlob>&);

// Runs `run` on channel-first twins of the blobs flagged in `in_last` / `out_last` (the others
// are passed as they are), copying the inputs in and the outputs back out.
void run_channel_first(const OpContext& ctx, ConvGeometry g, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out, const std::vector<bool>& in_last,
                       const std::vector<bool>& out_last, ConvRun run) {
  auto padded = [](const TBlob& b) { return workspace_aligned(b.size() * dtype_size(b.dtype)); };
  size_t bytes = 0;
  for (size_t i = 0; i < in.size(); ++i) bytes += in_last[i] ? padded(in[i]) : 0;
  for (size_t i = 0; i < out.size(); ++i) bytes += out_last[i] ? padded(out[i]) : 0;
  StorageHandle block = storage::alloc(bytes, ctx.run.device, ctx.run.stream);
  block.stream = ctx.run.stream;  // freed in stream order, after the kernels queued below
  char* next = static_cast<char*>(block.dptr);
  auto twin = [&](const TBlob& last) {
    TBlob first = last;
    first.shape = channel_first_shape(last.shape);
    first.dptr = next;
    next += padded(last);
    return first;
  };
  std::vector<TBlob> in_first = in, out_first = out;
  try {
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in_last[i]) continue;
      in_first[i] = twin(in[i]);
      strided_copy(in[i].dptr, 0, in_first[i].shape,
                   channel_last_strides_in_first_order(in[i].shape), in_first[i].dptr,
                   dtype_size(in[i].dtype), ctx.run.stream);
    }
    for (size_t i = 0; i < out.size(); ++i)
      if (out_last[i]) out_first[i] = twin(out[i]);
    g.channel_last = false;
    run(ctx, g, in_first, out_first);
    for (size_t i = 0; i < out.size(); ++i) {
      if (!out_last[i]) continue;
      strided_copy(out_first[i].dptr, 0, out[i].shape,
                   channel_first_strides_in_last_order(out[i].shape), out[i].dptr,
                   dtype_size(out[i].dtype), ctx.run.stream);
    }
  } catch (...) {
    storage::free(block);
    throw;
  }
  storage::free(block);
}

void conv_forward_channel_first(const OpContext& ctx, const ConvGeometry& g,
                                const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  if (cudnn_convolution(ctx, g, in, out)) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, { conv_forward_typed<T>(ctx, g, in, out); });
}

void conv_backward_channel_first(const OpContext& ctx, const ConvGeometry& g,
                                 const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  if (cudnn_convolution_backward(ctx, g, in, out)) return;
  PMX_GPU_FLOAT_SWITCH(in[1].dtype, T, { conv_backward_typed<T>(ctx, g, in, out); });
}

void conv_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const ConvGeometry g = nn::conv_geometry(*ctx.attrs, in[0].shape, in[1].shape);
  if (out[0].size() == 0) return;
  if (!g.channel_last) return conv_forward_channel_first(ctx, g, in, out);
  // data and weight in, out back; the bias has no layout
  run_channel_first(ctx, g, in, out, {true, true, false}, {true}, conv_forward_channel_first);
}

void conv_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const ConvGeometry g = nn::conv_geometry(*ctx.attrs, in[1].shape, in[2].shape);
  if (!g.channel_last) return conv_backward_channel_first(ctx, g, in, out);
  // out_grad, data, weight and (with relu) out in; data_grad and weight_grad back, not bias_grad
  const bool want_dx = nn::need_data_grad(*ctx.attrs);
  std::vector<bool> out_last(out.size(), false);
  for (size_t i = 0; i < (want_dx ? 2u : 1u); ++i) out_last[i] = true;
  run_channel_first(ctx, g, in, out, std::vector<bool>(in.size(), true), out_last,
                    conv_backward_channel_first);
}

// ---------------------------------------------------------------------------------------------
// pooling: a thread per output element
// ---------------------------------------------------------------------------------------------
using nn::PoolGeom;
using nn::PoolType;

// The window of output o along dim, clipped to the input; `padded` is its extent clipped to the
// padded input (the avg divisor with count_include_pad).
struct Span {
  int64_t lo, hi, padded;
};

__device__ __forceinline__ Span window(const PoolGeom& g, int dim, int64_t o) {
  const int64_t start = o * g.s[dim] - g.p[dim];
  const int64_t end = min(start + g.k[dim], g.in[dim] + g.p[dim]);
  return {start > 0 ? start : 0, min(end, g.in[dim]), end - start};
}

struct Window {
  Span z, y, x;
  __device__ Window(const PoolGeom& g, int64_t o)
      : z(window(g, 0, o / (g.out[1] * g.out[2]))),
        y(window(g, 1, (o / g.out[2]) % g.out[1])),
        x(window(g, 2, o % g.out[2])) {}
  __device__ double divisor(const PoolGeom& p) const {
    if (p.type == PoolType::kSum) return 1.0;
    if (p.count_include_pad) return double(z.padded * y.padded * x.padded);
    return double((z.hi - z.lo) * (y.hi - y.lo) * (x.hi - x.lo));
  }
};

template <typename T>
__global__ void pool_forward_kernel(const T* x, T* y, PoolGeom p) {
  using A = AccT<T>;
  const PoolGeom& g = p;
  PMX_GRID_STRIDE_LOOP(e, p.planes * g.out_sp) {
    const int64_t plane = e / g.out_sp;
    const Window w(g, e % g.out_sp);
    const T* xp = x + plane * g.in_sp;
    A acc = p.type == PoolType::kMax ? A(-INFINITY) : A(0);
    for (int64_t iz = w.z.lo; iz < w.z.hi; ++iz)
      for (int64_t iy = w.y.lo; iy < w.y.hi; ++iy)
        for (int64_t ix = w.x.lo; ix < w.x.hi; ++ix) {
          const A v = convert<A>(xp[(iz * g.in[1] + iy) * g.in[2] + ix]);
          acc = p.type == PoolType::kMax ? (v > acc ? v : acc) : acc + v;
        }
    if (p.type != PoolType::kMax) acc /= A(w.divisor(p));
    y[e] = convert<T>(acc);
  }
}

// The position (in its plane) of the first input, row-major, of window w equal to the max
// `target`; -1 when none is (a NaN window).
template <typename T>
__device__ int64_t max_position(const T* xp, const PoolGeom& g, const Window& w, AccT<T> target) {
  for (int64_t iz = w.z.lo; iz < w.z.hi; ++iz)
    for (int64_t iy = w.y.lo; iy < w.y.hi; ++iy)
      for (int64_t ix = w.x.lo; ix < w.x.hi; ++ix) {
        const int64_t i = (iz * g.in[1] + iy) * g.in[2] + ix;
        if (convert<AccT<T>>(xp[i]) == target) return i;
      }
  return -1;
}

// Max sends dy to the first input (row-major) equal to the output in its window; avg and sum
// spread it. Windows overlap when stride < kernel, so contributions are added atomically, in an
// order that varies from run to run: the deterministic mode gathers instead (below).
template <typename T>
__global__ void pool_backward_kernel(const T* dy, const T* x, const T* y, T* dx, PoolGeom p) {
  using A = AccT<T>;
  const PoolGeom& g = p;
  PMX_GRID_STRIDE_LOOP(e, p.planes * g.out_sp) {
    const int64_t plane = e / g.out_sp;
    const Window w(g, e % g.out_sp);
    T* dxp = dx + plane * g.in_sp;
    if (p.type == PoolType::kMax) {
      const int64_t hit = max_position(x + plane * g.in_sp, g, w, convert<A>(y[e]));
      if (hit >= 0) atomicAdd(dxp + hit, dy[e]);
    } else {
      const T share = convert<T>(convert<A>(dy[e]) / A(w.divisor(p)));
      for (int64_t iz = w.z.lo; iz < w.z.hi; ++iz)
        for (int64_t iy = w.y.lo; iy < w.y.hi; ++iy)
          for (int64_t ix = w.x.lo; ix < w.x.hi; ++ix)
            atomicAdd(dxp + (iz * g.in[1] + iy) * g.in[2] + ix, share);
    }
  }
}

// hits[e] = max_position of output e's window, for the gather below.
template <typename T>
__global__ void pool_max_positions_kernel(const T* x, const T* y, int64_t* hits, PoolGeom g) {
  PMX_GRID_STRIDE_LOOP(e, g.planes * g.out_sp) {
    hits[e] = max_position(x + (e / g.out_sp) * g.in_sp, g, Window(g, e % g.out_sp),
                           convert<AccT<T>>(y[e]));
  }
}

// The backward as a gather (Note [Deterministic mode]): each input element sums the shares of
// the windows covering it, in row-major order of the outputs, so no atomics; max counts only the
// windows whose hit (pool_max_positions_kernel) it is. Writes every element of dx.
template <typename T>
__global__ void pool_backward_gather_kernel(const T* dy, const int64_t* hits, T* dx, PoolGeom p) {
  using A = AccT<T>;
  const PoolGeom& g = p;
  PMX_GRID_STRIDE_LOOP(e, p.planes * g.in_sp) {
    const int64_t plane = e / g.in_sp, i = e % g.in_sp;
    const nn::OutputRange rz = nn::covering_outputs(g, 0, i / (g.in[1] * g.in[2]));
    const nn::OutputRange ry = nn::covering_outputs(g, 1, (i / g.in[2]) % g.in[1]);
    const nn::OutputRange rx = nn::covering_outputs(g, 2, i % g.in[2]);
    A sum = A(0);
    for (int64_t oz = rz.first; oz <= rz.last; ++oz)
      for (int64_t oy = ry.first; oy <= ry.last; ++oy)
        for (int64_t ox = rx.first; ox <= rx.last; ++ox) {
          const int64_t o = (oz * g.out[1] + oy) * g.out[2] + ox, oe = plane * g.out_sp + o;
          if (p.type == PoolType::kMax) {
            if (hits[oe] == i) sum += convert<A>(dy[oe]);
          } else {
            sum += convert<A>(dy[oe]) / A(Window(g, o).divisor(p));
          }
        }
    dx[e] = convert<T>(sum);
  }
}

void pool_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const PoolGeom p = nn::pool_geometry(*ctx.attrs, in[0].shape);
  const int64_t n = out[0].size();
  if (n == 0 || cudnn_pooling(ctx, p, in, out)) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    pool_forward_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(in[0].data<T>(),
                                                                        out[0].data<T>(), p);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// in: out_grad, data, out. For max, the hits take the op's workspace.
void pool_backward_gather(const OpContext& ctx, const PoolGeom& p, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  if (out[0].size() == 0) return;  // else out_grad is not empty either: every extent is >= 1
  int64_t* hits = p.type == PoolType::kMax
                      ? static_cast<int64_t*>(ctx.workspace(in[0].size() * sizeof(int64_t)))
                      : nullptr;
  PMX_GPU_FLOAT_SWITCH(in[1].dtype, T, {
    if (hits) {
      pool_max_positions_kernel<T><<<grid_for(in[0].size()), kBlock, 0, stream_of(ctx)>>>(
          in[1].data<T>(), in[2].data<T>(), hits, p);
      PMX_KERNEL_LAUNCH_CHECK();
    }
    pool_backward_gather_kernel<T><<<grid_for(out[0].size()), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), hits, out[0].data<T>(), p);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void pool_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const PoolGeom p = nn::pool_geometry(*ctx.attrs, in[1].shape);
  if (cudnn_pooling_backward(ctx, p, in, out)) return;  // deterministic (Note [Deterministic mode])
  // Disjoint windows add at most once into each input of the zeroed dx, which is exact: only
  // overlapping ones need the gather, in the deterministic mode and for 16-bit floats (whose
  // atomic adds would round after each window; the gather sums in float and rounds once).
  const bool overlap = p.k[0] > p.s[0] || p.k[1] > p.s[1] || p.k[2] > p.s[2];
  if (overlap && (deterministic() || is_16bit_float(in[1].dtype))) {
    pool_backward_gather(ctx, p, in, out);
    return;
  }
  fill_blob(out[0], 0.0, ctx.run.stream);
  const int64_t n = in[0].size();
  if (n == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[1].dtype, T, {
    pool_backward_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), out[0].data<T>(), p);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------------------------
// fully_connected: out = data . weight^T + bias
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void broadcast_rows_kernel(const T* bias, T* y, int64_t rows, int64_t cols) {
  PMX_GRID_STRIDE_LOOP(e, rows * cols) y[e] = bias[e % cols];
}

// out[c] = sum over rows of m[r][c]: a block per column (columns are few: num_hidden).
template <typename T>
__global__ void column_sum_kernel(const T* m, T* out, int64_t rows, int64_t cols) {
  for (int64_t c = blockIdx.x; c < cols; c += gridDim.x) {
    double sum = 0;
    for (int64_t r = threadIdx.x; r < rows; r += kBlock) sum += convert<double>(m[r * cols + c]);
    sum = group_reduce(sum, kBlock, [](double a, double b) { return a + b; });
    if (threadIdx.x == 0) out[c] = convert<T>(sum);
  }
}

void fc_dims(const Shape& data, bool flatten, int64_t* rows, int64_t* in_units) {
  if (flatten) {
    *rows = data.empty() ? 1 : data[0];
    *in_units = data.empty() ? 1 : nn::prod(data, 1, static_cast<int>(data.size()));
  } else {
    *in_units = data.empty() ? 1 : data.back();
    *rows = data.empty() ? 1 : nn::prod(data, 0, static_cast<int>(data.size()) - 1);
  }
}

void fc_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                const std::vector<TBlob>& out) {
  int64_t rows, in_units;
  fc_dims(in[0].shape, ctx.attrs->get_bool("flatten", true), &rows, &in_units);
  const int64_t hidden = in[1].shape[0];
  if (out[0].size() == 0) return;
  const bool has_bias = in.size() == 3;
  if (has_bias) {
    PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
      broadcast_rows_kernel<T><<<grid_for(rows * hidden), kBlock, 0, stream_of(ctx)>>>(
          in[2].data<T>(), out[0].data<T>(), rows, hidden);
    });
    PMX_KERNEL_LAUNCH_CHECK();
  }
  if (in_units == 0) {  // an empty sum: cuBLAS would reject its zero leading dimensions
    if (!has_bias) fill_blob(out[0], 0.0, ctx.run.stream);
    return;
  }
  gemm(ctx, in[0].dtype, false, true, rows, hidden, in_units, 1.0, in[0].dptr, in_units,
       in[1].dptr, in_units, has_bias ? 1.0 : 0.0, out[0].dptr, hidden);
}

void fc_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                         const std::vector<TBlob>& out) {
  int64_t rows, in_units;
  fc_dims(in[1].shape, ctx.attrs->get_bool("flatten", true), &rows, &in_units);
  const int64_t hidden = in[2].shape[0];
  const DType t = in[1].dtype;
  // data_grad (rows, in) = dy (rows, hidden) . W (hidden, in)
  gemm(ctx, t, false, false, rows, in_units, hidden, 1.0, in[0].dptr, hidden, in[2].dptr,
       in_units, 0.0, out[0].dptr, in_units);
  // weight_grad (hidden, in) = dy^T (hidden, rows) . X (rows, in); zero when there are no rows
  if (rows == 0) fill_blob(out[1], 0.0, ctx.run.stream);
  gemm(ctx, t, true, false, hidden, in_units, rows, 1.0, in[0].dptr, hidden, in[1].dptr,
       in_units, 0.0, out[1].dptr, in_units);
  if (out.size() == 3 && hidden > 0) {
    PMX_GPU_FLOAT_SWITCH(t, T, {
      column_sum_kernel<T><<<rows_grid(hidden), kBlock, 0, stream_of(ctx)>>>(
          in[0].data<T>(), out[2].data<T>(), rows, hidden);
    });
    PMX_KERNEL_LAUNCH_CHECK();
  }
}

const bool registered = [] {
  op_registry::get_or_create("convolution").set_gpu(conv_compute);
  op_registry::get_or_create("convolution_backward").set_gpu(conv_backward_compute);
  op_registry::get_or_create("pooling").set_gpu(pool_compute);
  op_registry::get_or_create("pooling_backward").set_gpu(pool_backward_compute);
  op_registry::get_or_create("fully_connected").set_gpu(fc_compute);
  op_registry::get_or_create("fully_connected_backward").set_gpu(fc_backward_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
