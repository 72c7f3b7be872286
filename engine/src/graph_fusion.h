// Blocks of a graph that an inference replay on the CPU runs as one fused operator. Internal to
// engine/src; see Note [Fused inference blocks] in graph_fusion.cc.
#pragma once

#include <cstddef>
#include <vector>

#include "pymx/graph.h"

namespace pymx {
namespace graph {

// convolution(act_type='relu') -> pooling(max) [-> batch_norm], as node numbers, with the
// attributes of the _conv_relu_max_pool call that replaces them.
struct FusedBlock {
  const OpDef* op = nullptr;  // _conv_relu_max_pool
  size_t conv = 0;
  size_t pool = 0;
  bool has_batch_norm = false;
  size_t batch_norm = 0;
  Attrs attrs;
  size_t last() const { return has_batch_norm ? batch_norm : pool; }
};

// The blocks of `nodes` whose intermediate values nothing else reads (other nodes or the graph's
// `outputs`) and whose batch_norm statistics are graph inputs or constants. `first_value[n]` is
// the number of node n's first output value, of `num_values` (Graph's numbering).
std::vector<FusedBlock> find_fused_blocks(const std::vector<GraphNode>& nodes,
                                          const std::vector<ValueRef>& outputs,
                                          const std::vector<size_t>& first_value,
                                          size_t num_values);

// Whether the fused kernel computes `block` on these operands: float32 on the CPU, in a geometry
// the kernel handles.
bool fused_block_applies(const FusedBlock& block, const NDArray& data, const NDArray& weight);

}  // namespace graph
}  // namespace pymx
