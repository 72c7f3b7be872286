// The vector instruction sets of the CPU kernels that multiply-add in float vectors
// (conv_direct.cc, small_rows_product.cc): each comes compiled for AVX2+FMA and for AVX-512 and
// is chosen at run time, so a build for x86-64's baseline still uses what the CPU has.
#pragma once

namespace pymx {
namespace nn {

// kNone: the CPU has neither (the callers then use OpenBLAS).
enum class FmaLevel { kNone, kAvx2, kAvx512 };

// The best level this CPU runs (AVX-512F, else AVX2 with FMA). Thread-safe, computed once.
inline FmaLevel fma_level() {
  static const FmaLevel level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return FmaLevel::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return FmaLevel::kAvx2;
    return FmaLevel::kNone;
  }();
  return level;
}

}  // namespace nn
}  // namespace pymx
