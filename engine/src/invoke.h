// The allocation-lean entry to invoke() used by the C API (engine/src/c_api.cc): inputs and out=
// arrays by pointer, results appended to a caller-owned vector, so that a call from Python
// copies no NDArray and builds no temporary vectors.
#pragma once

#include <cstddef>
#include <vector>

#include "pymx/ndarray.h"
#include "pymx/op.h"

namespace pymx {

// The pointer lists handed to invoke_into: n pointers to arrays, pointer i = pointer_at(i),
// inline for the usual handful of operands (no allocation on the hot path), on the heap beyond.
// Not copyable: data() may point into the object itself.
class ArrayPointers {
 public:
  template <typename PointerAt>
  ArrayPointers(size_t n, PointerAt pointer_at) {
    if (n > kInline) {
      heap_.resize(n);
      data_ = heap_.data();
    }
    for (size_t i = 0; i < n; ++i) data_[i] = pointer_at(i);
  }
  ArrayPointers(const ArrayPointers&) = delete;
  ArrayPointers& operator=(const ArrayPointers&) = delete;
  const NDArray* const* data() const { return data_; }

 private:
  static constexpr size_t kInline = 8;
  const NDArray* inline_[kInline];
  std::vector<const NDArray*> heap_;
  const NDArray** data_ = inline_;
};

// Same contract as invoke() in pymx/op.h. `out` holds `num_out` pointers (0: none; a null
// entry: allocate that result). The results replace the contents of `*outputs`.
void invoke_into(const OpDef& op, const NDArray* const* inputs, int num_inputs,
                 const Attrs& attrs, Device device, const NDArray* const* out, int num_out,
                 std::vector<NDArray>* outputs);

}  // namespace pymx
