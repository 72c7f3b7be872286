"""Devices: where arrays live and ops run (MXNet's python/mxnet/device.py).

`Device('gpu', 1)` prints as `gpu(1)`. `with device:` makes it the default for array creation in
the current thread (and asyncio task); scopes nest. cpu(0), cpu(1), ... are distinct devices
served by the CPU workers, so data parallelism can be tested without GPUs.
"""
import contextvars
import ctypes
import importlib
import os

from pymx._c import core as _core

_TYPE_IDS = {"cpu": 1, "gpu": 2, "cpu_pinned": 3}
_TYPE_NAMES = {v: k for k, v in _TYPE_IDS.items()}


class Device:
    """A device: `device_type` in 'cpu', 'gpu', 'cpu_pinned', and a non-negative `device_id`.

    Device(device_type, device_id=0); `device_type` may also be a Device (copied).
    """

    __slots__ = ("device_typeid", "device_id", "_scope_tokens")

    def __init__(self, device_type, device_id=0):
        if isinstance(device_type, Device):
            self.device_typeid = device_type.device_typeid
            self.device_id = device_type.device_id
        else:
            typeid = _TYPE_IDS.get(device_type)
            if typeid is None:
                raise ValueError(f"unknown device type {device_type!r}; expected one of "
                                 f"{', '.join(map(repr, _TYPE_IDS))}")
            if not isinstance(device_id, int) or isinstance(device_id, bool) or device_id < 0:
                raise ValueError(f"device_id must be a non-negative int, got {device_id!r}")
            self.device_typeid = typeid
            self.device_id = device_id
            if typeid == 2 and not _cuda_libraries_loaded:
                _preload_cuda_libraries()
        self._scope_tokens = []

    @property
    def device_type(self):
        return _TYPE_NAMES[self.device_typeid]

    def __eq__(self, other):
        return (isinstance(other, Device) and self.device_typeid == other.device_typeid
                and self.device_id == other.device_id)

    def __hash__(self):
        return hash((self.device_typeid, self.device_id))

    def __str__(self):
        return f"{self.device_type}({self.device_id})"

    __repr__ = __str__

    def __reduce__(self):
        return (Device, (self.device_type, self.device_id))

    def __enter__(self):
        # One token per entry, so the same Device object may be entered again while active.
        self._scope_tokens.append(_current.set(self))
        return self

    def __exit__(self, *exc):
        _current.reset(self._scope_tokens.pop())

    def empty_cache(self):
        """Returns this device's cached, unused memory blocks to the system or the driver."""
        _core.empty_cache(self.device_typeid, self.device_id)

    def memory_stats(self):
        """Pool statistics in bytes: in_use, cached, peak_in_use, and num_allocs."""
        return _core.memory_stats(self.device_typeid, self.device_id)


def cpu(device_id=0):
    """The CPU device `device_id` (cpu(0) and cpu(1) are distinct devices of the same host)."""
    return Device("cpu", device_id)


def gpu(device_id=0):
    """GPU `device_id`. Creating the object never fails; using a GPU that is not there does."""
    return Device("gpu", device_id)


def cpu_pinned(device_id=0):
    """Page-locked host memory (fast copies to and from GPUs); runs like cpu(device_id)."""
    return Device("cpu_pinned", device_id)


def num_gpus():
    """The number of visible GPUs: 0 without a driver, without a device, or in a CPU-only build."""
    return _core.gpu_count()


def gpu_memory_info(device_id=0):
    """(free, total) bytes of GPU `device_id`; raises PymxError on a CPU-only build."""
    return _core.gpu_memory_info(device_id)


# Note [Preloading the NVIDIA wheels]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The CUDA backend dlopens cuBLAS and cuDNN by soname at first use. When they come from the
# nvidia-* wheels (pip install pymx[cuda]) they are not on the loader's path, so before any GPU
# use (every GPU array needs a gpu Device first) they are loaded here by full path with
# RTLD_GLOBAL; the backend's dlopen then finds them already loaded. Missing wheels are fine: the
# backend falls back to the system path and names the library it cannot find. NCCL (330 MB),
# needed only by kvstore 'nccl', is preloaded the same way when such a store is created.
_CUDA_WHEEL_LIBRARIES = (("nvidia.cu13", "libcublasLt.so.13"), ("nvidia.cu13", "libcublas.so.13"),
                         ("nvidia.cudnn", "libcudnn.so.9"))
_cuda_libraries_loaded = False


def _preload_cuda_libraries():
    global _cuda_libraries_loaded
    _cuda_libraries_loaded = True
    _preload_wheel_libraries(_CUDA_WHEEL_LIBRARIES)


def _preload_wheel_libraries(libraries):
    """Loads each (wheel package, library file) found, by full path, with RTLD_GLOBAL."""
    for package, library in libraries:
        try:
            directories = importlib.import_module(package).__path__
        except ImportError:
            continue
        for directory in directories:
            path = os.path.join(directory, "lib", library)
            if os.path.exists(path):
                try:
                    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    pass  # the backend reports the library it cannot load
                break


_current = contextvars.ContextVar("pymx_device", default=Device("cpu", 0))


def current_device():
    """The default device of this thread: the innermost `with device:` scope, else cpu(0)."""
    return _current.get()
