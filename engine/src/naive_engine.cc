// The naive engine (PYMX_ENGINE=naive): every op runs at push, on the pushing thread. It is the
// oracle of the concurrency tests and the debugging mode.
//
// Note [Naive engine errors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// MXNet's NaiveEngine lets an op's exception escape from push. pymx keeps the threaded
// engine's user contract instead: the error is stored on the written vars, dependents are
// skipped, and it is raised once at the next wait (wait_for_var / wait_for_all), so a Python
// test behaves the same under both engines. The op still runs synchronously, so a debugger
// breaking on the throw sees the pushing call stack.
#include <condition_variable>
#include <map>
#include <mutex>

#include "engine_impl.h"
#include "pymx/gpu.h"
#include "pymx/profiler.h"
#include "var.h"

namespace pymx {
namespace {

class NaiveEngine final : public EngineBase {
 public:
  ~NaiveEngine() override {
    for (auto& [device, stream] : streams_) gpu::destroy_stream(device, stream);
    Var::release_all_in_use_by(this);  // vars the owner never deleted
  }

  VarHandle new_var() override { return Var::acquire(this); }

  void push_async(AsyncFn fn, Device device, std::vector<VarHandle> reads,
                  std::vector<VarHandle> writes, FnProperty prop, int priority,
                  const char* name) override {
    push_serial(fn, device, reads, writes, prop, name);
  }

  void push_sync_fn(SyncFn fn, Device device, std::vector<VarHandle>& reads,
                    std::vector<VarHandle>& writes, FnProperty prop, const char* name) override {
    push_serial(
        [&fn](RunContext ctx, OnComplete done) {
          fn(ctx);
          done();
        },
        device, reads, writes, prop, name);
  }

  void delete_var(SyncFn on_deleted, Device device, VarHandle var) override {
    PMX_CHECK(var != nullptr, "delete_var: the var is null");
    // A GPU array inherited by a forked child: the parent's memory, which CUDA cannot reach here.
    if (on_deleted && !(device.is_gpu() && gpu_disabled_after_fork())) {
      std::exception_ptr error = run(
          [&on_deleted](RunContext ctx, OnComplete done) {
            on_deleted(ctx);
            done();
          },
          device, "delete_var");
      if (error) errors_.add(std::move(error));  // raised by the next wait_for_all
    }
    Var::release(var);
  }

  void wait_for_var(VarHandle var) override {
    PMX_CHECK(!on_worker_thread(),
              "wait_for_var called from inside an engine op; waiting there would deadlock: push a "
              "dependent op instead");
    PMX_CHECK(var != nullptr, "wait_for_var: the var is null");
    if (std::exception_ptr error = errors_.take(var->error_box())) std::rethrow_exception(error);
  }

  void wait_for_all() override {
    PMX_CHECK(!on_worker_thread(),
              "wait_for_all called from inside an engine op; waiting there would deadlock");
    if (std::exception_ptr error = errors_.take_first_and_clear_all()) std::rethrow_exception(error);
  }

  uint64_t var_version(VarHandle var) override {
    PMX_CHECK(var != nullptr, "var_version: the var is null");
    return var->version();
  }

  std::string dump() override { return "naive engine: ops run at push, nothing is pending\n"; }

  void stop() override {}
  void start() override {}
  void shutdown_at_exit() override {}
  void fork_prepare() override { streams_mu_.lock(); }
  void fork_parent() override { streams_mu_.unlock(); }
  void fork_child() override {
    streams_mu_.unlock();
    if (gpu_initialised()) disable_gpu_after_fork();
  }

 private:
  void push_serial(const AsyncFn& fn, Device device, std::vector<VarHandle>& reads,
                   std::vector<VarHandle>& writes, FnProperty prop, const char* name) {
    check_engine_device(device);
    deduplicate_vars(&reads, &writes);
    std::shared_ptr<ErrorBox> box;
    for (const std::vector<Var*>* vars : {&reads, &writes})
      for (Var* var : *vars)
        if (!box && errors_.pending(var->error_box())) box = var->error_box();
    bool skip = box && prop != FnProperty::kNoSkip && prop != FnProperty::kDeleteVar;
    if (!skip) {
      if (std::exception_ptr error = run(fn, device, name)) box = errors_.add(std::move(error));
    }
    for (Var* var : writes) var->finish_write_serial(box);
  }

  // Runs `fn` on this thread and waits for its on_complete (an async fn may call it from
  // another thread). GPU ops run on one stream per device, synchronised afterwards.
  std::exception_ptr run(const AsyncFn& fn, Device device, const char* name) {
    struct Completion {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      std::exception_ptr error;
    } completion;
    WorkerThreadScope on_worker;
    RunContext ctx{device, nullptr};
    profiler::Span span;
    try {
      if (device.is_gpu()) {
        ctx.stream = stream_for(device.id);
        gpu::set_device(device.id);
      }
      if (profiler::is_recording()) span = profiler::begin_op(device, ctx.stream);
      fn(ctx, OnComplete([&completion](std::exception_ptr error) {
        std::lock_guard<std::mutex> lock(completion.mu);
        completion.error = std::move(error);
        completion.done = true;
        completion.cv.notify_all();  // under the lock: `completion` lives on our stack
      }));
      {
        std::unique_lock<std::mutex> lock(completion.mu);
        completion.cv.wait(lock, [&] { return completion.done; });
      }
      if (span.active) profiler::end_op(&span, name, device, ctx.stream);
      if (completion.error) return completion.error;
      if (ctx.stream != nullptr) gpu::stream_synchronize(ctx.stream);
    } catch (...) {
      std::exception_ptr error = std::current_exception();
      if (span.active) {
        try {
          profiler::end_op(&span, name, device, ctx.stream);
        } catch (...) {  // the op's own error is the one to report
        }
      }
      return error;
    }
    return nullptr;
  }

  void* stream_for(int device) {
    std::lock_guard<std::mutex> lock(streams_mu_);
    void*& stream = streams_[device];
    if (stream == nullptr) stream = gpu::create_stream(device);
    return stream;
  }

  ErrorList errors_;
  std::mutex streams_mu_;
  std::map<int, void*> streams_;  // guarded by streams_mu_
};

}  // namespace

std::unique_ptr<EngineBase> make_naive_engine() { return std::make_unique<NaiveEngine>(); }

}  // namespace pymx
