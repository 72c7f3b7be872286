// Device queries, streams, events, pinned host memory and copies: thin wrappers over the CUDA
// runtime with pymx's error policy (cuda_check.h). Every call that touches a device sets it
// first, because engine workers may serve several devices.
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>

#include "config.h"
#include "cuda_check.h"
#include "pymx/gpu.h"
#include "staged_copy.h"

namespace pymx {
namespace gpu {

bool built_with_cuda() { return true; }

// Note [Logical GPUs]
// ~~~~~~~~~~~~~~~~~~~
// PYMX_LOGICAL_GPUS_PER_GPU=n shows each physical GPU p as n devices gpu(p*n) ... gpu(p*n+n-1),
// each with its own engine workers and streams and its own caching allocator, sharing the
// physical device's memory and compute (its memory_info is the physical device's; out of memory,
// a logical device releases only its own cache). It exists to run multi-device code (data
// parallelism, kvstore reduction, copies between devices) on a machine with fewer GPUs, as
// cpu(0) and cpu(1) do on the host. Every CUDA call that names a device goes through
// physical_device(); copies between logical devices of one physical GPU are plain device copies.
// Outside pymx a GPU is its CUDA device: DLPack exports gpu(i) as CUDA device i / n and imports
// CUDA device p onto gpu(p*n) (pmx_gpu_physical_device), and NCCL refuses two logical devices of
// one GPU.

// The count cannot change while the process runs (CUDA_VISIBLE_DEVICES is read once by the
// driver), so it is queried once; a failed query is not cached and throws again next time.
int device_count() {
  // Asked on every GPU allocation and free: lock-free once known.
  static std::atomic<int> cached{-1};
  if (const int known = cached.load(std::memory_order_acquire); known >= 0) return known;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (const int known = cached.load(std::memory_order_relaxed); known >= 0) return known;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();  // "no GPU" is an answer, not a failure
    count = 0;
  } else if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw_cuda_error(err, "cudaGetDeviceCount(&count)", __FILE__, __LINE__);
  }
  const int total = count * config().logical_gpus_per_gpu;
  cached.store(total, std::memory_order_release);
  if (count > 0) register_kernels();  // a GPU is about to be used: check the kernel table once
  return total;
}

void check_device(int device_id) {
  const int count = device_count();
  PMX_CHECK(device_id >= 0 && device_id < count, "gpu(", device_id, ") does not exist: ", count,
            count == 1 ? " GPU is" : " GPUs are", " visible",
            count > 0 ? str_cat(" (valid ids 0..", count - 1, ")") : std::string());
}

int physical_device(int device_id) {
  check_device(device_id);
  return device_id / config().logical_gpus_per_gpu;
}

void set_device(int device_id) { PMX_CUDA_CHECK(cudaSetDevice(physical_device(device_id))); }

void memory_info(int device_id, uint64_t* free_bytes, uint64_t* total_bytes) {
  const int physical = physical_device(device_id);
  int previous = 0;
  PMX_CUDA_CHECK(cudaGetDevice(&previous));
  PMX_CUDA_CHECK(cudaSetDevice(physical));
  size_t free_b = 0, total_b = 0;
  cudaError_t err = cudaMemGetInfo(&free_b, &total_b);
  PMX_CUDA_CHECK(cudaSetDevice(previous));
  PMX_CUDA_CHECK(err);
  *free_bytes = free_b;
  *total_bytes = total_b;
}

void* create_stream(int device_id) {
  set_device(device_id);
  cudaStream_t stream = nullptr;
  PMX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

void destroy_stream(int device_id, void* stream) {
  if (stream == nullptr) return;
  PMX_CUDA_IGNORE(cudaSetDevice(physical_device(device_id)));
  PMX_CUDA_IGNORE(cudaStreamDestroy(static_cast<cudaStream_t>(stream)));
}

void* create_event(int device_id) {
  set_device(device_id);
  cudaEvent_t event = nullptr;
  PMX_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void* create_timing_event(int device_id) {
  set_device(device_id);
  cudaEvent_t event = nullptr;
  PMX_CUDA_CHECK(cudaEventCreate(&event));
  return event;
}

float elapsed_ms(void* start_event, void* end_event) {
  float ms = 0.0f;
  PMX_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_event),
                                      static_cast<cudaEvent_t>(end_event)));
  return ms;
}

void destroy_event(int device_id, void* event) {
  if (event == nullptr) return;
  PMX_CUDA_IGNORE(cudaSetDevice(physical_device(device_id)));
  PMX_CUDA_IGNORE(cudaEventDestroy(static_cast<cudaEvent_t>(event)));
}

void record_event(void* event, void* stream) {
  PMX_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}

void stream_wait_event(void* stream, void* event) {
  PMX_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                     static_cast<cudaEvent_t>(event), 0));
}

void event_synchronize(void* event) {
  PMX_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

bool event_query(void* event) {
  cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error: the work is still running
    return false;
  }
  PMX_CUDA_CHECK(err);
  return true;
}

void stream_synchronize(void* stream) {
  PMX_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

void synchronize_foreign_stream(int device_id, void* stream) {
  // The default streams' handles (cudaStreamLegacy 1, cudaStreamPerThread 2) are DLPack's
  // numbers, and name the current device's stream: that device is set for the call.
  const int physical = physical_device(device_id);
  int previous = 0;
  PMX_CUDA_CHECK(cudaGetDevice(&previous));
  PMX_CUDA_CHECK(cudaSetDevice(physical));
  const cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  PMX_CUDA_CHECK(cudaSetDevice(previous));
  PMX_CUDA_CHECK(err);
}

void* alloc_pinned(size_t size) {
  if (size == 0) return nullptr;
  void* ptr = nullptr;
  cudaError_t err = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    PMX_THROW(Status::kOutOfMemory, "out of pinned host memory: tried to allocate ", size,
              " bytes with cudaHostAlloc");
  }
  PMX_CUDA_CHECK(err);
  return ptr;
}

void free_pinned(void* ptr) {
  if (ptr == nullptr) return;
  PMX_CUDA_CHECK(cudaFreeHost(ptr));
}

// Large copies from or to pageable memory go through pinned staging chunks: see
// Note [Staged copies] in staged_copy.cc.
void copy_host_to_device(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (needs_staging(src, bytes) && staged_copy_host_to_device(dst, src, bytes, s)) return;
  PMX_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
}

void copy_device_to_host(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (needs_staging(dst, bytes) && staged_copy_device_to_host(dst, src, bytes, s)) return;
  PMX_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
}

void copy_device_to_device(void* dst, int dst_device, const void* src, int src_device,
                           size_t bytes, void* stream) {
  if (bytes == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const int dst_physical = physical_device(dst_device), src_physical = physical_device(src_device);
  if (dst_physical == src_physical) {
    PMX_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  } else {
    // Peer copies work without peer access enabled (the driver stages through the host).
    PMX_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_physical, src, src_physical, bytes, s));
  }
}

}  // namespace gpu
}  // namespace pymx
