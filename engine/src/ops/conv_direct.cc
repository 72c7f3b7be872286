// Direct 2-D float convolution for few input taps (conv_direct.h).
//
// Note [Direct convolution]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// im2col + GEMM (Note [Convolution by im2col]) copies every input kh * kw times and, with few
// taps per output (K = C * kh * kw = 12 for LeafNetwork's first layer), spends its time packing
// and storing rather than multiplying; at small batches it also splits poorly across threads.
// Here each output is computed in place: L consecutive outputs of a row (8 with AVX2, 16 with
// AVX-512) for 8 output channels at once, and for each tap one unaligned load of L inputs and 8
// multiply-adds with the tap's weights broadcast. With AVX-512's 32 registers two output rows
// share the broadcasts (16 accumulators, which also hides the multiply-add latency); AVX2 has 16
// registers and takes one row. The weights are rearranged once per call as [channel block][tap]
// [8], zero-padded to a whole block, so the last block needs no special case (its extra lanes are
// computed and dropped). A row whose width is not a multiple of L ends with a block that overlaps
// the one before: those outputs are computed twice, identically, and every load stays in the row.
// Padding: each band of output rows first copies the input rows it reads into a zero-bordered
// scratch, so the inner loop never tests bounds. Work is split into bands of kBandRows output rows
// of one image (all output channels), claimed by the intra-op threads; the input band stays in
// cache while every channel block reads it.
// Measured on LeafNetwork's layers (2 threads, ms, direct vs im2col + OpenBLAS with its AVX-512
// kernels / with the AVX2 kernels that OPENBLAS_CORETYPE=Haswell selects): batch 1: conv1
// 0.07 vs 0.20 / 0.20, conv2 0.16 vs 0.27 / 0.39, conv3 0.17 vs 0.22 / 0.34; batch 64: conv1 7.5
// vs 8.2 / 9.6, conv2 12.9 vs 12.8 / 21.4, conv3 9.7 vs 8.8 / 15.4. Only the AVX-512 GEMM at a
// large batch and K = 256 is ahead (10 %), so every stride-1 2-D float convolution with up to
// kMaxTaps taps takes this kernel: one rule, and no dependence on which kernels OpenBLAS picked.
// Results differ from the GEMM path only in summation order (the tests compare both with float64
// NumPy within float32 tolerances).
// A 2 x 2 kernel (LeafNetwork's) has its own copy of the loops with the kernel size known when
// compiling: the ky and kx loops of two steps each are unrolled, so a channel's 4 taps are 64
// multiply-adds in a row without loop counters and branches in between. Same arithmetic in the
// same order. LeafNetwork inference, hybridized, 2 threads, samples/s: batch 1 1380 -> 1455,
// batch 4 1975 -> 2110, batch 64 1765 -> 2095.
//
// Note [Strided direct convolution]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With stride s down, output row r reads input rows r * s + ky: only the distance between output
// rows changes (Source::out_row_stride). Across, a vector load needs L consecutive inputs, but
// stride 2 wants every other one. So each band's input rows are copied once into the scratch
// with their even and odd padded columns apart (two phases of equal length): tap kx of output
// column ox reads padded column 2 * ox + kx, which is element ox + kx / 2 of phase kx % 2, and L
// consecutive outputs read L consecutive floats of one phase. A stride-2 convolution is thus the
// sum of stride-1 convolutions over the phases, computed in one pass: the taps of each kernel row
// run phase by phase (even kx, then odd kx), every load stays inside its phase, and a band's
// input rows are copied once for all its output channels. A 1-wide kernel reads one phase only and stays with im2col +
// GEMM, whose im2col is then just the subsampling. resnet18's layers at batch 8 on 2 threads
// (forward, ms, im2col + GEMM -> this, the fastest of 15 calls, medians of 4 interleaved runs,
// load 4-6): stem 7x7/2 3->64 at 224 25.5 -> 8.7, 3x3/2 64->128 at 56 9.0 -> 5.9; at batch 1
// 2.7 -> 1.1 and 1.1 -> 0.7.
#include "ops/conv_direct.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/packed_weight_cache.h"
#include "parallel.h"

namespace pymx {
namespace nn {
namespace {

constexpr int64_t kMaxTaps = 4608;  // 512 channels x 3 x 3: the weight block stays in L2
constexpr int kBlockChannels = kDirectConvBlockChannels;
constexpr int64_t kBandRows = 8;
// The tag of conv2d_direct_f32_pack's layout in the packed weight cache: its address tells it
// apart (the value differs from the other layouts' tags so that no linker folds them).
const char kPackedLayout = 1;

int64_t lanes(FmaLevel level) { return level == FmaLevel::kAvx512 ? 16 : 8; }

// One call's data, shared by its tasks.
struct Job {
  const ConvGeometry* g;
  const float* x;
  const float* blocked_weight;  // [channel block][tap][kBlockChannels]
  const float* blocked_bias;    // [channel block][kBlockChannels], zeros without a bias
  bool relu;
  float* y;
  int64_t bands_per_image;
  int64_t scratch_per_part;
};

// Input rows of one band (see Note [Strided direct convolution]): the input under output row r
// (counted from the band's first), output column ox (from the band's first column), tap (ky, kx)
// of channel c is at base[c * channel_stride + r * out_row_stride + ky * row_stride + ox + kx]
// with stride 1 across, and at base[... + (kx % 2) * phase_stride + ox + kx / 2] with stride 2,
// where each row is split into its even and odd columns.
struct Source {
  const float* base;
  int64_t channel_stride, row_stride, out_row_stride, phase_stride;
};

// Input rows a band of `out_rows` output rows reads: (first_row + r) * s[1] - p[1] for r in
// [0, band_rows(g, out_rows)).
int64_t band_rows(const ConvGeometry& g, int64_t out_rows) {
  return (out_rows - 1) * g.s[1] + g.k[1];
}

// Floats of one scratch row: the padded input row, with stride 2 as two phases of equal length.
int64_t phase_length(const ConvGeometry& g) { return (g.in[2] + 2 * g.p[2] + 1) / 2; }
int64_t scratch_row(const ConvGeometry& g) {
  return g.s[2] == 1 ? g.in[2] + 2 * g.p[2] : 2 * phase_length(g);
}

// The input rows that output rows [first_row, first_row + out_rows) of `image` read; with
// padding or stride 2 across, copied into `scratch` (band_scratch(g, out_rows) floats) between
// zero borders (and split into phases).
Source band_source(const ConvGeometry& g, const float* x, int64_t image, int64_t first_row,
                   int64_t out_rows, float* scratch) {
  const int64_t H = g.in[1], W = g.in[2], ph = g.p[1], pw = g.p[2], sh = g.s[1];
  const float* image_x = x + image * g.in_c * H * W;
  if (ph == 0 && pw == 0 && g.s[2] == 1)
    return {image_x + first_row * sh * W, H * W, W, sh * W, 0};
  const int64_t rows = band_rows(g, out_rows), row_floats = scratch_row(g);
  const int64_t phase = phase_length(g);
  for (int64_t c = 0; c < g.in_c; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      float* dst = scratch + (c * rows + r) * row_floats;
      const int64_t in_row = first_row * sh + r - ph;
      if (in_row < 0 || in_row >= H) {
        std::fill(dst, dst + row_floats, 0.0f);
        continue;
      }
      const float* src = image_x + (c * H + in_row) * W;
      if (g.s[2] == 1) {
        std::fill(dst, dst + pw, 0.0f);
        std::memcpy(dst + pw, src, W * sizeof(float));
        std::fill(dst + pw + W, dst + row_floats, 0.0f);
        continue;
      }
      // Padded column j goes to phase j % 2, place j / 2.
      std::fill(dst, dst + row_floats, 0.0f);
      for (int64_t col = 0; col < W; ++col) {
        const int64_t j = col + pw;
        dst[(j & 1) * phase + (j >> 1)] = src[col];
      }
    }
  }
  return {scratch, rows * row_floats, row_floats, sh * row_floats, phase};
}

int64_t band_scratch(const ConvGeometry& g, int64_t out_rows) {
  if (g.p[1] == 0 && g.p[2] == 0 && g.s[2] == 1) return 0;
  return g.in_c * band_rows(g, out_rows) * scratch_row(g);
}

// L outputs starting at column `col` of kRows consecutive output rows, for one block of channels:
// `in` is the input at (channel 0, first row's first kernel row, col), `w` and `bias` the block's.
// kKernel > 0: the kernel is kKernel x kKernel, known when compiling, so the tap loops unroll
// (see Note [Direct convolution]); 0: any kernel, read from g. kStride: the stride across (1 or
// 2); with 2 the taps of a kernel row run phase by phase (even kx, then odd kx).
template <typename V, int kRows, int kKernel, int kStride>
__attribute__((always_inline)) inline void block_outputs(const ConvGeometry& g, const Source& src,
                                                         const float* in, const float* w,
                                                         const float* bias, int64_t channels,
                                                         bool relu, float* y, int64_t out_plane) {
  const int64_t kh = kKernel > 0 ? kKernel : g.k[1], kw = kKernel > 0 ? kKernel : g.k[2];
  const V zero = {};
  V acc[kBlockChannels][kRows];
#pragma GCC unroll 8
  for (int o = 0; o < kBlockChannels; ++o)
    for (int r = 0; r < kRows; ++r) acc[o][r] = zero + bias[o];
  for (int64_t c = 0; c < g.in_c; ++c) {
    for (int64_t ky = 0; ky < kh; ++ky, w += kw * kBlockChannels) {
      const float* row = in + c * src.channel_stride + ky * src.row_stride;
      for (int phase = 0; phase < kStride; ++phase) {
        const float* phase_row = row + phase * src.phase_stride;
        for (int64_t kx = phase; kx < kw; kx += kStride) {
          const float* tap = phase_row + kx / kStride;
          const float* wk = w + kx * kBlockChannels;
          V v[kRows];
          for (int r = 0; r < kRows; ++r)
            std::memcpy(&v[r], tap + r * src.out_row_stride, sizeof(V));
#pragma GCC unroll 8
          for (int o = 0; o < kBlockChannels; ++o)
            for (int r = 0; r < kRows; ++r) acc[o][r] += v[r] * wk[o];
        }
      }
    }
  }
  for (int o = 0; o < channels; ++o) {
    for (int r = 0; r < kRows; ++r) {
      V out = acc[o][r];
      if (relu) out = out < zero ? zero : out;  // NaN stays NaN, as std::max(v, 0)
      std::memcpy(y + o * out_plane + r * g.out[2], &out, sizeof out);
    }
  }
}

// kRows output rows of one channel block, L outputs at a time; the last step overlaps the one
// before when the row is not a multiple of L.
template <typename V, int kRows, int kKernel, int kStride>
__attribute__((always_inline)) inline void rows_outputs(const ConvGeometry& g, const Source& src,
                                                        const float* in, const float* w,
                                                        const float* bias, int64_t channels,
                                                        bool relu, float* y, int64_t out_plane) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  const int64_t OW = g.out[2];
  for (int64_t ox = 0; ox < OW; ox += L) {
    const int64_t col = std::min(ox, OW - L);
    block_outputs<V, kRows, kKernel, kStride>(g, src, in + col, w, bias, channels, relu, y + col,
                                              out_plane);
  }
}

// The first `rows` output rows of src for one channel block (`w` and `bias` the block's):
// channel c of the block goes to y + c * channel_stride, its rows g.out[2] apart. How rows are
// grouped does not change any output's arithmetic.
template <typename V, int kRows, int kKernel, int kStride>
__attribute__((always_inline)) inline void block_rows_of(const ConvGeometry& g, const Source& src,
                                                         int64_t rows, const float* w,
                                                         const float* bias, int64_t channels,
                                                         bool relu, float* y,
                                                         int64_t channel_stride) {
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows)
    rows_outputs<V, kRows, kKernel, kStride>(g, src, src.base + r * src.out_row_stride, w, bias,
                                             channels, relu, y + r * g.out[2], channel_stride);
  for (; r < rows; ++r)  // an odd last row
    rows_outputs<V, 1, kKernel, kStride>(g, src, src.base + r * src.out_row_stride, w, bias,
                                         channels, relu, y + r * g.out[2], channel_stride);
}

// block_rows_of with the 2 x 2 kernel (LeafNetwork's) unrolled (same arithmetic either way), or
// with stride 2 across.
template <typename V, int kRows>
__attribute__((always_inline)) inline void block_rows(const ConvGeometry& g, const Source& src,
                                                      int64_t rows, const float* w,
                                                      const float* bias, int64_t channels,
                                                      bool relu, float* y,
                                                      int64_t channel_stride) {
  if (g.s[2] == 2) {
    block_rows_of<V, kRows, 0, 2>(g, src, rows, w, bias, channels, relu, y, channel_stride);
  } else if (g.k[1] == 2 && g.k[2] == 2) {
    block_rows_of<V, kRows, 2, 1>(g, src, rows, w, bias, channels, relu, y, channel_stride);
  } else {
    block_rows_of<V, kRows, 0, 1>(g, src, rows, w, bias, channels, relu, y, channel_stride);
  }
}

// One band: output rows [first_row, first_row + kBandRows) of one image, every channel.
// V is a GCC vector of L floats, compiled for the instruction set of the caller it is inlined in;
// kRows output rows share each weight broadcast (kRows * 8 accumulators: 2 rows need AVX-512's
// 32 vector registers).
template <typename V, int kRows>
__attribute__((always_inline)) inline void run_band(const Job& job, int64_t task, float* scratch) {
  const ConvGeometry& g = *job.g;
  const int64_t image = task / job.bands_per_image;
  const int64_t first_row = task % job.bands_per_image * kBandRows;
  const int64_t rows = std::min(kBandRows, g.out[1] - first_row);
  const int64_t OW = g.out[2], out_plane = g.out[1] * OW;
  const int64_t taps = g.in_c * g.k_sp;
  const Source src = band_source(g, job.x, image, first_row, kBandRows, scratch);
  for (int64_t block = 0; block * kBlockChannels < g.out_c; ++block) {
    const float* w = job.blocked_weight + block * taps * kBlockChannels;
    const float* bias = job.blocked_bias + block * kBlockChannels;
    const int64_t channels = std::min<int64_t>(kBlockChannels, g.out_c - block * kBlockChannels);
    float* y_block = job.y + (image * g.out_c + block * kBlockChannels) * out_plane;
    block_rows<V, kRows>(g, src, rows, w, bias, channels, job.relu, y_block + first_row * OW,
                         out_plane);
  }
}

typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats16 __attribute__((vector_size(64)));

__attribute__((target("avx2,fma"))) void run_band_avx2(const Job& job, int64_t task,
                                                        float* scratch) {
  run_band<Floats8, 1>(job, task, scratch);
}

__attribute__((target("avx512f"))) void run_band_avx512(const Job& job, int64_t task,
                                                         float* scratch) {
  run_band<Floats16, 2>(job, task, scratch);
}

int64_t band_count(const ConvGeometry& g) { return g.batch * ((g.out[1] + kBandRows - 1) / kBandRows); }

int64_t scratch_per_part(const ConvGeometry& g) { return band_scratch(g, kBandRows); }

// block_rows for conv2d_direct_f32_rows, one per instruction set.
__attribute__((target("avx2,fma"))) void block_rows_avx2(const ConvGeometry& g, Source src,
                                                         int64_t rows, const float* w,
                                                         const float* bias, int64_t channels,
                                                         bool relu, float* y,
                                                         int64_t channel_stride) {
  block_rows<Floats8, 1>(g, src, rows, w, bias, channels, relu, y, channel_stride);
}

__attribute__((target("avx512f"))) void block_rows_avx512(const ConvGeometry& g, Source src,
                                                          int64_t rows, const float* w,
                                                          const float* bias, int64_t channels,
                                                          bool relu, float* y,
                                                          int64_t channel_stride) {
  block_rows<Floats16, 2>(g, src, rows, w, bias, channels, relu, y, channel_stride);
}

}  // namespace

bool conv2d_direct_f32_handles(const ConvGeometry& g, FmaLevel level) {
  return level != FmaLevel::kNone && g.nsp == 2 && !g.channel_last && g.groups == 1 &&
         (g.s[2] == 1 || (g.s[2] == 2 && g.k[2] >= 2)) && g.d[1] == 1 && g.d[2] == 1 &&
         g.in_c * g.k_sp <= kMaxTaps && g.out[2] >= lanes(level);
}

int64_t conv2d_direct_f32_scratch(const ConvGeometry& g) {
  return parallel_parts(band_count(g), 1) * scratch_per_part(g);
}

DirectConvWeights conv2d_direct_f32_pack(const ConvGeometry& g, const float* w,
                                         const float* bias) {
  const int64_t taps = g.in_c * g.k_sp;
  const int64_t blocks = (g.out_c + kBlockChannels - 1) / kBlockChannels;
  DirectConvWeights packed;
  packed.weight.assign(blocks * taps * kBlockChannels, 0.0f);
  packed.bias.assign(blocks * kBlockChannels, 0.0f);
  for (int64_t oc = 0; oc < g.out_c; ++oc) {
    const int64_t block = oc / kBlockChannels, lane = oc % kBlockChannels;
    for (int64_t t = 0; t < taps; ++t)
      packed.weight[(block * taps + t) * kBlockChannels + lane] = w[oc * taps + t];
    if (bias != nullptr) packed.bias[oc] = bias[oc];
  }
  return packed;
}

std::shared_ptr<const DirectConvWeights> conv2d_direct_f32_weights(
    const OpContext& ctx, const ConvGeometry& g, int weight_input, const float* w,
    int bias_input, const float* bias) {
  PackedWeightKey key = packed_weight_key(ctx, &kPackedLayout, weight_input, w, bias_input, bias);
  const int64_t taps = g.in_c * g.k_sp;
  key.dims[0] = g.out_c;  // the only sizes of g that the packing reads
  key.dims[1] = taps;
  const int64_t blocks = (g.out_c + kBlockChannels - 1) / kBlockChannels;
  const size_t bytes = blocks * (taps + 1) * kBlockChannels * sizeof(float);
  auto pack = [&] {
    return std::make_shared<const DirectConvWeights>(conv2d_direct_f32_pack(g, w, bias));
  };
  if (std::shared_ptr<const void> cached = cached_packed_weights(key, bytes, pack))
    return std::static_pointer_cast<const DirectConvWeights>(cached);
  return pack();
}

void conv2d_direct_f32(const ConvGeometry& g, const float* x, const DirectConvWeights& weights,
                       bool relu, float* y, float* scratch, FmaLevel level) {
  Job job{&g, x, weights.weight.data(), weights.bias.data(), relu, y,
          (g.out[1] + kBandRows - 1) / kBandRows, scratch_per_part(g)};
  const bool avx512 = level == FmaLevel::kAvx512;
  parallel_for_parts(band_count(g), 1, [&](int64_t part, int64_t lo, int64_t hi) {
    float* part_scratch = scratch + part * job.scratch_per_part;
    for (int64_t task = lo; task < hi; ++task) {
      if (avx512) {
        run_band_avx512(job, task, part_scratch);
      } else {
        run_band_avx2(job, task, part_scratch);
      }
    }
  });
}

int64_t conv2d_direct_f32_rows_scratch(const ConvGeometry& g, int64_t rows) {
  return band_scratch(g, rows);
}

void conv2d_direct_f32_rows(const ConvGeometry& g, const float* x,
                            const DirectConvWeights& weights, bool relu, int64_t image,
                            int64_t block, int64_t first_row, int64_t last_row, float* y,
                            int64_t channel_stride, float* scratch, FmaLevel level) {
  const int64_t rows = last_row - first_row;
  const Source src = band_source(g, x, image, first_row, rows, scratch);
  const float* w = weights.weight.data() + block * g.in_c * g.k_sp * kBlockChannels;
  const float* bias = weights.bias.data() + block * kBlockChannels;
  const int64_t channels = std::min<int64_t>(kBlockChannels, g.out_c - block * kBlockChannels);
  if (level == FmaLevel::kAvx512) {
    block_rows_avx512(g, src, rows, w, bias, channels, relu, y, channel_stride);
  } else {
    block_rows_avx2(g, src, rows, w, bias, channels, relu, y, channel_stride);
  }
}

}  // namespace nn
}  // namespace pymx
