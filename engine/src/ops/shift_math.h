// The element functions of the left_shift / right_shift operators, one definition for the CPU
// kernels (broadcast.cc) and the GPU kernels (cuda/src/binary.cu), so that both compute the
// same values. C is the computed type: the promoted integer dtype of the operands.
//
// NumPy's shifts: a count at or beyond the width of C shifts every bit out, giving 0 (or -1 for
// a right shift of a negative value). A negative count counts as such a wide one: NumPy reads it
// as an unsigned number. Bool and float instantiations exist only to satisfy the dispatch: the
// operators refuse floats, and the Python layer turns bool operands into integers first.
#pragma once

#include <type_traits>

#ifdef __CUDACC__
#define PMX_SHIFT_FN __host__ __device__ __forceinline__
#else
#define PMX_SHIFT_FN inline
#endif

namespace pymx {
namespace ops {

template <typename C>
PMX_SHIFT_FN bool shift_count_too_wide(C count) {
  using U = std::make_unsigned_t<C>;
  return static_cast<U>(count) >= sizeof(C) * 8;
}

template <typename C>
PMX_SHIFT_FN C left_shift_of(C a, C count) {
  if constexpr (std::is_floating_point_v<C> || std::is_same_v<C, bool>) {
    return C(0);
  } else {
    if (shift_count_too_wide(count)) return C(0);
    // Through the unsigned type, where shifting bits out at the top is defined.
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) << count));
  }
}

template <typename C>
PMX_SHIFT_FN C right_shift_of(C a, C count) {
  if constexpr (std::is_floating_point_v<C> || std::is_same_v<C, bool>) {
    return C(0);
  } else {
    if (shift_count_too_wide(count)) {
      if constexpr (std::is_signed_v<C>) return a < C(0) ? C(-1) : C(0);
      else return C(0);
    }
    return static_cast<C>(a >> count);  // arithmetic for signed C: the sign bit fills in
  }
}

}  // namespace ops
}  // namespace pymx

#undef PMX_SHIFT_FN
