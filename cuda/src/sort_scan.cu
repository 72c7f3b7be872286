// sort, argsort, cumsum and cumsum_backward on the GPU (CPU definitions, with Note [Sort order]
// and Note [cumsum dtypes]: engine/src/ops/sort_scan.cc; the row geometry both use:
// engine/src/ops/sort_scan_geometry.h).
//
// | op              | inputs   | outputs   | attrs |
// |-----------------|----------|-----------|-------|
// | sort            | data     | out       | axis (-1, or None), is_ascend (True) |
// | argsort         | data     | indices   | axis (-1, or None), is_ascend (True), dtype (int64: of indices) |
// | cumsum          | data     | out       | axis (None, or an int), dtype (None) |
// | cumsum_backward | out_grad | data_grad | axis (None, or an int) |
//
// Note [GPU sort by a stable segmented sort]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Rows run along `axis` with stride `inner`; they are gathered into contiguous segments of
// (key, position) pairs, with the CPU's unsigned keys (Note [Sort keys]), and sorted by CUB's
// stable segmented sort (a single row by its stable device-wide radix sort). Unsigned keys matter: CUB sorts short segments by comparing the keys
// themselves, where float keys would compare false with every NaN. argsort writes the sorted
// positions; sort gathers the input at them, so it moves the original values (NaN payloads,
// signs of zeros) as the CPU does, and both give the same bits. topk keeps the first k positions
// of each row (sorted_positions, declared in sort_keys.cuh).
//
// Note [GPU cumsum by block scans]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// One block scans one row, tile by tile of kScanBlock elements: cub::BlockScan gives the tile's
// inclusive sums in the accumulation type (Note [cumsum dtypes]), the running total of the
// earlier tiles is added to each, and the tile's last sum becomes the new total. The order of
// additions depends only on the row length, so results are deterministic; float rows differ from
// the CPU's sequential sums in rounding only (integers are exact, and wrap around alike).
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include <limits>
#include <type_traits>

#include "kernel_util.cuh"
#include "launch.h"
#include "segmented_sort_buffers.cuh"
#include "sort_keys.cuh"
#include "ops/sort_scan_geometry.h"

namespace pymx {
namespace gpu {
namespace {

using nn::AxisView;
using nn::row_geom;
using nn::RowGeom;

// ---------------------------------------------------------------------------------------------
// sort and argsort (Note [GPU sort by a stable segmented sort])
// ---------------------------------------------------------------------------------------------
// keys[r * n + j] = sort_key(x[(o * n + j) * inner + i]) for row r = o * inner + i, and
// positions[r * n + j] = j.
template <typename T, typename K>
__global__ void gather_keys_kernel(const T* x, K* keys, int32_t* positions, AxisView v,
                                   bool ascend) {
  PMX_GRID_STRIDE_LOOP(e, v.outer * v.inner * v.n) {
    const int64_t j = e % v.n, r = e / v.n, o = r / v.inner, i = r % v.inner;
    keys[e] = sort_key(x[(o * v.n + j) * v.inner + i], ascend);
    positions[e] = static_cast<int32_t>(j);
  }
}

// y[(o * n + j) * inner + i] = x[(o * n + sorted[r * n + j]) * inner + i].
template <typename T>
__global__ void gather_sorted_kernel(const T* x, const int32_t* sorted, T* y, AxisView v) {
  PMX_GRID_STRIDE_LOOP(e, v.outer * v.inner * v.n) {
    const int64_t j = e % v.n, r = e / v.n, o = r / v.inner, i = r % v.inner;
    y[(o * v.n + j) * v.inner + i] = x[(o * v.n + sorted[e]) * v.inner + i];
  }
}

// indices[(o * n + j) * inner + i] = sorted[r * n + j].
template <typename I>
__global__ void write_positions_kernel(const int32_t* sorted, I* indices, AxisView v) {
  PMX_GRID_STRIDE_LOOP(e, v.outer * v.inner * v.n) {
    const int64_t j = e % v.n, r = e / v.n, o = r / v.inner, i = r % v.inner;
    indices[(o * v.n + j) * v.inner + i] = convert<I>(sorted[e]);
  }
}

// sorted_positions for data of dtype T.
template <typename T>
const int32_t* sorted_positions_of(const OpContext& ctx, const T* x, const AxisView& v, bool ascend,
                                   const char* op) {
  using K = typename SortKeyOf<T>::type;
  PMX_CHECK(v.n <= std::numeric_limits<int32_t>::max(), op, ": a row of ", v.n,
            " elements is longer than the GPU sort's limit of 2^31 - 1");
  const int64_t rows = v.outer * v.inner, items = rows * v.n;
  cudaStream_t s = stream_of(ctx);
  // One call shape for both passes of CUB (size query with null buffers, then the sort);
  // descending order is in the keys. A single row (axis None, or one long row) goes to the
  // device-wide radix sort, which spreads it over the whole GPU; the segmented sort gives each
  // segment one block.
  auto sort = [&](void* tmp, size_t& bytes, const K* keys_in, K* keys_out, const int32_t* pos_in,
                  int32_t* pos_out, const int64_t* offsets) {
    if (rows == 1) {
      PMX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp, bytes, keys_in, keys_out, pos_in,
                                                     pos_out, items, 0, int(sizeof(K) * 8), s));
    } else {
      PMX_CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairs(
          tmp, bytes, keys_in, keys_out, pos_in, pos_out, items, rows, offsets, offsets + 1, s));
    }
  };
  size_t sort_bytes = 0;
  sort(nullptr, sort_bytes, nullptr, nullptr, nullptr, nullptr, nullptr);
  const auto b = segmented_sort_buffers<K, int64_t>(ctx, rows, v.n, sort_bytes, s);
  gather_keys_kernel<T, K><<<grid_for(items), kBlock, 0, s>>>(x, b.keys, b.positions, v, ascend);
  PMX_KERNEL_LAUNCH_CHECK();
  sort(b.tmp, sort_bytes, b.keys, b.sorted_keys, b.positions, b.sorted, b.offsets);
  return b.sorted;
}

}  // namespace

const int32_t* sorted_positions(const OpContext& ctx, const TBlob& x, const AxisView& v,
                                bool ascend, const char* op) {
  const int32_t* sorted = nullptr;
  PMX_GPU_TYPE_SWITCH(x.dtype, T, { sorted = sorted_positions_of<T>(ctx, x.data<T>(), v, ascend, op); });
  return sorted;
}

namespace {

void sort_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const RowGeom g = row_geom(*ctx.attrs, in[0].shape, "sort", "-1");
  if (in[0].size() == 0) return;
  const bool ascend = ctx.attrs->get_bool("is_ascend", true);
  const int64_t items = in[0].size();
  const int32_t* sorted = sorted_positions(ctx, in[0], g.view, ascend, "sort");
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
    gather_sorted_kernel<T><<<grid_for(items), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), sorted, out[0].data<T>(), g.view);
    PMX_KERNEL_LAUNCH_CHECK();
  });
}

void argsort_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const RowGeom g = row_geom(*ctx.attrs, in[0].shape, "argsort", "-1");
  if (in[0].size() == 0) return;
  const bool ascend = ctx.attrs->get_bool("is_ascend", true);
  const int64_t items = in[0].size();
  const int32_t* sorted = sorted_positions(ctx, in[0], g.view, ascend, "argsort");
  PMX_GPU_TYPE_SWITCH(out[0].dtype, I, {
    write_positions_kernel<I><<<grid_for(items), kBlock, 0, stream_of(ctx)>>>(
        sorted, out[0].data<I>(), g.view);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------------------------
// cumsum and cumsum_backward (Note [GPU cumsum by block scans])
// ---------------------------------------------------------------------------------------------
constexpr int kScanBlock = 256;

// a + b with integers wrapping around and bools saturating at true, as the CPU kernel adds.
struct WrappingAdd {
  template <typename A>
  __device__ __forceinline__ A operator()(const A& a, const A& b) const {
    if constexpr (std::is_same_v<A, bool>) {
      return a || b;
    } else if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

// Each block scans rows blockIdx.x, blockIdx.x + gridDim.x, ...: y along the row = the running
// sum of x, last element first when `reverse`.
template <typename T>
__global__ void __launch_bounds__(kScanBlock) scan_rows_kernel(const T* x, T* y, AxisView v,
                                                               bool reverse) {
  using Acc = AccT<T>;
  using BlockScan = cub::BlockScan<Acc, kScanBlock>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ Acc tile_total;
  const WrappingAdd add;
  for (int64_t r = blockIdx.x; r < v.outer * v.inner; r += gridDim.x) {
    const int64_t row_start = (r / v.inner) * v.n * v.inner + r % v.inner;
    Acc total{};
    for (int64_t tile = 0; tile < v.n; tile += kScanBlock) {
      const int64_t tile_end = tile + kScanBlock < v.n ? tile + kScanBlock : v.n;
      const int64_t step = tile + threadIdx.x;
      const int64_t at = row_start + (reverse ? v.n - 1 - step : step) * v.inner;
      // Threads past the row's end scan a zero that no valid sum includes (inclusive scan).
      Acc sum = step < v.n ? convert<Acc>(x[at]) : Acc{};
      BlockScan(scan_storage).InclusiveScan(sum, sum, add);
      if (tile > 0) sum = add(total, sum);
      if (step < v.n) y[at] = convert<T>(sum);
      if (step == tile_end - 1) tile_total = sum;
      __syncthreads();  // tile_total written; scan_storage free for the next tile
      total = tile_total;
      __syncthreads();  // every thread read tile_total before the next tile writes it
    }
  }
}

template <typename T>
void scan_rows(const OpContext& ctx, const T* x, T* y, const AxisView& v, bool reverse) {
  const int64_t rows = v.outer * v.inner;
  if (rows * v.n == 0) return;
  scan_rows_kernel<T><<<grid_for(rows, 1), kScanBlock, 0, stream_of(ctx)>>>(x, y, v, reverse);
  PMX_KERNEL_LAUNCH_CHECK();
}

void cumsum_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const RowGeom g = row_geom(*ctx.attrs, in[0].shape, "cumsum", "None");
  if (in[0].size() == 0) return;
  // Each element is first converted to the output dtype (Note [cumsum dtypes]): data of another
  // dtype is cast into the workspace, so one kernel per output dtype does the scan.
  const TBlob data = blobs_as(ctx, {in[0]}, out[0].dtype)[0];
  PMX_GPU_TYPE_SWITCH(out[0].dtype, T,
                      { scan_rows(ctx, data.data<T>(), out[0].data<T>(), g.view, false); });
}

void cumsum_backward_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                             const std::vector<TBlob>& out) {
  const RowGeom g = row_geom(*ctx.attrs, in[0].shape, "cumsum_backward", "None");
  PMX_GPU_FLOAT_SWITCH(in[0].dtype, T,
                       { scan_rows(ctx, in[0].data<T>(), out[0].data<T>(), g.view, true); });
}

const bool registered = [] {
  op_registry::get_or_create("sort").set_gpu(sort_compute);
  op_registry::get_or_create("argsort").set_gpu(argsort_compute);
  op_registry::get_or_create("cumsum").set_gpu(cumsum_compute);
  op_registry::get_or_create("cumsum_backward").set_gpu(cumsum_backward_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
