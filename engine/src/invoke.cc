// invoke(): the imperative path of every operator. Checks devices, infers and allocates outputs,
// pushes the kernel to the engine, then reports the op to autograd and to the graph tracer.
// This is on the hot path of every `x + 1` from Python: keep it lean (no maps, no extra copies).
#include <atomic>
#include <unordered_map>

#include "pymx/autograd.h"
#include "pymx/gpu.h"
#include "pymx/graph.h"
#include "pymx/op.h"

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

// Per-worker scratch memory. A worker runs one op at a time, so one buffer per thread and device
// suffices; on a GPU the worker's ops are ordered on its stream, so reuse across ops is safe.
struct Workspace {
  StorageHandle host;
  std::unordered_map<int, StorageHandle> gpu;  // by device id

  ~Workspace() {
    storage::free(host);
    for (auto& kv : gpu) storage::free(kv.second);
  }
};

thread_local Workspace t_workspace;

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

}  // namespace

void seed_rng(uint64_t seed) {
  g_rng_base.store(seed, std::memory_order_relaxed);
  g_rng_counter.store(0, std::memory_order_relaxed);
}

void* OpContext::workspace(size_t bytes) const {
  if (bytes == 0) return nullptr;
  StorageHandle* slot = run.device.is_gpu() ? &t_workspace.gpu[run.device.id] : &t_workspace.host;
  if (slot->size < bytes) {
    // The old block may still be in use by queued kernels on this stream; the allocator is
    // stream-aware, so handing it back now is safe.
    storage::free(*slot);
    *slot = StorageHandle();
    const Device where = run.device.is_gpu() ? run.device : Device::cpu(0);
    *slot = storage::alloc(bytes + bytes / 2, where);
    slot->stream = run.stream;
  }
  return slot->dptr;
}

std::vector<NDArray> invoke(const OpDef& op, const std::vector<NDArray>& inputs,
                            const Attrs& attrs, Device device, const std::vector<NDArray>& out) {
  if (op.num_inputs >= 0)
    PMX_CHECK(static_cast<int>(inputs.size()) == op.num_inputs, "operator '", op.name,
              "' takes ", op.num_inputs, " inputs, got ", inputs.size());

  // All operands must live on one device (full equality, unlike MXNet's device-type check).
  if (!inputs.empty()) {
    device = inputs[0].device();
    for (size_t i = 0; i < inputs.size(); ++i) {
      PMX_CHECK(!inputs[i].is_none(), "operator '", op.name, "': input ", i, " is a none array");
      PMX_CHECK(inputs[i].device() == device, "operator '", op.name,
                "': operands are on different devices: ", device.str(), " and ",
                inputs[i].device().str(), " (input 0 and input ", i, ")");
    }
  }
  // Results of ops on pinned host memory are ordinary host arrays.
  const Device out_device =
      device.type == DeviceType::kCPUPinned ? Device::cpu(device.id) : device;

  const ComputeFn& compute = device.is_gpu() ? op.compute_gpu : op.compute_cpu;
  if (!compute) {
    PMX_CHECK(op.infer, "unknown operator '", op.name, "' (no definition registered)");
    PMX_THROW(Status::kInvalidArg, "operator '", op.name, "' has no kernel for ", device.str(),
              device.is_gpu() && !gpu::built_with_cuda() ? " (pymx was built without CUDA)" : "");
  }

  const int num_outputs = op.num_outputs(attrs);
  std::vector<Shape> in_shapes;
  std::vector<DType> in_dtypes;
  in_shapes.reserve(inputs.size());
  in_dtypes.reserve(inputs.size());
  for (const NDArray& a : inputs) {
    in_shapes.push_back(a.shape());
    in_dtypes.push_back(a.dtype());
  }
  std::vector<Shape> out_shapes(num_outputs);
  std::vector<DType> out_dtypes(num_outputs, DType::kFloat32);
  op.infer(attrs, in_shapes, in_dtypes, &out_shapes, &out_dtypes);

  PMX_CHECK(out.empty() || static_cast<int>(out.size()) == num_outputs, "operator '", op.name,
            "' has ", num_outputs, " outputs, but out= holds ", out.size(), " arrays");
  std::vector<NDArray> outputs(num_outputs);
  for (int i = 0; i < num_outputs; ++i) {
    if (!out.empty() && !out[i].is_none()) {
      validate_out(op, i, out[i], out_shapes[i], out_dtypes[i], out_device);
      outputs[i] = out[i];
    } else {
      outputs[i] = NDArray(out_shapes[i], out_device, out_dtypes[i]);
    }
  }

  std::vector<VarHandle> reads, writes;
  std::vector<TBlob> in_blobs, out_blobs;
  reads.reserve(inputs.size());
  in_blobs.reserve(inputs.size());
  for (const NDArray& a : inputs) {
    reads.push_back(a.var());
    in_blobs.push_back(a.blob());
  }
  writes.reserve(outputs.size() + op.mutate_inputs.size());
  out_blobs.reserve(outputs.size());
  for (const NDArray& a : outputs) {
    writes.push_back(a.var());
    out_blobs.push_back(a.blob());
  }
  for (int m : op.mutate_inputs) writes.push_back(inputs.at(m).var());

  const bool is_train = autograd::is_training();
  const uint64_t seed = op.uses_rng ? next_seed() : 0;
  Engine::get()->push_sync(
      [&compute, attrs, in_blobs = std::move(in_blobs), out_blobs = std::move(out_blobs), is_train,
       seed](RunContext run) {
        OpContext ctx;
        ctx.run = run;
        ctx.attrs = &attrs;
        ctx.is_train = is_train;
        ctx.seed = seed;
        compute(ctx, in_blobs, out_blobs);
      },
      device, std::move(reads), std::move(writes), FnProperty::kNormal, 0, op.name.c_str());

  if (autograd::is_recording()) autograd::record_op(op, attrs, inputs, &outputs, is_train);
  if (graph::is_tracing()) graph::trace_op(op, attrs, inputs, outputs);
  return outputs;
}

std::vector<NDArray> invoke(const std::string& op_name, const std::vector<NDArray>& inputs,
                            const Attrs& attrs) {
  return invoke(op_registry::get(op_name), inputs, attrs);
}

}  // namespace pymx
