"""pymx.util (MXNet's mx.util): NumPy-semantics switches, environment variables and small
helpers, so MXNet 2.x code that calls them runs unchanged.

pymx always has NumPy semantics: NumPy shapes (zero-size and zero-dim arrays) and np.ndarray
arrays. The switches therefore report True, and the calls that would keep that state
(set_np(), np_shape(True), use_np, ...) are accepted; a call asking for MXNet's legacy
semantics, which pymx does not have, raises a ValueError saying so. The default dtype is
float32, as in MXNet; NumPy's float64 default (set_np(dtype=True)) is not supported.

Deliberate differences from MXNet 2.x:
  - set_np(shape=False / array=False / dtype=True), set_np_shape(False), np_shape(False),
    np_array(False) and set_np_default_dtype(True) raise ValueError (MXNet switches modes).
  - use_np, use_np_shape and use_np_array return the function or class unchanged: there is no
    mode to switch around its calls.
  - getenv / setenv read and write the process environment (os.environ, which native code sees
    too); MXNet goes through its C library, which reads the same environment.
"""
import contextlib
import os

from pymx.device import gpu_memory_info, num_gpus

__all__ = ["set_np", "reset_np", "is_np_array", "is_np_shape", "use_np", "use_np_array",
           "use_np_shape", "np_array", "np_shape", "set_np_shape", "is_np_default_dtype",
           "set_np_default_dtype", "getenv", "setenv", "makedirs", "get_gpu_count",
           "get_gpu_memory"]


def _require_numpy_semantics(call, flag, active):
    if not isinstance(active, bool):
        raise TypeError(f"{call}: {flag} must be True or False, got {active!r}")
    if not active:
        raise ValueError(f"{call}: {flag}=False asks for MXNet's legacy semantics, which pymx "
                         f"does not have (it always uses NumPy semantics)")


def set_np(shape=True, array=True, dtype=False):
    """Turns on NumPy semantics: pymx always has them, so this checks the arguments only.
    shape=False, array=False (legacy semantics) and dtype=True (float64 default) raise."""
    _require_numpy_semantics("set_np", "shape", shape)
    _require_numpy_semantics("set_np", "array", array)
    set_np_default_dtype(dtype)


def reset_np():
    """Accepted for MXNet compatibility: pymx has no legacy semantics to go back to."""


def is_np_shape():
    """True: pymx always uses NumPy shape semantics (zero-size and zero-dim arrays)."""
    return True


def is_np_array():
    """True: pymx's arrays are always np.ndarray."""
    return True


def set_np_shape(active):
    """Returns the previous state (True); active=False raises (see the module docstring)."""
    _require_numpy_semantics("set_np_shape", "active", active)
    return True


@contextlib.contextmanager
def np_shape(active=True):
    """A scope with NumPy shape semantics, which pymx always has; active=False raises."""
    _require_numpy_semantics("np_shape", "active", active)
    yield


@contextlib.contextmanager
def np_array(active=True):
    """A scope with np.ndarray arrays, which pymx always has; active=False raises."""
    _require_numpy_semantics("np_array", "active", active)
    yield


def use_np(func):
    """Decorator for functions and classes written with NumPy semantics; pymx needs no mode
    switch around them, so `func` is returned unchanged."""
    if not callable(func):
        raise TypeError(f"use_np: expected a function or class, got {func!r}")
    return func


use_np_shape = use_np
use_np_array = use_np


def is_np_default_dtype():
    """False: the default dtype of pymx's array creation is float32, as in MXNet."""
    return False


def set_np_default_dtype(is_np_default_dtype=True):  # noqa: A002 (MXNet's argument name)
    """Returns the previous state (False). pymx's default dtype is float32 only, so True
    (NumPy's float64 default) raises a ValueError."""
    if not isinstance(is_np_default_dtype, bool):
        raise TypeError(f"set_np_default_dtype: expected True or False, got "
                        f"{is_np_default_dtype!r}")
    if is_np_default_dtype:
        raise ValueError("set_np_default_dtype: pymx's default dtype is float32 only; NumPy's "
                         "float64 default is not supported (pass dtype= where needed)")
    return False


def getenv(name):
    """The value of environment variable `name`, or None when it is not set."""
    if not isinstance(name, str):
        raise TypeError(f"getenv: name must be a str, got {name!r}")
    return os.environ.get(name)


def setenv(name, value):
    """Sets environment variable `name` to `value` (a str), or removes it when value is None.
    pymx reads most of its PYMX_* settings once, at the first use of what they configure."""
    if not isinstance(name, str) or not name or "=" in name:
        raise ValueError(f"setenv: name must be a non-empty str without '=', got {name!r}")
    if value is None:
        os.environ.pop(name, None)
    elif isinstance(value, str):
        os.environ[name] = value
    else:
        raise TypeError(f"setenv: value must be a str or None, got {value!r}")


def makedirs(d):
    """Creates directory `d` and its parents; an existing directory is fine."""
    os.makedirs(d, exist_ok=True)


def get_gpu_count():
    """The number of visible GPUs (num_gpus())."""
    return num_gpus()


def get_gpu_memory(gpu_dev_id):
    """(free, total) bytes of GPU `gpu_dev_id` (gpu_memory_info())."""
    return gpu_memory_info(gpu_dev_id)
