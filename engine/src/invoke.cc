// invoke(): the imperative path of every operator. Checks devices, infers and allocates outputs,
// pushes the kernel to the engine, then reports the op to autograd and to the graph tracer.
// This is on the hot path of every `x + 1` from Python: keep it lean (no maps, no extra copies).
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "captured_graphs.h"
#include "determinism.h"
#include "engine_impl.h"
#include "engine_object_pool.h"
#include "invoke.h"
#include "pymx/autograd.h"
#include "pymx/gpu.h"
#include "pymx/graph.h"
#include "pymx/op.h"
#include "pymx/profiler.h"
#include "var.h"

namespace pymx {
namespace {

// Note [RNG seeds]
// ~~~~~~~~~~~~~~~~
// Each invocation of an op with uses_rng takes the next value of one process-wide counter,
// mixed with the seed set by seed_rng (splitmix64). Kernels derive all their random numbers from
// that value with a counter-based generator, so results depend only on the order in which ops
// were pushed, never on which worker ran them or how many workers there are.
std::atomic<uint64_t> g_rng_base{0x5eed5eed5eedULL};
std::atomic<uint64_t> g_rng_counter{0};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t next_seed() {
  return splitmix64(g_rng_base.load(std::memory_order_relaxed) ^
                    splitmix64(g_rng_counter.fetch_add(1, std::memory_order_relaxed)));
}

// Note [Captures and ops that complete later]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An op that completes later (OpDef::completes_later: SyncBatchNorm) returns to its worker before
// its last kernels are launched; another thread launches them on the op's stream when the other
// devices' calls arrive, and completes the op there (which records the engine's event on that
// stream too). Meanwhile the worker goes on with other ops, and were one of them a bulk replay
// being captured as a CUDA graph on the same stream, that other thread's launches would be taken
// into the capture instead of running. So a worker does not capture while an op it started on
// its stream is still to complete: the count below is raised by the worker itself before the
// kernel runs and lowered only after the op has completed, so it cannot rise during a capture
// that found it at zero.
// Every bulk replay on a GPU asks; almost always nothing is pending anywhere, which the total
// answers without the lock. The total is changed under the lock with the map, so a stream's
// own raise (made by the asking worker itself) is always seen.
std::mutex g_later_mu;
std::unordered_map<void*, int> g_completing_later;  // stream -> ops to complete; guarded
std::atomic<int> g_completing_later_total{0};

void count_completing_later(void* stream, int delta) {
  std::lock_guard<std::mutex> lock(g_later_mu);
  int& count = g_completing_later[stream];
  count += delta;
  if (count == 0) g_completing_later.erase(stream);  // STATE CHANGE
  g_completing_later_total.fetch_add(delta, std::memory_order_relaxed);
}

bool completes_later_on(void* stream) {
  if (g_completing_later_total.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(g_later_mu);
  return g_completing_later.count(stream) != 0;
}

// Per-worker scratch memory. A worker runs one op at a time, so one buffer per thread and device
// suffices; on a GPU the worker's ops are ordered on its stream, so reuse across ops is safe.
struct Workspace {
  StorageHandle host;
  std::unordered_map<int, StorageHandle> gpu;  // by device id
  // Changes whenever one of this thread's blocks is reallocated; never the same for two blocks
  // (Note [CUDA graphs for bulk replays] in captured_graphs.cc).
  uint64_t generation = 0;

  // Runs at thread exit, where an exception would terminate the process: a block that cannot be
  // returned (CUDA already torn down at exit, or a failed device) is left to the process's end.
  ~Workspace() {
    try {
      storage::free(host);
    } catch (...) {
    }
    for (auto& kv : gpu) {
      try {
        storage::free(kv.second);
      } catch (...) {
      }
    }
  }
};

thread_local Workspace t_workspace;
std::atomic<uint64_t> g_workspace_generations{0};

void validate_out(const OpDef& op, size_t i, const NDArray& out, const Shape& shape, DType dtype,
                  Device device) {
  PMX_CHECK(out.shape() == shape, "operator '", op.name, "': out[", i, "] has shape ",
            shape_str(out.shape()), " but the result has shape ", shape_str(shape));
  if (out.dtype() != dtype)
    PMX_THROW(Status::kType, "operator '", op.name, "': out[", i, "] has dtype ",
              dtype_name(out.dtype()), " but the result has dtype ", dtype_name(dtype));
  PMX_CHECK(out.device() == device, "operator '", op.name, "': out[", i, "] is on ",
            out.device().str(), " but the operands are on ", device.str());
}

// Note [Invoke without allocations]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Memory allocated on the pushing thread and freed on a worker (the kernel's attributes and
// blobs) takes glibc malloc's slow path on both sides; for a tiny op like `x + 1` that cost more
// than the engine itself. So what the kernel needs lives in a recycled record (RecyclingPool)
// whose vectors and strings keep their capacity, and what is needed only during the call
// (shapes for inference, var lists for the push) lives in per-thread scratch vectors. In the
// steady state a call allocates the engine's function object and the output array.

// An operand whose memory is not yet allocated: its chunk (held, so that the kernel can allocate
// it: see Note [Allocation at first use] in ndarray.cc) and the view's byte offset. Operands
// with memory are not held: as before allocation at first use, the engine keeps their memory
// until the op has run, and a graph's buffer pool must see them free (no holder but the pool)
// as soon as the caller drops them.
struct Operand {
  std::shared_ptr<Chunk> chunk;
  size_t byte_offset = 0;
};

// What a pushed kernel needs: refilled in place for each op (see the note). The blobs get their
// addresses when the kernel runs, from the operands.
struct InvokeRecord {
  Attrs attrs;
  std::vector<TBlob> in_blobs;
  std::vector<TBlob> out_blobs;
  std::vector<VarHandle> in_vars;  // OpContext::input_vars
  std::vector<Operand> in_operands;
  std::vector<Operand> out_operands;
  const ComputeFn* compute = nullptr;
  const char* name = nullptr;  // the op's (the registry's string)
  bool is_train = false;
  uint64_t seed = 0;
  std::atomic<int> refs{0};
  InvokeRecord* pool_next = nullptr;  // RecyclingPool's link
};

// Counted ownership of a record by the engine's function object (std::function must be
// copyable, though the engines only move it). The last owner recycles the record, whether the
// kernel ran, was skipped after an earlier error, or was never pushed.
class RecordRef {
 public:
  explicit RecordRef(InvokeRecord* record) : record_(record) {
    record_->refs.store(1, std::memory_order_relaxed);
  }
  RecordRef(const RecordRef& other) : record_(other.record_) {
    record_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  RecordRef(RecordRef&& other) noexcept : record_(other.record_) { other.record_ = nullptr; }
  RecordRef& operator=(const RecordRef&) = delete;
  ~RecordRef() {
    if (record_ != nullptr && record_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // A recycled record must not keep arrays alive (their memory would outlive the user's
      // last handle until the record's next use).
      release(record_->in_operands);
      release(record_->out_operands);
      RecyclingPool<InvokeRecord>::release(record_);
    }
  }
  InvokeRecord* operator->() const { return record_; }
  InvokeRecord* get() const { return record_; }

 private:
  static void release(std::vector<Operand>& operands) {
    for (Operand& operand : operands)
      if (operand.chunk) operand.chunk->held_by_queued_ops.fetch_sub(1, std::memory_order_relaxed);
    operands.clear();
  }

  InvokeRecord* record_;
};

// The kernel's view of `array`, written into `blob` in place (reusing its shape's capacity).
// Memory not yet allocated gets its address when the kernel runs, from `operand`.
void describe(const NDArray& array, TBlob* blob, Operand* operand) {
  Chunk& chunk = *array.chunk();
  if (chunk.allocated()) {
    void* base = chunk.data(nullptr);
    blob->dptr = base == nullptr ? nullptr : static_cast<char*>(base) + array.byte_offset();
    operand->chunk.reset();
  } else {
    blob->dptr = nullptr;
    operand->chunk = array.chunk();
    operand->chunk->held_by_queued_ops.fetch_add(1, std::memory_order_relaxed);
    operand->byte_offset = array.byte_offset();
  }
  blob->shape = array.shape();
  blob->dtype = array.dtype();
  blob->device = array.device();
}

// Gives the blobs still without memory their address, allocating it here, on the kernel's worker
// and stream.
void address(const std::vector<Operand>& operands, std::vector<TBlob>& blobs, void* stream) {
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].chunk) continue;
    void* base = operands[i].chunk->data(stream);
    blobs[i].dptr = base == nullptr ? nullptr : static_cast<char*>(base) + operands[i].byte_offset;
  }
}

// The kernel of `op` for `device`; throws naming both when there is none.
const ComputeFn& kernel_for(const OpDef& op, Device device) {
  const ComputeFn& compute = device.is_gpu() ? op.compute_gpu : op.compute_cpu;
  if (!compute) {
    PMX_CHECK(op.infer, "unknown operator '", op.name, "' (no definition registered)");
    PMX_THROW(Status::kInvalidArg, "operator '", op.name, "' has no kernel for ", device.str(),
              device.is_gpu() && !gpu::built_with_cuda() ? " (pymx was built without CUDA)" : "");
  }
  return compute;
}

// The vars whose content the kernel may stamp (OpContext::input_stamp): not those of inputs
// the op writes (as an output or a mutated input), nor of memory that code outside the engine
// may write (Note [Content stamps] in var.h).
void fill_input_vars(InvokeRecord* record, const OpDef& op, const NDArray* const* inputs,
                     int num_inputs, const std::vector<NDArray>& outputs) {
  record->in_vars.resize(num_inputs);
  for (int i = 0; i < num_inputs; ++i) {
    const Chunk& chunk = *inputs[i]->chunk();
    const bool stampable = !chunk.external && !chunk.exposed.load(std::memory_order_relaxed);
    record->in_vars[i] = stampable ? chunk.var : nullptr;
  }
  for (const NDArray& output : outputs)
    for (VarHandle& var : record->in_vars)
      if (var == output.var()) var = nullptr;
  op.for_each_mutated_input(num_inputs, [&](int m) { record->in_vars[m] = nullptr; });
}

// Refills `record` for one call of `op` (see Note [Invoke without allocations]).
void fill_record(InvokeRecord* record, const OpDef& op, const Attrs& attrs,
                 const ComputeFn& compute, const NDArray* const* inputs, int num_inputs,
                 const std::vector<NDArray>& outputs) {
  record->attrs = attrs;
  record->compute = &compute;
  record->name = op.name.c_str();
  record->is_train = autograd::is_training();
  record->seed = op.uses_rng ? next_seed() : 0;
  record->in_blobs.resize(num_inputs);
  record->in_operands.resize(num_inputs);
  for (int i = 0; i < num_inputs; ++i)
    describe(*inputs[i], &record->in_blobs[i], &record->in_operands[i]);
  record->out_blobs.resize(outputs.size());
  record->out_operands.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    describe(outputs[i], &record->out_blobs[i], &record->out_operands[i]);
  fill_input_vars(record, op, inputs, num_inputs, outputs);
}

// Gives the recorded operands without memory their address (allocating it, on the worker).
void address_operands(InvokeRecord* record, void* stream) {
  address(record->in_operands, record->in_blobs, stream);
  address(record->out_operands, record->out_blobs, stream);
}

// Calls the recorded kernel; its operands have their addresses. `complete`: see
// OpContext::complete (empty for the kernels that finish by returning).
void call_kernel(InvokeRecord* record, RunContext run, OnComplete complete = OnComplete()) {
  OpContext ctx;
  ctx.run = run;
  ctx.attrs = &record->attrs;
  ctx.is_train = record->is_train;
  ctx.seed = record->seed;
  ctx.input_vars = &record->in_vars;
  ctx.complete = std::move(complete);
  (*record->compute)(ctx, record->in_blobs, record->out_blobs);
}

void run_kernel(InvokeRecord* record, RunContext run) {
  address_operands(record, run.stream);
  call_kernel(record, run);
}

// Per-call working vectors (see the note), one set per thread.
struct Scratch {
  std::vector<Shape> in_shapes, out_shapes;
  std::vector<DType> in_dtypes, out_dtypes;
  std::vector<VarHandle> reads, writes;
  bool in_use = false;
};

thread_local Scratch t_scratch;

// The thread's scratch, or a fresh one when invoke runs inside invoke (a kernel run inline by
// the naive engine that invokes an op itself).
class ScratchLease {
 public:
  ScratchLease() {
    if (t_scratch.in_use) {
      own_ = std::make_unique<Scratch>();
      scratch = own_.get();
    } else {
      scratch = &t_scratch;
    }
    scratch->in_use = true;
  }
  ~ScratchLease() { scratch->in_use = false; }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;

  Scratch* scratch;

 private:
  std::unique_ptr<Scratch> own_;
};

}  // namespace

void seed_rng(uint64_t seed) {
  g_rng_base.store(seed, std::memory_order_relaxed);
  g_rng_counter.store(0, std::memory_order_relaxed);
}

ContentStamp OpContext::input_stamp(size_t i) const {
  if (input_vars == nullptr || i >= input_vars->size() || (*input_vars)[i] == nullptr) return {};
  return (*input_vars)[i]->stamp();
}

void* OpContext::workspace(size_t bytes) const {
  if (bytes == 0) return nullptr;
  StorageHandle* slot = run.device.is_gpu() ? &t_workspace.gpu[run.device.id] : &t_workspace.host;
  if (slot->size < bytes) {
    // The old block may still be in use by queued kernels on this stream; the allocator is
    // stream-aware, so handing it back now is safe, and so is taking a block freed on it.
    storage::free(*slot);
    *slot = StorageHandle();
    const Device where = run.device.is_gpu() ? run.device : Device::cpu(0);
    *slot = storage::alloc(bytes + bytes / 2, where, run.stream);
    slot->stream = run.stream;
    t_workspace.generation = g_workspace_generations.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  return slot->dptr;
}

namespace {

// Runs the op. `inputs_vector`, when the caller has one, is `inputs` as a vector (the tracer
// takes a vector); otherwise one is built only when tracing.
void invoke_impl(const OpDef& op, const NDArray* const* inputs, int num_inputs,
                 const std::vector<NDArray>* inputs_vector, const Attrs& attrs, Device device,
                 const NDArray* const* out, int num_out, std::vector<NDArray>* outputs) {
  if (op.num_inputs >= 0)
    PMX_CHECK(num_inputs == op.num_inputs, "operator '", op.name, "' takes ", op.num_inputs,
              " inputs, got ", num_inputs);

  // All operands must live on one device (full equality, unlike MXNet's device-type check).
  if (num_inputs > 0) {
    device = inputs[0]->device();
    for (int i = 0; i < num_inputs; ++i) {
      PMX_CHECK(!inputs[i]->is_none(), "operator '", op.name, "': input ", i, " is a none array");
      PMX_CHECK(inputs[i]->device() == device, "operator '", op.name,
                "': operands are on different devices: ", device.str(), " and ",
                inputs[i]->device().str(), " (input 0 and input ", i, ")");
    }
  }
  // Results of ops on pinned host memory are ordinary host arrays.
  const Device out_device =
      device.type == DeviceType::kCPUPinned ? Device::cpu(device.id) : device;

  const ComputeFn& compute = kernel_for(op, device);

  ScratchLease lease;
  Scratch& s = *lease.scratch;
  const int num_outputs = op.num_outputs(attrs);
  s.in_shapes.resize(num_inputs);
  s.in_dtypes.resize(num_inputs);
  for (int i = 0; i < num_inputs; ++i) {
    s.in_shapes[i] = inputs[i]->shape();
    s.in_dtypes[i] = inputs[i]->dtype();
  }
  s.out_shapes.resize(num_outputs);
  for (Shape& shape : s.out_shapes) shape.clear();
  s.out_dtypes.assign(num_outputs, DType::kFloat32);
  op.infer(attrs, s.in_shapes, s.in_dtypes, &s.out_shapes, &s.out_dtypes);

  PMX_CHECK(num_out == 0 || num_out == num_outputs, "operator '", op.name, "' has ",
            num_outputs, " outputs, but out= holds ", num_out, " arrays");
  outputs->clear();
  outputs->reserve(num_outputs);
  for (int i = 0; i < num_outputs; ++i) {
    if (num_out > 0 && out[i] != nullptr && !out[i]->is_none()) {
      validate_out(op, i, *out[i], s.out_shapes[i], s.out_dtypes[i], out_device);
      outputs->push_back(*out[i]);
    } else {
      outputs->emplace_back(s.out_shapes[i], out_device, s.out_dtypes[i],
                            Allocation::kAtFirstUse);
    }
  }

  if (num_out > 0 && autograd::is_recording())
    autograd::check_recorded_outputs(op, inputs, num_inputs, *outputs);
  if (op.on_push) op.on_push(attrs, device);
  RecordRef record(RecyclingPool<InvokeRecord>::acquire());
  fill_record(record.get(), op, attrs, compute, inputs, num_inputs, *outputs);

  s.reads.clear();
  s.writes.clear();
  for (int i = 0; i < num_inputs; ++i) s.reads.push_back(inputs[i]->var());
  for (const NDArray& a : *outputs) s.writes.push_back(a.var());
  op.for_each_mutated_input(num_inputs, [&](int m) {
    PMX_ASSERT(m >= 0 && m < num_inputs, "operator '", op.name, "' mutates input ", m, " of ",
               num_inputs);
    s.writes.push_back(inputs[m]->var());
  });

  const bool is_train = record->is_train;
  // Every engine behind Engine::get() is an EngineBase; push_sync_fn takes the var lists by
  // reference, so the scratch vectors are reused instead of moved away.
  if (op.completes_later) {
    // The record lives in the engine's function object, which the engine destroys only after
    // the op completed, so the kernel's blobs stay valid until it calls `complete`.
    Engine::get()->push_async(
        [record = std::move(record)](RunContext run, OnComplete complete) {
          // The kernel may complete the op before it returns, and the engine then destroys this
          // function object: the record must outlive the call on its own reference.
          const RecordRef keep = record;
          address_operands(keep.get(), run.stream);
          if (run.stream == nullptr) {
            call_kernel(keep.get(), run, std::move(complete));
            return;
          }
          // Note [Captures and ops that complete later]. The count is lowered once: after the
          // op completed, or when the kernel throws instead (the engine then completes it).
          count_completing_later(run.stream, 1);
          const auto lowered = std::make_shared<std::atomic<bool>>(false);
          const auto lower = [lowered, stream = run.stream] {
            if (!lowered->exchange(true)) count_completing_later(stream, -1);
          };
          try {
            call_kernel(keep.get(), run, OnComplete([complete, lower](std::exception_ptr error) {
                          complete(std::move(error));
                          lower();
                        }));
          } catch (...) {
            lower();
            throw;
          }
        },
        device, s.reads, s.writes, FnProperty::kAsync, 0, op.name.c_str());
  } else {
    static_cast<EngineBase*>(Engine::get())
        ->push_sync_fn(
            [record = std::move(record)](RunContext run) { run_kernel(record.get(), run); },
            device, s.reads, s.writes, FnProperty::kNormal, op.name.c_str());
  }

  if (autograd::is_recording())
    autograd::record_op(op, attrs, inputs, num_inputs, outputs, is_train);
  if (!graph::is_tracing()) return;
  std::vector<NDArray> built_inputs;
  if (inputs_vector == nullptr) {
    built_inputs.reserve(num_inputs);
    for (int i = 0; i < num_inputs; ++i) built_inputs.push_back(*inputs[i]);
    inputs_vector = &built_inputs;
  }
  graph::trace_op(op, attrs, *inputs_vector, *outputs);
}

}  // namespace

void invoke_into(const OpDef& op, const NDArray* const* inputs, int num_inputs,
                 const Attrs& attrs, Device device, const NDArray* const* out, int num_out,
                 std::vector<NDArray>* outputs) {
  invoke_impl(op, inputs, num_inputs, nullptr, attrs, device, out, num_out, outputs);
}

std::vector<NDArray> invoke(const OpDef& op, const std::vector<NDArray>& inputs,
                            const Attrs& attrs, Device device, const std::vector<NDArray>& out) {
  const ArrayPointers input_pointers(inputs.size(), [&](size_t i) { return &inputs[i]; });
  const ArrayPointers out_pointers(out.size(), [&](size_t i) { return &out[i]; });
  std::vector<NDArray> outputs;
  invoke_impl(op, input_pointers.data(), static_cast<int>(inputs.size()), &inputs, attrs, device,
              out_pointers.data(), static_cast<int>(out.size()), &outputs);
  return outputs;
}

std::vector<NDArray> invoke(const std::string& op_name, const std::vector<NDArray>& inputs,
                            const Attrs& attrs) {
  return invoke(op_registry::get(op_name), inputs, attrs);
}

// See Note [Bulk execution] in invoke.h.
struct BulkInvoke::Calls {
  std::vector<RecordRef> records;
  size_t num_before_capture = 0;  // records[0, num_before_capture) are never captured
  std::vector<VarHandle> reads, writes;
  bool draws_random = false;  // a call draws from its seed: never captured
};

namespace {

using Records = std::vector<RecordRef>;

// Runs the kernels in order, each a profiler span of its own while the profiler records.
void run_in_order(const Records& records, RunContext run) {
  for (const RecordRef& record : records) {
    if (!profiler::is_recording()) {
      run_kernel(record.get(), run);
      continue;
    }
    profiler::Span span = profiler::begin_op(run.device, run.stream);
    try {
      run_kernel(record.get(), run);
    } catch (...) {
      profiler::end_op(&span, record->name, run.device, run.stream);
      throw;
    }
    profiler::end_op(&span, record->name, run.device, run.stream);
  }
}

void append_blob(const TBlob& blob, CaptureKey* key) {
  key->push_back(reinterpret_cast<intptr_t>(blob.dptr));
  key->push_back(static_cast<int64_t>(blob.dtype));
  key->push_back(static_cast<int64_t>(blob.shape.size()));
  key->insert(key->end(), blob.shape.begin(), blob.shape.end());
}

// See Note [CUDA graphs for bulk replays]: operands are allocated first and the records before
// `first_captured` run directly; the rest run from a captured graph, are captured, or run
// directly.
void run_captured(const Records& records, size_t first_captured, CapturedGraphs& graphs,
                  RunContext run) {
  for (const RecordRef& record : records) address_operands(record.get(), run.stream);
  for (size_t i = 0; i < first_captured; ++i) call_kernel(records[i].get(), run);
  CaptureKey key;
  for (size_t i = first_captured; i < records.size(); ++i) {
    const InvokeRecord& record = *records[i].get();
    key.push_back(record.is_train);
    for (const TBlob& blob : record.in_blobs) append_blob(blob, &key);
    for (const TBlob& blob : record.out_blobs) append_blob(blob, &key);
  }
  key.push_back(static_cast<int64_t>(t_workspace.generation));
  key.push_back(reinterpret_cast<intptr_t>(run.stream));
  key.push_back(deterministic());  // the mode picks kernels (Note [Deterministic mode])
  graphs.run(
      key, run.stream,
      [&] {
        for (size_t i = first_captured; i < records.size(); ++i) call_kernel(records[i].get(), run);
      },
      [] { return t_workspace.generation; });
}

}  // namespace

BulkInvoke::BulkInvoke(Device device, std::shared_ptr<CapturedGraphs> graphs)
    : device_(device), graphs_(std::move(graphs)), calls_(std::make_unique<Calls>()) {}

BulkInvoke::~BulkInvoke() = default;

void BulkInvoke::add(const OpDef& op, const Attrs& attrs, const std::vector<NDArray>& inputs,
                     const std::vector<NDArray>& outputs) {
  for (const std::vector<NDArray>* arrays : {&inputs, &outputs})
    for (const NDArray& array : *arrays)
      PMX_CHECK(array.device() == device_, "operator '", op.name, "': an operand is on ",
                array.device().str(), " but the bulk push runs on ", device_.str());
  const ArrayPointers input_pointers(inputs.size(), [&](size_t i) { return &inputs[i]; });
  calls_->records.emplace_back(RecyclingPool<InvokeRecord>::acquire());
  fill_record(calls_->records.back().get(), op, attrs, kernel_for(op, device_),
              input_pointers.data(), static_cast<int>(inputs.size()), outputs);
  const bool is_train = calls_->records.back()->is_train;
  const bool draws = op.uses_rng && (!op.draws_random || op.draws_random(attrs, is_train));
  calls_->draws_random = calls_->draws_random || draws;
  for (const NDArray& input : inputs) calls_->reads.push_back(input.var());
  for (const NDArray& output : outputs) calls_->writes.push_back(output.var());
  op.for_each_mutated_input(static_cast<int>(inputs.size()),
                            [&](int m) { calls_->writes.push_back(inputs.at(m).var()); });
}

void BulkInvoke::add_before_capture(const OpDef& op, const Attrs& attrs,
                                    const std::vector<NDArray>& inputs,
                                    const std::vector<NDArray>& outputs) {
  PMX_ASSERT(calls_->num_before_capture == calls_->records.size(),
             "add_before_capture after add (operator '", op.name, "')");
  add(op, attrs, inputs, outputs);
  ++calls_->num_before_capture;
}

void BulkInvoke::push(const char* name) {
  // The bulk op holds its writes' vars for its whole run, so their versions stay put while its
  // kernels write them: a buffer rewritten inside the run (a reused static buffer) would show
  // one stamp for different contents. Its readers get no stamp (Note [Content stamps]).
  std::vector<VarHandle> written = calls_->writes;
  std::sort(written.begin(), written.end());
  for (RecordRef& record : calls_->records)
    for (VarHandle& var : record->in_vars)
      if (var != nullptr && std::binary_search(written.begin(), written.end(), var)) var = nullptr;
  auto records = std::make_shared<Records>(std::move(calls_->records));
  const size_t first_captured = calls_->num_before_capture;
  // A seed is an argument of the captured kernels, new for every call: never captured.
  std::shared_ptr<CapturedGraphs> graphs = calls_->draws_random ? nullptr : graphs_;
  static_cast<EngineBase*>(Engine::get())
      ->push_sync_fn(
          [records, first_captured, graphs](RunContext run) {
            if (graphs != nullptr && run.stream != nullptr && !profiler::is_recording() &&
                !completes_later_on(run.stream)) {  // Note [Captures and ops that complete later]
              run_captured(*records, first_captured, *graphs, run);
            } else {
              run_in_order(*records, run);
            }
          },
          device_, calls_->reads, calls_->writes, FnProperty::kNormal, name);
  calls_ = std::make_unique<Calls>();
}

}  // namespace pymx
