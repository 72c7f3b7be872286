// Fused inference blocks. See graph_fusion.h.
#include "graph_fusion.h"

#include <string>

#include "ops/conv_pool_fused.h"

namespace pymx {
namespace graph {

// Note [Fused inference blocks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// LeafNetwork's blocks are convolution + relu, max pooling, batch norm. Run as three ops, the
// convolution writes its whole output to memory and the pooling reads it back (at batch 1 on
// the CPU, conv1's output alone is 2 MB). _conv_relu_max_pool pools the convolution's rows while
// they are in cache and applies batch norm's inference transform to the pooled values
// (Note [Fused convolution and max pooling]). A bulk replay on the CPU that records nothing and
// is not in train mode (batch norm then uses its running statistics and changes nothing) puts
// one such call in place of the block's nodes. The block's intermediate values must be read by
// nothing else, so they need not exist; batch norm's statistics must be inputs or constants, so
// they exist when the block starts. Without batch norm the result is bit for bit that of the
// separate ops; with it, equal to float rounding (the transform is applied as scale and shift).

namespace {

bool is_op(const GraphNode& node, const char* name) {
  return node.op != nullptr && node.op->name == name;
}

// For each value: how many times nodes read it or the graph returns it, and the last node that
// reads it (nodes.size() when none does).
struct ValueUses {
  std::vector<size_t> count;
  std::vector<size_t> reader;

  ValueUses(const std::vector<GraphNode>& nodes, const std::vector<ValueRef>& outputs,
            const std::vector<size_t>& first_value, size_t num_values)
      : count(num_values, 0), reader(num_values, nodes.size()) {
    for (size_t n = 0; n < nodes.size(); ++n) {
      for (const ValueRef& ref : nodes[n].inputs) {
        if (ref.kind != ValueRef::Kind::kNode) continue;
        const size_t v = first_value[ref.index] + ref.output;
        ++count[v];
        reader[v] = n;
      }
    }
    for (const ValueRef& ref : outputs)
      if (ref.kind == ValueRef::Kind::kNode) ++count[first_value[ref.index] + ref.output];
  }

  // The node that reads value `v` as its only use, or nodes.size().
  size_t only_reader(size_t v, size_t none) const { return count[v] == 1 ? reader[v] : none; }
};

bool fusable_conv(const GraphNode& node) {
  return is_op(node, "convolution") && node.inputs.size() == 3 &&
         node.attrs.get_str("act_type", "None") == "relu" && !node.attrs.get_bool("no_bias", false);
}

bool fusable_pool(const GraphNode& node) {
  if (!is_op(node, "pooling") || node.attrs.get_str("pool_type", "max") != "max" ||
      node.attrs.get_bool("global_pool", false))
    return false;
  for (int64_t pad : node.attrs.get_shape("pad", Shape()))
    if (pad != 0) return false;
  const std::string convention = node.attrs.get_str("pooling_convention", "valid");
  return convention == "valid" || convention == "None";
}

bool fusable_batch_norm(const GraphNode& node) {
  if (!is_op(node, "batch_norm") || node.attrs.get_int("axis", 1) != 1) return false;
  for (size_t i = 1; i < node.inputs.size(); ++i)
    if (node.inputs[i].kind == ValueRef::Kind::kNode) return false;
  return true;
}

void copy_attr(const Attrs& from, const char* key, const char* as, Attrs* to) {
  if (const std::string* value = from.find(key)) to->set(as, *value);
}

}  // namespace

std::vector<FusedBlock> find_fused_blocks(const std::vector<GraphNode>& nodes,
                                          const std::vector<ValueRef>& outputs,
                                          const std::vector<size_t>& first_value,
                                          size_t num_values) {
  const OpDef& fused_op = op_registry::get("_conv_relu_max_pool");
  const ValueUses uses(nodes, outputs, first_value, num_values);
  const size_t none = nodes.size();
  std::vector<FusedBlock> blocks;
  for (size_t c = 0; c < nodes.size(); ++c) {
    if (!fusable_conv(nodes[c])) continue;
    const size_t p = uses.only_reader(first_value[c], none);
    if (p == none || !fusable_pool(nodes[p])) continue;
    FusedBlock block;
    block.op = &fused_op;
    block.conv = c;
    block.pool = p;
    for (const char* key :
         {"kernel", "stride", "dilate", "pad", "num_filter", "num_group", "layout"})
      copy_attr(nodes[c].attrs, key, key, &block.attrs);
    copy_attr(nodes[p].attrs, "kernel", "pool_kernel", &block.attrs);
    copy_attr(nodes[p].attrs, "stride", "pool_stride", &block.attrs);
    const size_t b = uses.only_reader(first_value[p], none);
    const bool reads_pool = b != none && nodes[b].inputs[0].kind == ValueRef::Kind::kNode &&
                            nodes[b].inputs[0].index == p;
    if (reads_pool && fusable_batch_norm(nodes[b]) && uses.count[first_value[b] + 1] == 0 &&
        uses.count[first_value[b] + 2] == 0) {
      block.has_batch_norm = true;
      block.batch_norm = b;
      copy_attr(nodes[b].attrs, "eps", "bn_eps", &block.attrs);
      copy_attr(nodes[b].attrs, "fix_gamma", "bn_fix_gamma", &block.attrs);
    }
    blocks.push_back(std::move(block));
  }
  return blocks;
}

bool fused_block_applies(const FusedBlock& block, const NDArray& data, const NDArray& weight) {
  if (!data.device().is_host() || data.device().type == DeviceType::kCPUPinned ||
      data.dtype() != DType::kFloat32 || weight.dtype() != DType::kFloat32)
    return false;
  try {
    return nn::conv_relu_max_pool_handles(
        nn::conv_relu_max_pool_geometry(block.attrs, data.shape(), weight.shape()));
  } catch (const Error&) {
    return false;  // the separate ops report what is wrong
  }
}

}  // namespace graph
}  // namespace pymx
