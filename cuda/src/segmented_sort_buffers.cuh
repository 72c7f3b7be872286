// The workspace of a sort of `rows` rows of n keys each, carrying every key's position in its
// row as payload (topk, sort and argsort sort so with CUB).
#pragma once

#include <cstdint>

#include "kernel_util.cuh"
#include "launch.h"

namespace pymx {
namespace gpu {

template <typename Offset>
__global__ void segment_offsets_kernel(Offset* offsets, int64_t rows, int64_t n) {
  PMX_GRID_STRIDE_LOOP(r, rows + 1) offsets[r] = static_cast<Offset>(r * n);
}

// The keys and positions before and after the sort, the rows' start offsets (rows + 1 of them)
// and CUB's temporary storage, carved out of one workspace.
template <typename K, typename Offset>
struct SegmentedSortBuffers {
  K* keys;
  K* sorted_keys;
  int32_t* positions;
  int32_t* sorted;
  Offset* offsets;
  void* tmp;
};

// Takes the buffers of a sort of rows * n items needing `tmp_bytes` of CUB storage from ctx's
// workspace, and launches the kernel that fills the offsets on stream s.
template <typename K, typename Offset>
SegmentedSortBuffers<K, Offset> segmented_sort_buffers(const OpContext& ctx, int64_t rows,
                                                       int64_t n, size_t tmp_bytes,
                                                       cudaStream_t s) {
  const int64_t items = rows * n;
  const size_t key_bytes = workspace_aligned(items * sizeof(K));
  const size_t pos_bytes = workspace_aligned(items * sizeof(int32_t));
  const size_t offset_bytes = workspace_aligned((rows + 1) * sizeof(Offset));
  char* ws = static_cast<char*>(
      ctx.workspace(2 * key_bytes + 2 * pos_bytes + offset_bytes + tmp_bytes));
  SegmentedSortBuffers<K, Offset> b;
  b.keys = reinterpret_cast<K*>(ws);
  b.sorted_keys = reinterpret_cast<K*>(ws + key_bytes);
  b.positions = reinterpret_cast<int32_t*>(ws + 2 * key_bytes);
  b.sorted = reinterpret_cast<int32_t*>(ws + 2 * key_bytes + pos_bytes);
  b.offsets = reinterpret_cast<Offset*>(ws + 2 * key_bytes + 2 * pos_bytes);
  b.tmp = ws + 2 * key_bytes + 2 * pos_bytes + offset_bytes;
  segment_offsets_kernel<<<grid_for(rows + 1), kBlock, 0, s>>>(b.offsets, rows, n);
  PMX_KERNEL_LAUNCH_CHECK();
  return b;
}

}  // namespace gpu
}  // namespace pymx
