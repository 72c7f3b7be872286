// Capture and replay of CUDA graphs (see the declarations in pymx/gpu.h).
#include <cuda_runtime.h>

#include <vector>

#include "capture_state.h"
#include "cuda_check.h"
#include "pymx/gpu.h"

namespace pymx {
namespace gpu {
namespace {

thread_local bool t_capturing = false;

bool is_device_memory(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice;
}

// Whether every node of `graph` only touches device memory through its own parameters: kernels,
// memsets, empty nodes and copies between device buffers.
bool replayable(cudaGraph_t graph) {
  size_t count = 0;
  PMX_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  PMX_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    PMX_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeMemset ||
        type == cudaGraphNodeTypeEmpty)
      continue;
    if (type != cudaGraphNodeTypeMemcpy) return false;
    cudaMemcpy3DParms copy{};
    PMX_CUDA_CHECK(cudaGraphMemcpyNodeGetParams(node, &copy));
    if (copy.srcArray != nullptr || copy.dstArray != nullptr ||
        !is_device_memory(copy.srcPtr.ptr) || !is_device_memory(copy.dstPtr.ptr))
      return false;
  }
  return true;
}

}  // namespace

bool capturing_on_this_thread() { return t_capturing; }

void begin_capture(void* stream) {
  PMX_CUDA_CHECK(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream),
                                        cudaStreamCaptureModeThreadLocal));
  t_capturing = true;
}

void* end_capture(void* stream) {
  t_capturing = false;
  cudaGraph_t graph = nullptr;
  // A capture invalidated by an unsupported call still has to be ended; its error is dropped.
  if (cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph) != cudaSuccess) {
    (void)cudaGetLastError();
    if (graph != nullptr) PMX_CUDA_IGNORE(cudaGraphDestroy(graph));
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  bool ok = false;
  try {
    ok = replayable(graph);
  } catch (...) {
    PMX_CUDA_IGNORE(cudaGraphDestroy(graph));
    throw;
  }
  if (ok && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    exec = nullptr;
  }
  PMX_CUDA_IGNORE(cudaGraphDestroy(graph));
  return exec;
}

void launch_graph(void* graph, void* stream) {
  PMX_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph),
                                 static_cast<cudaStream_t>(stream)));
}

void destroy_graph(void* graph) {
  if (graph != nullptr) PMX_CUDA_IGNORE(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)));
}

}  // namespace gpu
}  // namespace pymx
