// The operator registry: name -> OpDef. Filled by static initialisers (PMX_REGISTER_OP) before
// main(); read-only afterwards, so lookups need no lock.
#include <algorithm>
#include <memory>
#include <unordered_map>

#include "pymx/op.h"

namespace pymx {
namespace op_registry {
namespace {

// A function-local static, so registration from any translation unit's static initialiser finds
// the table constructed. OpDefs are heap-allocated: references handed out stay valid.
std::unordered_map<std::string, std::unique_ptr<OpDef>>& table() {
  static std::unordered_map<std::string, std::unique_ptr<OpDef>> ops;
  return ops;
}

}  // namespace

OpDef& get_or_create(const std::string& name) {
  std::unique_ptr<OpDef>& slot = table()[name];
  if (!slot) {
    slot = std::make_unique<OpDef>();
    slot->name = name;
  }
  return *slot;
}

const OpDef* find(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second.get();
}

const OpDef& get(const std::string& name) {
  const OpDef* op = find(name);
  PMX_CHECK(op != nullptr, "unknown operator '", name, "'");
  return *op;
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& kv : table()) out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace op_registry
}  // namespace pymx
