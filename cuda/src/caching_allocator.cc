// The per-GPU caching allocator behind gpu::alloc / gpu::free.
//
// Policy:
// - One cache per device, created at its first allocation; one mutex guards it.
// - Sizes are rounded up into buckets: below 1 MiB to a multiple of 512 B, from 1 MiB on to a
//   multiple of 2 MiB. A cached block is reused only for a request in the same bucket (no
//   splitting): steady-state training asks for the same sizes every step, so exact buckets hit.
// - A block remembers the stream it was freed on (StorageHandle::stream). A request on that same
//   stream reuses it at once: stream order puts the new work after the old. A request on another
//   stream (or with no stream) reuses it only after an event recorded on the freeing stream at
//   free time has completed. A block freed with a null stream is free for everyone at once: the
//   caller promises its work is done.
// - When cudaMalloc fails: synchronise and release every cached block of that device, retry
//   once, then throw Error(kOutOfMemory) with the numbers. Nothing is left half-done, so the
//   device stays usable.
// - empty_cache releases the cached blocks of one device (waiting for their events first).
// - No allocation or release while the calling thread captures a CUDA graph: cudaMalloc and
//   event queries would break the capture, and an event recorded into it would stay "captured"
//   in the cache, unusable by every later query. Such a call throws; the capture is then refused
//   and its kernels run directly (Note [CUDA graphs for bulk replays]).
// - The caches are never destroyed: at process exit the CUDA runtime may already be gone, and
//   the driver frees everything anyway.
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "capture_state.h"
#include "cuda_check.h"
#include "pymx/gpu.h"

namespace pymx {
namespace gpu {
namespace {

constexpr size_t kSmallAlignment = 512;                 // bytes, below kLargeThreshold
constexpr size_t kLargeThreshold = size_t(1) << 20;     // 1 MiB
constexpr size_t kLargeAlignment = size_t(2) << 20;     // 2 MiB

size_t round_size(size_t size) {
  const size_t align = size < kLargeThreshold ? kSmallAlignment : kLargeAlignment;
  return (size + align - 1) / align * align;
}

std::string fmt_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  std::ostringstream os;
  os.precision(unit == 0 ? 0 : 2);
  os << std::fixed << value << " " << units[unit];
  return os.str();
}

struct CachedBlock {
  void* ptr;
  void* stream;       // the stream it was freed on; nullptr: no pending work
  cudaEvent_t event;  // recorded on `stream` at free time; nullptr when stream is nullptr
};

class DeviceCache {
 public:
  explicit DeviceCache(int device) : device_(device) {}

  void* alloc(size_t size, void* stream) {
    refuse_while_capturing("allocation");
    std::lock_guard<std::mutex> lock(mu_);
    const size_t rounded = round_size(size);
    void* ptr = take_cached(rounded, stream);
    if (ptr == nullptr) ptr = malloc_with_retry(size, rounded);
    live_[ptr] = rounded;
    stats_.in_use += rounded;  // STATE CHANGE
    if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
    return ptr;
  }

  void free(void* ptr, void* stream) {
    refuse_while_capturing("release");
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    PMX_ASSERT(it != live_.end(), "gpu(", device_, "): freeing ", ptr,
               " which this allocator did not hand out (or already freed)");
    const size_t rounded = it->second;
    cudaEvent_t event = nullptr;
    if (stream != nullptr) {  // before the block leaves live_: a failure here keeps it there
      event = take_event();
      const cudaError_t err = cudaEventRecord(event, static_cast<cudaStream_t>(stream));
      if (err != cudaSuccess) {
        free_events_.push_back(event);
        throw_cuda_error(err, "cudaEventRecord(event, stream)", __FILE__, __LINE__);
      }
    }
    live_.erase(it);
    cache_.emplace(rounded, CachedBlock{ptr, stream, event});
    stats_.in_use -= rounded;  // STATE CHANGE: the block moves from in use to cached
    stats_.cached += rounded;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    release_all_cached();
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  // A block of exactly `rounded` bytes that is safe to use on `stream`, or nullptr.
  void* take_cached(size_t rounded, void* stream) {
    // Blocks of one size sit in free order, and work finishes roughly in that order too: once
    // one pending event is not done, later ones are not queried (each query is a driver call).
    auto range = cache_.equal_range(rounded);
    auto chosen = cache_.end();
    bool seen_pending = false;
    for (auto it = range.first; it != range.second; ++it) {
      const CachedBlock& block = it->second;
      if (block.event == nullptr || (stream != nullptr && block.stream == stream)) {
        chosen = it;
        break;
      }
      if (chosen == cache_.end() && !seen_pending) {
        if (event_done(block.event)) chosen = it; else seen_pending = true;
      }
    }
    if (chosen == cache_.end()) return nullptr;
    void* ptr = chosen->second.ptr;
    if (chosen->second.event != nullptr) free_events_.push_back(chosen->second.event);
    cache_.erase(chosen);
    stats_.cached -= rounded;  // STATE CHANGE
    return ptr;
  }

  void refuse_while_capturing(const char* what) const {
    if (capturing_on_this_thread())
      PMX_THROW(Status::kCuda, "gpu(", device_, "): GPU memory ", what,
                " while this thread captures a CUDA graph");
  }

  bool event_done(cudaEvent_t event) {
    cudaError_t err = cudaEventQuery(event);
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    PMX_CUDA_CHECK(err);
    return true;
  }

  void* malloc_with_retry(size_t requested, size_t rounded) {
    set_device(device_);
    void* ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, rounded);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it and try again with the cache emptied
      release_all_cached();
      err = cudaMalloc(&ptr, rounded);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      PMX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      PMX_THROW(Status::kOutOfMemory, "CUDA out of memory on gpu(", device_,
                "): tried to allocate ", fmt_bytes(requested), "; ", fmt_bytes(stats_.in_use),
                " in use, ", fmt_bytes(stats_.cached), " cached, ", fmt_bytes(free_b),
                " free of ", fmt_bytes(total_b), " total");
    }
    PMX_CUDA_CHECK(err);
    ++stats_.num_allocs;
    return ptr;
  }

  // Caller holds mu_.
  void release_all_cached() {
    set_device(device_);
    for (auto& entry : cache_) {
      CachedBlock& block = entry.second;
      if (block.event != nullptr) {
        PMX_CUDA_CHECK(cudaEventSynchronize(block.event));
        free_events_.push_back(block.event);
      }
      PMX_CUDA_CHECK(cudaFree(block.ptr));
    }
    cache_.clear();
    stats_.cached = 0;  // STATE CHANGE
  }

  cudaEvent_t take_event() {
    if (!free_events_.empty()) {
      cudaEvent_t event = free_events_.back();
      free_events_.pop_back();
      return event;
    }
    set_device(device_);
    cudaEvent_t event = nullptr;
    PMX_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }

  const int device_;
  std::mutex mu_;
  // invariant: stats_.cached == sum of the keys of cache_; stats_.in_use == sum of live_ values.
  std::multimap<size_t, CachedBlock> cache_;
  std::unordered_map<void*, size_t> live_;
  std::vector<cudaEvent_t> free_events_;  // events whose recorded work has been waited for
  MemoryStats stats_;
};

DeviceCache& cache_for(int device_id) {
  check_device(device_id);
  static std::once_flag once;
  static std::vector<std::unique_ptr<DeviceCache>>* caches = nullptr;  // never destroyed
  std::call_once(once, [] {
    caches = new std::vector<std::unique_ptr<DeviceCache>>();
    for (int d = 0; d < device_count(); ++d) caches->push_back(std::make_unique<DeviceCache>(d));
  });
  return *(*caches)[device_id];
}

}  // namespace

StorageHandle alloc(int device_id, size_t size, void* stream) {
  StorageHandle handle;
  handle.device = Device::gpu(device_id);
  handle.size = size;
  handle.stream = stream;
  if (size == 0) {
    check_device(device_id);
    return handle;
  }
  handle.dptr = cache_for(device_id).alloc(size, stream);
  return handle;
}

void free(StorageHandle handle) {
  if (handle.dptr == nullptr) return;
  cache_for(handle.device.id).free(handle.dptr, handle.stream);
}

void empty_cache(int device_id) { cache_for(device_id).empty_cache(); }

MemoryStats memory_stats(int device_id) { return cache_for(device_id).stats(); }

}  // namespace gpu
}  // namespace pymx
