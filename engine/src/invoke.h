// The allocation-lean entry to invoke() used by the C API (engine/src/c_api.cc): inputs and out=
// arrays by pointer, results appended to a caller-owned vector, so that a call from Python
// copies no NDArray and builds no temporary vectors.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "pymx/ndarray.h"
#include "pymx/op.h"

namespace pymx {

// The pointer lists handed to invoke_into: n pointers to arrays, pointer i = pointer_at(i),
// inline for the usual handful of operands (no allocation on the hot path), on the heap beyond.
// Not copyable: data() may point into the object itself.
class ArrayPointers {
 public:
  template <typename PointerAt>
  ArrayPointers(size_t n, PointerAt pointer_at) {
    if (n > kInline) {
      heap_.resize(n);
      data_ = heap_.data();
    }
    for (size_t i = 0; i < n; ++i) data_[i] = pointer_at(i);
  }
  ArrayPointers(const ArrayPointers&) = delete;
  ArrayPointers& operator=(const ArrayPointers&) = delete;
  const NDArray* const* data() const { return data_; }

 private:
  static constexpr size_t kInline = 8;
  const NDArray* inline_[kInline];
  std::vector<const NDArray*> heap_;
  const NDArray** data_ = inline_;
};

// Same contract as invoke() in pymx/op.h. `out` holds `num_out` pointers (0: none; a null
// entry: allocate that result). The results replace the contents of `*outputs`.
void invoke_into(const OpDef& op, const NDArray* const* inputs, int num_inputs,
                 const Attrs& attrs, Device device, const NDArray* const* out, int num_out,
                 std::vector<NDArray>* outputs);

// Note [Bulk execution]
// ~~~~~~~~~~~~~~~~~~~~~
// A hybridized graph replayed op by op pushes each op to the engine like an imperative call: per
// op the engine links vars, hands the op to a worker and, on a GPU, records and waits on events.
// On a GPU that is most of a batch-1 forward; on the CPU a few percent. When a replay writes into
// the graph's static buffers, Graph::run instead pushes the whole graph as one engine op (MXNet's
// bulk execution): it reads the graph's inputs and constants, writes every buffer the run uses,
// and runs the kernels in order on one worker and stream, so a buffer reused within the run
// needs no engine ordering. While autograd records, each node is still recorded on the tape, so
// backward is unchanged. Results are those of the op-by-op replay; an error in any kernel fails
// the whole op, so every output carries it. PYMX_EXEC_BULK_EXEC_INFERENCE=0 and
// PYMX_EXEC_BULK_EXEC_TRAIN=0 turn it off for unrecorded and recorded replays (MXNet's
// MXNET_EXEC_BULK_EXEC_INFERENCE / _TRAIN). While the profiler records, each kernel is also a
// span of its own inside the op's span.

class CapturedGraphs;

// Collects op calls whose outputs are already chosen (static buffers), then pushes them as one
// engine op on `device`. On a GPU, `graphs` (may be null) keeps CUDA graphs of the kernels for
// later pushes of the same calls (Note [CUDA graphs for bulk replays] in captured_graphs.cc).
// Not thread-safe; one per replay.
class BulkInvoke {
 public:
  explicit BulkInvoke(Device device, std::shared_ptr<CapturedGraphs> graphs = nullptr);
  ~BulkInvoke();
  BulkInvoke(const BulkInvoke&) = delete;
  BulkInvoke& operator=(const BulkInvoke&) = delete;

  // Adds a call of `op` reading `inputs` and writing `outputs` (shapes and dtypes as `op`
  // infers them; memory allocated now or when the kernel runs). All on `device`.
  void add(const OpDef& op, const Attrs& attrs, const std::vector<NDArray>& inputs,
           const std::vector<NDArray>& outputs);
  // The same for a call that runs first on every push and is never part of a CUDA graph (a copy
  // of a caller's input into a static buffer). Only before the first add().
  void add_before_capture(const OpDef& op, const Attrs& attrs, const std::vector<NDArray>& inputs,
                          const std::vector<NDArray>& outputs);
  // Pushes the calls added so far as one engine op named `name` (a string that outlives it).
  void push(const char* name);

 private:
  struct Calls;
  Device device_;
  std::shared_ptr<CapturedGraphs> graphs_;
  std::unique_ptr<Calls> calls_;
};

}  // namespace pymx
