#include "blas.h"

namespace pymx {
namespace blas {

void set_num_threads(int n) { PMX_BLAS_CAT(PYMX_BLAS_PREFIX, openblas_set_num_threads)(n); }

namespace {
// One OpenBLAS thread per engine worker (see blas.h).
const bool g_single_threaded = [] {
  set_num_threads(1);
  return true;
}();
}  // namespace

}  // namespace blas
}  // namespace pymx
