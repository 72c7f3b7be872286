"""pymx.runtime (MXNet's mx.runtime): the features of this pymx build, as in

    from pymx.runtime import Features
    Features().is_enabled('CUDA')

Features are found out without loading anything that could fail or initialise a GPU:
  - CUDA: the native library was compiled with the CUDA backend (asked through the C API:
    pmx_gpu_physical_device answers PMX_ERR_NO_CUDA only in a CPU-only build). It says nothing
    about a GPU being present: num_gpus() does.
  - CUDNN, CUBLAS, CUSOLVER, NCCL: CUDA is compiled and the library pymx opens at first use
    (libcudnn.so.9, libcublas.so.13, libcusolver.so.12, libnccl.so.2) is where pymx looks for it:
    in its nvidia-* wheel, in a directory of LD_LIBRARY_PATH, or in the loader's cache. The file
    is found, not opened, so a library that is found but broken shows as enabled and fails with
    pymx's message (naming the paths tried) at its first use.
  - BLAS_OPEN, LAPACK: OpenBLAS (from the scipy-openblas32 wheel) is always linked.
  - INT64_TENSOR_SIZE: array sizes and indices are 64-bit.
  - CPU_SSE2, CPU_AVX2, CPU_AVX512F: the vector instruction sets pymx's CPU kernels use in this
    process (asked through pmx_cpu_isa): the CPU's best, capped by PYMX_CPU_ISA (Note [CPU
    instruction sets] in engine/src/cpu_isa.h). SSE2 is x86-64's baseline; AVX2 goes with FMA.
  - DIST_KVSTORE: mpi4py, which kvstore 'dist_sync' needs, is installed (found, not imported:
    importing it starts MPI).
  - Everything else MXNet lists (OPENMP, ONEDNN, TENSORRT, OPENCV, SIGNAL_HANDLER, ...) is not in
    pymx and is False: pymx runs its own worker threads, not OpenMP.

Deliberate differences from MXNet 2.x: CUBLAS and CUSOLVER are pymx's additions (MXNet links
them); the CPU features are those its kernels choose at run time, not those a build was compiled
for (MXNet's CPU_SSE3 to CPU_AVX and F16C are not listed; CPU_AVX512F is pymx's). Feature is a
plain class, not a ctypes structure.
"""
import collections
import ctypes
import ctypes.util
import importlib.util
import os

from pymx import libinfo

__all__ = ["Feature", "feature_list", "Features"]

# C status PMX_ERR_NO_CUDA (engine/include/pymx/c_api.h).
_PMX_ERR_NO_CUDA = 4

# The libraries the CUDA backend opens at first use: (feature, soname, directory of its nvidia-*
# wheel under site-packages), as cuda/src/*_loader.cc name them.
_CUDA_LIBRARIES = (("CUBLAS", "libcublas.so.13", "nvidia/cu13/lib"),
                   ("CUDNN", "libcudnn.so.9", "nvidia/cudnn/lib"),
                   ("CUSOLVER", "libcusolver.so.12", "nvidia/cu13/lib"),
                   ("NCCL", "libnccl.so.2", "nvidia/nccl/lib"))

# MXNet's features that pymx's build never has.
_ABSENT = ("CUDA_RTC", "TENSORRT", "CUTENSOR", "OPENMP", "SSE", "BLAS_ATLAS", "BLAS_MKL",
           "BLAS_APPLE", "ONEDNN", "MKLDNN", "OPENCV", "TVM_OP", "SIGNAL_HANDLER", "DEBUG")


class Feature:
    """One build feature: its `name` and whether it is `enabled`."""

    __slots__ = ("name", "enabled")

    def __init__(self, name, enabled):
        self.name = name
        self.enabled = bool(enabled)

    def __repr__(self):
        return f"{'✔' if self.enabled else '✖'} {self.name}"


def _cuda_compiled():
    lib = ctypes.CDLL(libinfo.find_lib_path()[0])
    cuda_device = ctypes.c_int()
    # gpu(-1) never exists: a CUDA build answers INVALID_ARG (or a CUDA error), a CPU-only build
    # NO_CUDA; no GPU context is created either way.
    return lib.pmx_gpu_physical_device(-1, ctypes.byref(cuda_device)) != _PMX_ERR_NO_CUDA


def _library_found(soname, wheel_dir):
    """Whether `soname` is where pymx's loader looks (cuda/src/nvidia_library.cc): next to pymx
    in its wheel directory, or on the loader's search path."""
    site_packages = os.path.dirname(os.path.dirname(libinfo.find_lib_path()[0]))
    directories = [os.path.join(site_packages, wheel_dir)]
    directories += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    if any(os.path.exists(os.path.join(d, soname)) for d in directories):
        return True
    # The loader's cache (ldconfig): find_library gives the soname of the library it finds.
    stem = soname[len("lib"):soname.index(".so")]
    return ctypes.util.find_library(stem) == soname


def _cpu_isa_level():
    """0 x86-64's baseline, 1 AVX2 with FMA, 2 AVX-512 (pmx_cpu_isa)."""
    lib = ctypes.CDLL(libinfo.find_lib_path()[0])
    lib.pmx_last_error.restype = ctypes.c_char_p
    level = ctypes.c_int()
    if lib.pmx_cpu_isa(ctypes.byref(level)) != 0:  # PYMX_CPU_ISA names no instruction set
        raise ValueError(lib.pmx_last_error().decode())
    return level.value


def feature_list():
    """The list of pymx's build features (Feature objects), in a fixed order."""
    cuda, cpu_isa = _cuda_compiled(), _cpu_isa_level()
    features = [Feature("CUDA", cuda)]
    features += [Feature(name, cuda and _library_found(soname, wheel_dir))
                 for name, soname, wheel_dir in _CUDA_LIBRARIES]
    features += [Feature("BLAS_OPEN", True), Feature("LAPACK", True),
                 Feature("INT64_TENSOR_SIZE", True),
                 Feature("CPU_SSE2", True), Feature("CPU_AVX2", cpu_isa >= 1),
                 Feature("CPU_AVX512F", cpu_isa >= 2),
                 Feature("DIST_KVSTORE", importlib.util.find_spec("mpi4py") is not None)]
    features += [Feature(name, False) for name in _ABSENT]
    return features


class Features(collections.OrderedDict):
    """pymx's build features by name (computed once per process):
    Features().is_enabled('CUDA')."""

    instance = None

    def __new__(cls):
        if cls.instance is None:
            cls.instance = super().__new__(cls)
            super().__init__(cls.instance, [(f.name, f) for f in feature_list()])
        return cls.instance  # (OrderedDict.__init__ with no arguments then keeps its items)

    def __repr__(self):
        return str(list(self.values()))

    def is_enabled(self, feature_name):
        """Whether feature `feature_name` (any case) is enabled; an unknown name raises a
        RuntimeError listing the known ones, as MXNet's does."""
        if not isinstance(feature_name, str):
            raise TypeError(f"is_enabled: feature_name must be a str, got {feature_name!r}")
        name = feature_name.upper()
        if name not in self:
            raise RuntimeError(f"Feature '{feature_name}' is unknown, known features are: "
                               f"{list(self.keys())}")
        return self[name].enabled
