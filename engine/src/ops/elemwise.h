// Helpers shared by the CORE-OPS operator files: dtype promotion, broadcasting, axis handling,
// a strided copy that implements most layout ops, and short ways to invoke ops from gradients.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/dispatch.h"
#include "pymx/op.h"

namespace pymx {
namespace ops {

using ::pymx::compute_t;  // dispatch.h

// NumPy-style promotion of two array dtypes (int16 does not exist: int8 with uint8 gives int32).
DType promote(DType a, DType b);
// The result dtype of an array op with a Python scalar: an int array with a float scalar gives
// float32 (MXNet's default float), a bool array with a number gives that number's kind.
DType promote_scalar(DType array, bool scalar_is_int);
// True when the attribute text of a scalar is an integer literal (Python repr of an int).
bool scalar_text_is_int(const std::string& text);

// Note [Integer scalars are read as int64]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A scalar operand (`*_scalar`'s "scalar", full's "value", arange's bounds) arrives as the text
// of a Python number. A double holds integers exactly only up to 2^53, so reading every scalar
// as a double made `int64_array & (2**62 + 1)` drop the low bit. An integer literal used by an
// integer computation is therefore parsed as int64 and converted to the compute type; one
// outside int64's range is an OverflowError naming it, as NumPy 2 raises for a Python int out
// of bounds for the dtype. Float computations still read a double: that is NumPy's conversion
// of a Python int to a float dtype, and 2**70 is a fine operand for a float array. An integer
// that fits int64 but not a narrower compute dtype (int8 + 300) converts modulo 2^bits, on CPU
// and GPU alike (NumPy raises there; comparisons: see pymx/numpy/_core.py).

// The integer literal `text` (scalar_text_is_int) as int64. Throws Error(kOverflow) naming the
// value and `op_name` when it does not fit.
int64_t scalar_int(const std::string& text, const std::string& op_name);

// Attribute `key` (a number's text) as the compute type C: exactly for an integer literal with
// an integral C, through a double otherwise. See Note [Integer scalars are read as int64].
template <typename C>
C scalar_as(const Attrs& attrs, const std::string& key, const std::string& op_name) {
  if constexpr (std::is_integral<C>::value && !std::is_same<C, bool>::value) {
    const std::string* text = attrs.find(key);
    if (text != nullptr && scalar_text_is_int(*text))
      return static_cast<C>(scalar_int(*text, op_name));
  }
  return static_cast<C>(attrs.get_float(key));
}

// arange(start, stop, step) computed in int64: `length` elements, the i-th `at(i)`.
struct IntRange {
  int64_t start, step, length;
  // start + i * step in two's complement: exact for every element of the range, even where
  // i * step alone would overflow.
  int64_t at(int64_t i) const {
    return static_cast<int64_t>(static_cast<uint64_t>(start) +
                                static_cast<uint64_t>(i) * static_cast<uint64_t>(step));
  }
};
// arange's attributes (start, stop (None: [0, start)), step) as an IntRange when `dtype` is an
// integer dtype and every bound is an integer literal; nullopt otherwise (the double path).
// Throws naming the values for a zero step, a bound out of int64 and a range too long.
std::optional<IntRange> int_arange_range(const Attrs& attrs, DType dtype);

// Broadcast two shapes NumPy's way; throws naming both shapes and the op.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op_name);

// Normalises an axis (negative counts from the end) for an array of `ndim` dims; throws
// Error(kInvalidArg) naming axis and ndim.
int normalize_axis(int64_t axis, int ndim, const char* op_name);
// Parses the `axis` attribute (None = all axes, an int, or a tuple) into sorted unique axes.
std::vector<int> reduce_axes(const Attrs& attrs, int ndim, const char* op_name);

// Row-major strides (in elements) of a contiguous array.
std::vector<int64_t> contiguous_strides(const Shape& shape);

// dst[i] = src[offset + sum_d index_d * strides[d]] for every index of `shape`, in row-major
// order. Strides may be 0 (broadcast) or negative (flip). Works on raw element sizes.
void strided_copy(const void* src, int64_t offset, const Shape& shape,
                  const std::vector<int64_t>& strides, void* dst, size_t elem_size);

// Returns `inputs` with every blob whose dtype differs from `dtype` converted into the op's
// workspace. Uses the workspace: call it at most once per kernel run.
std::vector<TBlob> inputs_as(const OpContext& ctx, const std::vector<TBlob>& inputs, DType dtype);

// Invoke shorthands for gradient functions.
NDArray call(const std::string& op, const std::vector<NDArray>& inputs, const Attrs& attrs = {});
NDArray scalar_op(const std::string& op, const NDArray& x, double scalar, bool reverse = false);
// Sums `grad` over broadcast axes so it takes `shape` (the gradient of a broadcast).
NDArray sum_to_shape(const NDArray& grad, const Shape& shape);
NDArray zeros_like(const NDArray& x);
NDArray ones_like(const NDArray& x);
std::string shape_attr(const Shape& shape);  // "(2, 3)"
std::string axes_attr(const std::vector<int>& axes);

}  // namespace ops
}  // namespace pymx
