// Counter-based random numbers on the GPU: the same hash as the CPU kernels
// (Note [Counter-based random numbers] in engine/src/ops/nn_common.h), so a GPU op with the same
// seed draws exactly the numbers its CPU twin draws.
#pragma once

#include <cstdint>

namespace pymx {
namespace gpu {

__host__ __device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 random bits (exact in float).
__host__ __device__ __forceinline__ float uniform01(uint64_t seed, uint64_t index) {
  return static_cast<float>(mix64(seed ^ mix64(index)) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace gpu
}  // namespace pymx
