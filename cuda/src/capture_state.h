// Whether the calling thread is capturing a CUDA graph: set by gpu::begin_capture, cleared by
// gpu::end_capture (cuda_graph.cc). Captures use cudaStreamCaptureModeThreadLocal, so only the
// capturing thread's own calls can break a capture; the caching allocator asks this before
// touching CUDA (see its policy).
#pragma once

namespace pymx {
namespace gpu {

bool capturing_on_this_thread();

}  // namespace gpu
}  // namespace pymx
