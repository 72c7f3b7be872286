// The tape's node type, shared by autograd.cc and graph.cc.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "pymx/autograd.h"
#include "pymx/ndarray.h"
#include "pymx/op.h"

namespace pymx {
namespace autograd {

// One input or output of a recorded op as its node keeps it: always its shape, dtype, device and
// (inputs) the autograd entry that links to the producing node; the array itself only when the
// op's gradient reads it (OpDef::grad_uses_inputs / grad_uses_outputs). An array not kept is
// freed as soon as the user drops it, so its memory and engine var are reused before backward.
class SavedArray {
 public:
  // `keep_value`: hold the array itself. `keep_entry`: hold its autograd entry (inputs; an
  // output's entry points back to its own node).
  void save(const NDArray& array, bool keep_value, bool keep_entry);
  // The kept array with its entry restored (so that gradients recorded with create_graph link to
  // its producer), or a none array when not kept.
  NDArray for_gradient() const;
  bool has_value() const { return !value_.is_none(); }
  VarHandle var() const { return value_.var(); }  // null when the value is not kept
  AutogradEntry& entry() { return entry_; }
  const AutogradEntry& entry() const { return entry_; }
  const Shape& shape() const { return has_value() ? value_.shape() : shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }

 private:
  // Its own entry is always empty: the node holds exactly one reference to each parent (entry_),
  // which Node's iterative teardown relies on.
  NDArray value_;
  AutogradEntry entry_;
  Shape shape_;  // only when the value is not kept (the value has it otherwise)
  DType dtype_ = DType::kFloat32;
  Device device_;
};

// A node's inputs or outputs. Most ops have at most two inputs and one output, and the tape of a
// long loop holds many nodes, so up to kInline entries live in the node itself instead of a
// separate allocation (measured: each allocation kept alive by a growing tape costs ~250
// instructions of malloc's slow path, about the cost of the rest of recording).
class NodeArrays {
 public:
  // Fill an empty NodeArrays; `kept`: indices of the arrays whose values to keep (nullopt: all).
  void assign(const NDArray* const* arrays, size_t n, const std::optional<std::vector<int>>& kept,
              bool keep_entries);
  void assign(const std::vector<NDArray>& arrays, const std::optional<std::vector<int>>& kept,
              bool keep_entries);
  void clear();
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  SavedArray& operator[](size_t i) { return data()[i]; }
  const SavedArray& operator[](size_t i) const { return data()[i]; }
  SavedArray* begin() { return data(); }
  SavedArray* end() { return data() + size_; }
  const SavedArray* begin() const { return data(); }
  const SavedArray* end() const { return data() + size_; }

 private:
  static constexpr size_t kInline = 2;
  SavedArray* data() { return size_ <= kInline ? inline_ : heap_.data(); }
  const SavedArray* data() const { return size_ <= kInline ? inline_ : heap_.data(); }
  template <typename Get>
  void fill(Get get, size_t n, const std::optional<std::vector<int>>& kept, bool keep_entries);

  SavedArray inline_[kInline];
  std::vector<SavedArray> heap_;  // all of them, when more than kInline
  size_t size_ = 0;
};

// The gradient of a node recorded by record_function (autograd.Function): one gradient per
// input (a none array: no gradient for it) from one gradient per output. Runs on the thread that
// calls backward, never on an engine worker.
using FunctionGradient = std::function<std::vector<NDArray>(const std::vector<NDArray>& out_grads)>;

// One recorded op, or (op == nullptr) a variable marked with attach_grad.
//
// Ownership: an array's AutogradEntry holds its producing node; a node holds its inputs (whose
// entries hold their producers), so the tape lives exactly as long as some array computed from
// it. Outputs are kept with their entries cleared, so no node owns itself.
struct Node {
  const OpDef* op = nullptr;
  std::shared_ptr<const Attrs> attrs;  // shared by nodes with equal attributes (ops only)
  NodeArrays inputs;   // the edges to parent nodes are their autograd entries
  NodeArrays outputs;  // without entries
  bool is_train = false;  // the train mode the op ran in, and its gradient runs in
  // Set by a backward without retain_graph: the saved arrays are gone.
  bool freed = false;
  // Nodes of record_function only (op is then the placeholder OpDef "autograd.Function"):
  // replaces op->gradient. Reset when the tape is freed, which releases what it holds.
  FunctionGradient function_gradient;

  // Variables only.
  NDArray grad;
  GradReq grad_req = GradReq::kNull;
  bool fresh_grad = false;  // see autograd::fresh_grad

  bool is_variable() const { return op == nullptr; }
  ~Node();
};

// Records `outputs` as computed from `inputs` by one node whose gradient is `gradient` (the user's
// backward of an autograd.Function), setting the outputs' autograd entries. Records nothing and
// returns false when recording is off, no input needs a gradient or no output is floating-point
// (as record_op). Throws Error(kInvalidArg) while this thread traces a graph: a replayed graph
// cannot call the function's backward.
bool record_function(const std::vector<NDArray>& inputs, std::vector<NDArray>* outputs,
                     FunctionGradient gradient);

}  // namespace autograd
}  // namespace pymx
