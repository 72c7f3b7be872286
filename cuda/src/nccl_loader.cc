// Loading libnccl.so.2 (from where: nvidia_library.h; the nvidia-nccl-cu13 wheel).
#include "nccl_loader.h"

#include <dlfcn.h>

#include <string>

#include "nvidia_library.h"
#include "pymx/base.h"

namespace pymx {
namespace gpu {
namespace {

constexpr const char* kNcclSoname = "libnccl.so.2";

// NCCL_VERSION_CODE is major * 1000 + minor * 100 + patch up to 2.8, and major * 10000 +
// minor * 100 + patch from 2.9 on (NCCL_VERSION in nccl.h).
std::string version_text(int code) {
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return str_cat(major, ".", minor, ".", code % 100);
}

void* open_nccl() {
  std::string tried;
  if (void* lib = open_nvidia_library(kNcclSoname, "nvidia/nccl/lib", &tried)) return lib;
  PMX_THROW(Status::kCuda, "cannot load NCCL (", kNcclSoname,
            "), which pymx needs for kvstore 'nccl'; install it with `pip install "
            "nvidia-nccl-cu13` or put it on LD_LIBRARY_PATH, or use kvstore 'device'. Tried:",
            tried);
}

NcclApi load_nccl() {
  void* lib = open_nccl();
  auto load = [lib](const char* name) {
    void* sym = dlsym(lib, name);
    if (sym == nullptr)
      PMX_THROW(Status::kCuda, "NCCL (", kNcclSoname, ") has no symbol ", name,
                "; pymx needs NCCL 2.3.4 or newer");
    return sym;
  };
  NcclApi api;
  api.get_version = reinterpret_cast<decltype(api.get_version)>(load("ncclGetVersion"));
  api.comm_init_all = reinterpret_cast<decltype(api.comm_init_all)>(load("ncclCommInitAll"));
  api.all_reduce = reinterpret_cast<decltype(api.all_reduce)>(load("ncclAllReduce"));
  api.group_start = reinterpret_cast<decltype(api.group_start)>(load("ncclGroupStart"));
  api.group_end = reinterpret_cast<decltype(api.group_end)>(load("ncclGroupEnd"));
  api.get_error_string =
      reinterpret_cast<decltype(api.get_error_string)>(load("ncclGetErrorString"));
  const ncclResult_t result = api.get_version(&api.version);
  if (result != ncclSuccess)
    PMX_THROW(Status::kCuda, "NCCL (", kNcclSoname, ") call ncclGetVersion failed with result ",
              static_cast<int>(result), " (", api.get_error_string(result), ")");
  return api;
}

}  // namespace

const NcclApi& nccl() {
  // A static whose initialiser throws is initialised again by the next call (C++11 [stmt.dcl]),
  // so a failed load is retried, and the initialisation is thread-safe.
  static const NcclApi api = load_nccl();
  return api;
}

void check_nccl(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return;
  const NcclApi& api = nccl();
  PMX_THROW(Status::kCuda, "NCCL ", version_text(api.version), " call ", call,
            " failed with result ", static_cast<int>(result), " (", api.get_error_string(result),
            ")");
}

}  // namespace gpu
}  // namespace pymx
