// Direct weight gradient of a 2-D float convolution (conv_weight_grad.h).
//
// Note [Direct weight gradient]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// im2col + GEMM computes the weight gradient as col . dy^T per image: it first copies the image
// kh * kw times into col, and OpenBLAS then packs col and dy again before multiplying. Here every
// product is read straight from the image: for a tile of kTileFilters filters x kTileTaps taps
// (tap = channel, ky, kx), one pass over a band of output rows loads, per 16 positions, the
// filters' dy vectors and the taps' input vectors (the input row shifted by the tap) and
// multiply-adds every pair into its own accumulator: 6 x 4 = 24 of AVX-512's 32 registers, 10
// loads per 24 multiply-adds, enough independent sums to hide the latency. A row whose width is
// not a multiple of 16 ends with a vector that overlaps the one before, as in Note [Direct
// convolution]; its multiply-adds are masked to the lanes not yet added, so every load stays in
// the row and no position is counted twice or mixed with another row's values (a NaN or an
// infinity reaches exactly the sums it reaches in the GEMM). Each tile's 24 accumulators are
// summed across their lanes at the end of the band, in pairwise folds of 16 vectors at a time.
// Bands hold about kBandPositions outputs, so a tile's dy rows stay in L1 while every tap tile
// reads them. Filter and tap counts that are not multiples of the tile compute the last tile with
// the last filter or tap repeated and drop those sums. With padding, the image is first copied
// into a zero-bordered scratch. The sums differ from the GEMM's only in order (the tests compare
// both with float64); a filter tile's sums do not depend on the other tiles, so threads can share
// an image by tiles (Note [Fewer images than threads]). AVX-512 only: an AVX2 version (6 filters
// x 2 taps in 16 registers, the tail masked by ANDs) ran at 60-72 GFLOP/s per thread here, below
// OpenBLAS's AVX2 GEMM on these shapes, so without AVX-512 the GEMM stays.
// Measured on one thread (bench/cpp/conv_weight_grad, GFLOP/s; the machine's multiply-add peak
// is ~260), LeafNetwork's conv1 / conv2 / conv3: 71 / 146 / 151 over 64 images read from memory,
// 98 / 173 / 159 over 8 (conv1, with 12 taps per dy value, waits on memory). Copying the rows
// into zero-padded tiles instead, or masking the loads of the last vector, was 10-40 % slower
// (one image's operands in cache: 166 / 194 / 163 as it is). In the backward op (batch
// 64, 2 threads, relu's mask pass included), conv1 / conv2 / conv3 weight gradients take 8.8 /
// 15.3 / 12.4 ms against 13.3 / 22.2 / 16.4 with im2col + OpenBLAS's AVX2 kernels (11.9 / 15.0 /
// 10.5 with its AVX-512 ones); LeafNetwork training, hybridized, batch 64 453 -> 508 samples/s,
// batch 4 352 -> 390, imperative batch 64 424 -> 488.
//
// Note [Strided direct weight gradient]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With stride sh down, output row r reads input row r * sh + ky: only the step between the
// input rows changes. With stride 2 across, output column ox reads padded column 2 * ox + kx, so
// the image is copied with each padded row's even and odd columns apart, as in Note [Strided
// direct convolution]: tap kx reads element ox + kx / 2 of phase kx % 2, and 16 consecutive
// outputs read 16 consecutive floats again. The sums are the stride-1 ones in the same order.
// A band holds kBandPositions / (sh * sw) output positions, so that its input rows are about as
// many floats as with stride 1 (a whole 28-row band of the 3x3/2 64->128 layer at 56 read
// 850 KB of input per filter tile, and ran at half the GEMM's speed). Batch 8, 2 threads, weight
// gradient alone, ms, im2col + GEMM -> this (the fastest of 12 calls, medians of 4-6
// interleaved runs, load 4-6 on the 2 cores): resnet's stem 7x7/2 3->64 at 224 (147 taps)
// 17.7 -> 9.0, 14.4 -> 10.2, 23.4 -> 19.6; but the 3x3/2 64->128 layer at 56 (576 taps)
// 3.3 -> 4.4 and the 1x1/2 64->128 downsample 0.41 -> 0.75: with many taps per output the
// GEMM's packed operands are reused better, and a 1x1 kernel's im2col is only a subsampling.
// So stride 2 across takes this kernel only for kernels of several taps, at most
// kMaxStridedTaps of them (first layers on few channels), and the backward uses it only when
// it computes no data gradient through GEMM + col2im (a first layer's, in training): with one,
// the stem's backward was slower (dx + dw 31.5 -> 32.1, 33.2 -> 35.7 ms), as that GEMM then
// writes the 7 MB col matrix per image cold, where im2col had left it in cache.
#include "ops/conv_weight_grad.h"

#include <algorithm>
#include <cstring>

#include "ops/max_pool_lanes.h"

namespace pymx {
namespace nn {
namespace {

constexpr int kTileFilters = kWeightGradTileFilters;
constexpr int kTileTaps = 4;
constexpr int kTileSums = kTileFilters * kTileTaps;
constexpr int64_t kVectorLanes = 16;
constexpr int64_t kBandPositions = 1024;
// Stride 2 across only for kernels of several taps, up to this many (Note [Strided direct
// weight gradient]).
constexpr int64_t kMaxStridedTaps = 256;

// The image's input, zero-padded: element (c, row, col) at
// base[c * channel_stride + row * row_stride + col], rows and columns counted in the padded image;
// with stride 2 across, padded column col at base[... + (col % 2) * phase_stride + col / 2] (Note
// [Strided direct weight gradient]).
struct Input {
  const float* base;
  int64_t channel_stride, row_stride, phase_stride;
};

// Floats of one phase of a padded row (stride 2 across).
int64_t phase_length(const ConvGeometry& g) { return (g.in[2] + 2 * g.p[2] + 1) / 2; }

Input padded_input(const ConvGeometry& g, const float* x, float* scratch) {
  const int64_t H = g.in[1], W = g.in[2], ph = g.p[1], pw = g.p[2];
  if (ph == 0 && pw == 0 && g.s[2] == 1) return {x, H * W, W, 0};
  const int64_t padded_h = H + 2 * ph;
  if (g.s[2] == 2) {
    const int64_t phase = phase_length(g), row_floats = 2 * phase;
    std::fill(scratch, scratch + g.in_c * padded_h * row_floats, 0.0f);
    for (int64_t c = 0; c < g.in_c; ++c) {
      for (int64_t row = 0; row < H; ++row) {
        float* dst = scratch + (c * padded_h + row + ph) * row_floats;
        const float* src = x + (c * H + row) * W;
        // Phase q, place i holds column 2 * i + q - pw: a stride-2 read that vectorises.
        for (int64_t q = 0; q < 2; ++q) {
          const int64_t first = (pw - q + 1) / 2, last = (W - 1 + pw - q) / 2 + 1;
          for (int64_t i = first; i < last; ++i) dst[q * phase + i] = src[2 * i + q - pw];
        }
      }
    }
    return {scratch, padded_h * row_floats, row_floats, phase};
  }
  const int64_t padded_w = W + 2 * pw;
  std::fill(scratch, scratch + g.in_c * padded_h * padded_w, 0.0f);
  for (int64_t c = 0; c < g.in_c; ++c)
    for (int64_t row = 0; row < H; ++row)
      std::memcpy(scratch + (c * padded_h + row + ph) * padded_w + pw, x + (c * H + row) * W,
                  W * sizeof(float));
  return {scratch, padded_h * padded_w, padded_w, 0};
}

// Sums of 16 vectors' lanes: lane 4q + s of the result is the sum of v[4s + q]. Four levels of
// pairwise folds (45 instructions instead of 16 horizontal sums).
PMX_AVX512 __attribute__((always_inline)) inline __m512 lane_sums(const __m512 v[16]) {
  __m512 halves[8], quarters[4], eighths[2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)  // 128-bit blocks 0, 1 <- v[2i]; 2, 3 <- v[2i + 1]
    halves[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                              _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i)  // block q <- v[4i + q]
    quarters[i] = _mm512_add_ps(_mm512_shuffle_f32x4(halves[2 * i], halves[2 * i + 1], 0x88),
                                _mm512_shuffle_f32x4(halves[2 * i], halves[2 * i + 1], 0xDD));
#pragma GCC unroll 8
  for (int i = 0; i < 2; ++i)  // block q: lanes 0, 1 <- v[8i + q]; 2, 3 <- v[8i + 4 + q]
    eighths[i] = _mm512_add_ps(_mm512_shuffle_ps(quarters[2 * i], quarters[2 * i + 1], 0x44),
                               _mm512_shuffle_ps(quarters[2 * i], quarters[2 * i + 1], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_ps(eighths[0], eighths[1], 0x88),
                       _mm512_shuffle_ps(eighths[0], eighths[1], 0xDD));
}

// sums[i] = the sum of acc[i]'s lanes for the tile's kTileSums accumulators, 16 at a time.
PMX_AVX512 __attribute__((always_inline)) inline void store_lane_sums(const __m512* acc,
                                                                     float* sums) {
#pragma GCC unroll 2
  for (int first = 0; first < kTileSums; first += 16) {
    __m512 v[16];  // lane_sums puts v[4s + q]'s sum in lane 4q + s
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      const int index = first + 4 * (i % 4) + i / 4;
      v[i] = index < kTileSums ? acc[index] : _mm512_setzero_ps();
    }
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, lane_sums(v));
    std::memcpy(sums + first, lanes, std::min(16, kTileSums - first) * sizeof(float));
  }
}

// acc[f][t] += dy[f] * in[t] over 16 positions; kTail: only the `mask` lanes (the others were
// added by the vector before, which this one overlaps).
template <bool kTail>
PMX_AVX512 __attribute__((always_inline)) inline void add_products(
    const float* const dy[kTileFilters], const float* const in[kTileTaps], int64_t offset_dy,
    int64_t offset_in, __mmask16 mask, __m512 acc[kTileFilters][kTileTaps]) {
  __m512 taps[kTileTaps];
#pragma GCC unroll 8
  for (int t = 0; t < kTileTaps; ++t) taps[t] = _mm512_loadu_ps(in[t] + offset_in);
#pragma GCC unroll 8
  for (int f = 0; f < kTileFilters; ++f) {
    const __m512 grad = _mm512_loadu_ps(dy[f] + offset_dy);
#pragma GCC unroll 8
    for (int t = 0; t < kTileTaps; ++t)
      acc[f][t] = kTail ? _mm512_mask3_fmadd_ps(grad, taps[t], acc[f][t], mask)
                        : _mm512_fmadd_ps(grad, taps[t], acc[f][t]);
  }
}

// sums[f][t] = sum over `rows` output rows of dy[f] * in[t], where dy row r of filter f starts at
// dy + dy_offsets[f] + r * out_w and the tap's input row at in + tap_offsets[t] + r * in_row.
PMX_AVX512 void tile_sums(const float* dy, const int64_t* dy_offsets, const float* in,
                          const int64_t* tap_offsets, int64_t rows, int64_t out_w,
                          int64_t in_row, float sums[kTileFilters][kTileTaps]) {
  const float* dy_rows[kTileFilters];
  const float* tap_rows[kTileTaps];
  __m512 acc[kTileFilters][kTileTaps];
#pragma GCC unroll 8
  for (int f = 0; f < kTileFilters; ++f) {
    dy_rows[f] = dy + dy_offsets[f];
#pragma GCC unroll 8
    for (int t = 0; t < kTileTaps; ++t) acc[f][t] = _mm512_setzero_ps();
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTileTaps; ++t) tap_rows[t] = in + tap_offsets[t];
  const int64_t full_cols = out_w / kVectorLanes * kVectorLanes;
  const int64_t tail_col = out_w - kVectorLanes;
  const __mmask16 tail = static_cast<__mmask16>(~first_lanes(full_cols - tail_col));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < full_cols; col += kVectorLanes)
      add_products<false>(dy_rows, tap_rows, r * out_w + col, r * in_row + col, 0, acc);
    if (full_cols < out_w)
      add_products<true>(dy_rows, tap_rows, r * out_w + tail_col, r * in_row + tail_col, tail,
                         acc);
  }
  store_lane_sums(&acc[0][0], &sums[0][0]);
}

}  // namespace

bool conv2d_weight_grad_f32_handles(const ConvGeometry& g, FmaLevel level) {
  return level == FmaLevel::kAvx512 && g.nsp == 2 && !g.channel_last && g.groups == 1 &&
         (g.s[2] == 1 || (g.s[2] == 2 && g.k_sp > 1 && g.in_c * g.k_sp <= kMaxStridedTaps)) &&
         g.d[1] == 1 && g.d[2] == 1 && g.out[2] >= kVectorLanes;
}

int64_t conv2d_weight_grad_f32_scratch(const ConvGeometry& g) {
  if (g.p[1] == 0 && g.p[2] == 0 && g.s[2] == 1) return 0;
  const int64_t row_floats = g.s[2] == 2 ? 2 * phase_length(g) : g.in[2] + 2 * g.p[2];
  return g.in_c * (g.in[1] + 2 * g.p[1]) * row_floats;
}

void conv2d_weight_grad_f32_image(const ConvGeometry& g, const float* x, const float* dy,
                                  float* dwt, float* scratch, int64_t first_tile,
                                  int64_t last_tile) {
  const Input input = padded_input(g, x, scratch);
  const int64_t out_h = g.out[1], out_w = g.out[2], kw = g.k[2], sh = g.s[1];
  const int64_t taps = g.in_c * g.k_sp, filters = g.out_c;
  // About as many input floats per band as with stride 1 (Note [Strided direct weight gradient]).
  const int64_t band_rows = std::max<int64_t>(1, kBandPositions / (out_w * sh * g.s[2]));
  int64_t dy_offsets[kTileFilters], tap_offsets[kTileTaps];
  float sums[kTileFilters][kTileTaps];
  for (int64_t first_row = 0; first_row < out_h; first_row += band_rows) {
    const int64_t rows = std::min(band_rows, out_h - first_row);
    for (int64_t tile = first_tile; tile < last_tile; ++tile) {
      const int64_t first_filter = tile * kTileFilters;
      for (int f = 0; f < kTileFilters; ++f)
        dy_offsets[f] = (std::min(first_filter + f, filters - 1) * out_h + first_row) * out_w;
      for (int64_t first_tap = 0; first_tap < taps; first_tap += kTileTaps) {
        for (int t = 0; t < kTileTaps; ++t) {
          const int64_t tap = std::min(first_tap + t, taps - 1);
          const int64_t c = tap / g.k_sp, ky = tap % g.k_sp / kw, kx = tap % kw;
          const int64_t column = g.s[2] == 2 ? kx % 2 * input.phase_stride + kx / 2 : kx;
          tap_offsets[t] =
              c * input.channel_stride + (first_row * sh + ky) * input.row_stride + column;
        }
        tile_sums(dy, dy_offsets, input.base, tap_offsets, rows, out_w, sh * input.row_stride,
                  sums);
        const int64_t tile_filters = std::min<int64_t>(kTileFilters, filters - first_filter);
        const int64_t tile_taps = std::min<int64_t>(kTileTaps, taps - first_tap);
        for (int64_t t = 0; t < tile_taps; ++t)
          for (int64_t f = 0; f < tile_filters; ++f)
            dwt[(first_tap + t) * filters + first_filter + f] += sums[f][t];
      }
    }
  }
}

}  // namespace nn
}  // namespace pymx
