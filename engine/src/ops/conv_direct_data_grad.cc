// Direct data gradient of a 2-D float convolution, vectorised over input channels
// (conv_direct_data_grad.h).
//
// Note [Direct data gradient by phases]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The data gradient of a convolution with stride (sh, sw) and padding (ph, pw) is
//   dx[c][iy][ix] = sum over f, ky, kx of dy[f][oy][ox] * w[f][c][ky][kx],
//   where oy = (iy + ph - ky) / sh and ox = (ix + pw - kx) / sw,
// over the taps for which both divisions are exact and (oy, ox) lies inside dy. Note [Data
// gradient as a direct convolution] computes the stride-1 case with the direct kernel, which
// needs rows of at least 16 outputs; with stride 2 that convolution would run over a dy dilated
// by zeros, three quarters of its products zero. Here the input columns are taken by phase
// instead: the columns ix = px + sw * j of one remainder px share their taps (kx = px + pw
// modulo sw), and for them ox = j + (px + pw - kx) / sw, so consecutive j read consecutive dy
// columns; likewise an input row iy has its own set of taps ky. Only those taps are multiplied:
// with a 3x3 kernel and stride 2 an input pixel has 1, 2 or 4 of them, 9 / 4 on average.
// As in Note [Narrow direct convolution] (whose layout this mirrors with the roles of the two
// channel axes swapped) the vector runs across channels, here input channels: a tile is kCols
// consecutive columns of one phase of one input row (7 or 14, resnet's phase widths) for kVecs
// vectors of 16 input channels, 28 accumulators; for each filter f and each of the row's and
// phase's taps it loads the tap's kVecs weight vectors and multiply-adds them with the kCols dy
// values under the tile, broadcast. A phase wider than kCols ends with a tile that overlaps the
// one before (computed twice, identically). The weight is rearranged once per call as [input
// channel block][f][ky][kx][kVecs * 16], zero-padded to a whole block, and dy is copied with zero
// columns on both sides (masked by relu's derivative on the way when the convolution was fused
// with relu), so the inner loop never tests bounds; rows outside dy are skipped with their taps.
// Tasks are one input row of one image for one channel block, claimed in that order by the
// intra-op threads; every dx element is one task's sum over (f, ky, kx) in that order, from zero,
// so results do not depend on scheduling. Results differ from the GEMM + col2im path in
// summation order, and with a non-finite weight: the zero columns are multiplied by the weights,
// so an infinite or NaN weight makes NaN of the border pixels whose taps fall outside dy, which
// col2im leaves out (as the forward's zero padding makes NaN of y's border on every path).
#include "ops/conv_direct_data_grad.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "parallel.h"

namespace pymx {
namespace nn {
namespace {

constexpr int64_t kMaxTaps = 4608;  // 512 filters x 3 x 3: a channel block's weight stays in L2
constexpr int kVectorFloats = 16;
constexpr int kAccumulators = 28;  // of AVX-512's 32 vector registers
// Fewer input channels leave most of a block's lanes idle: the stem's 3 channels ran 4-8x slower
// than the GEMM + col2im path.
constexpr int64_t kMinChannels = 32;

typedef float Floats16 __attribute__((vector_size(64)));

// The columns of phase px (input columns px, px + sw, ...).
int64_t phase_columns(const ConvGeometry& g, int64_t px) {
  return (g.in[2] - px + g.s[2] - 1) / g.s[2];
}

// Whether tap k (of a kernel axis with stride s and padding p) reaches input position i, and
// then the output position it reads in `o`.
bool tap_reaches(int64_t i, int64_t k, int64_t s, int64_t p, int64_t* o) {
  const int64_t shifted = i + p - k;
  if (shifted % s != 0) return false;
  *o = shifted / s;  // exact, so also right for negative `shifted`
  return true;
}

// Tile width: 14 when every phase has that many columns, else 7.
int cols_for(const ConvGeometry& g) { return g.in[2] / g.s[2] >= 14 ? 14 : 7; }

// Zero columns left of dy's rows: the most that a phase's first tile reads before column 0.
int64_t left_pad(const ConvGeometry& g) {
  int64_t pad = 0, ox;
  for (int64_t px = 0; px < g.s[2]; ++px)
    for (int64_t kx = 0; kx < g.k[2]; ++kx)
      if (tap_reaches(px, kx, g.s[2], g.p[2], &ox)) pad = std::max(pad, -ox);
  return pad;
}

// Zero columns right of dy's rows: the most that a phase's last tile reads past column OW - 1.
int64_t right_pad(const ConvGeometry& g) {
  int64_t pad = 0, ox;
  for (int64_t px = 0; px < g.s[2]; ++px) {
    const int64_t last = px + (phase_columns(g, px) - 1) * g.s[2];
    for (int64_t kx = 0; kx < g.k[2]; ++kx)
      if (tap_reaches(last, kx, g.s[2], g.p[2], &ox)) pad = std::max(pad, ox - (g.out[2] - 1));
  }
  return pad;
}

int64_t block_width(const ConvGeometry& g) {
  return kAccumulators / cols_for(g) * kVectorFloats;
}
int64_t channel_blocks(const ConvGeometry& g) {
  return (g.in_c + block_width(g) - 1) / block_width(g);
}
int64_t packed_weight_floats(const ConvGeometry& g) {
  return channel_blocks(g) * g.out_c * g.k_sp * block_width(g);
}
int64_t dy_row_floats(const ConvGeometry& g) { return left_pad(g) + g.out[2] + right_pad(g); }

// One call's data, shared by its tasks.
struct Job {
  const ConvGeometry* g;
  const float* dy;      // out_grad with zero columns: (batch, out_c, OH, row_len)
  int64_t row_len, left;
  const float* weight;  // [channel block][f][ky][kx][block width]
  int64_t blocks;
  float* dx;
};

// A tap of one input row and phase: the offsets of its weight vectors within a filter's taps and
// of the dy value under the phase's column 0 within a filter's padded plane.
struct Tap {
  int64_t weight, dy;
};

// kCols columns of one phase for the block's kVecs * 16 input channels, into out[j][lane]:
// `dy` is the image's padded out_grad shifted to the tile's first column, `w` the block's weight.
template <int kCols, int kVecs>
__attribute__((always_inline)) inline void tile(const Job& job, const float* dy, const float* w,
                                                const Tap* taps, int64_t tap_count,
                                                float (*out)[kVecs * kVectorFloats]) {
  const ConvGeometry& g = *job.g;
  constexpr int kWidth = kVecs * kVectorFloats;
  const int64_t filter_weights = g.k_sp * kWidth, filter_plane = g.out[1] * job.row_len;
  Floats16 acc[kVecs][kCols];
  for (int v = 0; v < kVecs; ++v)
    for (int j = 0; j < kCols; ++j) acc[v][j] = Floats16{};
  for (int64_t f = 0; f < g.out_c; ++f, w += filter_weights, dy += filter_plane) {
    for (int64_t t = 0; t < tap_count; ++t) {
      const float* wt = w + taps[t].weight;
      const float* row = dy + taps[t].dy;
      Floats16 wv[kVecs];
      for (int v = 0; v < kVecs; ++v) std::memcpy(&wv[v], wt + v * kVectorFloats, sizeof(Floats16));
#pragma GCC unroll 16
      for (int j = 0; j < kCols; ++j) {
        const Floats16 xb = Floats16{} + row[j];
        for (int v = 0; v < kVecs; ++v) acc[v][j] += wv[v] * xb;
      }
    }
  }
  for (int j = 0; j < kCols; ++j)
    for (int v = 0; v < kVecs; ++v) std::memcpy(&out[j][v * kVectorFloats], &acc[v][j], 64);
}

// Tasks [lo, hi): task t is input row t % H of image t / H / blocks for channel block
// t / H % blocks, every phase of the row.
template <int kCols>
__attribute__((target("avx512f"))) void run_tasks(const Job& job, int64_t lo, int64_t hi) {
  constexpr int kVecs = kAccumulators / kCols, kWidth = kVecs * kVectorFloats;
  const ConvGeometry& g = *job.g;
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], kh = g.k[1], kw = g.k[2];
  const int64_t sw = g.s[2];
  std::vector<Tap> taps(g.k_sp);
  alignas(64) float out[kCols][kWidth];
  for (int64_t task = lo; task < hi; ++task) {
    const int64_t iy = task % H, block = task / H % job.blocks, image = task / H / job.blocks;
    const float* dy = job.dy + image * g.out_c * OH * job.row_len + job.left;
    const float* w = job.weight + block * g.out_c * g.k_sp * kWidth;
    const int64_t channels = std::min<int64_t>(kWidth, g.in_c - block * kWidth);
    float* dx = job.dx + ((image * g.in_c + block * kWidth) * H + iy) * W;
    for (int64_t px = 0; px < sw; ++px) {
      int64_t tap_count = 0, oy, ox;
      for (int64_t ky = 0; ky < kh; ++ky) {
        if (!tap_reaches(iy, ky, g.s[1], g.p[1], &oy) || oy < 0 || oy >= OH) continue;
        for (int64_t kx = 0; kx < kw; ++kx)
          if (tap_reaches(px, kx, sw, g.p[2], &ox))
            taps[tap_count++] = {(ky * kw + kx) * kWidth, oy * job.row_len + ox};
      }
      const int64_t columns = phase_columns(g, px);
      for (int64_t j0 = 0; j0 < columns; j0 += kCols) {
        const int64_t col = std::min<int64_t>(j0, columns - kCols);
        tile<kCols, kVecs>(job, dy + col, w, taps.data(), tap_count, out);
        for (int64_t ch = 0; ch < channels; ++ch) {
          float* dst = dx + ch * H * W + px + col * sw;
          for (int j = 0; j < kCols; ++j) dst[j * sw] = out[j][ch];
        }
      }
    }
  }
}

}  // namespace

bool conv2d_data_grad_f32_handles(const ConvGeometry& g, FmaLevel level) {
  return level == FmaLevel::kAvx512 && g.nsp == 2 && !g.channel_last && g.groups == 1 &&
         g.d[1] == 1 && g.d[2] == 1 && g.k_sp > 1 && g.in_c >= kMinChannels &&
         g.out_c * g.k_sp <= kMaxTaps && g.in[2] / g.s[2] >= 7;
}

int64_t conv2d_data_grad_f32_scratch(const ConvGeometry& g) {
  return packed_weight_floats(g) + g.batch * g.out_c * g.out[1] * dy_row_floats(g);
}

void conv2d_data_grad_f32(const ConvGeometry& g, const float* dy, const float* keep,
                          const float* w, float* dx, float* scratch) {
  const int64_t width = block_width(g), blocks = channel_blocks(g);
  const int64_t F = g.out_c, C = g.in_c, taps = g.k_sp, OH = g.out[1], OW = g.out[2];
  float* packed_w = scratch;
  float* padded_dy = scratch + packed_weight_floats(g);
  parallel_for(0, blocks * F, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t block = item / F, f = item % F;
      float* dst = packed_w + item * taps * width;
      for (int64_t lane = 0; lane < width; ++lane) {
        const int64_t c = block * width + lane;
        for (int64_t t = 0; t < taps; ++t)
          dst[t * width + lane] = c < C ? w[(f * C + c) * taps + t] : 0.0f;
      }
    }
  });
  const int64_t left = left_pad(g), row_len = dy_row_floats(g);
  parallel_for(0, g.batch * F, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t plane = lo; plane < hi; ++plane) {
      for (int64_t r = 0; r < OH; ++r) {
        const int64_t from = (plane * OH + r) * OW;
        float* dst = padded_dy + (plane * OH + r) * row_len;
        std::fill(dst, dst + row_len, 0.0f);
        if (keep == nullptr) {
          std::memcpy(dst + left, dy + from, OW * sizeof(float));
        } else {
          for (int64_t col = 0; col < OW; ++col)
            dst[left + col] = keep[from + col] > 0.0f ? dy[from + col] : 0.0f;
        }
      }
    }
  });
  const Job job{&g, padded_dy, row_len, left, packed_w, blocks, dx};
  parallel_for_parts(g.batch * blocks * g.in[1], 1, [&](int64_t, int64_t lo, int64_t hi) {
    cols_for(g) == 14 ? run_tasks<14>(job, lo, hi) : run_tasks<7>(job, lo, hi);
  });
}

}  // namespace nn
}  // namespace pymx
