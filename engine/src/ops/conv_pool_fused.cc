// Convolution + bias + relu + max pooling (+ batch_norm's inference transform) in one pass
// (conv_pool_fused.h), and the internal inference operator that runs it.
//
// | op                   | inputs                                                     | outputs | attrs |
// |----------------------|------------------------------------------------------------|---------|-------|
// | _conv_relu_max_pool  | data, weight, bias, [gamma, beta, moving_mean, moving_var] | out     | kernel stride dilate pad num_filter num_group no_bias layout pool_kernel pool_stride pool_convention [bn_eps bn_fix_gamma] |
//
// out = maxpool(relu(convolution(data, weight, bias))), with the convolution's attributes as
// `convolution` takes them (no_bias must be False) and the pooling's as pool_kernel, pool_stride
// (default 1, as pooling's stride) and pool_convention ('valid', the only one). With the four
// batch-norm inputs, out is then batch_norm(out) with the running statistics, bn_eps (default
// 1e-3) and bn_fix_gamma (default True) as batch_norm's eps and fix_gamma; those two attributes
// are refused without them. float32, NCHW, CPU only, and only where conv_relu_max_pool_handles
// says so (the error names the geometry otherwise). Inference only: the op has no gradient, so a
// backward pass through it fails with the registry's "not differentiable" error, and the
// batch-norm part uses the running statistics in training mode too.
//
// Note [Fused convolution and max pooling]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each of LeafNetwork's blocks is convolution (2x2, relu) -> max pooling (4x4, stride 2) ->
// batch_norm. Run apart at batch 1, the first convolution writes 2 MB that the pooling reads
// back, and batch_norm makes one more pass over the pooled output. Here the pooling reads the
// convolution's output while it is still in cache, and batch_norm's per-channel y * scale +
// shift is applied to each pooled chunk right after it is written.
// Work: a task is one image, one block of 8 output channels (the direct kernel's block) and one
// band of pooled rows. A task walks its band in chunks of `chunk_rows` pooled rows: it computes
// the convolution rows the chunk's windows cover into its part's buffer (8 channels x
// buffer_rows x the output width, about kChunkBytes, so it stays in L1 or L2) with the direct
// kernel's row entry (conv2d_direct_f32_rows), then pools each channel of the chunk from the
// buffer straight into the output: 4x4 windows at stride 2 with AVX-512 by the pair-sharing
// strips of Note [Pooling from row pairs], other windows by the vectorised pooling kernel
// (max_pool_forward_f32).
// Consecutive windows share kh - sh convolution rows (2 for 4x4 / stride 2): they are moved to
// the top of the buffer for the next chunk rather than computed again. Only a band's first chunk
// computes them again, so bands are made only when the images and channel blocks give fewer
// than four tasks per thread, and never shorter than kMinBandRows pooled rows. Rows of the
// convolution that no window reaches are not computed. Tasks of one channel block measured about
// 12 % faster (batch 1, 513 against 586 us) than tasks of several blocks that share their input
// rows, as the direct kernel's bands do: here a block's weights and its buffer stay in L1.
// Four tasks per thread rather than two: the intra-op helper thread starts a few tens of us
// after the caller, so LeafNetwork's first block at batch 1 (4 channel blocks) ran in one band
// per block mostly on the caller: 102 -> 78 us with two bands. Chunks of 64 KB rather than
// 32 KB: each chunk pools its first row pair again and copies two rows; the first block at
// batch 1 on one thread 107 -> 101 us, batch 4 and 64 the same or faster.
// The direct kernel's packed weights come from the packed weight cache in inference (Note
// [Packed weight cache]): packed on every call, they cost LeafNetwork's three blocks at batch 1
// (with batch_norm, on one core) 643 against 626 us of CPU time per pass (medians of 5
// interleaved runs with the cache off and on).
// Exactness: the convolution values come from the direct kernel's own code (same accumulation
// order) and each pooled value is the pooling op's (Note [Pooling from row pairs]), so without
// batch_norm the output is bit for bit convolution followed by pooling; the transform is
// batch_norm's float expression with its coefficients computed as batch_norm computes them, so
// it matches batch_norm too (bit for bit today; the tests allow float32 rounding).
// Measured on LeafNetwork's three blocks, with batch_norm, 2 threads (bench/conv_pool_bench.py,
// medians of 3 runs, ms): batch 1: 0.70 apart, 0.52 fused with the pooling kernel, 0.45 with
// the row pairs; batch 4: 2.56, 1.64, 1.43; batch 64: 58.5, 26.8, 23.5.
#include "ops/conv_pool_fused.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/max_pool_2d.h"
#include "ops/max_pool_lanes.h"
#include "ops/nn_common.h"
#include "parallel.h"

namespace pymx {
namespace nn {
namespace {

constexpr const char* kOp = "_conv_relu_max_pool";
constexpr int64_t kBlock = kDirectConvBlockChannels;
// Bytes of convolution output (8 channels) one chunk computes; see the Note.
constexpr int64_t kChunkBytes = 64 * 1024;
// Pooled rows a band has at least (see the Note: each band computes kh - sh rows again).
constexpr int64_t kMinBandRows = 8;

int64_t round_up16(int64_t floats) { return (floats + 15) / 16 * 16; }

// How one call is cut into tasks and chunks; see the Note.
struct Plan {
  int64_t blocks, bands;    // channel blocks; bands of pooled rows per image and block
  int64_t chunk_rows;       // pooled rows per chunk
  int64_t buffer_rows;      // convolution rows of a chunk: (chunk_rows - 1) * sh + kh
  int64_t buffer_floats, pool_floats, conv_floats;  // each part's scratch, in this order
  int64_t part_floats;
};

Plan make_plan(const ConvPoolGeometry& g) {
  const ConvGeometry& conv = g.conv;
  const PoolGeom& pool = g.pool;
  const int64_t kh = pool.k[1], sh = pool.s[1], pooled_rows = pool.out[1];
  Plan plan;
  plan.blocks = (conv.out_c + kBlock - 1) / kBlock;
  const int64_t row_bytes = kBlock * conv.out[2] * static_cast<int64_t>(sizeof(float));
  plan.chunk_rows = std::clamp<int64_t>((kChunkBytes / row_bytes - kh) / sh + 1, 1, pooled_rows);
  plan.buffer_rows = (plan.chunk_rows - 1) * sh + kh;
  // Four tasks per thread when the images and channel blocks alone do not give that many.
  const int64_t planes = std::max<int64_t>(conv.batch * plan.blocks, 1);
  const int64_t wanted = (4 * parallel_max_threads() + planes - 1) / planes;
  plan.bands = std::clamp<int64_t>(wanted, 1, std::max<int64_t>(pooled_rows / kMinBandRows, 1));
  plan.buffer_floats = round_up16(kBlock * plan.buffer_rows * conv.out[2]);
  plan.pool_floats = round_up16(max_pool_f32_scratch(pool));
  plan.conv_floats = round_up16(conv2d_direct_f32_rows_scratch(conv, plan.buffer_rows));
  plan.part_floats = plan.buffer_floats + plan.pool_floats + plan.conv_floats;
  return plan;
}

int64_t task_count(const ConvPoolGeometry& g, const Plan& plan) {
  return g.conv.batch * plan.blocks * plan.bands;
}

// batch_norm's inference transform of n values: nn_norm.cc's expression, a product rounded and
// then a sum rounded, so the same floats. AVX2 for width, and without FMA on purpose: a fused
// multiply-add would round once and differ from batch_norm. (The kernel needs AVX2 anyway.)
__attribute__((target("avx2"))) void scale_and_shift(float* y, int64_t n, float scale,
                                                     float shift) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * scale + shift;
}

// ---------------------------------------------------------------------------------------------
// Max pooling 4x4 / stride 2 from row pairs, AVX-512.
//
// Note [Pooling from row pairs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The windows of pooled rows r and r + 1 share two rows, and along a row the windows of
// outputs j and j + 1 share two columns. So each pair of rows (2k, 2k + 1) is folded once, and
// pooled row r folds pairs r and r + 1: 2 vector maxima per row of vectors where the pooling
// kernel takes 3. Along the row, the maximum of each column pair (2j, 2j + 1) is taken once
// (an even/odd split, as the pooling kernel does) and output j is the maximum of pairs j and
// j + 1. A strip of up to 32 outputs walks down the chunk with its pair of rows in registers,
// and batch_norm's transform is applied before the one store, so nothing is stored and loaded
// back (the pooling kernel stores each folded row and reloads it shifted by two columns, which
// store forwarding does not serve).
// Exactness. Every maximum is first_max, which keeps its earlier operand on a tie, and each
// fold takes the earlier rows and columns as that operand: without NaN the result is the
// earliest of the window's maxima in the pooling kernel's order, so its bits are the kernel's
// (ties of +0 and -0 included; the convolution never gives -0 today, its sums start from
// +0 + bias). NaN is different: the pooling kernel folds a column's four rows in order and then
// the columns as (0, 1), (2, 3), and a first_max drops a NaN on its right. So a window's result
// is its top-left element when that is NaN, else the largest non-NaN element among the columns
// whose top element is not NaN (column 3 also needs column 2's top): a NaN at the top of a
// column hides the values below it, and a NaN lower down is skipped. Folding pairs first would
// give other results, so the strip also notes whether any element it loads is NaN (one compare
// per two vectors, a few per cent of its time) and the chunk's channel is then pooled again by
// the pooling kernel.
// Measured on one core, a hot chunk of 8 channels, per pooled row with the transform, against
// the pooling kernel and then the transform: LeafNetwork's first block (62 outputs from 127
// columns) 11.7 against 48.8 ns, its second (29 from 61) 4.9 against 29.6 ns, its third (13
// from 28) 2.5 against 18.9 ns.

// Lanes 1 .. 15 of a, then lane 0 of b.
PMX_AVX512 inline __m512 next_lanes(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(
      _mm512_alignr_epi32(_mm512_castps_si512(b), _mm512_castps_si512(a), 1));
}

// pair[v] = first_max(row, the row below) for kVectors vectors 16 columns apart from `row`,
// lanes outside in_row[v] read as zeros; sets in *nan the lanes where either row is NaN.
template <int kVectors>
PMX_AVX512 inline void fold_pair(const float* row, int64_t W, const __mmask16* in_row,
                                 __m512* pair, __mmask16* nan) {
#pragma GCC unroll 16
  for (int v = 0; v < kVectors; ++v) {
    const __m512 upper = _mm512_maskz_loadu_ps(in_row[v], row + 16 * v);
    const __m512 lower = _mm512_maskz_loadu_ps(in_row[v], row + W + 16 * v);
    *nan |= _mm512_cmp_ps_mask(upper, lower, _CMP_UNORD_Q);
    pair[v] = first_max(upper, lower);
  }
}

// Outputs [first, first + outputs) (at most 16 * kGroups) of pooled rows [0, rows) of one plane
// x of rows W wide: y[r * OW + first + j] = the max of x's rows 2r .. 2r + 3 and columns
// 2 (first + j) .. 2 (first + j) + 3, times scale plus shift when `transform`. Returns false,
// with y unfinished, when x has a NaN in the columns read.
template <int kGroups>
PMX_AVX512 bool pool_strip(const float* x, int64_t W, int64_t rows, int64_t first,
                           int64_t outputs, float* y, int64_t OW, bool transform, float scale,
                           float shift) {
  // Columns [2 first, 2 first + 32 kGroups + 2): two vectors per group of 16 outputs, then one
  // of which the last group uses two lanes.
  constexpr int kVectors = 2 * kGroups + 1;
  x += 2 * first;
  y += first;
  __mmask16 in_row[kVectors], stored[kGroups];
#pragma GCC unroll 16
  for (int v = 0; v < kVectors; ++v) in_row[v] = first_lanes(W - 2 * first - 16 * v);
#pragma GCC unroll 16
  for (int g = 0; g < kGroups; ++g) stored[g] = first_lanes(outputs - 16 * g);
  const __m512i even = even_lanes(), odd = odd_lanes();
  const __m512 scales = _mm512_set1_ps(scale), shifts = _mm512_set1_ps(shift);
  __mmask16 nan = 0;
  __m512 upper[kVectors];  // the pair of rows 2r, 2r + 1
  fold_pair<kVectors>(x, W, in_row, upper, &nan);
  for (int64_t r = 0; r < rows; ++r) {
    __m512 lower[kVectors], window[kVectors];  // rows 2r + 2, 2r + 3; all four
    fold_pair<kVectors>(x + (2 * r + 2) * W, W, in_row, lower, &nan);
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v) {
      window[v] = first_max(upper[v], lower[v]);
      upper[v] = lower[v];
    }
    // columns[g] lane j: first_max of group g's columns 2j and 2j + 1; lane 0 of `beyond`: of
    // the two columns after the last group.
    __m512 columns[kGroups];
#pragma GCC unroll 16
    for (int g = 0; g < kGroups; ++g) {
      const __m512 a = window[2 * g], b = window[2 * g + 1];
      columns[g] = first_max(_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b));
    }
    const __m512 last = window[kVectors - 1];
    const __m512 beyond = first_max(last, next_lanes(last, last));
#pragma GCC unroll 16
    for (int g = 0; g < kGroups; ++g) {
      // Output j: first_max of the column pairs j and j + 1.
      const __m512 next = g + 1 < kGroups ? columns[g + 1] : beyond;
      __m512 out = first_max(columns[g], next_lanes(columns[g], next));
      if (transform) {  // product rounded, then sum rounded: the _round forms are never fused
        out = _mm512_add_round_ps(_mm512_mul_round_ps(out, scales, _MM_FROUND_CUR_DIRECTION),
                                  shifts, _MM_FROUND_CUR_DIRECTION);
      }
      _mm512_mask_storeu_ps(y + r * OW + 16 * g, stored[g], out);
    }
  }
  return nan == 0;
}

// Whether pool_from_pairs handles the pooling at `level`.
bool pools_from_pairs(const PoolGeom& pool, FmaLevel level) {
  return level == FmaLevel::kAvx512 && pool.k[1] == 4 && pool.k[2] == 4 && pool.s[1] == 2 &&
         pool.s[2] == 2;
}

// Pooled rows [0, rows) of the plane x (pool.in[2] wide) into y (pool.out[2] wide), then
// y * scale + shift when scale is not null; see pool_strip. False, with y unfinished, when x has
// a NaN.
PMX_AVX512 bool pool_from_pairs(const PoolGeom& pool, const float* x, int64_t rows, float* y,
                                const float* scale, const float* shift) {
  const int64_t W = pool.in[2], OW = pool.out[2];
  const bool transform = scale != nullptr;
  const float k = transform ? *scale : 1.f, s = transform ? *shift : 0.f;
  bool ok = true;
  int64_t first = 0;
  for (; OW - first > 16; first += 32)
    ok &= pool_strip<2>(x, W, rows, first, std::min<int64_t>(32, OW - first), y, OW, transform,
                        k, s);
  if (first < OW) ok &= pool_strip<1>(x, W, rows, first, OW - first, y, OW, transform, k, s);
  return ok;
}

// One call's data, shared by its tasks.
struct Job {
  const ConvPoolGeometry* g;
  const Plan* plan;
  const float* x;
  const DirectConvWeights* weights;
  const float* scale;  // null without the batch-norm transform
  const float* shift;
  float* y;
  FmaLevel level;
};

// One task: image, channel block and band of pooled rows; `scratch` is the part's.
void run_task(const Job& job, int64_t task, float* scratch) {
  const ConvGeometry& conv = job.g->conv;
  const PoolGeom& pool = job.g->pool;
  const Plan& plan = *job.plan;
  const int64_t band = task % plan.bands, block = task / plan.bands % plan.blocks;
  const int64_t image = task / (plan.bands * plan.blocks);
  const int64_t first_pooled = band * pool.out[1] / plan.bands;
  const int64_t last_pooled = (band + 1) * pool.out[1] / plan.bands;
  const int64_t channels = std::min(kBlock, conv.out_c - block * kBlock);
  const int64_t OW = conv.out[2], kh = pool.k[1], sh = pool.s[1];
  const int64_t channel_stride = plan.buffer_rows * OW;  // in the buffer
  float* buffer = scratch;
  float* pool_scratch = buffer + plan.buffer_floats;
  float* conv_scratch = pool_scratch + plan.pool_floats;
  const SimdLevel pool_level = job.level == FmaLevel::kAvx512 ? SimdLevel::kAvx512
                                                              : SimdLevel::kSse2;
  const bool from_pairs = pools_from_pairs(pool, job.level);
  // Buffer row i holds convolution row base + i, for the rows [base, computed).
  int64_t base = 0, computed = 0;
  for (int64_t py = first_pooled; py < last_pooled; py += plan.chunk_rows) {
    const int64_t pooled = std::min(plan.chunk_rows, last_pooled - py);
    const int64_t first_row = py * sh, end_row = (py + pooled - 1) * sh + kh;
    if (computed <= first_row) {  // nothing computed that this chunk reads
      base = computed = first_row;
    } else if (end_row - base > plan.buffer_rows) {  // keep the shared rows, at the top
      for (int64_t c = 0; c < channels; ++c) {
        float* rows = buffer + c * channel_stride;
        std::copy(rows + (first_row - base) * OW, rows + (computed - base) * OW, rows);
      }
      base = first_row;
    }
    conv2d_direct_f32_rows(conv, job.x, *job.weights, /*relu=*/true, image, block, computed,
                           end_row, buffer + (computed - base) * OW, channel_stride,
                           conv_scratch, job.level);
    computed = end_row;
    PoolGeom chunk = pool;
    chunk.planes = 1;
    chunk.in[1] = end_row - first_row;
    chunk.out[1] = pooled;
    chunk.in_sp = chunk.in[1] * chunk.in[2];
    chunk.out_sp = chunk.out[1] * chunk.out[2];
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t oc = block * kBlock + c;
      float* dst = job.y + ((image * conv.out_c + oc) * pool.out[1] + py) * pool.out[2];
      const float* rows = buffer + c * channel_stride + (first_row - base) * OW;
      const float* scale = job.scale != nullptr ? job.scale + oc : nullptr;
      const float* shift = job.scale != nullptr ? job.shift + oc : nullptr;
      if (from_pairs && pool_from_pairs(pool, rows, pooled, dst, scale, shift)) continue;
      // Other windows, or a NaN in the chunk (see Note [Pooling from row pairs]).
      max_pool_forward_f32(pool_level, chunk, rows, dst, pool_scratch);
      if (scale != nullptr) scale_and_shift(dst, chunk.out_sp, *scale, *shift);
    }
  }
}

}  // namespace

ConvPoolGeometry conv_relu_max_pool_geometry(const Attrs& attrs, const Shape& data,
                                             const Shape& weight) {
  ConvPoolGeometry g;
  g.conv = conv_geometry(attrs, data, weight);
  const std::string convention = attrs.get_str("pool_convention", "valid");
  PMX_CHECK(convention == "valid", kOp, ": pool_convention '", convention,
            "' is not supported (only 'valid')");
  const std::string* kernel = attrs.find("pool_kernel");
  PMX_CHECK(kernel != nullptr, kOp, ": missing required attribute 'pool_kernel'");
  Attrs pool{{"pool_type", "max"}, {"kernel", *kernel}};
  if (const std::string* stride = attrs.find("pool_stride")) pool.set("stride", *stride);
  Shape conv_out = {g.conv.batch, g.conv.out_c};
  for (int i = 3 - g.conv.nsp; i < 3; ++i) conv_out.push_back(g.conv.out[i]);
  g.pool = pool_geometry(pool, conv_out);
  return g;
}

bool conv_relu_max_pool_handles(const ConvPoolGeometry& g, FmaLevel level) {
  const PoolGeom& pool = g.pool;
  const bool windows_inside = (pool.out[1] - 1) * pool.s[1] + pool.k[1] <= pool.in[1] &&
                              (pool.out[2] - 1) * pool.s[2] + pool.k[2] <= pool.in[2];
  return conv2d_direct_f32_handles(g.conv, level) && pool.nsp == 2 &&
         max_pool_forward_f32_handles(pool) && windows_inside;
}

int64_t conv_relu_max_pool_scratch(const ConvPoolGeometry& g) {
  const Plan plan = make_plan(g);
  return parallel_parts(task_count(g, plan), 1) * plan.part_floats;
}

void conv_relu_max_pool_f32(const ConvPoolGeometry& g, const float* x,
                            const DirectConvWeights& weights, const float* scale,
                            const float* shift, float* y, float* scratch, FmaLevel level) {
  const Plan plan = make_plan(g);
  const Job job{&g, &plan, x, &weights, scale, shift, y, level};
  parallel_for_parts(task_count(g, plan), 1, [&](int64_t part, int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task)
      run_task(job, task, scratch + part * plan.part_floats);
  });
}

}  // namespace nn

namespace {

using nn::ConvPoolGeometry;

const char* const kInputNames[] = {"data",  "weight",      "bias",      "gamma",
                                   "beta",  "moving_mean", "moving_var"};

void fused_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                 std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const bool bn = in.size() == 7;
  PMX_CHECK(in.size() == 3 || bn, nn::kOp,
            ": expected 3 inputs (data, weight, bias) or 7 (data, weight, bias, gamma, beta, "
            "moving_mean, moving_var), got ", in.size());
  PMX_CHECK(!attrs.get_bool("no_bias", false), nn::kOp,
            ": no_bias must be False (the bias is input 2)");
  PMX_CHECK(bn || (!attrs.has("bn_eps") && !attrs.has("bn_fix_gamma")), nn::kOp,
            ": bn_eps and bn_fix_gamma need the 7-input form with the batch-norm parameters, got ",
            in.size(), " inputs");
  for (size_t i = 0; i < in.size(); ++i) {
    if (dt[i] != DType::kFloat32)
      PMX_THROW(Status::kType, nn::kOp, ": ", kInputNames[i], " has dtype ", dtype_name(dt[i]),
                "; the fused kernel computes float32 only");
  }
  const ConvPoolGeometry g = nn::conv_relu_max_pool_geometry(attrs, in[0], in[1]);
  PMX_CHECK(nn::conv_relu_max_pool_handles(g), nn::kOp, ": the fused kernel does not handle "
            "convolution kernel ", attrs.get_str("kernel", "None"), ", stride ",
            attrs.get_str("stride", "None"), ", dilate ", attrs.get_str("dilate", "None"),
            ", num_group ", g.conv.groups, ", layout ", attrs.get_str("layout", "None"),
            " on data ", shape_str(in[0]), " followed by max pooling kernel ",
            attrs.get_str("pool_kernel", "None"), ", stride ", attrs.get_str("pool_stride", "None"),
            ". It needs a 2-D channel-first convolution with stride 1, dilate 1, one group, at "
            "most 4608 taps per output and output rows at least 16 wide (8 without AVX-512), on "
            "a CPU with AVX2+FMA or AVX-512, then a pooling of stride 2 and at most 4 along the "
            "width; run convolution and pooling instead");
  const nn::ConvGeometry& conv = g.conv;
  const Shape w = {conv.out_c, conv.in_c, conv.k[1], conv.k[2]};
  PMX_CHECK(in[1] == w, nn::kOp, ": weight shape ", shape_str(in[1]), " does not match data ",
            shape_str(in[0]), " with num_filter ", conv.out_c, " (expected ", shape_str(w), ")");
  for (size_t i = 2; i < in.size(); ++i) {
    PMX_CHECK(in[i] == Shape({conv.out_c}), nn::kOp, ": ", kInputNames[i], " shape ",
              shape_str(in[i]), " does not match num_filter ", conv.out_c);
  }
  if (bn) {  // parsed here so that a bad value fails at the call
    attrs.get_float("bn_eps", 1e-3);
    attrs.get_bool("bn_fix_gamma", true);
  }
  *out = {{conv.batch, conv.out_c, g.pool.out[1], g.pool.out[2]}};
  *out_dt = {DType::kFloat32};
}

// batch_norm's inference coefficients per channel (nn_norm.cc, running statistics): scale =
// gamma / sqrt(var + eps) and shift = beta - mean * scale, computed in double and rounded to
// float as there.
void batch_norm_coefficients(const Attrs& attrs, const std::vector<TBlob>& in,
                             std::vector<float>* scale, std::vector<float>* shift) {
  const double eps = attrs.get_float("bn_eps", 1e-3);
  const bool fix_gamma = attrs.get_bool("bn_fix_gamma", true);
  const float* gamma = in[3].data<float>();
  const float* beta = in[4].data<float>();
  const float* mean = in[5].data<float>();
  const float* var = in[6].data<float>();
  const int64_t channels = in[3].size();
  scale->resize(channels);
  shift->resize(channels);
  for (int64_t c = 0; c < channels; ++c) {
    const double g = fix_gamma ? 1.0 : static_cast<double>(gamma[c]);
    const double k = g / std::sqrt(static_cast<double>(var[c]) + eps);
    (*scale)[c] = static_cast<float>(k);
    (*shift)[c] = static_cast<float>(static_cast<double>(beta[c]) -
                                     static_cast<double>(mean[c]) * k);
  }
}

void fused_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const ConvPoolGeometry g = nn::conv_relu_max_pool_geometry(*ctx.attrs, in[0].shape, in[1].shape);
  // Note [Packed weight cache]. The batch-norm coefficients are computed on every call, not
  // cached: a few floats per channel, and not part of the packed weights.
  const std::shared_ptr<const nn::DirectConvWeights> weights =
      nn::conv2d_direct_f32_weights(ctx, g.conv, 1, in[1].data<float>(), 2, in[2].data<float>());
  std::vector<float> scale, shift;
  if (in.size() == 7) batch_norm_coefficients(*ctx.attrs, in, &scale, &shift);
  float* scratch = static_cast<float*>(
      ctx.workspace(nn::conv_relu_max_pool_scratch(g) * sizeof(float)));
  nn::conv_relu_max_pool_f32(g, in[0].data<float>(), *weights,
                             scale.empty() ? nullptr : scale.data(),
                             shift.empty() ? nullptr : shift.data(), out[0].data<float>(),
                             scratch);
}

PMX_REGISTER_OP(_conv_relu_max_pool)
    .set_num_inputs(-1)
    .set_infer(fused_infer)
    .set_cpu(fused_forward);

}  // namespace
}  // namespace pymx
