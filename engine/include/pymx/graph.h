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

}  // namespace graph
}  // namespace pymx
