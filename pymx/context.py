"""pymx.context (MXNet's mx.context): the deprecated names of pymx.device, kept so MXNet 1.x
code runs. As in MXNet 2.x, Context(...) builds a Device and current_context() returns
current_device(); both warn with a DeprecationWarning naming the replacement. Differences from
MXNet 2.x: none known.
"""
import warnings

from pymx.device import (Device, cpu, cpu_pinned, current_device, gpu,  # noqa: F401
                         gpu_memory_info, num_gpus)

__all__ = ["Context", "current_context", "Device", "cpu", "gpu", "cpu_pinned", "num_gpus",
           "gpu_memory_info"]


def Context(*args, **kwargs):  # noqa: N802 (MXNet's name for what was a class)
    """Deprecated: Device(*args, **kwargs)."""
    warnings.warn("Context is deprecated; use pymx.Device (the same arguments) instead",
                  DeprecationWarning, stacklevel=2)
    return Device(*args, **kwargs)


def current_context():
    """Deprecated: current_device()."""
    warnings.warn("current_context() is deprecated; use pymx.current_device() instead",
                  DeprecationWarning, stacklevel=2)
    return current_device()
