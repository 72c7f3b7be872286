// CPU BLAS through OpenBLAS from the scipy-openblas32 wheel. Its cblas.h declares only the
// prefixed names (scipy_cblas_sgemm, ...), see reference/build-notes.md Q2; PMX_CBLAS(sgemm)
// spells the prefixed name, so kernels read like plain CBLAS.
#pragma once

#include <cblas.h>

#ifndef PYMX_BLAS_PREFIX
#define PYMX_BLAS_PREFIX scipy_
#endif

#define PMX_BLAS_CAT_(a, b) a##b
#define PMX_BLAS_CAT(a, b) PMX_BLAS_CAT_(a, b)
#define PMX_CBLAS(name) PMX_BLAS_CAT(PYMX_BLAS_PREFIX, cblas_##name)

namespace pymx {
namespace blas {

// Number of threads OpenBLAS uses inside one call. pymx sets 1 at load time: the engine already
// runs one op per worker thread, and nested OpenBLAS threads only oversubscribe the cores.
void set_num_threads(int n);

// Whether OpenBLAS runs its AVX-512 kernels: the core it chose at load time from the CPU and
// OPENBLAS_CORETYPE (a machine that sets OPENBLAS_CORETYPE=Haswell gets the AVX2 ones).
bool runs_avx512_kernels();

}  // namespace blas
}  // namespace pymx
