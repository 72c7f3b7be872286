"""pymx: a lightweight deep-learning runtime in the mould of Apache MXNet 2.x.

    from pymx import np, npx, gluon, autograd
"""
# OpenBLAS first: importing the wheel loads libscipy_openblas with RTLD_GLOBAL, which libpymx
# needs when its RPATH does not lead to it (editable and --target installs).
import scipy_openblas32  # noqa: F401

try:
    from pymx._c import core as _core  # noqa: F401
except ImportError as error:
    raise ImportError(
        f"pymx's compiled core is missing from {__path__[0]}: this looks like pymx's source tree "
        "without a build. Install pymx (`pip install .`) and run from another directory, or "
        "install it in place for development (`pip install --no-build-isolation -e .`).") from error

from pymx.base import PymxError, __version__
from pymx.device import Device, cpu, cpu_pinned, current_device, gpu, gpu_memory_info, num_gpus
from pymx._op import waitall
from pymx import ndarray as _ndarray  # noqa: F401  (registers the array class with the core)
from pymx import numpy as np
from pymx import numpy_extension as npx
from pymx import autograd
from pymx import gluon
from pymx import initializer, kvstore, lr_scheduler, optimizer, profiler
from pymx import amp
from pymx import operator
from pymx import recordio
from pymx import io, image  # io first: io.ImageRecordIter imports image, which needs io.base
from pymx import context, random, runtime, util
from pymx.context import Context, current_context

init = initializer  # MXNet's `mx.init` spelling
kv = kvstore  # MXNet's `mx.kv` spelling

__all__ = ["np", "npx", "gluon", "autograd", "amp", "initializer", "init", "optimizer", "lr_scheduler",
           "kvstore", "profiler", "operator", "Device", "cpu", "gpu", "cpu_pinned", "num_gpus",
           "gpu_memory_info", "current_device", "waitall", "PymxError", "__version__", "kv",
           "random", "util", "runtime", "context", "Context", "current_context", "io", "image"]
