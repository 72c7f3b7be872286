// Slicing and integer-array indexing on the GPU (CPU definitions: engine/src/ops/indexing.cc).
//
// | op            | inputs                | attrs                              |
// |---------------|-----------------------|------------------------------------|
// | slice         | x                     | begin, end, step                   |
// | slice_assign  | data, value           | begin, end, step                   |
// | take          | data, indices         | axis (0), mode (raise / clip / wrap) |
// | index_update  | data, indices, values | axis (0), mode, accumulate (False) |
// | _strided_copy | data (1-D)            | shape, strides, offset             |
//
// take / index_update resolve their indices on the host, exactly as the CPU does, so that mode
// "raise" throws IndexError naming the bad index: the indices are copied back (one stream sync on
// this worker), checked, and the resolved int64 indices copied up again.
#include <algorithm>

#include "kernel_util.cuh"
#include "launch.h"
#include "ops/elemwise.h"

namespace pymx {
namespace gpu {
namespace {

struct SliceView {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

// Bounds were checked by the op's inference; this only computes the view.
SliceView slice_view(const Attrs& attrs, const Shape& in) {
  const Shape begin = attrs.get_shape("begin"), end = attrs.get_shape("end");
  const Shape step = attrs.get_shape("step", Shape(begin.size(), 1));
  const std::vector<int64_t> st = ops::contiguous_strides(in);
  SliceView v{in, st, 0};
  for (size_t d = 0; d < begin.size(); ++d) {
    const int64_t b = begin[d], e = end[d], s = step[d];
    const int64_t len = s > 0 ? std::max<int64_t>(0, (e - b + s - 1) / s)
                              : std::max<int64_t>(0, (b - e - s - 1) / -s);
    v.shape[d] = len;
    v.strides[d] = st[d] * s;
    if (len > 0) v.offset += b * st[d];
  }
  return v;
}

// dst[offset + region index . dst strides] = value[region index . value strides].
template <typename T>
__global__ void scatter_kernel(const T* value, T* dst, int64_t n, StridedIndex iv,
                               StridedIndex id) {
  PMX_GRID_STRIDE_LOOP(i, n) dst[id.offset(i)] = value[iv.offset(i)];
}

void slice_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const SliceView v = slice_view(*ctx.attrs, in[0].shape);
  strided_copy(in[0].dptr, v.offset, v.shape, v.strides, out[0].dptr, dtype_size(in[0].dtype),
               ctx.run.stream);
}

void strided_copy_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  if (out[0].size() == 0) return;
  strided_copy(in[0].dptr, ctx.attrs->get_int("offset"), out[0].shape,
               ctx.attrs->get_shape("strides"), out[0].dptr, dtype_size(in[0].dtype),
               ctx.run.stream);
}

void slice_assign_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  if (out[0].dptr != in[0].dptr) cast_blob(in[0], out[0], ctx.run.stream);
  const SliceView v = slice_view(*ctx.attrs, in[0].shape);
  const int64_t n = shape_size(v.shape);
  if (n == 0) return;
  const TBlob value = blobs_as(ctx, {in[1]}, out[0].dtype)[0];
  const std::vector<StridedIndex> idx =
      merge_strided(v.shape, {broadcast_strides(value.shape, v.shape), v.strides});
  PMX_GPU_TYPE_SWITCH(out[0].dtype, T, {
    scatter_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        value.data<T>(), out[0].data<T>() + v.offset, n, idx[0], idx[1]);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

struct TakeDims {
  int axis;
  int64_t outer, n, inner;
};

TakeDims take_dims(const Attrs& attrs, const Shape& data, const char* op) {
  TakeDims t{ops::normalize_axis(attrs.get_int("axis", 0), static_cast<int>(data.size()), op), 1, 0, 1};
  for (int d = 0; d < t.axis; ++d) t.outer *= data[d];
  t.n = data[t.axis];
  for (size_t d = t.axis + 1; d < data.size(); ++d) t.inner *= data[d];
  return t;
}

// The indices as int64 in device scratch (`scratch` holds idx.size() int64s), resolved by mode.
// An out-of-range index surfaces at a later wait, so the error names `op`.
void resolve_indices(const OpContext& ctx, const TBlob& idx, const TakeDims& t, int64_t* scratch,
                     const char* op) {
  const int64_t count = idx.size();
  if (count == 0) return;
  std::vector<int64_t> host(static_cast<size_t>(count));
  TBlob as_long = idx;
  as_long.dtype = DType::kInt64;
  as_long.dptr = scratch;
  cast_blob(idx, as_long, ctx.run.stream);  // float indices truncate, as on the CPU
  PMX_CUDA_CHECK(cudaMemcpyAsync(host.data(), scratch, count * sizeof(int64_t),
                                 cudaMemcpyDeviceToHost, stream_of(ctx)));
  PMX_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
  const std::string mode = ctx.attrs->get_str("mode", "raise");
  for (int64_t& v : host) {
    if (mode == "clip") {
      v = std::min(std::max<int64_t>(v, 0), t.n - 1);
    } else if (mode == "wrap") {
      v = t.n == 0 ? 0 : ((v % t.n) + t.n) % t.n;
    } else {
      if (v < -t.n || v >= t.n)
        PMX_THROW(Status::kIndex, op, ": index ", v, " is out of bounds for axis ", t.axis,
                  " with size ", t.n);
      if (v < 0) v += t.n;
    }
  }
  PMX_CUDA_CHECK(cudaMemcpyAsync(scratch, host.data(), count * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, stream_of(ctx)));
  // `host` dies at return: a pageable upload is staged before cudaMemcpyAsync returns.
}

// y[o][j][i] = x[o][idx[j]][i], moved as raw bytes of `elem` size.
template <typename E>
__global__ void take_kernel(const E* x, const int64_t* idx, E* y, int64_t count, TakeDims t) {
  PMX_GRID_STRIDE_LOOP(e, t.outer * count * t.inner) {
    const int64_t i = e % t.inner, j = (e / t.inner) % count, o = e / (t.inner * count);
    y[e] = x[(o * t.n + idx[j]) * t.inner + i];
  }
}

// Assignments follow index order (later duplicates win, as on the CPU: one thread walks all the
// indices of its (outer, inner) position); accumulation adds every duplicate.
template <typename T>
__global__ void index_update_kernel(const T* v, const int64_t* idx, T* y, int64_t count,
                                    TakeDims t, bool accumulate) {
  using C = AccT<T>;
  PMX_GRID_STRIDE_LOOP(e, t.outer * t.inner) {
    const int64_t i = e % t.inner, o = e / t.inner;
    for (int64_t j = 0; j < count; ++j) {
      T& dst = y[(o * t.n + idx[j]) * t.inner + i];
      const T val = v[(o * count + j) * t.inner + i];
      dst = accumulate ? convert<T>(C(convert<C>(dst) + convert<C>(val))) : val;
    }
  }
}

void take_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const TakeDims t = take_dims(*ctx.attrs, in[0].shape, "take");
  if (t.outer == 0) return;  // no rows before the axis: no index is read or checked (NumPy)
  const int64_t count = in[1].size();
  int64_t* idx = static_cast<int64_t*>(ctx.workspace(std::max<int64_t>(count, 1) * sizeof(int64_t)));
  resolve_indices(ctx, in[1], t, idx, "take");
  if (out[0].size() == 0) return;
  auto launch = [&](auto tag) {
    using E = decltype(tag);
    take_kernel<E><<<grid_for(out[0].size()), kBlock, 0, stream_of(ctx)>>>(
        static_cast<const E*>(in[0].dptr), idx, static_cast<E*>(out[0].dptr), count, t);
  };
  switch (dtype_size(in[0].dtype)) {
    case 1: launch(uint8_t()); break;
    case 2: launch(uint16_t()); break;
    case 4: launch(uint32_t()); break;
    default: launch(uint64_t()); break;
  }
  PMX_KERNEL_LAUNCH_CHECK();
}

void index_update_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  if (out[0].dptr != in[0].dptr) cast_blob(in[0], out[0], ctx.run.stream);
  const TakeDims t = take_dims(*ctx.attrs, in[0].shape, "index_update");
  const int64_t count = in[1].size();
  // One workspace: the resolved indices, then the values converted to data's dtype.
  const size_t idx_bytes = workspace_aligned(std::max<int64_t>(count, 1) * sizeof(int64_t));
  const bool convert_values = in[2].dtype != out[0].dtype;
  char* space = static_cast<char*>(ctx.workspace(
      idx_bytes + (convert_values ? in[2].size() * dtype_size(out[0].dtype) : 0)));
  int64_t* idx = reinterpret_cast<int64_t*>(space);
  resolve_indices(ctx, in[1], t, idx, "index_update");
  TBlob values = in[2];
  if (convert_values) {
    values.dptr = space + idx_bytes;
    values.dtype = out[0].dtype;
    cast_blob(in[2], values, ctx.run.stream);
  }
  if (t.outer * t.inner == 0 || count == 0) return;
  const bool accumulate = ctx.attrs->get_bool("accumulate", false);
  PMX_GPU_TYPE_SWITCH(out[0].dtype, T, {
    index_update_kernel<T><<<grid_for(t.outer * t.inner), kBlock, 0, stream_of(ctx)>>>(
        values.data<T>(), idx, out[0].data<T>(), count, t, accumulate);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("slice").set_gpu(slice_compute);
  op_registry::get_or_create("_strided_copy").set_gpu(strided_copy_compute);
  op_registry::get_or_create("slice_assign").set_gpu(slice_assign_compute);
  op_registry::get_or_create("take").set_gpu(take_compute);
  op_registry::get_or_create("index_update").set_gpu(index_update_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
