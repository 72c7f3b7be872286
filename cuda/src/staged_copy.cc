// Pageable host <-> GPU copies pipelined through pinned staging chunks.
//
// Note [Staged copies]
// ~~~~~~~~~~~~~~~~~~~~
// The driver handles a cudaMemcpyAsync to or from pageable memory by staging it itself,
// synchronously and slowly (H200: 6.0 GB/s host to device, 2.85 GB/s device to host, against
// 54.5 GB/s from pinned memory). NumPy arrays and pymx CPU arrays are pageable. So a large
// pageable copy goes through a ring of kStagingChunks pinned chunks instead, kept per
// (device, stream):
//   host to device: memcpy a piece of the source into a chunk on the CPU, cudaMemcpyAsync the
//     chunk to the device, record the chunk's event; the next memcpy overlaps that DMA. The call
//     returns once the last DMA is queued: the source has been read completely by then (as with
//     the driver's staging), and the op's completion event, which the engine records on the
//     stream right after, covers the DMAs still in flight.
//   device to host: up to kStagingChunks DMAs (device -> chunk) are queued, each followed by its
//     chunk's event; the CPU waits for the oldest chunk's event, memcpys the chunk to the
//     destination and queues the next DMA into it. The call returns after the last memcpy, so
//     the destination holds the data when the op completes (the driver's pageable copy is
//     synchronous too).
// Rules that keep it correct:
//  - A chunk is written (by the CPU or by a DMA) only after its event completed, i.e. after the
//    last DMA that used it, also one queued by an earlier call that returned with DMAs in flight.
//  - Page-locked, registered, managed or device "host" pointers keep the direct cudaMemcpyAsync,
//    and so do copies below kStagingThreshold (256 KiB). The staged path has fixed costs (a
//    pointer query, a lock, an event record and wait: a few microseconds) that only bandwidth
//    buys back; at 256 KiB the driver's staging takes about 40 us (6 GB/s), so the saving is
//    already several times those costs, while below it latency, not bandwidth, dominates.
//  - Chunks are cut at plain byte offsets: memcpy and the DMA engine take any address, so an
//    unaligned host pointer or a size that is a multiple of nothing needs no special case.
//  - One ring per (device, stream). Copies on different streams never share a chunk. Copies on
//    one stream are ordered anyway, so holding the ring's mutex for a whole copy costs nothing:
//    an engine copy worker owns its stream, and only the naive engine (one stream per device for
//    every pushing thread) or two threads on the null stream ever contend.
//  - Errors: every CUDA call throws Error(kCuda). When a copy fails midway the stream is
//    synchronised (errors ignored) before the error propagates, so no DMA that the chunk events
//    do not track (a DMA queued before a failed cudaEventRecord) still uses a chunk, and the
//    ring stays usable. After a sticky error the whole context is lost, ring included.
//  - Lifetime: a ring is created at its stream's first staged copy and never freed, like the
//    cuBLAS handles of cublas_loader.cc. Engine streams live for the process (kept across fork's
//    stop and start; a forked child uses no CUDA), and cudaFreeHost would synchronise the
//    device. A stream destroyed and a new one created at the same address reuse the ring, which
//    the first rule makes safe. When pinned memory is exhausted, a stream without a ring copies
//    directly (the driver's staging), and tries to make its ring again at its next copy.
//  - Sizes: 4 chunks of 4 MiB (16 MiB pinned per stream that stages). A 4 MiB DMA takes about
//    75 us at 54 GB/s, long next to the per-chunk fixed costs (queueing the DMA and the event,
//    waking the memcpy helpers); the first memcpy and the last DMA, which nothing overlaps, are
//    about 3 % of a 256 MiB copy; and the CPU may run up to three chunks ahead of the DMA
//    engine, which absorbs a late helper thread without idling the DMA engine.
//  - The CPU memcpy of a chunk is split over the intra-op pool (parallel.h): one core copies
//    more slowly than the DMA engine. parallel_for never waits for the pool: when a CPU kernel
//    is using it, the memcpy runs on the copy worker alone, so copy workers and CPU devices
//    never block each other, and fork() waits for a running loop to end.
#include "staged_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "cuda_check.h"
#include "parallel.h"
#include "pymx/gpu.h"

namespace pymx {
namespace gpu {
namespace {

// Smallest piece of a memcpy given to one thread: below this, waking a helper costs more than it
// saves (a 4 MiB chunk is split into at most 8 pieces).
constexpr int64_t kMemcpyGrain = int64_t(512) << 10;

// The staging ring of one (device, stream).
struct StagingRing {
  std::mutex mu;                           // held for the whole of a staged copy
  char* pinned = nullptr;                  // kStagingChunks chunks of kStagingChunkBytes
  cudaEvent_t done[kStagingChunks] = {};   // recorded after each DMA that uses the chunk
  int next = 0;                            // guarded by mu: the chunk the next copy starts at

  char* chunk(int index) { return pinned + static_cast<size_t>(index) * kStagingChunkBytes; }
};

// Allocates a ring for the current device. Throws Error(kOutOfMemory) or Error(kCuda), freeing
// what it had created.
StagingRing* create_ring() {
  auto ring = std::make_unique<StagingRing>();
  ring->pinned = static_cast<char*>(alloc_pinned(kStagingChunks * kStagingChunkBytes));
  try {
    for (cudaEvent_t& event : ring->done)
      PMX_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  } catch (...) {
    for (cudaEvent_t event : ring->done)
      if (event != nullptr) PMX_CUDA_IGNORE(cudaEventDestroy(event));
    PMX_CUDA_IGNORE(cudaFreeHost(ring->pinned));
    throw;
  }
  return ring.release();
}

// The ring of (current device, `stream`), created on first use; nullptr when its pinned memory
// cannot be allocated (tried again at the next copy). Thread-safe.
StagingRing* ring_for(cudaStream_t stream) {
  int device = 0;
  PMX_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mu;
  static auto* rings = new std::map<std::pair<int, cudaStream_t>, StagingRing*>();  // never freed
  std::lock_guard<std::mutex> lock(mu);
  StagingRing*& ring = (*rings)[{device, stream}];
  if (ring == nullptr) {
    try {
      ring = create_ring();
    } catch (const Error& e) {
      if (e.status() != Status::kOutOfMemory) throw;
    }
  }
  return ring;
}

// memcpy, split over the intra-op pool when large (see the Note).
void host_copy(char* dst, const char* src, size_t bytes) {
  parallel_for(0, static_cast<int64_t>(bytes), kMemcpyGrain, [dst, src](int64_t lo, int64_t hi) {
    std::memcpy(dst + lo, src + lo, static_cast<size_t>(hi - lo));
  });
}

// Runs a copy's pipeline; when it throws, waits for `stream` before rethrowing so that no
// untracked DMA still uses a chunk (see the Note).
template <typename Pipeline>
void run_draining_on_error(cudaStream_t stream, const Pipeline& pipeline) {
  try {
    pipeline();
  } catch (...) {
    PMX_CUDA_IGNORE(cudaStreamSynchronize(stream));
    throw;
  }
}

// How a copy of `bytes` is cut into chunks: chunk k of the copy covers bytes
// [k * kStagingChunkBytes, k * kStagingChunkBytes + length(k)) and uses ring chunk index(k).
struct ChunkPlan {
  size_t bytes;
  int first;  // the ring chunk of the copy's chunk 0

  size_t count() const { return (bytes + kStagingChunkBytes - 1) / kStagingChunkBytes; }
  size_t offset(size_t k) const { return k * kStagingChunkBytes; }
  size_t length(size_t k) const { return std::min(kStagingChunkBytes, bytes - offset(k)); }
  int index(size_t k) const { return static_cast<int>((first + k) % kStagingChunks); }
};

}  // namespace

bool needs_staging(const void* host, size_t bytes) {
  if (bytes < kStagingThreshold) return false;
  cudaPointerAttributes attributes;
  const cudaError_t err = cudaPointerGetAttributes(&attributes, host);
  if (err != cudaSuccess) {
    // Drivers before CUDA 11 answer cudaErrorInvalidValue for a plain host pointer, and the error
    // also becomes the thread's last error: clear it, or the next launch check would report it.
    // Any other failure takes the direct path, whose cudaMemcpyAsync reports it.
    (void)cudaGetLastError();
    return err == cudaErrorInvalidValue;
  }
  return attributes.type == cudaMemoryTypeUnregistered;
}

namespace {

// Runs `pipeline(ring, plan)` for a copy of `bytes` on `stream`'s ring, holding the ring's mutex
// and draining the stream if it throws; false when the stream has no ring (pinned memory is out).
template <typename Pipeline>
bool on_staging_ring(cudaStream_t stream, size_t bytes, const Pipeline& pipeline) {
  StagingRing* ring = ring_for(stream);
  if (ring == nullptr) return false;
  std::lock_guard<std::mutex> lock(ring->mu);
  const ChunkPlan plan{bytes, ring->next};
  ring->next = plan.index(plan.count());
  run_draining_on_error(stream, [&] { pipeline(*ring, plan); });
  return true;
}

}  // namespace

bool staged_copy_host_to_device(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  auto* to = static_cast<char*>(dst);
  auto* from = static_cast<const char*>(src);
  return on_staging_ring(stream, bytes, [&](StagingRing& ring, const ChunkPlan& plan) {
    for (size_t k = 0; k < plan.count(); ++k) {
      const int c = plan.index(k);
      PMX_CUDA_CHECK(cudaEventSynchronize(ring.done[c]));  // its last DMA has read it
      host_copy(ring.chunk(c), from + plan.offset(k), plan.length(k));
      PMX_CUDA_CHECK(cudaMemcpyAsync(to + plan.offset(k), ring.chunk(c), plan.length(k),
                                     cudaMemcpyHostToDevice, stream));
      PMX_CUDA_CHECK(cudaEventRecord(ring.done[c], stream));
    }
  });
}

bool staged_copy_device_to_host(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  auto* to = static_cast<char*>(dst);
  auto* from = static_cast<const char*>(src);
  return on_staging_ring(stream, bytes, [&](StagingRing& ring, const ChunkPlan& plan) {
    auto start_dma = [&](size_t k) {
      const int c = plan.index(k);
      PMX_CUDA_CHECK(cudaEventSynchronize(ring.done[c]));  // no earlier DMA still uses it
      PMX_CUDA_CHECK(cudaMemcpyAsync(ring.chunk(c), from + plan.offset(k), plan.length(k),
                                     cudaMemcpyDeviceToHost, stream));
      PMX_CUDA_CHECK(cudaEventRecord(ring.done[c], stream));
    };
    const size_t ahead = std::min(plan.count(), static_cast<size_t>(kStagingChunks));
    for (size_t k = 0; k < ahead; ++k) start_dma(k);
    for (size_t k = 0; k < plan.count(); ++k) {
      const int c = plan.index(k);
      PMX_CUDA_CHECK(cudaEventSynchronize(ring.done[c]));  // chunk k has arrived
      host_copy(to + plan.offset(k), ring.chunk(c), plan.length(k));
      if (k + ahead < plan.count()) start_dma(k + ahead);  // into the chunk just emptied
    }
  });
}

}  // namespace gpu
}  // namespace pymx
