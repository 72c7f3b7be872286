"""pymx.np's constants, finfo (bfloat16's own), promote_types / result_type / min_scalar_type
against what pymx's operators do, shares_memory / may_share_memory on views, and the print
options shared with NumPy."""
import itertools

import numpy as onp
import pytest

from pymx import np
from pymx.base import bfloat16
from pymx.gluon.utils import split_data

DTYPES = ["float16", bfloat16, "float32", "float64", "uint8", "int8", "int32", "int64", "bool"]


def test_constants():
    assert onp.isnan(np.NAN) and onp.isnan(np.NaN)
    assert np.PINF == onp.inf and np.NINF == -onp.inf
    assert np.PZERO == 0.0 and not onp.signbit(np.PZERO)
    assert np.NZERO == 0.0 and onp.signbit(np.NZERO)
    assert np.bool is onp.bool_
    assert np.zeros((2,), dtype=np.bool).dtype == onp.bool_


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_finfo_numpy_dtypes(dtype):
    info = np.finfo(dtype)
    assert info == onp.finfo(dtype)
    assert np.finfo(np.zeros((1,), dtype=dtype)).eps == onp.finfo(dtype).eps


def test_finfo_bfloat16():
    info = np.finfo(np.bfloat16)
    assert info is np.finfo("bfloat16")
    assert info.bits == 16 and info.dtype == bfloat16 and info.nmant == 7
    assert info.eps == 2.0 ** -7 and info.epsneg == 2.0 ** -8
    assert info.tiny == info.smallest_normal == 2.0 ** -126
    assert info.smallest_subnormal == 2.0 ** -133
    assert info.max == (2 - 2.0 ** -7) * 2.0 ** 127 and info.min == -info.max
    # The limits are bfloat16 values: they survive a round trip through the dtype unchanged,
    # 1 + eps is the next value after 1, and max is the largest finite one.
    values = onp.array([info.max, info.tiny, 1 + info.eps, info.smallest_subnormal], "float32")
    assert (np.array(values, dtype=bfloat16).astype("float32").asnumpy() == values).all()
    assert float(np.array([1 + info.eps / 2], dtype=bfloat16).astype("float32")[0]) == 1.0
    assert onp.isinf(float(np.array([info.max], dtype=bfloat16).astype("float32")[0] * 2))
    assert "bfloat16" in repr(info)
    assert np.finfo(np.zeros((1,), dtype=bfloat16)) is info


def test_finfo_errors():
    with pytest.raises(ValueError):
        np.finfo("int32")
    with pytest.raises(TypeError):
        np.finfo("no_such_type")


@pytest.mark.parametrize("a, b", list(itertools.combinations_with_replacement(DTYPES, 2)))
def test_promote_types_is_what_operators_give(a, b):
    x, y = np.zeros((2,), dtype=a), np.ones((2,), dtype=b)
    want = (x + y).dtype
    assert np.promote_types(a, b) == want
    assert np.promote_types(b, a) == want
    assert np.result_type(x, y) == want and np.result_type(a, y) == want
    assert np.multiply(x, y).dtype == want and np.where(x > 0, x, y).dtype == want


def test_promote_types_values():
    assert np.promote_types("int8", "uint8") == onp.int32  # pymx has no int16
    assert np.promote_types("float16", bfloat16) == onp.float32
    assert np.promote_types("int64", "float16") == onp.float16
    assert np.promote_types("bool", "uint8") == onp.uint8
    with pytest.raises(TypeError, match="pymx has no dtype uint16"):
        np.promote_types("uint16", "int8")


def test_result_type_with_scalars():
    ints, floats = np.zeros((2,), dtype="int32"), np.zeros((2,), dtype="float16")
    flags = np.zeros((2,), dtype="bool")
    for operands in ((ints, 3), (ints, 2.5), (floats, 7), (flags, 1), (flags, 1.5),
                     (ints, floats, 3.0), ("uint8", 300)):
        arrays = [np.zeros((1,), dtype=o) if isinstance(o, str) else o for o in operands]
        want = arrays[0]
        for other in arrays[1:]:
            want = want + other
        assert np.result_type(*operands) == want.dtype, operands
    assert np.result_type(2.5) == np.array(2.5).dtype == onp.float32
    assert np.result_type(True) == onp.bool_
    assert np.result_type(1, 2.0) == (np.array(1) + 2.0).dtype
    with pytest.raises(ValueError, match="at least one array or dtype"):
        np.result_type()


def test_min_scalar_type():
    cases = {0: onp.uint8, 255: onp.uint8, 256: onp.int32, -1: onp.int8, -129: onp.int32,
             2 ** 31: onp.int64, -2 ** 63: onp.int64, True: onp.bool_, 1.5: onp.float16,
             1e5: onp.float32, 1e50: onp.float64, float("inf"): onp.float16,
             onp.float64(3.0): onp.float16, onp.int64(100): onp.uint8}
    for value, want in cases.items():
        assert np.min_scalar_type(value) == want, value
    assert np.min_scalar_type(np.array(300.0)) == onp.float16  # 0-d arrays count as scalars
    assert np.min_scalar_type(np.zeros((2,), dtype="int64")) == onp.int64
    for value in (0, 255, -1, -128, 1.5, 1e50):  # NumPy agrees where its answer is a pymx dtype
        assert np.min_scalar_type(value) == onp.min_scalar_type(value)
    with pytest.raises(ValueError, match=str(2 ** 64)):
        np.min_scalar_type(2 ** 64)
    with pytest.raises(TypeError, match="str"):
        np.min_scalar_type("3")


def test_shares_memory(device):
    a = np.arange(12, device=device)
    flat = a._reshape_view((3, 4))
    rows = flat._slice_view(1, 3)
    first, last = flat._at_view(0), flat._at_view(2)
    for x, y, want in ((a, a, True), (a, flat, True), (flat, rows, True), (rows, last, True),
                       (first, rows, False), (first, last, False), (a, a.copy(), False),
                       (a, np.reshape(a, (3, 4)), False), (a, a[2:5], False),
                       (a, np.zeros((0,), device=device), False), (a, [1, 2], False)):
        assert np.shares_memory(x, y) is want, (x.shape, getattr(y, "shape", y))
        assert np.shares_memory(y, x) is want if isinstance(y, type(a)) else True
        assert np.may_share_memory(x, y) is want
    empty = a._slice_view(1, 1)
    assert not np.shares_memory(empty, a)
    parts = split_data(flat, 3)
    assert np.shares_memory(parts[1], a) and np.shares_memory(parts[2], last)
    assert not np.shares_memory(parts[0], parts[1])


def test_shares_memory_dlpack_imports():
    host = onp.arange(6, dtype="float32")
    one, two = np.from_dlpack(host), np.from_dlpack(host[2:])
    assert np.shares_memory(one, two) and np.may_share_memory(two, one)
    assert not np.shares_memory(one, np.from_dlpack(onp.arange(6, dtype="float32")))


def test_printoptions_apply_to_pymx_arrays():
    saved = np.get_printoptions()
    assert saved == onp.get_printoptions()
    values = onp.array([1.123456789, 2.0, 3.5], dtype="float64")
    try:
        np.set_printoptions(precision=3)
        assert np.get_printoptions()["precision"] == 3
        # pymx names float64 (MXNet's default is float32), NumPy does not
        assert repr(np.array(values)) == repr(values)[:-1] + ", dtype=float64)"
        assert repr(np.array(values, dtype="float32")) == \
            repr(values.astype("float32")).replace(", dtype=float32", "")
        assert str(np.array(values)) == str(values) == "[1.123 2.    3.5  ]"
        np.set_printoptions(threshold=5, edgeitems=2)
        long = onp.arange(100.0)
        assert str(np.array(long, dtype="float64")) == str(long)
        assert "..." in str(np.array(long))
        np.set_printoptions(suppress=True, floatmode="fixed", precision=2)
        assert str(np.array(values)) == str(values)
    finally:
        onp.set_printoptions(**saved)
    assert np.get_printoptions() == saved
