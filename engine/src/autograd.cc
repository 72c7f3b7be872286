// Native autograd: the tape recorded by invoke() and the backward pass.
//
// Note [The tape]
// ~~~~~~~~~~~~~~~
// There is no global tape. Each recorded op becomes a Node that the op's outputs point to through
// their AutogradEntry, and that holds its inputs (whose entries point to their producers). An op
// is recorded only when one of its inputs already has a node (a marked variable or a recorded
// result), so recording costs one branch per input for ops on plain arrays. Backward walks the
// nodes reachable from the heads, in reverse topological order, calling each OpDef::gradient.
// Gradient functions call invoke(), so gradients are pushed to the engine like any other op and
// run asynchronously on the heads' devices; backward itself never waits. A node recorded by
// record_function (autograd.Function) computes its gradient with Node::function_gradient, a
// callback into the user's code, which backward calls on its own thread like any gradient.
#include "autograd.h"

#include <array>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "pymx/graph.h"

namespace pymx {
namespace autograd {
namespace {

thread_local bool t_recording = false;
thread_local bool t_training = false;

const char* const kNotInGraph =
    "Cannot differentiate node because it is not in a computational graph. You need to set "
    "is_recording to true or use autograd.record() to save computational graphs for backward. If "
    "you want to differentiate the same graph twice, you need to pass retain_graph=True to "
    "backward.";

// Whether the array was computed by a recorded op whose graph backward has not freed (or is a
// marked variable). MXNet clears an array's autograd info when backward frees its graph, so such
// an array then counts as a constant: later recordings start afresh from it.
bool in_live_graph(const NDArray& array) {
  const std::shared_ptr<Node>& node = array.autograd_entry().node;
  return node && !node->freed;
}

// Sets the thread's recording and training flags for one scope (exception-safe).
class FlagScope {
 public:
  FlagScope(bool recording, bool training)
      : old_recording_(set_recording(recording)), old_training_(set_training(training)) {}
  ~FlagScope() {
    set_recording(old_recording_);
    set_training(old_training_);
  }
  FlagScope(const FlagScope&) = delete;
  FlagScope& operator=(const FlagScope&) = delete;

 private:
  bool old_recording_;
  bool old_training_;
};

// Note [Shared attributes]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Nodes of one op usually carry equal attributes (every `x + 1` of a loop, every batch_norm of a
// net), so a per-thread cache keeps the last attribute set recorded per op (a few dozen ops,
// direct-mapped by address) and equal sets share one copy instead of one allocation per node.
std::shared_ptr<const Attrs> shared_attrs(const OpDef& op, const Attrs& attrs) {
  struct Slot {
    const OpDef* op = nullptr;
    std::shared_ptr<const Attrs> attrs;
  };
  thread_local std::array<Slot, 64> cache;
  Slot& slot = cache[(reinterpret_cast<uintptr_t>(&op) / alignof(OpDef)) % cache.size()];
  if (slot.op != &op || slot.attrs->items() != attrs.items()) {
    slot.op = &op;
    slot.attrs = std::make_shared<const Attrs>(attrs);
  }
  return slot.attrs;
}

NDArray filled(const char* op_name, const Shape& shape, DType dtype, Device device) {
  Attrs attrs{{"shape", shape_str(shape)}, {"dtype", dtype_name(dtype)}};
  return invoke(op_registry::get(op_name), {}, attrs, device)[0];
}

NDArray filled_like(const NDArray& like, const char* op_name) {
  return filled(op_name, like.shape(), like.dtype(), like.device());
}

// Adds `grad` to the gradient arriving at an output of shape `shape`. A consumer that read the
// output through a view of another shape (same size) sends a gradient of the view's shape.
void accumulate(NDArray* slot, NDArray grad, const Shape& shape) {
  if (grad.shape() != shape) {
    PMX_CHECK(shape_size(grad.shape()) == shape_size(shape), "backward: a gradient of shape ",
              shape_str(grad.shape()), " reached an array of shape ", shape_str(shape));
    grad = grad.reshape_view(shape);
  }
  *slot = slot->is_none() ? grad : invoke("add", {*slot, grad})[0];
}

// Every node reachable from `roots`, each after all nodes it takes inputs from.
std::vector<std::shared_ptr<Node>> topological_order(const std::vector<std::shared_ptr<Node>>& roots) {
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_map<const Node*, bool> done;  // false: on the DFS stack, true: emitted
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack;  // node, next input to visit
  for (const auto& root : roots) {
    if (done.count(root.get())) continue;
    done[root.get()] = false;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->inputs.size()) {
        const std::shared_ptr<Node>& parent = node->inputs[next++].entry().node;
        if (parent && !done.count(parent.get())) {
          done[parent.get()] = false;
          stack.emplace_back(parent, 0);
        }
        continue;
      }
      done[node.get()] = true;
      order.push_back(std::move(node));
      stack.pop_back();
    }
  }
  return order;
}

// Note [Gradients written in place]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// backward() stores each variable's gradient in its .grad buffer. Computed into a new array and
// then copied, that costs a pass over every parameter's gradient per step, and a second buffer
// for each (LeafNetwork's first dense layer: 8.6 MB each). When the gradient reaches a variable
// through exactly one edge of the graph and its grad_req is 'write', the gradient is that one
// op's result, so the op may write it straight into the buffer: GradContext::grad_targets
// offers the buffer to the gradient function, and store_grad finds it already there. The engine
// orders the write after every earlier read of the buffer (the last step's optimizer update).
// Not offered when the buffer is itself an array the backward reads (an input or output a node
// saved, or a head gradient), since the write could land before those reads; nor by
// autograd.grad(), which leaves the .grad buffers alone, nor with create_graph. The convolution
// and dense gradients take the offer (nn::backward_skipping_data_grad, fc_gradient):
// LeafNetwork training, hybridized, interleaved runs, samples/s: batch 1 211 -> 257, batch 4
// 403 -> 428, batch 64 493 -> 499.

// The variables whose .grad buffer a gradient op may write in place (see the Note).
std::unordered_set<const Node*> written_in_place(const std::vector<std::shared_ptr<Node>>& order,
                                                 const std::vector<std::shared_ptr<Node>>& roots,
                                                 const std::vector<NDArray>& head_grads) {
  std::unordered_map<const Node*, int> edges;  // gradient edges into each variable
  for (const auto& node : order) {
    for (size_t k = 0; k < node->inputs.size(); ++k) {
      const std::shared_ptr<Node>& source = node->inputs[k].entry().node;
      if (source && source->is_variable()) ++edges[source.get()];
    }
  }
  for (const auto& root : roots)
    if (root->is_variable()) ++edges[root.get()];
  std::unordered_map<VarHandle, const Node*> candidates;  // by the buffer's var
  for (const auto& [variable, count] : edges)
    if (count == 1 && variable->grad_req == GradReq::kWrite)
      candidates[variable->grad.var()] = variable;
  // Drop the buffers that the backward reads.
  for (const auto& node : order) {
    if (candidates.empty()) break;
    for (size_t k = 0; k < node->inputs.size(); ++k) candidates.erase(node->inputs[k].var());
    for (size_t k = 0; k < node->outputs.size(); ++k) candidates.erase(node->outputs[k].var());
  }
  for (const NDArray& head_grad : head_grads) candidates.erase(head_grad.var());
  std::unordered_set<const Node*> result;
  for (const auto& [var, variable] : candidates) result.insert(variable);
  return result;
}

// The op of record_function's nodes: never invoked, only named in messages.
const OpDef& function_op() {
  static const OpDef op = [] {
    OpDef def;
    def.name = "autograd.Function";
    def.num_inputs = -1;
    return def;
  }();
  return op;
}

// A Function's backward returns one gradient per input, each shaped like its input and on its
// device (or none).
void check_function_gradients(const Node& node, const std::vector<NDArray>& igrads) {
  PMX_CHECK(igrads.size() == node.inputs.size(), "autograd.Function: backward returned ",
            igrads.size(), " gradients for ", node.inputs.size(), " inputs");
  for (size_t k = 0; k < igrads.size(); ++k) {
    if (igrads[k].is_none()) continue;
    const SavedArray& in = node.inputs[k];
    PMX_CHECK(igrads[k].shape() == in.shape(), "autograd.Function: backward returned a gradient ",
              "of shape ", shape_str(igrads[k].shape()), " for input ", k, " of shape ",
              shape_str(in.shape()));
    PMX_CHECK(igrads[k].device() == in.device(), "autograd.Function: backward returned a ",
              "gradient on ", igrads[k].device().str(), " for input ", k, " on ",
              in.device().str());
  }
}

// The total gradient reaching one variable node. It holds the node: once the tape is freed, a
// variable whose array the user already dropped is owned by nothing else, and storing its
// gradient through a bare pointer wrote into freed memory.
struct VariableGrad {
  std::shared_ptr<Node> variable;
  NDArray grad;
};

// Runs the backward pass and returns the total gradient reaching each variable node (keyed by
// node). Frees the tape unless retain_graph. `write_grads`: the gradients are for the variables'
// .grad buffers (backward(), not grad()).
std::unordered_map<const Node*, VariableGrad> run_backward(const std::vector<NDArray>& heads,
                                                const std::vector<NDArray>& head_grads,
                                                bool retain_graph, bool is_train,
                                                bool create_graph, bool write_grads) {
  PMX_CHECK(!heads.empty(), "backward: no heads given");
  PMX_CHECK(head_grads.empty() || head_grads.size() == heads.size(), "backward: got ",
            heads.size(), " heads but ", head_grads.size(), " head gradients");
  std::vector<std::shared_ptr<Node>> roots;
  for (const NDArray& head : heads) {
    const std::shared_ptr<Node>& node = head.autograd_entry().node;
    PMX_CHECK(node || is_float(head.dtype()), "Cannot differentiate an array of dtype ",
              dtype_name(head.dtype()), ": gradients flow through floating-point values only, "
              "so ops with integer or boolean results are not recorded (cast the variables to a "
              "floating-point dtype before recording)");
    PMX_CHECK(node && !node->freed, kNotInGraph);
    roots.push_back(node);
  }

  FlagScope flags(/*recording=*/create_graph, /*training=*/is_train);
  const std::vector<std::shared_ptr<Node>> order = topological_order(roots);
  const std::unordered_set<const Node*> in_place =
      write_grads && !create_graph ? written_in_place(order, roots, head_grads)
                                   : std::unordered_set<const Node*>();
  // Gradients arriving at each output of each node, summed.
  std::unordered_map<const Node*, std::vector<NDArray>> out_grads;
  // Sends `grad` to output `index` of `node`.
  auto send = [&out_grads](const Node& node, uint32_t index, const NDArray& grad) {
    PMX_CHECK(!node.freed, kNotInGraph);
    std::vector<NDArray>& slots = out_grads[&node];
    if (slots.empty()) slots.resize(node.is_variable() ? 1 : node.outputs.size());
    PMX_ASSERT(index < slots.size(), "autograd entry index ", index, " of a node with ",
               slots.size(), " outputs");
    accumulate(&slots[index], grad,
               node.is_variable() ? node.grad.shape() : node.outputs[index].shape());
  };

  for (size_t i = 0; i < heads.size(); ++i) {
    const NDArray& head = heads[i];
    NDArray head_grad = head_grads.empty() ? NDArray() : head_grads[i];
    if (head_grad.is_none()) {
      head_grad = filled_like(head, "ones");
    } else {
      PMX_CHECK(head_grad.shape() == head.shape(), "backward: head gradient ", i, " has shape ",
                shape_str(head_grad.shape()), " but head ", i, " has shape ",
                shape_str(head.shape()));
      PMX_CHECK(head_grad.device() == head.device(), "backward: head gradient ", i, " is on ",
                head_grad.device().str(), " but head ", i, " is on ", head.device().str());
    }
    send(*roots[i], head.autograd_entry().index, head_grad);
  }

  std::unordered_map<const Node*, VariableGrad> variable_grads;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node& node = **it;
    auto found = out_grads.find(&node);
    if (found == out_grads.end()) continue;  // no gradient flows here (e.g. an integer input)
    std::vector<NDArray> ograds = std::move(found->second);
    out_grads.erase(found);
    if (node.is_variable()) {
      variable_grads[&node] = VariableGrad{*it, ograds[0]};
      continue;
    }
    PMX_CHECK(node.op->gradient || node.function_gradient, "operator '", node.op->name,
              "' is not differentiable, but a gradient was requested through it");
    for (size_t k = 0; k < ograds.size(); ++k) {
      const SavedArray& out = node.outputs[k];
      if (ograds[k].is_none()) ograds[k] = filled("zeros", out.shape(), out.dtype(), out.device());
    }
    if (node.function_gradient) {
      set_training(node.is_train);
      const std::vector<NDArray> igrads = node.function_gradient(ograds);
      set_training(is_train);
      check_function_gradients(node, igrads);
      for (size_t k = 0; k < igrads.size(); ++k) {
        const AutogradEntry& entry = node.inputs[k].entry();
        if (entry.node && !igrads[k].is_none()) send(*entry.node, entry.index, igrads[k]);
      }
      continue;
    }

    // The gradient ops run in the mode the op ran in (batch_norm recorded in predict mode
    // differentiates through its running statistics).
    set_training(node.is_train);
    std::vector<NDArray> inputs, outputs, grad_targets;
    std::vector<Shape> input_shapes, output_shapes;
    std::vector<DType> input_dtypes, output_dtypes;
    for (const SavedArray& in : node.inputs) {
      inputs.push_back(in.for_gradient());
      input_shapes.push_back(in.shape());
      input_dtypes.push_back(in.dtype());
      // A consumer may read a variable through a view of another shape: no target then.
      const Node* source = in.entry().node.get();
      const bool target = source && in_place.count(source) &&
                          source->grad.shape() == in.shape() && source->grad.dtype() == in.dtype();
      grad_targets.push_back(target ? source->grad : NDArray());
    }
    for (uint32_t k = 0; k < node.outputs.size(); ++k) {
      const SavedArray& out = node.outputs[k];
      outputs.push_back(out.for_gradient());
      // With create_graph a gradient reading an output (exp's reads y) must differentiate
      // through it: give it back its entry for the duration of this gradient.
      if (create_graph && !outputs.back().is_none())
        outputs.back().autograd_entry() = AutogradEntry{*it, k};
      output_shapes.push_back(out.shape());
      output_dtypes.push_back(out.dtype());
    }
    GradContext ctx{*node.op,     *node.attrs,   inputs,        outputs,      ograds,
                    node.is_train, input_shapes, input_dtypes, output_shapes, output_dtypes,
                    grad_targets};
    const std::vector<NDArray> igrads = node.op->gradient(ctx);
    set_training(is_train);
    PMX_ASSERT(igrads.size() == node.inputs.size(), "gradient of '", node.op->name, "' returned ",
               igrads.size(), " arrays for ", node.inputs.size(), " inputs");
    for (size_t k = 0; k < igrads.size(); ++k) {
      const AutogradEntry& entry = node.inputs[k].entry();
      if (!entry.node || igrads[k].is_none()) continue;
      PMX_ASSERT(igrads[k].shape() == node.inputs[k].shape(), "gradient of '", node.op->name,
                 "' for input ", k, " has shape ", shape_str(igrads[k].shape()),
                 " but the input has shape ", shape_str(node.inputs[k].shape()));
      send(*entry.node, entry.index, igrads[k]);
    }
  }

  if (!retain_graph) {
    for (const auto& node : order) {
      if (node->is_variable()) continue;
      node->inputs.clear();
      node->outputs.clear();
      node->function_gradient = nullptr;
      node->freed = true;
    }
  }
  return variable_grads;
}

// Writes `grad` into a variable's buffer according to its grad_req, marking it fresh.
void store_grad(Node& variable, const NDArray& grad) {
  NDArray buffer = variable.grad;
  switch (variable.grad_req) {
    case GradReq::kNull:
      return;
    case GradReq::kWrite:
      // A no-op when the gradient op wrote the buffer itself (Note [Gradients written in place]).
      grad.copy_to(buffer);
      break;
    case GradReq::kAdd:
      invoke(op_registry::get("add"), {buffer, grad}, {}, buffer.device(), {buffer});
      break;
  }
  variable.fresh_grad = true;
}

}  // namespace

void SavedArray::save(const NDArray& array, bool keep_value, bool keep_entry) {
  keep_entry = keep_entry && in_live_graph(array);
  dtype_ = array.dtype();
  device_ = array.device();
  if (keep_value) {
    value_ = array;
    // Moved out, so that the node holds one reference to the parent.
    if (keep_entry) entry_ = std::move(value_.autograd_entry());
    else value_.autograd_entry().node.reset();
  } else {
    shape_ = array.shape();
    if (keep_entry) entry_ = array.autograd_entry();
  }
}

NDArray SavedArray::for_gradient() const {
  if (!has_value()) return NDArray();
  NDArray array = value_;
  array.autograd_entry() = entry_;
  return array;
}

namespace {
bool is_kept(const std::optional<std::vector<int>>& kept, size_t i) {
  if (!kept) return true;
  for (int k : *kept)
    if (static_cast<size_t>(k) == i) return true;
  return false;
}
}  // namespace

template <typename Get>
void NodeArrays::fill(Get get, size_t n, const std::optional<std::vector<int>>& kept,
                      bool keep_entries) {
  PMX_ASSERT(empty(), "NodeArrays::assign on a filled node");
  if (n > kInline) heap_.resize(n);
  size_ = n;
  for (size_t i = 0; i < n; ++i) data()[i].save(get(i), is_kept(kept, i), keep_entries);
}

void NodeArrays::assign(const NDArray* const* arrays, size_t n,
                        const std::optional<std::vector<int>>& kept, bool keep_entries) {
  fill([arrays](size_t i) -> const NDArray& { return *arrays[i]; }, n, kept, keep_entries);
}

void NodeArrays::assign(const std::vector<NDArray>& arrays,
                        const std::optional<std::vector<int>>& kept, bool keep_entries) {
  fill([&arrays](size_t i) -> const NDArray& { return arrays[i]; }, arrays.size(), kept,
       keep_entries);
}

void NodeArrays::clear() {
  for (SavedArray& saved : inline_) saved = SavedArray();
  heap_.clear();
  size_ = 0;
}

// Note [Iterative teardown]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Destroying the last array of a long chain (an RNN unrolled over thousands of steps) would
// destroy its node, whose inputs destroy their nodes, ... recursively, and overflow the stack.
// Instead a dying node hands the parents it solely owns to a thread-local list, which the
// outermost destructor drains in a loop.
Node::~Node() {
  struct Teardown {
    std::vector<std::shared_ptr<Node>> pending;
    bool draining = false;
  };
  thread_local Teardown t;  // one thread-local lookup per node
  for (SavedArray& input : inputs) {
    std::shared_ptr<Node>& parent = input.entry().node;
    if (parent && parent.use_count() == 1) t.pending.push_back(std::move(parent));
  }
  if (t.draining) return;
  t.draining = true;
  while (!t.pending.empty()) {
    std::shared_ptr<Node> last = std::move(t.pending.back());
    t.pending.pop_back();
    last.reset();  // may append to `pending`
  }
  t.draining = false;
}

bool is_recording() { return t_recording; }
bool set_recording(bool on) { return std::exchange(t_recording, on); }
bool is_training() { return t_training; }
bool set_training(bool on) { return std::exchange(t_training, on); }

void mark_variables(const std::vector<NDArray*>& variables, const std::vector<NDArray>& grads,
                    const std::vector<GradReq>& reqs) {
  PMX_CHECK(variables.size() == grads.size() && variables.size() == reqs.size(),
            "mark_variables: got ", variables.size(), " variables, ", grads.size(),
            " gradients and ", reqs.size(), " grad_reqs");
  for (size_t i = 0; i < variables.size(); ++i) {
    NDArray& var = *variables[i];
    const NDArray& grad = grads[i];
    PMX_CHECK(!var.is_none() && !grad.is_none(), "mark_variables: variable ", i,
              " or its gradient is a none array");
    PMX_CHECK(grad.shape() == var.shape(), "mark_variables: variable ", i, " has shape ",
              shape_str(var.shape()), " but its gradient has shape ", shape_str(grad.shape()));
    PMX_CHECK(grad.device() == var.device(), "mark_variables: variable ", i, " is on ",
              var.device().str(), " but its gradient is on ", grad.device().str());
    auto node = std::make_shared<Node>();
    node->grad = grad;
    node->grad_req = reqs[i];
    var.autograd_entry() = AutogradEntry{std::move(node), 0};
  }
}

NDArray get_grad(const NDArray& variable) {
  const std::shared_ptr<Node>& node = variable.autograd_entry().node;
  if (!node || !node->is_variable() || node->grad_req == GradReq::kNull) return NDArray();
  return node->grad;
}

bool fresh_grad(const NDArray& variable) {
  const std::shared_ptr<Node>& node = variable.autograd_entry().node;
  return node && node->is_variable() && node->fresh_grad;
}

void set_fresh_grad(const NDArray& variable, bool fresh) {
  const std::shared_ptr<Node>& node = variable.autograd_entry().node;
  PMX_CHECK(node && node->is_variable(),
            "NDArray has not been marked as a variable and does not have gradient state "
            "(call attach_grad first)");
  node->fresh_grad = fresh;
}

namespace {

// Whether record_op records an op with these operands.
bool is_recorded(const NDArray* const* inputs, int num_inputs,
                 const std::vector<NDArray>& outputs) {
  bool needs_grad = false;
  for (int i = 0; i < num_inputs; ++i) needs_grad |= in_live_graph(*inputs[i]);
  if (!needs_grad) return false;
  // Gradients flow through floating-point values only: comparisons, argmax and the like end the
  // path (MXNet gives them zero gradients; not recording them is the same and cheaper).
  bool any_float_output = false;
  for (const NDArray& out : outputs) any_float_output |= is_float(out.dtype());
  return any_float_output;
}

}  // namespace

void check_recorded_outputs(const OpDef& op, const NDArray* const* inputs, int num_inputs,
                            const std::vector<NDArray>& outputs) {
  if (!t_recording || !is_recorded(inputs, num_inputs, outputs)) return;
  for (size_t i = 0; i < outputs.size(); ++i) {
    PMX_CHECK(!in_live_graph(outputs[i]), "operator '", op.name, "' writes into output ", i,
              ", an array already in the recorded graph. Assigning "
              "to NDArrays that are already in a computational graph will cause undefined "
              "behavior when evaluating gradients. Please call backward first to clear the graph "
              "or do this outside of a record section. Also note that you cannot use inplace "
              "operations like +=, *=, relu(x, out=x), y[idx]=x, etc inside a record section.");
  }
}

void record_op(const OpDef& op, const Attrs& attrs, const NDArray* const* inputs,
               int num_inputs, std::vector<NDArray>* outputs, bool is_train) {
  if (!is_recorded(inputs, num_inputs, *outputs)) return;

  auto node = std::make_shared<Node>();
  node->op = &op;
  node->attrs = shared_attrs(op, attrs);
  node->is_train = is_train;
  node->inputs.assign(inputs, num_inputs, op.grad_uses_inputs, /*keep_entries=*/true);
  // The node keeps its outputs without their entries (which would point back to itself).
  node->outputs.assign(*outputs, op.grad_uses_outputs, /*keep_entries=*/false);
  const uint32_t last = static_cast<uint32_t>(outputs->size() - 1);
  for (uint32_t i = 0; i < last; ++i) (*outputs)[i].autograd_entry() = AutogradEntry{node, i};
  (*outputs)[last].autograd_entry() = AutogradEntry{std::move(node), last};
}

bool record_function(const std::vector<NDArray>& inputs, std::vector<NDArray>* outputs,
                     FunctionGradient gradient) {
  PMX_CHECK(!graph::is_tracing(), "autograd.Function cannot run inside a hybridized block: the "
            "traced graph would replay its forward ops but not call its backward (call it from "
            "a Block that is not hybridized)");
  PMX_CHECK(gradient, "record_function: no gradient function given");
  PMX_CHECK(!outputs->empty(), "autograd.Function: forward returned no outputs");
  if (!t_recording) return false;
  bool needs_grad = false;
  for (const NDArray& in : inputs) needs_grad |= in_live_graph(in);
  bool any_float_output = false;
  for (const NDArray& out : *outputs) any_float_output |= is_float(out.dtype());
  if (!needs_grad || !any_float_output) return false;

  auto node = std::make_shared<Node>();
  node->op = &function_op();
  node->is_train = t_training;
  // The user's backward reads what it saved itself: the node keeps no values.
  const std::optional<std::vector<int>> none_kept = std::vector<int>();
  node->inputs.assign(inputs, none_kept, /*keep_entries=*/true);
  node->outputs.assign(*outputs, none_kept, /*keep_entries=*/false);
  node->function_gradient = std::move(gradient);
  for (uint32_t i = 0; i < outputs->size(); ++i)
    (*outputs)[i].autograd_entry() = AutogradEntry{node, i};
  return true;
}

void backward(const std::vector<NDArray>& heads, const std::vector<NDArray>& head_grads,
              bool retain_graph, bool is_train) {
  const auto variable_grads =
      run_backward(heads, head_grads, retain_graph, is_train, false, /*write_grads=*/true);
  for (const auto& [node, variable_grad] : variable_grads)
    store_grad(*variable_grad.variable, variable_grad.grad);
}

std::vector<NDArray> grad(const std::vector<NDArray>& heads, const std::vector<NDArray>& variables,
                          const std::vector<NDArray>& head_grads, bool retain_graph, bool is_train,
                          bool create_graph) {
  for (size_t i = 0; i < variables.size(); ++i) {
    const std::shared_ptr<Node>& node = variables[i].autograd_entry().node;
    PMX_CHECK(node && node->is_variable(), "Cannot differentiate with respect to the ", i + 1,
              "-th variable because it does not require gradient.");
  }
  const auto variable_grads =
      run_backward(heads, head_grads, retain_graph, is_train, create_graph, /*write_grads=*/false);
  std::vector<NDArray> result;
  result.reserve(variables.size());
  for (const NDArray& var : variables) {
    auto found = variable_grads.find(var.autograd_entry().node.get());
    result.push_back(found != variable_grads.end() ? found->second.grad
                                                   : filled_like(var, "zeros"));
  }
  return result;
}

}  // namespace autograd
}  // namespace pymx
