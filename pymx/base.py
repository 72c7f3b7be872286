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


class PymxLinAlgError(PymxValueError, _onp.linalg.LinAlgError):
    """A linear-algebra routine failed on its input: a singular matrix, a matrix that is not
    positive definite, or an eigen/singular value iteration that did not converge (C status
    LINALG). It is also a numpy.linalg.LinAlgError, so NumPy-style handlers catch it."""


class PymxAxisError(PymxValueError, _onp.exceptions.AxisError):
    """An axis out of range for the array's rank (C status AXIS). It is also NumPy's AxisError
    (a ValueError and an IndexError), which NumPy raises for the same calls."""

    def __init__(self, message):
        _onp.exceptions.AxisError.__init__(self, message)  # its one-argument form: the message


class PymxOverflowError(PymxError, OverflowError):
    """A Python integer out of bounds for the dtype an op computes in (C status OVERFLOW), as
    NumPy 2 raises for `int64_array + 2**70`."""


# C status (enum PmxStatus) -> exception class; statuses not listed raise PymxError.
STATUS_ERRORS = {
    1: PymxValueError,
    2: PymxMemoryError,
    7: PymxIndexError,
    8: PymxTypeError,
    9: PymxLinAlgError,
    10: PymxAxisError,
    11: PymxOverflowError,
}

# NumPy has no bfloat16, so pymx spells it as MXNet does (python/mxnet/ndarray/ndarray.py): a
# 16-bit record. A NumPy array of it holds raw bits (what files store); asnumpy() of a bfloat16
# array gives float32, and as_dtype("bfloat16") gives this object.
bfloat16 = _onp.dtype([("bfloat16", _onp.uint16)])

# dtype name -> MXNet type flag (enum PmxDType / pymx::DType); DTYPES maps a flag to its dtype.
DTYPE_FLAGS = {
    "float32": 0,
    "float64": 1,
    "float16": 2,
    "uint8": 3,
    "int32": 4,
    "int8": 5,
    "int64": 6,
    "bool": 7,
    "bfloat16": 12,
}

# MXNet's numpy interface creates float32 arrays unless told otherwise.
DEFAULT_DTYPE = _onp.dtype("float32")


def as_dtype(dtype):
    """`dtype` (a numpy dtype, a type such as numpy.float32, or a name) as a numpy dtype object;
    "bfloat16" gives `bfloat16`."""
    if dtype is None:  # numpy reads None as float64; here it is almost always a caller's slip
        raise TypeError("expected a dtype, got None")
    if isinstance(dtype, str) and dtype == "bfloat16":
        return bfloat16
    return _onp.dtype(dtype)  # its TypeError names the value ("data type 'x' not understood")


def dtype_name(dtype):
    """The name pymx and its native code use for `dtype` ("bfloat16" for `bfloat16`, where
    numpy would say "void16")."""
    dtype = as_dtype(dtype)
    return "bfloat16" if dtype == bfloat16 else dtype.name


def bfloat16_to_float32(values):
    """The float32 values of a NumPy array of `bfloat16` bits (exact: the bits are the top half
    of a float32)."""
    return (values.view(_onp.uint16).astype(_onp.uint32) << 16).view(_onp.float32)


def dtype_flag(dtype):
    """The type flag of `dtype` (a numpy dtype, a type such as numpy.float32, or a name)."""
    name = dtype_name(dtype)
    flag = DTYPE_FLAGS.get(name)
    if flag is None:
        supported = ", ".join(DTYPE_FLAGS)
        raise TypeError(f"pymx does not support dtype {name}; supported: {supported}")
    return flag


DTYPES = {flag: as_dtype(name) for name, flag in DTYPE_FLAGS.items()}
