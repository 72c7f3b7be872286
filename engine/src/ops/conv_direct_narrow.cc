// Direct 2-D float convolution of narrow output rows, vectorised over output channels
// (conv_direct_narrow.h).
//
// Note [Narrow direct convolution]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The direct kernel of Note [Direct convolution] vectorises along an output row, so it needs
// rows at least one vector (16 floats) wide; resnet's 14x14 and 7x7 layers went through im2col +
// GEMM, whose OpenBLAS kernels are the AVX2 ones here (OPENBLAS_CORETYPE=Haswell) and whose
// products are thin (N = 196 or 49 per image). This kernel puts the vector across output
// channels instead: a tile is kCols consecutive outputs of one output row (the whole row, 14 or
// 7 of them) for kVecs vectors of 16 output channels (kCols * kVecs = 28 accumulators of
// AVX-512's 32 registers); for each tap (c, ky, kx) it loads the tap's kVecs weight vectors and
// multiply-adds them with each of the kCols inputs under the tile, broadcast. A row wider than
// kCols ends with a tile that overlaps the one before (those outputs are computed twice,
// identically). The weights are rearranged as [channel block][tap][kVecs * 16], zero-padded to
// a whole block (once per call, or once for many inference calls: Note [Packed weight cache]),
// and a padded convolution first copies the batch into a zero-bordered buffer, so the inner
// loop never tests bounds; with stride 2 the broadcasts read every other input. Work is split
// into tasks of one output row of one image for one channel block, claimed in that order by the
// intra-op threads, so consecutive tasks share the block's weights in cache; every output is one
// task's sum over the taps in (c, ky, kx) order, so results do not depend on scheduling.
// Results differ from the GEMM path only in summation
// order. resnet18's layers on 2 threads (forward, ms, im2col + GEMM -> this, the fastest of 15
// calls, medians of 4 interleaved runs, load 4-6), batch 8: 3x3 256->256 at 14x14 16.5 -> 11.1,
// 3x3/2 128->256 to 14x14 7.3 -> 6.2, 3x3/2 256->512 to 7x7 9.0 -> 5.5, 3x3 512->512 at 7x7
// 18.5 -> 11.6; batch 1: 2.1 -> 1.65, 1.08 -> 0.91, 1.16 -> 1.0, 2.4 -> 2.4 (there the per-call
// packing of the 9.4 MB weight is a fifth of the time). A 1x1 kernel (the stride-2
// downsamples) stays with the GEMM, as fast or faster there (0.5-0.9 against 0.75-1.0 ms).
#include "ops/conv_direct_narrow.h"

#include <algorithm>
#include <cstring>

#include "parallel.h"

namespace pymx {
namespace nn {
namespace {

constexpr int64_t kMaxTaps = 4608;  // 512 channels x 3 x 3
constexpr int kVectorFloats = 16;
constexpr int kAccumulators = 28;  // of AVX-512's 32 vector registers
// Up to this many floats of padded input (1 MiB: one image of resnet's narrow layers; at most
// 460 KB there), the padding is copied by the calling thread, not by a loop of its own on the
// intra-op threads: a loop of a few microseconds just before the convolution's own loop left the
// helper thread out of that loop in about a third of the runs on the shared 2-core machine
// (CPU time of the caller and the helper over 300 calls at batch 1, load 3-4: 350 and 10 ms for
// 512->512 at 7x7, against 180-240 and 140-180 ms with the copy on the caller in every run),
// which ran the layer on one core.
constexpr int64_t kSerialPaddingFloats = int64_t(1) << 18;

typedef float Floats16 __attribute__((vector_size(64)));

// One call's data, shared by its tasks.
struct Job {
  const ConvGeometry* g;
  const float* x;       // the (padded) input, images of in_c planes of rows x row_len
  int64_t rows, row_len;
  const float* weight;  // [channel block][tap][block width]
  const float* bias;    // [channel block][block width], zeros without a bias
  bool relu;
  float* y;
  int64_t blocks;
};

// kCols outputs of one row for the block's kVecs * 16 channels (those below `channels` are
// stored): `in` is the input under the first output at (channel 0, kernel row 0, kernel
// column 0), `y` the first output of the block's first channel.
template <int kCols, int kVecs, int kStride>
__attribute__((always_inline)) inline void tile(const Job& job, const float* in, const float* w,
                                                const float* bias, int64_t channels, float* y) {
  const ConvGeometry& g = *job.g;
  constexpr int kWidth = kVecs * kVectorFloats;
  const int64_t kh = g.k[1], kw = g.k[2], plane = job.rows * job.row_len;
  Floats16 acc[kVecs][kCols];
  for (int v = 0; v < kVecs; ++v) {
    Floats16 b;
    std::memcpy(&b, bias + v * kVectorFloats, sizeof b);
    for (int j = 0; j < kCols; ++j) acc[v][j] = b;
  }
  for (int64_t c = 0; c < g.in_c; ++c) {
    for (int64_t ky = 0; ky < kh; ++ky) {
      const float* row = in + c * plane + ky * job.row_len;
      for (int64_t kx = 0; kx < kw; ++kx, w += kWidth) {
        Floats16 wv[kVecs];
        for (int v = 0; v < kVecs; ++v)
          std::memcpy(&wv[v], w + v * kVectorFloats, sizeof(Floats16));
#pragma GCC unroll 16
        for (int j = 0; j < kCols; ++j) {
          const Floats16 xb = Floats16{} + row[kx + j * kStride];
          for (int v = 0; v < kVecs; ++v) acc[v][j] += wv[v] * xb;
        }
      }
    }
  }
  // acc holds channels across its lanes; y wants each channel's outputs in a row.
  alignas(64) float out[kCols][kWidth];
  for (int j = 0; j < kCols; ++j)
    for (int v = 0; v < kVecs; ++v)
      std::memcpy(&out[j][v * kVectorFloats], &acc[v][j], sizeof(Floats16));
  const int64_t out_plane = g.out[1] * g.out[2];
  for (int64_t ch = 0; ch < channels; ++ch) {
    for (int j = 0; j < kCols; ++j) {
      const float value = out[j][ch];
      y[ch * out_plane + j] = job.relu && value < 0.0f ? 0.0f : value;  // NaN stays NaN
    }
  }
}

// Task `task`: output row oy of one image for one channel block, kCols outputs at a time.
template <int kCols, int kVecs, int kStride>
__attribute__((always_inline)) inline void run_task(const Job& job, int64_t task) {
  const ConvGeometry& g = *job.g;
  constexpr int kWidth = kVecs * kVectorFloats;
  const int64_t OH = g.out[1], OW = g.out[2], taps = g.in_c * g.k_sp;
  const int64_t oy = task % OH, block = task / OH % job.blocks, image = task / OH / job.blocks;
  const float* in = job.x + (image * g.in_c * job.rows + oy * g.s[1]) * job.row_len;
  const float* w = job.weight + block * taps * kWidth;
  const float* bias = job.bias + block * kWidth;
  const int64_t channels = std::min<int64_t>(kWidth, g.out_c - block * kWidth);
  float* y = job.y + ((image * g.out_c + block * kWidth) * OH + oy) * OW;
  for (int64_t ox = 0; ox < OW; ox += kCols) {
    const int64_t col = std::min<int64_t>(ox, OW - kCols);
    tile<kCols, kVecs, kStride>(job, in + col * kStride, w, bias, channels, y + col);
  }
}

template <int kCols, int kStride>
__attribute__((target("avx512f"))) void run_tasks(const Job& job, int64_t lo, int64_t hi) {
  for (int64_t task = lo; task < hi; ++task)
    run_task<kCols, kAccumulators / kCols, kStride>(job, task);
}

// Tile width: the whole row for resnet's 14 and 7, else the widest that fits.
int cols_for(const ConvGeometry& g) { return g.out[2] >= 14 ? 14 : 7; }

}  // namespace

bool conv2d_narrow_f32_handles(const ConvGeometry& g, FmaLevel level) {
  return level == FmaLevel::kAvx512 && g.nsp == 2 && !g.channel_last && g.groups == 1 &&
         (g.s[2] == 1 || g.s[2] == 2) && g.d[1] == 1 && g.d[2] == 1 && g.k_sp > 1 &&
         g.in_c * g.k_sp <= kMaxTaps && g.out[2] >= 7 && g.out[2] < kVectorFloats;
}

int64_t conv2d_narrow_f32_block_channels(const ConvGeometry& g) {
  return kAccumulators / cols_for(g) * kVectorFloats;
}

int64_t conv2d_narrow_f32_packed_floats(const ConvGeometry& g) {
  const int64_t width = conv2d_narrow_f32_block_channels(g);
  const int64_t blocks = (g.out_c + width - 1) / width;
  return blocks * (g.in_c * g.k_sp + 1) * width;
}

int64_t conv2d_narrow_f32_scratch(const ConvGeometry& g) {
  if (g.p[1] == 0 && g.p[2] == 0) return 0;
  return g.batch * g.in_c * (g.in[1] + 2 * g.p[1]) * (g.in[2] + 2 * g.p[2]);
}

void conv2d_narrow_f32_pack(const ConvGeometry& g, const float* w, const float* bias,
                            float* packed) {
  const int64_t width = conv2d_narrow_f32_block_channels(g), taps = g.in_c * g.k_sp;
  const int64_t blocks = (g.out_c + width - 1) / width;
  float* packed_bias = packed + blocks * taps * width;
  // A transposition per block, kPackTaps taps at a time so that both its reads (a cache line
  // per channel) and its writes (kPackTaps rows of the block) stay in L1.
  constexpr int64_t kPackTaps = 16;
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t block = lo; block < hi; ++block) {
      float* dst = packed + block * taps * width;
      for (int64_t t0 = 0; t0 < taps; t0 += kPackTaps) {
        const int64_t t1 = std::min(taps, t0 + kPackTaps);
        for (int64_t lane = 0; lane < width; ++lane) {
          const int64_t oc = block * width + lane;
          for (int64_t t = t0; t < t1; ++t)
            dst[t * width + lane] = oc < g.out_c ? w[oc * taps + t] : 0.0f;
        }
      }
    }
  });
  std::fill(packed_bias, packed_bias + blocks * width, 0.0f);
  if (bias != nullptr) std::copy(bias, bias + g.out_c, packed_bias);
}

void conv2d_narrow_f32(const ConvGeometry& g, const float* x, const float* packed, bool relu,
                       float* y, float* scratch) {
  const int cols = cols_for(g);
  const int64_t width = conv2d_narrow_f32_block_channels(g), taps = g.in_c * g.k_sp;
  const int64_t blocks = (g.out_c + width - 1) / width;
  const float* packed_bias = packed + blocks * taps * width;
  float* padded = scratch;
  const int64_t H = g.in[1], W = g.in[2], ph = g.p[1], pw = g.p[2];
  Job job{&g, x, H, W, packed, packed_bias, relu, y, blocks};
  if (ph != 0 || pw != 0) {
    job.x = padded;
    job.rows = H + 2 * ph;
    job.row_len = W + 2 * pw;
    auto pad_planes = [&](int64_t lo, int64_t hi) {
      for (int64_t plane = lo; plane < hi; ++plane) {
        float* dst = padded + plane * job.rows * job.row_len;
        std::fill(dst, dst + job.rows * job.row_len, 0.0f);
        for (int64_t r = 0; r < H; ++r)
          std::memcpy(dst + (r + ph) * job.row_len + pw, x + (plane * H + r) * W,
                      W * sizeof(float));
      }
    };
    const int64_t planes = g.batch * g.in_c;
    if (planes * job.rows * job.row_len <= kSerialPaddingFloats) {
      pad_planes(0, planes);  // see kSerialPaddingFloats
    } else {
      parallel_for(0, planes, 1, pad_planes);
    }
  }
  const bool stride2 = g.s[2] == 2;
  parallel_for_parts(g.batch * blocks * g.out[1], 1, [&](int64_t, int64_t lo, int64_t hi) {
    if (cols == 14) {
      stride2 ? run_tasks<14, 2>(job, lo, hi) : run_tasks<14, 1>(job, lo, hi);
    } else {
      stride2 ? run_tasks<7, 2>(job, lo, hi) : run_tasks<7, 1>(job, lo, hi);
    }
  });
}

}  // namespace nn
}  // namespace pymx
