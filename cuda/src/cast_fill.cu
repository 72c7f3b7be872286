// Dtype conversion, fills and strided copies: the helpers of launch.h and the `cast` operator.
//
// | op   | inputs | outputs | attrs |
// |------|--------|---------|-------|
// | cast | data   | out     | dtype |
#include "kernel_util.cuh"
#include "launch.h"

namespace pymx {
namespace gpu {
namespace {

template <typename In, typename Out>
__global__ void cast_kernel(const In* in, Out* out, int64_t n) {
  PMX_GRID_STRIDE_LOOP(i, n) out[i] = convert<Out>(in[i]);
}

// Elements moved as raw bits of their size.
template <typename E>
__global__ void gather_kernel(const E* src, E* dst, int64_t n, StridedIndex index) {
  PMX_GRID_STRIDE_LOOP(i, n) dst[i] = src[index.offset(i)];
}

template <typename T>
__global__ void fill_kernel(T* out, T value, int64_t n) {
  PMX_GRID_STRIDE_LOOP(i, n) out[i] = value;
}

void cast_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  cast_blob(in[0], out[0], ctx.run.stream);
}

}  // namespace

void cast_blob(const TBlob& in, const TBlob& out, void* stream) {
  PMX_ASSERT(in.size() == out.size(), "cast_blob: ", in.size(), " elements into ", out.size());
  const int64_t n = in.size();
  if (n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (in.dtype == out.dtype) {
    PMX_CUDA_CHECK(cudaMemcpyAsync(out.dptr, in.dptr, n * dtype_size(in.dtype),
                                   cudaMemcpyDeviceToDevice, s));
    return;
  }
  PMX_GPU_TYPE_SWITCH(in.dtype, In, {
    PMX_GPU_TYPE_SWITCH(out.dtype, Out, {
      cast_kernel<In, Out><<<grid_for(n), kBlock, 0, s>>>(in.data<In>(), out.data<Out>(), n);
      PMX_KERNEL_LAUNCH_CHECK();
    });
  });
}

void fill_blob(const TBlob& out, double value, void* stream) {
  const int64_t n = out.size();
  if (n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  PMX_GPU_TYPE_SWITCH(out.dtype, T, {
    fill_kernel<T><<<grid_for(n), kBlock, 0, s>>>(out.data<T>(), convert<T>(value), n);
    PMX_KERNEL_LAUNCH_CHECK();
  });
}

std::vector<TBlob> blobs_as(const OpContext& ctx, const std::vector<TBlob>& blobs,
                            const std::vector<DType>& dtypes) {
  size_t bytes = 0;
  for (size_t i = 0; i < blobs.size(); ++i)
    if (blobs[i].dtype != dtypes[i]) bytes += workspace_aligned(blobs[i].size() * dtype_size(dtypes[i]));
  // An empty blob still takes its dtype (the kernels switch on it), with no workspace.
  char* space = bytes > 0 ? static_cast<char*>(ctx.workspace(bytes)) : nullptr;
  std::vector<TBlob> result = blobs;
  for (size_t i = 0; i < blobs.size(); ++i) {
    if (blobs[i].dtype == dtypes[i]) continue;
    result[i].dptr = space;
    result[i].dtype = dtypes[i];
    if (blobs[i].size() > 0) cast_blob(blobs[i], result[i], ctx.run.stream);
    space += workspace_aligned(blobs[i].size() * dtype_size(dtypes[i]));
  }
  return result;
}

std::vector<TBlob> blobs_as(const OpContext& ctx, const std::vector<TBlob>& blobs, DType dtype) {
  return blobs_as(ctx, blobs, std::vector<DType>(blobs.size(), dtype));
}

void strided_copy(const void* src, int64_t offset, const Shape& shape,
                  const std::vector<int64_t>& strides, void* dst, size_t elem_size, void* stream) {
  const int64_t n = shape_size(shape);
  if (n == 0) return;
  const StridedIndex index = merge_strided(shape, {strides})[0];
  auto s = static_cast<cudaStream_t>(stream);
  auto launch = [&](auto tag) {
    using E = decltype(tag);
    gather_kernel<E><<<grid_for(n), kBlock, 0, s>>>(static_cast<const E*>(src) + offset,
                                                    static_cast<E*>(dst), n, index);
  };
  switch (elem_size) {
    case 1: launch(uint8_t()); break;
    case 2: launch(uint16_t()); break;
    case 4: launch(uint32_t()); break;
    case 8: launch(uint64_t()); break;
    default: PMX_ASSERT(false, "strided_copy: element size ", elem_size);
  }
  PMX_KERNEL_LAUNCH_CHECK();
}

static OpDef& cast_registration = op_registry::get_or_create("cast").set_gpu(cast_compute);

}  // namespace gpu
}  // namespace pymx
