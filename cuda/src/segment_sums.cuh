// Two sums per segment, deterministic and spread over the whole GPU: group_norm's statistics and
// backward sums (group_norm.cu), prelu's gamma gradient (nn_elemwise.cu).
//
// Note [Segment sums in chunks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A reduction per segment with one block per segment leaves most of the GPU idle when there are
// few, long segments (group_norm with num_groups=1 at batch 2 is two blocks; a one-slope PReLU
// is one), and atomics would make the result depend on timing. So each segment is cut into
// `chunks` chunks of `chunk_len` elements, chosen from the shape alone so that there are about
// kTargetBlocks blocks of at least kMinChunk elements; a block reduces one chunk into its own
// slot of `partials`, and then one thread per segment adds its chunks in order. The sums are in
// double, and the same shapes always give the same chunks, so results are reproducible.
#pragma once

#include <algorithm>

#include "kernel_util.cuh"
#include "launch.h"

namespace pymx {
namespace gpu {

// A pair of sums.
struct Sums2 {
  double a = 0, b = 0;
};

constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMinChunk = 4 * kBlock;

struct SegmentPlan {
  int64_t segments = 0, length = 0, chunks = 1, chunk_len = 1;
  __host__ __device__ int64_t blocks() const { return segments * chunks; }
};

inline SegmentPlan plan_segments(int64_t segments, int64_t length) {
  SegmentPlan p;
  p.segments = segments;
  p.length = length;
  const int64_t wanted = (kTargetBlocks + std::max<int64_t>(segments, 1) - 1) /
                         std::max<int64_t>(segments, 1);
  const int64_t most = std::max<int64_t>(1, (length + kMinChunk - 1) / kMinChunk);
  p.chunks = std::max<int64_t>(1, std::min(wanted, most));
  p.chunk_len = std::max<int64_t>(1, (length + p.chunks - 1) / p.chunks);
  return p;
}

// partials[b] = the sums of term(segment, j) over chunk b's j (b = segment * chunks + chunk).
// term is a device functor (int64_t segment, int64_t j) -> Sums2, passed by value.
template <typename Term>
__global__ void segment_partials_kernel(Term term, SegmentPlan p, Sums2* partials) {
  for (int64_t b = blockIdx.x; b < p.blocks(); b += gridDim.x) {  // uniform across the block
    const int64_t segment = b / p.chunks;
    const int64_t lo = (b % p.chunks) * p.chunk_len;
    const int64_t hi = lo + p.chunk_len < p.length ? lo + p.chunk_len : p.length;
    Sums2 s;
    for (int64_t j = lo + threadIdx.x; j < hi; j += kBlock) {
      const Sums2 t = term(segment, j);
      s.a += t.a;
      s.b += t.b;
    }
    s.a = group_reduce(s.a, kBlock, [](double x, double y) { return x + y; });
    s.b = group_reduce(s.b, kBlock, [](double x, double y) { return x + y; });
    if (threadIdx.x == 0) partials[b] = s;
  }
}

// totals[segment] = the sum of its chunks' partials, in chunk order. (static: each including
// file gets its own copy, as of the templates.)
static __global__ void segment_totals_kernel(const Sums2* partials, SegmentPlan p, Sums2* totals) {
  PMX_GRID_STRIDE_LOOP(segment, p.segments) {
    Sums2 s;
    for (int64_t k = 0; k < p.chunks; ++k) {
      s.a += partials[segment * p.chunks + k].a;
      s.b += partials[segment * p.chunks + k].b;
    }
    totals[segment] = s;
  }
}

// Bytes of scratch that segment_sums needs for plan p (partials only; totals are the caller's).
inline size_t segment_scratch_bytes(const SegmentPlan& p) {
  return workspace_aligned(static_cast<size_t>(std::max<int64_t>(p.blocks(), 1)) * sizeof(Sums2));
}

// totals[s] = (sum of term(s, j).a, sum of term(s, j).b) over j in [0, p.length), for every
// segment s of plan p; `scratch` holds segment_scratch_bytes(p). Runs on `stream`.
template <typename Term>
void segment_sums(const Term& term, const SegmentPlan& p, void* scratch, Sums2* totals,
                  cudaStream_t stream) {
  if (p.segments == 0) return;
  auto* partials = static_cast<Sums2*>(scratch);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.blocks(), 65535));
  segment_partials_kernel<<<blocks, kBlock, 0, stream>>>(term, p, partials);
  PMX_KERNEL_LAUNCH_CHECK();
  segment_totals_kernel<<<grid_for(p.segments), kBlock, 0, stream>>>(partials, p, totals);
  PMX_KERNEL_LAUNCH_CHECK();
}

}  // namespace gpu
}  // namespace pymx
