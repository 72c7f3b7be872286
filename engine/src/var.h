// Var: the dependency token behind every array, and the records the engines attach to it
// (the shared error box, GPU completion events). Internal to engine/src.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pymx/base.h"
#include "engine_object_pool.h"
#include "pymx/engine.h"
#include "pymx/profiler.h"

namespace pymx {

// An error raised by an op, shared by every var it reached (the failed op's outputs and,
// transitively, the outputs of the ops skipped because of it), so that it is reported once
// per failure. `error` is read and cleared only under ErrorList's mutex.
struct ErrorBox {
  std::exception_ptr error;
};

// A CUDA event recorded on `stream` of GPU `device`. Owned through shared_ptr; the deleter
// returns it to the engine's per-device pool, so an event is re-recorded only when no var
// refers to it any more.
struct GpuEvent {
  void* event = nullptr;
  void* stream = nullptr;
  int device = 0;
};
using GpuEventPtr = std::shared_ptr<GpuEvent>;

struct Op;

// One queued access in a var's FIFO.
struct VarBlock {
  VarBlock* next = nullptr;
  Op* trigger = nullptr;
  bool write = false;
};

// The accesses a finished write detached from its var: the reads [first_read, end_of_reads)
// and then next_write, which start now. for_each hands each op to `f` and frees the blocks.
struct Unblocked {
  VarBlock* finished = nullptr;
  VarBlock* first_read = nullptr;
  VarBlock* end_of_reads = nullptr;
  Op* next_write = nullptr;

  template <typename F>
  void for_each(F&& f) {
    ObjectPool<VarBlock>::destroy(finished);
    for (VarBlock* block = first_read; block != end_of_reads;) {
      VarBlock* next = block->next;
      Op* op = block->trigger;
      ObjectPool<VarBlock>::destroy(block);
      f(op);
      block = next;
    }
    if (next_write != nullptr) f(next_write);
  }
};

// Note [Var queue]
// ~~~~~~~~~~~~~~~~
// A Var orders the ops that touch it: a FIFO of pending reads and writes in push order, where
// consecutive reads run together and a write runs alone (MXNet's ThreadedVar). Reads granted at
// once (no write pending) are only counted in num_pending_reads_; everything else is queued.
// The queue ends in an empty sentinel block (head_) where the next access is written.
// pending_write_ is the oldest write not yet finished (queued or running); the blocks after it
// are the accesses waiting for it. num_pending_reads_ is the number of running reads, or
// kWriteRunning while pending_write_ runs. An op counts the vars that still block it
// (Op::wait); each var that grants access decrements it, and whoever brings it to zero
// dispatches the op. Nothing is dispatched while mu_ is held.
//
// Note [Content stamps]
// ~~~~~~~~~~~~~~~~~~~~~
// A kernel that keeps something derived from an input across calls (a convolution's packed
// weights, Note [Packed weight cache] in ops/packed_weight_cache.h) must know whether the input
// still holds the same bytes. The var's version counts its completed writes, and every write to
// an array's memory is an engine write on its chunk's var (ops, copies, set_data, in-place
// updates; views share the chunk and its var). But vars are recycled (Note [Var registry]) with
// their version reset, so the version alone cannot tell two arrays apart: stamp() pairs it with
// an identity drawn from a process-wide counter the first time a var in use is stamped, and
// cleared when the var is released, so no two uses of vars ever share an identity. Only the
// stamping pays for the counter, not every new var. Memory that code outside the engine may
// write (imported, or whose address was handed out: Chunk::exposed) gets no stamp (invoke.cc),
// nor does an input of a bulk replay (Note [Bulk execution] in invoke.h) that the replay writes:
// the replay is one engine write, during which its kernels may rewrite a buffer several times
// under one version.
//
// Note [Var registry]
// ~~~~~~~~~~~~~~~~~~~
// Engine::dump() describes every var with pending work, so an engine must be able to find its
// vars. A list of live vars, linked into by new_var on the pushing thread and unlinked from by
// the var's deletion on a worker, made both threads take one lock and write its cache lines
// for every op's output: measured, that doubled a tiny op (0.9 -> 1.9 us/op, bench/RESULTS.md).
// So vars are never freed: a deleted var is reset and kept, constructed, in a per-thread pool
// (RecyclingPool), and every Var ever constructed is on one append-only list that grows only
// when a pool is empty. dump() walks that list and describes the vars its engine uses; the
// pushing thread and the workers share nothing per var beyond the var itself.
class Var {
 public:
  // A var in use by `owner` (the engine that made it), from this thread's pool of vars.
  static Var* acquire(const void* owner);
  // Returns a var whose deletion completed (or that its engine never deleted) to the pool.
  static void release(Var* var);
  // Releases every var `owner` still uses (an engine being destroyed, with nothing pending).
  static void release_all_in_use_by(const void* owner);
  // Every var ever made, free or in use (for dump(); see Note [Var registry]).
  static std::vector<Var*> all();
  static std::mutex& registry_mutex();  // held across fork()
  static void release_thread_cache();   // a worker thread about to exit

  Var(const Var&) = delete;
  Var& operator=(const Var&) = delete;

  // Queue an access for `op`. Returns true when the access is granted at once; the caller
  // then decrements op->wait itself.
  bool append_read(Op* op);
  bool append_write(Op* op);

  // A granted read finished: returns the write it unblocked (caller decrements its wait), or
  // nullptr.
  Op* complete_read();

  // The running write finished. Fills `unblocked` with the ops it lets start (caller
  // decrements their waits, see Unblocked) and returns true when the write was the var's
  // deletion, after which the caller frees the var. `error` (may be null) becomes the var's error.
  bool complete_write(bool deleting, std::shared_ptr<ErrorBox> error, Unblocked* unblocked);

  // True when no write is pending (the data may be read now).
  bool ready_to_read();
  uint64_t version();
  // This var's identity and version (Note [Content stamps]). Only for an op that holds access
  // to the var, so that no write completes meanwhile.
  ContentStamp stamp();
  std::shared_ptr<ErrorBox> error_box();

  // Unlocked read of the error box. Only for an op that holds access to this var: the writes
  // that set the box are ordered before it by the queue.
  const std::shared_ptr<ErrorBox>& error_box_unlocked() const { return error_; }
  // The naive engine's write: bump the version and store the error (may be null).
  void finish_write_serial(std::shared_ptr<ErrorBox> error);

  // GPU completion events (Note [GPU completion by events] in threaded_engine.cc).
  void set_writer_event(GpuEventPtr event);  // after a GPU write: drops older events
  void add_reader_event(GpuEventPtr event);  // after a GPU read: one per stream, newest wins
  // The events an op on `stream` (nullptr: the host) must wait for before it reads (or, with
  // `for_write`, writes) this var.
  void collect_events(bool for_write, void* stream, std::vector<GpuEventPtr>* out);
  bool has_events() const { return has_events_.load(std::memory_order_acquire); }

  // One line describing running and queued accesses (Engine::dump()); empty when nothing is
  // pending or the var is not in use by `owner`.
  std::string describe(const void* owner);

  Var* pool_next = nullptr;  // RecyclingPool's link

 private:
  friend class RecyclingPool<Var>;
  Var();
  ~Var() = delete;  // vars are recycled, never freed (Note [Var registry])
  void reset();

  static constexpr int kWriteRunning = -1;

  std::mutex mu_;
  int num_pending_reads_ = 0;
  VarBlock* head_;
  VarBlock* pending_write_ = nullptr;
  uint64_t version_ = 0;
  uint64_t identity_ = 0;  // 0 until stamp() first asks; reset with the var (Note [Content stamps])
  std::shared_ptr<ErrorBox> error_;
  GpuEventPtr writer_event_;
  std::vector<GpuEventPtr> reader_events_;
  std::atomic<bool> has_events_{false};
  const void* owner_ = nullptr;  // the engine using the var; null while it is in a pool
};

// The deduplicated vars of one op, stored in the op (a few inline, more on the heap), so the
// caller's vectors are freed on the pushing thread.
class VarList {
 public:
  VarList() = default;
  VarList(const VarList&) = delete;
  VarList& operator=(const VarList&) = delete;

  void assign(const std::vector<Var*>& vars) {
    size_ = vars.size();
    if (size_ > kInline) {
      heap_.assign(vars.begin(), vars.end());
    } else {
      for (size_t i = 0; i < size_; ++i) inline_[i] = vars[i];
    }
  }
  void assign_one(Var* var) {
    size_ = 1;
    inline_[0] = var;
  }
  Var* const* begin() const { return size_ > kInline ? heap_.data() : inline_; }
  Var* const* end() const { return begin() + size_; }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kInline = 4;
  Var* inline_[kInline];
  std::vector<Var*> heap_;
  size_t size_ = 0;
};

// One push: the function, its deduplicated vars, and the count of vars still blocking it.
struct Op {
  AsyncFn fn;       // when !is_sync
  SyncFn sync_fn;   // when is_sync (may be empty: a var deletion without a deleter)
  bool is_sync = false;
  VarList reads;
  VarList writes;
  std::atomic<int> wait{0};
  Device device;
  FnProperty prop = FnProperty::kNormal;
  bool is_wait = false;  // the internal op behind wait_for_var: runs at dispatch, never skipped
  const char* name = nullptr;
  std::shared_ptr<ErrorBox> error;  // the failure this op carries (inherited or its own)
  void* stream = nullptr;           // the GPU stream it ran on (nullptr on the host)
  profiler::Span span;              // active while the profiler times this op

  // Returns the number of vars still blocking the op after this one granted access.
  int dec_wait() { return wait.fetch_sub(1, std::memory_order_acq_rel) - 1; }
  const char* display_name() const { return name != nullptr ? name : "op"; }
};

// The errors of failed ops not yet reported, for wait_for_all (first one wins) and for the
// rethrow-once rule of wait_for_var. Thread-safe.
class ErrorList {
 public:
  // A new box holding `error`, remembered until reported.
  std::shared_ptr<ErrorBox> add(std::exception_ptr error);
  // True when `box` still holds an unreported error (box may be null).
  bool pending(const std::shared_ptr<ErrorBox>& box);
  // Empties `box` and returns its error (null when already reported).
  std::exception_ptr take(const std::shared_ptr<ErrorBox>& box);
  // Returns the oldest unreported error and empties every box.
  std::exception_ptr take_first_and_clear_all();

  std::mutex& mutex() { return mu_; }  // held across fork()

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<ErrorBox>> boxes_;
};

// Removes duplicates from `writes`, and from `reads` every duplicate and every var also in
// `writes` (such a var is written). Null handles are a caller error.
void deduplicate_vars(std::vector<Var*>* reads, std::vector<Var*>* writes);

// Marks the current thread as running engine ops (waiting there throws).
struct WorkerThreadScope {
  WorkerThreadScope();
  ~WorkerThreadScope();
  bool previous;
};

}  // namespace pymx
