// box_iou and box_nms on GPUs (CPU definitions and semantics: engine/src/ops/bounding_box.cc;
// the maths: box_geometry.h). float16 and bfloat16 compute in float.
//
// | op               | inputs           | outputs     |
// |------------------|------------------|-------------|
// | box_iou          | lhs, rhs         | out         |
// | box_nms          | data             | out, record |
// | box_nms_backward | out_grad, record | data_grad   |
//
// box_iou takes a thread per pair. box_nms takes a block per batch: its threads rank the valid
// boxes by descending score (a box's rank counts the valid boxes before it in the CPU's stable
// order, so both agree), then walk the ranked list as the CPU does, the block's threads testing
// one reference box against all later ones between barriers; thread 0 lists the kept boxes and
// the block writes the rows.
#include <algorithm>

#include "kernel_util.cuh"
#include "launch.h"
#include "ops/box_geometry.h"

namespace pymx {
namespace gpu {
namespace {

using box::NmsParams;

template <typename T>
__global__ void box_iou_kernel(const T* lhs, const T* rhs, T* y, int64_t num_lhs, int64_t num_rhs,
                               box::Format format) {
  using A = AccT<T>;
  PMX_GRID_STRIDE_LOOP(o, num_lhs * num_rhs) {
    A a[4], b[4];
    for (int k = 0; k < 4; ++k) {
      a[k] = convert<A>(lhs[o / num_rhs * 4 + k]);
      b[k] = convert<A>(rhs[o % num_rhs * 4 + k]);
    }
    y[o] = convert<T>(box::iou(a, b, format));
  }
}

void box_iou_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const box::Format format = box::parse_format(ctx.attrs->get_str("format", "corner"), "box_iou",
                                               "format");
  const int64_t n = out[0].size();
  if (n == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    box_iou_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), out[0].data<T>(), in[0].size() / 4, in[1].size() / 4,
        format);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// Per-batch scratch of box_nms: the ranked valid boxes, their suppression flags and the kept
// boxes' input rows, n of each.
struct NmsScratch {
  int64_t* order;
  int* suppressed;
  int64_t* kept;
};

// x: the data in the compute type A; y and record: the outputs.
template <typename A, typename T>
__global__ void box_nms_kernel(const A* x, T* y, int64_t* record, NmsParams p, NmsScratch s) {
  __shared__ int64_t num_valid, num_kept;
  const int64_t n = p.num_boxes, k = p.width;
  for (int64_t b = blockIdx.x; b < p.batches; b += gridDim.x) {
    const A* xb = x + b * n * k;
    int64_t* order = s.order + b * n;
    int* suppressed = s.suppressed + b * n;
    int64_t* kept = s.kept + b * n;
    if (threadIdx.x == 0) num_valid = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const A* row = xb + i * k;
      if (!p.valid(row)) continue;
      const A score = row[p.score_index];
      int64_t rank = 0;  // valid boxes with a higher score, or an equal one earlier
      for (int64_t j = 0; j < n; ++j) {
        const A other = xb[j * k + p.score_index];
        if ((other > score || (other == score && j < i)) && p.valid(xb + j * k)) ++rank;
      }
      order[rank] = i;
      atomicAdd(reinterpret_cast<unsigned long long*>(&num_valid), 1ull);
    }
    __syncthreads();
    const int64_t m = num_valid < p.candidates() ? num_valid : p.candidates();
    for (int64_t pos = threadIdx.x; pos < m; pos += blockDim.x) suppressed[pos] = 0;
    for (int64_t ref = 0; ref < m; ++ref) {
      __syncthreads();  // the previous reference's suppressions are visible
      if (suppressed[ref]) continue;
      const A* a = xb + order[ref] * k;
      for (int64_t pos = ref + 1 + threadIdx.x; pos < m; pos += blockDim.x) {
        const A* c = xb + order[pos] * k;
        if (!suppressed[pos] && p.same_group(a, c) &&
            box::suppresses(a + p.coord_start, c + p.coord_start, p.in_format, p.overlap_thresh))
          suppressed[pos] = 1;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t count = 0;
      for (int64_t pos = 0; pos < m; ++pos)
        if (!suppressed[pos]) kept[count++] = order[pos];
      num_kept = count;
    }
    __syncthreads();
    T* yb = y + b * n * k;
    for (int64_t e = threadIdx.x; e < n * k; e += blockDim.x) {
      const int64_t i = e / k, j = e % k;
      const bool coord = p.in_format != p.out_format && j >= p.coord_start &&
                         j < p.coord_start + 4;
      if (i >= num_kept) {
        yb[e] = convert<T>(A(-1));
      } else if (!coord) {
        yb[e] = convert<T>(xb[kept[i] * k + j]);
      } else {  // a converted coordinate: the thread of the box's first one converts all four
        if (j != p.coord_start) continue;
        A v[4];
        for (int q = 0; q < 4; ++q) v[q] = xb[kept[i] * k + p.coord_start + q];
        box::convert_format(v, p.in_format);
        for (int q = 0; q < 4; ++q) yb[i * k + p.coord_start + q] = convert<T>(v[q]);
      }
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      record[b * n + i] = i < num_kept ? kept[i] : -1;
    __syncthreads();  // num_valid and num_kept are reused by the next batch
  }
}

__global__ void identity_record_kernel(int64_t* record, int64_t count, int64_t n) {
  PMX_GRID_STRIDE_LOOP(i, count) record[i] = i % n;
}

void box_nms_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const NmsParams p = box::nms_params(*ctx.attrs, in[0].shape, "box_nms");
  const int64_t rows = p.batches * p.num_boxes;
  if (rows == 0) return;
  cudaStream_t stream = stream_of(ctx);
  if (p.candidates() == 0) {  // topk = 0: data as it is
    PMX_CUDA_CHECK(cudaMemcpyAsync(out[0].dptr, in[0].dptr, in[0].size() * dtype_size(in[0].dtype),
                                   cudaMemcpyDeviceToDevice, stream));
    identity_record_kernel<<<grid_for(rows), kBlock, 0, stream>>>(out[1].data<int64_t>(), rows,
                                                                  p.num_boxes);
    PMX_KERNEL_LAUNCH_CHECK();
    return;
  }
  const bool half = is_16bit_float(in[0].dtype);
  const size_t order_bytes = workspace_aligned(rows * sizeof(int64_t));
  const size_t flag_bytes = workspace_aligned(rows * sizeof(int));
  const size_t wide_bytes = half ? in[0].size() * sizeof(float) : 0;
  char* ws = static_cast<char*>(ctx.workspace(2 * order_bytes + flag_bytes + wide_bytes));
  const NmsScratch s{reinterpret_cast<int64_t*>(ws),
                     reinterpret_cast<int*>(ws + order_bytes),
                     reinterpret_cast<int64_t*>(ws + order_bytes + flag_bytes)};
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.batches, 65535));
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    using A = AccT<T>;
    const A* x = reinterpret_cast<const A*>(in[0].dptr);
    if (half) {
      float* wide = reinterpret_cast<float*>(ws + 2 * order_bytes + flag_bytes);
      cast_blob(in[0], TBlob{wide, in[0].shape, DType::kFloat32, in[0].device}, ctx.run.stream);
      x = reinterpret_cast<const A*>(wide);
    }
    box_nms_kernel<A, T><<<blocks, kBlock, 0, stream>>>(x, out[0].data<T>(),
                                                        out[1].data<int64_t>(), p, s);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// A thread per output row: its gradient to the input row it came from (the others stay 0).
template <typename T>
__global__ void box_nms_grad_kernel(const T* dy, const int64_t* record, T* dx, int64_t rows,
                                    int64_t n, int64_t k) {
  PMX_GRID_STRIDE_LOOP(i, rows) {
    if (record[i] < 0) continue;
    const int64_t target = (i / n * n + record[i]) * k;
    for (int64_t j = 0; j < k; ++j) dx[target + j] = dy[i * k + j];
  }
}

void box_nms_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                              const std::vector<TBlob>& out) {
  fill_blob(out[0], 0.0, ctx.run.stream);
  const int64_t rows = in[1].size();
  if (rows == 0 || in[0].size() == 0) return;
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
    box_nms_grad_kernel<T><<<grid_for(rows), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<int64_t>(), out[0].data<T>(), rows, in[1].shape.back(),
        in[0].shape.back());
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("box_iou").set_gpu(box_iou_compute);
  op_registry::get_or_create("box_nms").set_gpu(box_nms_compute);
  op_registry::get_or_create("box_nms_backward").set_gpu(box_nms_backward_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
