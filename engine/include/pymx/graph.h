// Tracing imperative calls into a graph and replaying it natively (HybridBlock.hybridize).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pymx/ndarray.h"
#include "pymx/op.h"

namespace pymx {
namespace graph {

// True while this thread is tracing. invoke() then reports each op through trace_op().
bool is_tracing();
void trace_op(const OpDef& op, const Attrs& attrs, const std::vector<NDArray>& inputs,
              const std::vector<NDArray>& outputs);

struct FusedBlock;  // engine/src/graph_fusion.h

// Where a node takes an input from.
struct ValueRef {
  enum class Kind : uint8_t { kInput, kNode, kConstant };
  Kind kind = Kind::kInput;
  uint32_t index = 0;   // graph input, node or constant number
  uint32_t output = 0;  // output of the node (kNode only)
};

// One step of a graph: an op call, or (op == nullptr) a view of its single input (no copy):
// `view_offset` elements into it, reshaped to `view_shape`.
struct GraphNode {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<ValueRef> inputs;
  int num_outputs = 1;
  Device device;  // where an op without inputs (zeros, random) creates its result
  int64_t view_offset = 0;
  Shape view_shape;
};

// A straight-line program of op calls recorded from imperative code. Immutable once built, so
// one graph may be run from several threads at once (one per device in data parallelism).
class Graph {
 public:
  // Calls invoke() for each node in order, freeing each intermediate after its last use. Honours
  // autograd recording like any imperative code, so backward through the results works. Results
  // go to the device of inputs[0]: ops without inputs and constants that were on the trace's
  // device follow it (constants are copied once per device and cached).
  // Throws Error(kInvalidArg) when the number of inputs differs from num_inputs().
  std::vector<NDArray> run(const std::vector<NDArray>& inputs) const;

  // MXNet-like symbol JSON: {"nodes": [{"op", "name", "attrs", "inputs"}], "arg_nodes",
  // "heads"}. Graph inputs are "null" nodes named data0, data1, ...; constants are "null" nodes
  // named const0, ... (their values are not stored). A graph loaded with from_json takes the
  // constants as extra inputs after the data inputs, in that order.
  std::string to_json() const;
  // Throws Error(kInvalidArg) naming the problem (bad JSON, unknown operator, bad reference).
  static std::shared_ptr<Graph> from_json(const std::string& json);

  // Static allocation (hybridize(static_alloc=True)): node results are written into buffers the
  // graph keeps between runs, one pool per device, so a steady stream of runs allocates nothing.
  // A buffer is reused only while nothing else holds it (not a returned output, not saved by the
  // autograd tape), so results are the same as without it. Set it before running the graph from
  // several threads.
  void set_static_alloc(bool on) { static_alloc_ = on; }
  bool static_alloc() const { return static_alloc_; }

  size_t num_inputs() const { return num_inputs_; }
  size_t num_outputs() const { return outputs_.size(); }
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  const std::vector<NDArray>& constants() const { return constants_; }

 private:
  friend std::shared_ptr<Graph> end_trace(const std::vector<NDArray>& outputs);
  struct BufferPool;
  struct BufferPools;
  NDArray constant_on(size_t index, Device device) const;
  bool all_inferred_on(const BufferPool& pool, Device run_device) const;
  // Fills first_value_, dead_after_, written_inputs_ and fused_blocks_ once the nodes and outputs
  // are final.
  void plan();
  size_t value_index(const ValueRef& ref) const { return first_value_[ref.index] + ref.output; }

  size_t num_inputs_ = 0;
  std::vector<GraphNode> nodes_;
  std::vector<ValueRef> outputs_;
  std::vector<NDArray> constants_;  // arrays read by the trace that it did not compute
  Device trace_device_;             // device of the first input at trace time
  struct ConstantCache;
  std::shared_ptr<ConstantCache> constant_cache_;
  // Node outputs are numbered consecutively: output k of node n is value first_value_[n] + k.
  std::vector<size_t> first_value_;
  size_t num_values_ = 0;
  // dead_after_[n]: the values whose last reader is node n (or, when nothing reads them, n
  // itself); graph outputs never die. See Note [Freeing intermediates].
  std::vector<std::vector<size_t>> dead_after_;
  // The blocks an inference replay on the CPU may fuse (Note [Fused inference blocks]).
  std::shared_ptr<const std::vector<FusedBlock>> fused_blocks_;
  std::vector<bool> written_inputs_;  // per graph input: a node writes it in place
  bool static_alloc_ = false;
  std::shared_ptr<BufferPools> buffer_pools_;
};

// Starts recording the ops this thread invokes into a graph whose inputs are `inputs`. Ops still
// run as usual. Throws Error(kInvalidArg) when this thread is already tracing.
void begin_trace(const std::vector<NDArray>& inputs);
// Ends the trace and returns the graph computing `outputs` (arrays seen during the trace; an
// array it did not compute becomes a constant).
std::shared_ptr<Graph> end_trace(const std::vector<NDArray>& outputs);
// Ends the trace without building a graph (the traced function raised). No-op when not tracing.
void abort_trace();

}  // namespace graph
}  // namespace pymx
