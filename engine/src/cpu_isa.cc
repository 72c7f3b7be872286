// See Note [CPU instruction sets] in cpu_isa.h.
#include "cpu_isa.h"

#include <algorithm>
#include <string>

#include "config.h"

namespace pymx {
namespace {

CpuIsa best_of_this_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return CpuIsa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::kAvx2;
  return CpuIsa::kBaseline;
}

// PYMX_CPU_ISA's set (config.cc has checked the name).
CpuIsa parse_cap(const std::string& name) {
  return name == "avx512" ? CpuIsa::kAvx512 : name == "avx2" ? CpuIsa::kAvx2 : CpuIsa::kBaseline;
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx2: return "avx2";
    default: return "baseline";
  }
}

CpuIsa cpu_isa() {
  static const CpuIsa isa = [] {
    const std::string& cap = config().cpu_isa;
    return cap.empty() ? best_of_this_cpu() : std::min(best_of_this_cpu(), parse_cap(cap));
  }();
  return isa;
}

}  // namespace pymx
