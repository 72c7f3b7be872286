// Where libpymx.so itself was loaded from: the loaders of the NVIDIA libraries (cublas_loader.cc,
// cudnn_loader.cc) look for the nvidia-* wheels next to it, in the same site-packages.
#pragma once

#include <string>

namespace pymx {
namespace gpu {

// The directory of the shared library holding this code ("" when it cannot be told).
std::string pymx_library_dir();

}  // namespace gpu
}  // namespace pymx
