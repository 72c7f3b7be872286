"""pymx.np manipulation, creation, elementwise, cumulative and searching functions against
NumPy (float64 reference), gradients against central differences, NumPy's errors."""
import numpy as onp
import pytest

import pymx
from pymx import gluon, np
from pymx.base import bfloat16
from pymx.ndarray import ndarray
from pymx.test_utils import assert_almost_equal, check_numeric_gradient


def rand(shape, low=-2.0, high=2.0):
    return onp.random.uniform(low, high, size=shape)


def check(got, want, device, rtol=1e-12, atol=1e-12):
    """got (a pymx array on `device`) equals NumPy's `want` in shape, dtype kind and values."""
    want = onp.asarray(want)
    assert isinstance(got, ndarray), type(got)
    assert got.device == device, (got.device, device)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype.kind == want.dtype.kind, (got.dtype, want.dtype)
    assert_almost_equal(got, want, rtol=rtol, atol=atol, names=("pymx", "numpy"),
                        equal_nan=True)


def on(device, values, dtype=None):
    values = onp.asarray(values)
    return np.array(values, dtype=dtype or values.dtype, device=device)


# ---- pad -------------------------------------------------------------------------------------
PAD_WIDTHS = [2, (1,), (0, 3), ((1, 2), (3, 0)), ((0, 0), (5, 4))]


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap", "maximum",
                                  "minimum", "mean"])
def test_pad_modes(mode, device):
    x = rand((3, 4))
    for width in PAD_WIDTHS:  # (5, 4) on an axis of 4 pads past the array's length
        check(np.pad(on(device, x), width, mode=mode), onp.pad(x, width, mode=mode), device)
    ints = onp.arange(5)
    check(np.pad(on(device, ints), (2, 7), mode=mode), onp.pad(ints, (2, 7), mode=mode), device)
    cube = rand((2, 1, 3))
    check(np.pad(on(device, cube), 0, mode=mode), onp.pad(cube, 0, mode=mode), device)


def test_pad_constant_values_and_empty(device):
    x = rand((2, 3))
    for values in (7.5, (1, 2), ((1, 2), (3, 4))):
        check(np.pad(on(device, x), ((1, 1), (2, 0)), constant_values=values),
              onp.pad(x, ((1, 1), (2, 0)), constant_values=values), device)
    empty = onp.zeros((0, 2))
    check(np.pad(on(device, empty), 1), onp.pad(empty, 1), device)
    check(np.pad(on(device, onp.float64(3.0)), 2), onp.pad(onp.float64(3.0), 2), device)


def test_pad_mean_of_integers_and_booleans(device):
    ints = onp.array([[1, 2, 4], [7, 0, 0]], dtype=onp.int32)
    flags = onp.array([[True, False, False, False], [True, True, False, True]])
    for x in (ints, flags):
        got = np.pad(on(device, x), 1, mode="mean")
        assert got.dtype == x.dtype
        check(got, onp.pad(x, 1, mode="mean"), device)


def test_pad_gradient(device):
    for mode in ("constant", "edge", "reflect", "symmetric", "wrap", "mean"):
        check_numeric_gradient(lambda x: np.pad(x, ((1, 2), (3, 1)), mode=mode), [rand((2, 3))],
                               device=device)


def test_pad_errors():
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match="'linear_ramp' is not supported"):
        np.pad(x, 1, mode="linear_ramp")
    with pytest.raises(ValueError, match="non-negative integers, got -1"):
        np.pad(x, -1)
    with pytest.raises(ValueError, match=r"cannot be broadcast .* 2 axes"):
        np.pad(x, ((1, 2, 3),))
    with pytest.raises(ValueError, match="can't extend empty axis 0"):
        np.pad(np.ones((0, 3)), 1, mode="edge")
    with pytest.raises(ValueError, match="reflect_type='even'"):
        np.pad(x, 1, mode="reflect", reflect_type="odd")
    with pytest.raises(ValueError, match=r"unsupported keyword arguments .*'constant_values'"):
        np.pad(x, 1, mode="edge", constant_values=3)


# ---- roll, rot90, atleast ---------------------------------------------------------------------
def test_roll(device):
    x = rand((3, 4, 2))
    for shift, axis in [(1, None), (-5, None), (2, 1), (7, -1), ((1, -2), (0, 1)), ((1, 1), (0, 0)),
                        (3, (0, 2))]:
        check(np.roll(on(device, x), shift, axis), onp.roll(x, shift, axis), device)
    check(np.roll(on(device, onp.zeros((0, 3))), 2, 1), onp.roll(onp.zeros((0, 3)), 2, 1), device)
    check(np.roll(on(device, onp.float64(2.0)), 3), onp.roll(onp.float64(2.0), 3), device)
    check_numeric_gradient(lambda a: np.roll(a, (1, -2), (0, 1)), [rand((3, 4))], device=device)
    with pytest.raises(onp.exceptions.AxisError, match="axis 3 is out of bounds"):
        np.roll(on(device, x), 1, 3)


def test_rot90(device):
    x = rand((2, 3, 4))
    for k in range(-2, 6):
        for axes in [(0, 1), (1, 2), (2, 0), (-1, -2)]:
            check(np.rot90(on(device, x), k, axes), onp.rot90(x, k, axes), device)
    check_numeric_gradient(lambda a: np.rot90(a, 1), [rand((2, 3))], device=device)
    with pytest.raises(ValueError, match="len\\(axes\\) must be 2"):
        np.rot90(np.ones((2, 2)), axes=(0, 1, 2))
    with pytest.raises(ValueError, match="axes must be different"):
        np.rot90(np.ones((2, 2)), axes=(1, 1))
    with pytest.raises(ValueError, match=r"axes=\(0, 3\) out of range for array of ndim=2"):
        np.rot90(np.ones((2, 2)), axes=(0, 3))


def test_atleast(device):
    for shape in [(), (3,), (2, 3), (2, 3, 4), (0,)]:
        x = rand(shape)
        for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
            check(getattr(np, name)(on(device, x)), getattr(onp, name)(x), device)
    got = np.atleast_2d(on(device, 1.0), on(device, [1.0, 2.0]))
    assert isinstance(got, list) and [g.shape for g in got] == [(1, 1), (1, 2)]


# ---- diff, ediff1d, append, insert, delete ------------------------------------------------------
def test_diff(device):
    x = rand((3, 5))
    for n, axis in [(1, -1), (2, 1), (1, 0), (0, 0), (4, 1), (6, 1)]:
        check(np.diff(on(device, x), n, axis), onp.diff(x, n, axis), device)
    tail = rand((3, 2))
    check(np.diff(on(device, x), prepend=0.5, append=on(device, tail)),
          onp.diff(x, prepend=0.5, append=tail), device)
    flags = onp.array([True, True, False, True])
    check(np.diff(on(device, flags)), onp.diff(flags), device)
    check(np.diff(on(device, onp.arange(6).reshape(2, 3))), onp.diff(onp.arange(6).reshape(2, 3)),
          device)
    check_numeric_gradient(lambda a: np.diff(a, 2, axis=0), [rand((4, 3))], device=device)
    with pytest.raises(ValueError, match="order must be a non-negative integer but got -1"):
        np.diff(np.ones(3), -1)
    with pytest.raises(ValueError, match="at least one dimensional"):
        np.diff(np.array(1.0))


def test_ediff1d_and_append(device):
    x = rand((2, 3))
    check(np.ediff1d(on(device, x)), onp.ediff1d(x), device)
    check(np.ediff1d(on(device, x), to_end=[7.0, 8.0], to_begin=-1.0),
          onp.ediff1d(x, to_end=[7.0, 8.0], to_begin=-1.0), device)
    check(np.ediff1d(on(device, onp.zeros(0))), onp.ediff1d(onp.zeros(0)), device)
    y = rand((2, 2))
    check(np.append(on(device, x), on(device, y)), onp.append(x, y), device)
    check(np.append(on(device, x), on(device, y), axis=1), onp.append(x, y, axis=1), device)
    check_numeric_gradient(lambda a, b: np.append(a, b, axis=1), [x, y], device=device)


def test_insert(device):
    x = rand((3, 4))
    for obj, values, axis in [(1, 5.0, None), (-1, [1.0, 2.0], None), (0, [7.0, 8.0, 9.0, 6.0], 0),
                              (4, [7.0, 8.0, 9.0], 1), (2, rand((3, 1)), 1), ([1, 1, 3], 0.5, 1),
                              ([3, 0], rand((3, 2)), 1), (slice(0, 3, 2), [1.0, 2.0, 3.0, 4.0], 0),
                              ([], 1.0, 1)]:
        check(np.insert(on(device, x), obj, values, axis), onp.insert(x, obj, values, axis),
              device)
    check_numeric_gradient(lambda a, v: np.insert(a, [0, 2, 2], v, axis=1),
                           [rand((2, 3)), rand((2, 3))], device=device)
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 1 with size 4"):
        np.insert(on(device, x), 5, 1.0, axis=1)
    with pytest.raises(IndexError, match="index -5 is out of bounds"):
        np.insert(on(device, x), [0, -5], 1.0, axis=1)
    with pytest.raises(TypeError, match="must be integers"):
        np.insert(on(device, x), [0.5], 1.0, axis=1)


def test_delete(device):
    x = rand((3, 4))
    for obj, axis in [(1, None), (-1, 0), ([0, 2, 2], 1), (slice(None, None, 2), 1), ([], 0)]:
        check(np.delete(on(device, x), obj, axis), onp.delete(x, obj, axis), device)
    check_numeric_gradient(lambda a: np.delete(a, [0, 2], axis=1), [x], device=device)
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis with size 4"):
        np.delete(on(device, x), [0, 4], axis=1)
    with pytest.raises(onp.exceptions.AxisError, match="axis 2 is out of bounds"):
        np.delete(on(device, x), 0, axis=2)


# ---- diagonals, triangles ----------------------------------------------------------------------
def test_diag_diagonal_diagflat(device):
    for k in (-2, 0, 1, 4):
        v = rand((3,))
        check(np.diag(on(device, v), k), onp.diag(v, k), device)
        m = rand((3, 4))
        check(np.diag(on(device, m), k), onp.diag(m, k), device)
        square = rand((2, 2))
        check(np.diagflat(on(device, square), k), onp.diagflat(square, k), device)
    t = rand((2, 3, 4))
    for offset, axis1, axis2 in [(0, 0, 1), (1, 1, 2), (-1, 2, 0), (0, -1, -2)]:
        check(np.diagonal(on(device, t), offset, axis1, axis2),
              onp.diagonal(t, offset, axis1, axis2), device)
    check_numeric_gradient(lambda a: np.diag(a, 1), [rand((3,))], device=device)
    check_numeric_gradient(lambda a: np.diagonal(a, -1, 0, 2), [t], device=device)
    with pytest.raises(ValueError, match="1-d or 2-d, got 3-d"):
        np.diag(on(device, t))
    with pytest.raises(ValueError, match="axis1 and axis2 cannot be the same"):
        np.diagonal(on(device, t), 0, 1, 1)


@pytest.mark.parametrize("name", ["tril", "triu"])
def test_triangles(name, device):
    for shape in [(4, 4), (3, 5), (2, 4, 3), (4,), (0, 3)]:
        x = rand(shape)
        for k in (-1, 0, 2):
            check(getattr(np, name)(on(device, x), k), getattr(onp, name)(x, k), device)
    with_inf = onp.full((3, 3), onp.inf)
    check(getattr(np, name)(on(device, with_inf)), getattr(onp, name)(with_inf), device)
    check_numeric_gradient(lambda a: getattr(np, name)(a, 1), [rand((3, 4))], device=device)
    with pytest.raises(ValueError, match="0-d"):
        getattr(np, name)(on(device, onp.float64(1.0)))


def test_tri_and_indices(device):
    for n, m, k in [(3, None, 0), (3, 5, 1), (4, 2, -1), (0, 3, 0)]:
        check(np.tri(n, m, k, dtype="float64", device=device), onp.tri(n, m, k), device)
        for name in ("tril_indices", "triu_indices"):
            got = getattr(np, name)(n, k, m, device=device)
            for g, w in zip(got, getattr(onp, name)(n, k, m)):
                check(g, w, device)
    for dims in [(2, 3), (4,), (2, 0, 3)]:
        check(np.indices(dims, device=device), onp.indices(dims), device)
        for g, w in zip(np.indices(dims, sparse=True, device=device),
                        onp.indices(dims, sparse=True)):
            check(g, w, device)
    with pytest.raises(ValueError, match="negative dimensions are not allowed"):
        np.tri(-1)


# ---- products ----------------------------------------------------------------------------------
def test_kron(device):
    for sa, sb in [((2, 3), (3, 2)), ((3,), (2,)), ((2, 2), (3,)), ((), (2, 3)),
                   ((2, 1, 2), (2, 3))]:
        a, b = rand(sa), rand(sb)
        check(np.kron(on(device, a), on(device, b)), onp.kron(a, b), device)
    check_numeric_gradient(np.kron, [rand((2, 3)), rand((2, 2))], device=device)


@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")
def test_cross(device):
    for sa, sb, kwargs in [((3,), (3,), {}), ((4, 3), (4, 3), {}), ((2,), (2,), {}),
                           ((5, 2), (5, 3), {}), ((3, 4), (4, 3), {"axisa": 0}),
                           ((3, 2), (3, 2), {"axis": 0}), ((2, 3, 5), (2, 1, 3), {"axisa": 1,
                                                                             "axisc": 0}),
                           ((3,), (2, 3), {})]:
        a, b = rand(sa), rand(sb)
        check(np.cross(on(device, a), on(device, b), **kwargs), onp.cross(a, b, **kwargs),
              device)
    check_numeric_gradient(np.cross, [rand((2, 3)), rand((2, 3))], device=device)
    with pytest.raises(ValueError, match="dimension must be 2 or 3.*got 4 and 3"):
        np.cross(np.ones(4), np.ones(3))


# ---- splitting, stacking, resizing -------------------------------------------------------------
def test_splits_and_stacks(device):
    x = rand((4, 6, 2))
    for name, sections in [("hsplit", 3), ("hsplit", [1, 4]), ("vsplit", 2), ("dsplit", 2)]:
        got, want = getattr(np, name)(on(device, x), sections), getattr(onp, name)(x, sections)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            check(g, w, device)
    line = rand((6,))
    for g, w in zip(np.hsplit(on(device, line), 2), onp.hsplit(line, 2)):
        check(g, w, device)
    with pytest.raises(ValueError, match="vsplit only works on arrays of 2 or more dimensions"):
        np.vsplit(np.ones(4), 2)
    with pytest.raises(ValueError, match="dsplit only works on arrays of 3 or more dimensions"):
        np.dsplit(np.ones((2, 2)), 2)
    parts = [rand((2, 3)), rand((2, 3))]
    check(np.dstack([on(device, p) for p in parts]), onp.dstack(parts), device)
    check(np.dstack([on(device, parts[0][0]), on(device, parts[1][0])]),
          onp.dstack([parts[0][0], parts[1][0]]), device)
    check(np.row_stack([on(device, parts[0][0]), on(device, parts[1])]),
          onp.vstack([parts[0][0], parts[1]]), device)


def test_resize(device):
    x = rand((2, 3))
    for shape in [(3, 4), (2,), (5, 1, 2), 7, (0,), (2, 3)]:
        check(np.resize(on(device, x), shape), onp.resize(x, shape), device)
    check(np.resize(on(device, onp.zeros(0)), (2, 2)), onp.resize(onp.zeros(0), (2, 2)), device)
    check_numeric_gradient(lambda a: np.resize(a, (4, 2)), [rand((5,))], device=device)
    with pytest.raises(ValueError, match="non-negative, got \\(2, -1\\)"):
        np.resize(on(device, x), (2, -1))


# ---- creation ----------------------------------------------------------------------------------
def test_logspace_geomspace(device):
    for args in [(0, 3, 4), (-1, 2, 7), (2, -2, 5)]:
        check(np.logspace(*args, dtype="float64", device=device), onp.logspace(*args), device,
              rtol=1e-12)
    check(np.logspace(0, 4, 5, base=2.0, endpoint=False, dtype="float64", device=device),
          onp.logspace(0, 4, 5, base=2.0, endpoint=False), device)
    for start, stop, num in [(1, 1000, 4), (-1, -256, 9), (0.5, 8, 1), (2, 3, 0)]:
        check(np.geomspace(start, stop, num, dtype="float64", device=device),
              onp.geomspace(start, stop, num), device)
    assert np.logspace(0, 1, 3, device=device).dtype == onp.float32
    with pytest.raises(ValueError, match="cannot include zero"):
        np.geomspace(0, 10)
    with pytest.raises(ValueError, match=r"start \(-1.0\) and stop \(10.0\) must have the same"):
        np.geomspace(-1, 10)


def test_meshgrid(device):
    x, y, z = rand((3,)), rand((2,)), rand((4,))
    for indexing in ("xy", "ij"):
        for sparse in (False, True):
            got = np.meshgrid(on(device, x), on(device, y), on(device, z), indexing=indexing,
                              sparse=sparse)
            for g, w in zip(got, onp.meshgrid(x, y, z, indexing=indexing, sparse=sparse)):
                check(g, w, device)
    got = np.meshgrid(on(device, x), on(device, onp.zeros(0)))
    assert [g.shape for g in got] == [w.shape for w in onp.meshgrid(x, onp.zeros(0))]
    with pytest.raises(ValueError, match="'xy' and 'ij', got 'yx'"):
        np.meshgrid(on(device, x), indexing="yx")


# ---- elementwise -------------------------------------------------------------------------------
def test_nan_to_num(device):
    x = onp.array([[onp.nan, onp.inf, -onp.inf], [1.5, -2.0, 0.0]])
    check(np.nan_to_num(on(device, x)), onp.nan_to_num(x), device)
    check(np.nan_to_num(on(device, x), nan=-1.0, posinf=9.0, neginf=-9.0),
          onp.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0), device)
    x32 = x.astype(onp.float32)
    got = np.nan_to_num(on(device, x32))
    assert got.dtype == onp.float32
    assert_almost_equal(got, onp.nan_to_num(x32), rtol=0, atol=0)
    check(np.nan_to_num(on(device, onp.arange(3))), onp.arange(3), device)
    check_numeric_gradient(lambda a: np.nan_to_num(a), [rand((2, 3))], device=device)


def test_isclose(device):
    a = onp.array([1.0, 1.0 + 1e-9, onp.inf, -onp.inf, onp.nan, 0.0, 1e-9, onp.inf])
    b = onp.array([1.0, 1.0, onp.inf, onp.inf, onp.nan, 1e-9, 0.0, 1e300])
    for equal_nan in (False, True):
        check(np.isclose(on(device, a), on(device, b), equal_nan=equal_nan),
              onp.isclose(a, b, equal_nan=equal_nan), device)
    check(np.isclose(on(device, a), 1.0, rtol=0.1), onp.isclose(a, 1.0, rtol=0.1), device)
    column, row = rand((2, 1)), rand((3,))
    check(np.isclose(on(device, column), on(device, row), atol=1.0),
          onp.isclose(column, row, atol=1.0), device)


def test_copysign_ldexp_heaviside(device):
    x1 = onp.array([-2.0, 3.0, 0.0, -0.0, 1.5, onp.inf])
    x2 = onp.array([1.0, -1.0, -0.0, 0.0, -3.0, -1.0])
    check(np.copysign(on(device, x1), on(device, x2)), onp.copysign(x1, x2), device)
    check(np.copysign(on(device, x1), -1.0), onp.copysign(x1, -1.0), device)
    got = np.copysign(on(device, onp.array([3, -4])), on(device, onp.array([-1, 1])))
    assert_almost_equal(got, onp.array([-3.0, 4.0]))
    exponents = onp.array([0, 3, -2, 10, -1, 1])
    check(np.ldexp(on(device, x1), on(device, exponents)), onp.ldexp(x1, exponents), device)
    check(np.heaviside(on(device, onp.array([-1.5, 0.0, 2.0, onp.nan])), 0.5),
          onp.heaviside(onp.array([-1.5, 0.0, 2.0, onp.nan]), 0.5), device)
    check(np.heaviside(on(device, onp.array([-1.5, 0.0, 2.0])), on(device, onp.array([0.1, 0.2,
                                                                                      0.3]))),
          onp.heaviside(onp.array([-1.5, 0.0, 2.0]), onp.array([0.1, 0.2, 0.3])), device)
    steps = np.heaviside(on(device, onp.array([-2, 0, 3])), on(device, onp.array([0.5, 0.5, 0.5])))
    check(steps, onp.heaviside(onp.array([-2, 0, 3]), onp.array([0.5, 0.5, 0.5])), device)
    check_numeric_gradient(lambda a: np.copysign(a, -1.0), [rand((3,), 0.5, 2.0)], device=device)
    check_numeric_gradient(lambda a: np.ldexp(a, np.array(onp.array([1, -2, 3]), device=device)),
                           [rand((3,))], device=device)
    with pytest.raises(TypeError, match="exponent must be integers, got dtype float64"):
        np.ldexp(on(device, x1), on(device, x2))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_ldexp_where_the_power_of_two_alone_overflows(dtype, device):
    # Results that are representable although 2 ** x2 over- or underflows the dtype, subnormal
    # results, and exponents so large that 0 * 2 ** x2 must stay 0 (not 0 * inf = NaN).
    info = onp.finfo(dtype)
    span = info.maxexp - info.minexp + info.nmant  # from the smallest subnormal to the largest
    x1 = onp.array([2.0 ** -10, 2.0 ** 10, 2.0 ** (info.minexp - info.nmant), info.max, 0.0,
                    -0.0, -1.5, onp.inf, 3.0], dtype=dtype)
    x2 = onp.array([info.maxexp + 5, info.minexp - info.nmant - 5, span, -span, 100000, -100000,
                    info.maxexp, -3, -7], dtype=onp.int32)
    with onp.errstate(over="ignore"):
        want = onp.ldexp(x1, x2)
    got = np.ldexp(on(device, x1), on(device, x2))
    assert got.dtype == dtype
    assert_almost_equal(got, want, rtol=0, atol=0)
    assert onp.array_equal(onp.signbit(got.asnumpy()), onp.signbit(want))


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8"])
def test_gcd_lcm(dtype, device):
    info = onp.iinfo(dtype)
    bound = 11 if dtype == "int8" else 100  # keeps lcm within the dtype
    a = onp.random.randint(-bound, bound, size=(4, 5)).astype(dtype)
    b = onp.random.randint(-bound, bound, size=(5,)).astype(dtype)
    a[0, 0], b[0], a[1, 1], b[1] = 0, 0, 0, 7
    check(np.gcd(on(device, a), on(device, b)), onp.gcd(a, b), device)
    check(np.lcm(on(device, a), on(device, b)), onp.lcm(a, b), device)
    check(np.gcd(on(device, a), 12), onp.gcd(a, onp.array(12, dtype)), device)
    # Consecutive Fibonacci numbers take Euclid's longest path.
    fib = [1, 1]
    while fib[-1] + fib[-2] <= info.max:
        fib.append(fib[-1] + fib[-2])
    check(np.gcd(on(device, onp.array([fib[-1]], dtype)), on(device, onp.array([fib[-2]], dtype))),
          onp.array([1], dtype), device)
    with pytest.raises(TypeError, match="only defined for integers, got dtype float64"):
        np.gcd(on(device, onp.ones(2)), 3)


def test_polyval(device):
    p, x = rand((4,)), rand((2, 3))
    check(np.polyval(on(device, p), on(device, x)), onp.polyval(p, x), device)
    check(np.polyval([2.0, -1.0], on(device, x)), onp.polyval([2.0, -1.0], x), device,
          rtol=1e-6, atol=1e-6)
    check(np.polyval(on(device, onp.array([3, 0, 1])), on(device, onp.arange(4))),
          onp.polyval([3, 0, 1], onp.arange(4)), device)
    check_numeric_gradient(np.polyval, [p, x], device=device)


# ---- cumprod -----------------------------------------------------------------------------------
def test_cumprod(device):
    for shape, axis in [((7,), None), ((3, 5), 1), ((3, 5), 0), ((2, 3, 9), -1), ((0, 3), 0),
                        ((), None), ((4, 17), 1)]:
        x = rand(shape, 0.5, 1.5)
        check(np.cumprod(on(device, x), axis), onp.cumprod(x, axis), device)
    with_zero = onp.array([2.0, -3.0, 0.0, 4.0, -1.0])
    check(np.cumprod(on(device, with_zero)), onp.cumprod(with_zero), device)
    ints = onp.arange(1, 8, dtype=onp.int32)
    check(np.cumprod(on(device, ints)), onp.cumprod(ints), device)
    assert np.cumprod(on(device, ints)).dtype == onp.int64
    check(np.cumprod(on(device, ints), dtype="float64"), onp.cumprod(ints, dtype="float64"),
          device)
    check_numeric_gradient(lambda a: np.cumprod(a, axis=1), [rand((2, 6))], device=device)
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 2"):
        np.cumprod(on(device, rand((2, 3))), axis=2)
    for axis in (0, -1):  # a 0-d array accumulates as a 1-element one
        check(np.cumprod(on(device, onp.array(3.0)), axis), onp.cumprod(onp.array(3.0), axis),
              device)


# ---- searching, counting ----------------------------------------------------------------------
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(side, device):
    for n in (1, 2, 7, 16):
        a = onp.sort(onp.random.randint(0, 5, size=n).astype(onp.float64))
        v = onp.array([-1.0, 0.0, 1.0, 2.5, 4.0, 9.0, onp.nan]).reshape(7, 1) + onp.zeros((7, 2))
        check(np.searchsorted(on(device, a), on(device, v), side=side),
              onp.searchsorted(a, v, side=side), device)
    with_nan = onp.array([0.0, 1.0, onp.nan, onp.nan])
    check(np.searchsorted(on(device, with_nan), on(device, onp.array([0.5, onp.nan])), side=side),
          onp.searchsorted(with_nan, onp.array([0.5, onp.nan]), side=side), device)
    unsorted = onp.array([3.0, 1.0, 2.0])
    sorter = onp.argsort(unsorted)
    check(np.searchsorted(on(device, unsorted), on(device, [2.0, 0.0]), side=side,
                          sorter=on(device, sorter)),
          onp.searchsorted(unsorted, [2.0, 0.0], side=side, sorter=sorter), device)
    check(np.searchsorted(on(device, onp.zeros(0)), on(device, [1.0])),
          onp.searchsorted(onp.zeros(0), [1.0]), device)
    with pytest.raises(ValueError, match="'left' or 'right', got 'middle'"):
        np.searchsorted(on(device, [1.0]), 1.0, side="middle")


def test_interp(device):
    xp = onp.sort(rand((6,)))
    fp = rand((6,))
    x = onp.concatenate([rand((10,), -3, 3), xp, [xp[0] - 1, xp[-1] + 1]])
    check(np.interp(on(device, x), on(device, xp), on(device, fp)), onp.interp(x, xp, fp),
          device)
    check(np.interp(on(device, x), on(device, xp), on(device, fp), left=-7.0, right=7.0),
          onp.interp(x, xp, fp, left=-7.0, right=7.0), device)
    check(np.interp(on(device, x), on(device, [0.5]), on(device, [2.0])),
          onp.interp(x, [0.5], [2.0]), device)
    angles = rand((8,), -400, 400)
    xp_periodic, fp_periodic = onp.array([190.0, -190, 350, -350]), onp.array([5.0, 10, 3, 4])
    check(np.interp(on(device, angles), on(device, xp_periodic), on(device, fp_periodic),
                    period=360), onp.interp(angles, xp_periodic, fp_periodic, period=360),
          device, rtol=1e-9, atol=1e-9)
    x_inside = onp.sort(rand((5,), xp[0] + 1e-3, xp[-1] - 1e-3))
    check_numeric_gradient(lambda x_, f_: np.interp(x_, np.array(xp, device=device), f_),
                           [x_inside, fp], device=device)
    with pytest.raises(ValueError, match="not of the same length \\(2 and 3\\)"):
        np.interp(on(device, [1.0]), on(device, [1.0, 2, 3]), on(device, [1.0, 2]))
    with pytest.raises(ValueError, match="sample points is empty"):
        np.interp(on(device, [1.0]), on(device, onp.zeros(0)), on(device, onp.zeros(0)))
    with pytest.raises(ValueError, match="period must be a non-zero value"):
        np.interp(on(device, [1.0]), on(device, [1.0, 2]), on(device, [1.0, 2]), period=0)


def test_interp_inputs_follow_the_array_device():
    other = pymx.cpu(1)  # not the current device: lists must be made where the array is
    x = onp.array([-1.0, 0.25, 0.5, 3.0])
    for args in [(on(other, x), [0.0, 1.0], [2.0, 4.0]), ([0.25, 0.75], on(other, [0.0, 1.0]),
                                                          [2.0, 4.0])]:
        got = np.interp(*args)
        want = onp.interp(*[a.asnumpy() if isinstance(a, ndarray) else a for a in args])
        check(got, want, other)
    check(np.polyval([2.0, -1.0], on(other, x)), onp.polyval([2.0, -1.0], x), other)


def test_bfloat16_keeps_its_dtype_and_its_nan(device):
    nan, inf = onp.nan, onp.inf
    x = np.array([-1.5, 0.0, 2.0, nan, inf, -inf], dtype="bfloat16", device=device)
    largest = (2 - 2.0 ** -7) * 2.0 ** 127  # bfloat16's largest finite value
    got = np.nan_to_num(x)
    assert got.dtype == bfloat16
    assert_almost_equal(got, onp.array([-1.5, 0.0, 2.0, 0.0, largest, -largest]), rtol=0,
                        atol=0)
    assert_almost_equal(np.copysign(x, -1.0), onp.copysign(x.asnumpy(), -1.0), rtol=0, atol=0,
                        equal_nan=True)
    assert_almost_equal(np.heaviside(x, 0.5), onp.heaviside(x.asnumpy(), 0.5), rtol=0, atol=0,
                        equal_nan=True)
    exponents = np.array([1, 2, 3, 4, 5, 6], dtype="int32", device=device)
    assert_almost_equal(np.ldexp(x, exponents), onp.ldexp(x.asnumpy(), exponents.asnumpy()),
                        rtol=0, atol=0, equal_nan=True)
    xp, fp = (np.array(v, dtype="bfloat16", device=device) for v in ([0.0, 1.0], [1.0, 2.0]))
    results = [np.copysign(x, -1.0), np.heaviside(x, 0.5), np.ldexp(x, exponents),
               np.interp(x, xp, fp), np.polyval(fp, x)]
    assert [r.dtype for r in results] == [bfloat16] * len(results)
    # NaN sorts last in bfloat16 too.
    a = np.array([0.0, 1.0, 2.0, nan], dtype="bfloat16", device=device)
    for side in ("left", "right"):
        assert_almost_equal(np.searchsorted(a, x, side=side),
                            onp.searchsorted(a.asnumpy(), x.asnumpy(), side=side))


def test_bincount_count_nonzero(device):
    x = onp.random.randint(0, 6, size=20)
    w = rand((20,))
    check(np.bincount(on(device, x)), onp.bincount(x), device)
    check(np.bincount(on(device, x), minlength=10), onp.bincount(x, minlength=10), device)
    check(np.bincount(on(device, x), weights=on(device, w)), onp.bincount(x, weights=w), device)
    check(np.bincount(on(device, onp.zeros(0, dtype=onp.int64))),
          onp.bincount(onp.zeros(0, dtype=onp.int64)), device)
    with pytest.raises(ValueError, match="no negative elements, found -2"):
        np.bincount(on(device, [1, -2, 3]))
    with pytest.raises(TypeError, match="must be integers, got dtype float64"):
        np.bincount(on(device, [1.0]))
    m = onp.random.randint(-1, 2, size=(3, 4)).astype(onp.float64)
    for axis in (None, 0, 1, (0, 1)):
        check(np.count_nonzero(on(device, m), axis=axis), onp.count_nonzero(m, axis=axis),
              device)
    check(np.count_nonzero(on(device, m), axis=1, keepdims=True),
          onp.count_nonzero(m, axis=1, keepdims=True), device)
    check(np.count_nonzero(on(device, m > 0)), onp.count_nonzero(m > 0), device)


def test_float32_results_and_hybridize(device):
    x32 = rand((3, 4)).astype(onp.float32)
    got = np.pad(on(device, x32), 1, mode="reflect")
    assert got.dtype == onp.float32
    assert_almost_equal(got, onp.pad(x32, 1, mode="reflect"))

    class Block(gluon.HybridBlock):
        def forward(self, x):
            return np.cumprod(np.roll(np.tril(np.pad(x, 1, mode="symmetric")), 1, 0), axis=1)

    block = Block()
    x = np.array(rand((3, 4)), device=device)
    imperative = block(x)
    block.hybridize()
    block(x)
    x2 = np.array(rand((3, 4)), device=device)
    assert_almost_equal(block(x2), Block()(x2), rtol=0, atol=0)
    assert imperative.shape == (5, 6)
