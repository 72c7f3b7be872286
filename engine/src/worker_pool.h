// The worker threads of one device queue: CPU compute, GPU compute, or GPU copies in one
// direction. Internal to engine/src.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pymx/base.h"
#include "pymx/engine.h"

namespace pymx {

struct Op;

// A FIFO of ready ops served by `num_workers` threads. GPU pools give each worker its own
// stream (created once per worker slot, kept across stop/start). Thread-safe.
class WorkerPool {
 public:
  using Runner = std::function<void(Op*, RunContext)>;

  // Starts the threads. `device` is a CPU or GPU device; `run` executes one op.
  WorkerPool(Device device, int num_workers, Runner run);
  ~WorkerPool();  // stops the threads (queued ops are dropped: stop the engine first)
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `op` (at the front for var deletions, so memory returns early). Never blocks.
  void push(Op* op, bool front);

  // Joins the threads after they have drained the queue / restarts them. Not thread-safe
  // against each other (the engine serialises stop and start).
  void stop();
  void start();

  // Removes and returns the ops still queued (used after stop() at process exit).
  std::vector<Op*> take_queued();

  // The streams of the GPU workers created so far (empty on CPU).
  std::vector<void*> streams();
  size_t queued();
  const Device& device() const { return device_; }

 private:
  void worker_loop(int index);
  Op* pop();  // blocks; nullptr once stopping and the queue is empty

  const Device device_;
  const int num_workers_;
  const Runner run_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op*> queue_;          // guarded by mu_
  std::atomic<size_t> size_{0};    // queue_.size(), readable without mu_ (spinning)
  int sleepers_ = 0;               // guarded by mu_
  int spinners_ = 0;               // guarded by mu_
  bool stopping_ = false;          // guarded by mu_
  std::vector<void*> streams_;     // guarded by mu_; one per worker slot on GPU
  std::vector<std::thread> threads_;
};

}  // namespace pymx
