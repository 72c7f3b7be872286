// The GPU backend seen from the engine and the operators. No CUDA types here, so this header is
// usable from engine/ and from CPU-only builds: streams and events are opaque pointers.
// cuda/src/*.cu implements it; cuda/src/stub.cc implements the same symbols when CUDA is off
// (device_count() == 0; everything else throws Error(kNoCuda)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pymx/base.h"
#include "pymx/storage.h"

namespace pymx {

class NDArray;

namespace gpu {

bool built_with_cuda();

// 0 when there is no driver or no device; other CUDA failures throw Error(kCuda). Counts logical
// GPUs: PYMX_LOGICAL_GPUS_PER_GPU per physical one (Note [Logical GPUs] in cuda/src/device.cc).
int device_count();
// The CUDA device behind gpu(device_id) (itself unless physical GPUs are split).
int physical_device(int device_id);

// Throws Error(kInvalidArg) naming the id and the count when `device_id` is not a visible GPU.
void check_device(int device_id);

// cudaMemGetInfo on `device_id`, restoring the current device.
void memory_info(int device_id, uint64_t* free_bytes, uint64_t* total_bytes);

// Streams and events (all calls set the device first).
void* create_stream(int device_id);         // non-blocking stream
void destroy_stream(int device_id, void* stream);
void* create_event(int device_id);          // timing disabled
void* create_timing_event(int device_id);   // timing enabled (the profiler's spans)
// Milliseconds between two completed timing events of one device (cudaEventElapsedTime).
float elapsed_ms(void* start_event, void* end_event);
void destroy_event(int device_id, void* event);
void record_event(void* event, void* stream);
void stream_wait_event(void* stream, void* event);
void event_synchronize(void* event);
bool event_query(void* event);  // true when complete
void stream_synchronize(void* stream);
// Waits for the work queued so far on another library's `stream` of GPU `device_id`, named as
// DLPack names CUDA streams (1: the legacy default stream, 2: the per-thread default stream,
// else a cudaStream_t), from any thread, leaving the thread's current device as it was.
void synchronize_foreign_stream(int device_id, void* stream);
inline void* const kLegacyDefaultStream = reinterpret_cast<void*>(1);  // cudaStreamLegacy
void set_device(int device_id);

// Caching allocator (see cuda/src/caching_allocator.cc for the policy).
StorageHandle alloc(int device_id, size_t size, void* stream);
void free(StorageHandle handle);
void empty_cache(int device_id);
MemoryStats memory_stats(int device_id);

// Page-locked host memory (cudaHostAlloc, portable).
void* alloc_pinned(size_t size);
void free_pinned(void* ptr);

// Asynchronous copies on `stream`. Kinds follow cudaMemcpyKind; peer copies across devices.
void copy_host_to_device(void* dst, const void* src, size_t bytes, void* stream);
void copy_device_to_host(void* dst, const void* src, size_t bytes, void* stream);
void copy_device_to_device(void* dst, int dst_device, const void* src, int src_device,
                           size_t bytes, void* stream);

// CUDA graphs, for replaying a bulk op's kernels (Note [CUDA graphs for bulk replays] in
// engine/src/captured_graphs.cc). begin_capture starts capturing what this thread launches on
// `stream` (thread-local mode: other threads' calls are unaffected). end_capture always ends the
// capture and returns an executable graph, or nullptr when the capture failed or holds work that
// must not be replayed: a replay may only touch device memory the caller knows, so anything but
// kernels, memsets and device-to-device copies (a copy from a host buffer that is gone by the
// replay, a host callback) refuses the graph.
void begin_capture(void* stream);
void* end_capture(void* stream);
void launch_graph(void* graph, void* stream);
void destroy_graph(void* graph);  // errors dropped: may run at process exit

// Sums `arrays` (one per GPU, all of one shape and dtype) in place with an NCCL all-reduce:
// afterwards each holds the sum. The sum is one engine op writing every array; the first call
// for an ordered list of GPUs blocks while it loads NCCL and creates their communicator.
// Throws Error(kInvalidArg) for an array not on a GPU, differing shapes or dtypes, a GPU listed
// twice or two logical GPUs of one physical GPU; Error(kType) for bool; Error(kCuda) when NCCL
// cannot be loaded or fails. Thread-safe. Note [NCCL all-reduce] in cuda/src/nccl_all_reduce.cc.
void nccl_all_reduce(const std::vector<NDArray>& arrays);

// Registers every GPU kernel with the operator registry (no-op in the stub).
void register_kernels();

}  // namespace gpu
}  // namespace pymx
