// GPU kernels register themselves from static initialisers in each cuda/src/*.cu file
// (op_registry::get_or_create(name).set_gpu(...)), so by the time anyone can call into
// libpymx they are all in place. What is left for register_kernels() is the check that they
// landed on real operators: a GPU kernel registered under a name no CPU file defines would
// otherwise sit in the registry as an operator without inference. device_count() runs it once,
// the first time it finds a GPU, so a renamed CPU op fails loudly on the first GPU use.
#include <string>

#include "pymx/gpu.h"
#include "pymx/op.h"

namespace pymx {
namespace gpu {

void register_kernels() {
  std::string orphans;
  for (const std::string& name : op_registry::names()) {
    const OpDef* op = op_registry::find(name);
    if (op->compute_gpu && !op->infer) orphans += (orphans.empty() ? "" : ", ") + name;
  }
  PMX_ASSERT(orphans.empty(), "GPU kernels registered for operators without a definition: ",
             orphans);
}

}  // namespace gpu
}  // namespace pymx
