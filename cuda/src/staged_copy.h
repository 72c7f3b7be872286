// Copies between pageable host memory and a GPU through pinned staging chunks, so that they run
// near the speed of copies from pinned memory. Used by copy_host_to_device and
// copy_device_to_host in device.cc. See Note [Staged copies] in staged_copy.cc.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace pymx {
namespace gpu {

// Copies smaller than this keep the plain cudaMemcpyAsync (the staged path's fixed costs would
// not pay off); the chunk size and count of a stream's staging ring.
constexpr size_t kStagingThreshold = size_t(256) << 10;
constexpr size_t kStagingChunkBytes = size_t(4) << 20;
constexpr int kStagingChunks = 4;

// True when a copy of `bytes` to or from `host` should be staged: large enough, and `host` is
// plain pageable memory (not page-locked, registered, managed or device memory). Never throws.
bool needs_staging(const void* host, size_t bytes);

// For both copies: `stream` belongs to the current device (engine workers set it) or is null;
// they throw Error(kCuda). They return false, having copied nothing, when the stream has no ring
// and its pinned memory cannot be allocated: the caller then copies directly.
//
// Copies `bytes` from pageable `src` to `dst` on the current device through the staging ring of
// (current device, `stream`). Returns once `src` has been read completely; the last chunks may
// still be on their way to `dst`, in `stream`'s order. Thread-safe (copies sharing a stream are
// serialised). Blocks while the ring's chunks are in use.
bool staged_copy_host_to_device(void* dst, const void* src, size_t bytes, cudaStream_t stream);

// Copies `bytes` from `src` on the current device to pageable `dst` through the staging ring of
// (current device, `stream`), after the work already queued on `stream`. Returns once `dst`
// holds the data. Thread-safe (copies sharing a stream are serialised). Blocks.
bool staged_copy_device_to_host(void* dst, const void* src, size_t bytes, cudaStream_t stream);

}  // namespace gpu
}  // namespace pymx
