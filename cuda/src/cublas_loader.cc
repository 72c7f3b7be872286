// Loading libcublas.so.13 (from where: nvidia_library.h), and one handle per stream.
#include "cublas_loader.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "cuda_check.h"
#include "nvidia_library.h"
#include "pymx/gpu.h"
#include "pymx/base.h"

namespace pymx {
namespace gpu {
namespace {

constexpr const char* kCublasSoname = "libcublas.so.13";
// Each handle's workspace: cuBLAS's recommended size for Hopper and newer, enough for older GPUs.
// Without one, cuBLAS finds workspace itself while it runs, and a GEMM inside a CUDA-graph capture
// (Note [CUDA graphs for bulk replays]) would put a memory allocation into the graph, which pymx
// refuses to replay. The workspace is made when the handle is, before any capture on its stream
// (a replay is captured only the second time it is seen), and lives as long as the handle.
constexpr size_t kWorkspaceBytes = 32 << 20;

void* open_cublas() {
  std::string tried;
  if (void* lib = open_nvidia_library(kCublasSoname, "nvidia/cu13/lib", &tried)) return lib;
  PMX_THROW(Status::kCuda, "cannot load cuBLAS (", kCublasSoname,
            "), which pymx needs for matrix products on the GPU; install it with "
            "`pip install nvidia-cublas` (or pymx[cuda]) or put it on LD_LIBRARY_PATH. Tried:",
            tried);
}

}  // namespace

const CublasApi& cublas() {
  static CublasApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = open_cublas();
    auto load = [lib](const char* name) {
      void* sym = dlsym(lib, name);
      if (sym == nullptr)
        PMX_THROW(Status::kCuda, "cuBLAS (", kCublasSoname, ") has no symbol ", name,
                  "; pymx needs cuBLAS 13 or newer");
      return sym;
    };
    api.create = reinterpret_cast<decltype(api.create)>(load("cublasCreate_v2"));
    api.set_stream = reinterpret_cast<decltype(api.set_stream)>(load("cublasSetStream_v2"));
    api.set_workspace =
        reinterpret_cast<decltype(api.set_workspace)>(load("cublasSetWorkspace_v2"));
    api.sgemm_strided_batched = reinterpret_cast<decltype(api.sgemm_strided_batched)>(
        load("cublasSgemmStridedBatched"));
    api.dgemm_strided_batched = reinterpret_cast<decltype(api.dgemm_strided_batched)>(
        load("cublasDgemmStridedBatched"));
    api.gemm_strided_batched_ex = reinterpret_cast<decltype(api.gemm_strided_batched_ex)>(
        load("cublasGemmStridedBatchedEx"));
  });
  return api;
}

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != 0) PMX_THROW(Status::kCuda, "cuBLAS call ", call, " failed with status ", status);
}

cublasHandle_t cublas_handle(int device_id, cudaStream_t stream) {
  static std::mutex mu;
  static auto* handles = new std::map<std::pair<int, cudaStream_t>, cublasHandle_t>();  // never freed
  const CublasApi& api = cublas();
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(device_id, stream);
  auto it = handles->find(key);
  if (it != handles->end()) return it->second;
  set_device(device_id);
  // From the caching allocator, so that it shows in the device's memory statistics and an
  // out-of-memory error names the numbers; never freed, like the handle. Taken first: a failed
  // allocation then leaves nothing half made.
  const StorageHandle workspace = alloc(device_id, kWorkspaceBytes, stream);
  cublasHandle_t handle = nullptr;
  check_cublas(api.create(&handle), "cublasCreate_v2");
  check_cublas(api.set_stream(handle, stream), "cublasSetStream_v2");
  check_cublas(api.set_workspace(handle, workspace.dptr, kWorkspaceBytes),
               "cublasSetWorkspace_v2");
  handles->emplace(key, handle);
  return handle;
}

}  // namespace gpu
}  // namespace pymx
