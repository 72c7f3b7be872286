// The threaded engine: per-var FIFOs (var.h), per-device worker pools (worker_pool.h), GPU
// completion by events, errors stored on vars.
#include <array>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine_impl.h"
#include "engine_object_pool.h"
#include "pymx/gpu.h"
#include "pymx/profiler.h"
#include "var.h"
#include "worker_pool.h"

namespace pymx {
namespace {

// Note [GPU completion by events]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A GPU worker launches an op on its own stream and does not wait for the GPU. Right after the
// op's fn returns (for kAsync ops: when it calls on_complete) the worker records an event on its
// stream and stores it on the vars: as the writer event of each written var (dropping older
// events, which the write is ordered after) and as a reader event (one per stream) of each read
// var. Then the op completes at engine level and its dependents are dispatched at once.
// Before a dependent runs, it waits for the events that matter to it: to read a var, its writer
// event; to write a var, its writer and reader events. A GPU op waits on the device with
// stream_wait_event (nothing when the event is on its own stream, and no writer event when its
// stream read the var since that write: Var::collect_events); a host op, wait_for_var and the
// var deletion on a host device block in event_synchronize.
// Memory reuse: an array's deleter is a write on its var, so on a GPU worker it runs after its
// stream waited for every event of the var; the deleter frees the storage with
// handle.stream = ctx.stream and the stream-ordered caching allocator does not hand the block
// to another stream before that point (cuda/). On the host the deletion blocks on the events.

// Recycles CUDA events of one GPU. Held through shared_ptr by every event it handed out.
class EventPool : public std::enable_shared_from_this<EventPool> {
 public:
  explicit EventPool(int device) : device_(device) {}
  ~EventPool() {
    for (void* event : free_) gpu::destroy_event(device_, event);
  }

  GpuEventPtr record(void* stream) {
    void* event = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        event = free_.back();
        free_.pop_back();
      }
    }
    if (event == nullptr) event = gpu::create_event(device_);
    gpu::record_event(event, stream);
    auto self = shared_from_this();
    return GpuEventPtr(new GpuEvent{event, stream, device_}, [self](GpuEvent* e) {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->free_.push_back(e->event);
      delete e;
    });
  }

 private:
  const int device_;
  std::mutex mu_;
  std::vector<void*> free_;
};

struct GpuPools {
  std::unique_ptr<WorkerPool> compute;
  std::unique_ptr<WorkerPool> copy_to_gpu;    // host -> device
  std::unique_ptr<WorkerPool> copy_from_gpu;  // device -> host, device -> device
  std::shared_ptr<EventPool> events;
  // The newest completion event of each stream: what wait_for_all waits for. Synchronising the
  // stream itself would fail, and break the capture, while an op captures a CUDA graph on it.
  std::mutex last_events_mu;
  std::unordered_map<void*, GpuEventPtr> last_events;  // declared after `events`: freed first
};

class ThreadedEngine final : public EngineBase {
 public:
  ThreadedEngine(int cpu_workers, int gpu_workers, int gpu_copy_workers)
      : cpu_workers_(cpu_workers), gpu_workers_(gpu_workers), gpu_copy_workers_(gpu_copy_workers) {
    PMX_CHECK(cpu_workers >= 1 && gpu_workers >= 1 && gpu_copy_workers >= 1,
              "engine worker counts must be >= 1, got cpu ", cpu_workers, ", gpu ", gpu_workers,
              ", gpu copy ", gpu_copy_workers);
    for (auto& pool : cpu_pools_) pool.store(nullptr);
    for (auto& pools : gpu_pools_) pools.store(nullptr);
  }

  ~ThreadedEngine() override {
    wait_pending();
    for (auto& pool : cpu_pools_) delete pool.load();
    for (auto& pools : gpu_pools_) delete pools.load();
    Var::release_all_in_use_by(this);  // vars the owner never deleted: nothing is queued on them
  }

  VarHandle new_var() override { return Var::acquire(this); }

  void push_async(AsyncFn fn, Device device, std::vector<VarHandle> reads,
                  std::vector<VarHandle> writes, FnProperty prop, int priority,
                  const char* name) override {
    Op* op = new_op(device, reads, writes, prop, name);
    op->fn = std::move(fn);
    push(op);
  }

  void push_sync_fn(SyncFn fn, Device device, std::vector<VarHandle>& reads,
                    std::vector<VarHandle>& writes, FnProperty prop, const char* name) override {
    Op* op = new_op(device, reads, writes, prop, name);
    op->is_sync = true;
    op->sync_fn = std::move(fn);
    push(op);
  }

  void delete_var(SyncFn on_deleted, Device device, VarHandle var) override {
    PMX_CHECK(var != nullptr, "delete_var: the var is null");
    if (device.is_gpu() && gpu_disabled_after_fork()) {
      // A GPU array inherited by a forked child: its memory belongs to the parent's CUDA
      // context, which the child cannot touch, and no op of the child can have used it.
      Var::release(var);
      return;
    }
    ensure_pool(device);
    Op* op = ObjectPool<Op>::create();
    op->writes.assign_one(var);
    op->device = device;
    op->prop = FnProperty::kDeleteVar;
    op->name = "delete_var";
    op->is_sync = true;
    op->sync_fn = std::move(on_deleted);
    push(op);
  }

  void wait_for_var(VarHandle var) override {
    PMX_CHECK(!on_worker_thread(),
              "wait_for_var called from inside an engine op (a worker thread); waiting there "
              "would deadlock: push a dependent op instead");
    PMX_CHECK(var != nullptr, "wait_for_var: the var is null");
    if (!var->ready_to_read()) {
      struct Waiter {
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
      } waiter;
      // A read of the var that runs on whichever thread readies it (Op::is_wait).
      Op* op = ObjectPool<Op>::create();
      op->is_sync = true;
      op->sync_fn = [&waiter](RunContext) {
        std::lock_guard<std::mutex> lock(waiter.mu);
        waiter.done = true;
        waiter.cv.notify_all();  // under the lock: the waiter cannot leave before we are done
      };
      op->reads.assign_one(var);
      op->is_wait = true;
      op->name = "wait_for_var";
      push(op);
      std::unique_lock<std::mutex> lock(waiter.mu);
      waiter.cv.wait(lock, [&] { return waiter.done; });
    }
    if (var->has_events()) {
      std::vector<GpuEventPtr> events;
      var->collect_events(false, nullptr, &events);
      for (const GpuEventPtr& event : events) gpu::event_synchronize(event->event);
    }
    if (std::exception_ptr error = errors_.take(var->error_box())) std::rethrow_exception(error);
  }

  void wait_for_all() override {
    PMX_CHECK(!on_worker_thread(),
              "wait_for_all called from inside an engine op (a worker thread); waiting there "
              "would deadlock");
    wait_pending();
    // A forked child cannot touch CUDA: the GPU work it inherited is the parent's.
    for (auto& slot : gpu_pools_) {
      GpuPools* pools = slot.load(std::memory_order_acquire);
      if (pools == nullptr || gpu_disabled_after_fork()) continue;
      std::vector<GpuEventPtr> last;
      {
        std::lock_guard<std::mutex> lock(pools->last_events_mu);
        for (const auto& kv : pools->last_events) last.push_back(kv.second);
      }
      for (const GpuEventPtr& event : last) gpu::event_synchronize(event->event);
    }
    if (std::exception_ptr error = errors_.take_first_and_clear_all()) std::rethrow_exception(error);
  }

  uint64_t var_version(VarHandle var) override {
    PMX_CHECK(var != nullptr, "var_version: the var is null");
    return var->version();
  }

  std::string dump() override {
    std::string out = str_cat("threaded engine: ", pending_.load(), " op(s) pending\n");
    for (int id = 0; id < kMaxCpuDevices; ++id)
      if (WorkerPool* pool = cpu_pools_[id].load(std::memory_order_acquire))
        out += str_cat("  cpu(", id, ") queue: ", pool->queued(), " ready op(s)\n");
    for (int id = 0; id < kMaxGpuDevices; ++id)
      if (GpuPools* pools = gpu_pools_[id].load(std::memory_order_acquire))
        out += str_cat("  gpu(", id, ") queues: compute ", pools->compute->queued(), ", to gpu ",
                       pools->copy_to_gpu->queued(), ", from gpu ", pools->copy_from_gpu->queued(),
                       "\n");
    for (Var* var : Var::all()) {
      std::string line = var->describe(this);
      if (!line.empty()) out += "  " + line + "\n";
    }
    return out;
  }

  void stop() override {
    std::lock_guard<std::mutex> lock(start_stop_mu_);
    wait_pending();
    for_each_pool([](WorkerPool* pool) { pool->stop(); });
  }

  void start() override {
    std::lock_guard<std::mutex> lock(start_stop_mu_);
    for_each_pool([](WorkerPool* pool) { pool->start(); });
  }

  // Note [Engine shutdown]
  // ~~~~~~~~~~~~~~~~~~~~~~
  // The process engine is never destroyed (Engine::get() leaks it on purpose): arrays may be
  // freed, and ops pushed, by static destructors and interpreter teardown after this point.
  // At exit we wait for the pending work and join the workers; from then on an op runs on the
  // thread that makes it ready, so late pushes still complete. Errors are not raised here.
  void shutdown_at_exit() override {
    if (on_worker_thread()) return;  // exit() from inside an op: joining would deadlock
    std::lock_guard<std::mutex> lock(start_stop_mu_);
    wait_pending();
    for_each_pool([](WorkerPool* pool) { pool->stop(); });
    run_inline_.store(true, std::memory_order_release);
    // Ops a racing thread queued while the workers stopped.
    for_each_pool([this](WorkerPool* pool) {
      for (Op* op : pool->take_queued()) run_now(op);
    });
  }

  // Note [Engine and fork]
  // ~~~~~~~~~~~~~~~~~~~~~~
  // fork() copies only the calling thread, so the workers are stopped (after the pending work
  // finished) before it and started again in both processes; the engine's own mutexes are held
  // across it so the child does not inherit one locked by another thread. A child of a process
  // that initialised CUDA cannot use CUDA: its GPU pools stay stopped and GPU pushes fail.
  void fork_prepare() override {
    start_stop_mu_.lock();
    wait_pending();
    for_each_pool([](WorkerPool* pool) { pool->stop(); });
    pools_mu_.lock();
    Var::registry_mutex().lock();
    errors_.mutex().lock();
  }

  void fork_parent() override {
    unlock_after_fork();
    for_each_pool([](WorkerPool* pool) { pool->start(); });
    start_stop_mu_.unlock();
  }

  void fork_child() override {
    unlock_after_fork();
    if (gpu_initialised()) disable_gpu_after_fork();
    for (auto& pool : cpu_pools_)
      if (WorkerPool* p = pool.load()) p->start();
    start_stop_mu_.unlock();
  }

 private:
  void unlock_after_fork() {
    errors_.mutex().unlock();
    Var::registry_mutex().unlock();
    pools_mu_.unlock();
  }

  template <typename F>
  void for_each_pool(F&& f) {
    for (auto& pool : cpu_pools_)
      if (WorkerPool* p = pool.load()) f(p);
    for (auto& slot : gpu_pools_) {
      if (GpuPools* pools = slot.load()) {
        f(pools->compute.get());
        f(pools->copy_to_gpu.get());
        f(pools->copy_from_gpu.get());
      }
    }
  }

  // Validates the device and creates its pools on first use, on the pushing thread, so that
  // failures (a bad id, a stream that cannot be created) reach the caller.
  void ensure_pool(Device device) {
    check_engine_device(device);
    if (device.is_host()) {
      if (cpu_pools_[device.id].load(std::memory_order_acquire) != nullptr) return;
      std::lock_guard<std::mutex> lock(pools_mu_);
      if (cpu_pools_[device.id].load() != nullptr) return;
      cpu_pools_[device.id].store(new WorkerPool(Device::cpu(device.id), cpu_workers_, runner()),
                                  std::memory_order_release);
      return;
    }
    if (gpu_pools_[device.id].load(std::memory_order_acquire) != nullptr) return;
    std::lock_guard<std::mutex> lock(pools_mu_);
    if (gpu_pools_[device.id].load() != nullptr) return;
    auto pools = std::make_unique<GpuPools>();
    pools->compute = std::make_unique<WorkerPool>(device, gpu_workers_, runner());
    pools->copy_to_gpu = std::make_unique<WorkerPool>(device, gpu_copy_workers_, runner());
    pools->copy_from_gpu = std::make_unique<WorkerPool>(device, gpu_copy_workers_, runner());
    pools->events = std::make_shared<EventPool>(device.id);
    gpu_pools_[device.id].store(pools.release(), std::memory_order_release);
  }

  WorkerPool::Runner runner() {
    return [this](Op* op, RunContext ctx) { execute(op, ctx); };
  }

  WorkerPool* pool_for(const Op& op) {
    if (op.device.is_host()) return cpu_pools_[op.device.id].load(std::memory_order_acquire);
    GpuPools* pools = gpu_pools_[op.device.id].load(std::memory_order_acquire);
    if (op.prop == FnProperty::kCopyToGPU) return pools->copy_to_gpu.get();
    if (op.prop == FnProperty::kCopyFromGPU) return pools->copy_from_gpu.get();
    return pools->compute.get();
  }

  Op* new_op(Device device, std::vector<VarHandle>& reads, std::vector<VarHandle>& writes,
             FnProperty prop, const char* name) {
    ensure_pool(device);
    deduplicate_vars(&reads, &writes);
    Op* op = ObjectPool<Op>::create();
    op->reads.assign(reads);
    op->writes.assign(writes);
    op->device = device;
    op->prop = prop;
    op->name = name;
    return op;
  }

  void push(Op* op) {
    // One count per var plus one held by this call, so the op cannot start (and be freed)
    // while it is still being linked into its vars.
    op->wait.store(static_cast<int>(op->reads.size() + op->writes.size()) + 1,
                   std::memory_order_relaxed);
    pending_.fetch_add(1, std::memory_order_seq_cst);
    for (Var* var : op->reads)
      if (var->append_read(op)) op->dec_wait();
    for (Var* var : op->writes)
      if (var->append_write(op)) op->dec_wait();
    if (op->dec_wait() == 0) dispatch(op);
  }

  void dispatch(Op* op) {
    if (op->is_wait) {  // wakes the waiting thread; too small to be worth a worker
      op->sync_fn(RunContext{op->device, nullptr});
      complete(op, nullptr);
      return;
    }
    if (run_inline_.load(std::memory_order_acquire)) {
      run_now(op);
      return;
    }
    pool_for(*op)->push(op, op->prop == FnProperty::kDeleteVar);
  }

  void run_now(Op* op) {
    WorkerThreadScope on_worker;
    execute(op, RunContext{op->device, nullptr});
  }

  // Runs on a worker (or inline after shutdown): skip or run the op, then complete it (sync
  // ops; async ops complete through on_complete).
  void execute(Op* op, RunContext ctx) {
    for (const VarList* vars : {&op->reads, &op->writes}) {
      for (Var* var : *vars) {
        if (op->error) break;
        const std::shared_ptr<ErrorBox>& box = var->error_box_unlocked();
        if (box && errors_.pending(box)) op->error = box;
      }
    }
    bool skip = op->error && op->prop != FnProperty::kNoSkip && op->prop != FnProperty::kDeleteVar;
    if (skip) {
      complete(op, nullptr);
      return;
    }
    try {
      wait_for_events(*op, ctx.stream);
      op->stream = ctx.stream;
      if (profiler::is_recording()) op->span = profiler::begin_op(op->device, ctx.stream);
      if (!op->is_sync) {
        op->fn(ctx, OnComplete([this, op](std::exception_ptr error) { complete(op, std::move(error)); }));
        return;
      }
      if (op->sync_fn) op->sync_fn(ctx);
    } catch (...) {
      complete(op, std::current_exception());
      return;
    }
    complete(op, nullptr);
  }

  // See Note [GPU completion by events].
  void wait_for_events(const Op& op, void* stream) {
    bool any = false;
    for (Var* var : op.reads) any = any || var->has_events();
    for (Var* var : op.writes) any = any || var->has_events();
    if (!any) return;
    std::vector<GpuEventPtr> events;
    for (Var* var : op.reads) var->collect_events(false, stream, &events);
    for (Var* var : op.writes) var->collect_events(true, stream, &events);
    for (const GpuEventPtr& event : events) {
      if (stream != nullptr) {
        gpu::stream_wait_event(stream, event->event);
      } else {
        gpu::event_synchronize(event->event);
      }
    }
  }

  void record_event(Op* op) {
    GpuPools* pools = gpu_pools_[op->device.id].load(std::memory_order_acquire);
    GpuEventPtr event, previous;  // previous: returned to the pool outside the lock
    {
      // Recorded under the lock, so that the stored event is the stream's newest even when
      // async ops complete on other threads.
      std::lock_guard<std::mutex> lock(pools->last_events_mu);
      event = pools->events->record(op->stream);
      previous = std::exchange(pools->last_events[op->stream], event);
    }
    for (Var* var : op->writes) var->set_writer_event(event);
    for (Var* var : op->reads) var->add_reader_event(event);
  }

  void complete(Op* op, std::exception_ptr error) {
    if (op->span.active) {
      try {
        profiler::end_op(&op->span, op->display_name(), op->device, op->stream);
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    if (op->stream != nullptr && op->prop != FnProperty::kDeleteVar) {
      try {
        record_event(op);
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    std::shared_ptr<ErrorBox> box = error ? errors_.add(std::move(error)) : op->error;
    auto ready = [this](Op* next) {
      if (next->dec_wait() == 0) dispatch(next);
    };
    for (Var* var : op->reads)
      if (Op* next = var->complete_read()) ready(next);
    for (Var* var : op->writes) {
      Unblocked unblocked;
      if (var->complete_write(op->prop == FnProperty::kDeleteVar, box, &unblocked)) {
        Var::release(var);
      } else {
        unblocked.for_each(ready);
      }
    }
    ObjectPool<Op>::destroy(op);  // destroys fn on this thread
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        all_waiters_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(finished_mu_);
      finished_cv_.notify_all();
    }
  }

  void wait_pending() {
    if (pending_.load(std::memory_order_seq_cst) == 0) return;
    std::unique_lock<std::mutex> lock(finished_mu_);
    all_waiters_.fetch_add(1, std::memory_order_seq_cst);
    finished_cv_.wait(lock, [this] { return pending_.load(std::memory_order_seq_cst) == 0; });
    all_waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }

  const int cpu_workers_;
  const int gpu_workers_;
  const int gpu_copy_workers_;

  std::atomic<int64_t> pending_{0};      // ops pushed and not yet completed
  std::atomic<int> all_waiters_{0};      // threads in wait_pending()
  std::mutex finished_mu_;
  std::condition_variable finished_cv_;  // pending_ reached zero

  ErrorList errors_;

  std::mutex pools_mu_;  // creation of pools
  std::array<std::atomic<WorkerPool*>, kMaxCpuDevices> cpu_pools_;
  std::array<std::atomic<GpuPools*>, kMaxGpuDevices> gpu_pools_;

  std::mutex start_stop_mu_;
  std::atomic<bool> run_inline_{false};  // after shutdown_at_exit
};

}  // namespace

std::unique_ptr<EngineBase> make_threaded_engine(int cpu_workers, int gpu_workers,
                                                 int gpu_copy_workers) {
  return std::make_unique<ThreadedEngine>(cpu_workers, gpu_workers, gpu_copy_workers);
}

}  // namespace pymx
