"""np's index tricks (take_along_axis, choose, select, piecewise, compress, extract, rollaxis,
ix_, unravel_index, *_indices_from, flatnonzero, digitize, apply_along_axis, apply_over_axes),
sets (isin, in1d, intersect1d, union1d, setdiff1d, setxor1d, trim_zeros) and sorting (lexsort,
partition, argpartition, msort) against NumPy.

Gathers, set membership and sorting are exact, so integer and index results must equal NumPy's;
float results are compared with a float64 reference at the dtype's tolerance. Partitions are
checked against NumPy's contract (the kth elements, nothing larger before and nothing smaller
after), not the positions NumPy leaves unspecified. On the GPU every function must give the
CPU's results.
"""
import warnings

import numpy as onp
import pytest

from pymx import autograd, gluon, np
from pymx.base import PymxIndexError
from pymx.device import cpu, gpu
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import ops_ran, requires_gpu
from test_np_sort_cumsum import values_of

DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool"]
TOLERANCE = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-12}


def on(device, values, dtype=None):
    return np.array(values, dtype=dtype, device=device)


def assert_exact(got, want):
    got = got.asnumpy()
    want = onp.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    onp.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# take_along_axis, choose, select, piecewise
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_take_along_axis_matches_numpy(dtype, axis, device):
    values = values_of(dtype, (3, 4, 5))
    n = values.size if axis is None else values.shape[axis]
    shape = (7,) if axis is None else tuple(6 if d == axis % 3 else s
                                            for d, s in enumerate(values.shape))
    indices = onp.random.randint(-n, n, size=shape)
    got = np.take_along_axis(on(device, values, dtype), on(device, indices), axis)
    assert got.dtype == onp.dtype(dtype)
    assert_exact(got, onp.take_along_axis(values, indices, axis))


def test_take_along_axis_broadcasts_empty_and_argsort_round_trip(device):
    values = onp.random.randn(3, 1, 5)
    indices = onp.random.randint(0, 5, size=(1, 4, 2))
    got = np.take_along_axis(on(device, values, "float64"), on(device, indices), -1)
    assert_exact(got, onp.take_along_axis(values, indices, -1))
    empty = np.take_along_axis(np.zeros((0, 3), device=device), on(device, onp.zeros((0, 2),
                                                                                     onp.int64)), 1)
    assert empty.shape == (0, 2)
    x = on(device, onp.random.randn(4, 6).astype(onp.float32))
    assert_exact(np.take_along_axis(x, np.argsort(x, axis=0), 0), onp.sort(x.asnumpy(), axis=0))
    scalar = np.take_along_axis(on(device, onp.float32(3)), on(device, onp.array([0, -1])), None)
    assert_exact(scalar, [3.0, 3.0])


def test_take_along_axis_gradient_accumulates_repeats(device):
    indices = on(device, onp.array([[0, 0, 2], [1, 1, 1]]))
    x = on(device, onp.random.randn(2, 3), "float64")
    x.attach_grad()
    with autograd.record():
        y = np.take_along_axis(x, indices, 1)
    y.backward()
    assert_exact(x.grad, [[2.0, 0.0, 1.0], [0.0, 3.0, 0.0]])
    check_numeric_gradient(lambda a: np.take_along_axis(a, indices, 1),
                           [onp.random.randn(2, 3)], device=device)


def test_take_along_axis_bad_input(device):
    x = np.zeros((3, 4), device=device)
    with pytest.raises(PymxIndexError, match="index 4 is out of bounds for axis 1 with size 4"):
        np.take_along_axis(x, on(device, onp.full((3, 1), 4)), 1).asnumpy()
    with pytest.raises(PymxIndexError, match="index -4 is out of bounds for axis 0 with size 3"):
        np.take_along_axis(x, on(device, onp.full((1, 4), -4)), 0).asnumpy()
    with pytest.raises(IndexError, match="integer array, got dtype float32"):
        np.take_along_axis(x, np.zeros((3, 1), device=device), 1)
    with pytest.raises(ValueError, match=r"\(3,\) and arr of shape \(3, 4\)"):
        np.take_along_axis(x, on(device, onp.zeros(3, onp.int64)), 1)
    with pytest.raises(onp.exceptions.AxisError, match="axis 2"):
        np.take_along_axis(x, on(device, onp.zeros((3, 1), onp.int64)), 2)
    assert np.take_along_axis(x, on(device, onp.zeros((3, 1), onp.int64)), 1).shape == (3, 1)


@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "uint8"])
def test_choose_matches_numpy(mode, dtype, device):
    choices = [values_of(dtype, (3, 4)), values_of(dtype, (1, 4)), values_of(dtype, (4,))]
    low, high = (0, 3) if mode == "raise" else (-5, 8)
    a = onp.random.randint(low, high, size=(2, 3, 4))
    got = np.choose(on(device, a), [on(device, c, dtype) for c in choices], mode=mode)
    assert got.dtype == onp.dtype(dtype)
    assert_exact(got, onp.choose(a, choices, mode=mode))
    scalar = np.choose(on(device, onp.int64(1)), [on(device, c, dtype) for c in choices[1:]])
    assert_exact(scalar, onp.choose(1, choices[1:]))


def test_choose_gradient_and_errors(device):
    a = on(device, onp.array([[0, 1, 1], [2, 0, 2]]))
    check_numeric_gradient(lambda c0, c1, c2: np.choose(a, [c0, c1, c2]),
                           [onp.random.randn(2, 3), onp.random.randn(1, 3),
                            onp.random.randn(3)], device=device)
    choices = [np.zeros(3, device=device), np.ones(3, device=device)]
    with pytest.raises(ValueError, match="invalid entry 2 in the choice array for 2 choices"):
        np.choose([0, 2, 1], choices)
    with pytest.raises(ValueError, match="invalid entry -1"):
        np.choose([0, -1, 1], choices)
    with pytest.raises(PymxIndexError, match="index 5 is out of bounds"):
        np.choose(on(device, onp.array([0, 5, 1])), choices).asnumpy()
    with pytest.raises(PymxIndexError, match="out of bounds"):
        np.choose(on(device, onp.array([0, -1, 1])), choices).asnumpy()
    with pytest.raises(ValueError, match="mode must be"):
        np.choose([0, 1, 1], choices, mode="nearest")
    assert_exact(np.choose(on(device, onp.array([0, 1, 1])), choices), [0.0, 1.0, 1.0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_select_matches_numpy(dtype, device):
    x = values_of(dtype, (3, 5))
    conditions = [x < 0, x > 1, onp.ones((1, 5), bool)]
    choices = [x * 2, values_of(dtype, (5,)), values_of(dtype, (3, 1))]
    got = np.select([on(device, c) for c in conditions], [on(device, c) for c in choices],
                    default=7)
    want = onp.select(conditions, choices, default=7)
    assert got.dtype == want.dtype
    assert_exact(got, want)
    got = np.select([on(device, x > 0)], [on(device, x)])
    assert_exact(got, onp.select([x > 0], [x]))
    empty = np.select([on(device, onp.zeros((0, 2), bool))], [on(device, onp.zeros((0, 2)))])
    assert empty.shape == (0, 2)


def test_select_gradient_and_errors(device):
    cond = on(device, onp.array([[True, False, False], [False, True, False]]))
    cond2 = on(device, onp.array([True, True, False]))
    check_numeric_gradient(lambda a, b, d: np.select([cond, cond2], [a, b], d),
                           [onp.random.randn(2, 3), onp.random.randn(3),
                            onp.random.randn(2, 3)], device=device)
    x = np.zeros(3, device=device)
    with pytest.raises(ValueError, match="2 conditions and 1 choices"):
        np.select([cond2, cond2], [x])
    with pytest.raises(TypeError, match="invalid entry 0 in condlist.*float32"):
        np.select([x], [x])
    with pytest.raises(ValueError, match="empty condition list"):
        np.select([], [])


def test_piecewise_matches_numpy(device):
    values = onp.linspace(-3, 3, 13)
    x = on(device, values, "float64")
    got = np.piecewise(x, [x < -1, x > 1], [lambda v: v ** 2, lambda v: -v, 0.5])
    want = onp.piecewise(values, [values < -1, values > 1], [lambda v: v ** 2, lambda v: -v, 0.5])
    assert_almost_equal(got.asnumpy(), want, rtol=1e-12, atol=0)
    # Later conditions override earlier ones; values without a function stay 0.
    got = np.piecewise(x, [x < 1, x < 0], [1, 2])
    assert_exact(got, onp.piecewise(values, [values < 1, values < 0], [1, 2]))
    ints = on(device, onp.arange(-3, 4))
    assert_exact(np.piecewise(ints, [ints < 0], [lambda v: v * 10, lambda v: v + 1]),
                 onp.piecewise(onp.arange(-3, 4), [onp.arange(-3, 4) < 0],
                               [lambda v: v * 10, lambda v: v + 1]))
    scalar = np.piecewise(on(device, onp.float64(-2.0)), True, [lambda v: v * 3])
    assert scalar.shape == () and scalar.item() == -6.0
    with pytest.raises(ValueError, match="2 condition\\(s\\), either 2 or 3 functions.*got 1"):
        np.piecewise(x, [x < 0, x > 0], [1])


def test_piecewise_gradient(device):
    def fn(v):
        return np.piecewise(v, [v < 0, v >= 0], [lambda t: t ** 3, lambda t: np.sin(t)])
    check_numeric_gradient(fn, [onp.array([-1.5, -0.3, 0.4, 2.0])], device=device)


# ---------------------------------------------------------------------------------------------
# compress, extract, flatnonzero (host positions, device gathers)
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_compress_matches_numpy(axis, device):
    values = onp.random.randn(3, 4)
    n = values.size if axis is None else values.shape[axis]
    condition = onp.random.rand(n - 1) > 0.4  # shorter than the axis: the rest is false
    got = np.compress(on(device, condition), on(device, values, "float64"), axis=axis)
    assert_exact(got, onp.compress(condition, values, axis=axis))
    assert_exact(np.compress([False] * n, on(device, values, "float64"), axis=axis),
                 onp.compress([False] * n, values, axis=axis))
    check_numeric_gradient(lambda a: np.compress([True, False, True], a, axis=0),
                           [onp.random.randn(3, 2)], device=device)
    with pytest.raises(IndexError, match="true entry at 5, out of bounds for axis 0 with size 3"):
        np.compress([0, 0, 0, 0, 0, 1], on(device, values), axis=0)
    with pytest.raises(ValueError, match="1-d array, got shape \\(2, 2\\)"):
        np.compress([[1, 0], [0, 1]], on(device, values))


@pytest.mark.parametrize("dtype", DTYPES)
def test_extract_and_flatnonzero_match_numpy(dtype, device):
    values = values_of(dtype, (3, 4))
    x = on(device, values, dtype)
    assert_exact(np.flatnonzero(x), onp.flatnonzero(values))
    assert np.flatnonzero(x).dtype == onp.int64
    condition = onp.random.rand(3, 4) > 0.5
    assert_exact(np.extract(on(device, condition), x), onp.extract(condition, values))
    assert_exact(np.flatnonzero(np.zeros((0, 3), device=device)), onp.zeros(0, onp.int64))
    assert_exact(np.flatnonzero(on(device, onp.float32(2))), [0])
    with pytest.raises(IndexError, match="flat position 12, out of bounds for arr of size 12"):
        np.extract(onp.arange(13) == 12, x)


# ---------------------------------------------------------------------------------------------
# rollaxis, ix_, unravel_index, *_indices_from, digitize
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis,start", [(3, 1), (2, 0), (1, 4), (-1, -3), (0, 4), (2, 3)])
def test_rollaxis_matches_numpy(axis, start, device):
    values = onp.random.randn(2, 3, 4, 5)
    assert_exact(np.rollaxis(on(device, values, "float64"), axis, start),
                 onp.rollaxis(values, axis, start))


def test_rollaxis_bad_input(device):
    x = np.zeros((2, 3), device=device)
    with pytest.raises(onp.exceptions.AxisError, match="-2 <= start < 3, but 3"):
        np.rollaxis(x, 0, 3)
    with pytest.raises(onp.exceptions.AxisError, match="axis 2"):
        np.rollaxis(x, 2)


def test_ix_matches_numpy(device):
    values = onp.arange(30).reshape(5, 6)
    rows, cols = np.ix_(on(device, onp.array([0, 3, -1])), [True, False, True, True, False, True])
    want_rows, want_cols = onp.ix_([0, 3, -1], [True, False, True, True, False, True])
    assert_exact(rows, want_rows)
    assert_exact(cols, want_cols)
    assert rows.device == device
    assert_exact(on(device, values)[rows, cols], values[want_rows, want_cols])
    empty, = np.ix_([])
    assert empty.shape == (0,) and empty.dtype == onp.int64
    with pytest.raises(ValueError, match="argument 0 of shape \\(2, 2\\)"):
        np.ix_([[0, 1], [1, 0]])
    with pytest.raises(IndexError, match="dtype float64 for argument 1"):
        np.ix_([0], [0.5])


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape", [(7, 6), (2, 3, 4), (5,), (3, 0, 2)])
def test_unravel_index_matches_numpy(order, shape, device):
    size = int(onp.prod(shape))
    indices = onp.random.randint(0, max(size, 1), size=(2, 3)) if size else onp.zeros((0,), int)
    got = np.unravel_index(on(device, indices), shape, order=order)
    want = onp.unravel_index(indices, shape, order=order)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == onp.int64
        assert_exact(g, w)
    got = np.unravel_index(size - 1, shape, order=order) if size else None
    if got is not None:
        assert tuple(int(g.item()) for g in got) == onp.unravel_index(size - 1, shape, order=order)


def test_unravel_index_bad_input(device):
    with pytest.raises(ValueError, match="index 42 is out of bounds for array with size 42"):
        np.unravel_index([3, 42], (7, 6))
    with pytest.raises(ValueError, match="index -1 is out of bounds"):
        np.unravel_index(-1, (7, 6))
    with pytest.raises(PymxIndexError, match="out of bounds for axis 0 with size 7"):
        np.unravel_index(on(device, onp.array([3, 42])), (7, 6))[0].asnumpy()
    with pytest.raises(PymxIndexError, match="out of bounds"):
        np.unravel_index(on(device, onp.array([-1])), (7, 6))[0].asnumpy()
    with pytest.raises(ValueError, match="only 'C' or 'F'"):
        np.unravel_index(1, (2, 2), order="A")
    with pytest.raises(IndexError, match="integer array, got dtype float32"):
        np.unravel_index(np.ones(2, device=device), (2, 2))


def test_indices_from_match_numpy(device):
    square = onp.zeros((4, 4, 4))
    for got, want in zip(np.diag_indices_from(on(device, square)), onp.diag_indices_from(square)):
        assert_exact(got, want)
    rect = onp.zeros((3, 5))
    for k in (-1, 0, 2):
        for name in ("tril_indices_from", "triu_indices_from"):
            got = getattr(np, name)(on(device, rect), k=k)
            for g, w in zip(got, getattr(onp, name)(rect, k=k)):
                assert_exact(g, w)
    with pytest.raises(ValueError, match="equal length, got shape \\(3, 5\\)"):
        np.diag_indices_from(on(device, rect))
    with pytest.raises(ValueError, match="at least 2-d, got shape \\(3,\\)"):
        np.diag_indices_from(np.zeros(3, device=device))
    with pytest.raises(ValueError, match="must be 2-d, got shape \\(4, 4, 4\\)"):
        np.tril_indices_from(on(device, square))


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("increasing", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_digitize_matches_numpy(right, increasing, dtype, device):
    bins = onp.array([-2.0, -1.0, -1.0, 0.5, 2.0, 3.0])
    bins = bins if increasing else bins[::-1].copy()
    values = values_of(dtype, (4, 5))
    got = np.digitize(on(device, values, dtype), bins, right=right)
    assert got.dtype == onp.int64
    assert_exact(got, onp.digitize(values, bins, right=right))
    got = np.digitize(on(device, values, dtype), on(device, bins, "float64"), right=right)
    assert_exact(got, onp.digitize(values, bins, right=right))
    assert_exact(np.digitize(on(device, onp.float32(0.7)), bins, right), onp.digitize(0.7, bins,
                                                                                    right))
    assert_exact(np.digitize(np.zeros((0,), device=device), bins), onp.zeros(0, onp.int64))


def test_digitize_nan_and_bad_bins(device):
    values = onp.array([onp.nan, 1.0, -onp.inf, onp.inf], dtype=onp.float32)
    assert_exact(np.digitize(on(device, values), [0.0, 1.0, 2.0]),
                 onp.digitize(values, [0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="monotonically increasing or decreasing, got \\[1 3 2\\]"):
        np.digitize(np.zeros(2, device=device), [1, 3, 2])
    with pytest.raises(ValueError, match="1-dimensional, got shape \\(2, 1\\)"):
        np.digitize(np.zeros(2, device=device), [[1], [2]])


# ---------------------------------------------------------------------------------------------
# apply_along_axis, apply_over_axes
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_apply_along_axis_matches_numpy(axis, device):
    values = onp.random.randn(3, 4, 2)
    got = np.apply_along_axis(lambda v: np.sum(v * 2), axis, on(device, values, "float64"))
    assert_almost_equal(got.asnumpy(), onp.apply_along_axis(lambda v: (v * 2).sum(), axis,
                                                            values), rtol=1e-12, atol=1e-12)
    got = np.apply_along_axis(lambda v: np.outer(v, v[:2]), axis, on(device, values, "float64"))
    want = onp.apply_along_axis(lambda v: onp.outer(v, v[:2]), axis, values)
    assert_almost_equal(got.asnumpy(), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="iteration dimensions are 0"):
        np.apply_along_axis(np.sum, 0, np.zeros((3, 0), device=device))


def test_apply_over_axes_matches_numpy(device):
    values = onp.arange(24.0).reshape(2, 3, 4)
    for axes in ([0, 2], (1,), -1):
        got = np.apply_over_axes(np.sum, on(device, values, "float64"), axes)
        assert_exact(got, onp.apply_over_axes(onp.sum, values, axes))
    with pytest.raises(ValueError, match="correct shape \\(got 0 dimensions"):
        np.apply_over_axes(lambda a, axis: np.sum(a), on(device, values), [0])


# ---------------------------------------------------------------------------------------------
# Sets
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("invert", [False, True])
def test_isin_and_in1d_match_numpy(dtype, invert, device):
    element = values_of(dtype, (3, 4))
    test = values_of(dtype, (5,), low=0, high=3)
    got = np.isin(on(device, element, dtype), on(device, test, dtype), invert=invert)
    assert got.dtype == onp.bool_
    assert_exact(got, onp.isin(element, test, invert=invert))
    got = np.in1d(on(device, element, dtype), on(device, test, dtype), invert=invert)
    assert_exact(got, onp.isin(element.ravel(), test, invert=invert))
    assert_exact(np.isin(on(device, element, dtype), on(device, test[:0], dtype), invert=invert),
                 onp.isin(element, test[:0], invert=invert))
    assert_exact(np.isin(on(device, element[:0], dtype), on(device, test, dtype)),
                 onp.zeros((0, 4), bool))


def test_isin_nan_mixed_dtypes_and_0d(device):
    element = onp.array([1.0, onp.nan, 2.5, -onp.inf], dtype=onp.float32)
    test = onp.array([onp.nan, 2.5, -onp.inf], dtype=onp.float32)
    assert_exact(np.isin(on(device, element), on(device, test)), onp.isin(element, test))
    ints = onp.array([1, 2, 3])
    assert_exact(np.isin(on(device, ints), on(device, onp.array([2.0, 2.5]))),
                 onp.isin(ints, [2.0, 2.5]))
    assert_exact(np.isin(on(device, onp.int64(3)), [1, 3]), onp.isin(3, [1, 3]))
    with pytest.raises(ValueError, match="kind must be None, 'sort' or 'table', got 'hash'"):
        np.isin(on(device, ints), ints, kind="hash")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8"])
@pytest.mark.parametrize("assume_unique", [False, True])
def test_set_operations_match_numpy(dtype, assume_unique, device):
    a = values_of(dtype, (4, 3))
    b = values_of(dtype, (5,))
    if assume_unique:
        a, b = onp.unique(a), onp.unique(b)
    x, y = on(device, a, dtype), on(device, b, dtype)
    for name in ("setdiff1d", "setxor1d", "intersect1d"):
        got = getattr(np, name)(x, y, assume_unique=assume_unique)
        assert got.dtype == onp.dtype(dtype) and got.device == device
        assert_exact(got, getattr(onp, name)(a, b, assume_unique=assume_unique))
    assert_exact(np.union1d(x, y), onp.union1d(a, b))
    got = np.intersect1d(x, y, assume_unique=assume_unique, return_indices=True)
    for g, w in zip(got, onp.intersect1d(a, b, assume_unique=assume_unique,
                                         return_indices=True)):
        assert_exact(g, w)
    empty = on(device, a[:0].ravel(), dtype)
    for name in ("setdiff1d", "setxor1d", "intersect1d", "union1d"):
        assert_exact(getattr(np, name)(empty, y), getattr(onp, name)(a[:0].ravel(), b))


@pytest.mark.parametrize("trim", ["fb", "f", "b", "FB", "Bf"])
def test_trim_zeros_matches_numpy(trim, device):
    values = onp.array([0, 0, 3.0, 0, 1, 2, 0, 0])
    x = on(device, values, "float64")
    assert_exact(np.trim_zeros(x, trim), onp.trim_zeros(values, trim))
    assert_exact(np.trim_zeros(on(device, onp.zeros(4)), trim), onp.zeros(0))
    assert_exact(np.trim_zeros(on(device, onp.zeros(0)), trim), onp.zeros(0))
    # The kept slice passes its gradient through; the trimmed zeros get none.
    x.attach_grad()
    with autograd.record():
        kept = np.trim_zeros(x, trim)
    kept.backward(on(device, onp.arange(1.0, kept.size + 1)))
    want = onp.zeros_like(values)
    start = 2 if "f" in trim.lower() else 0
    want[start:start + kept.size] = onp.arange(1.0, kept.size + 1)
    assert_exact(x.grad, want)
    with pytest.raises(ValueError, match="unexpected character\\(s\\) in trim: 'fx'"):
        np.trim_zeros(x, "fx")
    with pytest.raises(ValueError, match="must be 1-d, got shape \\(2, 4\\)"):
        np.trim_zeros(on(device, values.reshape(2, 4)))


# ---------------------------------------------------------------------------------------------
# Sorting
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_lexsort_matches_numpy(dtype, axis, device):
    keys = [values_of(dtype, (4, 6), low=0, high=3) for _ in range(3)]
    got = np.lexsort([on(device, k, dtype) for k in keys], axis=axis)
    assert got.dtype == onp.int64
    assert_exact(got, onp.lexsort(keys, axis=axis))
    stacked = onp.stack(keys)
    assert_exact(np.lexsort(on(device, stacked, dtype), axis=axis),
                 onp.lexsort(stacked, axis=axis))
    assert_exact(np.lexsort([on(device, k[:0], dtype) for k in keys], axis=axis),
                 onp.lexsort([k[:0] for k in keys], axis=axis))
    assert_exact(np.lexsort([on(device, k[0, 0], dtype) for k in keys]),
                 onp.lexsort([k[0, 0] for k in keys]))


def test_lexsort_bad_input(device):
    with pytest.raises(ValueError, match="key 0 of shape \\(3,\\) and key 1 of shape \\(4,\\)"):
        np.lexsort([np.zeros(3, device=device), np.zeros(4, device=device)])
    with pytest.raises(TypeError, match="len > 0"):
        np.lexsort([])


def assert_partitioned(got, values, kth, axis):
    """got is a partition of `values` along `axis` around every k in kth (NumPy's contract)."""
    got = onp.moveaxis(got, axis, -1)
    ordered = onp.moveaxis(onp.sort(values, axis=axis), axis, -1)
    assert_exact_host(onp.sort(got, axis=-1), ordered)
    for k in onp.atleast_1d(kth):
        k = k % got.shape[-1]
        assert_exact_host(got[..., k], ordered[..., k])
        pivot = got[..., k:k + 1]
        assert (got[..., :k] <= pivot).all() or onp.isnan(pivot).any()
        assert (onp.isnan(got[..., k + 1:]) | (got[..., k + 1:] >= pivot)).all()


def assert_exact_host(got, want):
    onp.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64",
                                   "uint8"])
@pytest.mark.parametrize("axis", [0, -1, None])
@pytest.mark.parametrize("kth", [0, 2, -1, [1, 3], (-4, 0, 2)])
def test_partition_and_argpartition_contract(dtype, axis, kth, device):
    values = values_of(dtype, (5, 6))
    x = on(device, values, dtype)
    got = np.partition(x, kth, axis=axis).asnumpy()
    flat_axis = -1 if axis is None else axis
    reference = values.ravel() if axis is None else values
    assert got.dtype == values.dtype
    assert_partitioned(got, reference, kth, flat_axis)
    order = np.argpartition(x, kth, axis=axis).asnumpy()
    assert order.dtype == onp.int64
    assert_partitioned(onp.take_along_axis(reference, order, flat_axis), reference, kth,
                       flat_axis)


def test_partition_nan_msort_and_bad_kth(device):
    values = onp.array([3.0, onp.nan, -1.0, 2.0, onp.nan, 0.5], dtype=onp.float32)
    got = np.partition(on(device, values), 3).asnumpy()
    assert_exact_host(got[3], onp.partition(values, 3)[3])
    assert onp.isnan(got[4:]).all()
    matrix = values_of("float32", (4, 3))
    assert_exact(np.msort(on(device, matrix)), onp.sort(matrix, axis=0))
    x = np.zeros((2, 4), device=device)
    with pytest.raises(ValueError, match="kth\\(=4\\) out of bounds \\(4\\)"):
        np.partition(x, 4)
    with pytest.raises(ValueError, match="kth\\(=-3\\) out of bounds \\(2\\)"):
        np.argpartition(x, [0, -3], axis=0)
    with pytest.raises(TypeError, match="booleans are not valid"):
        np.partition(x, True)
    with pytest.raises(TypeError, match="kth must be an integer"):
        np.partition(x, 1.5)
    with pytest.raises(ValueError, match="kind must be 'introselect', got 'quick'"):
        np.partition(x, 1, kind="quick")
    with pytest.raises(onp.exceptions.AxisError):
        np.partition(on(device, onp.float32(1)), 0)


# ---------------------------------------------------------------------------------------------
# Hybridization
# ---------------------------------------------------------------------------------------------

class _StaticShapes(gluon.HybridBlock):
    def forward(self, x, indices):
        gathered = np.take_along_axis(x, indices, 1)
        chosen = np.choose(indices % 2, [x[:, :3], gathered], mode="wrap")
        selected = np.select([x[:, :3] > 0, gathered < -1], [gathered, chosen], default=0.5)
        pieces = np.piecewise(selected, [selected < 0], [lambda v: v * v, lambda v: -v])
        member = np.isin(x[:, :3], gathered).astype("float32")
        ordered = np.take_along_axis(x, np.lexsort([x, -x]), 1)[:, :3]
        parted = np.partition(x, 2, axis=1)[:, :3]
        where_bins = np.digitize(x[:, :3], [-1.0, 0.0, 1.0]).astype("float32")
        unravelled = np.unravel_index(indices, (2, 3))[1].astype("float32")
        return pieces + member + ordered + parted + where_bins + unravelled


def test_static_shape_functions_hybridize(device):
    block = _StaticShapes()
    block.hybridize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it traces: no "runs imperatively" warning
        for _ in range(2):  # the trace, then a replay on new values
            x = on(device, onp.random.randn(4, 5).astype(onp.float32))
            indices = on(device, onp.random.randint(0, 5, size=(4, 3)))
            got = block(x, indices)
            assert_exact(got, _StaticShapes.forward(block, x, indices).asnumpy())
    ran = ops_ran(lambda: block(on(device, onp.random.randn(4, 5).astype(onp.float32)),
                                on(device, onp.random.randint(0, 5, size=(4, 3)))), str(device))
    assert {"take", "sort", "argsort", "where"} <= set(ran)


# ---------------------------------------------------------------------------------------------
# GPU against CPU
# ---------------------------------------------------------------------------------------------

def _all_functions(device):
    """Every function of this file on arrays made from one seed, as NumPy results."""
    rng = onp.random.RandomState(7)
    x = on(device, rng.randn(4, 6).astype(onp.float32))
    ints = on(device, rng.randint(0, 4, (4, 6)))
    idx = on(device, rng.randint(-6, 6, (4, 3)))
    results = [np.take_along_axis(x, idx, 1), np.choose(ints % 3, [x, x * 2, -x]),
               np.select([x > 0, x < -1], [x, x * 3], 7), np.piecewise(x, [x > 0], [np.exp, 0]),
               np.compress([1, 0, 1], x, axis=1), np.extract(x > 0, x), np.flatnonzero(ints),
               np.rollaxis(x, 1), np.unravel_index(ints, (4, 5))[0], np.digitize(x, [-1, 0, 1]),
               np.apply_along_axis(np.sum, 1, x), np.apply_over_axes(np.max, x, [0]),
               np.isin(ints, [1, 3]), np.intersect1d(ints, [0, 2]), np.setxor1d(ints, [0, 9]),
               np.trim_zeros(ints[0]), np.lexsort([ints, x]), np.partition(x, [1, 3]),
               np.argpartition(ints, 2, axis=0), np.msort(x)]
    return [r.asnumpy() for r in results]


@requires_gpu
def test_gpu_matches_cpu():
    for got, want in zip(_all_functions(gpu(0)), _all_functions(cpu(0))):
        onp.testing.assert_array_equal(got, want)
