// PMX_HOST_DEVICE marks the functions a header shares between the CPU kernels and their CUDA
// twins: compiled by nvcc they are device functions too (inlined into the kernels), compiled by
// the host compiler plain inline functions. Both devices then run the same expressions, which is
// what lets the GPU tests compare against the CPU bit for bit.
#pragma once

#ifdef __CUDACC__
#define PMX_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define PMX_HOST_DEVICE inline
#endif
