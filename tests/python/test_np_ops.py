"""pymx.np operators against NumPy (float64 reference), gradients against finite differences."""
import warnings

import numpy as onp
import pytest

import pymx
from pymx import autograd, np

RTOL = {"float16": 1e-2, "float32": 1e-5, "float64": 1e-12}
ATOL = {"float16": 1e-2, "float32": 1e-6, "float64": 1e-12}


def rand(shape, dtype="float32", low=-2.0, high=2.0, seed=0):
    values = onp.random.default_rng(seed).uniform(low, high, size=shape)
    return values.astype(dtype)


def check_op(onp_fn, np_fn, shapes=((3, 4), (0,), ()), dtype="float32", low=-2.0, high=2.0,
             rtol=None, atol=None):
    """np_fn on pymx arrays equals onp_fn on the same values in float64, cast to pymx's dtype."""
    for shape in shapes:
        a = rand(shape, dtype, low, high)
        got = np_fn(np.array(a))
        want = onp.asarray(onp_fn(a.astype(onp.float64)))
        assert got.shape == want.shape, (shape, got.shape, want.shape)
        onp.testing.assert_allclose(got.asnumpy().astype(onp.float64), want,
                                    rtol=rtol or RTOL[dtype], atol=atol or ATOL[dtype],
                                    err_msg=f"shape {shape} dtype {dtype}")


def check_grad(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-7):
    """Autograd gradient of sum(fn(*arrays)) against central differences, in float64."""
    xs = [np.array(a.astype(onp.float64)) for a in arrays]
    for x in xs:
        x.attach_grad()
    with autograd.record():
        y = fn(*xs)
    y.backward()
    for i, a in enumerate(arrays):
        a = a.astype(onp.float64)
        numeric = onp.zeros_like(a)
        for idx in onp.ndindex(a.shape):
            for sign in (1, -1):
                shifted = [b.astype(onp.float64) for b in arrays]
                shifted[i] = a.copy()
                shifted[i][idx] += sign * eps
                value = fn(*[np.array(s) for s in shifted]).asnumpy().sum()
                numeric[idx] += sign * value / (2 * eps)
        onp.testing.assert_allclose(xs[i].grad.asnumpy(), numeric, rtol=rtol, atol=atol,
                                    err_msg=f"gradient of input {i}")


# ---- unary ---------------------------------------------------------------------------------
UNARY = ["exp", "log1p", "expm1", "sin", "cos", "tan", "tanh", "arctan", "sinh", "cosh", "abs",
         "negative", "sign", "square", "floor", "ceil", "trunc", "rint", "arcsinh", "cbrt"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    check_op(getattr(onp, name), getattr(np, name), low=-0.9, high=1.5)


@pytest.mark.parametrize("name", ["log", "sqrt", "log2", "log10", "reciprocal", "arccosh"])
def test_unary_positive(name):
    check_op(getattr(onp, name), getattr(np, name), low=1.1, high=3.0)


@pytest.mark.parametrize("name", ["arcsin", "arccos", "arctanh"])
def test_unary_unit(name):
    check_op(getattr(onp, name), getattr(np, name), low=-0.9, high=0.9)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_exp_dtypes(dtype):
    check_op(onp.exp, np.exp, shapes=[(64,)], dtype=dtype)


def test_int_input_float_functions_give_float32():
    x = np.array(onp.array([1, 2, 4], dtype=onp.int32))
    assert np.sqrt(x).dtype == onp.float32
    assert np.abs(x).dtype == onp.int32
    onp.testing.assert_allclose(np.log2(x).asnumpy(), [0, 1, 2])


def test_round_half_to_even_and_clip():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5])
    assert np.round(x).asnumpy().tolist() == [-2, -2, -0, 0, 2, 2]
    check_op(lambda a: onp.clip(a, -0.5, 1), lambda a: np.clip(a, -0.5, 1))
    check_op(lambda a: onp.clip(a, None, 1), lambda a: np.clip(a, None, 1))


def test_predicates():
    x = onp.array([1.0, onp.nan, onp.inf, -onp.inf], dtype=onp.float32)
    for name in ["isnan", "isinf", "isfinite"]:
        got = getattr(np, name)(np.array(x))
        assert got.dtype == onp.bool_
        assert got.asnumpy().tolist() == getattr(onp, name)(x).tolist()


# ---- binary --------------------------------------------------------------------------------
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "arctan2", "hypot"]
SHAPE_PAIRS = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((), (2, 2)), ((0, 3), (3,)),
               ((1,), ())]


@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcast(name):
    for sa, sb in SHAPE_PAIRS:
        a, b = rand(sa, seed=1), rand(sb, seed=2)
        got = getattr(np, name)(np.array(a), np.array(b))
        want = getattr(onp, name)(a.astype(onp.float64), b.astype(onp.float64))
        assert got.shape == want.shape
        onp.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_power_mod_floor_divide():
    a, b = rand((3, 4), low=0.5, high=2.0, seed=1), rand((4,), low=0.5, high=2.0, seed=2)
    onp.testing.assert_allclose(np.power(np.array(a), np.array(b)).asnumpy(), a ** b, rtol=1e-5)
    a, b = rand((3, 4), low=-5, high=5, seed=3), rand((3, 4), low=0.5, high=2, seed=4)
    for sign in (1, -1):
        onp.testing.assert_allclose(np.mod(np.array(a), np.array(sign * b)).asnumpy(),
                                    onp.mod(a, sign * b), rtol=1e-5, atol=1e-5)
    ia = onp.array([7, -7, 7, -7, 0], dtype=onp.int64)
    ib = onp.array([2, 2, -2, -2, 3], dtype=onp.int64)
    assert (np.array(ia) % np.array(ib)).asnumpy().tolist() == (ia % ib).tolist()
    assert (np.array(ia) // np.array(ib)).asnumpy().tolist() == (ia // ib).tolist()
    assert (np.array(ia) ** 2).asnumpy().tolist() == (ia ** 2).tolist()


@pytest.mark.parametrize("name", ["equal", "not_equal", "greater", "greater_equal", "less",
                                  "less_equal", "logical_and", "logical_or", "logical_xor"])
def test_comparisons(name):
    a = onp.array([[0, 1, 2], [2, 1, 0]], dtype=onp.float32)
    b = onp.array([1, 1, 0], dtype=onp.float32)
    got = getattr(np, name)(np.array(a), np.array(b))
    assert got.dtype == onp.bool_
    assert got.asnumpy().tolist() == getattr(onp, name)(a, b).tolist()
    got = getattr(np, name)(np.array(a), 1)
    assert got.asnumpy().tolist() == getattr(onp, name)(a, 1).tolist()


def test_scalars_both_sides_and_dtypes():
    x = np.array([1.0, 2.0, 4.0])
    assert (2 - x).asnumpy().tolist() == [1, 0, -2]
    assert (8 / x).asnumpy().tolist() == [8, 4, 2]
    assert (2 ** x).asnumpy().tolist() == [2, 4, 16]
    assert (x ** 2).asnumpy().tolist() == [1, 4, 16]
    i = np.array(onp.array([1, 2, 3], dtype=onp.int32))
    assert (i + 1).dtype == onp.int32
    assert (i + 1.5).dtype == onp.float32  # MXNet: int array with a float scalar -> float32
    assert (i / i).dtype == onp.float32    # true division of ints -> float32
    assert (i + x).dtype == onp.float32
    d = np.array(onp.ones(3))
    assert (d + x).dtype == onp.float64
    assert (np.array(onp.array([1], onp.uint8)) + np.array(onp.array([1], onp.int8))).dtype == onp.int32


def test_inplace_and_out():
    x = np.array([1.0, 2.0])
    y = x
    x += 1
    assert y is x and x.asnumpy().tolist() == [2, 3]
    out = np.zeros((2,))
    np.multiply(x, x, out=out)
    assert out.asnumpy().tolist() == [4, 9]
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        np.add(x, x, out=np.zeros((3,)))


# ---- reductions ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min", "std", "var"])
def test_reductions(name):
    for axis in [None, 0, 1, (0, 2), -1]:
        for keepdims in [False, True]:
            a = rand((3, 4, 5), low=0.5, high=1.5)
            got = getattr(np, name)(np.array(a), axis=axis, keepdims=keepdims)
            want = getattr(onp, name)(a.astype(onp.float64), axis=axis, keepdims=keepdims)
            assert got.shape == want.shape, (axis, keepdims)
            onp.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_reduction_edge_cases():
    assert np.sum(np.zeros((0, 3)), axis=0).asnumpy().tolist() == [0, 0, 0]
    assert np.sum(np.array(onp.array([1, 2], onp.int32))).dtype == onp.int64
    assert np.mean(np.array(onp.array([1, 2], onp.int32))).item() == 1.5
    with pytest.raises(TypeError, match="mean: dtype int32 is not supported"):
        np.mean(np.array([0.5, 0.5]), dtype="int32")  # refused when called, not in the kernel
    assert np.var(np.array([1.0, 2.0, 3.0, 4.0]), ddof=1).item() == pytest.approx(5 / 3)
    assert np.sum(np.array(5.0)).item() == 5
    b = onp.array([[True, False], [True, True]])
    assert np.all(np.array(b), axis=1).asnumpy().tolist() == [False, True]
    assert np.any(np.array(b), axis=0).asnumpy().tolist() == [True, True]
    with pytest.raises(ValueError, match="zero-size"):
        np.max(np.zeros((0,)))
    with pytest.raises(ValueError, match="axis 3 is out of bounds"):
        np.sum(np.zeros((2, 2)), axis=3)


def test_argmax_argmin():
    a = rand((3, 4, 5))
    for axis in [None, 0, 1, -1]:
        assert np.argmax(np.array(a), axis=axis).asnumpy().tolist() == onp.argmax(a, axis=axis).tolist()
        assert np.argmin(np.array(a), axis=axis).asnumpy().tolist() == onp.argmin(a, axis=axis).tolist()
    assert np.argmax(np.array(a), axis=1).dtype == onp.int64


# ---- shapes --------------------------------------------------------------------------------
def test_shape_ops():
    a = rand((2, 3, 4))
    x = np.array(a)
    cases = [
        (np.reshape(x, (4, -1)), a.reshape(4, -1)),
        (np.transpose(x), a.transpose()),
        (np.transpose(x, (1, 0, 2)), a.transpose(1, 0, 2)),
        (np.swapaxes(x, 0, 2), a.swapaxes(0, 2)),
        (np.moveaxis(x, 0, -1), onp.moveaxis(a, 0, -1)),
        (np.expand_dims(x, 1), onp.expand_dims(a, 1)),
        (np.squeeze(np.array(a[:1])), onp.squeeze(a[:1])),
        (np.broadcast_to(np.array(a[:, :1]), (2, 3, 4)), onp.broadcast_to(a[:, :1], (2, 3, 4))),
        (np.tile(x, (2, 1, 3)), onp.tile(a, (2, 1, 3))),
        (np.tile(x, 2), onp.tile(a, 2)),
        (np.repeat(x, 2, axis=1), onp.repeat(a, 2, axis=1)),
        (np.repeat(x, 2), onp.repeat(a, 2)),
        (np.flip(x, (0, 2)), onp.flip(a, (0, 2))),
        (np.flip(x), onp.flip(a)),
        (np.concatenate([x, x], axis=2), onp.concatenate([a, a], axis=2)),
        (np.concatenate([x, x], axis=None), onp.concatenate([a, a], axis=None)),
        (np.stack([x, x], axis=1), onp.stack([a, a], axis=1)),
        (np.ravel(x), a.ravel()),
    ]
    for got, want in cases:
        assert got.shape == want.shape
        onp.testing.assert_array_equal(got.asnumpy(), want)
    parts = np.split(x, [1, 3], axis=2)
    for got, want in zip(parts, onp.split(a, [1, 3], axis=2)):
        onp.testing.assert_array_equal(got.asnumpy(), want)
    assert len(np.split(x, 2, axis=0)) == 2


def test_where():
    c = onp.array([[True, False, True]])
    a, b = rand((2, 3)), rand((2, 1), seed=3)
    onp.testing.assert_array_equal(np.where(np.array(c), np.array(a), np.array(b)).asnumpy(),
                                   onp.where(c, a, b))
    onp.testing.assert_array_equal(np.where(np.array(a) > 0, np.array(a), 0).asnumpy(),
                                   onp.where(a > 0, a, 0))


def test_shape_errors():
    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"cannot reshape array of size 6 into shape \(4, 2\)"):
        np.reshape(x, (4, 2))
    with pytest.raises(ValueError, match=r"could not be broadcast.*\(2, 3\) \(4,\)"):
        x + np.zeros((4,))
    with pytest.raises(ValueError, match="concatenation axis"):
        np.concatenate([x, np.zeros((3, 3))], axis=1)
    with pytest.raises(ValueError, match="equal division"):
        np.split(x, 4, axis=1)


# ---- indexing ------------------------------------------------------------------------------
def test_getitem():
    a = rand((4, 5, 6))
    x = np.array(a)
    keys = [1, -1, (1, 2), slice(1, 3), (slice(None), 2), (Ellipsis, 1), (None, 1),
            (slice(None, None, -1), slice(1, None, 2)), (slice(3, 0, -2), Ellipsis, None),
            (1, slice(None), -2)]
    for key in keys:
        got = x[key]
        assert got.shape == a[key].shape, key
        onp.testing.assert_array_equal(got.asnumpy(), a[key])
    idx = onp.array([3, 0, -1])
    onp.testing.assert_array_equal(x[idx].asnumpy(), a[idx])
    onp.testing.assert_array_equal(x[np.array(idx)].asnumpy(), a[idx])
    onp.testing.assert_array_equal(x[[0, 2], [1, 4]].asnumpy(), a[[0, 2], [1, 4]])
    mask = a[:, 0, 0] > 0
    onp.testing.assert_array_equal(x[np.array(mask)].asnumpy(), a[mask])
    onp.testing.assert_array_equal(x[x > 0].asnumpy(), a[a > 0])
    with pytest.raises(IndexError, match="out of bounds"):
        x[4]
    with pytest.raises(IndexError, match="too many indices"):
        x[1, 2, 3, 4]


# Mixes of basic and advanced indices beyond leading arrays, with NumPy's rules: an array after a
# slice, arrays separated by a slice (their dimensions go first), integers beside arrays (which
# count as arrays), masks beside slices, newaxis, repeated positions.
MIXED_KEYS = [
    (slice(None), [4, 0, 4]),
    (0, slice(None), [1, 2]),
    ([0, 2], slice(None), [1, 3]),
    (slice(1, 3), [[0], [2]], [1, 4]),
    (Ellipsis, [5, -1]),
    (slice(None), onp.array([True, False, True, False, True]), 2),
    ([3, 1], 2),
    (None, slice(None, None, 2), [0, 0], slice(1, 4)),
    (slice(None), slice(None), onp.array([[1, 2], [3, 0]])),
]


@pytest.mark.parametrize("key", MIXED_KEYS, ids=range(len(MIXED_KEYS)))
def test_getitem_mixed_advanced_indices_follow_numpy(key):
    a = rand((4, 5, 6))
    got = np.array(a)[key]
    assert got.shape == a[key].shape
    onp.testing.assert_array_equal(got.asnumpy(), a[key])


def test_getitem_mixed_advanced_indices_gradient():
    a = rand((4, 5, 6))
    x = np.array(a)
    x.attach_grad()
    key = (slice(None), [4, 0, 4], slice(1, 3))  # position 4 twice: its gradient adds up
    head = rand(a[key].shape)
    with autograd.record():
        y = x[key]
    y.backward(np.array(head))
    expected = onp.zeros_like(a)
    onp.add.at(expected, key, head)
    onp.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=1e-6)


# Without the keys that repeat a position (NumPy leaves which write wins unspecified).
UNIQUE_KEYS = [k for i, k in enumerate(MIXED_KEYS) if i not in (0, 7)]


@pytest.mark.parametrize("key", UNIQUE_KEYS, ids=range(len(UNIQUE_KEYS)))
def test_setitem_mixed_advanced_indices_follow_numpy(key):
    a = rand((4, 5, 6))
    x = np.array(a)
    value = rand(a[key].shape[-1:])  # broadcast along the leading result dimensions
    x[key] = value
    a[key] = value
    onp.testing.assert_array_equal(x.asnumpy(), a)


def test_mixed_advanced_index_errors_are_numpys():
    x = np.array(rand((4, 5, 6)))
    with pytest.raises(IndexError, match="out of bounds"):
        x[:, [1, 5]]
    with pytest.raises(IndexError, match="integer"):
        x[:, onp.array([0.5])]
    with pytest.raises(ValueError, match="could not broadcast"):
        x[:, [0, 1]] = np.zeros((3,))


def test_several_index_arrays_stay_within_their_axes():
    a = rand((4, 6))
    x = np.array(a)
    rows, cols = onp.array([0, 3, -1]), onp.array([5, -6, 2])
    onp.testing.assert_array_equal(x[np.array(rows), np.array(cols)].asnumpy(), a[rows, cols])
    # (0, 6) and (1, -7) lie outside axis 1 although their flattened positions (6, 5) lie
    # inside the array: refused, never another element.
    for bad_rows, bad_cols in (([0, 1], [6, 0]), ([1, 0], [-7, 0]), ([4, 0], [0, 0])):
        with pytest.raises(IndexError, match="out of bounds"):
            x[np.array(bad_rows), np.array(bad_cols)].asnumpy()
        with pytest.raises(IndexError, match=r"index -?\d+ is out of bounds for axis [01] with size"):
            x[bad_rows, bad_cols]  # values known on the host: NumPy's message at once
        target = np.array(a)
        target[np.array(bad_rows), np.array(bad_cols)] = 1.0
        with pytest.raises(IndexError, match="out of bounds"):
            target.asnumpy()


def test_several_index_arrays_trace_into_a_graph():
    from pymx.gluon import HybridBlock

    class Gather(HybridBlock):
        def forward(self, x, rows, cols):
            return x[rows, cols] * 2

    net = Gather()
    net.hybridize()
    a = rand((4, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reading the indices on the host would stop the trace
        for rows, cols in (([0, 3], [1, -1]), ([-4, 2], [0, 5])):
            got = net(np.array(a), np.array(rows), np.array(cols))
            onp.testing.assert_array_equal(got.asnumpy(), a[rows, cols] * 2)
    assert net._cached_graphs


def test_setitem():
    a = rand((4, 5))
    x = np.array(a)
    x[1] = 7
    a[1] = 7
    x[:, 2] = np.arange(4)
    a[:, 2] = onp.arange(4)
    x[::2, 1:3] = onp.array([[1, 2]])
    a[::2, 1:3] = onp.array([[1, 2]])
    x[[0, 3]] = -1
    a[[0, 3]] = -1
    x[x > 5] = 0
    a[a > 5] = 0
    x[...] = x * 2
    a[...] = a * 2
    onp.testing.assert_array_equal(x.asnumpy(), a)
    with pytest.raises(ValueError, match="could not broadcast"):
        x[0] = np.zeros((3,))


# ---- linear algebra ------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                                   ((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)), ((0, 4), (4, 2)),
                                   ((3, 0), (0, 2))])
def test_matmul(sa, sb):
    a, b = rand(sa, seed=1), rand(sb, seed=2)
    for dtype in ["float32", "float64", "float16", "int32"]:
        got = np.matmul(np.array(a.astype(dtype)), np.array(b.astype(dtype)))
        want = onp.matmul(a.astype(dtype).astype(onp.float64), b.astype(dtype).astype(onp.float64))
        assert got.shape == want.shape and got.dtype == onp.dtype(dtype)
        onp.testing.assert_allclose(got.asnumpy().astype(onp.float64), want,
                                    rtol=RTOL.get(dtype, 0) * 10, atol=0.05 if dtype == "float16" else 1e-5)


def test_dot_tensordot_outer():
    a, b = rand((2, 3, 4)), rand((5, 4, 6), seed=1)
    onp.testing.assert_allclose(np.dot(np.array(a), np.array(b)).asnumpy(), onp.dot(a, b), rtol=1e-5, atol=1e-5)
    onp.testing.assert_allclose(np.tensordot(np.array(a), np.array(b), axes=([2], [1])).asnumpy(),
                                onp.tensordot(a, b, axes=([2], [1])), rtol=1e-5, atol=1e-5)
    v = rand((3,))
    onp.testing.assert_allclose(np.outer(np.array(v), np.array(v)).asnumpy(), onp.outer(v, v), rtol=1e-6)
    assert np.dot(np.array(v), np.array(v)).shape == ()
    with pytest.raises(ValueError, match="mismatch"):
        np.matmul(np.zeros((2, 3)), np.zeros((2, 3)))


# ---- creation and random -------------------------------------------------------------------
def test_creation():
    assert np.zeros((2, 3)).dtype == onp.float32
    assert np.ones((2,), dtype="int32").asnumpy().tolist() == [1, 1]
    assert np.full((2,), 7, dtype=onp.int64).asnumpy().tolist() == [7, 7]
    onp.testing.assert_allclose(np.arange(1, 2, 0.25).asnumpy(), onp.arange(1, 2, 0.25))
    assert np.arange(5, dtype="int64").asnumpy().tolist() == list(range(5))
    assert np.arange(5, 0, -2).asnumpy().tolist() == [5, 3, 1]
    onp.testing.assert_allclose(np.linspace(0, 1, 7).asnumpy(), onp.linspace(0, 1, 7), rtol=1e-6)
    onp.testing.assert_allclose(np.linspace(0, 1, 4, endpoint=False).asnumpy(), [0, .25, .5, .75])
    onp.testing.assert_array_equal(np.eye(3, 4, k=-1).asnumpy(), onp.eye(3, 4, k=-1))
    assert np.zeros(()).shape == () and np.zeros((0, 2)).shape == (0, 2)
    assert np.array([1, 2]).dtype == onp.float32  # MXNet's default
    assert np.array(onp.array([1, 2])).dtype == onp.int64
    with pytest.raises(ValueError, match="negative dimensions"):
        np.zeros((2, -1))


def test_random_deterministic_and_distribution():
    np.random.seed(7)
    u1, n1 = np.random.uniform(-1, 3, size=(20000,)), np.random.normal(2, 0.5, size=(20000,))
    np.random.seed(7)
    u2, n2 = np.random.uniform(-1, 3, size=(20000,)), np.random.normal(2, 0.5, size=(20000,))
    assert (u1.asnumpy() == u2.asnumpy()).all() and (n1.asnumpy() == n2.asnumpy()).all()
    u = u1.asnumpy()
    assert u.min() >= -1 and u.max() < 3 and abs(u.mean() - 1) < 0.05
    n = n1.asnumpy()
    assert abs(n.mean() - 2) < 0.02 and abs(n.std() - 0.5) < 0.02
    r = np.random.randint(3, 9, size=(1000,)).asnumpy()
    assert r.dtype == onp.int64 and r.min() == 3 and r.max() == 8
    p = np.random.permutation(50).asnumpy()
    assert sorted(p.tolist()) == list(range(50))
    x = np.arange(10)
    np.random.shuffle(x)
    assert sorted(x.asnumpy().tolist()) == list(range(10))
    c = np.random.choice(10, size=(3, 2), replace=False).asnumpy()
    assert c.shape == (3, 2) and len(set(c.ravel().tolist())) == 6
    with pytest.raises(ValueError, match="larger sample"):
        np.random.choice(5, size=6, replace=False)


# ---- devices -------------------------------------------------------------------------------
def test_mixed_devices_error_names_both():
    a = np.ones((2,), device=pymx.cpu(0))
    b = np.ones((2,), device=pymx.cpu(1))
    with pytest.raises(ValueError, match=r"cpu\(0\).*cpu\(1\)"):
        a + b
    assert (b + b).device == pymx.cpu(1)
    assert (a + a).asnumpy().tolist() == [2, 2]


# ---- gradients -----------------------------------------------------------------------------
GRAD_CASES = [
    ("exp", lambda x: np.exp(x), [(3,)]),
    ("log", lambda x: np.log(np.abs(x) + 1), [(3,)]),
    ("tanh", lambda x: np.tanh(x), [(2, 2)]),
    ("sqrt", lambda x: np.sqrt(np.abs(x) + 0.5), [(3,)]),
    ("sin_cos", lambda x: np.sin(x) * np.cos(x), [(3,)]),
    ("arcsin", lambda x: np.arcsin(x * 0.3), [(3,)]),
    ("broadcast_add", lambda a, b: a + b * 2, [(2, 3), (3,)]),
    ("broadcast_mul", lambda a, b: a * b, [(2, 1), (1, 3)]),
    ("divide", lambda a, b: a / (b * b + 1), [(2, 3), (2, 3)]),
    ("power", lambda a, b: np.power(np.abs(a) + 0.5, b), [(3,), (3,)]),
    ("scalar_ops", lambda x: 3 - 2 / (x * x + 1) + x ** 3, [(4,)]),
    ("max_min", lambda a, b: np.maximum(a, b) + np.minimum(a, 0.1), [(5,), (5,)]),
    ("sum_mean", lambda x: np.sum(x, axis=1) * np.mean(x, axis=0).sum(), [(2, 3)]),
    ("max_reduce", lambda x: np.max(x, axis=0), [(3, 2)]),
    ("prod", lambda x: np.prod(x + 3, axis=1), [(2, 3)]),
    ("var_std", lambda x: np.var(x, axis=1) + np.std(x), [(2, 4)]),
    ("transpose", lambda x: np.transpose(x) * np.arange(6).reshape(3, 2), [(2, 3)]),
    ("reshape_tile", lambda x: np.tile(x.reshape(3, 2), (2, 2)) * np.arange(24).reshape(6, 4), [(6,)]),
    ("repeat_flip", lambda x: np.flip(np.repeat(x, 2, axis=0), 0) * np.arange(8).reshape(4, 2), [(2, 2)]),
    ("concat_stack", lambda a, b: np.concatenate([a, b], axis=1) * np.stack([a, a]).sum(), [(2, 2), (2, 1)]),
    ("split", lambda x: np.split(x, [1], axis=1)[1] * 3, [(2, 3)]),
    ("where_clip", lambda x: np.where(x > 0, x * x, np.clip(x, -0.5, 0.5)), [(6,)]),
    ("matmul", lambda a, b: np.matmul(a, b), [(2, 3), (3, 4)]),
    ("batched_matmul", lambda a, b: np.matmul(a, b), [(2, 2, 3), (3, 2)]),
    ("slice", lambda x: x[1:, ::2] * 2, [(3, 4)]),
    ("take", lambda x: x[np.array([0, 2, 0])] * np.arange(3).reshape(3, 1), [(3, 2)]),
    ("broadcast_to", lambda x: np.broadcast_to(x, (3, 2)) * np.arange(6).reshape(3, 2), [(2,)]),
]


@pytest.mark.parametrize("name,fn,shapes", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradient(name, fn, shapes):
    arrays = [rand(s, "float64", seed=i + 1) for i, s in enumerate(shapes)]
    check_grad(fn, *arrays)
