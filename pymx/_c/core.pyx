# cython: language_level=3, boundscheck=False, wraparound=False, embedsignature=True
"""Cython bindings over the C API (pymx/_c/c_api.pxd): array handles, operator invocation, the
engine, devices and memory. Python code uses pymx.ndarray / pymx._op / pymx.device, not this.

Every C call is followed by check(rc), which raises the exception class of the C status
(pymx.base.STATUS_ERRORS) with the C++ message verbatim. Blocking calls release the GIL; the
error message is read afterwards on the same OS thread (it is thread-local in C).
"""
cimport cython
from cpython.object cimport PyObject, PyTypeObject
from cpython.buffer cimport (PyBUF_C_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.pycapsule cimport (PyCapsule_CheckExact, PyCapsule_GetName, PyCapsule_GetPointer,
                                PyCapsule_IsValid, PyCapsule_New, PyCapsule_SetName)
from cpython.unicode cimport PyUnicode_AsUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport strdup
from libcpp.vector cimport vector

from pymx._c.c_api cimport *

import atexit
import ctypes
import numbers

import numpy as _onp

from pymx.base import (DTYPES, STATUS_ERRORS, PymxError, bfloat16, bfloat16_to_float32,
                        dtype_flag, dtype_name)

# Inputs and attributes of most ops fit in these stack buffers; larger lists use a vector.
cdef enum:
    SMALL = 8


cdef int raise_error(int rc) except -1:
    message = pmx_last_error().decode("utf-8", "replace")
    raise STATUS_ERRORS.get(rc, PymxError)(message)


# ---------------------------------------------------------------------------------------------
# Devices: pymx.device.Device objects, cached per (type, id) so array.device allocates nothing.
# ---------------------------------------------------------------------------------------------

cdef dict _devices = {}


cdef object _device_object(int device_type, int device_id):
    key = device_type * 65536 + device_id
    device = _devices.get(key)
    if device is None:
        from pymx.device import Device, _TYPE_NAMES  # imported here: pymx.device imports us
        device = Device(_TYPE_NAMES[device_type], device_id)
        _devices[key] = device
    return device


cdef int _device_pair(object device, int* out_type, int* out_id) except -1:
    try:
        out_type[0] = device.device_typeid
        out_id[0] = device.device_id
    except AttributeError:
        raise TypeError(f"expected a pymx Device such as cpu(0) or gpu(0), got "
                        f"{type(device).__name__} {device!r}") from None
    return 0


def gpu_count():
    cdef int count = 0
    check(pmx_gpu_count(&count))
    return count


def gpu_physical_device(int device_id):
    """The CUDA device id of gpu(device_id) (differs under PYMX_LOGICAL_GPUS_PER_GPU)."""
    cdef int cuda_device = 0
    check(pmx_gpu_physical_device(device_id, &cuda_device))
    return cuda_device


def gpu_memory_info(int device_id):
    cdef uint64_t free_bytes = 0, total_bytes = 0
    cdef int rc
    with nogil:
        rc = pmx_gpu_memory_info(device_id, &free_bytes, &total_bytes)
    check(rc)
    return free_bytes, total_bytes


def empty_cache(int device_type, int device_id):
    cdef int rc
    with nogil:
        rc = pmx_storage_empty_cache(device_type, device_id)
    check(rc)


def memory_stats(int device_type, int device_id):
    cdef PmxMemoryStats stats
    check(pmx_storage_stats(device_type, device_id, &stats))
    return {"in_use": stats.in_use, "cached": stats.cached, "peak_in_use": stats.peak_in_use,
            "num_allocs": stats.num_allocs}


# ---------------------------------------------------------------------------------------------
# Arrays
# ---------------------------------------------------------------------------------------------

# The Python class of new arrays (pymx.ndarray.ndarray, a subclass of NDArrayBase).
cdef type _ndarray_class = None
cdef tuple _EMPTY_TUPLE = ()


def set_ndarray_class(cls):
    global _ndarray_class
    if not issubclass(cls, NDArrayBase):
        raise TypeError(f"{cls!r} is not a subclass of NDArrayBase")
    _ndarray_class = cls


cdef object wrap_handle(PmxArray* handle):
    cdef NDArrayBase array
    try:
        # The type's tp_new directly: NDArrayBase.__new__(cls) goes through a method lookup.
        array = (<PyTypeObject*>_ndarray_class).tp_new(_ndarray_class, <PyObject*>_EMPTY_TUPLE,
                                                       NULL)
    except BaseException:
        pmx_array_free(handle)
        raise
    array.handle = handle
    return array


cdef PmxArray* handle_of(object array, str what) except NULL:
    if not isinstance(array, NDArrayBase):
        raise TypeError(f"{what} must be a pymx ndarray, got {type(array).__name__}")
    cdef PmxArray* handle = (<NDArrayBase>array).handle
    if handle == NULL:
        raise ValueError(f"{what} is an ndarray without data (made without a handle)")
    return handle


cdef int _shape_to_c(object shape, vector[int64_t]* out) except -1:
    out.clear()
    for d in shape:
        if not isinstance(d, numbers.Integral):
            raise TypeError(f"shape {tuple(shape)!r} must contain integers, got "
                            f"{type(d).__name__} {d!r}")
        out.push_back(d)
    return 0


@cython.no_gc  # its only object field is a tuple of ints: no reference cycles possible
cdef class NDArrayBase:
    """Owns one C array handle; pymx.ndarray.ndarray adds the Python API on top."""

    def __dealloc__(self):
        if self.handle != NULL:
            pmx_array_free(self.handle)
            self.handle = NULL

    @property
    def shape(self):
        cdef int ndim
        cdef const int64_t* dims
        if self._shape is None:
            check(pmx_array_shape(self.handle, &ndim, &dims))
            self._shape = tuple([dims[i] for i in range(ndim)])
        return self._shape

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        cdef int ndim, i
        cdef const int64_t* dims
        cdef int64_t n = 1
        check(pmx_array_shape(self.handle, &ndim, &dims))
        for i in range(ndim):
            n *= dims[i]
        return n

    @property
    def dtype(self):
        cdef int flag
        check(pmx_array_dtype(self.handle, &flag))
        return DTYPES[flag]

    @property
    def device(self):
        cdef int device_type, device_id
        check(pmx_array_device(self.handle, &device_type, &device_id))
        return _device_object(device_type, device_id)

    @property
    def _fresh_grad(self):
        """Whether backward wrote this variable's gradient since attach_grad or since the flag
        was last cleared (MXNet's stale-gradient check in Trainer.step); False when unmarked."""
        cdef int fresh = 0
        check(pmx_autograd_get_fresh_grad(self.handle, &fresh))
        return bool(fresh)

    @_fresh_grad.setter
    def _fresh_grad(self, bint fresh):
        check(pmx_autograd_set_fresh_grad(self.handle, fresh))

    def wait_to_read(self):
        """Blocks until pending writes to this array finish; raises an error they stored."""
        cdef int rc
        with nogil:
            rc = pmx_array_wait_to_read(self.handle)
        check(rc)

    def wait_to_write(self):
        """Blocks until every pending op on this array finishes; raises an error they stored."""
        cdef int rc
        with nogil:
            rc = pmx_array_wait_to_write(self.handle)
        check(rc)

    def asnumpy(self):
        """A NumPy copy of the values (float32 for bfloat16, exactly, as MXNet gives). Blocks;
        this is where asynchronous errors surface."""
        values = self._host_values()
        return bfloat16_to_float32(values) if values.dtype == bfloat16 else values

    def _host_values(self):
        """A NumPy copy of the stored values: bfloat16 arrays give their raw bits as the
        `bfloat16` record dtype (what files hold). Blocks."""
        out = _onp.empty(self.shape, self.dtype)
        cdef Py_buffer view
        cdef int rc
        PyObject_GetBuffer(out, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
        with nogil:
            rc = pmx_array_copy_to_cpu(self.handle, view.buf, <size_t>view.len)
        PyBuffer_Release(&view)
        check(rc)
        return out

    def _sync_copy_from(self, source):
        """Blocking copy of host data with the same number of elements, cast to this dtype.
        Numbers copied into a bfloat16 array are rounded by the native cast; `bfloat16` records
        are raw bits and copied as they are."""
        source = _onp.asarray(source)
        if self.dtype == bfloat16 and source.dtype != bfloat16:
            staged = empty(self.shape, _onp.float32, self.device)
            staged._sync_copy_from(source)
            invoke("cast", [staged], {"dtype": "bfloat16"}, out=self)
            self.wait_to_read()
            return
        source = _onp.ascontiguousarray(source, dtype=self.dtype)
        if source.size != self.size:
            raise ValueError(f"cannot copy {source.size} elements of shape {source.shape} into "
                             f"an array of shape {self.shape} ({self.size} elements)")
        cdef Py_buffer view
        cdef int rc
        PyObject_GetBuffer(source, &view, PyBUF_C_CONTIGUOUS)
        with nogil:
            rc = pmx_array_copy_from_cpu(self.handle, view.buf, <size_t>view.len)
        PyBuffer_Release(&view)
        check(rc)

    def _reshape_view(self, shape):
        cdef vector[int64_t] dims
        cdef PmxArray* out
        _shape_to_c(shape, &dims)
        check(pmx_array_reshape(self.handle, dims.data(), <int>dims.size(), &out))
        return wrap_handle(out)

    def _slice_view(self, int64_t begin, int64_t end):
        cdef PmxArray* out
        check(pmx_array_slice(self.handle, begin, end, &out))
        return wrap_handle(out)

    def _at_view(self, int64_t index):
        cdef PmxArray* out
        check(pmx_array_at(self.handle, index, &out))
        return wrap_handle(out)

    def _copy_to_device(self, device):
        cdef int device_type, device_id
        cdef PmxArray* out
        _device_pair(device, &device_type, &device_id)
        check(pmx_array_copy_to_device(self.handle, device_type, device_id, &out))
        return wrap_handle(out)

    def _copy_into(self, other):
        check(pmx_array_copy_into(self.handle, handle_of(other, "the copy target")))

    def _same_memory(self, other):
        """True when `other` views the same memory with the same shape."""
        cdef int same
        check(pmx_array_same(self.handle, handle_of(other, "the other array"), &same))
        return same == 1

    def _memory_range(self):
        """(begin, end): the addresses of this array's bytes, (0, 0) when empty. Views of one
        buffer (reshapes, slices along the first axis, DLPack imports) give overlapping ranges."""
        cdef uintptr_t begin = 0, end = 0
        check(pmx_array_memory_range(self.handle, &begin, &end))
        return begin, end

    def __dlpack_device__(self):
        """(DLPack device type, id): kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3; a GPU's id is
        its CUDA device id."""
        cdef int device_type, device_id
        check(pmx_array_device(self.handle, &device_type, &device_id))
        return _DLPACK_DEVICE[device_type], _dlpack_device_id(device_type, device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Exports the array as a DLPack capsule that shares its memory (a copy when
        copy=True): DLPack 1.0 when max_version allows it, else the legacy ABI. Waits for
        pending ops on the array first, so the consumer sees final values on any stream. For a
        GPU array, `stream` is the consumer's CUDA stream (None, 1 or -1: the legacy default
        stream; 2: the per-thread one of the thread that releases the tensor; else a
        cudaStream_t, which must outlive the tensor; 0 is refused as ambiguous): when the
        consumer releases the memory, pymx waits for the work queued on it before reusing it."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cannot export an array on {self.device} to DLPack device "
                              f"{tuple(dl_device)} without a copy to that device")
        cdef uintptr_t consumer_stream = 0
        if self.__dlpack_device__()[0] == 2:  # kDLCUDA
            if stream == 0:
                raise BufferError("stream=0 is ambiguous for CUDA in DLPack; pass 1 for the "
                                  "legacy default stream, 2 for the per-thread one, or a handle")
            consumer_stream = 1 if stream is None or stream == -1 else stream
        source = self
        if copy:
            source = self._copy_to_device(self.device)
        versioned = max_version is not None and max_version[0] >= 1
        return _to_dlpack_capsule(source, versioned, bool(copy), <void*>consumer_stream)

    def _data_address(self):
        """The address of the first element (0 when empty); read only after a wait."""
        cdef void* data
        check(pmx_array_data(self.handle, &data))
        return <size_t>data

    # ---- + - * / (Note [Arithmetic fast path]) --------------------------------------------
    def __add__(self, other):
        return _arith(self, other, ARITH_ADD, False)

    def __radd__(self, other):
        return _arith(self, other, ARITH_ADD, True)

    def __sub__(self, other):
        return _arith(self, other, ARITH_SUBTRACT, False)

    def __rsub__(self, other):
        return _arith(self, other, ARITH_SUBTRACT, True)

    def __mul__(self, other):
        return _arith(self, other, ARITH_MULTIPLY, False)

    def __rmul__(self, other):
        return _arith(self, other, ARITH_MULTIPLY, True)

    def __truediv__(self, other):
        return _arith(self, other, ARITH_DIVIDE, False)

    def __rtruediv__(self, other):
        return _arith(self, other, ARITH_DIVIDE, True)


# ---------------------------------------------------------------------------------------------
# DLPack (https://dmlc.github.io/dlpack): export (ndarray.__dlpack__) and import (from_dlpack).
# ---------------------------------------------------------------------------------------------

ctypedef struct DLDevice:
    int32_t device_type
    int32_t device_id

ctypedef struct DLDataType:
    uint8_t code
    uint8_t bits
    uint16_t lanes

ctypedef struct DLTensor:
    void* data
    DLDevice device
    int32_t ndim
    DLDataType dtype
    const int64_t* shape
    int64_t* strides
    uint64_t byte_offset

ctypedef struct DLManagedTensor:
    DLTensor dl_tensor
    void* manager_ctx
    void (*deleter)(DLManagedTensor*) noexcept nogil

# DLPack 1.x: what a consumer gets when it passes max_version=(1, ...).
ctypedef struct DLPackVersion:
    uint32_t major
    uint32_t minor

ctypedef struct DLManagedTensorVersioned:
    DLPackVersion version
    void* manager_ctx
    void (*deleter)(DLManagedTensorVersioned*) noexcept nogil
    uint64_t flags
    DLTensor dl_tensor

cdef enum:
    DLPACK_FLAG_READ_ONLY = 1
    DLPACK_FLAG_IS_COPIED = 2
    DLPACK_MAX_MAJOR = 1

# PmxDeviceType -> DLDeviceType, and dtype flag -> DLDataTypeCode (0 int, 1 uint, 2 float,
# 4 bfloat, 6 bool) and bits.
_DLPACK_DEVICE = {PMX_DEVICE_CPU: 1, PMX_DEVICE_GPU: 2, PMX_DEVICE_CPU_PINNED: 3}
_DL_CODES = {0: 2, 1: 2, 2: 2, 3: 1, 4: 0, 5: 0, 6: 0, 7: 6, 12: 4}
_DL_BITS = {0: 32, 1: 64, 2: 16, 3: 8, 4: 32, 5: 8, 6: 64, 7: 8, 12: 16}


# What an export's manager_ctx holds: a handle of its own (a view), so no GIL is needed to
# release the memory, and for GPU memory the consumer's stream (NULL for host memory).
cdef struct _DLPackExport:
    PmxArray* array
    void* stream


cdef void _release_export(void* manager_ctx) noexcept nogil:
    cdef _DLPackExport* export = <_DLPackExport*>manager_ctx
    if export.stream != NULL:  # the consumer's queued reads finish before pymx reuses the memory
        pmx_array_free_after_stream(export.array, export.stream)
    else:
        pmx_array_free(export.array)
    free(export)


cdef void _dlpack_deleter(DLManagedTensor* tensor) noexcept nogil:
    _release_export(tensor.manager_ctx)
    free(tensor)


cdef void _dlpack_versioned_deleter(DLManagedTensorVersioned* tensor) noexcept nogil:
    _release_export(tensor.manager_ctx)
    free(tensor)


cdef void _dlpack_capsule_destructor(object capsule) noexcept:
    # A consumer renames the capsule to "used_dltensor" and then owns the tensor.
    if PyCapsule_IsValid(capsule, b"dltensor"):
        tensor = <DLManagedTensor*>PyCapsule_GetPointer(capsule, b"dltensor")
        tensor.deleter(tensor)


cdef void _dlpack_versioned_capsule_destructor(object capsule) noexcept:
    if PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        tensor = <DLManagedTensorVersioned*>PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        tensor.deleter(tensor)


cdef object _to_dlpack_capsule(NDArrayBase array, bint versioned, bint copied,
                               void* consumer_stream):
    """A capsule sharing `array`'s memory: DLPack 1.0 (`versioned`; `copied` sets the flag
    IS_COPIED) or the legacy unversioned ABI. `consumer_stream`: see __dlpack__ (NULL for host
    memory)."""
    cdef int ndim, dtype, device_type, device_id, rc
    cdef const int64_t* shape
    cdef void* data
    cdef PmxArray* keep_alive
    with nogil:
        rc = pmx_array_wait_to_write(array.handle)
    check(rc)
    check(pmx_array_device(array.handle, &device_type, &device_id))
    cdef int dl_device_id = _dlpack_device_id(device_type, device_id)
    check(pmx_array_shape(array.handle, &ndim, &shape))
    check(pmx_array_reshape(array.handle, shape, ndim, &keep_alive))
    rc = pmx_array_shape(keep_alive, &ndim, &shape)  # owned by keep_alive from here on
    if rc == 0:
        rc = pmx_array_dtype(keep_alive, &dtype)
    if rc == 0:
        rc = pmx_array_data(keep_alive, &data)
    if rc != 0:
        pmx_array_free(keep_alive)
        check(rc)
    cdef DLManagedTensor* legacy = NULL
    cdef DLManagedTensorVersioned* managed = NULL
    cdef DLTensor* tensor
    cdef _DLPackExport* export = <_DLPackExport*>malloc(sizeof(_DLPackExport))
    if versioned:
        managed = <DLManagedTensorVersioned*>malloc(sizeof(DLManagedTensorVersioned))
        tensor = &managed.dl_tensor if managed != NULL else NULL
    else:
        legacy = <DLManagedTensor*>malloc(sizeof(DLManagedTensor))
        tensor = &legacy.dl_tensor if legacy != NULL else NULL
    if tensor == NULL or export == NULL:
        free(export)
        free(managed)
        free(legacy)
        pmx_array_free(keep_alive)
        raise MemoryError("out of host memory for a DLPack tensor")
    export.array = keep_alive
    export.stream = consumer_stream
    tensor.data = data
    tensor.device.device_type = _DLPACK_DEVICE[device_type]
    tensor.device.device_id = dl_device_id
    tensor.ndim = ndim
    tensor.dtype.code = _DL_CODES[dtype]
    tensor.dtype.bits = _DL_BITS[dtype]
    tensor.dtype.lanes = 1
    tensor.shape = shape
    tensor.strides = NULL  # compact row-major
    tensor.byte_offset = 0
    if versioned:
        managed.version.major = 1
        managed.version.minor = 0
        managed.manager_ctx = export
        managed.deleter = _dlpack_versioned_deleter
        managed.flags = DLPACK_FLAG_IS_COPIED if copied else 0
        return PyCapsule_New(managed, b"dltensor_versioned", _dlpack_versioned_capsule_destructor)
    legacy.manager_ctx = export
    legacy.deleter = _dlpack_deleter
    return PyCapsule_New(legacy, b"dltensor", _dlpack_capsule_destructor)


# ---- Import (pymx.np.from_dlpack) ------------------------------------------------------------
#
# Note [Zero-copy DLPack import]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A contiguous, element-aligned, writable tensor on a device pymx serves becomes an array over
# the producer's memory (pmx_array_from_external); the capsule is renamed "used_dltensor"
# ("used_dltensor_versioned") and the producer's deleter runs when the pymx array dies, after
# every op queued on it. Anything else is copied once: a strided tensor by _strided_copy from the
# span of memory it touches, wrapped as one flat array, where it lies (on the GPU for a CUDA
# tensor); a misaligned host tensor through NumPy; read-only tensors or another target device
# with a pymx copy of the wrapped memory. Misaligned CUDA tensors are refused.
#
# The release runs on an engine worker without the GIL, but a producer's deleter may need the
# interpreter (NumPy's takes the GIL). A worker blocking on the GIL could deadlock with a thread
# that holds the GIL while it waits for the engine (os.fork waits for pending work in
# pthread_atfork), so a worker only queues the release and schedules Py_AddPendingCall; the main
# thread runs the deleters at its next bytecode boundary, and from_dlpack and exit run them
# too. A thread that holds the GIL (the naive engine frees at once) calls the deleter directly.
# After the interpreter began exiting (our atexit handler has drained the queue), releases are
# skipped: a deleter could not run safely any more and the process frees its memory anyway.

cdef extern from "Python.h":
    int Py_AddPendingCall(int (*func)(void*) noexcept, void* arg) nogil
    int PyGILState_Check() nogil

cdef extern from "<mutex>" nogil:
    cppclass _Mutex "std::mutex":
        void lock()
        void unlock()

ctypedef void (*_ReleaseFn)(void* tensor) noexcept nogil

cdef struct _PendingRelease:
    _ReleaseFn release
    void* tensor

cdef _Mutex _release_mutex
cdef vector[_PendingRelease] _pending_releases  # guarded by _release_mutex
cdef bint _release_scheduled = False             # guarded by _release_mutex
cdef bint _interpreter_exiting = False           # guarded by _release_mutex

# (DLDataTypeCode, bits) -> pymx dtype flag; names of the codes for error messages.
_DL_TO_FLAG = {(2, 32): 0, (2, 64): 1, (2, 16): 2, (1, 8): 3, (0, 32): 4, (0, 8): 5, (0, 64): 6,
               (6, 8): 7, (4, 16): 12}
_DL_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque_handle", 4: "bfloat",
                  5: "complex", 6: "bool", 7: "float8", 8: "float6", 9: "float4"}
_DL_DEVICE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan",
                    8: "kDLMetal", 9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost", 12: "kDLExtDev",
                    13: "kDLCUDAManaged", 14: "kDLOneAPI", 15: "kDLWebGPU", 16: "kDLHexagon",
                    17: "kDLMAIA"}


cdef void _call_legacy_deleter(void* tensor) noexcept nogil:
    cdef DLManagedTensor* managed = <DLManagedTensor*>tensor
    if managed.deleter != NULL:
        managed.deleter(managed)


cdef void _call_versioned_deleter(void* tensor) noexcept nogil:
    cdef DLManagedTensorVersioned* managed = <DLManagedTensorVersioned*>tensor
    if managed.deleter != NULL:
        managed.deleter(managed)


cdef int _run_pending_releases(void* unused) noexcept:
    """Calls the queued deleters; runs with the GIL (a pending call, from_dlpack, exit)."""
    global _release_scheduled
    cdef vector[_PendingRelease] batch
    _release_mutex.lock()
    batch.swap(_pending_releases)
    _release_scheduled = False
    _release_mutex.unlock()
    for item in batch:
        item.release(item.tensor)
    return 0


cdef void _release_soon(_ReleaseFn release, void* tensor) noexcept nogil:
    """Runs `release(tensor)` now if this thread holds the GIL, else queues it (see the Note)."""
    global _release_scheduled
    cdef bint schedule
    _release_mutex.lock()
    if _interpreter_exiting:
        _release_mutex.unlock()
        return
    if PyGILState_Check():
        _release_mutex.unlock()
        release(tensor)
        return
    _pending_releases.push_back(_PendingRelease(release, tensor))
    schedule = not _release_scheduled
    _release_scheduled = True
    _release_mutex.unlock()
    if schedule and Py_AddPendingCall(_run_pending_releases, NULL) != 0:
        # The interpreter's queue is full: the next release or from_dlpack tries again.
        _release_mutex.lock()
        _release_scheduled = False
        _release_mutex.unlock()


cdef void _release_legacy(void* tensor) noexcept nogil:
    _release_soon(_call_legacy_deleter, tensor)


cdef void _release_versioned(void* tensor) noexcept nogil:
    _release_soon(_call_versioned_deleter, tensor)


def _release_imports_at_exit():
    """Finishes the engine's pending work, runs the deleters it queued, and stops calling
    producers' deleters from then on (the interpreter is going away)."""
    global _interpreter_exiting
    with nogil:
        pmx_engine_wait_all()  # an error stored by an unobserved op has nobody to go to now
    _run_pending_releases(NULL)
    _release_mutex.lock()
    _interpreter_exiting = True
    _release_mutex.unlock()


atexit.register(_release_imports_at_exit)


cdef int _dlpack_device_id(int device_type, int device_id) except -1:
    """DLPack's id for a pymx device: a GPU's CUDA device id (Note [Logical GPUs]: several pymx
    GPUs may share one), 0 on the host."""
    if device_type != PMX_DEVICE_GPU:
        return 0
    return gpu_physical_device(device_id)


def dlpack_device_of(int dl_device_type, int dl_device_id):
    """The pymx device (type, id) for a DLPack device; BufferError naming it when pymx cannot use
    it (another accelerator, or a CUDA device this process does not see)."""
    if dl_device_type == 1:
        return PMX_DEVICE_CPU, 0
    if dl_device_type == 3:
        return PMX_DEVICE_CPU_PINNED, 0
    name = _DL_DEVICE_NAMES.get(dl_device_type, "unknown")
    if dl_device_type == 2:
        # The first pymx GPU on that CUDA device (several share one under logical GPUs).
        count = gpu_count()
        for device_id in range(count):
            if gpu_physical_device(device_id) == dl_device_id:
                return PMX_DEVICE_GPU, device_id
        raise BufferError(f"from_dlpack: the data is on DLPack device ({dl_device_type}, "
                          f"{dl_device_id}) ({name}), but pymx sees {count} GPU(s)")
    raise BufferError(f"from_dlpack: pymx cannot use DLPack device ({dl_device_type}, "
                      f"{dl_device_id}) ({name}); supported: kDLCPU, kDLCUDA, kDLCUDAHost")


cdef str _dl_dtype_name(DLDataType dtype):
    name = f"{_DL_CODE_NAMES.get(dtype.code, f'code {dtype.code} ')}{dtype.bits}"
    return name if dtype.lanes == 1 else f"{name}x{dtype.lanes}"


def from_dlpack_capsule(capsule, device, copy):
    """A pymx array from a DLPack capsule (see Note [Zero-copy DLPack import]).

    device: the target pymx Device, or None for the producer's device. copy: None (copy only
    when needed), True (always), False (never: BufferError when a copy would be needed).
    """
    if not PyCapsule_CheckExact(capsule):
        raise TypeError(f"expected a DLPack capsule, got {type(capsule).__name__}")
    _run_pending_releases(NULL)  # earlier imports' releases that were waiting for the GIL
    cdef bytes name = PyCapsule_GetName(capsule)
    cdef bint versioned = name == b"dltensor_versioned"
    if name in (b"used_dltensor", b"used_dltensor_versioned"):
        raise BufferError("from_dlpack: this DLPack capsule was already consumed")
    if not versioned and name != b"dltensor":
        raise TypeError(f"from_dlpack: a capsule named {name.decode()!r} is not a DLPack tensor")

    cdef void* managed = PyCapsule_GetPointer(capsule, name)
    cdef DLManagedTensorVersioned* managed_v
    cdef DLTensor* tensor
    cdef bint read_only = False
    if versioned:
        managed_v = <DLManagedTensorVersioned*>managed
        if managed_v.version.major > DLPACK_MAX_MAJOR:
            raise BufferError(f"from_dlpack: DLPack version {managed_v.version.major}."
                              f"{managed_v.version.minor} is newer than pymx reads (1.x)")
        tensor = &managed_v.dl_tensor
        read_only = (managed_v.flags & DLPACK_FLAG_READ_ONLY) != 0
    else:
        tensor = &(<DLManagedTensor*>managed).dl_tensor

    dtype_key = (tensor.dtype.code, tensor.dtype.bits)
    if tensor.dtype.lanes != 1 or dtype_key not in _DL_TO_FLAG:
        raise TypeError(f"from_dlpack: unsupported dtype {_dl_dtype_name(tensor.dtype)}; pymx "
                        f"takes float16/32/64, bfloat16, int8/32/64, uint8 and bool")
    cdef int dtype = _DL_TO_FLAG[dtype_key]
    cdef int itemsize = tensor.dtype.bits // 8
    source_type, source_id = dlpack_device_of(tensor.device.device_type, tensor.device.device_id)
    cdef int device_type = source_type, device_id = source_id
    if device is not None:
        _device_pair(device, &device_type, &device_id)

    shape = tuple([tensor.shape[i] for i in range(tensor.ndim)])
    cdef int64_t size = 1
    for d in shape:
        size *= d
    strides = None
    if tensor.strides != NULL:
        strides = tuple([tensor.strides[i] for i in range(tensor.ndim)])
    cdef size_t address = <size_t>tensor.data + tensor.byte_offset
    if size == 0:
        contiguous = True
    else:
        contiguous = strides is None or _is_row_major(shape, strides)
    aligned = size == 0 or address % itemsize == 0
    source_is_host = source_type != PMX_DEVICE_GPU
    same_place = ((source_is_host and device_type != PMX_DEVICE_GPU) or
                  (source_type == device_type and source_id == device_id))

    cdef vector[int64_t] dims
    cdef PmxArray* handle
    cdef size_t span_start
    if not (contiguous and aligned):
        if copy is False:
            raise BufferError(f"from_dlpack(copy=False): the tensor of shape {shape} with strides "
                              f"{strides} at address {address:#x} needs a copy (pymx arrays are "
                              f"contiguous and element-aligned)")
        if not aligned and not source_is_host:
            raise BufferError(f"from_dlpack: a CUDA tensor must be {itemsize}-byte aligned, got "
                              f"address {address:#x}; make a copy of it first")
        if not aligned:
            # The capsule keeps the memory alive during the copy; its destructor releases it.
            values = _host_copy(address, shape, strides, DTYPES[dtype], itemsize)
            out = empty(shape, DTYPES[dtype], _device_object(device_type, device_id))
            out._sync_copy_from(values)
            return out
        # Strided: the span of memory the tensor touches, wrapped as one flat array, gathered
        # into a contiguous copy where it lies (on the GPU for a CUDA tensor).
        low = sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
        high = sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0)
        span_start = address + low * itemsize
        _shape_to_c([high - low + 1], &dims)
        check(pmx_array_from_external(<void*>span_start, dims.data(), 1, dtype,
                                      source_type, source_id,
                                      _release_versioned if versioned else _release_legacy,
                                      managed, &handle))
        PyCapsule_SetName(capsule, b"used_dltensor_versioned" if versioned else b"used_dltensor")
        flat = wrap_handle(handle)
        from pymx._op import invoke
        out = invoke("_strided_copy", [flat], {"shape": shape, "strides": strides,
                                               "offset": -low})[0]
        # The wrapped memory is released once the gather has read it. Waited for: the producer
        # may change its data as soon as from_dlpack returns.
        out.wait_to_read()
        if not same_place:
            out = out._copy_to_device(_device_object(device_type, device_id))
            out.wait_to_read()
        return out

    needs_copy = copy is True or read_only or not same_place
    if copy is False and needs_copy:
        raise BufferError(f"from_dlpack(copy=False): a {'read-only ' if read_only else ''}"
                          f"tensor on DLPack device ({tensor.device.device_type}, "
                          f"{tensor.device.device_id}) cannot become a writable pymx array on "
                          f"{_device_object(device_type, device_id)} without a copy")
    cdef int wrap_type = device_type if same_place else source_type
    cdef int wrap_id = device_id if same_place else source_id
    _shape_to_c(shape, &dims)
    check(pmx_array_from_external(<void*>address, dims.data(), <int>dims.size(), dtype,
                                  wrap_type, wrap_id,
                                  _release_versioned if versioned else _release_legacy,
                                  managed, &handle))
    # pymx owns the tensor now: the capsule's destructor must leave it alone.
    PyCapsule_SetName(capsule, b"used_dltensor_versioned" if versioned else b"used_dltensor")
    out = wrap_handle(handle)
    if needs_copy:
        # The wrapped memory is released once the copy has read it. Waited for: the producer
        # may change its data as soon as from_dlpack returns.
        out = out._copy_to_device(_device_object(device_type, device_id))
        out.wait_to_read()
    return out


def _row_major_strides(shape):
    strides = []
    step = 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def _is_row_major(shape, strides):
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _host_copy(size_t address, shape, strides, dtype, int itemsize):
    """A C-contiguous NumPy copy of a strided host tensor at `address` (strides in elements)."""
    if strides is None:  # contiguous but misaligned
        strides = _row_major_strides(shape)
    low = sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
    high = sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0)
    span = (high - low + 1) * itemsize
    memory = (ctypes.c_char * span).from_address(address + low * itemsize)
    view = _onp.ndarray(shape, dtype, buffer=memory, offset=-low * itemsize,
                        strides=tuple(int(s) * itemsize for s in strides))
    return _onp.array(view, order="C")


def empty(shape, dtype, device):
    """A new array with uninitialised memory."""
    cdef vector[int64_t] dims
    cdef int device_type, device_id
    cdef PmxArray* out
    _shape_to_c(shape, &dims)
    _device_pair(device, &device_type, &device_id)
    check(pmx_array_create(dims.data(), <int>dims.size(), dtype_flag(dtype), device_type,
                           device_id, &out))
    return wrap_handle(out)


# ---------------------------------------------------------------------------------------------
# Operators
# ---------------------------------------------------------------------------------------------

cdef dict _ops = {}  # name -> PmxOp address; the registry never frees an op


cdef const PmxOp* _find_op(str name) except NULL:
    cdef PmxOp* op
    address = _ops.get(name)
    if address is not None:
        return <const PmxOp*><size_t>address
    check(pmx_op_find(name.encode(), &op))
    _ops[name] = <size_t>op
    return op


# Texts of recently used int and float attributes (repr is slow); separate dicts because
# 1 == 1.0 as keys, but their texts differ.
cdef dict _float_texts = {}
cdef dict _int_texts = {}


cdef str _attr_text(object value):
    """The string form of an attribute value that the C++ Attrs getters parse."""
    cls = type(value)
    if cls is str:
        return value
    if value is True:
        return "True"
    if value is False:
        return "False"
    if value is None:
        return "None"
    if cls is float:
        text = _float_texts.get(value)
        # -0.0 == 0.0 as a key, but the two must keep their own texts: never cache zeros.
        if text is None:
            text = float.__repr__(value)
            if value != 0.0:
                if len(_float_texts) >= 4096:
                    _float_texts.clear()
                _float_texts[value] = text
        return text
    if cls is int:
        text = _int_texts.get(value)
        if text is None:
            text = int.__repr__(value)
            if len(_int_texts) >= 4096:
                _int_texts.clear()
            _int_texts[value] = text
        return text
    if cls is tuple or cls is list:
        if len(value) == 1:
            return "(" + _attr_text(value[0]) + ",)"
        return "(" + ", ".join([_attr_text(v) for v in value]) + ")"
    if isinstance(value, _onp.bool_):
        return "True" if value else "False"
    if isinstance(value, numbers.Integral):
        return int.__repr__(int(value))
    if isinstance(value, numbers.Real):
        return float.__repr__(float(value))
    if isinstance(value, (_onp.dtype, type)):
        return dtype_name(value)
    if hasattr(value, "device_typeid"):  # pymx.device.Device
        return str(value)
    raise TypeError(f"cannot pass a value of type {cls.__name__} ({value!r}) as an operator "
                    f"attribute")


cdef PmxArray* _input_handle(object array, str name, Py_ssize_t index) except NULL:
    # The message is formatted only on failure: this runs for every input of every op.
    if isinstance(array, NDArrayBase) and (<NDArrayBase>array).handle != NULL:
        return (<NDArrayBase>array).handle
    return handle_of(array, f"input {index} of operator '{name}'")


# Note [Arithmetic fast path]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# `x + 1` and `x + y` are the most frequent calls in user code, and going through pymx.np
# (Python frames, an attribute dict, sorting out operand types) cost as much as the op itself.
# So NDArrayBase implements + - * / for the two common cases here: an exact Python int or float
# operand calls `<op>_scalar` with the attributes pymx.np.<op> passes ("scalar", "reverse"),
# and an ndarray operand calls the binary op on both, as pymx.np.<op> does. Any other operand
# goes to the fallback pymx.ndarray registers (pymx.np.<op>, or NotImplemented).

cdef enum ArithOp:
    ARITH_ADD = 0
    ARITH_SUBTRACT = 1
    ARITH_MULTIPLY = 2
    ARITH_DIVIDE = 3
    ARITH_COUNT = 4

# Per ArithOp: the binary operator, the scalar operator, the pymx.np function.
cdef tuple _ARITH_NAMES = (("add", "add_scalar", "add"),
                           ("subtract", "subtract_scalar", "subtract"),
                           ("multiply", "multiply_scalar", "multiply"),
                           ("divide", "divide_scalar", "true_divide"))
cdef const PmxOp* _arith_ops[2 * ARITH_COUNT]  # [2 * op]: binary, [2 * op + 1]: scalar
cdef object _arith_fallback = None


def set_arithmetic_fallback(fn):
    """fn(np_function_name, array, other, reverse) computes `array <op> other` (`other <op>
    array` when reverse) for the operands the fast path does not take."""
    global _arith_fallback
    _arith_fallback = fn


cdef const PmxOp* _arith_op(int op, bint scalar) except NULL:
    cdef int index = 2 * op + (1 if scalar else 0)
    if _arith_ops[index] == NULL:
        _arith_ops[index] = _find_op(_ARITH_NAMES[op][1 if scalar else 0])
    return _arith_ops[index]


cdef object _invoke_one(const PmxOp* op, int num_inputs, PmxArray** inputs, int num_attrs,
                        const char** keys, const char** values):
    """The result of an operator with one output."""
    cdef int num_results = 0, i
    cdef PmxArray** results
    check(pmx_op_invoke(op, num_inputs, inputs, num_attrs, keys, values, PMX_DEVICE_CPU, 0, 0,
                        NULL, &num_results, &results))
    for i in range(1, num_results):
        pmx_array_free(results[i])
    return wrap_handle(results[0])


cdef object _arith(NDArrayBase array, object other, int op, bint reverse):
    """`array <op> other`, or `other <op> array` when reverse."""
    cdef type cls = type(other)
    cdef PmxArray* inputs[2]
    cdef const char* keys[2]
    cdef const char* values[2]
    if array.handle != NULL:
        if cls is int or cls is float:
            text = _attr_text(other)
            inputs[0] = array.handle
            keys[0] = b"scalar"
            values[0] = PyUnicode_AsUTF8(text)
            keys[1] = b"reverse"
            values[1] = b"True" if reverse else b"False"
            return _invoke_one(_arith_op(op, True), 1, inputs, 2, keys, values)
        if isinstance(other, NDArrayBase) and (<NDArrayBase>other).handle != NULL:
            inputs[0] = (<NDArrayBase>other).handle if reverse else array.handle
            inputs[1] = array.handle if reverse else (<NDArrayBase>other).handle
            return _invoke_one(_arith_op(op, False), 2, inputs, 0, NULL, NULL)
    return _arith_fallback(_ARITH_NAMES[op][2], array, other, reverse)


cdef object _input_cast = None

cdef extern from *:
    """
    /* The calling thread's input cast (set_thread_input_cast), or NULL: one load per invoke. */
    static __thread PyObject* pymx_thread_input_cast = NULL;
    """
    PyObject* pymx_thread_input_cast


def set_input_cast(fn):
    """fn(name, inputs, attrs) -> inputs runs before every `invoke` and may replace the inputs
    (pymx.amp casts them to its operators' precisions); None removes it. The arithmetic fast
    path does not call it: + - * / promote mixed dtypes in C++ already. Returns the previous fn."""
    global _input_cast
    previous = _input_cast
    _input_cast = fn
    return previous


def set_thread_input_cast(fn):
    """As set_input_cast, for the calling thread only, and in its place there (pymx.amp runs a
    converted block's forward pass under the block's casts while other threads keep theirs).
    Returns the thread's previous fn."""
    global pymx_thread_input_cast
    previous = <object>pymx_thread_input_cast if pymx_thread_input_cast != NULL else None
    cdef PyObject* replaced = pymx_thread_input_cast
    if fn is None:
        pymx_thread_input_cast = NULL
    else:
        Py_INCREF(fn)
        pymx_thread_input_cast = <PyObject*>fn
    Py_XDECREF(replaced)
    return previous


def invoke(str name, inputs, attrs=None, device=None, out=None):
    """Runs operator `name` on `inputs` (pymx ndarrays on one device) and returns its outputs.

    attrs: dict of attribute values (converted to text, see _attr_text). device: where ops
    without inputs run (default: current_device()). out: an ndarray or a list of ndarrays/None
    receiving the results; those objects are returned in their places. Never blocks.
    """
    cdef const PmxOp* op = _find_op(name)
    if pymx_thread_input_cast != NULL:
        inputs = (<object>pymx_thread_input_cast)(name, inputs, attrs)
    elif _input_cast is not None:
        inputs = _input_cast(name, inputs, attrs)
    cdef Py_ssize_t i, n_in = len(inputs), n_attr = 0, n_out = 0
    cdef PmxArray* in_small[SMALL]
    cdef vector[PmxArray*] in_large
    cdef PmxArray** in_ptr = in_small
    cdef const char* key_small[SMALL]
    cdef const char* value_small[SMALL]
    cdef vector[const char*] key_large, value_large
    cdef const char** key_ptr = key_small
    cdef const char** value_ptr = value_small
    cdef vector[PmxArray*] out_handles
    cdef int device_type = PMX_DEVICE_CPU, device_id = 0, num_results = 0
    cdef PmxArray** results
    cdef list texts

    if n_in > SMALL:
        in_large.resize(n_in)
        in_ptr = in_large.data()
    for i in range(n_in):
        in_ptr[i] = _input_handle(inputs[i], name, i)

    if attrs:
        n_attr = len(attrs)
        if n_attr > SMALL:
            key_large.resize(n_attr)
            value_large.resize(n_attr)
            key_ptr = key_large.data()
            value_ptr = value_large.data()
        texts = []  # keeps the value strings alive during the call
        i = 0
        for key, value in attrs.items():
            try:
                text = _attr_text(value)
            except TypeError as e:
                raise TypeError(f"operator '{name}', attribute '{key}': {e}") from None
            texts.append(text)
            key_ptr[i] = PyUnicode_AsUTF8(key)
            value_ptr[i] = PyUnicode_AsUTF8(text)
            i += 1

    if n_in == 0:
        if device is None:
            from pymx.device import current_device
            device = current_device()
        _device_pair(device, &device_type, &device_id)

    if out is not None:
        if isinstance(out, NDArrayBase):
            out = [out]
        n_out = len(out)
        out_handles.resize(n_out)
        for i in range(n_out):
            if out[i] is not None:
                out_handles[i] = handle_of(out[i], f"out[{i}] of operator '{name}'")

    check(pmx_op_invoke(op, <int>n_in, in_ptr, <int>n_attr, key_ptr, value_ptr, device_type,
                        device_id, <int>n_out, out_handles.data(), &num_results, &results))

    cdef list outputs = []
    for i in range(num_results):
        if i < n_out and out[i] is not None:
            pmx_array_free(results[i])  # the caller's object already owns that array
            outputs.append(out[i])
        else:
            outputs.append(wrap_handle(results[i]))
    return outputs


def op_names():
    """Every registered operator name, sorted."""
    cdef int count
    cdef const char* const* names
    check(pmx_op_list(&count, &names))
    return [names[i].decode() for i in range(count)]


def random_seed(uint64_t seed):
    check(pmx_random_seed(seed))


def set_deterministic(bint on):
    """Switches the deterministic mode; returns the previous state. Call with no op in flight."""
    cdef int previous
    check(pmx_deterministic_set(on, &previous))
    return bool(previous)


def is_deterministic():
    cdef int on
    check(pmx_deterministic_get(&on))
    return bool(on)


# ---------------------------------------------------------------------------------------------
# Engine
# ---------------------------------------------------------------------------------------------

def waitall():
    """Blocks until every pushed op has finished; raises the first stored error (once)."""
    cdef int rc
    with nogil:
        rc = pmx_engine_wait_all()
    check(rc)


def engine_dump():
    """Pending ops per var, as text (for debugging hangs)."""
    cdef const char* text
    check(pmx_engine_dump(&text))
    return text.decode("utf-8", "replace")


def cuda_graph_stats():
    """{'captured', 'replayed', 'refused'}: CUDA graphs of bulk replays since the process started."""
    cdef uint64_t captured, replayed, refused
    check(pmx_cuda_graph_stats(&captured, &replayed, &refused))
    return {"captured": captured, "replayed": replayed, "refused": refused}


def profiler_set_running(bint running):
    check(pmx_profiler_set_running(running))


def profiler_set_paused(bint paused):
    check(pmx_profiler_set_paused(paused))


def profiler_trace_json():
    """The recorded spans as a Chrome trace (JSON text). Called without the GIL: it waits for
    the GPU spans it reports."""
    cdef const char* text
    cdef int rc
    with nogil:
        rc = pmx_profiler_trace_json(&text)
    check(rc)
    return text.decode("utf-8", "replace")


def profiler_aggregate_json(bint reset=False):
    """Aggregate statistics of the recorded spans (JSON text); `reset` forgets the spans it
    reports in the same step. Called without the GIL, as profiler_trace_json."""
    cdef const char* text
    cdef int rc
    cdef int reset_flag = reset
    with nogil:
        rc = pmx_profiler_aggregate_json(reset_flag, &text)
    check(rc)
    return text.decode("utf-8", "replace")


def profiler_clear():
    check(pmx_profiler_clear())


def api_version():
    cdef int major, minor
    check(pmx_api_version(&major, &minor))
    return major, minor


cdef int _fail_with_message(void* message, int device_type, int device_id,
                            void* stream) noexcept nogil:
    return pmx_error_set(PMX_ERR_INVALID_ARG, <const char*>message)


cdef void _free_message(void* message) noexcept nogil:
    free(message)


def _push_failing_op(array, str message):
    """Test hook: pushes an op that writes `array` and fails with `message` when it runs, as a
    failing kernel would. The error surfaces at the next wait on `array`."""
    cdef PmxVar* var
    cdef int device_type, device_id
    cdef PmxArray* handle = handle_of(array, "array")
    check(pmx_array_var(handle, &var))
    check(pmx_array_device(handle, &device_type, &device_id))
    cdef char* text = strdup(message.encode())
    check(pmx_engine_push(_fail_with_message, text, _free_message, NULL, 0, &var, 1, device_type,
                          device_id, b"failing_test_op"))


# ---------------------------------------------------------------------------------------------
# Collectives across GPUs
# ---------------------------------------------------------------------------------------------

def nccl_all_reduce(arrays):
    """Sums `arrays` (one per GPU, all of one shape and dtype) in place with NCCL. Returns at
    once, except that the first call for a list of GPUs loads NCCL and creates their
    communicator (without the GIL)."""
    cdef vector[PmxArray*] handles
    cdef int rc
    for i, array in enumerate(arrays):
        handles.push_back(handle_of(array, f"arrays[{i}]"))
    with nogil:
        rc = pmx_nccl_all_reduce(<int>handles.size(), handles.data())
    check(rc)
