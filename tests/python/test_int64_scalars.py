"""Integer scalars beyond 2^53 with integer arrays: the `*_scalar` operators, comparisons, full
and arange compute exactly in int64, against NumPy (exact), on the CPU and, when one is visible,
on a GPU. See Note [Integer scalars are read as int64] (engine/src/ops/elemwise.h)."""
import operator

import numpy as onp
import pytest

import pymx
from pymx import np

BIG = [2**53 + 1, 2**62 + 1, -(2**62) - 3, 2**63 - 1, -(2**63), 3]
VALUES = onp.array([5, -1, 0, 2**62 + 1, -(2**63), 2**63 - 1, 7, -9], dtype=onp.int64)

# (pymx, NumPy) pairs: every arithmetic, comparison and bitwise operator with a scalar form.
OPS = [(np.add, onp.add), (np.subtract, onp.subtract), (np.multiply, onp.multiply),
       (np.maximum, onp.maximum), (np.minimum, onp.minimum), (np.mod, onp.mod),
       (np.floor_divide, onp.floor_divide), (np.bitwise_and, onp.bitwise_and),
       (np.bitwise_or, onp.bitwise_or), (np.bitwise_xor, onp.bitwise_xor),
       (np.equal, onp.equal), (np.not_equal, onp.not_equal), (np.greater, onp.greater),
       (np.greater_equal, onp.greater_equal), (np.less, onp.less),
       (np.less_equal, onp.less_equal), (np.logical_and, onp.logical_and)]


def expected(onp_fn, a, s, reverse):
    with onp.errstate(all="ignore"):  # int64 wraps and x % 0, as in pymx
        return onp_fn(s, a) if reverse else onp_fn(a, s)


def check_exact(got, want):
    got = got.asnumpy()
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    onp.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("pymx_fn,onp_fn", OPS, ids=lambda f: getattr(f, "__name__", ""))
@pytest.mark.parametrize("reverse", [False, True])
def test_scalar_ops_exact(device, pymx_fn, onp_fn, reverse):
    x = np.array(VALUES, device=device)
    for s in BIG:
        got = pymx_fn(s, x) if reverse else pymx_fn(x, s)
        check_exact(got, expected(onp_fn, VALUES, s, reverse))


def test_power_exact(device):
    a = onp.array([3, -3, 1, 2, 0], dtype=onp.int64)
    x = np.array(a, device=device)
    check_exact(np.power(x, 39), onp.power(a, 39))  # 3**39 > 2**53
    e = onp.array([0, 1, 2], dtype=onp.int64)
    check_exact(np.power(2**62 + 1, np.array(e, device=device)), onp.power(2**62 + 1, e))


def test_python_operators(device):
    """The ndarray operators, including the Cython arithmetic fast path, take the same route."""
    x = np.array(VALUES, device=device)
    s = 2**62 + 1
    for op in (operator.add, operator.sub, operator.mul, operator.and_, operator.or_,
               operator.xor, operator.floordiv, operator.mod, operator.eq, operator.lt):
        check_exact(op(x, s), expected(op, VALUES, s, False))
        check_exact(op(s, x), expected(op, VALUES, s, True))


def test_bug_report_example():
    check_exact(np.array([5, -1], dtype="int64") & (2**62 + 1),
                onp.array([1, 2**62 + 1], dtype=onp.int64))


def test_bool_array_with_big_int(device):
    """A bool array with an int scalar computes in int64 (pymx's promote_scalar)."""
    b = onp.array([True, False])
    x = np.array(b, device=device)
    check_exact(x + (2**62 + 1), (b.astype(onp.int64) + (2**62 + 1)))
    check_exact(x == 2**62 + 1, onp.array([False, False]))


def test_float_arrays_unchanged(device):
    """Float computations still read the scalar as a double, as NumPy converts it."""
    a = onp.array([1.5, -2.0], dtype=onp.float64)
    x = np.array(a, device=device)
    check_exact(x + (2**62 + 1), a + float(2**62 + 1))
    check_exact(x * 2**70, a * 2**70)  # fine for a float array
    i = np.array([1, 2], dtype="int64", device=device)
    assert (i + 0.5).dtype == onp.float32  # int array, float scalar: float32 (pymx)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32"])
def test_narrow_int_dtypes_keep_semantics(device, dtype):
    a = onp.array([1, 7, 100, 0], dtype=dtype)
    x = np.array(a, device=device)
    for s in (3, 27, 100):
        check_exact(x + s, a + s)
        check_exact(x & s, a & s)
        check_exact(x // s, a // s)
        check_exact(x == s, a == s)


@pytest.mark.parametrize("value", [2**64, 2**63, -(2**63) - 1, 10**30])
def test_out_of_int64_raises_overflow(device, value):
    x = np.array([1, 2], dtype="int64", device=device)
    for fn in (np.add, np.bitwise_and, np.maximum, np.floor_divide, np.logical_and):
        with pytest.raises(OverflowError, match=str(value)):
            fn(x, value)
    with pytest.raises(OverflowError, match=str(value)):
        x + value  # the Cython fast path
    with pytest.raises(OverflowError, match=str(value)):
        np.full((2,), value, dtype="int64", device=device)
    with pytest.raises(OverflowError, match=str(value)):
        np.arange(value, dtype="int64", device=device)
    with pytest.raises(OverflowError, match=str(value)):
        np.array([True], device=device) + value  # bool + int computes in int64


@pytest.mark.parametrize("value", [2**62 + 1, -(2**63), 2**63 - 1, 2**53 + 1])
def test_full_exact(device, value):
    check_exact(np.full((3,), value, dtype="int64", device=device),
                onp.full((3,), value, dtype=onp.int64))
    like = np.zeros((2, 2), dtype="int64", device=device)
    check_exact(np.full_like(like, value), onp.full((2, 2), value, dtype=onp.int64))


def test_full_other_dtypes_unchanged(device):
    check_exact(np.full((2,), 300, dtype="int32", device=device), onp.full(2, 300, onp.int32))
    check_exact(np.full((2,), True, dtype="int64", device=device), onp.full(2, 1, onp.int64))
    check_exact(np.full((2,), 7, dtype="bool", device=device), onp.full(2, True))
    check_exact(np.full((2,), 2**62 + 1, dtype="float64", device=device),
                onp.full(2, float(2**62 + 1)))


@pytest.mark.parametrize("args", [(2**62, 2**62 + 5), (2**62 + 7, 2**62, -3), (2**53 + 1, 2**53 + 4),
                                  (-(2**63), -(2**63) + 10, 3),
                                  (-(2**63) + 1, 2**63 - 1, 2**62), (2**63 - 1, 0, -(2**62)),
                                  (5, 5), (5, 1), (7,)],
                         ids=str)
def test_arange_int64_exact(device, args):
    check_exact(np.arange(*args, dtype="int64", device=device),
                onp.arange(*args, dtype=onp.int64))


def test_arange_other_paths_unchanged(device):
    check_exact(np.arange(0, 10, 3, dtype="int32", device=device), onp.arange(0, 10, 3, onp.int32))
    check_exact(np.arange(0.5, 4, dtype="int64", device=device),
                onp.arange(0.5, 4, dtype=onp.int64))
    onp.testing.assert_allclose(np.arange(2, 5, device=device).asnumpy(),
                                onp.arange(2, 5, dtype=onp.float32))
    with pytest.raises(ValueError, match="step"):
        np.arange(0, 5, 0, dtype="int64", device=device)


@pytest.mark.parametrize("dtype,value", [("int64", 2**70), ("int64", -(2**63) - 1), ("int64", 2**63),
                                         ("uint8", 300), ("uint8", -1), ("int8", 128),
                                         ("int32", -(2**40))])
@pytest.mark.parametrize("reverse", [False, True])
def test_comparison_beyond_dtype(device, dtype, value, reverse):
    """NumPy compares with an int the dtype cannot hold by value (no OverflowError); see Note
    [Comparing with an integer the dtype cannot hold] (pymx/numpy/_core.py)."""
    info = onp.iinfo(dtype)
    a = onp.array([0, 1, info.min, info.max], dtype=dtype)
    x = np.array(a, device=device)
    for pymx_fn, onp_fn in OPS[-7:-1]:  # the six comparisons
        check_exact(pymx_fn(value, x) if reverse else pymx_fn(x, value),
                    onp_fn(value, a) if reverse else onp_fn(a, value))
    check_exact(x == value, a == value)
    out = np.zeros((4,), dtype="bool", device=device)
    np.less(x, value, out=out)
    check_exact(out, a < value)
