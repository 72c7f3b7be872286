// The allocation-lean entry to invoke() used by the C API (engine/src/c_api.cc): inputs and out=
// arrays by pointer, results appended to a caller-owned vector, so that a call from Python
// copies no NDArray and builds no temporary vectors.
#pragma once

#include <vector>

#include "pymx/ndarray.h"
#include "pymx/op.h"

namespace pymx {

// Same contract as invoke() in pymx/op.h. `out` holds `num_out` pointers (0: none; a null
// entry: allocate that result). The results replace the contents of `*outputs`.
void invoke_into(const OpDef& op, const NDArray* const* inputs, int num_inputs,
                 const Attrs& attrs, Device device, const NDArray* const* out, int num_out,
                 std::vector<NDArray>* outputs);

}  // namespace pymx
