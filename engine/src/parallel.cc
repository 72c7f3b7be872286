// The intra-op thread pool; see Note [Intra-op threads] in parallel.h.
#include "parallel.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

namespace pymx {
namespace {

// Cores this process may run on (the affinity mask, which containers and taskset narrow; the
// machine's core count is only the fallback).
int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// One parallel_for in flight: chunks [0, num_chunks) of `chunk` items from `begin`.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t begin = 0, end = 0, chunk = 1, num_chunks = 0;
  std::atomic<int64_t> next_chunk{0};
  std::mutex error_mu;
  std::exception_ptr error;
};

// True on pool threads and inside a running parallel_for: a nested call runs serially.
thread_local bool t_in_parallel = false;

// Sets t_in_parallel on the calling thread for its lifetime.
struct InParallel {
  InParallel() { t_in_parallel = true; }
  ~InParallel() { t_in_parallel = false; }
};

// How long a helper looks for the next loop before it sleeps (Note [Intra-op threads]).
constexpr auto kSpin = std::chrono::microseconds(200);

void run_chunks(Job* job) {
  for (;;) {
    const int64_t c = job->next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (c >= job->num_chunks) return;
    const int64_t lo = job->begin + c * job->chunk;
    const int64_t hi = std::min(job->end, lo + job->chunk);
    try {
      (*job->fn)(lo, hi);
    } catch (...) {
      std::lock_guard<std::mutex> lock(job->error_mu);
      if (!job->error) job->error = std::current_exception();
    }
  }
}

class Pool {
 public:
  // One caller at a time; the others run serially (see parallel.h).
  std::mutex caller_mu;

  int max_threads() const { return helpers_wanted_ + 1; }

  // Runs `job` with the helpers; the caller holds caller_mu.
  void run(Job* job) {
    start_helpers();
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    work_cv_.notify_all();
    run_chunks(job);
    // Every claimed chunk belongs to the caller (done) or to an active helper: wait for those.
    // A helper that wakes after job_ is cleared finds nothing to do, so none is waited for
    // needlessly when the loop was over before it was scheduled.
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return active_ == 0; });
    job_ = nullptr;
  }

  // Fork handlers: hold both locks across fork() so no loop is mid-flight in the parent.
  void lock_for_fork() {
    caller_mu.lock();
    mu_.lock();
  }
  void unlock_after_fork() {
    mu_.unlock();
    caller_mu.unlock();
  }

 private:
  void start_helpers() {
    if (started_) return;
    started_ = true;
    for (int i = 0; i < helpers_wanted_; ++i) {
      // Detached and never joined: the pool lives until the process exits (a static destructor
      // joining threads could run while an engine worker still uses the pool).
      std::thread([this] { helper_loop(); }).detach();
    }
  }

  void helper_loop() {
    t_in_parallel = true;
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t seen = generation_;
    for (;;) {
      lock.unlock();
      spin_for_next_loop(seen);
      lock.lock();
      work_cv_.wait(lock, [&] { return job_ != nullptr && generation_ != seen; });
      seen = generation_;
      Job* job = job_;
      ++active_;
      lock.unlock();
      run_chunks(job);
      lock.lock();
      if (--active_ == 0) done_cv_.notify_one();
    }
  }

  // Returns when a loop after `seen` has started or kSpin has passed. Yields while it waits,
  // so a thread that wants this core (another device's engine worker) gets it.
  void spin_for_next_loop(uint64_t seen) const {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (generation_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
  }

  const int helpers_wanted_ = usable_cores() - 1;
  bool started_ = false;  // guarded by caller_mu
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  Job* job_ = nullptr;
  // Loops started; written under mu_, read without it by spinning helpers.
  std::atomic<uint64_t> generation_{0};
  int active_ = 0;
};

// Leaked on purpose (see start_helpers); replaced in a forked child, whose copy has no threads.
Pool* g_pool = nullptr;
std::once_flag g_pool_once;

Pool& pool() {
  std::call_once(g_pool_once, [] {
    g_pool = new Pool();
    pthread_atfork([] { g_pool->lock_for_fork(); }, [] { g_pool->unlock_after_fork(); },
                   [] { g_pool = new Pool(); });
  });
  return *g_pool;
}

}  // namespace

int parallel_max_threads() { return pool().max_threads(); }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t n = end - begin;
  Pool& p = pool();
  if (t_in_parallel || n <= grain || p.max_threads() == 1) {
    fn(begin, end);
    return;
  }
  // About four chunks per thread: enough to rebalance when a core is busy elsewhere, few enough
  // that claiming a chunk costs nothing next to running it.
  const int64_t chunk = std::max(grain, (n + 4 * p.max_threads() - 1) / (4 * p.max_threads()));
  std::unique_lock<std::mutex> caller(p.caller_mu, std::try_to_lock);
  if (!caller.owns_lock()) {
    // The pool's chunks, in order on this thread (see parallel.h: boundaries never depend on
    // whether the pool was free), nested loops serial as in the pool.
    const InParallel scope;
    for (int64_t lo = begin; lo < end; lo += chunk) fn(lo, std::min(end, lo + chunk));
    return;
  }
  Job job;
  job.fn = &fn;
  job.begin = begin;
  job.end = end;
  job.chunk = chunk;
  job.num_chunks = (n + job.chunk - 1) / job.chunk;
  {
    const InParallel scope;
    p.run(&job);
  }
  if (job.error) std::rethrow_exception(job.error);
}

int64_t parallel_parts(int64_t n, int64_t grain) {
  if (n <= 0) return 0;
  grain = std::max<int64_t>(grain, 1);
  const int64_t most = parallel_max_threads() == 1 ? 1 : kPartsPerThread * parallel_max_threads();
  return std::max<int64_t>(1, std::min<int64_t>(most, n / grain));
}

void parallel_for_parts(int64_t n, int64_t grain,
                        const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  const int64_t parts = parallel_parts(n, grain);
  parallel_for(0, parts, 1, [&](int64_t first, int64_t last) {
    for (int64_t part = first; part < last; ++part)
      fn(part, n * part / parts, n * (part + 1) / parts);
  });
}

}  // namespace pymx
