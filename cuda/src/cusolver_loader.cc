// Loading libcusolver.so.12 (cuSOLVER of CUDA 13; from where: nvidia_library.h), and one handle
// per stream.
#include "cusolver_loader.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "nvidia_library.h"
#include "pymx/base.h"
#include "pymx/gpu.h"

namespace pymx {
namespace gpu {
namespace {

constexpr const char* kCusolverSoname = "libcusolver.so.12";

void* open_cusolver() {
  std::string tried;
  if (void* lib = open_nvidia_library(kCusolverSoname, "nvidia/cu13/lib", &tried)) return lib;
  PMX_THROW(Status::kCuda, "cannot load cuSOLVER (", kCusolverSoname,
            "), which pymx needs for np.linalg on the GPU; install it with "
            "`pip install nvidia-cusolver` (or pymx[cuda]) or put it on LD_LIBRARY_PATH. Tried:",
            tried);
}

}  // namespace

const CusolverApi& cusolver() {
  static CusolverApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = open_cusolver();
    auto load = [lib](auto* target, const char* name) {
      void* sym = dlsym(lib, name);
      if (sym == nullptr)
        PMX_THROW(Status::kCuda, "cuSOLVER (", kCusolverSoname, ") has no symbol ", name,
                  "; pymx needs cuSOLVER 12 (CUDA 13) or newer");
      *target = reinterpret_cast<std::remove_pointer_t<decltype(target)>>(sym);
    };
    load(&api.create, "cusolverDnCreate");
    load(&api.set_stream, "cusolverDnSetStream");
    load(&api.getrf_buffer_size.s, "cusolverDnSgetrf_bufferSize");
    load(&api.getrf_buffer_size.d, "cusolverDnDgetrf_bufferSize");
    load(&api.getrf.s, "cusolverDnSgetrf");
    load(&api.getrf.d, "cusolverDnDgetrf");
    load(&api.getrs.s, "cusolverDnSgetrs");
    load(&api.getrs.d, "cusolverDnDgetrs");
    load(&api.potrf_buffer_size.s, "cusolverDnSpotrf_bufferSize");
    load(&api.potrf_buffer_size.d, "cusolverDnDpotrf_bufferSize");
    load(&api.potrf.s, "cusolverDnSpotrf");
    load(&api.potrf.d, "cusolverDnDpotrf");
    load(&api.syevd_buffer_size.s, "cusolverDnSsyevd_bufferSize");
    load(&api.syevd_buffer_size.d, "cusolverDnDsyevd_bufferSize");
    load(&api.syevd.s, "cusolverDnSsyevd");
    load(&api.syevd.d, "cusolverDnDsyevd");
    load(&api.geqrf_buffer_size.s, "cusolverDnSgeqrf_bufferSize");
    load(&api.geqrf_buffer_size.d, "cusolverDnDgeqrf_bufferSize");
    load(&api.geqrf.s, "cusolverDnSgeqrf");
    load(&api.geqrf.d, "cusolverDnDgeqrf");
    load(&api.orgqr_buffer_size.s, "cusolverDnSorgqr_bufferSize");
    load(&api.orgqr_buffer_size.d, "cusolverDnDorgqr_bufferSize");
    load(&api.orgqr.s, "cusolverDnSorgqr");
    load(&api.orgqr.d, "cusolverDnDorgqr");
    load(&api.create_gesvdj_info, "cusolverDnCreateGesvdjInfo");
    load(&api.destroy_gesvdj_info, "cusolverDnDestroyGesvdjInfo");
    load(&api.gesvdj_buffer_size.s, "cusolverDnSgesvdj_bufferSize");
    load(&api.gesvdj_buffer_size.d, "cusolverDnDgesvdj_bufferSize");
    load(&api.gesvdj.s, "cusolverDnSgesvdj");
    load(&api.gesvdj.d, "cusolverDnDgesvdj");
    load(&api.create_params, "cusolverDnCreateParams");
    load(&api.destroy_params, "cusolverDnDestroyParams");
    load(&api.xgeev_buffer_size, "cusolverDnXgeev_bufferSize");
    load(&api.xgeev, "cusolverDnXgeev");
  });
  return api;
}

void check_cusolver(cusolverStatus_t status, const char* call) {
  if (status != 0) PMX_THROW(Status::kCuda, "cuSOLVER call ", call, " failed with status ", status);
}

cusolverDnHandle_t cusolver_handle(int device_id, cudaStream_t stream) {
  static std::mutex mu;
  static auto* handles = new std::map<std::pair<int, cudaStream_t>, cusolverDnHandle_t>();  // never freed
  const CusolverApi& api = cusolver();
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(device_id, stream);
  auto it = handles->find(key);
  if (it != handles->end()) return it->second;
  set_device(device_id);
  cusolverDnHandle_t handle = nullptr;
  check_cusolver(api.create(&handle), "cusolverDnCreate");
  check_cusolver(api.set_stream(handle, stream), "cusolverDnSetStream");
  handles->emplace(key, handle);
  return handle;
}

}  // namespace gpu
}  // namespace pymx
