// The dependency engine: schedules functions on per-device workers in the order implied by the
// variables they read and write. See engine/README.md for the design notes.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "pymx/base.h"

namespace pymx {

class Var;  // a dependency token; opaque outside the engine
using VarHandle = Var*;

// What an array holds at one moment: equal known stamps mean equal bytes (Note [Content stamps]
// in engine/src/var.h). identity 0: unknown (never equal to anything).
struct ContentStamp {
  uint64_t identity = 0;
  uint64_t version = 0;

  bool known() const { return identity != 0; }
};

// What a running op sees. `stream` is the cudaStream_t of the GPU worker (nullptr on CPU).
struct RunContext {
  Device device;
  void* stream = nullptr;
};

// How and where an op runs (MXNet's FnProperty, minus the profiler-only values).
enum class FnProperty : int {
  kNormal = 0,       // compute on the device's compute workers
  kCopyToGPU = 1,    // host -> GPU copy: the GPU's copy worker (H2D stream)
  kCopyFromGPU = 2,  // GPU -> host or GPU -> GPU copy: the source GPU's copy worker (D2H stream)
  kAsync = 3,        // fn calls on_complete later, possibly from another thread
  kDeleteVar = 4,    // internal: deletion of a var
  kNoSkip = 5,       // runs even when an input carries an exception
};

// Handed to an async op; call exactly once. A non-null error marks the op as failed: the error is
// stored on the vars it writes and raised at the next wait that touches them.
class OnComplete {
 public:
  OnComplete() = default;
  OnComplete(std::function<void(std::exception_ptr)> fn) : fn_(std::move(fn)) {}
  void operator()(std::exception_ptr error = nullptr) const { fn_(std::move(error)); }

 private:
  std::function<void(std::exception_ptr)> fn_;
};

using SyncFn = std::function<void(RunContext)>;
using AsyncFn = std::function<void(RunContext, OnComplete)>;

// Interface shared by the threaded engine and the naive (serial) engine.
// All members are thread-safe. Only the wait_* members block.
class Engine {
 public:
  virtual ~Engine() = default;

  // The process-wide engine, created on first use: threaded unless PYMX_ENGINE=naive.
  static Engine* get();

  // A new var with no pending ops. Free it with delete_var.
  virtual VarHandle new_var() = 0;

  // Runs `fn` on a worker of `device` after every earlier write to `reads` and every earlier
  // read or write of `writes` has finished. Duplicates are removed; a var in both sets is treated
  // as written. Never blocks (the naive engine runs fn before returning). `fn` is destroyed on the
  // thread that ran it. `priority` is a hint (higher runs first on priority queues).
  virtual void push_async(AsyncFn fn, Device device, std::vector<VarHandle> reads,
                          std::vector<VarHandle> writes, FnProperty prop = FnProperty::kNormal,
                          int priority = 0, const char* name = nullptr) = 0;

  // push_async for a function that completes when it returns; exceptions it throws mark the op failed.
  void push_sync(SyncFn fn, Device device, std::vector<VarHandle> reads,
                 std::vector<VarHandle> writes, FnProperty prop = FnProperty::kNormal,
                 int priority = 0, const char* name = nullptr);

  // Frees `var` after every op pushed on it so far has finished, then runs `on_deleted` (may be
  // empty) on a worker of `device`. The handle must not be used after this call.
  virtual void delete_var(SyncFn on_deleted, Device device, VarHandle var) = 0;

  // Blocks until every write pushed so far on `var` has finished, then rethrows (once) an error
  // stored on it. Throws Error(kInvalidArg) when called from an engine worker thread.
  virtual void wait_for_var(VarHandle var) = 0;

  // Blocks until nothing is pending; rethrows the first stored error and clears all of them.
  virtual void wait_for_all() = 0;

  // Number of completed writes on `var` (goes up by one per write).
  virtual uint64_t var_version(VarHandle var) = 0;

  // Human-readable list of pending ops per var, for debugging hangs.
  virtual std::string dump() = 0;

  // Stops workers before fork() and restarts them in parent and child (registered with
  // pthread_atfork by the engine itself).
  virtual void stop() = 0;
  virtual void start() = 0;

  // True on an engine worker thread (waiting there would deadlock, so waits refuse).
  static bool on_worker_thread();
};

// Builds a standalone engine (tests and benchmarks compare several side by side).
// kind: "threaded" or "naive". cpu_workers: workers per CPU device (>= 1).
std::unique_ptr<Engine> make_engine(const std::string& kind, int cpu_workers);

}  // namespace pymx
