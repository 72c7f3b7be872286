// batch_norm and its backward through cuDNN (cudnn_nn.h), with the op's outputs and semantics
// (nn_norm.cc); the own kernels in norm_softmax.cu run what this declines.
//  - Any axis: data viewed as (outer, n, inner) around it (AxisView) is cuDNN's NCHW tensor
//    (outer, n, inner, 1) in SPATIAL mode, whose per-channel statistics run over outer * inner.
//  - dtypes: cuDNN keeps scale, shift and statistics in float for float32, float16 and bfloat16
//    data, in double for float64 data; other parameter dtypes (float16, or float32 with float64
//    data) decline.
//  - fix_gamma: cuDNN scales by ones (in the workspace), and gamma_grad is zeroed afterwards.
//  - The backward runs here only with batch statistics (training, use_global_stats off): cuDNN's
//    backward always differentiates through them, while the op's other backward treats mean and
//    var as constants.
//  - Empty data, sizes beyond cuDNN's int dimensions and eps below CUDNN_BN_MIN_EPSILON decline.
//
// Note [Batch statistics through cuDNN]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cuDNN's training forward returns the batch mean and 1/sqrt(var + eps) of the biased batch
// variance, and would update a running variance with the unbiased one (n / (n - 1) times more);
// the op's moving_var follows the biased variance (MXNet's definition, and the CPU op's). So cuDNN
// gets no running statistics here, and one small kernel turns its inverse standard deviation back
// into var = 1/invstd^2 - eps (in double, clamped at 0 against rounding), writes it as the op's
// var output, and updates moving_mean / moving_var as the own kernel does. The backward hands
// cuDNN the op's mean input and 1/sqrt(var + eps) of its var input as the saved statistics, so it
// uses exactly the statistics it was given.
#include <vector>

#include "cudnn_nn.h"
#include "cudnn_util.h"
#include "kernel_util.cuh"
#include "launch.h"

namespace pymx {
namespace gpu {
namespace {

// var (in: cuDNN's inverse standard deviation; out: the biased variance) and the moving
// statistics' update (Note [Batch statistics through cuDNN]).
template <typename P>
__global__ void bn_batch_stats_kernel(P* var, const P* mean, P* moving_mean, P* moving_var,
                                      int64_t n, double eps, double momentum) {
  PMX_GRID_STRIDE_LOOP(c, n) {
    const double inv_std = convert<double>(var[c]);
    const double v = fmax(1.0 / (inv_std * inv_std) - eps, 0.0);
    var[c] = convert<P>(v);
    moving_mean[c] = convert<P>(convert<double>(moving_mean[c]) * momentum +
                                convert<double>(mean[c]) * (1 - momentum));
    moving_var[c] = convert<P>(convert<double>(moving_var[c]) * momentum + v * (1 - momentum));
  }
}

template <typename P>
__global__ void bn_inv_std_kernel(const P* var, P* inv_std, int64_t n, double eps) {
  PMX_GRID_STRIDE_LOOP(c, n) inv_std[c] = convert<P>(1.0 / sqrt(convert<double>(var[c]) + eps));
}

// What both directions need: cuDNN's descriptors of the data and of the per-channel parameters,
// and the op's attributes.
struct BnSetup {
  TensorDesc data, param;
  int64_t channels = 0;
  DType param_dtype = DType::kFloat32;
  double eps = 0, momentum = 0;
  bool fix_gamma = false, batch_stats = false;
};

// Fills `s` for data of shape `data` and dtype `dtype` with parameters of `param_dtype`; false
// when cuDNN cannot compute it exactly (see the top of the file).
bool bn_setup(const OpContext& ctx, const Shape& data, DType dtype, DType param_dtype,
              BnSetup* s) {
  const Attrs& attrs = *ctx.attrs;
  cudnnDataType_t type;
  if (!cudnn_data_type(dtype, &type)) return false;
  const DType cudnn_param = dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  s->eps = attrs.get_float("eps", 1e-3);
  if (param_dtype != cudnn_param || s->eps < kCudnnBnMinEpsilon) return false;
  const nn::AxisView v = nn::axis_view(data, attrs.get_int("axis", 1), "batch_norm");
  std::vector<int> dims, param_dims;
  if (!cudnn_dims({v.outer, v.n, v.inner, 1}, &dims) || !cudnn_dims({1, v.n, 1, 1}, &param_dims))
    return false;
  s->data = tensor_desc(type, dims);
  s->param = tensor_desc(cudnn_param == DType::kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT,
                         param_dims);
  s->channels = v.n;
  s->param_dtype = param_dtype;
  s->momentum = attrs.get_float("momentum", 0.9);
  s->fix_gamma = attrs.get_bool("fix_gamma", true);
  s->batch_stats = ctx.is_train && !attrs.get_bool("use_global_stats", false);
  return true;
}

// A blob of the per-channel parameters' shape and dtype at `ptr` (workspace memory).
TBlob param_blob(const OpContext& ctx, const BnSetup& s, void* ptr) {
  return TBlob{ptr, {s.channels}, s.param_dtype, ctx.run.device};
}

// cuDNN's scale: gamma, or ones written to `ones` with fix_gamma.
const void* bn_scale(const OpContext& ctx, const BnSetup& s, const TBlob& gamma, void* ones) {
  if (!s.fix_gamma) return gamma.dptr;
  fill_blob(param_blob(ctx, s, ones), 1.0, ctx.run.stream);
  return ones;
}

}  // namespace

bool cudnn_batch_norm(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  cudnnHandle_t h = cudnn_handle_for(ctx);
  BnSetup s;
  const DType dtype = in[0].dtype;
  if (h == nullptr || !bn_setup(ctx, in[0].shape, dtype, in[1].dtype, &s)) return false;
  const size_t param_bytes = s.channels * dtype_size(s.param_dtype);
  void* ones = s.fix_gamma ? ctx.workspace(param_bytes) : nullptr;
  const void* scale = bn_scale(ctx, s, in[1], ones);
  const CudnnApi& api = cudnn();
  cudaStream_t stream = stream_of(ctx);
  if (s.batch_stats) {
    // Mean and inverse standard deviation into the mean and var outputs, no running statistics
    // (Note [Batch statistics through cuDNN]).
    const cudnnStatus_t status = api.cudnnBatchNormalizationForwardTraining(
        h, CUDNN_BATCHNORM_SPATIAL, cudnn_one(dtype), cudnn_zero(dtype), s.data.get(),
        in[0].dptr, s.data.get(), out[0].dptr, s.param.get(), scale, in[2].dptr, 0.0, nullptr,
        nullptr, s.eps, out[1].dptr, out[2].dptr);
    if (!run_or_decline(status, "cudnnBatchNormalizationForwardTraining")) return false;
    PMX_GPU_FLOAT_SWITCH(s.param_dtype, P, {
      bn_batch_stats_kernel<P><<<grid_for(s.channels), kBlock, 0, stream>>>(
          out[2].data<P>(), out[1].data<P>(), in[3].data<P>(), in[4].data<P>(), s.channels,
          s.eps, s.momentum);
    });
    PMX_KERNEL_LAUNCH_CHECK();
    return true;
  }
  const cudnnStatus_t status = api.cudnnBatchNormalizationForwardInference(
      h, CUDNN_BATCHNORM_SPATIAL, cudnn_one(dtype), cudnn_zero(dtype), s.data.get(), in[0].dptr,
      s.data.get(), out[0].dptr, s.param.get(), scale, in[2].dptr, in[3].dptr, in[4].dptr, s.eps);
  if (!run_or_decline(status, "cudnnBatchNormalizationForwardInference")) return false;
  // The statistics used are the outputs mean and var.
  PMX_CUDA_CHECK(cudaMemcpyAsync(out[1].dptr, in[3].dptr, param_bytes, cudaMemcpyDeviceToDevice,
                                 stream));
  PMX_CUDA_CHECK(cudaMemcpyAsync(out[2].dptr, in[4].dptr, param_bytes, cudaMemcpyDeviceToDevice,
                                 stream));
  return true;
}

bool cudnn_batch_norm_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                               const std::vector<TBlob>& out) {
  cudnnHandle_t h = cudnn_handle_for(ctx);
  BnSetup s;
  const DType dtype = in[1].dtype;
  if (h == nullptr || !bn_setup(ctx, in[1].shape, dtype, in[2].dtype, &s) || !s.batch_stats)
    return false;
  // Workspace: cuDNN's saved inverse standard deviation, then the ones of fix_gamma.
  const size_t param_bytes = workspace_aligned(s.channels * dtype_size(s.param_dtype));
  char* ws = static_cast<char*>(ctx.workspace(param_bytes * (s.fix_gamma ? 2 : 1)));
  void* inv_std = ws;
  const void* scale = bn_scale(ctx, s, in[2], ws + param_bytes);
  cudaStream_t stream = stream_of(ctx);
  PMX_GPU_FLOAT_SWITCH(s.param_dtype, P, {
    bn_inv_std_kernel<P><<<grid_for(s.channels), kBlock, 0, stream>>>(
        in[4].data<P>(), static_cast<P*>(inv_std), s.channels, s.eps);
  });
  PMX_KERNEL_LAUNCH_CHECK();
  const void* one = cudnn_one(dtype);
  const void* zero = cudnn_zero(dtype);
  const cudnnStatus_t status = cudnn().cudnnBatchNormalizationBackward(
      h, CUDNN_BATCHNORM_SPATIAL, one, zero, one, zero, s.data.get(), in[1].dptr, s.data.get(),
      in[0].dptr, s.data.get(), out[0].dptr, s.param.get(), scale, out[1].dptr, out[2].dptr,
      s.eps, in[3].dptr, inv_std);
  // Declined, only the workspace has been written.
  if (!run_or_decline(status, "cudnnBatchNormalizationBackward")) return false;
  if (s.fix_gamma) fill_blob(out[1], 0.0, stream);
  return true;
}

}  // namespace gpu
}  // namespace pymx
