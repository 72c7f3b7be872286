// storage::alloc / free / empty_cache / stats: host and pinned memory here, GPU memory in cuda/.
//
// Host policy (CPU and pinned host memory, one cache each, shared by all device ids):
// - Blocks are 64-byte aligned. Sizes are rounded up into buckets: powers of two up to 1 MiB,
//   multiples of 1 MiB above. A freed block is cached in its bucket and reused for a request of
//   the same bucket (no splitting): training asks for the same sizes every step, and reuse saves
//   the page faults of fresh large allocations.
// - At most PYMX_CPU_CACHE_MB (config.cc) of freed memory is cached per kind; beyond that
//   blocks go straight back to the system.
// - When the system refuses an allocation: release the cache, retry once, then throw
//   Error(kOutOfMemory) naming requested / in use / cached bytes.
// - Pinned memory comes from gpu::alloc_pinned when a GPU is visible, else it is plain host
//   memory (still accounted as cpu_pinned).
#include "pymx/storage.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "config.h"
#include "engine_impl.h"
#include "pymx/gpu.h"

namespace pymx {
namespace {

constexpr size_t kAlignment = 64;                    // bytes
constexpr size_t kLargeBucketStep = size_t(1) << 20;  // 1 MiB

size_t bucket_size(size_t size) {
  if (size > kLargeBucketStep) return (size + kLargeBucketStep - 1) / kLargeBucketStep * kLargeBucketStep;
  size_t bucket = kAlignment;
  while (bucket < size) bucket <<= 1;
  return bucket;
}

void* aligned_host_alloc(size_t bytes) { return std::aligned_alloc(kAlignment, bytes); }
void aligned_host_free(void* ptr) { std::free(ptr); }

void* pinned_alloc(size_t bytes) { return gpu::alloc_pinned(bytes); }
void pinned_free(void* ptr) { gpu::free_pinned(ptr); }

// A bucketed cache over a raw allocator. Thread-safe (one mutex).
class HostCache {
 public:
  using RawAlloc = void* (*)(size_t);
  using RawFree = void (*)(void*);

  HostCache(const char* what, RawAlloc raw_alloc, RawFree raw_free)
      : what_(what), raw_alloc_(raw_alloc), raw_free_(raw_free) {}

  void* alloc(size_t size) {
    const size_t bucket = bucket_size(size);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(bucket);
      if (it != free_.end() && !it->second.empty()) {
        void* ptr = it->second.back();
        it->second.pop_back();
        stats_.cached -= bucket;
        note_in_use(bucket);
        return ptr;
      }
    }
    void* ptr = raw_alloc_(bucket);
    if (ptr == nullptr) {
      empty();
      ptr = raw_alloc_(bucket);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (ptr == nullptr) {
      PMX_THROW(Status::kOutOfMemory, "out of ", what_, " memory: tried to allocate ", size,
                " bytes; ", stats_.in_use, " bytes in use, ", stats_.cached, " bytes cached");
    }
    ++stats_.num_allocs;
    note_in_use(bucket);
    return ptr;
  }

  void free(void* ptr, size_t size) {
    const size_t bucket = bucket_size(size);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.in_use -= bucket;
      if (stats_.cached + bucket <= config().cpu_cache_bytes) {
        free_[bucket].push_back(ptr);
        stats_.cached += bucket;
        return;
      }
    }
    raw_free_(ptr);
  }

  void empty() {
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [bucket, ptrs] : free_) blocks.insert(blocks.end(), ptrs.begin(), ptrs.end());
      free_.clear();
      stats_.cached = 0;
    }
    for (void* ptr : blocks) raw_free_(ptr);
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  void note_in_use(size_t bucket) {
    stats_.in_use += bucket;
    if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
  }

  const char* const what_;
  const RawAlloc raw_alloc_;
  const RawFree raw_free_;
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // bucket -> cached blocks
  MemoryStats stats_;
};

// Both caches live for the whole process (never destroyed): arrays may be freed by late
// static destructors.
HostCache& cpu_cache() {
  static HostCache* cache = new HostCache("host", aligned_host_alloc, aligned_host_free);
  return *cache;
}

HostCache& pinned_cache() {
  static HostCache* cache = visible_gpu_count() > 0
                                ? new HostCache("pinned host", pinned_alloc, pinned_free)
                                : new HostCache("pinned host", aligned_host_alloc, aligned_host_free);
  return *cache;
}

HostCache& host_cache(Device device) {
  return device.type == DeviceType::kCPUPinned ? pinned_cache() : cpu_cache();
}

}  // namespace

namespace storage {

StorageHandle alloc(size_t size, Device device, void* stream) {
  StorageHandle handle;
  handle.device = device;
  if (size == 0) return handle;
  if (device.is_gpu()) {
    check_engine_device(device);
    return gpu::alloc(device.id, size, stream);
  }
  PMX_CHECK(device.id >= 0, "cannot allocate memory on ", device.str(), ": negative device id");
  handle.dptr = host_cache(device).alloc(size);
  handle.size = size;
  return handle;
}

void check_capacity(size_t size, Device device) {
  if (device.is_gpu()) return;
  // Asked once: sysconf(_SC_PHYS_PAGES) is a system call, and every op output comes here.
  static const uint64_t capacity = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                                   static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (size > capacity) {
    PMX_THROW(Status::kOutOfMemory, "out of host memory on ", device.str(),
              ": tried to allocate ", size, " bytes, more than the machine's ", capacity,
              " bytes");
  }
}

void free(StorageHandle handle) {
  if (handle.dptr == nullptr) return;
  if (handle.device.is_gpu()) {
    gpu::free(handle);
    return;
  }
  host_cache(handle.device).free(handle.dptr, handle.size);
}

void empty_cache(Device device) {
  if (device.is_gpu()) {
    check_engine_device(device);
    gpu::empty_cache(device.id);
    return;
  }
  host_cache(device).empty();
}

MemoryStats stats(Device device) {
  if (device.is_gpu()) {
    check_engine_device(device);
    return gpu::memory_stats(device.id);
  }
  return host_cache(device).stats();
}

}  // namespace storage
}  // namespace pymx
