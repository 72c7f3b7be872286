"""Errors, the dtype table and the version: the pieces every other module shares."""
import numpy as _onp

__version__ = "0.1.0"


class PymxError(RuntimeError):
    """An error raised by pymx's native code (the C++ message is kept verbatim)."""


class PymxValueError(PymxError, ValueError):
    """The caller passed a bad value: shape, device, attribute (C status INVALID_ARG)."""


class PymxMemoryError(PymxError, MemoryError):
    """Out of host or device memory (C status OOM)."""


class PymxIndexError(PymxError, IndexError):
    """An index out of range (C status INDEX)."""


class PymxTypeError(PymxError, TypeError):
    """A bad or unsupported dtype or argument type (C status TYPE)."""


# C status (enum PmxStatus) -> exception class; statuses not listed raise PymxError.
STATUS_ERRORS = {
    1: PymxValueError,
    2: PymxMemoryError,
    7: PymxIndexError,
    8: PymxTypeError,
}

# dtype name -> MXNet type flag (enum PmxDType / pymx::DType); the flag indexes DTYPES.
DTYPE_FLAGS = {
    "float32": 0,
    "float64": 1,
    "float16": 2,
    "uint8": 3,
    "int32": 4,
    "int8": 5,
    "int64": 6,
    "bool": 7,
}
DTYPES = [_onp.dtype(name) for name in sorted(DTYPE_FLAGS, key=DTYPE_FLAGS.get)]

# MXNet's numpy interface creates float32 arrays unless told otherwise.
DEFAULT_DTYPE = _onp.dtype("float32")


def dtype_flag(dtype):
    """The type flag of `dtype` (a numpy dtype, a type such as numpy.float32, or a name)."""
    if dtype is None:  # numpy reads None as float64; here it is almost always a caller's slip
        raise TypeError("expected a dtype, got None")
    try:
        name = _onp.dtype(dtype).name
    except TypeError:
        raise TypeError(f"not a dtype: {dtype!r}") from None
    flag = DTYPE_FLAGS.get(name)
    if flag is None:
        supported = ", ".join(DTYPE_FLAGS)
        raise TypeError(f"pymx does not support dtype {name}; supported: {supported}")
    return flag
