// The C ABI (engine/include/pymx/c_api.h): thin wrappers that translate handles and statuses.
// Each body sits between PMX_API_BEGIN/END, so no exception crosses the boundary.
#include "pymx/c_api.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "c_api_internal.h"
#include "captured_graphs.h"
#include "cpu_isa.h"
#include "determinism.h"
#include "engine_impl.h"
#include "invoke.h"
#include "pymx/autograd.h"
#include "pymx/engine.h"
#include "pymx/gpu.h"
#include "pymx/ndarray.h"
#include "pymx/op.h"
#include "pymx/profiler.h"
#include "pymx/storage.h"

namespace pymx {
namespace c_api {
namespace {

thread_local std::string last_error;
thread_local std::vector<PmxArray*> returned_arrays;
thread_local std::vector<const char*> returned_names;
thread_local std::string returned_text;

Var* var_of(PmxVar* var) {
  PMX_CHECK(var != nullptr, "expected a var handle, got NULL");
  return reinterpret_cast<Var*>(var);
}

std::vector<VarHandle> vars_of(PmxVar* const* vars, int num) {
  PMX_CHECK(num >= 0 && (num == 0 || vars != nullptr), "invalid var list: ", num,
            " vars at address ", static_cast<const void*>(vars));
  std::vector<VarHandle> out;
  out.reserve(num);
  for (int i = 0; i < num; ++i) out.push_back(var_of(vars[i]));
  return out;
}

// Raises a ValueError-class error naming the id and the count for a GPU that is not there.
void check_device_exists(Device device) {
  PMX_CHECK(device.id >= 0, "device id must be non-negative, got ", device.str());
  if (!device.is_gpu()) return;
  const int count = visible_gpu_count();
  PMX_CHECK(device.id < count, device.str(), " does not exist: ", count, " GPU(s) visible",
            gpu::built_with_cuda() ? "" : " (pymx was built without CUDA)");
}

// The length of a C list of array handles, checked.
size_t array_count(PmxArray* const* arrays, int num) {
  PMX_CHECK(num >= 0 && (num == 0 || arrays != nullptr), "invalid array list: ", num,
            " arrays at address ", static_cast<const void*>(arrays));
  return static_cast<size_t>(num);
}

Shape shape_of(const int64_t* shape, int ndim) {
  PMX_CHECK(ndim >= 0 && (ndim == 0 || shape != nullptr), "invalid shape: ndim ", ndim,
            " at address ", static_cast<const void*>(shape));
  Shape out(shape, shape + ndim);
  for (int64_t d : out) PMX_CHECK(d >= 0, "negative dimension in shape ", shape_str(out));
  return out;
}

// An engine callback from C and what it owns. The destructor releases the user data, so it runs
// exactly once whether the op ran, failed, or was never pushed.
struct CCallback {
  PmxEngineFn fn;
  void* user_data;
  PmxUserDataFree user_data_free;
  std::string name;

  CCallback(PmxEngineFn f, void* data, PmxUserDataFree data_free, const char* op_name)
      : fn(f), user_data(data), user_data_free(data_free),
        name(op_name != nullptr ? op_name : "c_callback") {}
  CCallback(const CCallback&) = delete;
  CCallback& operator=(const CCallback&) = delete;
  ~CCallback() { release(); }
  // Frees user_data once. Called right after fn, so that it happens before the op completes and
  // a pmx_var_wait on its writes returns only afterwards; the destructor covers skipped ops.
  void release() {
    if (user_data_free != nullptr) user_data_free(user_data);
    user_data_free = nullptr;
  }
};

}  // namespace

int set_last_error(Status status, const char* message) {
  last_error = message != nullptr ? message : "";
  return static_cast<int>(status);
}

int handle_exception() {
  try {
    throw;
  } catch (const Error& e) {
    return set_last_error(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return set_last_error(Status::kOutOfMemory, "out of host memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return set_last_error(Status::kInternal, e.what());
  } catch (...) {
    return set_last_error(Status::kInternal, "unknown C++ exception");
  }
}

void return_arrays(std::vector<NDArray>&& arrays, int* out_num, PmxArray*** out_arrays) {
  // The list holds only pointers the caller now owns, so reusing it frees nothing.
  returned_arrays.clear();
  returned_arrays.reserve(arrays.size());
  for (NDArray& a : arrays) returned_arrays.push_back(new_handle(std::move(a)));
  *out_num = static_cast<int>(returned_arrays.size());
  *out_arrays = returned_arrays.data();
}

Device make_device(int device_type, int device_id) {
  PMX_CHECK(device_type == PMX_DEVICE_CPU || device_type == PMX_DEVICE_GPU ||
                device_type == PMX_DEVICE_CPU_PINNED,
            "unknown device type ", device_type, " (cpu = 1, gpu = 2, cpu_pinned = 3)");
  return Device{static_cast<DeviceType>(device_type), device_id};
}

DType make_dtype(int dtype) {
  PMX_CHECK((dtype >= PMX_FLOAT32 && dtype <= PMX_BOOL) || dtype == PMX_BFLOAT16,
            "unknown dtype flag ", dtype, " (0-7, or 12 for bfloat16)");
  return static_cast<DType>(dtype);
}

}  // namespace c_api
}  // namespace pymx

using namespace pymx;          // NOLINT: this file is the boundary layer
using namespace pymx::c_api;  // NOLINT

// ---------------------------------------------------------------------------------------------
// Errors and version
// ---------------------------------------------------------------------------------------------

const char* pmx_last_error(void) { return last_error.c_str(); }

int pmx_error_set(int status, const char* message) {
  last_error = message != nullptr ? message : "";
  return status;
}

int pmx_api_version(int* out_major, int* out_minor) {
  *out_major = PMX_API_VERSION_MAJOR;
  *out_minor = PMX_API_VERSION_MINOR;
  return PMX_OK;
}

// ---------------------------------------------------------------------------------------------
// Devices and memory
// ---------------------------------------------------------------------------------------------

int pmx_gpu_count(int* out_count) {
  PMX_API_BEGIN();
  *out_count = visible_gpu_count();
  PMX_API_END();
}

int pmx_cpu_isa(int* out_level) {
  PMX_API_BEGIN();
  *out_level = static_cast<int>(cpu_isa());
  PMX_API_END();
}

int pmx_gpu_physical_device(int device_id, int* out_cuda_device) {
  PMX_API_BEGIN();
  *out_cuda_device = gpu::physical_device(device_id);
  PMX_API_END();
}

int pmx_gpu_memory_info(int device_id, uint64_t* out_free, uint64_t* out_total) {
  PMX_API_BEGIN();
  if (!gpu::built_with_cuda()) {
    PMX_THROW(Status::kNoCuda, "gpu_memory_info(", device_id,
              ") needs a GPU, but pymx was built without CUDA");
  }
  check_device_exists(Device::gpu(device_id));
  uint64_t free_bytes = 0, total_bytes = 0;
  gpu::memory_info(device_id, &free_bytes, &total_bytes);
  *out_free = free_bytes;
  *out_total = total_bytes;
  PMX_API_END();
}

int pmx_storage_empty_cache(int device_type, int device_id) {
  PMX_API_BEGIN();
  const Device device = make_device(device_type, device_id);
  check_device_exists(device);
  storage::empty_cache(device);
  PMX_API_END();
}

int pmx_storage_stats(int device_type, int device_id, PmxMemoryStats* out_stats) {
  PMX_API_BEGIN();
  const Device device = make_device(device_type, device_id);
  check_device_exists(device);
  const MemoryStats s = storage::stats(device);
  *out_stats = PmxMemoryStats{s.in_use, s.cached, s.peak_in_use, s.num_allocs};
  PMX_API_END();
}

// ---------------------------------------------------------------------------------------------
// Arrays
// ---------------------------------------------------------------------------------------------

int pmx_array_create(const int64_t* shape, int ndim, int dtype, int device_type, int device_id,
                     PmxArray** out_array) {
  PMX_API_BEGIN();
  const Device device = make_device(device_type, device_id);
  check_device_exists(device);
  *out_array = new_handle(NDArray(shape_of(shape, ndim), device, make_dtype(dtype)));
  PMX_API_END();
}

int pmx_array_free(PmxArray* array) {
  PMX_API_BEGIN();
  delete array;
  PMX_API_END();
}

int pmx_array_free_after_stream(PmxArray* array, void* stream) {
  PMX_API_BEGIN();
  std::unique_ptr<PmxArray> owned(array);
  const Device device = array_of(array).device();
  if (device.is_gpu()) gpu::synchronize_foreign_stream(device.id, stream);
  PMX_API_END();
}

int pmx_array_shape(const PmxArray* array, int* out_ndim, const int64_t** out_shape) {
  PMX_API_BEGIN();
  const Shape& shape = array_of(array).shape();
  *out_ndim = static_cast<int>(shape.size());
  *out_shape = shape.data();
  PMX_API_END();
}

int pmx_array_dtype(const PmxArray* array, int* out_dtype) {
  PMX_API_BEGIN();
  *out_dtype = static_cast<int>(array_of(array).dtype());
  PMX_API_END();
}

int pmx_array_device(const PmxArray* array, int* out_device_type, int* out_device_id) {
  PMX_API_BEGIN();
  const Device device = array_of(array).device();
  *out_device_type = static_cast<int>(device.type);
  *out_device_id = device.id;
  PMX_API_END();
}

int pmx_array_data(const PmxArray* array, void** out_data) {
  PMX_API_BEGIN();
  const NDArray& a = array_of(array);
  if (a.chunk()) a.chunk()->exposed.store(true, std::memory_order_relaxed);
  *out_data = a.size() == 0 ? nullptr : a.blob().dptr;
  PMX_API_END();
}

int pmx_array_var(const PmxArray* array, PmxVar** out_var) {
  PMX_API_BEGIN();
  *out_var = reinterpret_cast<PmxVar*>(array_of(array).var());
  PMX_API_END();
}

int pmx_array_same(const PmxArray* a, const PmxArray* b, int* out_same) {
  PMX_API_BEGIN();
  *out_same = array_of(a).same_array(array_of(b)) ? 1 : 0;
  PMX_API_END();
}

int pmx_array_memory_range(const PmxArray* array, uintptr_t* out_begin, uintptr_t* out_end) {
  PMX_API_BEGIN();
  const NDArray& a = array_of(array);
  // Unlike pmx_array_data the address is not handed out to be written: the chunk stays unexposed.
  const uintptr_t begin = a.size() == 0 ? 0 : reinterpret_cast<uintptr_t>(a.blob().dptr);
  *out_begin = begin;
  *out_end = a.size() == 0 ? 0 : begin + a.nbytes();
  PMX_API_END();
}

int pmx_array_reshape(const PmxArray* array, const int64_t* shape, int ndim,
                      PmxArray** out_array) {
  PMX_API_BEGIN();
  *out_array = new_handle(array_of(array).reshape_view(shape_of(shape, ndim)));
  PMX_API_END();
}

int pmx_array_slice(const PmxArray* array, int64_t begin, int64_t end, PmxArray** out_array) {
  PMX_API_BEGIN();
  *out_array = new_handle(array_of(array).slice_view(begin, end));
  PMX_API_END();
}

int pmx_array_at(const PmxArray* array, int64_t index, PmxArray** out_array) {
  PMX_API_BEGIN();
  *out_array = new_handle(array_of(array).at_view(index));
  PMX_API_END();
}

int pmx_array_copy_from_cpu(PmxArray* array, const void* data, size_t nbytes) {
  PMX_API_BEGIN();
  NDArray& a = array_of(array);
  PMX_CHECK(data != nullptr || nbytes == 0, "copy_from_cpu: NULL source for ", nbytes, " bytes");
  a.sync_copy_from_cpu(data, nbytes);
  PMX_API_END();
}

int pmx_array_copy_to_cpu(const PmxArray* array, void* data, size_t nbytes) {
  PMX_API_BEGIN();
  const NDArray& a = array_of(array);
  PMX_CHECK(data != nullptr || nbytes == 0, "copy_to_cpu: NULL destination for ", nbytes,
            " bytes");
  a.sync_copy_to_cpu(data, nbytes);
  PMX_API_END();
}

int pmx_array_copy_to_device(const PmxArray* array, int device_type, int device_id,
                             PmxArray** out_array) {
  PMX_API_BEGIN();
  const Device device = make_device(device_type, device_id);
  check_device_exists(device);
  *out_array = new_handle(array_of(array).copy_to(device));
  PMX_API_END();
}

int pmx_array_copy_into(const PmxArray* src, PmxArray* dst) {
  PMX_API_BEGIN();
  const NDArray& from = array_of(src);
  NDArray& to = array_of(dst);
  PMX_CHECK(from.shape() == to.shape(), "copyto: shape mismatch: source ", shape_str(from.shape()),
            " vs destination ", shape_str(to.shape()));
  from.copy_to(to);
  PMX_API_END();
}

int pmx_array_wait_to_read(const PmxArray* array) {
  PMX_API_BEGIN();
  array_of(array).wait_to_read();
  PMX_API_END();
}

int pmx_array_wait_to_write(const PmxArray* array) {
  PMX_API_BEGIN();
  array_of(array).wait_to_write();
  PMX_API_END();
}

// ---------------------------------------------------------------------------------------------
// Operators
// ---------------------------------------------------------------------------------------------

int pmx_op_find(const char* name, PmxOp** out_op) {
  PMX_API_BEGIN();
  PMX_CHECK(name != nullptr, "pmx_op_find: NULL name");
  *out_op = reinterpret_cast<PmxOp*>(const_cast<OpDef*>(&op_registry::get(name)));
  PMX_API_END();
}

int pmx_op_list(int* out_count, const char* const** out_names) {
  PMX_API_BEGIN();
  // The names live in the registry's OpDefs, which are never destroyed.
  std::vector<std::string> names = op_registry::names();
  std::sort(names.begin(), names.end());
  returned_names.clear();
  for (const std::string& name : names) returned_names.push_back(op_registry::get(name).name.c_str());
  *out_count = static_cast<int>(returned_names.size());
  *out_names = returned_names.data();
  PMX_API_END();
}

int pmx_op_invoke(const PmxOp* op, int num_inputs, PmxArray* const* inputs, int num_attrs,
                  const char* const* attr_keys, const char* const* attr_values, int device_type,
                  int device_id, int num_outs, PmxArray* const* outs, int* out_num_outputs,
                  PmxArray*** out_outputs) {
  PMX_API_BEGIN();
  // The hot path of every op called from Python: no NDArray copies, and the attributes are
  // parsed into a per-thread Attrs whose strings keep their capacity across calls.
  PMX_CHECK(op != nullptr, "pmx_op_invoke: NULL operator");
  const OpDef& def = *reinterpret_cast<const OpDef*>(op);
  const ArrayPointers in(array_count(inputs, num_inputs),
                         [&](size_t i) { return &array_of(inputs[i]); });
  PMX_CHECK(num_attrs >= 0 && (num_attrs == 0 || (attr_keys != nullptr && attr_values != nullptr)),
            "operator ", def.name, ": invalid attribute list (", num_attrs, " entries)");
  thread_local Attrs attrs;
  attrs.clear();
  for (int i = 0; i < num_attrs; ++i) {
    PMX_CHECK(attr_keys[i] != nullptr && attr_values[i] != nullptr, "operator ", def.name,
              ": attribute ", i, " has a NULL key or value");
    attrs.set(attr_keys[i], attr_values[i]);
  }
  Device device = make_device(device_type, device_id);
  if (num_inputs == 0) check_device_exists(device);
  // A NULL out= handle asks for that result to be allocated.
  const ArrayPointers out(array_count(outs, num_outs), [&](size_t i) {
    return outs[i] == nullptr ? nullptr : &array_of(outs[i]);
  });
  std::vector<NDArray> results;
  invoke_into(def, in.data(), num_inputs, attrs, device, out.data(), num_outs, &results);
  // A recorded op's node is set on its results; an out= handle is another copy of its array, so
  // it takes the entry too (else a later backward would miss the op).
  for (int i = 0; i < num_outs; ++i)
    if (outs[i] != nullptr) array_of(outs[i]).autograd_entry() = results[i].autograd_entry();
  return_arrays(std::move(results), out_num_outputs, out_outputs);
  PMX_API_END();
}

int pmx_random_seed(uint64_t seed) {
  PMX_API_BEGIN();
  seed_rng(seed);
  PMX_API_END();
}

int pmx_deterministic_set(int on, int* out_previous) {
  PMX_API_BEGIN();
  PMX_CHECK(on == 0 || on == 1, "pmx_deterministic_set: on=", on, " is not 0 or 1");
  const bool previous = set_deterministic(on == 1);
  if (out_previous != nullptr) *out_previous = previous ? 1 : 0;
  PMX_API_END();
}

int pmx_deterministic_get(int* out_on) {
  PMX_API_BEGIN();
  PMX_CHECK(out_on != nullptr, "pmx_deterministic_get: NULL out_on");
  *out_on = deterministic() ? 1 : 0;
  PMX_API_END();
}

// ---------------------------------------------------------------------------------------------
// Engine
// ---------------------------------------------------------------------------------------------

int pmx_var_new(PmxVar** out_var) {
  PMX_API_BEGIN();
  *out_var = reinterpret_cast<PmxVar*>(Engine::get()->new_var());
  PMX_API_END();
}

int pmx_var_free(PmxVar* var) {
  PMX_API_BEGIN();
  if (var != nullptr) Engine::get()->delete_var(SyncFn(), Device::cpu(), var_of(var));
  PMX_API_END();
}

int pmx_engine_push(PmxEngineFn fn, void* user_data, PmxUserDataFree user_data_free,
                    PmxVar* const* reads, int num_reads, PmxVar* const* writes, int num_writes,
                    int device_type, int device_id, const char* name) {
  PMX_API_BEGIN();
  std::shared_ptr<CCallback> callback;
  try {
    callback = std::make_shared<CCallback>(fn, user_data, user_data_free, name);
  } catch (...) {
    if (user_data_free != nullptr) user_data_free(user_data);
    throw;
  }
  // `callback` owns user_data from here on: it is released exactly once, even on failure.
  PMX_CHECK(fn != nullptr, "pmx_engine_push: NULL function");
  const Device device = make_device(device_type, device_id);
  check_device_exists(device);
  std::vector<VarHandle> read_vars = vars_of(reads, num_reads);
  std::vector<VarHandle> write_vars = vars_of(writes, num_writes);
  Engine::get()->push_sync(
      [callback](RunContext rc) {
        last_error.clear();
        const int status = callback->fn(callback->user_data, static_cast<int>(rc.device.type),
                                        rc.device.id, rc.stream);
        callback->release();
        if (status == PMX_OK) return;
        std::string message = last_error.empty()
                                  ? str_cat("engine callback '", callback->name,
                                            "' failed with status ", status)
                                  : last_error;
        throw Error(c_api::status_of_callback(status), message);
      },
      device, std::move(read_vars), std::move(write_vars), FnProperty::kNormal, 0,
      callback->name.c_str());
  PMX_API_END();
}

int pmx_var_wait(PmxVar* var) {
  PMX_API_BEGIN();
  Engine::get()->wait_for_var(var_of(var));
  PMX_API_END();
}

int pmx_engine_wait_all(void) {
  PMX_API_BEGIN();
  Engine::get()->wait_for_all();
  PMX_API_END();
}

int pmx_engine_dump(const char** out_text) {
  PMX_API_BEGIN();
  returned_text = Engine::get()->dump();
  *out_text = returned_text.c_str();
  PMX_API_END();
}

int pmx_cuda_graph_stats(uint64_t* out_captured, uint64_t* out_replayed, uint64_t* out_refused) {
  PMX_API_BEGIN();
  const CaptureStats stats = capture_stats();
  *out_captured = stats.captured;
  *out_replayed = stats.replayed;
  *out_refused = stats.refused;
  PMX_API_END();
}

// ---------------------------------------------------------------------------------------------
// Operator profiler
// ---------------------------------------------------------------------------------------------

int pmx_profiler_set_running(int running) {
  PMX_API_BEGIN();
  profiler::set_running(running != 0);
  PMX_API_END();
}

int pmx_profiler_set_paused(int paused) {
  PMX_API_BEGIN();
  profiler::set_paused(paused != 0);
  PMX_API_END();
}

int pmx_profiler_trace_json(const char** out_json) {
  PMX_API_BEGIN();
  returned_text = profiler::trace_json();
  *out_json = returned_text.c_str();
  PMX_API_END();
}

int pmx_profiler_aggregate_json(int reset, const char** out_json) {
  PMX_API_BEGIN();
  returned_text = profiler::aggregate_json(reset != 0);
  *out_json = returned_text.c_str();
  PMX_API_END();
}

int pmx_profiler_clear(void) {
  PMX_API_BEGIN();
  profiler::clear();
  PMX_API_END();
}

// ---------------------------------------------------------------------------------------------
// External memory
// ---------------------------------------------------------------------------------------------

int pmx_array_from_external(void* data, const int64_t* shape, int ndim, int dtype,
                            int device_type, int device_id, PmxUserDataFree release,
                            void* user_data, PmxArray** out_array) {
  PMX_API_BEGIN();
  const Device device = make_device(device_type, device_id);
  check_device_exists(device);
  const Shape dims = shape_of(shape, ndim);
  const DType type = make_dtype(dtype);
  // Allocated first: once the array exists, a failure would release the caller's memory.
  auto handle = std::make_unique<PmxArray>();
  // pymx's kernels run on their own streams; the producer's work is on the legacy default
  // stream (from_dlpack asks for it there). The caller's current device is left as it was.
  if (device.is_gpu()) gpu::synchronize_foreign_stream(device.id, gpu::kLegacyDefaultStream);
  ExternalMemory memory;
  memory.dptr = data;
  memory.bytes = shape_size(dims) * dtype_size(type);
  memory.device = device;
  memory.release = release;
  memory.context = user_data;
  handle->array = NDArray::from_external(memory, dims, type);
  *out_array = handle.release();
  PMX_API_END();
}

// ---------------------------------------------------------------------------------------------
// Autograd gradient state
// ---------------------------------------------------------------------------------------------

int pmx_autograd_get_fresh_grad(const PmxArray* variable, int* out_fresh) {
  PMX_API_BEGIN();
  *out_fresh = autograd::fresh_grad(array_of(variable)) ? 1 : 0;
  PMX_API_END();
}

int pmx_autograd_set_fresh_grad(PmxArray* variable, int fresh) {
  PMX_API_BEGIN();
  autograd::set_fresh_grad(array_of(variable), fresh != 0);
  PMX_API_END();
}

// ---------------------------------------------------------------------------------------------
// Collectives across GPUs
// ---------------------------------------------------------------------------------------------

int pmx_nccl_all_reduce(int num_arrays, PmxArray* const* arrays) {
  PMX_API_BEGIN();
  const size_t count = array_count(arrays, num_arrays);
  std::vector<NDArray> values;
  values.reserve(count);
  for (size_t i = 0; i < count; ++i) values.push_back(array_of(arrays[i]));
  gpu::nccl_all_reduce(values);
  PMX_API_END();
}
