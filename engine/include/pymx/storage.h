// Memory for arrays: 64-byte aligned host memory, pinned host memory and (through cuda/) the
// per-GPU caching allocator.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pymx/base.h"

namespace pymx {

// One allocation. `stream` is the GPU stream the memory was last used on (nullptr on host), so
// the caching allocator never hands the block out again before that stream's work is done.
struct StorageHandle {
  void* dptr = nullptr;
  size_t size = 0;
  Device device;
  void* stream = nullptr;
};

struct MemoryStats {
  uint64_t in_use = 0;      // bytes handed out and not yet freed
  uint64_t cached = 0;      // bytes held in the cache, free for reuse
  uint64_t peak_in_use = 0;
  uint64_t num_allocs = 0;  // allocations that reached the system / driver
};

// Thread-safe. A size of 0 gives dptr == nullptr. GPU failures release the cache, retry once, and
// then throw Error(kOutOfMemory) naming requested / in use / cached / free bytes.
//
// `stream` (GPU only) is the stream that will first use the memory, when the caller knows it: a
// cached block freed on that stream is handed out at once, since stream order puts the new work
// after the old. With nullptr, a cached block is reused only once its pending work has finished.
namespace storage {
StorageHandle alloc(size_t size, Device device, void* stream = nullptr);
// Throws Error(kOutOfMemory) when `size` exceeds the machine's RAM, for host devices: an
// allocation that could never succeed, whatever is freed. (A GPU's caching allocator reports its
// own shortage, with its statistics, when the memory is first used.)
void check_capacity(size_t size, Device device);
void free(StorageHandle handle);  // null dptr: no-op
void empty_cache(Device device);  // return cached blocks to the system / driver
MemoryStats stats(Device device);
}  // namespace storage

}  // namespace pymx
