// Helpers shared by the CORE-OPS operator files: dtype promotion, broadcasting, axis handling,
// a strided copy that implements most layout ops, and short ways to invoke ops from gradients.
#pragma once

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
