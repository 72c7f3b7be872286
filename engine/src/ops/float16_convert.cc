// See float16_convert.h. A scalar _Float16 conversion is a libgcc call (GCC 12 uses no
// conversion instruction for one value), about 5 ns per element: 0.3 s per step of LeafNetwork
// training in float16. The F16C instructions (every x86-64 CPU since 2012; checked at run time)
// convert eight values per instruction with the same IEEE rounding.
#include "ops/float16_convert.h"

#include "cpu_isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pymx {
namespace {

#if defined(__x86_64__)
bool has_f16c() {
  // F16C came with AVX and before AVX2: the baseline cap (Note [CPU instruction sets]) leaves it.
  static const bool has = cpu_isa() != CpuIsa::kBaseline && __builtin_cpu_supports("f16c");
  return has;
}

__attribute__((target("avx,f16c"))) int64_t float16_to_float_f16c(const half_t* src, float* dst,
                                                                   int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(halves));
  }
  return i;
}

__attribute__((target("avx,f16c"))) int64_t float_to_float16_f16c(const float* src, half_t* dst,
                                                                   int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), halves);
  }
  return i;
}
#endif

}  // namespace

void float16_to_float(const half_t* src, float* dst, int64_t n) {
  int64_t done = 0;
#if defined(__x86_64__)
  if (has_f16c()) done = float16_to_float_f16c(src, dst, n);
#endif
  for (int64_t i = done; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

void float_to_float16(const float* src, half_t* dst, int64_t n) {
  int64_t done = 0;
#if defined(__x86_64__)
  if (has_f16c()) done = float_to_float16_f16c(src, dst, n);
#endif
  for (int64_t i = done; i < n; ++i) dst[i] = static_cast<half_t>(src[i]);
}

}  // namespace pymx
