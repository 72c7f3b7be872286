// Vectorised float max pooling over one channel plane, forward and backward, for the pooling op
// (nn_pooling.cc), which picks these kernels for float data and falls back to its generic code for
// other dtypes and shapes. Each kernel comes for one instruction set, chosen at run time
// (max_pool_simd_level), so a build for x86-64's SSE2 baseline still uses AVX-512 where the CPU
// has it. See Note [Vectorised max pooling] in max_pool_2d.cc.
//
// A plane is g.in[1] x g.in[2] inputs and g.out[1] x g.out[2] outputs (1-D pooling has one row),
// row-major. Results are bit-identical across levels and to the generic code.
#pragma once

#include <cstdint>

#include "ops/pool_geometry.h"

namespace pymx {
namespace nn {

#if defined(__SSE2__)

// Instruction sets the kernels come in. SSE2 is part of x86-64, so it is always available.
enum class SimdLevel { kSse2, kAvx512 };

// The best level this CPU runs: kAvx512 when it has AVX-512F (with the OS saving its registers).
// Thread-safe; the answer is computed once.
SimdLevel max_pool_simd_level();

// Whether the forward kernel handles g: max pooling over 1 or 2 spatial dimensions, no padding,
// stride 2 and a kernel of at most 4 along the width (LeafNetwork's 4x4 / stride 2, 2x2 / 2,
// 3x3 / 2), any kernel and stride along the height; 'valid' or 'full'.
bool max_pool_forward_f32_handles(const PoolGeom& g);

// Whether the backward kernel at `level` handles g: at kAvx512 the shapes of the forward kernel,
// height padding too; at both levels, any 1-D or 2-D max pooling whose kernel is at most 4 x 4.
bool max_pool_backward_f32_handles(SimdLevel level, const PoolGeom& g);

// Floats of scratch one call of either kernel below needs for g.
int64_t max_pool_f32_scratch(const PoolGeom& g);

// y = max pooling of the plane x. `scratch` holds max_pool_f32_scratch(g) floats that no other
// thread uses during the call. Requires max_pool_forward_f32_handles(g); `level` must not be better
// than max_pool_simd_level().
void max_pool_forward_f32(SimdLevel level, const PoolGeom& g, const float* x, float* y,
                          float* scratch);

// dx = the gradient of the plane x for output gradient dy, all of dx written (0 where no window
// sends anything): each output's gradient goes to the first (row-major) input of its window equal
// to the output y, as MXNet's unpool does; none when no input equals it (y is NaN). Requires
// max_pool_backward_f32_handles(level, g); `scratch` and `level` as for the forward.
void max_pool_backward_f32(SimdLevel level, const PoolGeom& g, const float* dy, const float* x,
                           const float* y, float* dx, float* scratch);

#endif  // __SSE2__

}  // namespace nn
}  // namespace pymx
