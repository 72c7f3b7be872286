// Shared device-side helpers for the kernel files: dtype dispatch with CUDA's __half and
// __nv_bfloat16, launch configuration, conversions, and the strided index maths of broadcasting.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cuda_check.h"
#include "pymx/op.h"

namespace pymx {
namespace gpu {

// Device float16 is __half and bfloat16 is __nv_bfloat16; arithmetic goes through float (AccT).
#define PMX_GPU_CASE_(flag, ctype, T, ...) \
  case ::pymx::DType::flag: {              \
    using T = ctype;                       \
    __VA_ARGS__;                           \
    break;                                 \
  }

#define PMX_GPU_TYPE_SWITCH(dtype, T, ...)                                                 \
  switch (dtype) {                                                                         \
    PMX_GPU_CASE_(kFloat32, float, T, __VA_ARGS__)                                         \
    PMX_GPU_CASE_(kFloat64, double, T, __VA_ARGS__)                                        \
    PMX_GPU_CASE_(kFloat16, __half, T, __VA_ARGS__)                                        \
    PMX_GPU_CASE_(kBFloat16, __nv_bfloat16, T, __VA_ARGS__)                                \
    PMX_GPU_CASE_(kUint8, uint8_t, T, __VA_ARGS__)                                         \
    PMX_GPU_CASE_(kInt8, int8_t, T, __VA_ARGS__)                                           \
    PMX_GPU_CASE_(kInt32, int32_t, T, __VA_ARGS__)                                         \
    PMX_GPU_CASE_(kInt64, int64_t, T, __VA_ARGS__)                                         \
    PMX_GPU_CASE_(kBool, bool, T, __VA_ARGS__)                                             \
    default:                                                                               \
      PMX_THROW(::pymx::Status::kType, "unsupported dtype flag ", static_cast<int>(dtype)); \
  }

#define PMX_GPU_FLOAT_SWITCH(dtype, T, ...)                                                   \
  switch (dtype) {                                                                            \
    PMX_GPU_CASE_(kFloat32, float, T, __VA_ARGS__)                                            \
    PMX_GPU_CASE_(kFloat64, double, T, __VA_ARGS__)                                           \
    PMX_GPU_CASE_(kFloat16, __half, T, __VA_ARGS__)                                           \
    PMX_GPU_CASE_(kBFloat16, __nv_bfloat16, T, __VA_ARGS__)                                   \
    default:                                                                                  \
      PMX_THROW(::pymx::Status::kType, "expected a floating-point dtype, got ",                \
                ::pymx::dtype_name(dtype));                                                   \
  }

// float16 and bfloat16: stored in 16 bits, computed in float.
template <typename T>
constexpr bool kIs16BitFloat = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// The type arithmetic on T is done in: float for __half and __nv_bfloat16, T otherwise.
template <typename T> using AccT = std::conditional_t<kIs16BitFloat<T>, float, T>;

template <typename T>
constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, double> || kIs16BitFloat<T>;

// Value conversion with NumPy's rules for the awkward cases: through float for __half and
// __nv_bfloat16 (round to nearest even, as the CPU's bf16_t), and anything -> bool is "!= 0".
template <typename To, typename From>
__host__ __device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, __half>) {
    return convert<To>(__half2float(v));
  } else if constexpr (std::is_same_v<From, __nv_bfloat16>) {
    return convert<To>(__bfloat162float(v));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    const float f = static_cast<float>(v);
    // CUDA's conversion turns every NaN into 0x7fff; the CPU's bf16_t keeps its sign and top
    // payload bits, quieted, and so does this.
    if (f != f) {
      uint32_t bits;
      memcpy(&bits, &f, sizeof bits);
      __nv_bfloat16_raw raw;
      raw.x = static_cast<unsigned short>((bits >> 16) | 0x0040);
      return __nv_bfloat16(raw);
    }
    return __float2bfloat16(f);
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

inline cudaStream_t stream_of(const OpContext& ctx) {
  return static_cast<cudaStream_t>(ctx.run.stream);
}

constexpr int kBlock = 256;  // threads per block for elementwise kernels

// Blocks for a grid-stride loop over n items: enough to fill an H200 several times over, no more.
inline unsigned grid_for(int64_t n, int block = kBlock) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

#define PMX_GRID_STRIDE_LOOP(i, n)                                                   \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);          \
       i += int64_t(blockDim.x) * gridDim.x)

// Up to kMaxDims dimensions, passed to kernels by value. `stride[d]` is the element stride of an
// input along output dimension d (0 where the input is broadcast).
constexpr int kMaxDims = 16;
struct StridedIndex {
  int ndim = 0;
  int64_t shape[kMaxDims];
  int64_t stride[kMaxDims];

  // Offset into the input of output element `i` (row-major over shape).
  __device__ __forceinline__ int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t q = i / shape[d];
      off += (i - q * shape[d]) * stride[d];
      i = q;
    }
    return off;
  }
};

// Element strides of `in` broadcast to `out` (right-aligned, NumPy rules; inference has already
// checked compatibility).
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  const size_t lead = out.size() - in.size();
  for (int d = static_cast<int>(in.size()) - 1; d >= 0; --d) {
    strides[lead + d] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  return strides;
}

// StridedIndex for several operands walked over one index space `shape` (operand k's element
// stride along dim d is strides[k][d], possibly 0 or negative), merging adjacent dimensions that
// every operand walks the same way (fewer divisions per element) and dropping extents of 1.
inline std::vector<StridedIndex> merge_strided(const Shape& shape,
                                               const std::vector<std::vector<int64_t>>& strides) {
  Shape dims;
  std::vector<std::vector<int64_t>> merged(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // contributes nothing to any offset
    bool mergeable = !dims.empty();
    for (size_t k = 0; k < strides.size() && mergeable; ++k)
      mergeable = merged[k].back() == strides[k][d] * shape[d];
    if (mergeable) {
      dims.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) merged[k].back() = strides[k][d];
    } else {
      dims.push_back(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) merged[k].push_back(strides[k][d]);
    }
  }
  PMX_CHECK(static_cast<int>(dims.size()) <= kMaxDims, "GPU kernels support at most ", kMaxDims,
            " non-mergeable dimensions, got shape ", shape_str(shape));
  std::vector<StridedIndex> result(strides.size());
  for (size_t k = 0; k < strides.size(); ++k) {
    result[k].ndim = static_cast<int>(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      result[k].shape[d] = dims[d];
      result[k].stride[d] = merged[k][d];
    }
  }
  return result;
}

// StridedIndex for inputs of shapes `ins` broadcast to `out`.
inline std::vector<StridedIndex> make_strided(const std::vector<Shape>& ins, const Shape& out) {
  std::vector<std::vector<int64_t>> strides;
  for (const Shape& s : ins) strides.push_back(broadcast_strides(s, out));
  return merge_strided(out, strides);
}

// Combines `v` over the `group` threads of the caller's group (a power of two dividing kBlock;
// groups are consecutive threads) through a shared-memory tree; returns the total to every
// thread of the group. Every thread of the block must call it. Acc is at most 16 bytes.
template <typename Acc, typename Combine>
__device__ Acc group_reduce(Acc v, int group, Combine combine) {
  __shared__ alignas(16) unsigned char raw[kBlock * sizeof(double) * 2];
  Acc* s = reinterpret_cast<Acc*>(raw);
  const int t = threadIdx.x, lane = t % group;
  s[t] = v;
  __syncthreads();
  for (int stride = group / 2; stride > 0; stride /= 2) {
    if (lane < stride) s[t] = combine(s[t], s[t + stride]);
    __syncthreads();
  }
  const Acc result = s[t - lane];
  __syncthreads();  // s is reused by the next call
  return result;
}

}  // namespace gpu
}  // namespace pymx
