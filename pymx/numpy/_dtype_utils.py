"""NumPy's constants, dtype utilities, memory-overlap tests and print options for `pymx.np`.

promote_types, result_type and min_scalar_type answer for pymx's dtypes (float16, bfloat16,
float32, float64, uint8, int8, int32, int64, bool) what pymx's operators do: promote_types and
result_type ask the `add` operator itself for its result dtype (on empty arrays), so they follow
its rules (MXNet's): int8 with uint8 gives int32, float16 with bfloat16 float32, an integer array
with a Python float float32, and data that is not an array float32 unless it is boolean.

Arrays share memory when they are views of one buffer: reshapes and first-axis slices made
without a copy (such as the slices of `gluon.utils.split_data` along the first axis outside
autograd) and DLPack imports of one producer's memory. The functions of `np` that return new
arrays (reshape, slicing with [], transpose, ...) copy.

set_printoptions and get_printoptions are NumPy's: a pymx array prints its values through NumPy,
so the options apply to both, exactly as they do to NumPy arrays.
"""
import functools
import numbers

import numpy as _onp

from pymx.base import DTYPE_FLAGS, as_dtype, bfloat16
from pymx.device import cpu
from pymx.ndarray import ndarray
from pymx.numpy import _core

__all__ = ["NAN", "NaN", "NINF", "PINF", "NZERO", "PZERO", "bool"]

NAN = NaN = _onp.nan
NINF = -_onp.inf
PINF = _onp.inf
NZERO = -0.0
PZERO = 0.0
bool = _onp.bool_  # the dtype, as np.bool in NumPy 2 (this module does not use the builtin)


def _export(fn):
    __all__.append(fn.__name__)
    return fn


# ---------------------------------------------------------------------------------------------
# Floating-point limits
# ---------------------------------------------------------------------------------------------

class _BFloat16Info:
    """Machine limits of bfloat16 (float32's 8 exponent bits, 7 explicit mantissa bits), with
    the attributes of numpy.finfo; the values are float32 scalars, which hold them exactly."""

    bits = 16
    dtype = bfloat16
    nmant = 7
    nexp = 8
    iexp = 8
    machep = -7
    negep = -8
    minexp = -126
    maxexp = 128
    precision = 2
    eps = _onp.float32(2.0 ** -7)
    epsneg = _onp.float32(2.0 ** -8)
    max = _onp.float32((2.0 - 2.0 ** -7) * 2.0 ** 127)
    min = -max
    resolution = _onp.float32(0.01)
    smallest_normal = _onp.float32(2.0 ** -126)
    tiny = smallest_normal
    smallest_subnormal = _onp.float32(2.0 ** -133)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:.7e}, max={self.max:.7e}, "
                f"dtype=bfloat16)")


_BFLOAT16_INFO = _BFloat16Info()


@_export
def finfo(dtype):
    """Machine limits of a floating dtype (also of an array's dtype): numpy.finfo, and for
    bfloat16 its own (eps 2**-7, max about 3.39e38, tiny 2**-126, 16 bits)."""
    if isinstance(dtype, ndarray):
        dtype = dtype.dtype
    dtype = as_dtype(dtype)
    if dtype == bfloat16:
        return _BFLOAT16_INFO
    return _onp.finfo(dtype)  # its ValueError names a dtype that is not a float


# ---------------------------------------------------------------------------------------------
# Type promotion
# ---------------------------------------------------------------------------------------------

def _pymx_dtype(value, what):
    """`value` (an array, a dtype or its name) as one of pymx's dtypes; a TypeError otherwise."""
    dtype = value.dtype if isinstance(value, (ndarray, _onp.ndarray)) else as_dtype(value)
    if dtype != bfloat16 and dtype.name not in DTYPE_FLAGS:
        raise TypeError(f"{what}: pymx has no dtype {dtype} (its dtypes are "
                        f"{', '.join(DTYPE_FLAGS)})")
    return dtype


def _empty(dtype):
    return _core.empty((0,), dtype=dtype, device=cpu())


@functools.lru_cache(maxsize=None)
def _promoted(dtype1, dtype2):
    return _core.add(_empty(dtype1), _empty(dtype2)).dtype


@functools.lru_cache(maxsize=None)
def _promoted_with_scalar(dtype, scalar_kind):
    scalar = {"b": True, "i": 1, "f": 1.0}[scalar_kind]
    return _core.add(_empty(dtype), scalar).dtype


def _scalar_kind(value):
    if isinstance(value, (type(True), _onp.bool_)):
        return "b"
    return "i" if isinstance(value, (numbers.Integral, _onp.integer)) else "f"


@_export
def promote_types(type1, type2):
    """The dtype of pymx's binary operators on arrays of dtypes type1 and type2."""
    return _promoted(_pymx_dtype(type1, "promote_types"), _pymx_dtype(type2, "promote_types"))


@_export
def result_type(*arrays_and_dtypes):
    """The dtype of pymx's operators applied to these operands: arrays and dtypes promote each
    other, then Python scalars join with their kind (an int keeps an integer dtype, a float
    makes integers float32). Scalars alone become arrays as np.array makes them."""
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    scalars = [v for v in arrays_and_dtypes if _core._is_scalar(v)]
    typed = [_pymx_dtype(v, "result_type") for v in arrays_and_dtypes
             if not _core._is_scalar(v)]
    if not typed:  # the first scalar as the array np.array would make of it
        typed = [_core._host_array(scalars[0], None).dtype]
        scalars = scalars[1:]
    dtype = functools.reduce(_promoted, typed)
    for scalar in scalars:
        dtype = _promoted_with_scalar(dtype, _scalar_kind(scalar))
    return dtype


# The smallest of pymx's integer dtypes for a range of values (no int16, uint16, uint32, uint64).
_INTEGER_LADDER = [(_onp.uint8, 0, 255), (_onp.int8, -128, 127),
                   (_onp.int32, -2 ** 31, 2 ** 31 - 1), (_onp.int64, -2 ** 63, 2 ** 63 - 1)]


@_export
def min_scalar_type(a):
    """The smallest of pymx's dtypes that holds the scalar (or 0-d array) `a`: uint8 for small
    non-negative integers, else int8, int32 or int64; float16, float32 or float64 for floats
    by range (not precision, as NumPy). An array of one or more dimensions gives its dtype."""
    if isinstance(a, (ndarray, _onp.ndarray)):
        if a.ndim:
            return _pymx_dtype(a, "min_scalar_type")
        a = a.item()
    if isinstance(a, (type(True), _onp.bool_)):
        return _onp.dtype(_onp.bool_)
    if isinstance(a, (numbers.Integral, _onp.integer)):
        value = int(a)
        for dtype, low, high in _INTEGER_LADDER:
            if low <= value <= high:
                return _onp.dtype(dtype)
        raise ValueError(f"min_scalar_type: {value} does not fit any of pymx's integer dtypes "
                         f"(int64 at most)")
    if isinstance(a, (numbers.Real, _onp.floating)):
        value = float(a)
        for dtype in (_onp.float16, _onp.float32):
            if not _onp.isfinite(value) or abs(value) <= float(_onp.finfo(dtype).max):
                return _onp.dtype(dtype)
        return _onp.dtype(_onp.float64)
    raise TypeError(f"min_scalar_type: expected a number or an array, got {type(a).__name__}")


# ---------------------------------------------------------------------------------------------
# Memory overlap
# ---------------------------------------------------------------------------------------------

@_export
def shares_memory(a, b, max_work=None):
    """Whether arrays a and b use some of the same bytes (views of one buffer). Exact: pymx's
    views are contiguous, so overlapping address ranges share elements. Waits for nothing."""
    if not isinstance(a, ndarray) or not isinstance(b, ndarray):
        return False
    (begin_a, end_a), (begin_b, end_b) = a._memory_range(), b._memory_range()
    return begin_a < end_b and begin_b < end_a


@_export
def may_share_memory(a, b, max_work=None):
    """Whether a and b might share memory; for pymx's contiguous views the same answer as
    shares_memory."""
    return shares_memory(a, b, max_work)


# ---------------------------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------------------------

@_export
def set_printoptions(precision=None, threshold=None, **kwargs):
    """NumPy's print options (numpy.set_printoptions, the same keywords), which pymx arrays
    print with too."""
    _onp.set_printoptions(precision=precision, threshold=threshold, **kwargs)


@_export
def get_printoptions():
    """The current print options (numpy.get_printoptions), a dict."""
    return _onp.get_printoptions()

