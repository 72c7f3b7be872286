// Var queue, error list and var deduplication. See Note [Var queue] in var.h.
#include "var.h"

#include <algorithm>
#include <atomic>

#include "engine_object_pool.h"

namespace pymx {

namespace {

// Every Var ever constructed (Note [Var registry]). Never destroyed: vars are released during
// static destruction.
struct Registry {
  std::mutex mu;
  std::vector<Var*> vars;
};

Registry& registry() {
  static Registry* instance = new Registry;
  return *instance;
}

std::atomic<uint64_t> g_next_identity{1};  // Note [Content stamps]; 0 means "none yet"

}  // namespace

Var::Var() : head_(ObjectPool<VarBlock>::create()) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().vars.push_back(this);
}

Var* Var::acquire(const void* owner) {
  Var* var = RecyclingPool<Var>::acquire();
  std::lock_guard<std::mutex> lock(var->mu_);  // dump() may be reading the var
  var->owner_ = owner;
  return var;
}

void Var::release(Var* var) {
  var->reset();
  RecyclingPool<Var>::release(var);
}

void Var::release_all_in_use_by(const void* owner) {
  for (Var* var : all()) {
    bool in_use;
    {
      std::lock_guard<std::mutex> lock(var->mu_);
      in_use = var->owner_ == owner;
    }
    if (in_use) release(var);
  }
}

std::vector<Var*> Var::all() {
  std::lock_guard<std::mutex> lock(registry().mu);
  return registry().vars;
}

std::mutex& Var::registry_mutex() { return registry().mu; }

void Var::release_thread_cache() { RecyclingPool<Var>::release_thread_cache(); }

void Var::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  // A var is released with nothing queued (after its deletion op), so the queue is the
  // sentinel plus, at most, the deletion's own finished block.
  if (pending_write_ != nullptr && pending_write_ != head_)
    ObjectPool<VarBlock>::destroy(pending_write_);
  pending_write_ = nullptr;
  num_pending_reads_ = 0;
  version_ = 0;
  identity_ = 0;
  error_.reset();
  writer_event_.reset();
  reader_events_.clear();
  has_events_.store(false, std::memory_order_relaxed);
  owner_ = nullptr;
}

bool Var::append_read(Op* op) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_write_ == nullptr) {
    // invariant: no write is pending, so this read may start now
    ++num_pending_reads_;  // STATE CHANGE
    return true;
  }
  head_->trigger = op;
  head_->write = false;
  head_->next = ObjectPool<VarBlock>::create();
  head_ = head_->next;  // STATE CHANGE: queued behind pending_write_
  return false;
}

bool Var::append_write(Op* op) {
  std::lock_guard<std::mutex> lock(mu_);
  VarBlock* block = head_;
  block->trigger = op;
  block->write = true;
  block->next = ObjectPool<VarBlock>::create();
  head_ = block->next;  // STATE CHANGE: queued
  if (pending_write_ != nullptr) return false;
  pending_write_ = block;
  if (num_pending_reads_ != 0) return false;  // waits for the running reads to drain
  // invariant: nothing runs on this var, so the write may start now
  num_pending_reads_ = kWriteRunning;  // STATE CHANGE
  return true;
}

Op* Var::complete_read() {
  std::lock_guard<std::mutex> lock(mu_);
  PMX_ASSERT(num_pending_reads_ > 0, "var ", this, ": pending reads = ", num_pending_reads_);
  if (--num_pending_reads_ != 0 || pending_write_ == nullptr) return nullptr;
  // invariant: the last running read finished and a write waits for it
  num_pending_reads_ = kWriteRunning;  // STATE CHANGE
  return pending_write_->trigger;
}

bool Var::complete_write(bool deleting, std::shared_ptr<ErrorBox> error, Unblocked* unblocked) {
  std::lock_guard<std::mutex> lock(mu_);
  PMX_ASSERT(num_pending_reads_ == kWriteRunning && pending_write_ != nullptr, "var ", this,
             ": completing a write that is not running");
  ++version_;
  if (error) error_ = std::move(error);
  if (deleting) {
    PMX_ASSERT(pending_write_->next == head_, "var ", this,
               ": an op was pushed on a var after delete_var");
    return true;
  }
  // The detached blocks are no longer reachable from the var: the caller frees them unlocked.
  unblocked->finished = pending_write_;
  unblocked->first_read = pending_write_->next;
  int num_reads = 0;
  VarBlock* end = unblocked->first_read;
  for (; end != head_ && !end->write; end = end->next) ++num_reads;
  unblocked->end_of_reads = end;
  // invariant: the reads in [first_read, end) start now; the write at `end` (if any) becomes
  // the pending one and starts when they are done
  num_pending_reads_ = num_reads;  // STATE CHANGE
  if (end == head_) {
    pending_write_ = nullptr;  // STATE CHANGE: ready to read
  } else {
    pending_write_ = end;  // STATE CHANGE
    if (num_reads == 0) {
      num_pending_reads_ = kWriteRunning;
      unblocked->next_write = end->trigger;
    }
  }
  return false;
}

bool Var::ready_to_read() {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_write_ == nullptr;
}

uint64_t Var::version() {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

ContentStamp Var::stamp() {
  std::lock_guard<std::mutex> lock(mu_);
  if (identity_ == 0) identity_ = g_next_identity.fetch_add(1, std::memory_order_relaxed);
  return ContentStamp{identity_, version_};
}

std::shared_ptr<ErrorBox> Var::error_box() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void Var::finish_write_serial(std::shared_ptr<ErrorBox> error) {
  std::lock_guard<std::mutex> lock(mu_);
  ++version_;
  if (error) error_ = std::move(error);
}

void Var::set_writer_event(GpuEventPtr event) {
  std::lock_guard<std::mutex> lock(mu_);
  // A write orders after every earlier access, so its event alone stands for all of them.
  writer_event_ = std::move(event);
  reader_events_.clear();
  has_events_.store(true, std::memory_order_release);
}

void Var::add_reader_event(GpuEventPtr event) {
  std::lock_guard<std::mutex> lock(mu_);
  for (GpuEventPtr& reader : reader_events_) {
    if (reader->stream == event->stream) {  // same stream: the newer event covers the older
      reader = std::move(event);
      return;
    }
  }
  reader_events_.push_back(std::move(event));
  has_events_.store(true, std::memory_order_release);
}

void Var::collect_events(bool for_write, void* stream, std::vector<GpuEventPtr>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  // Work on the same stream is already ordered; the host (stream == nullptr) waits for all.
  auto needs_wait = [stream](const GpuEventPtr& e) {
    return e && (stream == nullptr || e->stream != stream);
  };
  // A reader event of this stream: an op on it read the var after the current write, having
  // waited for the write first, so the stream is ordered after the write already (parameters
  // copied in once are not waited for again by every later step).
  bool stream_read_after_write = false;
  if (stream != nullptr)
    for (const GpuEventPtr& reader : reader_events_)
      if (reader->stream == stream) stream_read_after_write = true;
  if (!stream_read_after_write && needs_wait(writer_event_)) out->push_back(writer_event_);
  if (!for_write) return;
  for (const GpuEventPtr& reader : reader_events_)
    if (needs_wait(reader)) out->push_back(reader);
}

std::string Var::describe(const void* owner) {
  std::lock_guard<std::mutex> lock(mu_);
  if (owner_ != owner || (pending_write_ == nullptr && num_pending_reads_ == 0)) return "";
  std::string out = str_cat("var ", static_cast<const void*>(this), " (version ", version_, "): ");
  if (num_pending_reads_ == kWriteRunning) {
    out += str_cat("running write '", pending_write_->trigger->display_name(), "'");
  } else {
    out += str_cat(num_pending_reads_, " running read(s)");
  }
  out += "; queued:";
  VarBlock* block = pending_write_;
  if (num_pending_reads_ == kWriteRunning) block = block->next;
  int queued = 0;
  for (; block != nullptr && block != head_; block = block->next, ++queued)
    out += str_cat(" ", block->write ? "W" : "R", "'", block->trigger->display_name(), "'");
  if (queued == 0) out += " none";
  return out;
}

std::shared_ptr<ErrorBox> ErrorList::add(std::exception_ptr error) {
  auto box = std::make_shared<ErrorBox>();
  std::lock_guard<std::mutex> lock(mu_);
  box->error = std::move(error);
  boxes_.push_back(box);
  return box;
}

bool ErrorList::pending(const std::shared_ptr<ErrorBox>& box) {
  if (!box) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return box->error != nullptr;
}

std::exception_ptr ErrorList::take(const std::shared_ptr<ErrorBox>& box) {
  if (!box) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  std::exception_ptr error = std::move(box->error);
  box->error = nullptr;
  // Reported boxes leave the list, so wait_for_all does not raise them again.
  boxes_.erase(std::remove(boxes_.begin(), boxes_.end(), box), boxes_.end());
  return error;
}

std::exception_ptr ErrorList::take_first_and_clear_all() {
  std::lock_guard<std::mutex> lock(mu_);
  std::exception_ptr first;
  for (auto& box : boxes_) {
    if (!first) first = box->error;
    box->error = nullptr;
  }
  boxes_.clear();
  return first;
}

void deduplicate_vars(std::vector<Var*>* reads, std::vector<Var*>* writes) {
  for (size_t i = 0; i < writes->size(); ++i)
    PMX_CHECK((*writes)[i] != nullptr, "engine push: write var ", i, " is null");
  for (size_t i = 0; i < reads->size(); ++i)
    PMX_CHECK((*reads)[i] != nullptr, "engine push: read var ", i, " is null");
  if (reads->size() + writes->size() > 32) {  // many vars (a fused optimizer step): sort
    std::sort(writes->begin(), writes->end());
    writes->erase(std::unique(writes->begin(), writes->end()), writes->end());
    std::sort(reads->begin(), reads->end());
    reads->erase(std::unique(reads->begin(), reads->end()), reads->end());
    reads->erase(std::remove_if(reads->begin(), reads->end(),
                                [&](Var* var) {
                                  return std::binary_search(writes->begin(), writes->end(), var);
                                }),
                 reads->end());
    return;
  }
  // Ops touch a handful of vars, so quadratic scans beat sorting; keep first occurrences.
  auto contains = [](const std::vector<Var*>& vars, size_t end, Var* var) {
    return std::find(vars.begin(), vars.begin() + end, var) != vars.begin() + end;
  };
  size_t kept = 0;
  for (Var* var : *writes)
    if (!contains(*writes, kept, var)) (*writes)[kept++] = var;
  writes->resize(kept);
  kept = 0;
  for (Var* var : *reads)
    if (!contains(*reads, kept, var) && !contains(*writes, writes->size(), var))
      (*reads)[kept++] = var;
  reads->resize(kept);
}

}  // namespace pymx
