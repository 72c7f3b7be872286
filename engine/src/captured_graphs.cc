// CUDA graphs for bulk replays. See captured_graphs.h.
#include "captured_graphs.h"

#include <atomic>
#include <exception>

#include "pymx/gpu.h"

namespace pymx {

// Note [CUDA graphs for bulk replays]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A bulk op (Note [Bulk execution] in invoke.h) on a GPU launches its kernels one by one; at
// batch 1 the launches, not the kernels, take the time. So the kernels are captured once into a
// CUDA graph and later runs launch the graph: one launch for the whole forward pass.
// A replay repeats the captured kernels with the captured arguments, so it is the same
// computation only when everything the kernels address is the same. The key holds every
// operand's address, shape and dtype, and the train flag; the attributes and the kernels come
// from the graph, which a pool belongs to. The one memory a kernel reaches that is not an
// operand is its worker's workspace: the key holds the workspace's generation (a number that
// changes whenever a workspace is reallocated, never reused), and a capture during which it
// changed is dropped. The key also holds the stream: cuBLAS and cuDNN handles, and the cuBLAS
// workspace, are made on a stream's first call, which must not fall inside a capture; with the
// stream in the key a stream has run the kernels once before they are captured on it. Operands
// are allocated before the capture starts, so nothing is allocated while capturing. A captured graph that holds anything other than kernels, memsets
// and device-to-device copies is refused (gpu::end_capture), as is every capture that fails
// (a kernel that synchronises, for example); a refused key runs its kernels directly from then
// on. A bulk op with a call that draws random numbers is never captured (its seed changes per
// call; dropout in predict mode draws none: OpDef::draws_random), nothing is captured while
// the profiler records (its spans are events between the kernels), and nothing under the naive
// engine (its pushing threads share a stream, so a capture would take in their kernels too).
// A key is captured the second time it is seen, so one-off shapes and first runs (which may
// tune cuDNN and grow the workspace) never pay for a capture. The graph's inputs are copied
// into static buffers first (outside the capture), so a caller that passes a fresh input array
// each call, as a serving loop does, still replays one graph.

namespace {

std::atomic<uint64_t> g_captured{0}, g_replayed{0}, g_refused{0};

}  // namespace

GraphCalls cuda_graph_calls() {
  return {gpu::begin_capture, gpu::end_capture, gpu::launch_graph, gpu::destroy_graph};
}

CaptureStats capture_stats() {
  return {g_captured.load(std::memory_order_relaxed), g_replayed.load(std::memory_order_relaxed),
          g_refused.load(std::memory_order_relaxed)};
}

CapturedGraphs::~CapturedGraphs() {
  for (Entry& entry : entries_) calls_.destroy(entry.graph);
}

CapturedGraphs::Entry* CapturedGraphs::find(const CaptureKey& key) {
  ++clock_;
  for (Entry& entry : entries_) {
    if (entry.key != key) continue;
    entry.last_use = clock_;
    return &entry;
  }
  return nullptr;
}

void CapturedGraphs::run(const CaptureKey& key, void* stream,
                         const std::function<void()>& launch_kernels,
                         const std::function<uint64_t()>& workspace_generation) {
  void* graph = nullptr;
  bool capture = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Entry* entry = find(key)) {
      graph = entry->graph;
      capture = graph == nullptr && !entry->refused && !entry->capturing;
      entry->capturing = entry->capturing || capture;
    } else {
      // First sight: remember the key, evicting the least recently used graph when full.
      if (entries_.size() == kMaxEntries) {
        auto oldest = entries_.begin();
        for (auto it = entries_.begin(); it != entries_.end(); ++it)
          if (!it->capturing && (oldest->capturing || it->last_use < oldest->last_use)) oldest = it;
        if (oldest->capturing) {
          launch_kernels();  // every slot is being captured right now: nothing to evict
          return;
        }
        calls_.destroy(oldest->graph);
        entries_.erase(oldest);
      }
      entries_.push_back(Entry{key, nullptr, false, false, clock_});
    }
  }
  if (graph != nullptr) {
    calls_.launch(graph, stream);
    g_replayed.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!capture) {
    launch_kernels();
    return;
  }

  const uint64_t generation = workspace_generation();
  void* captured = nullptr;
  bool began = true;
  try {
    calls_.begin_capture(stream);
  } catch (...) {
    began = false;  // this stream cannot capture: the key is refused below
  }
  if (began) {
    bool launched = true;
    try {
      launch_kernels();
    } catch (...) {
      launched = false;  // a call the capture does not support, or a real error: see below
    }
    try {
      captured = calls_.end_capture(stream);  // ends the capture in every case
    } catch (...) {
      captured = nullptr;
    }
    if (captured != nullptr && (!launched || workspace_generation() != generation)) {
      calls_.destroy(captured);
      captured = nullptr;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Entry& entry : entries_) {
      if (entry.key != key) continue;
      entry.capturing = false;
      entry.graph = captured;
      entry.refused = captured == nullptr;
    }
  }
  if (captured == nullptr) {
    g_refused.fetch_add(1, std::memory_order_relaxed);
    // Nothing ran while capturing: run the kernels directly (a real error is reported so).
    launch_kernels();
    return;
  }
  g_captured.fetch_add(1, std::memory_order_relaxed);
  calls_.launch(captured, stream);
}

}  // namespace pymx
