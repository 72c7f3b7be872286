// See Note [Deterministic mode] in determinism.h.
#include "determinism.h"

#include <atomic>

#include "config.h"

namespace pymx {
namespace {

std::atomic<bool>& mode() {
  static std::atomic<bool> on{config().enforce_determinism};
  return on;
}

}  // namespace

bool deterministic() { return mode().load(std::memory_order_relaxed); }

bool set_deterministic(bool on) { return mode().exchange(on, std::memory_order_relaxed); }

}  // namespace pymx
