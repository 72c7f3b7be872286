// CPU kernels of 16-bit floats run by their float kernels (Note [16-bit floats through float
// kernels]).
#pragma once

#include <algorithm>
#include <vector>

#include "ops/dispatch.h"
#include "ops/float16_convert.h"
#include "parallel.h"
#include "pymx/op.h"
#include "pymx/storage.h"

namespace pymx {
namespace nn {

// Note [16-bit floats through float kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The CPU has no 16-bit float arithmetic to speak of: _Float16 converts through libgcc calls and
// bf16_t through shifts, element by element, and pymx's fast CPU kernels (SIMD pooling, direct
// and fused convolutions, OpenBLAS) exist for float only. So the ops that do much work per
// element or sum over many (convolution, deconvolution, pooling, batch and layer norm, embedding
// backward) run float16 and bfloat16 through their float kernels: the 16-bit inputs are widened
// to float (exact), the float kernel runs, and each output is rounded once to its 16-bit dtype.
// That is what a 16-bit kernel accumulating in float would compute, at float's speed
// (LeafNetwork's bfloat16 pooling ran 40 times slower in 16 bits), for a float copy of the inputs
// and outputs. Inputs of other dtypes pass as they are. Memory-bound kernels (batch and layer
// norm) take bfloat16 as it is: its conversions are shifts, and the float copies would triple
// their memory traffic (bfloat16 LeafNetwork training ran 15% slower through them); float16's are
// libgcc calls, so they go through float (2.6 times faster).

// Which 16-bit float dtypes through_float widens.
enum class Widen { kBoth16BitFloats, kFloat16Only };

// Calls fn(T{}) with T the 16-bit float type of dtype `t`.
template <typename Fn>
void with_16bit_float_type(DType t, Fn fn) {
  if (t == DType::kFloat16) {
    fn(half_t{});
  } else {
    fn(bf16_t{});
  }
}

// dst[i] = To(src[i]) for i < n, over the intra-op threads.
template <typename To, typename From>
void convert_elements(const From* src, To* dst, int64_t n) {
  parallel_for(0, n, int64_t(1) << 16,
               [&](int64_t lo, int64_t hi) { convert_span(src + lo, dst + lo, hi - lo); });
}

// Float buffers from pymx's host cache, which keeps them for the next call (fresh pages would
// fault in on every call), released when this goes out of scope.
class FloatBuffers {
 public:
  FloatBuffers() = default;
  FloatBuffers(const FloatBuffers&) = delete;
  FloatBuffers& operator=(const FloatBuffers&) = delete;
  ~FloatBuffers() {
    for (const StorageHandle& handle : handles_) storage::free(handle);
  }

  TBlob like(const TBlob& blob) {
    handles_.reserve(handles_.size() + 1);  // so that push_back cannot lose the allocation
    handles_.push_back(storage::alloc(blob.size() * sizeof(float), blob.device));
    return TBlob{handles_.back().dptr, blob.shape, DType::kFloat32, blob.device};
  }

 private:
  std::vector<StorageHandle> handles_;
};

// `float_kernel` (a CPU kernel for float) as a kernel that also takes float16 and bfloat16. The
// kernels it wraps write their outputs whole, so a 16-bit output's float buffer starts empty.
// The inputs listed in `mutated` (batch_norm's running statistics) are updated in place by the
// kernel: widened ones are rounded back from their float copies afterwards. The inputs listed in
// `shape_only` (embedding_backward's weight) are read for their shapes only: never copied.
inline ComputeFn through_float(ComputeFn float_kernel, Widen which = Widen::kBoth16BitFloats,
                               std::vector<size_t> mutated = {},
                               std::vector<size_t> shape_only = {}) {
  return [float_kernel, which, mutated, shape_only](const OpContext& ctx,
                                                    const std::vector<TBlob>& in,
                                                    const std::vector<TBlob>& out) {
    auto widened = [which](DType t) {
      return which == Widen::kFloat16Only ? t == DType::kFloat16 : is_16bit_float(t);
    };
    FloatBuffers buffers;
    std::vector<TBlob> wide_in = in, wide_out = out;
    for (size_t k = 0; k < wide_in.size(); ++k) {
      TBlob& blob = wide_in[k];
      if (!widened(blob.dtype)) continue;
      const TBlob original = blob;
      const bool shape_only_input =
          std::find(shape_only.begin(), shape_only.end(), k) != shape_only.end();
      if (shape_only_input) {
        blob = TBlob{nullptr, original.shape, DType::kFloat32, original.device};
        continue;
      }
      blob = buffers.like(original);
      with_16bit_float_type(original.dtype, [&](auto tag) {
        using T = decltype(tag);
        convert_elements(original.data<T>(), blob.data<float>(), original.size());
      });
    }
    for (TBlob& blob : wide_out)
      if (widened(blob.dtype)) blob = buffers.like(blob);
    // A widened input is a copy at an address that says nothing of where the original lies in
    // its chunk, which a kernel keeping something derived from it tells views apart by (Note
    // [Packed weight cache]): two views of one chunk would share a key. So it has no stamp.
    std::vector<VarHandle> input_vars;
    OpContext float_ctx = ctx;
    if (ctx.input_vars != nullptr) {
      input_vars = *ctx.input_vars;
      for (size_t k = 0; k < in.size() && k < input_vars.size(); ++k)
        if (widened(in[k].dtype)) input_vars[k] = nullptr;
      float_ctx.input_vars = &input_vars;
    }
    float_kernel(float_ctx, wide_in, wide_out);
    auto narrow = [&widened](const TBlob& wide, const TBlob& blob) {
      if (!widened(blob.dtype)) return;
      with_16bit_float_type(blob.dtype, [&](auto tag) {
        using T = decltype(tag);
        convert_elements(wide.data<float>(), blob.data<T>(), blob.size());
      });
    };
    for (size_t k = 0; k < out.size(); ++k) narrow(wide_out[k], out[k]);
    for (size_t k : mutated) narrow(wide_in[k], in[k]);
  };
}

}  // namespace nn
}  // namespace pymx
