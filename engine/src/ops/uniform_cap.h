// The upper clamp of uniform draws, shared by the CPU op (random.cc) and the GPU op
// (cuda/src/creation.cu). Plain host code.
#pragma once

#include "pymx/base.h"

namespace pymx {

// The largest value of float `dtype` below `high`, as a double (exact in dtype), or `low` when
// it is larger (a draw from U[low, low) is low); +inf for integer dtypes (truncation already
// stays below high). A draw just below high can round to high itself in the output dtype (in
// bfloat16, one draw in 512 of U[0, 1); in float32, one in 2^25): uniform clamps its draws to
// this, so that every value lies in [low, high) as documented.
double uniform_cap(double low, double high, DType dtype);

}  // namespace pymx
