#include "nvidia_library.h"

#include <dlfcn.h>

#include <vector>

#include "pymx/base.h"

namespace pymx {
namespace gpu {
namespace {

// The directory of the shared library holding this code ("" when it cannot be told).
std::string pymx_library_dir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&pymx_library_dir), &info) == 0 || info.dli_fname == nullptr)
    return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

void* open_nvidia_library(const std::string& soname, const std::string& wheel_dir,
                          std::string* tried) {
  std::vector<std::string> candidates = {soname};
  const std::string dir = pymx_library_dir();
  if (!dir.empty()) candidates.push_back(dir + "/../" + wheel_dir + "/" + soname);
  tried->clear();
  for (const std::string& path : candidates) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (lib != nullptr) return lib;
    const char* why = dlerror();
    *tried += str_cat("\n  ", path, ": ", why ? why : "not found");
  }
  return nullptr;
}

}  // namespace gpu
}  // namespace pymx
