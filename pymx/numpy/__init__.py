"""pymx.np: MXNet's NumPy-compatible array interface.

    from pymx import np
    x = np.arange(6).reshape(2, 3)
    y = np.exp(x) + 1          # asynchronous; x.asnumpy() or print waits

Functions follow NumPy's signatures (out=, dtype=, axis=, keepdims=, device= on creation).
Differences from NumPy, as in MXNet: float data is float32 by default, and integer division
or float-valued functions of integers give float32. Arithmetic on bools that NumPy computes in
int8 or float16 stays bool where its values are 0 and 1 (square, rint, round, power, mod,
floor_divide: the same truth values as NumPy's numbers), and float-valued functions of bools
(fabs, spacing, divide, ...) give float32, as of any integer. rint of integers keeps their dtype.
"""
import numpy as _onp

from pymx.base import bfloat16 as _bfloat16
from pymx.ndarray import from_dlpack, ndarray
from pymx.numpy._core import *  # noqa: F401,F403
from pymx.numpy._core import __all__ as _core_all
from pymx.numpy import (_creation, _cumulative, _dtype_utils, _einsum, _elementwise, _histograms,
                        _index_tricks, _manipulation, _math_extra, _nan_reductions, _polynomial,
                        _searching, _sets, _sorting, _statistics, _windows)
from pymx.numpy._creation import *  # noqa: F401,F403
from pymx.numpy._cumulative import *  # noqa: F401,F403
from pymx.numpy._elementwise import *  # noqa: F401,F403
from pymx.numpy._manipulation import *  # noqa: F401,F403
from pymx.numpy._searching import *  # noqa: F401,F403
from pymx.numpy._statistics import *  # noqa: F401,F403
from pymx.numpy._einsum import *  # noqa: F401,F403
from pymx.numpy._index_tricks import *  # noqa: F401,F403
from pymx.numpy._histograms import *  # noqa: F401,F403
from pymx.numpy._sets import *  # noqa: F401,F403
from pymx.numpy._sorting import *  # noqa: F401,F403
from pymx.numpy._polynomial import *  # noqa: F401,F403
from pymx.numpy._windows import *  # noqa: F401,F403
from pymx.numpy._math_extra import *  # noqa: F401,F403
from pymx.numpy._nan_reductions import *  # noqa: F401,F403
from pymx.numpy._dtype_utils import *  # noqa: F401,F403
from pymx.numpy import random  # noqa: F401
from pymx.numpy import linalg  # noqa: F401

# Dtypes are NumPy's objects, so np.float32 == onp.float32 and x.dtype == np.float32 hold.
# bfloat16, which NumPy lacks, is MXNet's 16-bit record dtype (see pymx/base.py).
float16 = _onp.float16
bfloat16 = _bfloat16
float32 = _onp.float32
float64 = _onp.float64
int8 = _onp.int8
int32 = _onp.int32
int64 = _onp.int64
uint8 = _onp.uint8
bool_ = _onp.bool_
dtype = _onp.dtype
pi = _onp.pi
e = _onp.e
inf = _onp.inf
nan = _onp.nan
newaxis = None

__all__ = list(_core_all) + _creation.__all__ + _cumulative.__all__ + _elementwise.__all__ + \
    _manipulation.__all__ + _searching.__all__ + _statistics.__all__ + _einsum.__all__ + \
    _index_tricks.__all__ + _histograms.__all__ + _sets.__all__ + _sorting.__all__ + \
    _polynomial.__all__ + _windows.__all__ + \
    _math_extra.__all__ + _nan_reductions.__all__ + _dtype_utils.__all__ + \
    ["ndarray", "from_dlpack", "random", "linalg", "float16", "bfloat16", "float32", "float64",
     "int8", "int32", "int64", "uint8", "bool_", "dtype", "pi", "e", "inf", "nan", "newaxis"]
