// Opening the NVIDIA libraries pymx loads at first use (cuBLAS, cuDNN, NCCL; never linked).
// Candidates, in order:
//   1. the soname: found when the library is already loaded (pymx's Python layer preloads the
//      wheels it knows, another framework may have loaded it), on LD_LIBRARY_PATH, or in the
//      system cache;
//   2. <dir of libpymx.so>/../<wheel_dir>/<soname>: the nvidia-* wheel installed next to pymx in
//      the same site-packages (pip install pymx[cuda]).
#pragma once

#include <string>

namespace pymx {
namespace gpu {

// dlopen()s the first candidate that loads (RTLD_NOW | RTLD_GLOBAL) and returns its handle; or
// returns nullptr, with `tried` listing each candidate and why it did not load (one per line).
void* open_nvidia_library(const std::string& soname, const std::string& wheel_dir,
                          std::string* tried);

}  // namespace gpu
}  // namespace pymx
