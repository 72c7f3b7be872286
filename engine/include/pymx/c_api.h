/* The C ABI of pymx: what the Cython layer and embedding applications call. Compiles as C99.
 *
 * Conventions (follow them when appending; AUTOGRAD's section is at the end):
 *  - Functions are pmx_<object>_<verb>. Handles are typed opaque structs, never void*.
 *  - Every function returns an int from enum PmxStatus (PMX_OK = 0). On failure the message is
 *    in pmx_last_error(), which is thread-local and valid until the next pmx_ call on that thread.
 *    Nothing throws or aborts across the boundary (PMX_API_BEGIN/END in engine/src/c_api_internal.h).
 *  - Inputs first, outputs last as out_ pointers tagged out. Outputs are written only on success.
 *  - Each _create/_new has a _free, and _free(NULL) is a no-op. Borrowed pointers say how long
 *    they stay valid. Arrays returned through a PmxArray** list are new handles the caller owns
 *    (free each one); the list itself is thread-local, valid until the next pmx_ call.
 *  - Shapes are int64_t; dtypes are enum PmxDType (MXNet's type flags); devices are a
 *    (device_type, device_id) pair from enum PmxDeviceType.
 *  - Blocking functions say so; everything else returns at once (work runs on the engine).
 *  - Callbacks travel as (fn, user_data, user_data_free); user_data_free may be NULL.
 *  - pmx_api_version: major changes when a layout or signature changes, minor on additions.
 */
#ifndef PYMX_C_API_H_
#define PYMX_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PMX_API __attribute__((visibility("default")))
#define PMX_API_VERSION_MAJOR 0
#define PMX_API_VERSION_MINOR 9

/* Values equal pymx::Status. */
enum PmxStatus {
  PMX_OK = 0,
  PMX_ERR_INVALID_ARG = 1, /* the caller erred: Python ValueError */
  PMX_ERR_OOM = 2,         /* MemoryError */
  PMX_ERR_CUDA = 3,
  PMX_ERR_NO_CUDA = 4,     /* built without CUDA, or no driver */
  PMX_ERR_ASYNC = 5,       /* an asynchronous op failed; surfaced at a wait */
  PMX_ERR_INTERNAL = 6,    /* a pymx bug */
  PMX_ERR_INDEX = 7,       /* IndexError */
  PMX_ERR_TYPE = 8,        /* TypeError */
  PMX_ERR_LINALG = 9,      /* np.linalg.LinAlgError: singular or non-convergent input */
  PMX_ERR_AXIS = 10,       /* numpy AxisError: an axis out of range for the array's rank */
  PMX_ERR_OVERFLOW = 11    /* OverflowError: an integer out of bounds for the op's dtype */
};

/* Values equal pymx::DeviceType (MXNet's Context::DeviceType). */
enum PmxDeviceType { PMX_DEVICE_CPU = 1, PMX_DEVICE_GPU = 2, PMX_DEVICE_CPU_PINNED = 3 };

/* Values equal pymx::DType (MXNet's type flags). */
enum PmxDType {
  PMX_FLOAT32 = 0,
  PMX_FLOAT64 = 1,
  PMX_FLOAT16 = 2,
  PMX_UINT8 = 3,
  PMX_INT32 = 4,
  PMX_INT8 = 5,
  PMX_INT64 = 6,
  PMX_BOOL = 7,
  PMX_BFLOAT16 = 12 /* 16 bits: the top half of a float32 */
};

typedef struct PmxArray PmxArray; /* an n-d array: shape, dtype, device, memory, engine var */
typedef struct PmxOp PmxOp;       /* a registered operator; owned by the registry, never freed */
typedef struct PmxVar PmxVar;     /* an engine dependency token */

typedef struct PmxMemoryStats {
  uint64_t in_use;      /* bytes handed out and not yet freed */
  uint64_t cached;      /* bytes held by the pool, free for reuse */
  uint64_t peak_in_use;
  uint64_t num_allocs;  /* allocations that reached the system or the driver */
} PmxMemoryStats;

/* ---------------------------------------------------------------------------------------------
 * Errors and version
 * ------------------------------------------------------------------------------------------- */

/* The message of the last failed pmx_ call on this thread ("" if none). Valid until the next
 * pmx_ call on this thread. */
PMX_API const char* pmx_last_error(void);
/* Sets this thread's last error and returns `status`. For engine callbacks pushed with
 * pmx_engine_push: `return pmx_error_set(PMX_ERR_INVALID_ARG, "bad input");` fails the op with
 * that message. */
PMX_API int pmx_error_set(int status, const char* message);
PMX_API int pmx_api_version(int* out_major, int* out_minor);

/* ---------------------------------------------------------------------------------------------
 * Devices and memory
 * ------------------------------------------------------------------------------------------- */

/* Number of visible GPUs; 0 without a driver, without a device, or in a CPU-only build. */
PMX_API int pmx_gpu_count(int* out_count);
/* Free and total bytes on GPU `device_id`. PMX_ERR_NO_CUDA in a CPU-only build. */
PMX_API int pmx_gpu_memory_info(int device_id, uint64_t* out_free, uint64_t* out_total);
/* The CUDA device id of pymx's gpu(device_id): the same id, except under
 * PYMX_LOGICAL_GPUS_PER_GPU=n, where gpu(i) is CUDA device i / n. PMX_ERR_INVALID_ARG naming the
 * id when there is no such GPU; PMX_ERR_NO_CUDA in a CPU-only build. */
PMX_API int pmx_gpu_physical_device(int device_id, int* out_cuda_device);
/* The widest vector instruction set pymx's CPU kernels use in this process: 0 x86-64's baseline,
 * 1 AVX2 with FMA, 2 AVX-512 (the CPU's best, capped by PYMX_CPU_ISA). */
PMX_API int pmx_cpu_isa(int* out_level);
/* Returns the device's cached, unused blocks to the system or the driver. */
PMX_API int pmx_storage_empty_cache(int device_type, int device_id);
PMX_API int pmx_storage_stats(int device_type, int device_id, PmxMemoryStats* out_stats);

/* ---------------------------------------------------------------------------------------------
 * Arrays. Thread-safe as far as the engine is: ops on one array run in push order.
 * ------------------------------------------------------------------------------------------- */

/* A new array with uninitialised memory. `shape` has `ndim` entries (ndim 0: a scalar). */
PMX_API int pmx_array_create(const int64_t* shape, int ndim, int dtype, int device_type,
                             int device_id, PmxArray** out_array);
/* Releases the handle; the memory is freed once no handle and no pending op uses it. */
PMX_API int pmx_array_free(PmxArray* array);
/* pmx_array_free for memory another library has read on its CUDA `stream` (DLPack's stream
 * numbers: 1 legacy default, 2 per-thread default, else a cudaStream_t): for a GPU array, first
 * waits for the work queued on that stream, so pymx cannot reuse the memory under it. The handle
 * is released even when that wait fails. */
PMX_API int pmx_array_free_after_stream(PmxArray* array, void* stream);
/* `out_shape` is borrowed: valid while `array` lives. */
PMX_API int pmx_array_shape(const PmxArray* array, int* out_ndim, const int64_t** out_shape);
PMX_API int pmx_array_dtype(const PmxArray* array, int* out_dtype);
PMX_API int pmx_array_device(const PmxArray* array, int* out_device_type, int* out_device_id);
/* The address of the first element (NULL for an empty array). Dereference only after a wait,
 * or from an op pushed on the array's var; valid while `array` lives. */
PMX_API int pmx_array_data(const PmxArray* array, void** out_data);
/* The array's engine var, borrowed: valid while `array` lives; never pass it to pmx_var_free. */
PMX_API int pmx_array_var(const PmxArray* array, PmxVar** out_var);
/* 1 when both handles view the same memory with the same shape. */
PMX_API int pmx_array_same(const PmxArray* a, const PmxArray* b, int* out_same);
/* The addresses [begin, end) of the array's bytes (0, 0 when empty), allocating its memory as a
 * first use would; waits for nothing. For telling whether two arrays share memory. */
PMX_API int pmx_array_memory_range(const PmxArray* array, uintptr_t* out_begin, uintptr_t* out_end);

/* Views sharing memory and var with `array`; no copy, nothing pushed. */
PMX_API int pmx_array_reshape(const PmxArray* array, const int64_t* shape, int ndim,
                              PmxArray** out_array);
/* Rows [begin, end) along axis 0. */
PMX_API int pmx_array_slice(const PmxArray* array, int64_t begin, int64_t end,
                            PmxArray** out_array);
/* Row `index` along axis 0, dropping that axis. */
PMX_API int pmx_array_at(const PmxArray* array, int64_t index, PmxArray** out_array);

/* Blocking. Copies `nbytes` (must equal the array's size in bytes) between host memory and the
 * array; the copy to the host first waits for pending writes and raises their errors. */
PMX_API int pmx_array_copy_from_cpu(PmxArray* array, const void* data, size_t nbytes);
PMX_API int pmx_array_copy_to_cpu(const PmxArray* array, void* data, size_t nbytes);
/* Asynchronous copy into a new array on (device_type, device_id). */
PMX_API int pmx_array_copy_to_device(const PmxArray* array, int device_type, int device_id,
                                     PmxArray** out_array);
/* Asynchronous copy into `dst` (same shape; the dtype may differ: the values are cast). */
PMX_API int pmx_array_copy_into(const PmxArray* src, PmxArray* dst);

/* Blocking: until pending writes (wait_to_read) or all pending ops (wait_to_write) on the array
 * have finished; then raise an error stored by a failed op (once). Refused on engine workers. */
PMX_API int pmx_array_wait_to_read(const PmxArray* array);
PMX_API int pmx_array_wait_to_write(const PmxArray* array);

/* ---------------------------------------------------------------------------------------------
 * Operators
 * ------------------------------------------------------------------------------------------- */

/* The operator named `name`; PMX_ERR_INVALID_ARG naming it when unknown. The handle is valid
 * for the life of the process. */
PMX_API int pmx_op_find(const char* name, PmxOp** out_op);
/* All operator names, sorted. The list is thread-local (valid until the next pmx_ call). */
PMX_API int pmx_op_list(int* out_count, const char* const** out_names);
/* Runs `op` on `inputs` (all on one device; `device_type/device_id` is used only when there are
 * no inputs). Attributes are strings: `attr_keys[i]` = `attr_values[i]`. `outs` (NULL or
 * `num_outs` entries, each NULL or an array of the right shape) receive the results in place.
 * Returns the outputs as new handles. Never blocks: the results may still be in flight. */
PMX_API int pmx_op_invoke(const PmxOp* op, int num_inputs, PmxArray* const* inputs,
                          int num_attrs, const char* const* attr_keys,
                          const char* const* attr_values, int device_type, int device_id,
                          int num_outs, PmxArray* const* outs, int* out_num_outputs,
                          PmxArray*** out_outputs);

/* Seeds the random number generators of every device. */
PMX_API int pmx_random_seed(uint64_t seed);

/* The deterministic mode (PYMX_ENFORCE_DETERMINISM; Note [Deterministic mode] in
 * engine/src/determinism.h): 1 while ops must give bitwise reproducible results. Setting it
 * applies to ops that run afterwards; call it with no op in flight (after pmx_engine_wait_all).
 * `out_previous` (may be NULL) receives the state before. */
PMX_API int pmx_deterministic_set(int on, int* out_previous);
PMX_API int pmx_deterministic_get(int* out_on);

/* ---------------------------------------------------------------------------------------------
 * Engine: push your own work, ordered with pymx's ops by vars (embedding).
 * ------------------------------------------------------------------------------------------- */

/* Runs on an engine worker of the pushed device. `stream` is the worker's cudaStream_t on a GPU
 * (NULL on the CPU). Return PMX_OK, or fail the op with `return pmx_error_set(status, msg);`:
 * the error is stored on the written vars and raised by the next wait on them. */
typedef int (*PmxEngineFn)(void* user_data, int device_type, int device_id, void* stream);
typedef void (*PmxUserDataFree)(void* user_data);

PMX_API int pmx_var_new(PmxVar** out_var);
/* Frees the var once every op pushed on it so far has finished. */
PMX_API int pmx_var_free(PmxVar* var);
/* Never blocks. `fn(user_data, ...)` runs after every earlier write to `reads` and every earlier
 * op on `writes`. `user_data_free(user_data)` runs exactly once: right after `fn` on the worker
 * thread (before the op completes), when the op is skipped because an input carries an error, or
 * at once when the push itself fails. `name` may be NULL; it shows in
 * pmx_engine_dump. */
PMX_API int pmx_engine_push(PmxEngineFn fn, void* user_data, PmxUserDataFree user_data_free,
                            PmxVar* const* reads, int num_reads, PmxVar* const* writes,
                            int num_writes, int device_type, int device_id, const char* name);
/* Blocking: until every write pushed so far on `var` has finished; raises its stored error. */
PMX_API int pmx_var_wait(PmxVar* var);
/* Blocking: until nothing is pending; raises the first stored error and clears all of them. */
PMX_API int pmx_engine_wait_all(void);
/* Pending ops per var, as text. Thread-local; valid until the next pmx_ call on this thread. */
PMX_API int pmx_engine_dump(const char** out_text);
/* Counts of CUDA graphs for bulk replays of hybridized graphs since the process started: graphs
 * captured and kept, replays that launched one, captures refused (their kernels run directly). */
PMX_API int pmx_cuda_graph_stats(uint64_t* out_captured, uint64_t* out_replayed,
                                 uint64_t* out_refused);

/* ---------------------------------------------------------------------------------------------
 * Operator profiler: while recording, every op the engine runs is timed (host, and GPU by events).
 * ------------------------------------------------------------------------------------------- */

/* Recording happens while running and not paused; neither call clears what was recorded. */
PMX_API int pmx_profiler_set_running(int running);
PMX_API int pmx_profiler_set_paused(int paused);
/* The spans recorded so far as a Chrome trace (JSON object), or as JSON aggregate statistics per
 * device, timeline ("host" / "gpu") and op name. Both wait for the GPU spans they report.
 * Nonzero `reset` forgets the spans the aggregate reports, in the same step (spans that end
 * meanwhile are kept for the next report). Thread-local; valid until the next pmx_ call on this
 * thread. */
PMX_API int pmx_profiler_trace_json(const char** out_json);
PMX_API int pmx_profiler_aggregate_json(int reset, const char** out_json);
/* Forgets every span recorded so far. */
PMX_API int pmx_profiler_clear(void);

/* ---------------------------------------------------------------------------------------------
 * External memory: arrays over memory pymx does not own (zero-copy DLPack import).
 * ------------------------------------------------------------------------------------------- */

/* A new array over `data` without copying: contiguous row-major elements of `shape` and `dtype`
 * on (device_type, device_id), `data` aligned to the element size (NULL allowed when empty).
 * `release(user_data)` runs exactly once, when no handle and no queued op uses the memory any
 * more: on an engine worker thread (after its GPU stream finished with the memory) or on the
 * thread freeing the last handle. `release` may be NULL when the memory outlives the array.
 * The caller must not free the memory before that. For a GPU, the data must be ready on the
 * device's legacy default stream (what a DLPack consumer asks for with stream=1); this call
 * waits for that stream. On failure `release` is not called and the caller keeps the memory. */
PMX_API int pmx_array_from_external(void* data, const int64_t* shape, int ndim, int dtype,
                                    int device_type, int device_id, PmxUserDataFree release,
                                    void* user_data, PmxArray** out_array);

/* ---------------------------------------------------------------------------------------------
 * Autograd and graph: AUTOGRAD's section (engine/src/c_api_autograd.cc). Append new sections
 * above the closing extern "C" below.
 * ------------------------------------------------------------------------------------------- */

typedef struct PmxGraph PmxGraph; /* a traced program of op calls; see pymx/graph.h */

/* Per-thread flags. Each setter returns the previous value in out_prev (may be NULL). */
PMX_API int pmx_autograd_set_recording(int on, int* out_prev);
PMX_API int pmx_autograd_set_training(int on, int* out_prev);
PMX_API int pmx_autograd_is_recording(int* out_on);
PMX_API int pmx_autograd_is_training(int* out_on);
/* Marks each variables[i] (its handle; later copies of that handle too) for gradients into
 * grads[i] (same shape and device) with grad_reqs[i]: 0 null, 1 write, 3 add. */
PMX_API int pmx_autograd_mark_variables(int num_variables, PmxArray* const* variables,
                                        PmxArray* const* grads, const int* grad_reqs);
/* Never blocks: pushes the gradient ops. `head_grads` is NULL or has num_heads entries, each
 * NULL (ones) or an array shaped like its head. Writes the marked variables' gradient buffers. */
PMX_API int pmx_autograd_backward(int num_heads, PmxArray* const* heads,
                                  PmxArray* const* head_grads, int retain_graph, int is_train);
/* Like backward, but returns d(heads)/d(variables) as new handles and leaves the buffers alone.
 * With create_graph the gradient ops are recorded (for higher-order gradients). */
PMX_API int pmx_autograd_grad(int num_heads, PmxArray* const* heads, PmxArray* const* head_grads,
                              int num_variables, PmxArray* const* variables, int retain_graph,
                              int is_train, int create_graph, int* out_num_grads,
                              PmxArray*** out_grads);
/* The gradient buffer of a marked variable as a new handle; *out_grad = NULL when the array is
 * not marked or its grad_req is null. */
PMX_API int pmx_autograd_get_grad(const PmxArray* variable, PmxArray** out_grad);
/* A new handle to the same memory without autograd history (not a variable, no recorded op). */
PMX_API int pmx_autograd_detach(const PmxArray* array, PmxArray** out_array);

/* autograd.Function: computes the gradients of one node recorded by
 * pmx_autograd_record_function, on the thread that runs backward (never an engine worker).
 * `out_grads`: one gradient per output of the function, as new handles the callback owns (it
 * frees each one, also when it fails). It stores in `in_grads[i]` a new handle (see
 * pmx_autograd_share) to the gradient of input i, or leaves it NULL for no gradient; pymx takes
 * over the handles it stored, also when it fails. Returns PMX_OK, or fails the backward with
 * `return pmx_error_set(status, msg);`. */
typedef int (*PmxFunctionGradientFn)(void* user_data, int num_out_grads, PmxArray** out_grads,
                                     int num_in_grads, PmxArray** in_grads);
/* Records `outputs` as computed from `inputs` by one node of the tape whose gradient is
 * `gradient(user_data, ...)`, when recording is on, an input needs a gradient and an output is
 * floating-point; *out_recorded says whether it did. `out_outputs` (num_outputs new handles, a
 * thread-local list) are the outputs with that history. `user_data_free(user_data)` runs exactly
 * once: when the node is freed (a backward without retain_graph, or the last array computed
 * from it dropped; on the thread that frees it), or before this returns when nothing was
 * recorded or the call failed. PMX_ERR_INVALID_ARG while this thread traces a graph. */
PMX_API int pmx_autograd_record_function(int num_inputs, PmxArray* const* inputs,
                                         int num_outputs, PmxArray* const* outputs,
                                         PmxFunctionGradientFn gradient, void* user_data,
                                         PmxUserDataFree user_data_free, int* out_recorded,
                                         PmxArray*** out_outputs);
/* A new handle to the same array with its autograd history (a detach that keeps it). */
PMX_API int pmx_autograd_share(const PmxArray* array, PmxArray** out_array);
/* *out_tracing = 1 while this thread traces a graph (pmx_graph_trace_begin), else 0. */
PMX_API int pmx_graph_is_tracing(int* out_tracing);

/* Starts tracing the ops this thread invokes; `inputs` become the graph's inputs. */
PMX_API int pmx_graph_trace_begin(int num_inputs, PmxArray* const* inputs);
/* Ends the trace; the graph computes `outputs`. */
PMX_API int pmx_graph_trace_end(int num_outputs, PmxArray* const* outputs, PmxGraph** out_graph);
/* Ends the trace without a graph (the traced code failed). OK when not tracing. */
PMX_API int pmx_graph_trace_abort(void);
/* Never blocks. Replays the graph on `inputs`; records for autograd when recording is on. */
PMX_API int pmx_graph_run(const PmxGraph* graph, int num_inputs, PmxArray* const* inputs,
                          int* out_num_outputs, PmxArray*** out_outputs);
PMX_API int pmx_graph_free(PmxGraph* graph);
/* Static allocation on (1) or off (0): runs reuse the graph's own output buffers whenever nothing
 * else holds them (hybridize(static_alloc=True)). Not while another thread runs the graph. */
PMX_API int pmx_graph_set_static_alloc(PmxGraph* graph, int on);
/* Inputs (data inputs, then for a loaded graph its constants), outputs, nodes and captured
 * constants of the graph. */
PMX_API int pmx_graph_info(const PmxGraph* graph, int* out_num_inputs, int* out_num_outputs,
                           int* out_num_nodes, int* out_num_constants);
/* The captured constants as new handles (thread-local list). */
PMX_API int pmx_graph_constants(const PmxGraph* graph, int* out_num, PmxArray*** out_constants);
/* MXNet-like symbol JSON. Thread-local text, valid until the next pmx_ call on this thread. */
PMX_API int pmx_graph_to_json(const PmxGraph* graph, const char** out_json);
/* A graph from pmx_graph_to_json's text; its constants become extra inputs after the data. */
PMX_API int pmx_graph_from_json(const char* json, PmxGraph** out_graph);

/* ---------------------------------------------------------------------------------------------
 * Autograd gradient state (engine/src/c_api.cc).
 * ------------------------------------------------------------------------------------------- */

/* *out_fresh = 1 when backward has written or added a gradient into this marked variable's
 * buffer since it was marked or the flag was cleared (MXNet's fresh_out_grad), else 0; 0 for an
 * unmarked array. */
PMX_API int pmx_autograd_get_fresh_grad(const PmxArray* variable, int* out_fresh);
/* Sets that flag; PMX_ERR_INVALID_ARG when the array is not a marked variable. */
PMX_API int pmx_autograd_set_fresh_grad(PmxArray* variable, int fresh);

/* ---------------------------------------------------------------------------------------------
 * Collectives across GPUs (cuda/src/nccl_all_reduce.cc).
 * ------------------------------------------------------------------------------------------- */

/* Sums `arrays` (one per GPU, all of one shape and dtype) in place with an NCCL all-reduce:
 * afterwards each holds the sum. The sum runs on the engine and this returns at once, except that
 * the first call for an ordered list of GPUs blocks while it loads NCCL (libnccl.so.2) and
 * creates their communicator. PMX_ERR_INVALID_ARG for an array not on a GPU, differing shapes or
 * dtypes, a GPU listed twice or two logical GPUs of one physical GPU; PMX_ERR_TYPE for bool;
 * PMX_ERR_CUDA when NCCL cannot be loaded or fails; PMX_ERR_NO_CUDA in a CPU-only build. */
PMX_API int pmx_nccl_all_reduce(int num_arrays, PmxArray* const* arrays);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PYMX_C_API_H_ */
