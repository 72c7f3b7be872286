// Index-driven NN operators (CPU definitions: engine/src/ops/nn_indexing.cc). Index inputs of any
// dtype are first converted to int64 (floats truncate, as on the CPU).
//
// | op                      | inputs                  | outputs   | attrs                              |
// |-------------------------|-------------------------|-----------|------------------------------------|
// | pick                    | data, index             | out       | axis (-1), keepdims, mode (clip / wrap) |
// | pick_backward           | out_grad, data, index   | data_grad | same as pick                       |
// | one_hot                 | indices                 | out       | depth, on_value, off_value, dtype  |
// | embedding               | data (indices), weight  | out       | input_dim, output_dim              |
// | embedding_backward      | out_grad, data, weight  | weight_grad |                                  |
// | sequence_mask           | data, [sequence_length] | out       | use_sequence_length, value, axis   |
// | batch_flatten           | data                    | out       |                                    |
// | batch_flatten_backward  | out_grad, data          | data_grad |                                    |
#include <cub/device/device_radix_sort.cuh>

#include "determinism.h"
#include "kernel_util.cuh"
#include "launch.h"
#include "ops/nn_common.h"

namespace pymx {
namespace gpu {
namespace {

struct PickGeom {
  int64_t outer, n, inner;
  bool wrap;
};

PickGeom pick_geom(const Attrs& attrs, const Shape& data) {
  PMX_CHECK(!data.empty(), "pick: data must have at least one dimension");
  const int axis = nn::normalize_axis(attrs.get_int("axis", -1), static_cast<int>(data.size()), "pick");
  const std::string mode = attrs.get_str("mode", "clip");
  PMX_CHECK(mode == "clip" || mode == "wrap", "pick: mode '", mode, "' is not one of clip, wrap");
  return {nn::prod(data, 0, axis), data[axis],
          nn::prod(data, axis + 1, static_cast<int>(data.size())), mode == "wrap"};
}

__device__ __forceinline__ int64_t pick_position(const PickGeom& g, int64_t idx) {
  if (g.wrap) return ((idx % g.n) + g.n) % g.n;
  return idx < 0 ? 0 : (idx >= g.n ? g.n - 1 : idx);
}

template <typename T>
__global__ void pick_kernel(const T* x, const int64_t* index, T* y, PickGeom g) {
  PMX_GRID_STRIDE_LOOP(r, g.outer * g.inner) {
    const int64_t o = r / g.inner, i = r % g.inner;
    y[r] = x[(o * g.n + pick_position(g, index[r])) * g.inner + i];
  }
}

// Each output gradient lands on a distinct position (one per (outer, inner) pair): no atomics.
template <typename T>
__global__ void pick_backward_kernel(const T* dy, const int64_t* index, T* dx, PickGeom g) {
  PMX_GRID_STRIDE_LOOP(r, g.outer * g.inner) {
    const int64_t o = r / g.inner, i = r % g.inner;
    dx[(o * g.n + pick_position(g, index[r])) * g.inner + i] = dy[r];
  }
}

template <typename T>
__global__ void one_hot_kernel(const int64_t* index, T* y, int64_t n, int64_t depth, T on) {
  PMX_GRID_STRIDE_LOOP(i, n) {
    const int64_t k = index[i];
    if (k >= 0 && k < depth) y[i * depth + k] = on;
  }
}

__global__ void embedding_kernel(const int64_t* index, const char* w, char* y, int64_t n,
                                 int64_t rows, int64_t row_bytes) {
  PMX_GRID_STRIDE_LOOP(e, n * row_bytes) {
    const int64_t i = e / row_bytes, b = e % row_bytes;
    int64_t r = index[i];
    r = r < 0 ? 0 : (r >= rows ? rows - 1 : r);
    y[e] = w[r * row_bytes + b];
  }
}

// Adds with atomics: repeated indices accumulate in an order that varies from run to run (the
// deterministic mode sorts instead, below).
template <typename T>
__global__ void embedding_backward_kernel(const T* dy, const int64_t* index, T* dw, int64_t n,
                                          int64_t rows, int64_t dim) {
  PMX_GRID_STRIDE_LOOP(e, n * dim) {
    const int64_t i = e / dim, j = e % dim;
    int64_t r = index[i];
    r = r < 0 ? 0 : (r >= rows ? rows - 1 : r);
    atomicAdd(dw + r * dim + j, dy[e]);  // repeated indices accumulate
  }
}

// rows_of[i] = index[i] clamped to [0, rows) (floats truncate), positions[i] = i: the pairs
// that the deterministic embedding backward sorts.
template <typename I>
__global__ void embedding_rows_kernel(const I* index, uint64_t* rows_of, int32_t* positions,
                                      int64_t n, int64_t rows) {
  PMX_GRID_STRIDE_LOOP(i, n) {
    const int64_t r = convert<int64_t>(index[i]);
    rows_of[i] = static_cast<uint64_t>(r < 0 ? 0 : (r >= rows ? rows - 1 : r));
    positions[i] = static_cast<int32_t>(i);
  }
}

// dw[r][j] = the sum of dy[i][j] over the indices i of row r, in index order: the pairs are
// sorted stably by row, so a row's indices form a run of slots in their own order. One thread
// per (slot, column); the thread of a run's first slot sums the run. Rows no index names are
// left as they are (zeroed before).
template <typename T>
__global__ void embedding_backward_sorted_kernel(const T* dy, const uint64_t* sorted_rows,
                                                 const int32_t* sorted_positions, T* dw,
                                                 int64_t n, int64_t dim) {
  PMX_GRID_STRIDE_LOOP(e, n * dim) {
    const int64_t slot = e / dim, j = e % dim;
    const uint64_t r = sorted_rows[slot];
    if (slot > 0 && sorted_rows[slot - 1] == r) continue;  // not the first slot of its run
    AccT<T> sum = AccT<T>(0);
    for (int64_t t = slot; t < n && sorted_rows[t] == r; ++t)
      sum += convert<AccT<T>>(dy[sorted_positions[t] * dim + j]);
    dw[r * dim + j] = convert<T>(sum);
  }
}

template <typename T>
__global__ void sequence_mask_kernel(T* y, const double* lengths, int64_t steps, int64_t batch,
                                     int64_t inner, bool time_major, T value) {
  PMX_GRID_STRIDE_LOOP(e, steps * batch * inner) {
    const int64_t row = e / inner;
    const int64_t t = time_major ? row / batch : row % steps;
    const int64_t b = time_major ? row % batch : row / steps;
    if (t >= lengths[b]) y[e] = value;
  }
}

TBlob as_int64(const OpContext& ctx, const TBlob& index) {
  return blobs_as(ctx, {index}, DType::kInt64)[0];
}

void pick_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const PickGeom g = pick_geom(*ctx.attrs, in[0].shape);
  if (out[0].size() == 0) return;
  const TBlob index = as_int64(ctx, in[1]);
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
    pick_kernel<T><<<grid_for(g.outer * g.inner), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), index.data<int64_t>(), out[0].data<T>(), g);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void pick_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const PickGeom g = pick_geom(*ctx.attrs, in[1].shape);
  fill_blob(out[0], 0.0, ctx.run.stream);
  if (in[0].size() == 0) return;
  const TBlob index = as_int64(ctx, in[2]);
  PMX_GPU_FLOAT_SWITCH(in[1].dtype, T, {
    pick_backward_kernel<T><<<grid_for(g.outer * g.inner), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), index.data<int64_t>(), out[0].data<T>(), g);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void one_hot_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const int64_t depth = ctx.attrs->get_int("depth");
  const double on = ctx.attrs->get_float("on_value", 1.0);
  fill_blob(out[0], ctx.attrs->get_float("off_value", 0.0), ctx.run.stream);
  const int64_t n = in[0].size();
  if (n == 0 || depth == 0) return;
  const TBlob index = as_int64(ctx, in[0]);
  PMX_GPU_TYPE_SWITCH(out[0].dtype, T, {
    one_hot_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        index.data<int64_t>(), out[0].data<T>(), n, depth, convert<T>(on));
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void embedding_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out) {
  const int64_t n = in[0].size(), rows = in[1].shape[0];
  const int64_t row_bytes = in[1].shape[1] * static_cast<int64_t>(dtype_size(in[1].dtype));
  if (n == 0 || row_bytes == 0) return;
  const TBlob index = as_int64(ctx, in[0]);
  embedding_kernel<<<grid_for(n * row_bytes), kBlock, 0, stream_of(ctx)>>>(
      index.data<int64_t>(), static_cast<const char*>(in[1].dptr), static_cast<char*>(out[0].dptr),
      n, rows, row_bytes);
  PMX_KERNEL_LAUNCH_CHECK();
}

// The deterministic mode's embedding backward (Note [Deterministic mode]): the (row, position)
// pairs of the indices are radix-sorted by row with CUB (stable, so each row keeps its indices
// in order), then each row sums its run. O(n log rows) for the sort, and a row indexed m times
// costs m sequential additions per column. One workspace: rows and positions, each twice (in and
// sorted), then CUB's scratch.
void embedding_backward_sorted(const OpContext& ctx, const std::vector<TBlob>& in,
                               const std::vector<TBlob>& out, int64_t n, int64_t rows,
                               int64_t dim) {
  PMX_CHECK(n < (int64_t(1) << 31), "embedding_backward: ", n,
            " indices exceed the deterministic GPU sort's limit of 2^31");
  cudaStream_t s = stream_of(ctx);
  int end_bit = 1;  // rows fit in bits [0, end_bit): the sort looks at no others
  while (end_bit < 64 && (uint64_t(1) << end_bit) < static_cast<uint64_t>(rows)) ++end_bit;
  size_t sort_bytes = 0;
  PMX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, static_cast<const uint64_t*>(nullptr), static_cast<uint64_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), int(n), 0, end_bit, s));
  const size_t row_bytes = workspace_aligned(n * sizeof(uint64_t));
  const size_t pos_bytes = workspace_aligned(n * sizeof(int32_t));
  char* ws = static_cast<char*>(ctx.workspace(2 * row_bytes + 2 * pos_bytes + sort_bytes));
  uint64_t* rows_of = reinterpret_cast<uint64_t*>(ws);
  uint64_t* sorted_rows = reinterpret_cast<uint64_t*>(ws + row_bytes);
  int32_t* positions = reinterpret_cast<int32_t*>(ws + 2 * row_bytes);
  int32_t* sorted_positions = reinterpret_cast<int32_t*>(ws + 2 * row_bytes + pos_bytes);
  void* sort_tmp = ws + 2 * row_bytes + 2 * pos_bytes;
  PMX_GPU_TYPE_SWITCH(in[1].dtype, I, {
    embedding_rows_kernel<I><<<grid_for(n), kBlock, 0, s>>>(in[1].data<I>(), rows_of, positions,
                                                            n, rows);
  });
  PMX_KERNEL_LAUNCH_CHECK();
  PMX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, rows_of, sorted_rows,
                                                 positions, sorted_positions, int(n), 0, end_bit,
                                                 s));
  PMX_GPU_FLOAT_SWITCH(in[2].dtype, T, {
    embedding_backward_sorted_kernel<T><<<grid_for(n * dim), kBlock, 0, s>>>(
        in[0].data<T>(), sorted_rows, sorted_positions, out[0].data<T>(), n, dim);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void embedding_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                                const std::vector<TBlob>& out) {
  const int64_t n = in[1].size(), rows = in[2].shape[0], dim = in[2].shape[1];
  fill_blob(out[0], 0.0, ctx.run.stream);
  if (n == 0 || dim == 0) return;
  // A 16-bit running sum stops growing (1000 additions of 1.0 give 256 in bfloat16): the
  // sorted path sums each row in float and rounds once.
  if (deterministic() || is_16bit_float(in[2].dtype)) {
    embedding_backward_sorted(ctx, in, out, n, rows, dim);
    return;
  }
  const TBlob index = as_int64(ctx, in[1]);
  PMX_GPU_FLOAT_SWITCH(in[2].dtype, T, {
    embedding_backward_kernel<T><<<grid_for(n * dim), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), index.data<int64_t>(), out[0].data<T>(), n, rows, dim);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void sequence_mask_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  if (out[0].dptr != in[0].dptr) cast_blob(in[0], out[0], ctx.run.stream);
  if (in.size() < 2 || out[0].size() == 0) return;
  const Shape& s = in[0].shape;
  const int64_t axis = ctx.attrs->get_int("axis", 0);
  const int64_t steps = s[axis], batch = s[1 - axis];
  const int64_t inner = nn::prod(s, 2, static_cast<int>(s.size()));
  const TBlob lengths = blobs_as(ctx, {in[1]}, DType::kFloat64)[0];
  const double value = ctx.attrs->get_float("value", 0.0);
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
    sequence_mask_kernel<T><<<grid_for(out[0].size()), kBlock, 0, stream_of(ctx)>>>(
        out[0].data<T>(), lengths.data<double>(), steps, batch, inner, axis == 0,
        convert<T>(value));
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void copy_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  PMX_CUDA_CHECK(cudaMemcpyAsync(out[0].dptr, in[0].dptr, in[0].size() * dtype_size(in[0].dtype),
                                 cudaMemcpyDeviceToDevice, stream_of(ctx)));
}

const bool registered = [] {
  op_registry::get_or_create("pick").set_gpu(pick_compute);
  op_registry::get_or_create("pick_backward").set_gpu(pick_backward_compute);
  op_registry::get_or_create("one_hot").set_gpu(one_hot_compute);
  op_registry::get_or_create("embedding").set_gpu(embedding_compute);
  op_registry::get_or_create("embedding_backward").set_gpu(embedding_backward_compute);
  op_registry::get_or_create("sequence_mask").set_gpu(sequence_mask_compute);
  op_registry::get_or_create("batch_flatten").set_gpu(copy_compute);
  op_registry::get_or_create("batch_flatten_backward").set_gpu(copy_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
