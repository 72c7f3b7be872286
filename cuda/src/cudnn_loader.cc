// Loading cuDNN 9: libcudnn.so.9 (from where: nvidia_library.h), then its sub-libraries.
//
// Note [Loading cuDNN's sub-libraries first]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// libcudnn.so.9 is a small shim: each entry point dlopens the sub-library that implements it
// (libcudnn_graph, libcudnn_ops, libcudnn_cnn, from the shim's own directory) on its first call,
// and when that fails the shim prints "Cannot load symbol" and aborts the process. A partial
// install must instead mean "no cuDNN", so the loader opens the three sub-libraries our entry
// points live in itself, before calling anything; when one is missing cuDNN is unavailable and
// the ops run their own kernels. Already loaded, they are what the shim then finds.
#include "cudnn_loader.h"

#include <dlfcn.h>
#include <limits.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "config.h"
#include "cuda_check.h"
#include "nvidia_library.h"
#include "pymx/gpu.h"
#include "pymx/base.h"

namespace pymx {
namespace gpu {
namespace {

constexpr const char* kCudnnSoname = "libcudnn.so.9";
constexpr const char* kSubLibraries[] = {"libcudnn_graph.so.9", "libcudnn_ops.so.9",
                                         "libcudnn_cnn.so.9"};

CudnnApi g_api;

void* open_shim() {
  std::string tried;  // cuDNN is optional: where it was looked for is not reported
  return open_nvidia_library(kCudnnSoname, "nvidia/cudnn/lib", &tried);
}

// Opens the sub-libraries from the shim's directory (Note [Loading cuDNN's sub-libraries
// first]); false when one cannot be loaded.
bool open_sub_libraries(void* shim) {
  char origin[PATH_MAX];
  if (dlinfo(shim, RTLD_DI_ORIGIN, origin) != 0) return false;
  for (const char* name : kSubLibraries) {
    if (dlopen((std::string(origin) + "/" + name).c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr)
      return false;
  }
  return true;
}

// Loads the library and every entry point into g_api; false, with nothing called, when any of it
// is missing or the library is not cuDNN 9.
bool load() {
  void* shim = open_shim();
  if (shim == nullptr || !open_sub_libraries(shim)) return false;
  bool complete = true;
#define PMX_CUDNN_LOAD(name)                                                  \
  g_api.name = reinterpret_cast<decltype(g_api.name)>(dlsym(shim, #name)); \
  complete = complete && g_api.name != nullptr;
  PMX_CUDNN_API(PMX_CUDNN_LOAD)
#undef PMX_CUDNN_LOAD
  // The legacy API we declare is that of cuDNN 9 (version = major * 10000 + minor * 100 + patch).
  return complete && g_api.cudnnGetVersion() / 10000 == 9;
}

}  // namespace

bool cudnn_available() {
  static const bool available = config().cudnn && load();
  return available;
}

const CudnnApi& cudnn() {
  PMX_ASSERT(cudnn_available(), "cudnn() called while cuDNN is not available");
  return g_api;
}

void check_cudnn(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS) {
    PMX_THROW(Status::kCuda, "cuDNN call ", call, " failed with status ", static_cast<int>(status),
              " (", g_api.cudnnGetErrorString(status), ")");
  }
}

cudnnHandle_t cudnn_handle(int device_id, cudaStream_t stream) {
  static std::mutex mu;
  // Null entries remember where cuDNN could not create a handle. Never freed. cuDNN forbids two
  // threads using one handle at once: the threaded engine's streams each belong to one worker
  // (which is restarted around every fork, so it is not part of the key), but the naive engine
  // runs each pushing thread's ops on that thread, all on one stream per device.
  using Key = std::tuple<int, cudaStream_t, std::thread::id>;
  static auto* handles = new std::map<Key, cudnnHandle_t>();
  static const bool per_thread = config().engine == "naive";
  const CudnnApi& api = cudnn();
  std::lock_guard<std::mutex> lock(mu);
  const Key key(device_id, stream, per_thread ? std::this_thread::get_id() : std::thread::id());
  auto it = handles->find(key);
  if (it != handles->end()) return it->second;
  set_device(device_id);
  cudnnHandle_t handle = nullptr;
  // cudnnCreate fails where this cuDNN cannot run (a driver too old for it, an unsupported GPU):
  // the ops fall back to their own kernels there rather than fail; so do they when the handle
  // cannot be bound to the stream.
  if (api.cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) {
    handle = nullptr;
  } else if (api.cudnnSetStream(handle, stream) != CUDNN_STATUS_SUCCESS) {
    api.cudnnDestroy(handle);
    handle = nullptr;
  }
  handles->emplace(key, handle);
  return handle;
}

}  // namespace gpu
}  // namespace pymx
