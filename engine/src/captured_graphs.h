// CUDA graphs of a bulk op's kernels, replayed instead of launching the kernels one by one. See
// Note [CUDA graphs for bulk replays] in captured_graphs.cc. Internal to engine/src.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace pymx {

// What a replay of a bulk op must match to reuse a capture: every operand's address, shape and
// dtype, the train flag, the worker's workspace (its generation) and its stream, in one flat
// list.
using CaptureKey = std::vector<int64_t>;

// The CUDA calls CapturedGraphs makes (gpu::begin_capture and the others in pymx/gpu.h); a test
// passes its own to check the caching without a GPU.
struct GraphCalls {
  std::function<void(void* stream)> begin_capture;
  std::function<void*(void* stream)> end_capture;
  std::function<void(void* graph, void* stream)> launch;
  std::function<void(void* graph)> destroy;
};
GraphCalls cuda_graph_calls();

// The captured graphs of one static buffer pool (one graph, one GPU). Thread-safe.
class CapturedGraphs {
 public:
  explicit CapturedGraphs(GraphCalls calls = cuda_graph_calls()) : calls_(std::move(calls)) {}
  ~CapturedGraphs();
  CapturedGraphs(const CapturedGraphs&) = delete;
  CapturedGraphs& operator=(const CapturedGraphs&) = delete;

  // Runs `launch_kernels` (which launches the bulk op's kernels on `stream`), or replays a graph
  // of it captured earlier under the same key. `workspace_generation` returns the worker's
  // workspace generation; a capture during which it changed is not kept.
  void run(const CaptureKey& key, void* stream, const std::function<void()>& launch_kernels,
           const std::function<uint64_t()>& workspace_generation);

 private:
  struct Entry {
    CaptureKey key;
    void* graph = nullptr;   // the executable graph once captured
    bool refused = false;    // the capture failed or was not replayable: never tried again
    bool capturing = false;  // a worker is capturing it now
    uint64_t last_use = 0;
  };
  // At most this many keys per pool (a caller alternating output buffers needs two).
  static constexpr size_t kMaxEntries = 4;

  Entry* find(const CaptureKey& key);  // under mu_; marks the entry used

  const GraphCalls calls_;
  std::mutex mu_;
  std::vector<Entry> entries_;  // guarded by mu_
  uint64_t clock_ = 0;          // guarded by mu_
};

// Process-wide counts, for tests and benchmarks.
struct CaptureStats {
  uint64_t captured = 0;  // graphs captured and kept
  uint64_t replayed = 0;  // bulk ops run by replaying a graph
  uint64_t refused = 0;   // captures that failed or were not replayable
};
CaptureStats capture_stats();

}  // namespace pymx
