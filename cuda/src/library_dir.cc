#include "library_dir.h"

#include <dlfcn.h>

namespace pymx {
namespace gpu {

std::string pymx_library_dir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&pymx_library_dir), &info) == 0 || info.dli_fname == nullptr)
    return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace gpu
}  // namespace pymx
