// What the two engines share inside engine/src: the process-level hooks (exit, fork) and the
// device check done at every push.
#pragma once

#include <memory>

#include "pymx/engine.h"

namespace pymx {

// CPU device ids the engine serves: cpu(0) ... cpu(kMaxCpuDevices - 1), each its own worker pool.
constexpr int kMaxCpuDevices = 64;
// GPU ids the engine can hold pools for (a machine with more GPUs is not supported).
constexpr int kMaxGpuDevices = 64;

class EngineBase : public Engine {
 public:
  // push_sync without wrapping `fn` in an AsyncFn (saves an allocation per op). `reads` and
  // `writes` are deduplicated in place.
  virtual void push_sync_fn(SyncFn fn, Device device, std::vector<VarHandle>& reads,
                            std::vector<VarHandle>& writes, FnProperty prop, const char* name) = 0;
  // Process exit (registered with atexit for the singleton): finishes pending work, joins the
  // workers; ops pushed afterwards run on the pushing thread. See Note [Engine shutdown].
  virtual void shutdown_at_exit() = 0;
  // pthread_atfork hooks (singleton only). See Note [Engine and fork].
  virtual void fork_prepare() = 0;
  virtual void fork_parent() = 0;
  virtual void fork_child() = 0;
};

std::unique_ptr<EngineBase> make_threaded_engine(int cpu_workers, int gpu_workers,
                                                 int gpu_copy_workers);
std::unique_ptr<EngineBase> make_naive_engine();

// Throws Error(kInvalidArg) naming the device when no engine can run ops on it (CPU id out of
// range, GPU id not visible, no GPU at all). The GPU count is queried once, on first GPU use.
void check_engine_device(Device device);

}  // namespace pymx

namespace pymx {
// The number of GPUs, queried once. Every query of pymx goes through here, so that
// gpu_initialised() knows whether CUDA was initialised before a fork.
int visible_gpu_count();
// True once the GPU count has been queried and is > 0 (CUDA is then initialised in this process).
bool gpu_initialised();
// In a child forked after CUDA was initialised: every later GPU push throws Error(kCuda).
void disable_gpu_after_fork();
// Whether disable_gpu_after_fork() was called in this process.
bool gpu_disabled_after_fork();
}  // namespace pymx
