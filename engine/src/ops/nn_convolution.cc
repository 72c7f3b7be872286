// Convolution, 1-D/2-D/3-D, by im2col + GEMM (OpenBLAS for float32/float64); the forward of a
// 2-D float32 convolution of stride 1 or 2 across runs the direct kernel of conv_direct.h
// instead (or, with AVX-512 and output rows 7 to 15 wide, the one of conv_direct_narrow.h), as
// does the data gradient of a stride-1 one; with AVX-512 the data gradient of the others (stride
// 2, narrow rows) runs the one of conv_direct_data_grad.h, and the weight gradient the one of
// conv_weight_grad.h.
//
// | op                    | inputs                        | outputs                             | attrs |
// |-----------------------|-------------------------------|-------------------------------------|-------|
// | convolution           | data, weight, [bias]          | out                                 | kernel stride dilate pad num_filter num_group no_bias layout act_type cudnn_off cudnn_tune workspace |
// | convolution_backward  | out_grad, data, weight, [out] | [data_grad], weight_grad, [bias_grad] | same as forward, need_data_grad |
//
// layout: NCW / NCHW / NCDHW (the default for 1/2/3 spatial dims) or channel-last NWC / NHWC /
// NDHWC. Channel-first weight is (num_filter, C/num_group, k...); channel-last weight is
// (num_filter, k..., C/num_group), as in MXNet. bias is (num_filter,).
// Output extent per spatial dim: (in + 2*pad - dilate*(kernel-1) - 1) / stride + 1.
// stride and dilate default to 1, pad to 0; a single value is broadcast to every spatial dim.
// act_type (not in MXNet's Convolution): None, or "relu" to return relu(conv + bias); then the
// backward op also takes the forward output `out`. need_data_grad=False (set by the gradient
// function, nn_common.h) drops the data_grad output.
// cudnn_off, cudnn_tune and workspace (MXNet's) choose how the GPU kernel uses cuDNN (nn_common.h,
// cuda/src/cudnn_convolution.cu); the CPU kernel only validates them.
//
// Note [Convolution by im2col]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Per image and group, im2col copies the receptive fields into a (Cg*prod(kernel), prod(out))
// matrix `col`, so the convolution is one GEMM: out_g = W_g . col. Backward reuses it:
// weight_grad_g += out_grad_g . col^T (computed transposed, Note [Weight gradient transposed])
// and data_grad = col2im(W_g^T . out_grad_g). A 1x1 kernel with stride 1 and no padding needs no
// im2col (col is the image itself). The batch is split into one part per intra-op thread
// (parallel.h), each with its own col (and weight_grad) buffer; a whole image per task keeps
// every GEMM as large as the image allows; for images with few outputs the forward and the
// backward put several images side by side in one GEMM instead (Note [Images side by side]).
// Channel-last layouts are transposed to channel-first in the workspace, computed, and
// transposed back: simple, and the transposes cost far less than the GEMMs.
//
// Note [Fused convolution + relu]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Gluon's Conv2D(activation='relu') passes act_type='relu', so the relu runs on each image's
// output block right after its GEMM and bias add, while it is still in cache, instead of as a
// separate pass over the whole (large) output. The output is post-activation, so the backward op
// recovers relu's mask from it: it uses out_grad * (out > 0) in place of out_grad, masking one
// image at a time into a scratch block that stays hot for the GEMMs. The same pass sums the bias
// gradient per image, per part of the batch, and the parts are added in order.
//
// Note [Weight gradient transposed]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The backward accumulates weight_grad_g^T = col . out_grad_g^T (K x Mg) rather than
// weight_grad_g = out_grad_g . col^T (Mg x K): the same dot products, but OpenBLAS's sgemm runs
// the transposed form faster on LeafNetwork's layers, most on the first (32 filters, K = 12,
// 16129 outputs: 20 ms instead of 23.6 ms for 64 images on one core; 9 % of that layer's whole
// backward). Every part accumulates into its own buffer, so transposing back costs nothing extra:
// the step that adds the parts in order writes the sum transposed (Note [Adding the parts' weight
// gradients]).
#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "ops/conv_direct.h"
#include "ops/conv_direct_data_grad.h"
#include "ops/conv_direct_narrow.h"
#include "ops/conv_geometry.h"
#include "ops/conv_weight_grad.h"
#include "ops/nn_common.h"
#include "ops/packed_weight_cache.h"
#include "ops/through_float.h"
#include "parallel.h"

namespace pymx {
namespace {

using nn::ConvGeometry;

Shape weight_shape(const ConvGeometry& g, const Shape& kernel) {
  Shape w = {g.out_c};
  if (!g.channel_last) w.push_back(g.in_cg());
  w.insert(w.end(), kernel.begin(), kernel.end());
  if (g.channel_last) w.push_back(g.in_cg());
  return w;
}

Shape out_shape(const ConvGeometry& g) {
  Shape o = {g.batch};
  if (!g.channel_last) o.push_back(g.out_c);
  for (int i = 3 - g.nsp; i < 3; ++i) o.push_back(g.out[i]);
  if (g.channel_last) o.push_back(g.out_c);
  return o;
}

// Validates the GPU-only attributes, so that a bad value fails on every device.
void check_cudnn_attrs(const Attrs& attrs) {
  nn::cudnn_off(attrs);
  nn::conv_cudnn_tune(attrs);
  nn::conv_workspace_mb(attrs);
}

void conv_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const bool no_bias = attrs.get_bool("no_bias", false);
  const size_t expected = no_bias ? 2 : 3;
  PMX_CHECK(in.size() == expected, "convolution: expected ", expected, " inputs (data, weight",
            no_bias ? "" : ", bias", ") with no_bias=", no_bias, ", got ", in.size());
  nn::conv_fused_relu(attrs);  // validates act_type
  check_cudnn_attrs(attrs);
  const ConvGeometry g = nn::conv_geometry(attrs, in[0], in[1]);
  const Shape w = weight_shape(g, attrs.get_shape("kernel"));
  PMX_CHECK(in[1] == w, "convolution: weight shape ", shape_str(in[1]), " does not match data ",
            shape_str(in[0]), " with num_filter ", g.out_c, ", num_group ", g.groups,
            " (expected ", shape_str(w), ")");
  if (!no_bias) {
    PMX_CHECK(in[2] == Shape({g.out_c}), "convolution: bias shape ", shape_str(in[2]),
              " does not match num_filter=", g.out_c);
  }
  nn::check_float(dt[0], "convolution", "data");
  for (size_t i = 1; i < dt.size(); ++i) {
    PMX_CHECK(dt[i] == dt[0], "convolution: input ", i, " has dtype ", dtype_name(dt[i]),
              " but data has ", dtype_name(dt[0]));
  }
  *out = {out_shape(g)};
  *out_dt = {dt[0]};
}

// Copies the receptive fields of `channels` channel-first channels at `x` into `col`
// (channels*k_sp rows of out_sp, one every `ld` elements). With kCol2Im it is col2im: overwrites
// `x` with the sums of `col`'s entries over the receptive fields, zeroing each channel just before
// adding into it so that the adds find it in cache.
template <typename T, bool kCol2Im>
void im2col(const ConvGeometry& g, int64_t channels, T* x, T* col, int64_t ld) {
  const int64_t ID = g.in[0], IH = g.in[1], IW = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  for (int64_t c = 0; c < channels; ++c) {
    if (kCol2Im) std::fill(x + c * g.in_sp, x + (c + 1) * g.in_sp, T(0));
    for (int64_t kz = 0; kz < g.k[0]; ++kz) {
      for (int64_t ky = 0; ky < g.k[1]; ++ky) {
        for (int64_t kx = 0; kx < g.k[2]; ++kx) {
          T* row = col + (((c * g.k[0] + kz) * g.k[1] + ky) * g.k[2] + kx) * ld;
          // Output columns ox whose input column ix = ox*s - p + kx*d lies inside [0, IW).
          const int64_t x_off = kx * g.d[2] - g.p[2];
          int64_t ox_lo = 0, ox_hi = OW;
          while (ox_lo < OW && ox_lo * g.s[2] + x_off < 0) ++ox_lo;
          while (ox_hi > ox_lo && (ox_hi - 1) * g.s[2] + x_off >= IW) --ox_hi;
          for (int64_t oz = 0; oz < OD; ++oz) {
            const int64_t iz = oz * g.s[0] - g.p[0] + kz * g.d[0];
            for (int64_t oy = 0; oy < OH; ++oy) {
              T* dst = row + (oz * OH + oy) * OW;
              const int64_t iy = oy * g.s[1] - g.p[1] + ky * g.d[1];
              if (iz < 0 || iz >= ID || iy < 0 || iy >= IH) {
                if (!kCol2Im) std::fill(dst, dst + OW, T(0));
                continue;
              }
              T* src = x + ((c * ID + iz) * IH + iy) * IW + x_off;
              if (kCol2Im) {
                if (g.s[2] == 1) {  // the common case, a separate loop so that it vectorises
                  for (int64_t ox = ox_lo; ox < ox_hi; ++ox) src[ox] += dst[ox];
                } else {
                  for (int64_t ox = ox_lo; ox < ox_hi; ++ox) src[ox * g.s[2]] += dst[ox];
                }
              } else {
                std::fill(dst, dst + ox_lo, T(0));
                if (g.s[2] == 1) {
                  std::memcpy(dst + ox_lo, src + ox_lo, (ox_hi - ox_lo) * sizeof(T));
                } else {
                  for (int64_t ox = ox_lo; ox < ox_hi; ++ox) dst[ox] = src[ox * g.s[2]];
                }
                std::fill(dst + ox_hi, dst + OW, T(0));
              }
            }
          }
        }
      }
    }
  }
}

// (n, a, b) -> (n, b, a) for each of n matrices.
template <typename T>
void transpose_last2(const T* src, T* dst, int64_t n, int64_t a, int64_t b) {
  for (int64_t i = 0; i < n; ++i) {
    const T* s = src + i * a * b;
    T* d = dst + i * a * b;
    for (int64_t r = 0; r < a; ++r)
      for (int64_t c = 0; c < b; ++c) d[c * a + r] = s[r * b + c];
  }
}

// Carves aligned pieces out of one workspace allocation.
class Carver {
 public:
  explicit Carver(char* base) : cur_(base) {}
  template <typename T>
  T* take(int64_t count) {
    T* p = reinterpret_cast<T*>(cur_);
    cur_ += align(count * sizeof(T));
    return p;
  }
  static size_t align(size_t bytes) { return (bytes + 63) & ~size_t(63); }

 private:
  char* cur_;
};

// dst[i] = src[i] + bias for i in [0, n), then max(., 0) when `relu` (NaN stays NaN, as
// std::max(v, 0)); src may be dst.
template <typename T>
void add_bias_relu(const T* src, T* dst, int64_t n, T bias, bool relu) {
  if (relu) {
    for (int64_t i = 0; i < n; ++i) dst[i] = std::max(src[i] + bias, T(0));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] + bias;
  }
}

// Note [Images side by side]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// When an image has few outputs (resnet18's 7x7 and 14x14 layers), a GEMM per image is thin: the
// weight gradient's inner dimension is out_sp (49), and each part of the batch streams its own
// copy of the weight gradient (9.4 MB for 512x512x3x3) in and out for every image, then the parts
// are added. Instead the batch runs as one part, in blocks of up to kSideBySideColumns / out_sp
// images whose im2col columns sit side by side in col (K x block * out_sp), out_grad gathered
// (and relu-masked) the same way: per block and group, one GEMM adds the weight gradient (inner
// dimension block * out_sp; blocks accumulate in order with beta = 1) and one computes the data
// gradient's columns. The GEMMs split their rows across the threads (Note [Parallel GEMM]), im2col
// and col2im split the images, the gathering the channels; every sum has a fixed order, so
// results stay reproducible. resnet18's layers at batch 8 on 2 threads (bench/
// measure_resnet_convs.py, medians of 3 interleaved runs, load ~2.9), backward in ms, with 8
// parts (their sum parallel, Note [Adding the parts' weight gradients]) -> side by side:
// 3x3 512->512 at 7x7 57 -> 38, 3x3/2 256->512 at 14x14 26 -> 18, 3x3 256->256 at 14x14
// 37 -> 36. Taking outputs up to 1024 (the 28x28 layers) in blocks of 2048 columns was no faster
// there and 10-17 % slower at 14x14; blocks of 512 columns ran as fast as 1024.
// The forward does the same for the same images: per block and group, im2col (split over the
// images), one GEMM out_g (Mg x block * out_sp) = W_g . col split across the threads (Note
// [Parallel GEMM]), then each image's outputs are copied out (with the bias and the relu, split over the
// channels). Per image, a GEMM at 7x7 outputs has N = 49, and at batch 1 the split by columns left
// a thread idle. Batch 8 (ms, per image -> side by side, before the float32 layers below 16
// outputs wide went to Note [Narrow direct convolution], which now takes them with AVX-512):
// 3x3/2 256->512 to 7x7 9.05 -> 8.10, 3x3 512->512 at 7x7 18.5 -> 17.2, 1x1/2 256->512 to 7x7
// 0.99 -> 0.93; at 14x14 (196 outputs) no change (8.3 -> 8.4, 16.4 -> 16.4), so at a batch of
// at least the thread count the forward goes side by side only up to kSideBySideForwardOutputs.
constexpr int64_t kSideBySideMaxOutputs = 256;
constexpr int64_t kSideBySideColumns = 1024;
constexpr int64_t kSideBySideForwardOutputs = 100;  // the forward's limit at a batch >= threads

// The tag of the narrow kernel's packed layout in the packed weight cache: its address tells it
// apart (the value differs from the other layouts' tags, conv_direct.cc's 1, so that no linker
// folds them).
const char kNarrowLayout = 2;

template <typename T>
void conv_forward_typed(const OpContext& ctx, const ConvGeometry& g, const std::vector<TBlob>& in,
                        const std::vector<TBlob>& out) {
  if constexpr (std::is_same_v<T, float>) {
    const float* weight = in[1].data<float>();
    const float* bias = in.size() == 3 ? in[2].data<float>() : nullptr;
    const int bias_input = in.size() == 3 ? 2 : -1;
    const bool fused_relu = nn::conv_fused_relu(*ctx.attrs);
    if (nn::conv2d_direct_f32_handles(g)) {  // Note [Direct convolution]
      const int64_t scratch = nn::conv2d_direct_f32_scratch(g);
      const std::shared_ptr<const nn::DirectConvWeights> weights =
          nn::conv2d_direct_f32_weights(ctx, g, 1, weight, bias_input, bias);
      nn::conv2d_direct_f32(
          g, in[0].data<float>(), *weights, fused_relu, out[0].data<float>(),
          scratch ? static_cast<float*>(ctx.workspace(scratch * sizeof(float))) : nullptr);
      return;
    }
    if (nn::conv2d_narrow_f32_handles(g)) {  // Note [Narrow direct convolution]
      // Note [Packed weight cache]
      PackedWeightKey key = packed_weight_key(ctx, &kNarrowLayout, 1, weight, bias_input, bias);
      key.dims[0] = g.out_c;
      key.dims[1] = g.in_c * g.k_sp;
      key.dims[2] = nn::conv2d_narrow_f32_block_channels(g);
      const int64_t packed_floats = nn::conv2d_narrow_f32_packed_floats(g);
      const std::shared_ptr<const void> cached =
          cached_packed_weights(key, packed_floats * sizeof(float), [&] {
            auto packed = std::make_shared<std::vector<float>>(packed_floats);
            nn::conv2d_narrow_f32_pack(g, weight, bias, packed->data());
            return std::shared_ptr<const void>(std::move(packed));
          });
      // Uncached, the packed weights go to the workspace, not a fresh allocation: they reach
      // 9.4 MB (512 x 512 x 3 x 3), whose new pages cost a fifth of the convolution at batch 1.
      const int64_t scratch = nn::conv2d_narrow_f32_scratch(g);
      float* workspace = static_cast<float*>(
          ctx.workspace((scratch + (cached ? 0 : packed_floats)) * sizeof(float)));
      const float* packed;
      if (cached) {
        packed = static_cast<const std::vector<float>*>(cached.get())->data();
      } else {
        nn::conv2d_narrow_f32_pack(g, weight, bias, workspace + scratch);
        packed = workspace + scratch;
      }
      nn::conv2d_narrow_f32(g, in[0].data<float>(), packed, fused_relu, out[0].data<float>(),
                            scratch ? workspace : nullptr);
      return;
    }
  }
  const bool pointwise = g.is_pointwise();
  const int64_t x_size = g.batch * g.in_c * g.in_sp, y_size = g.batch * g.out_c * g.out_sp;
  const int64_t w_size = in[1].size();
  auto padded = [](int64_t count) {
    return static_cast<int64_t>(Carver::align(count * sizeof(T)) / sizeof(T));
  };
  // Note [Images side by side]: blocks of `block` images, one part, whose outputs go through
  // out_block (Mg x block * out_sp) on their way to y.
  const bool side_by_side =
      g.out_sp < kSideBySideMaxOutputs &&
      (g.out_sp <= kSideBySideForwardOutputs || g.batch < parallel_max_threads());
  const int64_t block = side_by_side ? std::clamp<int64_t>(kSideBySideColumns / g.out_sp, 1,
                                                           std::max<int64_t>(g.batch, 1))
                                     : 1;
  const int64_t col_size = side_by_side ? padded(g.col_rows() * block * g.out_sp)
                           : pointwise  ? 0
                                        : padded(g.col_rows() * g.out_sp);
  const int64_t out_block_size = side_by_side ? padded(g.out_cg() * block * g.out_sp) : 0;
  const int64_t parts = side_by_side ? 1 : parallel_parts(g.batch, 1);
  size_t bytes = (parts * col_size + out_block_size) * sizeof(T);
  if (g.channel_last) bytes += Carver::align(x_size * sizeof(T)) + Carver::align(y_size * sizeof(T)) +
                               Carver::align(w_size * sizeof(T));
  Carver ws(static_cast<char*>(ctx.workspace(bytes)));
  T* cols = ws.take<T>(parts * col_size);
  T* out_block = ws.take<T>(out_block_size);
  const T* x = in[0].data<T>();
  const T* w = in[1].data<T>();
  T* y = out[0].data<T>();
  if (g.channel_last) {
    T* xt = ws.take<T>(x_size);
    T* wt = ws.take<T>(w_size);
    transpose_last2(x, xt, g.batch, g.in_sp, g.in_c);
    transpose_last2(w, wt, g.out_c, g.k_sp, g.in_cg());
    x = xt;
    w = wt;
    y = ws.take<T>(y_size);
  }
  const int64_t K = g.col_rows();
  const T* b = in.size() == 3 ? in[2].data<T>() : nullptr;
  const bool relu = nn::conv_fused_relu(*ctx.attrs);
  // Fills `colg` for image n, group grp (or points it at the image for a pointwise kernel).
  auto image_col = [&](int64_t n, int64_t grp, T* col) -> const T* {
    T* xg = const_cast<T*>(x) + (n * g.in_c + grp * g.in_cg()) * g.in_sp;
    if (pointwise) return xg;
    im2col<T, false>(g, g.in_cg(), xg, col, g.out_sp);
    return col;
  };
  // Output columns [lo, hi) of image n, group grp: y = W . col, plus the bias, then the relu.
  auto image_columns = [&](int64_t n, int64_t grp, const T* colg, int64_t lo, int64_t hi) {
    T* yg = y + (n * g.out_c + grp * g.out_cg()) * g.out_sp;
    nn::gemm(false, false, g.out_cg(), hi - lo, K, T(1), w + grp * g.out_cg() * K, K, colg + lo,
             g.out_sp, T(0), yg + lo, g.out_sp);
    if (!b && !relu) return;
    for (int64_t c = 0; c < g.out_cg(); ++c) {
      T* yc = yg + c * g.out_sp;
      add_bias_relu(yc + lo, yc + lo, hi - lo, b ? b[grp * g.out_cg() + c] : T(0), relu);
    }
  };
  // Note [Images side by side]: image i of a block owns columns [i * out_sp, (i + 1) * out_sp)
  // of col (K x ld) and of out_block (Mg x ld).
  auto block_of_images = [&](int64_t first, int64_t count) {
    const int64_t ld = block * g.out_sp, columns = count * g.out_sp;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const int64_t channel0 = grp * g.in_cg(), filter0 = grp * g.out_cg();
      parallel_for(0, count, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          T* xg = const_cast<T*>(x) + ((first + i) * g.in_c + channel0) * g.in_sp;
          im2col<T, false>(g, g.in_cg(), xg, cols + i * g.out_sp, ld);
        }
      });
      nn::gemm(false, false, g.out_cg(), columns, K, T(1), w + filter0 * K, K, cols, ld, T(0),
               out_block, ld);
      parallel_for(0, g.out_cg(), 1, [&](int64_t lo, int64_t hi) {
        for (int64_t c = lo; c < hi; ++c) {
          for (int64_t i = 0; i < count; ++i) {
            const T* src = out_block + c * ld + i * g.out_sp;
            T* dst = y + ((first + i) * g.out_c + filter0 + c) * g.out_sp;
            if (b || relu) {
              add_bias_relu(src, dst, g.out_sp, b ? b[filter0 + c] : T(0), relu);
            } else {
              std::memcpy(dst, src, g.out_sp * sizeof(T));
            }
          }
        }
      });
    }
  };
  if (side_by_side) {
    for (int64_t first = 0; first < g.batch; first += block)
      block_of_images(first, std::min(block, g.batch - first));
  } else if (g.batch >= parallel_max_threads()) {
    // Images are independent: each part of the batch runs on its own thread with its own col.
    parallel_for_parts(g.batch, 1, [&](int64_t part, int64_t first, int64_t last) {
      for (int64_t n = first; n < last; ++n)
        for (int64_t grp = 0; grp < g.groups; ++grp)
          image_columns(n, grp, image_col(n, grp, cols + part * col_size), 0, g.out_sp);
    });
  } else {
    // Fewer images than threads (inference at batch 1): split each image's GEMM by output
    // columns instead; the threads share one col.
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const T* colg = image_col(n, grp, cols);
        parallel_for(0, g.out_sp, 256, [&](int64_t lo, int64_t hi) {
          image_columns(n, grp, colg, lo, hi);
        });
      }
    }
  }
  if (g.channel_last) transpose_last2<T>(y, out[0].data<T>(), g.batch, g.out_c, g.out_sp);
}

void conv_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const ConvGeometry g = nn::conv_geometry(*ctx.attrs, in[0].shape, in[1].shape);
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, { conv_forward_typed<T>(ctx, g, in, out); });
}

void conv_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                         const std::vector<DType>& dt, std::vector<Shape>* out,
                         std::vector<DType>* out_dt) {
  const bool relu = nn::conv_fused_relu(attrs);
  const size_t expected = relu ? 4 : 3;
  PMX_CHECK(in.size() == expected, "convolution_backward: expected ", expected,
            " inputs (out_grad, data, weight", relu ? ", out" : "", ") with act_type=",
            attrs.get_str("act_type", "None"), ", got ", in.size());
  check_cudnn_attrs(attrs);
  const ConvGeometry g = nn::conv_geometry(attrs, in[1], in[2]);
  const Shape w = weight_shape(g, attrs.get_shape("kernel"));
  PMX_CHECK(in[2] == w, "convolution_backward: weight shape ", shape_str(in[2]),
            " does not match data ", shape_str(in[1]), " (expected ", shape_str(w), ")");
  PMX_CHECK(in[0] == out_shape(g), "convolution_backward: out_grad shape ", shape_str(in[0]),
            " does not match the output shape ", shape_str(out_shape(g)));
  if (relu) {
    PMX_CHECK(in[3] == in[0], "convolution_backward: out shape ", shape_str(in[3]),
              " does not match out_grad shape ", shape_str(in[0]));
  }
  nn::check_same_float(dt, "convolution_backward");
  out->clear();
  if (nn::need_data_grad(attrs)) out->push_back(in[1]);
  out->push_back(in[2]);
  if (!attrs.get_bool("no_bias", false)) out->push_back({g.out_c});
  *out_dt = std::vector<DType>(out->size(), dt[1]);
}

// (n, a, b) -> (n, b, a) like transpose_last2, keeping src where `keep` (same layout as src) is
// positive and writing 0 elsewhere: relu's gradient mask for channel-last layouts.
template <typename T>
void transpose_last2_relu_masked(const T* src, const T* keep, T* dst, int64_t n, int64_t a,
                                 int64_t b) {
  for (int64_t i = 0; i < n * a * b; i += a * b) {
    for (int64_t r = 0; r < a; ++r)
      for (int64_t c = 0; c < b; ++c) {
        const T grad = src[i + r * b + c], out = keep[i + r * b + c];  // unconditional loads
        dst[i + c * a + r] = out > T(0) ? grad : T(0);
      }
  }
}

// masked[i] = out[i] > 0 ? grad[i] : 0 for i in [0, n), relu's gradient recovered from its output
// (Note [Fused convolution + relu]); returns the sum of masked, in kLanes lanes (Note [Lane sums]).
// Both loads are unconditional so that GCC if-converts and vectorises the select: a branch on the
// data is mispredicted half the time (see act_backward_loop, nn_activation.cc).
template <typename A, typename T>
A relu_mask_sum(const T* grad, const T* out, T* __restrict masked, int64_t n) {
  A part[nn::kLanes] = {};
  int64_t i = 0;
  for (; i + nn::kLanes <= n; i += nn::kLanes)
    for (int j = 0; j < nn::kLanes; ++j) {
      const T g = grad[i + j], o = out[i + j];
      const T m = o > T(0) ? g : T(0);
      masked[i + j] = m;
      part[j] += static_cast<A>(m);
    }
  A total = 0;
  for (; i < n; ++i) {
    const T g = grad[i], o = out[i];
    const T m = o > T(0) ? g : T(0);
    masked[i] = m;
    total += static_cast<A>(m);
  }
  for (int j = 0; j < nn::kLanes; ++j) total += part[j];
  return total;
}

// Note [Data gradient as a direct convolution]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With stride 1, no dilation and one group, the data gradient of a convolution is itself a
// stride-1 convolution of out_grad, padded by kernel - 1 - pad, with the weight flipped in space
// and its two channel axes swapped:
//   dx[c][i][j] = sum over f, u, v of
//                 dy[f][i + u - (kh - 1 - ph)][j + v - (kw - 1 - pw)] * w[f][c][kh - 1 - u][kw - 1 - v].
// So for float32 the direct kernel (Note [Direct convolution]) computes it, image by image, straight
// into data_grad, in place of the GEMM into col and the col2im that sums col back into the image.
// LeafNetwork's conv2 / conv3 forward + backward at batch 64 (bench/conv_bench.py, 2 threads):
// 58.5 / 44.3 ms -> 47.6 / 36.5 ms with OpenBLAS's AVX2 kernels (OPENBLAS_CORETYPE=Haswell).

// Note [Fewer images than threads]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The backward splits the batch into parts, one image at least per part, so a batch smaller than
// the intra-op thread count leaves threads idle (batch 1 ran on one core). When the direct
// kernels take both gradients, such a batch is one part instead, its images run in order, and
// each image's work is split across the threads: the channels of relu's mask pass, the filter
// tiles of the weight gradient (disjoint sums, Note [Direct weight gradient]) and the output bands
// of the data gradient. Every sum is still made by one thread in a fixed order, so results are
// reproducible on a machine, as with parts. Batch 1, 2 threads, conv2 / conv3 backward (the op
// alone, dispatch included): 0.57 -> 0.41 / 0.57 -> 0.45 ms; LeafNetwork training, hybridized,
// 4 interleaved pairs of runs: +6 to +22 %, median +10 %.

// Note [Data and weight gradients apart]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Layers whose data gradient the stride-1 direct kernel cannot take (stride 2, or rows under 16
// wide: resnet's 3x3/2 layers and its 14x14 and 7x7 layers) have it computed by the phased
// kernel of Note [Direct data gradient by phases], over the whole batch in one call after the
// weight gradient's loop, which then computes no data gradient. So the weight gradient keeps its
// own choice (side by side for outputs under kSideBySideMaxOutputs, parts of GEMMs, or direct),
// and the side-by-side GEMMs for the narrow layers stay. Batch 8, 2 threads, data gradient
// alone (backward with and without it), ms, GEMM + col2im -> phased, medians of 3 interleaved
// runs (load 3.6-3.9 on the 2 cores; a second series at load 3.5-4.3 in brackets): 3x3/2 64->128
// at 56 6.0 -> 4.3 (5.6 -> 5.3), 3x3/2 128->256 at 28 5.2 -> 2.9 (5.9 -> 4.9), 3x3/2 256->512
// at 14 9.9 -> 3.8 (9.2 -> 6.9), 3x3 256->256 at 14 16.7 -> 10.2 (25.6 -> 12.5), 3x3 512->512
// at 7 17.1 -> 10.1 (27.6 -> 11.2).

// The geometry of that convolution for one image; false when the direct kernel does not take it.
bool direct_data_grad_geometry(const ConvGeometry& g, ConvGeometry* gt) {
  if (g.channel_last || g.groups != 1) return false;
  for (int i = 0; i < 3; ++i)
    if (g.s[i] != 1 || g.d[i] != 1 || g.p[i] > g.k[i] - 1) return false;
  *gt = g;
  gt->batch = 1;
  gt->in_c = g.out_c;
  gt->out_c = g.in_c;
  for (int i = 0; i < 3; ++i) {
    gt->in[i] = g.out[i];
    gt->out[i] = g.in[i];
    gt->p[i] = g.k[i] - 1 - g.p[i];
  }
  gt->finish();
  return nn::conv2d_direct_f32_handles(*gt);
}

// The weight (F, C, kh, kw) of g as that convolution's (C, F, kh, kw), flipped in space, packed.
nn::DirectConvWeights data_grad_weights(const ConvGeometry& g, const ConvGeometry& gt,
                                        const float* w) {
  const int64_t F = g.out_c, C = g.in_c, kh = g.k[1], kw = g.k[2];
  std::vector<float> flipped(F * C * kh * kw);
  for (int64_t f = 0; f < F; ++f)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t u = 0; u < kh; ++u)
        for (int64_t v = 0; v < kw; ++v)
          flipped[((c * F + f) * kh + u) * kw + v] =
              w[((f * C + c) * kh + (kh - 1 - u)) * kw + (kw - 1 - v)];
  return nn::conv2d_direct_f32_pack(gt, flipped.data(), nullptr);
}

// Note [Adding the parts' weight gradients]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each part of the batch leaves its weight gradient in its own buffer, transposed (Note [Weight
// gradient transposed]); weight_grad is their sum in part order, transposed back. One pass does
// both, tile by tile: a tile of kSumRows x kSumCols of a group's K x Mg matrix is read from every
// part a row at a time (contiguous), added in part order into a buffer that stays in L1, and
// written out transposed (kSumRows contiguous elements per row of weight_grad). The tiles are
// split across the intra-op threads, and each element's sum is made by one thread, in part order,
// from 0, so the result does not depend on the thread count or scheduling and equals an
// element-by-element loop over the parts bitwise. An element-by-element loop on one thread reads
// each part with a stride of Mg elements (2 KB for 512 filters): resnet18's 3x3 512->512
// convolution at 7x7, batch 8 (8 parts of 9.4 MB) spent 146 ms in it, against 18 ms for all the
// images' weight-gradient GEMMs on one thread.
constexpr int64_t kSumRows = 16, kSumCols = 64;

// dw[grp * mg * k_count + m * k_count + k] = the sum over part in [0, parts), in order, of
// parts_t[part * part_stride + grp * mg * k_count + k * mg + m] (element (k, m) of the part's
// weight_grad_grp^T). With no parts (an empty batch) dw is zero.
template <typename T>
void sum_parts_transposed(const T* parts_t, int64_t parts, int64_t part_stride, int64_t groups,
                          int64_t mg, int64_t k_count, T* dw) {
  const int64_t row_tiles = (k_count + kSumRows - 1) / kSumRows;
  // About 32K elements read per chunk at least, so that a small weight stays on one thread.
  const int64_t tile_reads = std::max<int64_t>(parts * kSumRows * mg, 1);
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / tile_reads);
  parallel_for(0, groups * row_tiles, grain, [&](int64_t lo, int64_t hi) {
    T tile[kSumRows][kSumCols];
    for (int64_t index = lo; index < hi; ++index) {
      const int64_t base = index / row_tiles * mg * k_count, k0 = index % row_tiles * kSumRows;
      const int64_t rows = std::min(kSumRows, k_count - k0);
      for (int64_t m0 = 0; m0 < mg; m0 += kSumCols) {
        const int64_t cols = std::min(kSumCols, mg - m0);
        for (int64_t r = 0; r < rows; ++r) std::fill(tile[r], tile[r] + cols, T(0));
        for (int64_t part = 0; part < parts; ++part) {
          const T* src = parts_t + part * part_stride + base + k0 * mg + m0;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) tile[r][c] += src[r * mg + c];
        }
        for (int64_t c = 0; c < cols; ++c) {
          T* dst = dw + base + (m0 + c) * k_count + k0;
          for (int64_t r = 0; r < rows; ++r) dst[r] = tile[r][c];
        }
      }
    }
  });
}

template <typename T>
void conv_backward_typed(const OpContext& ctx, const ConvGeometry& g, const std::vector<TBlob>& in,
                         const std::vector<TBlob>& out) {
  const bool pointwise = g.is_pointwise();
  const bool relu = in.size() == 4;
  const bool want_dx = nn::need_data_grad(*ctx.attrs);
  const TBlob& dw_out = out[want_dx ? 1 : 0];
  const bool want_db = out.size() == (want_dx ? 3u : 2u);
  // Channel-first relu masks each image's out_grad into a per-part block (Note [Fused
  // convolution + relu]); channel-last masks while transposing out_grad.
  const bool mask_per_image = relu && !g.channel_last;
  const int64_t x_size = g.batch * g.in_c * g.in_sp, y_size = g.batch * g.out_c * g.out_sp;
  const int64_t w_size = in[2].size();
  auto padded = [](int64_t count) {
    return static_cast<int64_t>(Carver::align(count * sizeof(T)) / sizeof(T));
  };
  ConvGeometry gt;  // Note [Data gradient as a direct convolution]
  const bool direct_dx = std::is_same_v<T, float> && want_dx && direct_data_grad_geometry(g, &gt);
  const int64_t direct_scratch_size = direct_dx ? nn::conv2d_direct_f32_scratch(gt) : 0;
  // Note [Data and weight gradients apart]: the whole batch in one call (Note [Direct data
  // gradient by phases]); the weight gradient chooses its own path.
  const bool phased_dx = std::is_same_v<T, float> && want_dx && !direct_dx &&
                         nn::conv2d_data_grad_f32_handles(g);
  const int64_t phased_scratch_size = phased_dx ? nn::conv2d_data_grad_f32_scratch(g) : 0;
  // Note [Direct weight gradient]; with stride 2 across, only where no GEMM data gradient is
  // left (Note [Strided direct weight gradient]).
  const bool direct_dw = std::is_same_v<T, float> && nn::conv2d_weight_grad_f32_handles(g) &&
                         (g.s[2] == 1 || !want_dx || direct_dx || phased_dx);
  const int64_t direct_dw_scratch_size = direct_dw ? nn::conv2d_weight_grad_f32_scratch(g) : 0;
  const bool all_direct = direct_dw && (direct_dx || phased_dx || !want_dx);  // no GEMM left
  // Note [Fewer images than threads]: then one part holds every image.
  const int64_t batch_parts = parallel_parts(g.batch, 1);
  const bool split_images = all_direct && batch_parts < parallel_max_threads();
  // Note [Images side by side]: blocks of `block` images, one part.
  const bool side_by_side = !direct_dw && !direct_dx && g.out_sp < kSideBySideMaxOutputs;
  const int64_t block = side_by_side ? std::clamp<int64_t>(kSideBySideColumns / g.out_sp, 1,
                                                           std::max<int64_t>(g.batch, 1))
                                     : 1;
  const int64_t parts = split_images   ? 1
                        : side_by_side ? std::min<int64_t>(g.batch, 1)  // none to add if empty
                                       : batch_parts;
  const int64_t tiles = direct_dw ? nn::conv2d_weight_grad_f32_tiles(g) : 0;
  const int64_t dw_scratch_parts = split_images ? parallel_parts(tiles, 1) : parts;
  // col holds im2col's matrix for the GEMM weight gradient and the GEMM data gradient's columns.
  const int64_t col_size = side_by_side ? padded(g.col_rows() * block * g.out_sp)
                           : pointwise || all_direct ? 0
                                                     : padded(g.col_rows() * g.out_sp);
  const int64_t dy_block = side_by_side     ? padded(g.out_c * block * g.out_sp)
                           : mask_per_image ? padded(g.out_c * g.out_sp)
                                            : 0;
  const int64_t w_pad = padded(w_size);
  size_t bytes = Carver::align(parts * col_size * sizeof(T)) +
                 Carver::align(parts * dy_block * sizeof(T)) +
                 Carver::align(parts * w_pad * sizeof(T)) +
                 Carver::align(std::max<int64_t>(parts, 1) * g.out_c * sizeof(T)) +
                 Carver::align(parts * direct_scratch_size * sizeof(float)) +
                 Carver::align(dw_scratch_parts * direct_dw_scratch_size * sizeof(float)) +
                 Carver::align(phased_scratch_size * sizeof(float));
  if (g.channel_last) {
    bytes += Carver::align(x_size * sizeof(T)) * (want_dx ? 2 : 1) +
             Carver::align(y_size * sizeof(T)) + 2 * Carver::align(w_size * sizeof(T));
  }
  Carver ws(static_cast<char*>(ctx.workspace(bytes)));
  T* cols = ws.take<T>(parts * col_size);
  T* dy_blocks = ws.take<T>(parts * dy_block);
  T* dwt_parts = ws.take<T>(parts * w_pad);
  T* db_parts = ws.take<T>(std::max<int64_t>(parts, 1) * g.out_c);
  std::fill(db_parts, db_parts + std::max<int64_t>(parts, 1) * g.out_c, T(0));
  float* direct_scratch = ws.take<float>(parts * direct_scratch_size);
  float* direct_dw_scratch = ws.take<float>(dw_scratch_parts * direct_dw_scratch_size);
  float* phased_scratch = ws.take<float>(phased_scratch_size);
  nn::DirectConvWeights direct_weights;
  if constexpr (std::is_same_v<T, float>) {
    if (direct_dx) direct_weights = data_grad_weights(g, gt, in[2].data<float>());
  }
  const T* dy = in[0].data<T>();
  const T* x = in[1].data<T>();
  const T* w = in[2].data<T>();
  const T* y = relu ? in[3].data<T>() : nullptr;
  T* dx = want_dx ? out[0].data<T>() : nullptr;
  T* dw = dw_out.data<T>();
  if (g.channel_last) {
    T* dyt = ws.take<T>(y_size);
    T* xt = ws.take<T>(x_size);
    T* wt = ws.take<T>(w_size);
    if (relu) {
      transpose_last2_relu_masked(dy, y, dyt, g.batch, g.out_sp, g.out_c);
    } else {
      transpose_last2(dy, dyt, g.batch, g.out_sp, g.out_c);
    }
    transpose_last2(x, xt, g.batch, g.in_sp, g.in_c);
    transpose_last2(w, wt, g.out_c, g.k_sp, g.in_cg());
    dy = dyt;
    x = xt;
    w = wt;
    if (want_dx) dx = ws.take<T>(x_size);
    dw = ws.take<T>(w_size);
  }
  T* dx_by_image = phased_dx ? nullptr : dx;  // the data gradient the image loops compute
  const int64_t K = g.col_rows();
  // Images run in parallel parts (or, split_images, in order in one part; or side by side in
  // blocks, Note [Images side by side], below). data_grad rows are disjoint per image; weight_grad
  // and bias_grad are summed per part into their own buffers and the parts are added in order
  // afterwards, so the result does not depend on how the threads interleave.
  // Calls fn(lo, hi) over [0, n): split across the threads when the images are not.
  auto within_image = [split_images](int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    if (split_images) {
      parallel_for(0, n, 1, fn);
    } else {
      fn(0, n);
    }
  };
  auto per_part = [&](int64_t part, int64_t first, int64_t last) {
    T* col = cols + part * col_size;
    T* dwt_part = dwt_parts + part * w_pad;
    T* db_part = db_parts + part * g.out_c;
    if (direct_dw) std::fill(dwt_part, dwt_part + w_size, T(0));
    for (int64_t n = first; n < last; ++n) {
      const T* dyn = dy + n * g.out_c * g.out_sp;
      if (mask_per_image) {
        // One pass masks the image's out_grad and sums the bias gradient from it.
        T* masked = dy_blocks + part * dy_block;
        const T* yn = y + n * g.out_c * g.out_sp;
        within_image(g.out_c, [&](int64_t lo, int64_t hi) {
          for (int64_t c = lo; c < hi; ++c) {
            const int64_t off = c * g.out_sp;
            const T sum = relu_mask_sum<T>(dyn + off, yn + off, masked + off, g.out_sp);
            if (want_db) db_part[c] += sum;
          }
        });
        dyn = masked;
      } else if (want_db) {
        within_image(g.out_c, [&](int64_t lo, int64_t hi) {
          for (int64_t c = lo; c < hi; ++c)
            db_part[c] += nn::lane_sum<T>(dyn + c * g.out_sp, g.out_sp);
        });
      }
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        T* xg = const_cast<T*>(x) + (n * g.in_c + grp * g.in_cg()) * g.in_sp;
        const T* dyg = dyn + grp * g.out_cg() * g.out_sp;
        const T* wg = w + grp * g.out_cg() * K;
        if constexpr (std::is_same_v<T, float>) {
          if (direct_dw && split_images) {  // one group: the image's weight gradient, transposed
            parallel_for_parts(tiles, 1, [&](int64_t tile_part, int64_t lo, int64_t hi) {
              nn::conv2d_weight_grad_f32_image(
                  g, xg, dyg, dwt_part, direct_dw_scratch + tile_part * direct_dw_scratch_size,
                  lo, hi);
            });
          } else if (direct_dw) {
            nn::conv2d_weight_grad_f32_image(g, xg, dyg, dwt_part,
                                             direct_dw_scratch + part * direct_dw_scratch_size, 0,
                                             tiles);
          }
        }
        if (!direct_dw) {
          const T* colg = xg;
          if (!pointwise) {
            im2col<T, false>(g, g.in_cg(), xg, col, g.out_sp);
            colg = col;
          }
          // weight_grad_g^T (K x Mg) (+)= col (K x out_sp) . dy_g^T (out_sp x Mg); see Note
          // [Weight gradient transposed].
          nn::gemm(false, true, K, g.out_cg(), g.out_sp, T(1), colg, g.out_sp, dyg, g.out_sp,
                   T(n == first ? 0 : 1), dwt_part + grp * g.out_cg() * K, g.out_cg());
        }
        if (!dx_by_image) continue;
        T* dxg = dx_by_image + (n * g.in_c + grp * g.in_cg()) * g.in_sp;
        if constexpr (std::is_same_v<T, float>) {
          if (direct_dx) {  // one group: dyg is the image's whole out_grad
            nn::conv2d_direct_f32(gt, dyg, direct_weights, false, dxg,
                                  direct_scratch + part * direct_scratch_size);
            continue;
          }
        }
        if (pointwise) {
          // data_grad_g (K x out_sp) = W_g^T . dy_g directly: the image is its own col matrix.
          nn::gemm(true, false, K, g.out_sp, g.out_cg(), T(1), wg, K, dyg, g.out_sp, T(0), dxg,
                   g.out_sp);
        } else {
          nn::gemm(true, false, K, g.out_sp, g.out_cg(), T(1), wg, K, dyg, g.out_sp, T(0), col,
                   g.out_sp);
          im2col<T, true>(g, g.in_cg(), dxg, col, g.out_sp);
        }
      }
    }
  };
  // Note [Images side by side]: image i of a block owns columns [i * out_sp, (i + 1) * out_sp)
  // of col (K x ld) and of the gathered out_grad (out_c x ld).
  auto block_of_images = [&](int64_t first, int64_t count) {
    const int64_t ld = block * g.out_sp, columns = count * g.out_sp;
    T* gathered = dy_blocks;
    parallel_for(0, g.out_c, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        for (int64_t i = 0; i < count; ++i) {
          const int64_t off = ((first + i) * g.out_c + c) * g.out_sp;
          T* dst = gathered + c * ld + i * g.out_sp;
          T sum;
          if (mask_per_image) {
            sum = relu_mask_sum<T>(dy + off, y + off, dst, g.out_sp);
          } else {
            std::memcpy(dst, dy + off, g.out_sp * sizeof(T));
            sum = want_db ? nn::lane_sum<T>(dst, g.out_sp) : T(0);
          }
          if (want_db) db_parts[c] += sum;
        }
      }
    });
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const int64_t channel0 = grp * g.in_cg();
      parallel_for(0, count, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          T* xg = const_cast<T*>(x) + ((first + i) * g.in_c + channel0) * g.in_sp;
          im2col<T, false>(g, g.in_cg(), xg, cols + i * g.out_sp, ld);
        }
      });
      const T* dyg = gathered + grp * g.out_cg() * ld;
      // weight_grad_g^T (K x Mg) (+)= col (K x columns) . dy_g^T, the blocks added in order.
      nn::gemm(false, true, K, g.out_cg(), columns, T(1), cols, ld, dyg, ld,
               T(first == 0 ? 0 : 1), dwt_parts + grp * g.out_cg() * K, g.out_cg());
      if (!dx_by_image) continue;
      nn::gemm(true, false, K, columns, g.out_cg(), T(1), w + grp * g.out_cg() * K, K, dyg, ld,
               T(0), cols, ld);
      parallel_for(0, count, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
          im2col<T, true>(g, g.in_cg(), dx_by_image + ((first + i) * g.in_c + channel0) * g.in_sp,
                          cols + i * g.out_sp, ld);
      });
    }
  };
  if (side_by_side) {
    for (int64_t first = 0; first < g.batch; first += block)
      block_of_images(first, std::min(block, g.batch - first));
  } else if (split_images) {
    per_part(0, 0, g.batch);
  } else {
    parallel_for_parts(g.batch, 1, per_part);
  }
  if constexpr (std::is_same_v<T, float>) {
    if (phased_dx) {  // channel-first: dy, y and w are the op's own inputs
      nn::conv2d_data_grad_f32(g, dy, mask_per_image ? y : nullptr, w, dx, phased_scratch);
    }
  }
  sum_parts_transposed(dwt_parts, parts, w_pad, g.groups, g.out_cg(), K, dw);
  if (want_db) {
    T* db = out.back().data<T>();
    for (int64_t c = 0; c < g.out_c; ++c) {
      T sum = 0;
      for (int64_t part = 0; part < std::max<int64_t>(parts, 1); ++part)
        sum += db_parts[part * g.out_c + c];
      db[c] = static_cast<T>(sum);
    }
  }
  if (g.channel_last) {
    if (want_dx) transpose_last2<T>(dx, out[0].data<T>(), g.batch, g.in_c, g.in_sp);
    transpose_last2<T>(dw, dw_out.data<T>(), g.out_c, g.in_cg(), g.k_sp);
  }
}

void conv_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const ConvGeometry g = nn::conv_geometry(*ctx.attrs, in[1].shape, in[2].shape);
  PMX_FLOAT_WIDE_SWITCH(in[1].dtype, T, { conv_backward_typed<T>(ctx, g, in, out); });
}

std::vector<NDArray> conv_gradient(const GradContext& ctx) {
  std::vector<NDArray> inputs = {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1]};
  if (nn::conv_fused_relu(ctx.attrs)) inputs.push_back(ctx.outputs[0]);  // relu's mask
  return nn::backward_skipping_data_grad("convolution_backward", ctx, inputs);
}

PMX_REGISTER_OP(convolution)
    .set_num_inputs(-1)
    .set_infer(conv_infer)
    .set_cpu(nn::through_float(conv_forward))
    .set_gradient(conv_gradient);

PMX_REGISTER_OP(convolution_backward)
    .set_num_inputs(-1)
    .set_num_outputs([](const Attrs& a) {
      return 1 + int(nn::need_data_grad(a)) + int(!a.get_bool("no_bias", false));
    })
    .set_infer(conv_backward_infer)
    .set_cpu(nn::through_float(conv_backward));

}  // namespace
}  // namespace pymx
