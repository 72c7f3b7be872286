// The vector instruction sets of the CPU kernels that multiply-add in float vectors
// (conv_direct.cc, small_rows_product.cc): each comes compiled for AVX2+FMA and for AVX-512 and
// is chosen at run time (Note [CPU instruction sets]).
#pragma once

#include "cpu_isa.h"

namespace pymx {
namespace nn {

// kNone: the CPU has neither (the callers then use OpenBLAS).
enum class FmaLevel { kNone, kAvx2, kAvx512 };

// The level of cpu_isa(). Thread-safe.
inline FmaLevel fma_level() {
  switch (cpu_isa()) {
    case CpuIsa::kAvx512: return FmaLevel::kAvx512;
    case CpuIsa::kAvx2: return FmaLevel::kAvx2;
    default: return FmaLevel::kNone;
  }
}

}  // namespace nn
}  // namespace pymx
