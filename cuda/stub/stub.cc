// The GPU backend of a build without CUDA (PYMX_CUDA=OFF or no nvcc): the same symbols as
// cuda/src, so nothing above cuda/ needs an #ifdef. There are no GPUs; every other call throws.
#include "pymx/gpu.h"

namespace pymx {
namespace gpu {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  PMX_THROW(Status::kNoCuda, "pymx was built without CUDA, so ", what,
            " is unavailable; rebuild with PYMX_CUDA=ON on a machine with nvcc to use GPUs");
}

}  // namespace

bool built_with_cuda() { return false; }
int device_count() { return 0; }
int physical_device(int device_id) {
  PMX_THROW(Status::kNoCuda, "gpu(", device_id,
            ") does not exist: pymx was built without CUDA (0 GPUs visible)");
}
void check_device(int device_id) {
  PMX_THROW(Status::kNoCuda, "gpu(", device_id,
            ") does not exist: pymx was built without CUDA (0 GPUs visible)");
}
void memory_info(int, uint64_t*, uint64_t*) { no_cuda("gpu memory_info"); }
void* create_stream(int) { no_cuda("create_stream"); }
void destroy_stream(int, void*) { no_cuda("destroy_stream"); }
void* create_event(int) { no_cuda("create_event"); }
void* create_timing_event(int) { no_cuda("create_timing_event"); }
float elapsed_ms(void*, void*) { no_cuda("elapsed_ms"); }
void destroy_event(int, void*) { no_cuda("destroy_event"); }
void record_event(void*, void*) { no_cuda("record_event"); }
void stream_wait_event(void*, void*) { no_cuda("stream_wait_event"); }
void event_synchronize(void*) { no_cuda("event_synchronize"); }
bool event_query(void*) { no_cuda("event_query"); }
void stream_synchronize(void*) { no_cuda("stream_synchronize"); }
void synchronize_foreign_stream(int, void*) { no_cuda("synchronize_foreign_stream"); }
void set_device(int) { no_cuda("set_device"); }
StorageHandle alloc(int, size_t, void*) { no_cuda("GPU memory allocation"); }
void free(StorageHandle) { no_cuda("GPU memory release"); }
void empty_cache(int) { no_cuda("empty_cache"); }
MemoryStats memory_stats(int) { no_cuda("GPU memory_stats"); }
void* alloc_pinned(size_t) { no_cuda("pinned host memory"); }
void free_pinned(void*) { no_cuda("pinned host memory"); }
void copy_host_to_device(void*, const void*, size_t, void*) { no_cuda("copy_host_to_device"); }
void copy_device_to_host(void*, const void*, size_t, void*) { no_cuda("copy_device_to_host"); }
void copy_device_to_device(void*, int, const void*, int, size_t, void*) {
  no_cuda("copy_device_to_device");
}
void begin_capture(void*) { no_cuda("begin_capture"); }
void* end_capture(void*) { no_cuda("end_capture"); }
void launch_graph(void*, void*) { no_cuda("launch_graph"); }
void destroy_graph(void*) {}
void nccl_all_reduce(const std::vector<NDArray>&) {
  no_cuda("the NCCL all-reduce (kvstore 'nccl')");
}
void register_kernels() {}

}  // namespace gpu
}  // namespace pymx
