# The only Cython mirror of engine/include/pymx/c_api.h; tests/python/test_ndarray_capi.py checks
# that both declare the same functions. Keep the order and the sections of the header.
from libc.stdint cimport int64_t, uint64_t, uintptr_t


cdef extern from "pymx/c_api.h" nogil:
    enum PmxStatus:
        PMX_OK
        PMX_ERR_INVALID_ARG
        PMX_ERR_OOM
        PMX_ERR_CUDA
        PMX_ERR_NO_CUDA
        PMX_ERR_ASYNC
        PMX_ERR_INTERNAL
        PMX_ERR_INDEX
        PMX_ERR_TYPE

    enum PmxDeviceType:
        PMX_DEVICE_CPU
        PMX_DEVICE_GPU
        PMX_DEVICE_CPU_PINNED

    int PMX_API_VERSION_MAJOR
    int PMX_API_VERSION_MINOR

    ctypedef struct PmxArray:
        pass
    ctypedef struct PmxOp:
        pass
    ctypedef struct PmxVar:
        pass

    ctypedef struct PmxMemoryStats:
        uint64_t in_use
        uint64_t cached
        uint64_t peak_in_use
        uint64_t num_allocs

    # Errors and version
    const char* pmx_last_error()
    int pmx_error_set(int status, const char* message)
    int pmx_api_version(int* out_major, int* out_minor)

    # Devices and memory
    int pmx_gpu_count(int* out_count)
    int pmx_gpu_memory_info(int device_id, uint64_t* out_free, uint64_t* out_total)
    int pmx_gpu_physical_device(int device_id, int* out_cuda_device)
    int pmx_cpu_isa(int* out_level)
    int pmx_storage_empty_cache(int device_type, int device_id)
    int pmx_storage_stats(int device_type, int device_id, PmxMemoryStats* out_stats)

    # Arrays
    int pmx_array_create(const int64_t* shape, int ndim, int dtype, int device_type,
                         int device_id, PmxArray** out_array)
    int pmx_array_free(PmxArray* array)
    int pmx_array_free_after_stream(PmxArray* array, void* stream)
    int pmx_array_shape(const PmxArray* array, int* out_ndim, const int64_t** out_shape)
    int pmx_array_dtype(const PmxArray* array, int* out_dtype)
    int pmx_array_device(const PmxArray* array, int* out_device_type, int* out_device_id)
    int pmx_array_data(const PmxArray* array, void** out_data)
    int pmx_array_var(const PmxArray* array, PmxVar** out_var)
    int pmx_array_same(const PmxArray* a, const PmxArray* b, int* out_same)
    int pmx_array_memory_range(const PmxArray* array, uintptr_t* out_begin, uintptr_t* out_end)
    int pmx_array_reshape(const PmxArray* array, const int64_t* shape, int ndim,
                          PmxArray** out_array)
    int pmx_array_slice(const PmxArray* array, int64_t begin, int64_t end, PmxArray** out_array)
    int pmx_array_at(const PmxArray* array, int64_t index, PmxArray** out_array)
    int pmx_array_copy_from_cpu(PmxArray* array, const void* data, size_t nbytes)
    int pmx_array_copy_to_cpu(const PmxArray* array, void* data, size_t nbytes)
    int pmx_array_copy_to_device(const PmxArray* array, int device_type, int device_id,
                                 PmxArray** out_array)
    int pmx_array_copy_into(const PmxArray* src, PmxArray* dst)
    int pmx_array_wait_to_read(const PmxArray* array)
    int pmx_array_wait_to_write(const PmxArray* array)

    # Operators
    int pmx_op_find(const char* name, PmxOp** out_op)
    int pmx_op_list(int* out_count, const char* const** out_names)
    int pmx_op_invoke(const PmxOp* op, int num_inputs, PmxArray* const* inputs,
                      int num_attrs, const char* const* attr_keys,
                      const char* const* attr_values, int device_type, int device_id,
                      int num_outs, PmxArray* const* outs, int* out_num_outputs,
                      PmxArray*** out_outputs)
    int pmx_random_seed(uint64_t seed)
    int pmx_deterministic_set(int on, int* out_previous)
    int pmx_deterministic_get(int* out_on)

    # Engine
    ctypedef int (*PmxEngineFn)(void* user_data, int device_type, int device_id,
                                void* stream) noexcept nogil
    ctypedef void (*PmxUserDataFree)(void* user_data) noexcept nogil
    int pmx_var_new(PmxVar** out_var)
    int pmx_var_free(PmxVar* var)
    int pmx_engine_push(PmxEngineFn fn, void* user_data, PmxUserDataFree user_data_free,
                        PmxVar* const* reads, int num_reads, PmxVar* const* writes,
                        int num_writes, int device_type, int device_id, const char* name)
    int pmx_var_wait(PmxVar* var)
    int pmx_engine_wait_all()
    int pmx_engine_dump(const char** out_text)
    int pmx_cuda_graph_stats(uint64_t* out_captured, uint64_t* out_replayed, uint64_t* out_refused)

    # Operator profiler
    int pmx_profiler_set_running(int running)
    int pmx_profiler_set_paused(int paused)
    int pmx_profiler_trace_json(const char** out_json)
    int pmx_profiler_aggregate_json(int reset, const char** out_json)
    int pmx_profiler_clear()

    # External memory
    int pmx_array_from_external(void* data, const int64_t* shape, int ndim, int dtype,
                                int device_type, int device_id, PmxUserDataFree release,
                                void* user_data, PmxArray** out_array)

    # Autograd and graph: AUTOGRAD's section (mirrors the header's section of that name).
    ctypedef struct PmxGraph:
        pass
    int pmx_autograd_set_recording(int on, int* out_prev)
    int pmx_autograd_set_training(int on, int* out_prev)
    int pmx_autograd_is_recording(int* out_on)
    int pmx_autograd_is_training(int* out_on)
    int pmx_autograd_mark_variables(int num_variables, PmxArray* const* variables,
                                    PmxArray* const* grads, const int* grad_reqs)
    int pmx_autograd_backward(int num_heads, PmxArray* const* heads,
                              PmxArray* const* head_grads, int retain_graph, int is_train)
    int pmx_autograd_grad(int num_heads, PmxArray* const* heads, PmxArray* const* head_grads,
                          int num_variables, PmxArray* const* variables, int retain_graph,
                          int is_train, int create_graph, int* out_num_grads,
                          PmxArray*** out_grads)
    int pmx_autograd_get_grad(const PmxArray* variable, PmxArray** out_grad)
    int pmx_autograd_detach(const PmxArray* array, PmxArray** out_array)
    ctypedef int (*PmxFunctionGradientFn)(void* user_data, int num_out_grads,
                                          PmxArray** out_grads, int num_in_grads,
                                          PmxArray** in_grads) noexcept nogil
    int pmx_autograd_record_function(int num_inputs, PmxArray* const* inputs, int num_outputs,
                                     PmxArray* const* outputs, PmxFunctionGradientFn gradient,
                                     void* user_data, PmxUserDataFree user_data_free,
                                     int* out_recorded, PmxArray*** out_outputs)
    int pmx_autograd_share(const PmxArray* array, PmxArray** out_array)
    int pmx_graph_is_tracing(int* out_tracing)
    int pmx_autograd_get_fresh_grad(const PmxArray* variable, int* out_fresh)
    int pmx_autograd_set_fresh_grad(PmxArray* variable, int fresh)
    int pmx_graph_trace_begin(int num_inputs, PmxArray* const* inputs)
    int pmx_graph_trace_end(int num_outputs, PmxArray* const* outputs, PmxGraph** out_graph)
    int pmx_graph_trace_abort()
    int pmx_graph_run(const PmxGraph* graph, int num_inputs, PmxArray* const* inputs,
                      int* out_num_outputs, PmxArray*** out_outputs)
    int pmx_graph_free(PmxGraph* graph)
    int pmx_graph_set_static_alloc(PmxGraph* graph, int on)
    int pmx_graph_info(const PmxGraph* graph, int* out_num_inputs, int* out_num_outputs,
                       int* out_num_nodes, int* out_num_constants)
    int pmx_graph_constants(const PmxGraph* graph, int* out_num, PmxArray*** out_constants)
    int pmx_graph_to_json(const PmxGraph* graph, const char** out_json)
    int pmx_graph_from_json(const char* json, PmxGraph** out_graph)

    # Collectives across GPUs
    int pmx_nccl_all_reduce(int num_arrays, PmxArray* const* arrays)
