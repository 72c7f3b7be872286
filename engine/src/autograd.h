// The tape's node type, shared by autograd.cc and graph.cc.
#pragma once

#include <memory>
#include <vector>

#include "pymx/autograd.h"
#include "pymx/ndarray.h"
#include "pymx/op.h"

namespace pymx {
namespace autograd {

// One recorded op, or (op == nullptr) a variable marked with attach_grad.
//
// Ownership: an array's AutogradEntry holds its producing node; a node holds its inputs (whose
// entries hold their producers), so the tape lives exactly as long as some array computed from
// it. Outputs are kept with their entries cleared, so no node owns itself.
struct Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<NDArray> inputs;   // the edges to parent nodes live in their autograd entries
  std::vector<NDArray> outputs;  // entries cleared
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
