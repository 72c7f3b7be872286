// Worker threads per device queue. See worker_pool.h.
#include "worker_pool.h"

#include <cstdio>

#include "pymx/gpu.h"
#include "var.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PMX_CPU_RELAX() _mm_pause()
#else
#define PMX_CPU_RELAX() std::this_thread::yield()
#endif

namespace pymx {
namespace {

// The pool whose worker runs on this thread (nullptr elsewhere).
thread_local WorkerPool* t_current_pool = nullptr;

// Note [Spin before sleep]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Waking a sleeping thread costs a futex call on each side (microseconds), more than a tiny
// op. So an idle worker first polls the queue for a short while (about 20-50 us), and at most
// one worker per pool polls at a time, so oversubscribed cores (8 workers on 2 cores) are not
// eaten by pollers; it yields now and then so a pusher on the same core gets to run. A pusher
// wakes a sleeper only when no worker is polling; a poller that finds work and sees more
// queued wakes one sleeper, which then polls in turn. A worker that makes an op ready (a
// dependent of the op it just finished) into an empty queue of its own pool wakes nobody: it
// takes that op itself next.
constexpr int kSpinIterations = 4096;
constexpr int kYieldEvery = 64;

}  // namespace

WorkerPool::WorkerPool(Device device, int num_workers, Runner run)
    : device_(device), num_workers_(num_workers), run_(std::move(run)) {
  PMX_ASSERT(num_workers >= 1, "worker pool for ", device.str(), " with ", num_workers, " workers");
  start();
}

WorkerPool::~WorkerPool() {
  stop();
  for (void* stream : streams_)
    if (stream != nullptr) gpu::destroy_stream(device_.id, stream);
}

void WorkerPool::push(Op* op, bool front) {
  bool wake;
  {  // lock scope
    std::lock_guard<std::mutex> lock(mu_);
    bool was_empty = queue_.empty();
    if (front) {
      queue_.push_front(op);
    } else {
      queue_.push_back(op);
    }
    size_.store(queue_.size(), std::memory_order_release);  // STATE CHANGE
    bool self_served = t_current_pool == this && was_empty;  // See Note [Spin before sleep]
    wake = !self_served && sleepers_ > 0 && spinners_ == 0;
  }
  if (wake) cv_.notify_one();
}

Op* WorkerPool::pop() {
  std::unique_lock<std::mutex> lock(mu_);
  bool spun = false;
  while (true) {
    if (!queue_.empty()) {
      Op* op = queue_.front();
      queue_.pop_front();
      size_.store(queue_.size(), std::memory_order_release);  // STATE CHANGE
      bool wake = !queue_.empty() && sleepers_ > 0 && spinners_ == 0;
      lock.unlock();
      if (wake) cv_.notify_one();
      return op;
    }
    if (stopping_) return nullptr;
    if (!spun && spinners_ == 0) {  // See Note [Spin before sleep]
      spun = true;
      ++spinners_;
      lock.unlock();
      for (int i = 1; i <= kSpinIterations && size_.load(std::memory_order_acquire) == 0; ++i) {
        if (i % kYieldEvery == 0) {
          std::this_thread::yield();
        } else {
          PMX_CPU_RELAX();
        }
      }
      lock.lock();
      --spinners_;
      continue;
    }
    spun = false;
    ++sleepers_;
    cv_.wait(lock);
    --sleepers_;
  }
}

void WorkerPool::worker_loop(int index) {
  WorkerThreadScope on_worker;
  t_current_pool = this;
  RunContext ctx{device_, nullptr};
  if (device_.is_gpu()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ctx.stream = streams_[index];
    }
    try {
      gpu::set_device(device_.id);
    } catch (const std::exception& e) {
      // Ops on this worker fail on their own CUDA calls and report through the engine.
      std::fprintf(stderr, "pymx: worker for %s cannot select its device: %s\n",
                   device_.str().c_str(), e.what());
    }
  }
  while (Op* op = pop()) run_(op, ctx);
  ObjectPool<Op>::release_thread_cache();
  ObjectPool<VarBlock>::release_thread_cache();
  Var::release_thread_cache();
}

void WorkerPool::start() {
  if (!threads_.empty()) return;
  if (device_.is_gpu()) {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.resize(num_workers_, nullptr);
    for (void*& stream : streams_)
      if (stream == nullptr) stream = gpu::create_stream(device_.id);  // throws on failure
  }
  for (int i = 0; i < num_workers_; ++i) threads_.emplace_back(&WorkerPool::worker_loop, this, i);
}

void WorkerPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;  // STATE CHANGE: workers exit once the queue is empty
  }
  cv_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = false;
}

std::vector<Op*> WorkerPool::take_queued() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Op*> ops(queue_.begin(), queue_.end());
  queue_.clear();
  size_.store(0, std::memory_order_release);
  return ops;
}

std::vector<void*> WorkerPool::streams() {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_;
}

size_t WorkerPool::queued() { return size_.load(std::memory_order_acquire); }

}  // namespace pymx
