// The vector pieces the max-pooling kernels share (max_pool_2d.cc, and the pooling from row pairs
// in conv_pool_fused.cc): the maximum in the pooling's order and the lane masks and even/odd
// column splits of the AVX-512 kernels; the direct weight gradient (conv_weight_grad.cc) takes
// its lane masks from here too. x86 only.
#pragma once

// GCC 12 reports the _mm512_undefined_*() that AVX-512 intrinsics start from as maybe
// uninitialised wherever they are inlined (a false positive that GCC 13 no longer gives).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

// Functions that use AVX-512 instructions; called only where the CPU has them.
#define PMX_AVX512 __attribute__((target("avx512f")))

namespace pymx {
namespace nn {

// `left` unless `right` is greater: a tie, or a NaN on the right, keeps `left` (as
// _mm_max_ps(right, left) does). Every pooling kernel folds a window in the same order with it,
// so they agree bit for bit (Note [Vectorised max pooling]).
inline float first_max(float left, float right) { return right > left ? right : left; }
inline __m128 first_max(__m128 left, __m128 right) { return _mm_max_ps(right, left); }
PMX_AVX512 inline __m512 first_max(__m512 left, __m512 right) {
  return _mm512_max_ps(right, left);
}

// The first n of 16 lanes (n may be out of [0, 16]).
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? 0xFFFF : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1);
}

// Lane indices for _mm512_permutex2var_ps over two vectors (a row's 32 columns): the even and
// the odd columns.
PMX_AVX512 inline __m512i even_lanes() {
  return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
PMX_AVX512 inline __m512i odd_lanes() {
  return _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

}  // namespace nn
}  // namespace pymx
