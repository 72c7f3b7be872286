// Transposed convolution on the GPU, forward and backward, by cuBLAS GEMMs and im2col / col2im
// (CPU definition: engine/src/ops/nn_deconvolution.cc; the shared geometry and the maths:
// Note [Transposed convolution as the adjoint of a convolution] in engine/src/ops/conv_geometry.h).
// Channel-first layouts; float dtypes.
//
// | op                      | inputs                  | outputs                             | attrs |
// |-------------------------|-------------------------|-------------------------------------|-------|
// | deconvolution           | data, weight, [bias]    | out                                 | kernel stride dilate pad adj target_shape num_filter num_group no_bias layout |
// | deconvolution_backward  | out_grad, data, weight  | [data_grad], weight_grad, [bias_grad] | same, need_data_grad |
//
// In ConvGeometry terms `in` is the deconvolution output (F = num_filter channels, in_sp
// positions) and `out` its input (C = C_in channels, out_sp positions). As in conv_pool.cu the
// batch is processed in chunks of B images laid side by side in the columns, so each product is
// one GEMM per group and chunk; x is first transposed to xt (C, B * out_sp):
//   forward   col_g (K, B*out_sp) = W_g^T . xt_g, then y = col2im(col) + bias
//             (K = F/groups * prod(kernel); col2im gathers: a thread per output element);
//   backward  col = im2col(dy); dxt_g = W_g . col_g; dW_g += xt_g . col_g^T; db = sums of dy.
#include <algorithm>

#include "conv_im2col.cuh"
#include "kernel_util.cuh"
#include "launch.h"

namespace pymx {
namespace gpu {
namespace {

// Between (images, channels, positions) and (channels, images * positions): t[c][b * n + i]
// is a[b][c][i]; to_channel_major picks the direction.
template <typename T>
__global__ void swap_batch_channel_kernel(const T* src, T* dst, int64_t images, int64_t channels,
                                          int64_t positions, bool to_channel_major) {
  PMX_GRID_STRIDE_LOOP(e, images * channels * positions) {
    const int64_t i = e % positions, c = (e / positions) % channels, b = e / (positions * channels);
    const int64_t t = (c * images + b) * positions + i;
    if (to_channel_major) {
      dst[t] = src[e];
    } else {
      dst[e] = src[t];
    }
  }
}

// out[c] = sum over images b and positions i of m[b][c][i]: a block per channel.
template <typename T>
__global__ void channel_sum_kernel(const T* m, T* out, int64_t images, int64_t channels,
                                   int64_t positions) {
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < images * positions; j += kBlock) {
      const int64_t b = j / positions, i = j % positions;
      sum += convert<double>(m[(b * channels + c) * positions + i]);
    }
    sum = group_reduce(sum, kBlock, [](double a, double b) { return a + b; });
    if (threadIdx.x == 0) out[c] = convert<T>(sum);
  }
}

template <typename T>
void deconv_forward_typed(const OpContext& ctx, const ConvGeometry& g,
                          const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t K = g.col_rows();
  const size_t per_image = (g.out_c + g.in_c * g.k_sp) * g.out_sp * sizeof(T);
  const int64_t chunk = chunk_images(g.batch, per_image);
  T* xt = static_cast<T*>(ctx.workspace(chunk * per_image));
  T* col = xt + g.out_c * chunk * g.out_sp;
  const T* bias = in.size() == 3 ? in[2].data<T>() : nullptr;
  cudaStream_t s = stream_of(ctx);
  for (int64_t b0 = 0; b0 < g.batch; b0 += chunk) {
    const int64_t B = std::min(chunk, g.batch - b0), width = B * g.out_sp;
    swap_batch_channel_kernel<T><<<grid_for(B * g.out_c * g.out_sp), kBlock, 0, s>>>(
        in[0].data<T>() + b0 * g.out_c * g.out_sp, xt, B, g.out_c, g.out_sp, true);
    PMX_KERNEL_LAUNCH_CHECK();
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      gemm(ctx, in[0].dtype, true, false, K, width, g.out_cg(), 1.0,
           in[1].data<T>() + grp * g.out_cg() * K, K, xt + grp * g.out_cg() * width, width, 0.0,
           col + grp * K * width, width);
    }
    col2im_kernel<T><<<grid_for(B * g.in_c * g.in_sp), kBlock, 0, s>>>(
        col, bias, out[0].data<T>() + b0 * g.in_c * g.in_sp, g, B);
    PMX_KERNEL_LAUNCH_CHECK();
  }
}

template <typename T>
void deconv_backward_typed(const OpContext& ctx, const ConvGeometry& g,
                           const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t K = g.col_rows();
  const size_t per_image = (2 * g.out_c + g.in_c * g.k_sp) * g.out_sp * sizeof(T);
  const int64_t chunk = chunk_images(g.batch, per_image);
  T* xt = static_cast<T*>(ctx.workspace(chunk * per_image));
  T* dxt = xt + g.out_c * chunk * g.out_sp;
  T* col = dxt + g.out_c * chunk * g.out_sp;
  const bool want_dx = nn::need_data_grad(*ctx.attrs);  // false: no data_grad output
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
    const double beta = b0 == 0 ? 0.0 : 1.0;  // the weight grad accumulates over chunks
    im2col_kernel<T><<<grid_for(g.in_c * g.k_sp * width), kBlock, 0, s>>>(
        in[0].data<T>() + b0 * g.in_c * g.in_sp, col, g, B);
    PMX_KERNEL_LAUNCH_CHECK();
    swap_batch_channel_kernel<T><<<grid_for(B * g.out_c * g.out_sp), kBlock, 0, s>>>(
        in[1].data<T>() + b0 * g.out_c * g.out_sp, xt, B, g.out_c, g.out_sp, true);
    PMX_KERNEL_LAUNCH_CHECK();
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* w_g = in[2].data<T>() + grp * g.out_cg() * K;
      const T* col_g = col + grp * K * width;
      const int64_t x_rows = grp * g.out_cg() * width;
      if (want_dx) {
        gemm(ctx, in[1].dtype, false, false, g.out_cg(), width, K, 1.0, w_g, K, col_g, width,
             0.0, dxt + x_rows, width);
      }
      gemm(ctx, in[1].dtype, false, true, g.out_cg(), K, width, 1.0, xt + x_rows, width, col_g,
           width, beta, dw.data<T>() + grp * g.out_cg() * K, K);
    }
    if (want_dx) {
      swap_batch_channel_kernel<T><<<grid_for(B * g.out_c * g.out_sp), kBlock, 0, s>>>(
          dxt, out[0].data<T>() + b0 * g.out_c * g.out_sp, B, g.out_c, g.out_sp, false);
      PMX_KERNEL_LAUNCH_CHECK();
    }
  }
  if (db) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(g.in_c, 65535));
    channel_sum_kernel<T><<<blocks, kBlock, 0, s>>>(in[0].data<T>(), db->data<T>(), g.batch,
                                                    g.in_c, g.in_sp);
    PMX_KERNEL_LAUNCH_CHECK();
  }
}

void deconv_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const ConvGeometry g = nn::deconv_geometry(*ctx.attrs, in[0].shape, in[1].shape);
  if (out[0].size() == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, { deconv_forward_typed<T>(ctx, g, in, out); });
}

void deconv_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                             const std::vector<TBlob>& out) {
  const ConvGeometry g = nn::deconv_geometry(*ctx.attrs, in[1].shape, in[2].shape);
  PMX_GPU_FLOAT_SWITCH(in[1].dtype, T, { deconv_backward_typed<T>(ctx, g, in, out); });
}

const bool registered = [] {
  op_registry::get_or_create("deconvolution").set_gpu(deconv_compute);
  op_registry::get_or_create("deconvolution_backward").set_gpu(deconv_backward_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
