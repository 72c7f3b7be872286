// Tracing imperative code into a Graph, replaying it, and its JSON form.
//
// Note [Tracing by running]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A trace is the imperative forward pass itself: ops run as usual, and invoke() also reports each
// one here. Arrays are identified by (chunk, byte offset, shape), so a value is known however many
// NDArray copies of it exist. An array read but not computed by the trace is either a graph input
// or a constant captured by reference (a parameter captured this way sees later in-place updates).
// An array that shares a traced value's memory under another offset or shape is a view made
// without an op (reshape_view, slice_view); it becomes a view node, so replay aliases memory
// exactly as the imperative code did. Every traced array is held until the trace ends, so chunk
// addresses cannot be reused while the identity map refers to them.
#include "pymx/graph.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "autograd.h"
#include "captured_graphs.h"
#include "config.h"
#include "graph_fusion.h"
#include "invoke.h"

namespace pymx {
namespace graph {

struct Graph::ConstantCache {
  std::mutex mu;
  std::map<std::pair<int, int>, std::vector<NDArray>> by_device;  // (type, id) -> constants
};

namespace {

struct TracedValue {
  NDArray array;  // held: see Note [Tracing by running]
  ValueRef ref;
};

struct TraceState {
  size_t num_inputs = 0;
  Device trace_device;
  std::vector<GraphNode> nodes;
  std::vector<NDArray> constants;
  // Values by chunk; the newest last (an in-place write shadows the older value).
  std::unordered_map<const Chunk*, std::vector<TracedValue>> values;
};

thread_local TraceState* t_trace = nullptr;

void remember(TraceState& trace, const NDArray& array, ValueRef ref) {
  trace.values[array.chunk().get()].push_back(TracedValue{array, ref});
}

// The reference for `array`, adding a view node or a constant when it is not a traced value.
ValueRef resolve(TraceState& trace, const NDArray& array) {
  auto found = trace.values.find(array.chunk().get());
  if (found != trace.values.end()) {
    const std::vector<TracedValue>& candidates = found->second;
    for (auto it = candidates.rbegin(); it != candidates.rend(); ++it)
      if (it->array.same_array(array)) return it->ref;
    // A view of a traced value: find the newest one whose memory contains it.
    const size_t begin = array.byte_offset(), end = begin + array.nbytes();
    for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
      const NDArray& base = it->array;
      if (base.dtype() != array.dtype() || begin < base.byte_offset() ||
          end > base.byte_offset() + base.nbytes())
        continue;
      GraphNode view;
      view.inputs = {it->ref};
      view.device = array.device();
      view.view_offset =
          static_cast<int64_t>((begin - base.byte_offset()) / dtype_size(array.dtype()));
      view.view_shape = array.shape();
      trace.nodes.push_back(std::move(view));
      const ValueRef ref{ValueRef::Kind::kNode, static_cast<uint32_t>(trace.nodes.size() - 1), 0};
      remember(trace, array, ref);
      return ref;
    }
  }
  // A constant. Keep the autograd mark of a variable (a captured parameter still gets its
  // gradient); drop any recorded history, which belongs to one forward pass only.
  NDArray constant = array;
  const auto& node = constant.autograd_entry().node;
  if (node && !node->is_variable()) constant.autograd_entry() = AutogradEntry();
  trace.constants.push_back(constant);
  const ValueRef ref{ValueRef::Kind::kConstant, static_cast<uint32_t>(trace.constants.size() - 1), 0};
  remember(trace, array, ref);
  return ref;
}

NDArray view_of(const NDArray& base, int64_t offset, const Shape& shape) {
  const int64_t n = shape_size(shape);
  PMX_CHECK(offset >= 0 && offset + n <= base.size(), "graph view of ", n,
            " elements at offset ", offset, " does not fit in an input of shape ",
            shape_str(base.shape()));
  return base.reshape_view({base.size()}).slice_view(offset, offset + n).reshape_view(shape);
}

}  // namespace

bool is_tracing() { return t_trace != nullptr; }

void trace_op(const OpDef& op, const Attrs& attrs, const std::vector<NDArray>& inputs,
              const std::vector<NDArray>& outputs) {
  TraceState& trace = *t_trace;
  GraphNode node;
  node.op = &op;
  node.attrs = attrs;
  node.num_outputs = static_cast<int>(outputs.size());
  node.device = outputs.empty() ? Device::cpu() : outputs[0].device();
  node.inputs.reserve(inputs.size());
  for (const NDArray& input : inputs) node.inputs.push_back(resolve(trace, input));
  trace.nodes.push_back(std::move(node));
  const auto index = static_cast<uint32_t>(trace.nodes.size() - 1);
  for (size_t i = 0; i < outputs.size(); ++i)
    remember(trace, outputs[i], ValueRef{ValueRef::Kind::kNode, index, static_cast<uint32_t>(i)});
}

void begin_trace(const std::vector<NDArray>& inputs) {
  PMX_CHECK(t_trace == nullptr, "begin_trace: this thread is already tracing");
  auto trace = std::make_unique<TraceState>();
  trace->num_inputs = inputs.size();
  trace->trace_device = inputs.empty() ? Device::cpu() : inputs[0].device();
  for (size_t i = 0; i < inputs.size(); ++i) {
    PMX_CHECK(!inputs[i].is_none(), "begin_trace: input ", i, " is a none array");
    remember(*trace, inputs[i], ValueRef{ValueRef::Kind::kInput, static_cast<uint32_t>(i), 0});
  }
  t_trace = trace.release();
}

void abort_trace() {
  delete t_trace;
  t_trace = nullptr;
}

std::shared_ptr<Graph> end_trace(const std::vector<NDArray>& outputs) {
  PMX_CHECK(t_trace != nullptr, "end_trace: this thread is not tracing");
  std::unique_ptr<TraceState> trace(t_trace);
  t_trace = nullptr;
  auto graph = std::make_shared<Graph>();
  for (size_t i = 0; i < outputs.size(); ++i) {
    PMX_CHECK(!outputs[i].is_none(), "end_trace: output ", i, " is a none array");
    graph->outputs_.push_back(resolve(*trace, outputs[i]));
  }
  graph->num_inputs_ = trace->num_inputs;
  graph->trace_device_ = trace->trace_device;
  graph->nodes_ = std::move(trace->nodes);
  graph->constants_ = std::move(trace->constants);
  graph->constant_cache_ = std::make_shared<Graph::ConstantCache>();
  graph->buffer_pools_ = std::make_shared<Graph::BufferPools>();
  graph->plan();
  return graph;
}

NDArray Graph::constant_on(size_t index, Device device) const {
  const NDArray& constant = constants_[index];
  if (constant.device() == device || constant.device() != trace_device_) return constant;
  std::lock_guard<std::mutex> lock(constant_cache_->mu);
  std::vector<NDArray>& copies =
      constant_cache_->by_device[{static_cast<int>(device.type), device.id}];
  if (copies.empty()) copies.resize(constants_.size());
  if (copies[index].is_none()) copies[index] = constant.copy_to(device);
  return copies[index];
}

// Note [Freeing intermediates]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// run() drops its reference to each node output right after the last node that reads it, so the
// storage allocator can hand the memory to a later node of the same run (the engine frees a
// chunk only after its queued readers finish). While recording, the tape keeps what backward
// needs, so this changes nothing there. Which values die after which node depends only on the
// graph, so it is worked out once, when the graph is built.
void Graph::plan() {
  first_value_.resize(nodes_.size());
  num_values_ = 0;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    first_value_[n] = num_values_;
    num_values_ += static_cast<size_t>(nodes_[n].num_outputs);
  }
  // last_use[value]: the node after which it dies; an unread value dies after its own node.
  std::vector<size_t> last_use(num_values_);
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (int k = 0; k < nodes_[n].num_outputs; ++k) last_use[first_value_[n] + k] = n;
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (const ValueRef& ref : nodes_[n].inputs)
      if (ref.kind == ValueRef::Kind::kNode) last_use[value_index(ref)] = n;
  const size_t never = nodes_.size();
  for (const ValueRef& ref : outputs_)
    if (ref.kind == ValueRef::Kind::kNode) last_use[value_index(ref)] = never;
  dead_after_.assign(nodes_.size(), {});
  for (size_t v = 0; v < num_values_; ++v)
    if (last_use[v] != never) dead_after_[last_use[v]].push_back(v);
  written_inputs_.assign(num_inputs_, false);
  for (const GraphNode& node : nodes_) {
    if (node.op == nullptr) continue;
    node.op->for_each_mutated_input(static_cast<int>(node.inputs.size()), [&](int m) {
      const ValueRef& ref = node.inputs.at(m);
      if (ref.kind == ValueRef::Kind::kInput) written_inputs_[ref.index] = true;
    });
  }
  fused_blocks_ = std::make_shared<const std::vector<FusedBlock>>(
      find_fused_blocks(nodes_, outputs_, first_value_, num_values_));
}

// Note [Static allocation]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// With static_alloc, run() passes each op preallocated output buffers (invoke's `out`) from a
// pool that lives with the graph. A buffer is free when the pool holds the only reference to its
// chunk: no live value of this run, no returned output the caller still holds, no autograd tape
// entry. Only then is it handed out again, so reuse never changes a result; the engine orders the
// new write after every queued read of the old contents through the chunk's var. Buffers come
// back within a run when a value dies (inference: a later node of the same size reuses the
// memory) and between runs when the caller drops the outputs or backward frees the tape
// (training: the next step's forward reuses the activations). Shapes are inferred once per input
// signature (static_shape). A pool serves one run at a time; concurrent runs of one graph (data
// parallelism, one thread per device) take separate pools.
struct Graph::BufferPool {
  Device device;
  // CUDA graphs of this pool's bulk replays (GPU pools; Note [CUDA graphs for bulk replays]).
  std::shared_ptr<CapturedGraphs> captured_graphs;
  // The input shapes and dtypes that out_shapes/out_dtypes were inferred for.
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  std::vector<Shape> out_shapes;  // per value; valid where inferred[value]
  std::vector<DType> out_dtypes;
  std::vector<bool> inferred;
  std::vector<NDArray> buffers;  // every buffer of the pool, owned
  std::vector<size_t> free;      // indices into buffers that may be handed out now
  std::vector<bool> handed_out;  // per buffer: used in the current run
  // Per graph input: its chunk and offset at this pool's previous staging run. Compared, never
  // dereferenced: a new chunk at a reused address is read in place, which is always correct.
  std::vector<std::pair<const Chunk*, size_t>> previous_inputs;

  // Queued ops that will allocate a buffer hold it too; they do not count, since the engine
  // orders a new write after them. Read in this order, an op being released concurrently can
  // only make the buffer look busy, never free while the caller or a tape still holds it.
  bool is_free(size_t slot) const {
    const std::shared_ptr<Chunk>& chunk = buffers[slot].chunk();
    const int queued = chunk->held_by_queued_ops.load(std::memory_order_relaxed);
    return chunk.use_count() - queued == 1;
  }

  // Resets the per-run state for inputs of these shapes and dtypes.
  void begin_run(const std::vector<NDArray>& inputs, size_t num_values) {
    bool same_signature = input_shapes.size() == inputs.size();
    for (size_t i = 0; same_signature && i < inputs.size(); ++i)
      same_signature =
          input_shapes[i] == inputs[i].shape() && input_dtypes[i] == inputs[i].dtype();
    if (!same_signature) {
      input_shapes.clear();
      input_dtypes.clear();
      for (const NDArray& input : inputs) {
        input_shapes.push_back(input.shape());
        input_dtypes.push_back(input.dtype());
      }
      out_shapes.assign(num_values, Shape());
      out_dtypes.assign(num_values, DType::kFloat32);
      inferred.assign(num_values, false);
    }
    free.clear();
    for (size_t slot = 0; slot < buffers.size(); ++slot)
      if (is_free(slot)) free.push_back(slot);
    handed_out.assign(buffers.size(), false);
  }

  // A free buffer of this shape and dtype (a reshaped view when the pooled shape differs), or a
  // new one. Sets *slot to its index.
  NDArray take(const Shape& shape, DType dtype, size_t* slot) {
    const size_t bytes = static_cast<size_t>(shape_size(shape)) * dtype_size(dtype);
    for (size_t i = 0; i < free.size(); ++i) {
      const NDArray& buffer = buffers[free[i]];
      if (buffer.dtype() != dtype || buffer.nbytes() != bytes) continue;
      *slot = free[i];
      free[i] = free.back();
      free.pop_back();
      handed_out[*slot] = true;
      return buffer.shape() == shape ? buffer : buffer.reshape_view(shape);
    }
    *slot = buffers.size();
    buffers.emplace_back(shape, device, dtype, Allocation::kAtFirstUse);
    handed_out.push_back(true);
    return buffers.back();
  }

  // Drops buffers that sat free through a whole run: the caller released them (old outputs) and
  // this run did not need them, so keeping them would only hold memory.
  void end_run() {
    std::vector<NDArray> kept;
    kept.reserve(buffers.size());
    for (size_t slot = 0; slot < buffers.size(); ++slot)
      if (handed_out[slot] || !is_free(slot)) kept.push_back(std::move(buffers[slot]));
    buffers = std::move(kept);
  }
};

struct Graph::BufferPools {
  std::mutex mu;
  std::vector<std::unique_ptr<BufferPool>> idle;

  std::unique_ptr<BufferPool> acquire(Device device) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = idle.begin(); it != idle.end(); ++it) {
      if ((*it)->device != device) continue;
      std::unique_ptr<BufferPool> pool = std::move(*it);
      idle.erase(it);
      return pool;
    }
    auto pool = std::make_unique<BufferPool>();
    pool->device = device;
    // Not under the naive engine: its pushing threads share one stream per device, so a
    // capture would take in kernels that another thread launches meanwhile.
    if (device.is_gpu() && config().cuda_graphs && config().engine != "naive")
      pool->captured_graphs = std::make_shared<CapturedGraphs>();
    return pool;
  }

  void release(std::unique_ptr<BufferPool> pool) {
    std::lock_guard<std::mutex> lock(mu);
    idle.push_back(std::move(pool));
  }
};

namespace {

// Output shapes and dtypes of `node` for `args`, or false when the node cannot be inferred here
// (unknown op, wrong input count): invoke() then reports the problem in its own words.
bool infer_outputs(const GraphNode& node, const std::vector<NDArray>& args,
                   std::vector<Shape>* out_shapes, std::vector<DType>* out_dtypes) {
  if (!node.op->infer ||
      (node.op->num_inputs >= 0 && static_cast<size_t>(node.op->num_inputs) != args.size()))
    return false;
  std::vector<Shape> in_shapes;
  std::vector<DType> in_dtypes;
  for (const NDArray& arg : args) {
    in_shapes.push_back(arg.shape());
    in_dtypes.push_back(arg.dtype());
  }
  out_shapes->assign(node.num_outputs, Shape());
  out_dtypes->assign(node.num_outputs, DType::kFloat32);
  node.op->infer(node.attrs, in_shapes, in_dtypes, out_shapes, out_dtypes);
  return true;
}

}  // namespace

// True when every op node of the graph runs on `run_device` and has output shapes inferred in
// `pool` (from an earlier run with these input shapes): the run may then go in bulk.
bool Graph::all_inferred_on(const BufferPool& pool, Device run_device) const {
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const GraphNode& node = nodes_[n];
    if (node.op == nullptr) continue;
    if (node.device != trace_device_ && node.device != run_device) return false;
    if (node.num_outputs == 0 || !pool.inferred[first_value_[n]]) return false;
  }
  return true;
}

std::vector<NDArray> Graph::run(const std::vector<NDArray>& inputs) const {
  PMX_CHECK(inputs.size() == num_inputs_, "graph run: the graph takes ", num_inputs_,
            " inputs, got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    PMX_CHECK(!inputs[i].is_none(), "graph run: input ", i, " is a none array");
  const Device run_device = inputs.empty() ? trace_device_ : inputs[0].device();

  // Holds a pool for this run and gives it back however the run ends. A failed run leaves
  // nothing stale: begin_run rebuilds the free list from the buffers' reference counts.
  struct PoolLease {
    BufferPools* pools = nullptr;
    std::unique_ptr<BufferPool> pool;
    ~PoolLease() {
      if (pool) pools->release(std::move(pool));
    }
  };
  // Ops on pinned memory return plain host arrays (invoke), so there is nothing to pool there.
  PoolLease lease;
  if (static_alloc_ && run_device.type != DeviceType::kCPUPinned) {
    lease.pools = buffer_pools_.get();
    lease.pool = buffer_pools_->acquire(run_device);
    lease.pool->begin_run(inputs, num_values_);
  }
  BufferPool* const pool = lease.pool.get();
  // See Note [Bulk execution] in invoke.h.
  std::unique_ptr<BulkInvoke> bulk;
  const bool recording = autograd::is_recording();
  // A bulk replay runs its kernels back to back inside one engine op: a kernel that completes
  // later (OpDef::completes_later) would have to be waited for there, blocking the worker.
  const bool completes_later = std::any_of(nodes_.begin(), nodes_.end(), [](const GraphNode& n) {
    return n.op != nullptr && n.op->completes_later;
  });
  if (pool && (recording ? config().bulk_train : config().bulk_inference) && !is_tracing() &&
      !completes_later && all_inferred_on(*pool, run_device))
    bulk = std::make_unique<BulkInvoke>(run_device, pool->captured_graphs);

  // A bulk replay that may be a CUDA graph reads copies of the inputs in static buffers, so its
  // key does not change when the caller passes new input arrays (Note [CUDA graphs for bulk
  // replays]). Not while recording (the gradient must reach the caller's arrays), nor for an
  // input a node writes, nor for the array of the previous run: parameters (and an input passed
  // again) keep their addresses, so the key is stable without copying them on every call.
  std::vector<NDArray> staged_inputs;
  if (bulk && pool->captured_graphs && !recording) {
    const OpDef& copy = op_registry::get("copy");
    pool->previous_inputs.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      size_t slot = 0;
      const std::pair<const Chunk*, size_t> identity(inputs[i].chunk().get(),
                                                     inputs[i].byte_offset());
      const bool passed_again = pool->previous_inputs[i] == identity;
      pool->previous_inputs[i] = identity;
      if (inputs[i].device() != run_device || written_inputs_[i] || passed_again) {
        staged_inputs.push_back(inputs[i]);
        continue;
      }
      staged_inputs.push_back(pool->take(inputs[i].shape(), inputs[i].dtype(), &slot));
      bulk->add_before_capture(copy, Attrs(), {inputs[i]}, {staged_inputs.back()});
    }
  }
  const std::vector<NDArray>& node_inputs = staged_inputs.empty() ? inputs : staged_inputs;

  std::vector<NDArray> values(num_values_);
  // slot_of[value]: the pool buffer whose memory the value uses (views share their base's), or
  // -1. Only kept with static allocation.
  std::vector<int64_t> slot_of(pool ? num_values_ : 0, -1);
  auto fetch = [&](const ValueRef& ref) -> NDArray {
    if (ref.kind == ValueRef::Kind::kInput) return node_inputs[ref.index];
    if (ref.kind == ValueRef::Kind::kConstant) return constant_on(ref.index, run_device);
    return values[value_index(ref)];
  };

  // See Note [Fused inference blocks] in graph_fusion.cc.
  const bool fuse = bulk && !recording && !autograd::is_training() &&
                    run_device.type == DeviceType::kCPU && !fused_blocks_->empty();
  std::vector<const FusedBlock*> block_at;  // per node: the block it starts
  std::vector<bool> fused_away;             // per node: computed by its block's fused call
  if (fuse) {
    block_at.assign(nodes_.size(), nullptr);
    fused_away.assign(nodes_.size(), false);
    for (const FusedBlock& block : *fused_blocks_) block_at[block.conv] = &block;
  }

  std::vector<NDArray> args, outs;
  std::vector<Shape> out_shapes;
  std::vector<DType> out_dtypes;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const GraphNode& node = nodes_[n];
    const size_t first = first_value_[n];
    if (fuse && fused_away[n]) {
      // Computed by its block's fused call.
    } else {
      for (const ValueRef& ref : node.inputs) args.push_back(fetch(ref));
      const FusedBlock* block = fuse ? block_at[n] : nullptr;
      if (block != nullptr && fused_block_applies(*block, args[0], args[1])) {
        if (block->has_batch_norm)
          for (size_t i = 1; i < nodes_[block->batch_norm].inputs.size(); ++i)
            args.push_back(fetch(nodes_[block->batch_norm].inputs[i]));
        const size_t value = first_value_[block->last()];
        size_t slot = 0;
        outs.push_back(pool->take(pool->out_shapes[value], pool->out_dtypes[value], &slot));
        slot_of[value] = static_cast<int64_t>(slot);
        bulk->add(*block->op, block->attrs, args, outs);
        values[value] = outs[0];
        fused_away[block->pool] = true;
        if (block->has_batch_norm) fused_away[block->batch_norm] = true;
      } else if (node.op == nullptr) {
        values[first] = view_of(args.at(0), node.view_offset, node.view_shape);
        if (pool && node.inputs[0].kind == ValueRef::Kind::kNode)
          slot_of[first] = slot_of[value_index(node.inputs[0])];
      } else {
        const Device device = node.device == trace_device_ ? run_device : node.device;
        const bool pooled = pool && device == run_device && node.num_outputs > 0;
        if (pooled && !pool->inferred[first] &&
            infer_outputs(node, args, &out_shapes, &out_dtypes)) {
          for (int k = 0; k < node.num_outputs; ++k) {
            pool->out_shapes[first + k] = out_shapes[k];
            pool->out_dtypes[first + k] = out_dtypes[k];
            pool->inferred[first + k] = true;
          }
        }
        if (pooled && pool->inferred[first]) {
          for (int k = 0; k < node.num_outputs; ++k) {
            size_t slot = 0;
            const size_t value = first + k;
            outs.push_back(pool->take(pool->out_shapes[value], pool->out_dtypes[value], &slot));
            slot_of[first + k] = static_cast<int64_t>(slot);
          }
        }
        if (bulk) {
          bulk->add(*node.op, node.attrs, args, outs);
          if (recording) {
            const ArrayPointers arg_pointers(args.size(), [&](size_t i) { return &args[i]; });
            autograd::record_op(*node.op, node.attrs, arg_pointers.data(),
                                static_cast<int>(args.size()), &outs, autograd::is_training());
          }
          for (int k = 0; k < node.num_outputs; ++k) values[first + k] = outs[k];
        } else {
          std::vector<NDArray> results = invoke(*node.op, args, node.attrs, device, outs);
          for (int k = 0; k < node.num_outputs; ++k) values[first + k] = std::move(results[k]);
        }
      }
    }
    // Every reference to a dying value must be gone before its buffer counts as free.
    args.clear();
    outs.clear();
    for (size_t v : dead_after_[n]) {
      values[v] = NDArray();
      if (pool && slot_of[v] >= 0 && pool->is_free(static_cast<size_t>(slot_of[v])))
        pool->free.push_back(static_cast<size_t>(slot_of[v]));
    }
  }
  if (bulk) bulk->push("graph");
  std::vector<NDArray> results;
  results.reserve(outputs_.size());
  for (const ValueRef& ref : outputs_)  // an input returned as is: the caller's, not a staged copy
    results.push_back(ref.kind == ValueRef::Kind::kInput ? inputs[ref.index] : fetch(ref));
  if (pool) pool->end_run();
  return results;
}

// ---------------------------------------------------------------------------------------------
// JSON.
// ---------------------------------------------------------------------------------------------
namespace {

void write_string(std::ostringstream& os, const std::string& s) {
  os << '"';
  for (char c : s) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          os << buf;
        } else {
          os << c;
        }
    }
  }
  os << '"';
}

void write_attrs(std::ostringstream& os, const std::vector<std::pair<std::string, std::string>>& items) {
  os << "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) os << ", ";
    write_string(os, items[i].first);
    os << ": ";
    write_string(os, items[i].second);
  }
  os << "}";
}

// A parsed JSON value: just what graph JSON needs (no true/false/null).
struct Json {
  enum class Type { kString, kNumber, kArray, kObject } type = Type::kNumber;
  std::string str;
  double num = 0;
  std::vector<Json> items;                          // array
  std::vector<std::pair<std::string, Json>> members;  // object

  const Json* member(const std::string& key) const {
    for (const auto& kv : members)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : text_(text) {}

  Json parse_document() {
    Json value = parse_value();
    skip_space();
    if (pos_ != text_.size()) fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    PMX_THROW(Status::kInvalidArg, "graph JSON: ", what, " at offset ", pos_);
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(c == ':' ? "expected ':'" : c == ',' ? "expected ','" : "unexpected character");
  }

  Json parse_value() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    const char c = text_[pos_];
    Json value;
    if (c == '"') {
      value.type = Json::Type::kString;
      value.str = parse_string();
    } else if (c == '[') {
      value.type = Json::Type::kArray;
      ++pos_;
      if (!consume(']')) {
        do value.items.push_back(parse_value());
        while (consume(','));
        expect(']');
      }
    } else if (c == '{') {
      value.type = Json::Type::kObject;
      ++pos_;
      if (!consume('}')) {
        do {
          skip_space();
          if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a key string");
          std::string key = parse_string();
          expect(':');
          value.members.emplace_back(std::move(key), parse_value());
        } while (consume(','));
        expect('}');
      }
    } else {
      size_t used = 0;
      try {
        value.num = std::stod(text_.substr(pos_, 32), &used);
      } catch (const std::exception&) {
        fail("expected a value");
      }
      pos_ += used;
    }
    return value;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      c = text_[pos_++];
      switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          const unsigned code = std::stoul(text_.substr(pos_, 4), nullptr, 16);
          pos_ += 4;
          if (code >= 0x80) fail("non-ASCII \\u escape");
          out += static_cast<char>(code);
          break;
        }
        default: out += c;  // \" \\ \/
      }
    }
    if (pos_ >= text_.size()) fail("unterminated string");
    ++pos_;  // closing quote
    return out;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

const Json& require(const Json& object, const std::string& key, Json::Type type, size_t node) {
  const Json* value = object.member(key);
  PMX_CHECK(value != nullptr && value->type == type, "graph JSON: node ", node,
            " lacks a valid \"", key, "\"");
  return *value;
}

constexpr const char* kViewOp = "_view";

}  // namespace

std::string Graph::to_json() const {
  // JSON node ids: data inputs, then constants, then one per graph node.
  const size_t first_node = num_inputs_ + constants_.size();
  auto json_id = [&](const ValueRef& ref) -> size_t {
    if (ref.kind == ValueRef::Kind::kInput) return ref.index;
    if (ref.kind == ValueRef::Kind::kConstant) return num_inputs_ + ref.index;
    return first_node + ref.index;
  };
  std::ostringstream os;
  os << "{\n  \"nodes\": [";
  bool first = true;
  auto begin_node = [&]() {
    os << (first ? "\n    " : ",\n    ");
    first = false;
  };
  for (size_t i = 0; i < num_inputs_; ++i) {
    begin_node();
    os << R"({"op": "null", "name": "data)" << i << R"(", "inputs": []})";
  }
  for (size_t i = 0; i < constants_.size(); ++i) {
    begin_node();
    os << R"({"op": "null", "name": "const)" << i << R"(", "attrs": )";
    write_attrs(os, {{"__shape__", shape_str(constants_[i].shape())},
                     {"__dtype__", dtype_name(constants_[i].dtype())}});
    os << R"(, "inputs": []})";
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const GraphNode& node = nodes_[n];
    const std::string op_name = node.op ? node.op->name : kViewOp;
    std::vector<std::pair<std::string, std::string>> attrs;
    if (node.op) {
      attrs = node.attrs.items();
      if (node.inputs.empty()) attrs.emplace_back("__device__", node.device.str());
    } else {
      attrs = {{"offset", std::to_string(node.view_offset)}, {"shape", shape_str(node.view_shape)}};
    }
    begin_node();
    os << R"({"op": )";
    write_string(os, op_name);
    os << R"(, "name": )";
    write_string(os, op_name + std::to_string(n));
    os << R"(, "attrs": )";
    write_attrs(os, attrs);
    os << R"(, "inputs": [)";
    for (size_t k = 0; k < node.inputs.size(); ++k)
      os << (k ? ", " : "") << "[" << json_id(node.inputs[k]) << ", " << node.inputs[k].output
         << ", 0]";
    os << "]}";
  }
  os << "\n  ],\n  \"arg_nodes\": [";
  for (size_t i = 0; i < first_node; ++i) os << (i ? ", " : "") << i;
  os << "],\n  \"heads\": [";
  for (size_t i = 0; i < outputs_.size(); ++i)
    os << (i ? ", " : "") << "[" << json_id(outputs_[i]) << ", " << outputs_[i].output << ", 0]";
  // Ops without inputs created their results on this device; run() moves them with the inputs.
  os << "],\n  \"attrs\": ";
  write_attrs(os, {{"trace_device", trace_device_.str()}});
  os << "\n}\n";
  return os.str();
}

std::shared_ptr<Graph> Graph::from_json(const std::string& json) {
  const Json root = JsonParser(json).parse_document();
  PMX_CHECK(root.type == Json::Type::kObject, "graph JSON: the document is not an object");
  const Json* nodes = root.member("nodes");
  const Json* heads = root.member("heads");
  PMX_CHECK(nodes && nodes->type == Json::Type::kArray && heads &&
                heads->type == Json::Type::kArray,
            "graph JSON: \"nodes\" and \"heads\" must be arrays");

  auto graph = std::make_shared<Graph>();
  graph->constant_cache_ = std::make_shared<Graph::ConstantCache>();
  if (const Json* attrs = root.member("attrs"))
    if (const Json* device = attrs->member("trace_device"))
      if (device->type == Json::Type::kString) graph->trace_device_ = parse_device(device->str);
  // Every "null" node is an input, in order; other nodes map to graph nodes.
  std::vector<ValueRef> ref_of(nodes->items.size());
  std::vector<int> outputs_of(nodes->items.size(), 0);
  auto parse_ref = [&](const Json& entry, size_t node) {
    PMX_CHECK(entry.type == Json::Type::kArray && entry.items.size() >= 2 &&
                  entry.items[0].type == Json::Type::kNumber &&
                  entry.items[1].type == Json::Type::kNumber,
              "graph JSON: node ", node, " has a malformed input entry");
    const double id = entry.items[0].num, out = entry.items[1].num;
    PMX_CHECK(id >= 0 && id < node && id == std::floor(id) && out >= 0 &&
                  out < outputs_of[static_cast<size_t>(id)] && out == std::floor(out),
              "graph JSON: node ", node, " refers to output ", out, " of node ", id,
              ", which is not an earlier node's output");
    ValueRef ref = ref_of[static_cast<size_t>(id)];
    ref.output = static_cast<uint32_t>(out);
    return ref;
  };

  for (size_t i = 0; i < nodes->items.size(); ++i) {
    const Json& item = nodes->items[i];
    PMX_CHECK(item.type == Json::Type::kObject, "graph JSON: node ", i, " is not an object");
    const std::string& op_name = require(item, "op", Json::Type::kString, i).str;
    if (op_name == "null") {
      ref_of[i] = ValueRef{ValueRef::Kind::kInput, static_cast<uint32_t>(graph->num_inputs_++), 0};
      outputs_of[i] = 1;
      continue;
    }
    GraphNode node;
    if (const Json* attrs = item.member("attrs")) {
      PMX_CHECK(attrs->type == Json::Type::kObject, "graph JSON: node ", i, " has bad \"attrs\"");
      for (const auto& kv : attrs->members) {
        PMX_CHECK(kv.second.type == Json::Type::kString, "graph JSON: node ", i, " attribute '",
                  kv.first, "' is not a string");
        if (kv.first == "__device__")
          node.device = parse_device(kv.second.str);
        else
          node.attrs.set(kv.first, kv.second.str);
      }
    }
    for (const Json& entry : require(item, "inputs", Json::Type::kArray, i).items)
      node.inputs.push_back(parse_ref(entry, i));
    if (op_name == kViewOp) {
      PMX_CHECK(node.inputs.size() == 1, "graph JSON: view node ", i, " needs one input");
      node.view_offset = node.attrs.get_int("offset");
      node.view_shape = node.attrs.get_shape("shape");
      node.attrs = Attrs();
    } else {
      node.op = &op_registry::get(op_name);
      node.num_outputs = node.op->num_outputs(node.attrs);
    }
    outputs_of[i] = node.num_outputs;
    graph->nodes_.push_back(std::move(node));
    ref_of[i] = ValueRef{ValueRef::Kind::kNode, static_cast<uint32_t>(graph->nodes_.size() - 1), 0};
  }
  for (const Json& head : heads->items) graph->outputs_.push_back(parse_ref(head, nodes->items.size()));
  graph->buffer_pools_ = std::make_shared<Graph::BufferPools>();
  graph->plan();
  return graph;
}

}  // namespace graph
}  // namespace pymx
