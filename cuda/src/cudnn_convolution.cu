// The convolution op and its backward through cuDNN (cudnn_nn.h): channel-first layouts, 1-3
// spatial dims (1-D runs as 2-D with height 1), groups, stride, pad, dilation; float32, float64,
// float16, bfloat16. Same blobs and results as the own kernels in conv_pool.cu, which run when
// this path declines. Bias and act_type='relu' (Note [Fused convolution + relu] in
// nn_convolution.cc): the forward adds the bias and applies the relu in one pass over cuDNN's
// output; the backward masks out_grad by out > 0 first and feeds the masked gradient to the bias,
// weight and data gradients.
//
// Note [Choosing cuDNN convolution algorithms]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each direction (forward, data gradient, weight gradient) has several algorithms, and the
// fastest depends on the shapes. cudnn_tune (nn_common.h) decides how one is chosen:
//   off                cuDNN's heuristic ranking (cudnnGet*_v7), no measuring, within
//                      `workspace` MB;
//   limited_workspace  (the default) every algorithm measured on the op's own buffers
//                      (cudnnFind*Ex), the fastest whose workspace fits `workspace` MB;
//   fastest            measured likewise, with no limit but half the device's free memory.
// The first algorithm in cuDNN's order (fastest first, or best ranked) that succeeded and fits is
// taken. In the deterministic mode (Note [Deterministic mode]) the choice is always off's, by
// rank (a choice by measured times may differ between runs), among the algorithms cuDNN reports
// as CUDNN_DETERMINISTIC. A choice is made once per (direction, dtype, shapes, stride, pad,
// dilate, groups, device, cudnn_tune, workspace, mode) and kept for the process, like
// cudnn.benchmark: the mutex is
// held while it is made, so a shape met by several workers at once is measured once. Measuring
// blocks the host, writes only the op's outputs (overwritten afterwards), and takes its scratch
// from pymx's caching allocator on the op's stream, as large as the most any algorithm asks
// within the limit. When no algorithm fits, or cuDNN reports the convolution unsupported, that is
// remembered too and the op runs its own kernels.
//
// Note [No TF32 in float32 convolutions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CUDNN_DEFAULT_MATH lets cuDNN run float32 convolutions on TF32 tensor cores (Ampere and newer),
// whose products keep 10 bits of mantissa; float32 results must match float32 references (and
// the own kernels, whose cuBLAS GEMMs use no TF32 either). float32 and float64 therefore use
// CUDNN_FMA_MATH. float16 and bfloat16 use CUDNN_TENSOR_OP_MATH with float accumulation (compute
// type float), as the own kernels accumulate in float.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "cudnn_nn.h"
#include "cudnn_util.h"
#include "determinism.h"
#include "kernel_util.cuh"
#include "pymx/storage.h"

namespace pymx {
namespace gpu {
namespace {

using nn::ConvGeometry;
using nn::CudnnTune;

// y[b][c][o] = max(y[b][c][o] + bias[c], 0), in place; bias may be null, the max only with relu.
template <typename T>
__global__ void bias_relu_kernel(T* y, const T* bias, int64_t channels, int64_t spatial, int64_t n,
                                 bool relu) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(e, n) {
    A v = convert<A>(y[e]);
    if (bias) v += convert<A>(bias[(e / spatial) % channels]);
    if (relu && v < A(0)) v = A(0);  // max(v, 0) as on the CPU: NaN stays NaN
    y[e] = convert<T>(v);
  }
}

// masked = dy where the relu output y is positive, else 0.
template <typename T>
__global__ void relu_mask_kernel(const T* dy, const T* y, T* masked, int64_t n) {
  PMX_GRID_STRIDE_LOOP(e, n) {
    masked[e] = convert<AccT<T>>(y[e]) > AccT<T>(0) ? dy[e] : convert<T>(0.0f);
  }
}

// The descriptors of one convolution: data x, output y, weight w, bias (1, C, 1...), and the
// convolution itself.
struct ConvDescs {
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvolutionDesc conv;
};

// Fills `d` for geometry g with data of `dtype`; false when cuDNN cannot take it (dtype, sizes).
bool conv_descs(const ConvGeometry& g, DType dtype, ConvDescs* d) {
  cudnnDataType_t type;
  if (!cudnn_data_type(dtype, &type)) return false;
  // 1-D and 2-D as 2-D (the geometry right-aligns spatial extents, leading ones 1), 3-D as 3-D.
  const int nd = g.nsp == 3 ? 3 : 2;
  std::vector<int64_t> x = {g.batch, g.in_c}, y = {g.batch, g.out_c}, w = {g.out_c, g.in_cg()};
  std::vector<int64_t> bias = {1, g.out_c};
  std::vector<int> pad, stride, dilate;
  for (int i = 3 - nd; i < 3; ++i) {
    x.push_back(g.in[i]);
    y.push_back(g.out[i]);
    w.push_back(g.k[i]);
    bias.push_back(1);
    pad.push_back(static_cast<int>(g.p[i]));
    stride.push_back(static_cast<int>(g.s[i]));
    dilate.push_back(static_cast<int>(g.d[i]));
  }
  std::vector<int> xi, yi, wi, bi;
  if (!cudnn_dims(x, &xi) || !cudnn_dims(y, &yi) || !cudnn_dims(w, &wi) || !cudnn_dims(bias, &bi))
    return false;
  const CudnnApi& api = cudnn();
  d->x = tensor_desc(type, xi);
  d->y = tensor_desc(type, yi);
  d->bias = tensor_desc(type, bi);
  cudnnFilterDescriptor_t wd = nullptr;
  check_cudnn(api.cudnnCreateFilterDescriptor(&wd), "cudnnCreateFilterDescriptor");
  d->w.reset(wd);
  check_cudnn(api.cudnnSetFilterNdDescriptor(wd, type, CUDNN_TENSOR_NCHW, nd + 2, wi.data()),
              "cudnnSetFilterNdDescriptor");
  cudnnConvolutionDescriptor_t cd = nullptr;
  check_cudnn(api.cudnnCreateConvolutionDescriptor(&cd), "cudnnCreateConvolutionDescriptor");
  d->conv.reset(cd);
  // MXNet's convolution is a cross-correlation (the kernel is not flipped).
  const cudnnDataType_t compute = type == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  check_cudnn(api.cudnnSetConvolutionNdDescriptor(cd, nd, pad.data(), stride.data(),
                                                  dilate.data(), CUDNN_CROSS_CORRELATION,
                                                  compute),
              "cudnnSetConvolutionNdDescriptor");
  check_cudnn(api.cudnnSetConvolutionGroupCount(cd, static_cast<int>(g.groups)),
              "cudnnSetConvolutionGroupCount");
  // Note [No TF32 in float32 convolutions].
  const bool is_16bit = type == CUDNN_DATA_HALF || type == CUDNN_DATA_BFLOAT16;
  const cudnnMathType_t math = is_16bit ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  check_cudnn(api.cudnnSetConvolutionMathType(cd, math), "cudnnSetConvolutionMathType");
  return true;
}

// A direction's two inputs and its output, in cuDNN's argument order: forward (x, w, y), data
// gradient (w, dy, dx), weight gradient (x, dy, dw).
struct DirectionBuffers {
  const void* a;
  const void* b;
  void* out;
};

// The cuDNN calls of each direction, for choose() below.
struct Forward {
  using Algo = cudnnConvolutionFwdAlgo_t;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr int kId = 0, kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescs& d, Algo algo, size_t* bytes) {
    return cudnn().cudnnGetConvolutionForwardWorkspaceSize(h, d.x.get(), d.w.get(), d.conv.get(),
                                                           d.y.get(), algo, bytes);
  }
  static cudnnStatus_t rank(cudnnHandle_t h, const ConvDescs& d, int* n, Perf* perf) {
    return cudnn().cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.get(), d.w.get(), d.conv.get(),
                                                          d.y.get(), kCount, n, perf);
  }
  static cudnnStatus_t measure(cudnnHandle_t h, const ConvDescs& d, const DirectionBuffers& b,
                               int* n, Perf* perf, void* ws, size_t ws_bytes) {
    return cudnn().cudnnFindConvolutionForwardAlgorithmEx(h, d.x.get(), b.a, d.w.get(), b.b,
                                                          d.conv.get(), d.y.get(), b.out, kCount,
                                                          n, perf, ws, ws_bytes);
  }
};

struct BackwardData {
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr int kId = 1, kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescs& d, Algo algo, size_t* bytes) {
    return cudnn().cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), algo, bytes);
  }
  static cudnnStatus_t rank(cudnnHandle_t h, const ConvDescs& d, int* n, Perf* perf) {
    return cudnn().cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), kCount, n, perf);
  }
  static cudnnStatus_t measure(cudnnHandle_t h, const ConvDescs& d, const DirectionBuffers& b,
                               int* n, Perf* perf, void* ws, size_t ws_bytes) {
    return cudnn().cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, d.w.get(), b.a, d.y.get(), b.b, d.conv.get(), d.x.get(), b.out, kCount, n, perf, ws,
        ws_bytes);
  }
};

struct BackwardFilter {
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr int kId = 2, kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescs& d, Algo algo, size_t* bytes) {
    return cudnn().cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), algo, bytes);
  }
  static cudnnStatus_t rank(cudnnHandle_t h, const ConvDescs& d, int* n, Perf* perf) {
    return cudnn().cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), kCount, n, perf);
  }
  static cudnnStatus_t measure(cudnnHandle_t h, const ConvDescs& d, const DirectionBuffers& b,
                               int* n, Perf* perf, void* ws, size_t ws_bytes) {
    return cudnn().cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, d.x.get(), b.a, d.y.get(), b.b, d.conv.get(), d.w.get(), b.out, kCount, n, perf, ws,
        ws_bytes);
  }
};

// A chosen algorithm and the workspace it runs with; usable = false: none fits.
struct Choice {
  bool usable = false;
  int algo = 0;
  size_t workspace = 0;
};

std::mutex g_choices_mu;
// Keyed as in choose(); never freed (the choices are used until exit).
std::map<std::vector<int64_t>, Choice>* g_choices = new std::map<std::vector<int64_t>, Choice>();

// Makes a direction's choice (Note [Choosing cuDNN convolution algorithms]); `tune` is kOff in
// the deterministic mode. Called with g_choices_mu held.
template <typename Dir>
Choice make_choice(const OpContext& ctx, cudnnHandle_t h, const ConvDescs& d,
                   const DirectionBuffers& buffers, CudnnTune tune, bool deterministic_only,
                   size_t limit) {
  using Algo = typename Dir::Algo;
  typename Dir::Perf perf[Dir::kCount];
  int count = 0;
  cudnnStatus_t status;
  if (tune == CudnnTune::kOff) {
    status = Dir::rank(h, d, &count, perf);
  } else {
    size_t most = 0;  // the largest workspace any algorithm asks for, within the limit
    for (int a = 0; a < Dir::kCount; ++a) {
      size_t bytes = 0;
      if (Dir::workspace(h, d, static_cast<Algo>(a), &bytes) == CUDNN_STATUS_SUCCESS)
        most = std::max(most, bytes);
    }
    if (tune == CudnnTune::kFastest) {
      size_t free_bytes = 0, total_bytes = 0;
      PMX_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
      limit = free_bytes / 2;
    }
    limit = std::min(limit, most);
    StorageHandle scratch = storage::alloc(limit, ctx.run.device, ctx.run.stream);
    status = Dir::measure(h, d, buffers, &count, perf, scratch.dptr, limit);
    storage::free(scratch);  // measuring has finished: it blocks the host
  }
  if (cudnn_declines(status)) return {};
  check_cudnn(status, tune == CudnnTune::kOff ? "cudnnGetConvolution*Algorithm_v7"
                                              : "cudnnFindConvolution*AlgorithmEx");
  for (int i = 0; i < count; ++i) {
    size_t bytes = 0;
    if (perf[i].status != CUDNN_STATUS_SUCCESS ||
        (deterministic_only && perf[i].determinism != CUDNN_DETERMINISTIC) ||
        Dir::workspace(h, d, perf[i].algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > limit)
      continue;
    return {true, static_cast<int>(perf[i].algo), bytes};
  }
  return {};
}

// The cached choice of direction Dir for geometry g, made on first use.
template <typename Dir>
Choice choose(const OpContext& ctx, cudnnHandle_t h, const ConvGeometry& g, DType dtype,
              const ConvDescs& d, const DirectionBuffers& buffers) {
  const bool deterministic_only = deterministic();
  const CudnnTune tune = deterministic_only ? CudnnTune::kOff : nn::conv_cudnn_tune(*ctx.attrs);
  const int64_t limit_mb = nn::conv_workspace_mb(*ctx.attrs);
  // 1-D and 2-D convolutions run as 2-D, 3-D ones as 3-D (conv_descs): a 3-D convolution of
  // depth 1 must not share the choice of its 2-D twin, which 5-D tensors may not support.
  const int64_t descriptor_dims = g.nsp == 3 ? 3 : 2;
  std::vector<int64_t> key = {Dir::kId, descriptor_dims, ctx.run.device.id,
                              static_cast<int64_t>(dtype),
                              static_cast<int64_t>(tune), deterministic_only, limit_mb, g.batch,
                              g.in_c, g.out_c, g.groups};
  for (int i = 0; i < 3; ++i) key.insert(key.end(), {g.in[i], g.k[i], g.s[i], g.p[i], g.d[i]});
  std::lock_guard<std::mutex> lock(g_choices_mu);
  auto it = g_choices->find(key);
  if (it != g_choices->end()) return it->second;
  const Choice c = make_choice<Dir>(ctx, h, d, buffers, tune, deterministic_only,
                                    static_cast<size_t>(limit_mb) << 20);
  g_choices->emplace(std::move(key), c);
  return c;
}

}  // namespace

bool cudnn_convolution(const OpContext& ctx, const ConvGeometry& g, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out) {
  cudnnHandle_t h = cudnn_handle_for(ctx);
  ConvDescs d;
  if (h == nullptr || !conv_descs(g, in[0].dtype, &d)) return false;
  const DType dtype = in[0].dtype;
  const Choice c =
      choose<Forward>(ctx, h, g, dtype, d, {in[0].dptr, in[1].dptr, out[0].dptr});
  if (!c.usable) return false;
  void* ws = ctx.workspace(c.workspace);
  // The choice was measured on other buffers: a call that cuDNN declines now (a view's
  // misaligned pointer, say) falls back to the own kernel, which writes every output.
  if (!run_or_decline(cudnn().cudnnConvolutionForward(
                          h, cudnn_one(dtype), d.x.get(), in[0].dptr, d.w.get(), in[1].dptr,
                          d.conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws,
                          c.workspace, cudnn_zero(dtype), d.y.get(), out[0].dptr),
                      "cudnnConvolutionForward"))
    return false;
  const bool has_bias = in.size() == 3, relu = nn::conv_fused_relu(*ctx.attrs);
  if (!has_bias && !relu) return true;
  const int64_t n = out[0].size();
  PMX_GPU_FLOAT_SWITCH(dtype, T, {
    bias_relu_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        out[0].data<T>(), has_bias ? in[2].data<T>() : nullptr, g.out_c, g.out_sp, n, relu);
  });
  PMX_KERNEL_LAUNCH_CHECK();
  return true;
}

bool cudnn_convolution_backward(const OpContext& ctx, const ConvGeometry& g,
                                const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  cudnnHandle_t h = cudnn_handle_for(ctx);
  ConvDescs d;
  const DType dtype = in[1].dtype;
  if (h == nullptr || !conv_descs(g, dtype, &d)) return false;
  const bool want_dx = nn::need_data_grad(*ctx.attrs);
  const TBlob& dw = out[want_dx ? 1 : 0];
  const TBlob* db = out.size() == (want_dx ? 3u : 2u) ? &out.back() : nullptr;
  const TBlob* relu_out = in.size() == 4 ? &in[3] : nullptr;
  // Both choices before anything runs, so that declining launches nothing. They are measured on
  // the unmasked out_grad: its values do not change the timings.
  const Choice filter =
      choose<BackwardFilter>(ctx, h, g, dtype, d, {in[1].dptr, in[0].dptr, dw.dptr});
  const Choice data = want_dx ? choose<BackwardData>(ctx, h, g, dtype, d,
                                                     {in[2].dptr, in[0].dptr, out[0].dptr})
                              : Choice{true, 0, 0};
  if (!filter.usable || !data.usable) return false;
  const size_t mask_bytes = relu_out ? workspace_aligned(in[0].size() * dtype_size(dtype)) : 0;
  const size_t algo_bytes = std::max(filter.workspace, data.workspace);
  char* ws = static_cast<char*>(ctx.workspace(mask_bytes + algo_bytes));
  void* algo_ws = algo_bytes > 0 ? ws + mask_bytes : nullptr;
  const void* dy = in[0].dptr;
  if (relu_out) {
    const int64_t n = in[0].size();
    PMX_GPU_FLOAT_SWITCH(dtype, T, {
      relu_mask_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
          in[0].data<T>(), relu_out->data<T>(), reinterpret_cast<T*>(ws), n);
    });
    PMX_KERNEL_LAUNCH_CHECK();
    dy = ws;
  }
  const CudnnApi& api = cudnn();
  const void* one = cudnn_one(dtype);
  const void* zero = cudnn_zero(dtype);
  // A call declined now falls back to the own kernel, which rewrites every output.
  if (db && !run_or_decline(api.cudnnConvolutionBackwardBias(h, one, d.y.get(), dy, zero,
                                                             d.bias.get(), db->dptr),
                            "cudnnConvolutionBackwardBias"))
    return false;
  if (!run_or_decline(api.cudnnConvolutionBackwardFilter(
                          h, one, d.x.get(), in[1].dptr, d.y.get(), dy, d.conv.get(),
                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(filter.algo), algo_ws,
                          filter.workspace, zero, d.w.get(), dw.dptr),
                      "cudnnConvolutionBackwardFilter"))
    return false;
  return !want_dx ||
         run_or_decline(api.cudnnConvolutionBackwardData(
                            h, one, d.w.get(), in[2].dptr, d.y.get(), dy, d.conv.get(),
                            static_cast<cudnnConvolutionBwdDataAlgo_t>(data.algo), algo_ws,
                            data.workspace, zero, d.x.get(), out[0].dptr),
                        "cudnnConvolutionBackwardData");
}

}  // namespace gpu
}  // namespace pymx
