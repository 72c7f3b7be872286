// Engine entry points shared by both engines: the process singleton (with its exit and fork
// hooks), push_sync, the worker-thread flag, and the device check at push.
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "config.h"
#include "engine_impl.h"
#include "pymx/gpu.h"
#include "var.h"

namespace pymx {
namespace {

thread_local bool t_on_worker_thread = false;

std::atomic<int> g_gpu_count{-1};  // -1: not queried yet (CUDA untouched)
std::atomic<bool> g_gpu_disabled_after_fork{false};
std::once_flag g_gpu_count_once;

EngineBase* g_process_engine = nullptr;  // set once by Engine::get(), never freed

}  // namespace

int visible_gpu_count() {
  std::call_once(g_gpu_count_once, [] {
    const int count = gpu::device_count();
    g_gpu_count.store(count);
    // CUDA's runtime registers the exit handler that tears it down at its first call, which
    // may have been the one above; handlers run in reverse order, so the engine's shutdown
    // registered again now runs before it, while GPU work can still finish and memory be freed
    // (Note [Engine shutdown]; a second shutdown does nothing).
    if (count > 0)
      std::atexit([] {
        if (g_process_engine != nullptr) g_process_engine->shutdown_at_exit();
      });
  });
  return g_gpu_count.load();
}

WorkerThreadScope::WorkerThreadScope() : previous(t_on_worker_thread) { t_on_worker_thread = true; }
WorkerThreadScope::~WorkerThreadScope() { t_on_worker_thread = previous; }

bool Engine::on_worker_thread() { return t_on_worker_thread; }

void Engine::push_sync(SyncFn fn, Device device, std::vector<VarHandle> reads,
                       std::vector<VarHandle> writes, FnProperty prop, int priority,
                       const char* name) {
  if (auto* engine = dynamic_cast<EngineBase*>(this)) {
    engine->push_sync_fn(std::move(fn), device, reads, writes, prop, name);
    return;
  }
  // An exception from fn propagates out of the AsyncFn, which the engines treat as the op's
  // failure (on_complete is then never called).
  push_async(
      [fn = std::move(fn)](RunContext ctx, OnComplete done) {
        fn(ctx);
        done();
      },
      device, std::move(reads), std::move(writes), prop, priority, name);
}

bool gpu_initialised() { return g_gpu_count.load() > 0; }

void disable_gpu_after_fork() { g_gpu_disabled_after_fork.store(true); }

bool gpu_disabled_after_fork() { return g_gpu_disabled_after_fork.load(); }

void check_engine_device(Device device) {
  if (device.is_host()) {
    PMX_CHECK(device.id >= 0 && device.id < kMaxCpuDevices, device.str(),
              " is not a valid CPU device: ids go from 0 to ", kMaxCpuDevices - 1);
    return;
  }
  PMX_CHECK(device.type == DeviceType::kGPU, "unknown device type ",
            static_cast<int>(device.type));
  if (g_gpu_disabled_after_fork.load()) {
    PMX_THROW(Status::kCuda, device.str(),
              " cannot be used in a process forked after CUDA was initialised (CUDA does not "
              "survive fork); use the GPU in the parent process only");
  }
  int count = visible_gpu_count();
  PMX_CHECK(count > 0, device.str(), " was requested but no GPU is visible",
            gpu::built_with_cuda() ? "" : " (pymx was built without CUDA)");
  PMX_CHECK(device.id >= 0 && device.id < count && device.id < kMaxGpuDevices, device.str(),
            " does not exist: ", count, " GPU(s) visible, ids 0 to ", count - 1);
}

std::unique_ptr<Engine> make_engine(const std::string& kind, int cpu_workers) {
  PMX_CHECK(cpu_workers >= 1, "make_engine: cpu_workers must be >= 1, got ", cpu_workers);
  if (kind == "naive") return make_naive_engine();
  PMX_CHECK(kind == "threaded", "make_engine: unknown engine kind \"", kind,
            "\" (expected \"threaded\" or \"naive\")");
  const Config& c = config();
  return make_threaded_engine(cpu_workers, c.gpu_workers, c.gpu_copy_workers);
}

// Note [Process engine lifetime]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The process engine is created on first use and deliberately never destroyed: arrays owned by
// Python objects or statics may be freed (and push their var deletion) after any destructor we
// could run. An atexit handler finishes the pending work and joins the workers instead; see
// Note [Engine shutdown] in threaded_engine.cc. pthread_atfork keeps it usable across fork().
Engine* Engine::get() {
  static Engine* const engine = [] {
    const Config& c = config();
    std::unique_ptr<EngineBase> created =
        c.engine == "naive" ? make_naive_engine()
                            : make_threaded_engine(c.cpu_workers, c.gpu_workers, c.gpu_copy_workers);
    g_process_engine = created.release();
    std::atexit([] { g_process_engine->shutdown_at_exit(); });
    pthread_atfork([] { g_process_engine->fork_prepare(); },
                   [] { g_process_engine->fork_parent(); },
                   [] { g_process_engine->fork_child(); });
    return g_process_engine;
  }();
  return engine;
}

}  // namespace pymx
