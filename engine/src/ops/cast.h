// Host-side dtype conversion, shared by the `cast` op and NDArray::copy_to.
#pragma once

#include "pymx/ndarray.h"

namespace pymx {

// Converts every element of `in` into `out` (same number of elements, any dtypes). Host memory
// only; call inside an op that reads `in` and writes `out`.
void cast_cpu(const TBlob& in, const TBlob& out);

}  // namespace pymx
