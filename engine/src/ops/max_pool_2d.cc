// Vectorised float max pooling over one channel plane (max_pool_2d.h): SSE2 and AVX-512 kernels
// and the choice between them.
#include "ops/max_pool_2d.h"

#if defined(__SSE2__)

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpu_isa.h"
#include "ops/max_pool_lanes.h"
#include "pymx/base.h"

namespace pymx {
namespace nn {
namespace {

// Note [Vectorised max pooling]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// LeafNetwork max-pools post-ReLU activations in 4x4 windows at stride 2; its first pool reads
// 64 x 32 planes of 127 x 127 (132 MB). Times below are for that pool on one Zen 5 core (a
// shared machine: +-10%).
//
// Forward (stride 2 along the width). Per output row, the max of its window rows is folded into a
// scratch row, one vector max per input row. Splitting that row into its even and odd columns
// (E, O; shuffles) puts one output per lane: kernel width 2 is P = max(E, O), the max of each
// column pair; width 4 is max(P, P one output on); width 3 is max(P, max(O, E one output on)).
// That is 3 vector maxima per vector of outputs, where the generic code (Note [Separable max
// pooling]) makes two passes over the whole row and then picks every other element one by one.
// 10.5 ms before; now 6.5 ms with SSE2 and 5.5 ms with AVX-512, against 4.4 ms to read the input.
//
// Backward, AVX-512 (stride 2 along the width, any kernel height): 16 outputs at once. For each
// window position in row-major order, the 16 inputs there (again from even/odd splits of the
// input row) are compared with the 16 outputs; `open` marks the outputs still without a match,
// so hit = equal & open gets the gradient and open &= ~equal. The hits' gradients are zipped
// back into column order and added to dx. 37 ms before, 13 ms now, bound by its ~60
// instructions per window row and 16 outputs.
//
// Backward, SSE2 (any stride, windows up to 4x4): per output, each window row is compared with
// the output in one 4-wide compare; the rows' 4-bit masks stacked into 16 bits put the first
// match in row-major order at the lowest set bit, without a data-dependent branch. 27 ms.
//
// Windows clipped by the right edge ('full' convention) take scalar code in all kernels.
//
// Exactness. The kernels give the generic code's results bit for bit:
//  - first_max(left, right) keeps `left` unless `right` is greater (as _mm_max_ps(right, left)
//    does), and the forward folds rows and then column pairs in the generic code's order, so
//    even which of +0 and -0 a tie returns and how a NaN propagates are the same.
//  - A dx element gets the gradients of up to 4 overlapping windows. The scalar loop adds them in
//    output order to a zeroed dx; so does the AVX-512 kernel: dx rows are zeroed just before the
//    first window that reaches them, output rows run in order, and within a row an element takes
//    the previous output's gradient (its window columns 2, 3) before the next output's (columns
//    0, 1). Lanes without a hit add +0, which changes nothing, as dx never holds -0.
//
// Memory. The kernels read a plane a few hundred bytes at a time, and the hardware prefetchers
// did not run far enough ahead: each kernel prefetches the input rows that the output row about
// kPrefetchBytes further on will add (SSE2 forward 8.6 -> 6.4 ms, SSE2 backward 39 -> 27 ms;
// LeafNetwork's second pool forward, 61 x 61 planes, 4.3 -> 3.1 ms at 8 KB instead of 8 rows).

// Input rows (dim 1) or columns (dim 2) [lo, hi) of output o: its window clipped to the input,
// as nn_pooling.cc's window().
struct Span {
  int64_t lo, hi;
};
Span window(const PoolGeom& g, int dim, int64_t o) {
  const int64_t start = o * g.s[dim] - g.p[dim];
  return {std::max<int64_t>(start, 0), std::min(start + g.k[dim], g.in[dim])};
}

// Outputs at the start of a row whose windows fit in the row (the rest are clipped by its end).
// For the stride-2 kernels, which have no width padding.
int64_t unclipped_outputs(const PoolGeom& g) { return (g.in[2] - g.k[2]) / 2 + 1; }

// The shapes of the stride-2 kernels (the backward's; the forward also needs no height padding).
bool stride2(const PoolGeom& g) {
  return g.type == PoolType::kMax && g.nsp <= 2 && g.s[2] == 2 && g.k[2] <= 4 && g.p[2] == 0;
}

int64_t scratch_floats(const PoolGeom& g) {
  // Forward: the folded row and zeros for the AVX-512 loads past it (up to 2 * ox + 33 for the
  // last block, < W + 33). Backward: two carry vectors per window row.
  return std::max(g.in[2] + 48, 32 * g.k[1]);
}

// How far ahead the kernels prefetch; see Note [Vectorised max pooling] (Memory).
constexpr int64_t kPrefetchBytes = 8192;

// Prefetches `floats` floats from `offset` floats past p. The range may lie past the plane: the
// next plane follows it in memory and is read next, and a prefetch never faults (the address is
// computed as an integer, so it need not point into an object).
// The prefetch helpers are always inlined: GCC finds a function that only prefetches free of side
// effects and drops the calls to it.
[[gnu::always_inline]] inline void prefetch(const float* p, int64_t offset, int64_t floats) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) + offset * sizeof(float);
  for (uintptr_t b = 0; b < floats * sizeof(float); b += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(start + b), _MM_HINT_T0);
  }
}

// Prefetches the input rows that the output row about kPrefetchBytes of input after oy adds to
// its window and, for the backward, the rows of y and dy of that output row.
[[gnu::always_inline]] inline void prefetch_ahead(const PoolGeom& g, int64_t oy, const Span& rows,
                                                 const float* x, const float* y = nullptr,
                                                 const float* dy = nullptr) {
  const int64_t W = g.in[2];
  const int64_t ahead = std::max<int64_t>(1, kPrefetchBytes / (g.s[1] * W * sizeof(float)));
  prefetch(x, (rows.hi + ahead * g.s[1]) * W, std::min(g.s[1], g.k[1]) * W);
  if (y != nullptr) {
    prefetch(y, (oy + ahead) * g.out[2], g.out[2]);
    prefetch(dy, (oy + ahead) * g.out[2], g.out[2]);
  }
}

// Outputs clipped by the end of the row: the max over columns cols of the folded row v.
void clipped_outputs(const PoolGeom& g, const float* v, int64_t first, float* dst) {
  for (int64_t ox = first; ox < g.out[2]; ++ox) {
    const Span cols = window(g, 2, ox);
    float m = v[cols.lo];
    for (int64_t i = cols.lo + 1; i < cols.hi; ++i) m = first_max(m, v[i]);
    dst[ox] = m;
  }
}

// ---------------------------------------------------------------------------------------------
// Forward, SSE2.

// The folded row v (with readable zeros after it) -> outputs ox .. ox + 3 of the row.
template <int kKernelWidth>
__m128 four_outputs(const float* v, int64_t ox) {
  const float* p = v + 2 * ox;
  const __m128 a = _mm_loadu_ps(p), b = _mm_loadu_ps(p + 4);
  const __m128 even = _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // columns 2j
  if constexpr (kKernelWidth == 1) return even;
  const __m128 odd = _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));   // columns 2j + 1
  const __m128 pairs = first_max(even, odd);
  if constexpr (kKernelWidth == 2) return pairs;
  const __m128 a2 = _mm_loadu_ps(p + 2), b2 = _mm_loadu_ps(p + 6);
  const __m128 even2 = _mm_shuffle_ps(a2, b2, _MM_SHUFFLE(2, 0, 2, 0));  // columns 2j + 2
  if constexpr (kKernelWidth == 3) return first_max(pairs, first_max(odd, even2));
  return first_max(pairs, first_max(even2, _mm_shuffle_ps(a2, b2, _MM_SHUFFLE(3, 1, 3, 1))));
}

// See Note [Vectorised max pooling] (Forward). `v`: scratch_floats(g) floats.
template <int kKernelWidth>
void forward_sse2(const PoolGeom& g, const float* x, float* y, float* v) {
  const int64_t W = g.in[2], OW = g.out[2], fits = unclipped_outputs(g);
  std::fill(v + W, v + scratch_floats(g), 0.f);
  for (int64_t oy = 0; oy < g.out[1]; ++oy) {
    const Span rows = window(g, 1, oy);
    prefetch_ahead(g, oy, rows, x);
    const float* top = x + rows.lo * W;
    const int64_t n = rows.hi - rows.lo;
    int64_t i = 0;
    for (; i + 4 <= W; i += 4) {
      __m128 m = _mm_loadu_ps(top + i);
      for (int64_t r = 1; r < n; ++r) m = first_max(m, _mm_loadu_ps(top + r * W + i));
      _mm_storeu_ps(v + i, m);
    }
    for (; i < W; ++i) {
      float m = top[i];
      for (int64_t r = 1; r < n; ++r) m = first_max(m, top[r * W + i]);
      v[i] = m;
    }
    float* dst = y + oy * OW;
    int64_t ox = 0;
    for (; ox + 4 <= fits; ox += 4) _mm_storeu_ps(dst + ox, four_outputs<kKernelWidth>(v, ox));
    if (ox < fits) {
      alignas(16) float last[4];
      _mm_store_ps(last, four_outputs<kKernelWidth>(v, ox));
      std::copy(last, last + (fits - ox), dst + ox);
    }
    clipped_outputs(g, v, fits, dst);
  }
}

// ---------------------------------------------------------------------------------------------
// Forward, AVX-512.

// The folded row v (with readable zeros after it) -> outputs ox .. ox + 15 of the row.
template <int kKernelWidth>
PMX_AVX512 __m512 sixteen_outputs(const float* v, int64_t ox, __m512i even, __m512i odd) {
  const float* p = v + 2 * ox;
  const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
  const __m512 even_cols = _mm512_permutex2var_ps(a, even, b);
  if constexpr (kKernelWidth == 1) return even_cols;
  const __m512 odd_cols = _mm512_permutex2var_ps(a, odd, b);
  const __m512 pairs = first_max(even_cols, odd_cols);
  if constexpr (kKernelWidth == 2) return pairs;
  const __m512 a2 = _mm512_loadu_ps(p + 2), b2 = _mm512_loadu_ps(p + 18);
  const __m512 even2 = _mm512_permutex2var_ps(a2, even, b2);
  if constexpr (kKernelWidth == 3) return first_max(pairs, first_max(odd_cols, even2));
  return first_max(pairs, first_max(even2, _mm512_permutex2var_ps(a2, odd, b2)));
}

// See Note [Vectorised max pooling] (Forward). `v`: scratch_floats(g) floats.
template <int kKernelWidth>
PMX_AVX512 void forward_avx512(const PoolGeom& g, const float* x, float* y, float* v) {
  const int64_t W = g.in[2], OW = g.out[2], fits = unclipped_outputs(g);
  const __m512i even = even_lanes(), odd = odd_lanes();
  std::fill(v + W, v + scratch_floats(g), 0.f);
  for (int64_t oy = 0; oy < g.out[1]; ++oy) {
    const Span rows = window(g, 1, oy);
    prefetch_ahead(g, oy, rows, x);
    const float* top = x + rows.lo * W;
    const int64_t n = rows.hi - rows.lo;
    for (int64_t i = 0; i < W; i += 16) {
      const __mmask16 in_row = first_lanes(W - i);
      __m512 m = _mm512_maskz_loadu_ps(in_row, top + i);
      for (int64_t r = 1; r < n; ++r) {
        m = first_max(m, _mm512_maskz_loadu_ps(in_row, top + r * W + i));
      }
      _mm512_storeu_ps(v + i, m);  // lanes past the row land in the scratch's zeroed tail
    }
    float* dst = y + oy * OW;
    for (int64_t ox = 0; ox < fits; ox += 16) {
      _mm512_mask_storeu_ps(dst + ox, first_lanes(fits - ox),
                            sixteen_outputs<kKernelWidth>(v, ox, even, odd));
    }
    clipped_outputs(g, v, fits, dst);
  }
}

// ---------------------------------------------------------------------------------------------
// Backward.

// Adds grad to dx at the first input (row-major) of the window rows x cols equal to m, if any.
void add_at_first_match(int64_t W, const Span& rows, const Span& cols, const float* x, float m,
                        float grad, float* dx) {
  for (int64_t iy = rows.lo; iy < rows.hi; ++iy) {
    for (int64_t ix = cols.lo; ix < cols.hi; ++ix) {
      if (x[iy * W + ix] == m) {
        dx[iy * W + ix] += grad;
        return;
      }
    }
  }
}

// Zeroes dx rows [*zeroed, to) and advances *zeroed. Rows are zeroed just before the first window
// that reaches them, so they are still in cache when the gradients arrive.
void zero_rows(const PoolGeom& g, float* dx, int64_t to, int64_t* zeroed) {
  if (to <= *zeroed) return;
  std::fill(dx + *zeroed * g.in[2], dx + to * g.in[2], 0.f);
  *zeroed = to;
}

// See Note [Vectorised max pooling] (Backward, SSE2).
void backward_sse2(const PoolGeom& g, const float* dy, const float* x, const float* y,
                   float* dx) {
  const int64_t W = g.in[2], OW = g.out[2];
  int64_t zeroed = 0;
  for (int64_t oy = 0; oy < g.out[1]; ++oy) {
    const Span rows = window(g, 1, oy);
    zero_rows(g, dx, rows.hi, &zeroed);
    prefetch_ahead(g, oy, rows, x, y, dy);
    for (int64_t ox = 0; ox < OW; ++ox) {
      const Span cols = window(g, 2, ox);
      const int64_t o = oy * OW + ox;
      if (cols.lo + 4 > W) {  // the 4-wide loads would leave the row
        add_at_first_match(W, rows, cols, x, y[o], dy[o], dx);
        continue;
      }
      const __m128 m = _mm_set1_ps(y[o]);
      const float* corner = x + rows.lo * W + cols.lo;
      auto row_bits = [&](int64_t r) {
        return static_cast<unsigned>(
            _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(corner + r * W), m)));
      };
      unsigned bits = 0;
      if (rows.hi - rows.lo == 4 && cols.hi - cols.lo == 4) {  // LeafNetwork's case, unrolled
        bits = row_bits(0) | row_bits(1) << 4 | row_bits(2) << 8 | row_bits(3) << 12;
      } else {
        const unsigned columns = (1u << (cols.hi - cols.lo)) - 1;
        for (int64_t r = 0; r < rows.hi - rows.lo; ++r) bits |= (row_bits(r) & columns) << (4 * r);
      }
      if (bits != 0) {  // no match only when the output is NaN
        const int first = __builtin_ctz(bits);
        dx[(rows.lo + first / 4) * W + cols.lo + first % 4] += dy[o];
      }
    }
  }
  zero_rows(g, dx, g.in[1], &zeroed);
}

// The outputs whose first match is `inputs` (one window position): the still open ones equal to
// m, which it closes.
PMX_AVX512 inline __mmask16 take_matches(__m512 inputs, __m512 m, __mmask16* open) {
  const __mmask16 equal = _mm512_cmp_ps_mask(inputs, m, _CMP_EQ_OQ);
  const __mmask16 hit = _kand_mask16(equal, *open);
  *open = _kandn_mask16(equal, *open);
  return hit;
}

// {carry[15], v[0], ..., v[14]}; then carry = v. Window columns 2 and 3 of output j are columns 0
// and 1 of output j + 1, so their gradients move one output on, the last into the next block.
PMX_AVX512 inline __m512 shift_in(__m512 v, float* carry) {
  const __m512 shifted = _mm512_castsi512_ps(_mm512_alignr_epi32(
      _mm512_castps_si512(v), _mm512_castps_si512(_mm512_loadu_ps(carry)), 15));
  _mm512_storeu_ps(carry, v);
  return shifted;
}

// A block's columns [0, 16) (zip_low: lanes 0-7 of each) and [16, 32) (zip_high: lanes 8-15)
// from its even and odd columns.
PMX_AVX512 inline __m512 zip_low(__m512 even, __m512 odd) {
  return _mm512_permutex2var_ps(
      even, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), odd);
}
PMX_AVX512 inline __m512 zip_high(__m512 even, __m512 odd) {
  return _mm512_permutex2var_ps(
      even, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), odd);
}

// See Note [Vectorised max pooling] (Backward). `carry`: 32 floats per window row (see shift_in).
template <int kKernelWidth>
PMX_AVX512 void backward_avx512(const PoolGeom& g, const float* dy, const float* x,
                                const float* y, float* dx, float* carry) {
  const int64_t W = g.in[2], OW = g.out[2], fits = unclipped_outputs(g);
  const __m512i even = even_lanes(), odd = odd_lanes();
  int64_t zeroed = 0;
  for (int64_t oy = 0; oy < g.out[1]; ++oy) {
    const Span rows = window(g, 1, oy);
    zero_rows(g, dx, rows.hi, &zeroed);
    prefetch_ahead(g, oy, rows, x, y, dy);
    std::fill(carry, carry + 32 * (rows.hi - rows.lo), 0.f);
    // Blocks of 16 outputs (columns [c0, c0 + 32) and the next two), then one with none that
    // only delivers the last block's carry.
    for (int64_t ox0 = 0; ox0 <= fits; ox0 += 16) {
      const __mmask16 outputs = first_lanes(fits - ox0);
      const __m512 m = _mm512_maskz_loadu_ps(outputs, y + oy * OW + ox0);
      const __m512 grad = _mm512_maskz_loadu_ps(outputs, dy + oy * OW + ox0);
      const int64_t c0 = 2 * ox0;
      const __mmask16 in_row[4] = {first_lanes(W - c0), first_lanes(W - c0 - 16),
                                   first_lanes(W - c0 - 2), first_lanes(W - c0 - 18)};
      __mmask16 open = outputs;
      for (int64_t iy = rows.lo; iy < rows.hi; ++iy) {
        // hit[c]: the outputs whose first match is window column c of this row.
        __mmask16 hit[4] = {0, 0, 0, 0};
        const float* xr = x + iy * W + c0;
        const __m512 a = _mm512_maskz_loadu_ps(in_row[0], xr);
        const __m512 b = _mm512_maskz_loadu_ps(in_row[1], xr + 16);
        hit[0] = take_matches(_mm512_permutex2var_ps(a, even, b), m, &open);
        if constexpr (kKernelWidth >= 2) {
          hit[1] = take_matches(_mm512_permutex2var_ps(a, odd, b), m, &open);
        }
        if constexpr (kKernelWidth >= 3) {
          const __m512 a2 = _mm512_maskz_loadu_ps(in_row[2], xr + 2);
          const __m512 b2 = _mm512_maskz_loadu_ps(in_row[3], xr + 18);
          hit[2] = take_matches(_mm512_permutex2var_ps(a2, even, b2), m, &open);
          if constexpr (kKernelWidth == 4) {
            hit[3] = take_matches(_mm512_permutex2var_ps(a2, odd, b2), m, &open);
          }
        }
        float* row_carry = carry + 32 * (iy - rows.lo);
        const __m512 from_left2 = shift_in(_mm512_maskz_mov_ps(hit[2], grad), row_carry);
        const __m512 from_left3 = shift_in(_mm512_maskz_mov_ps(hit[3], grad), row_carry + 16);
        const __m512 to0 = _mm512_maskz_mov_ps(hit[0], grad);
        const __m512 to1 = _mm512_maskz_mov_ps(hit[1], grad);
        // The previous output's gradients first, as the scalar loop adds them.
        float* dxr = dx + iy * W + c0;
        __m512 low = _mm512_maskz_loadu_ps(in_row[0], dxr);
        __m512 high = _mm512_maskz_loadu_ps(in_row[1], dxr + 16);
        low = _mm512_add_ps(_mm512_add_ps(low, zip_low(from_left2, from_left3)), zip_low(to0, to1));
        high = _mm512_add_ps(_mm512_add_ps(high, zip_high(from_left2, from_left3)),
                             zip_high(to0, to1));
        _mm512_mask_storeu_ps(dxr, in_row[0], low);
        _mm512_mask_storeu_ps(dxr + 16, in_row[1], high);
      }
    }
    for (int64_t ox = fits; ox < OW; ++ox) {
      add_at_first_match(W, rows, window(g, 2, ox), x, y[oy * OW + ox], dy[oy * OW + ox], dx);
    }
  }
  zero_rows(g, dx, g.in[1], &zeroed);
}

template <typename Kernel>
void by_kernel_width(const PoolGeom& g, Kernel kernel) {
  switch (g.k[2]) {
    case 1: return kernel(std::integral_constant<int, 1>());
    case 2: return kernel(std::integral_constant<int, 2>());
    case 3: return kernel(std::integral_constant<int, 3>());
    default: return kernel(std::integral_constant<int, 4>());
  }
}

}  // namespace

SimdLevel max_pool_simd_level() {
  return cpu_isa() == CpuIsa::kAvx512 ? SimdLevel::kAvx512 : SimdLevel::kSse2;
}

// With height padding the generic code takes its window loop, whose row-major order resolves a tie
// of -0 and +0 differently.
bool max_pool_forward_f32_handles(const PoolGeom& g) { return stride2(g) && g.p[1] == 0; }

bool max_pool_backward_f32_handles(SimdLevel level, const PoolGeom& g) {
  if (level == SimdLevel::kAvx512 && stride2(g)) return true;
  return g.type == PoolType::kMax && g.nsp <= 2 && g.k[1] <= 4 && g.k[2] <= 4;
}

int64_t max_pool_f32_scratch(const PoolGeom& g) { return scratch_floats(g); }

void max_pool_forward_f32(SimdLevel level, const PoolGeom& g, const float* x, float* y,
                          float* scratch) {
  PMX_ASSERT(max_pool_forward_f32_handles(g) && level <= max_pool_simd_level(),
             "max_pool_forward_f32: kernel ", shape_str({g.k[1], g.k[2]}), " stride ",
             shape_str({g.s[1], g.s[2]}), " pad ", shape_str({g.p[1], g.p[2]}));
  by_kernel_width(g, [&](auto width) {
    if (level == SimdLevel::kAvx512) {
      forward_avx512<decltype(width)::value>(g, x, y, scratch);
    } else {
      forward_sse2<decltype(width)::value>(g, x, y, scratch);
    }
  });
}

void max_pool_backward_f32(SimdLevel level, const PoolGeom& g, const float* dy, const float* x,
                           const float* y, float* dx, float* scratch) {
  PMX_ASSERT(max_pool_backward_f32_handles(level, g) && level <= max_pool_simd_level(),
             "max_pool_backward_f32: kernel ", shape_str({g.k[1], g.k[2]}), " stride ",
             shape_str({g.s[1], g.s[2]}), " pad ", shape_str({g.p[1], g.p[2]}));
  if (level == SimdLevel::kAvx512 && stride2(g)) {
    by_kernel_width(g, [&](auto width) {
      backward_avx512<decltype(width)::value>(g, dy, x, y, dx, scratch);
    });
  } else {
    backward_sse2(g, dy, x, y, dx);
  }
}

}  // namespace nn
}  // namespace pymx

#endif  // __SSE2__
