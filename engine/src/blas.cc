#include "blas.h"

#include <strings.h>

#include <initializer_list>

namespace pymx {
namespace blas {

void set_num_threads(int n) { PMX_BLAS_CAT(PYMX_BLAS_PREFIX, openblas_set_num_threads)(n); }

bool runs_avx512_kernels() {
  static const bool avx512 = [] {
    const char* core = PMX_BLAS_CAT(PYMX_BLAS_PREFIX, openblas_get_corename)();
    for (const char* name : {"SkylakeX", "Cooperlake", "SapphireRapids"})
      if (core != nullptr && strcasecmp(core, name) == 0) return true;
    return false;
  }();
  return avx512;
}

namespace {
// One OpenBLAS thread per engine worker (see blas.h).
const bool g_single_threaded = [] {
  set_num_threads(1);
  return true;
}();
}  // namespace

}  // namespace blas
}  // namespace pymx
