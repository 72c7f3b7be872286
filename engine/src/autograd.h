// The tape's node type, shared by autograd.cc and graph.cc.
#pragma once

#include <memory>
#include <vector>

#include "pymx/autograd.h"
#include "pymx/ndarray.h"
#include "pymx/op.h"

namespace pymx {
namespace autograd {

// A node's input or output arrays. Most ops have at most two inputs and one output, and the
// tape of a long loop holds many nodes, so up to kInline arrays live in the node itself instead
// of a separate allocation (measured: each allocation kept alive by a growing tape costs ~250
// instructions of malloc's slow path, about the cost of the rest of recording).
class NodeArrays {
 public:
  // Fill an empty NodeArrays.
  void assign(const NDArray* const* arrays, size_t n);
  void assign(const std::vector<NDArray>& arrays);
  void clear();
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  NDArray& operator[](size_t i) { return data()[i]; }
  const NDArray& operator[](size_t i) const { return data()[i]; }
  NDArray* begin() { return data(); }
  NDArray* end() { return data() + size_; }
  const NDArray* begin() const { return data(); }
  const NDArray* end() const { return data() + size_; }
  std::vector<NDArray> to_vector() const { return std::vector<NDArray>(begin(), end()); }

 private:
  static constexpr size_t kInline = 2;
  NDArray* data() { return size_ <= kInline ? inline_ : heap_.data(); }
  const NDArray* data() const { return size_ <= kInline ? inline_ : heap_.data(); }

  NDArray inline_[kInline];
  std::vector<NDArray> heap_;  // all of them, when more than kInline
  size_t size_ = 0;
};

// One recorded op, or (op == nullptr) a variable marked with attach_grad.
//
// Ownership: an array's AutogradEntry holds its producing node; a node holds its inputs (whose
// entries hold their producers), so the tape lives exactly as long as some array computed from
// it. Outputs are kept with their entries cleared, so no node owns itself.
struct Node {
  const OpDef* op = nullptr;
  std::shared_ptr<const Attrs> attrs;  // shared by nodes with equal attributes (ops only)
  NodeArrays inputs;   // the edges to parent nodes live in their autograd entries
  NodeArrays outputs;  // entries cleared
  bool is_train = false;  // the train mode the op ran in, and its gradient runs in
  // Set by a backward without retain_graph: the saved arrays are gone.
  bool freed = false;

  // Variables only.
  NDArray grad;
  GradReq grad_req = GradReq::kNull;
  bool fresh_grad = false;  // see autograd::fresh_grad

  bool is_variable() const { return op == nullptr; }
  ~Node();
};

}  // namespace autograd
}  // namespace pymx
