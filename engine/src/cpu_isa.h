// The vector instruction sets of pymx's own CPU kernels, chosen at run time.
//
// Note [CPU instruction sets]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// pymx is compiled for x86-64's baseline (SSE2). The kernels whose speed depends on the vector
// width (direct convolutions, the small GEMM and few-row products, softmax, layer_norm, the
// recurrent gates, vector math through libmvec, max pooling, dropout masks, normal samples,
// float16 conversion) also come compiled for AVX2 with FMA and for AVX-512, and each chooses
// once per process the widest set that the CPU runs and PYMX_CPU_ISA allows (config.cc). The cap
// makes a machine take the paths of an older one: the tests run each capped level this machine
// has against its best (tests/python/test_cpu_isa.py), which is how the AVX2 paths get tested on
// an AVX-512 machine and the baseline paths anywhere; and two machines capped to one level
// compute the same bits in pymx's kernels (OpenBLAS chooses its own: OPENBLAS_CORETYPE).
#pragma once

namespace pymx {

enum class CpuIsa { kBaseline, kAvx2, kAvx512 };  // kAvx2: AVX2 with FMA; kAvx512: AVX-512F

// The widest set this CPU runs (AVX-512F, else AVX2 with FMA, else the baseline), capped by
// PYMX_CPU_ISA. Thread-safe, computed once.
CpuIsa cpu_isa();

// "baseline", "avx2" or "avx512".
const char* cpu_isa_name(CpuIsa isa);

}  // namespace pymx
