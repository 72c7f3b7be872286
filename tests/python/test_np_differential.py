"""Differential tests: pymx.np against NumPy over a grid of arguments.

Each case calls one function of pymx.np and of NumPy with the same arguments and compares the
shape, the dtype (under pymx's documented dtype rules, see `expected_dtype`) and the values
against a float64 NumPy reference. Where NumPy raises, pymx must raise too, and the process must
stay usable. Inputs cover 0-d, empty (a zero in various axes), size-1 broadcasting, views that
are not contiguous (transposed, stepped slices), negative and tuple axes, keepdims, out=, every
dtype pymx has, mixed-dtype promotion, NaN / inf / -0.0 and Python scalars on either side.

pymx's documented differences from NumPy that the expectations encode (pymx/numpy/*.py
docstrings): float-valued results of integer or bool inputs are float32; an integer array with
a Python float gives float32; array-array promotion is the `add` operator's (np.promote_types:
int8 with uint8 gives int32, pymx having no int16; an integer with a float gives that float).
"""
import itertools
import warnings

import numpy as onp
import pytest

import pymx
from conftest import requires_gpu
from pymx import autograd, np

DTYPES = ["bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64"]
RTOL = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-12}


def sample(shape, dtype, seed=0):
    """Values of `dtype` in `shape`; floats of 6 or more elements start with NaN, inf, -inf,
    -0.0, 0.0 and 0.5."""
    rng = onp.random.default_rng(seed)
    size = int(onp.prod(shape))
    if dtype == "bool":
        values = rng.random(size) > 0.5
    elif dtype == "uint8":
        values = rng.integers(0, 9, size)
    elif dtype.startswith("int"):
        values = rng.integers(-7, 8, size)
    else:
        values = rng.standard_normal(size) * 3
        if size >= 6:
            values[:6] = [onp.nan, onp.inf, -onp.inf, -0.0, 0.0, 0.5]
    return values.astype(dtype).reshape(shape)


def expected_dtype(numpy_dtype, input_dtypes):
    """pymx's result dtype where NumPy's is `numpy_dtype`: a float result of integer or bool
    inputs is float32 (MXNet's default float)."""
    numpy_dtype = onp.dtype(numpy_dtype)
    if numpy_dtype.kind == "f" and all(onp.dtype(d).kind in "biu" for d in input_dtypes):
        return onp.dtype("float32")
    return numpy_dtype


def as_float64(value):
    return value.astype(onp.float64) if isinstance(value, onp.ndarray) else value


def assert_matches(result, reference, dtype, rtol=None, check_zero_sign=True):
    """`result` (pymx) against `reference` (NumPy, float64 where float): shape, dtype, values
    (NaN where NumPy has NaN, infinities and the sign of zeros exact)."""
    result = result.asnumpy()
    reference = onp.asarray(reference)
    assert result.shape == reference.shape
    assert result.dtype == onp.dtype(dtype), (result.dtype, dtype)
    if result.dtype.kind == "f":
        tol = RTOL[result.dtype.name] if rtol is None else rtol
        onp.testing.assert_allclose(result.astype(onp.float64), reference.astype(onp.float64),
                                    rtol=tol, atol=tol, equal_nan=True)
        if check_zero_sign:
            zeros = (reference == 0) & (result == 0)
            assert (onp.signbit(result[zeros]) == onp.signbit(reference[zeros])).all()
    else:
        onp.testing.assert_array_equal(result, reference.astype(result.dtype))


def numpy_result(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# Arithmetic on bools that keeps bool (pymx.np's docstring); the rest gives float32.
BOOL_KEEPING = ("add", "multiply", "maximum", "minimum", "fmax", "fmin", "square", "rint",
                "round", "power", "mod", "remainder", "floor_divide")


def assert_bool_rule(name, result, *host_operands):
    """pymx's rule for arithmetic on bools: a bool result with NumPy's truth values, or float32
    computed as NumPy computes from float32 operands."""
    numpy_fn = getattr(onp, name)
    if name in BOOL_KEEPING:
        expected = numpy_result(numpy_fn, *host_operands).astype(bool)
        assert result.dtype == onp.bool_, (name, result.dtype)
    else:
        expected = numpy_result(numpy_fn, *[onp.float32(x) if isinstance(x, bool) else
                                            x.astype(onp.float32) for x in host_operands])
        assert result.dtype == onp.float32, (name, result.dtype)
    onp.testing.assert_array_equal(result.asnumpy(), expected)


def assert_both_raise(pymx_call, numpy_call):
    """NumPy raises, so pymx must raise a clear exception, and stay usable after it."""
    with pytest.raises(Exception):
        numpy_result(numpy_call)
    with pytest.raises((ValueError, TypeError, IndexError, RuntimeError)) as info:
        result = pymx_call()
        for array in result if isinstance(result, (list, tuple)) else [result]:
            array.asnumpy()
    assert str(info.value)
    assert (np.ones(3) + 1).asnumpy().tolist() == [2.0, 2.0, 2.0]


# ---------------------------------------------------------------------------------------------
# Unary elementwise functions
# ---------------------------------------------------------------------------------------------

FLOAT_UNARY = ["exp", "log", "log1p", "expm1", "log2", "log10", "sqrt", "cbrt", "sin", "cos",
               "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
               "arctanh", "deg2rad", "rad2deg", "degrees", "radians", "fabs", "i0", "spacing"]
SAME_UNARY = ["abs", "absolute", "negative", "positive", "sign", "square", "floor", "ceil",
              "trunc", "fix", "rint", "round"]
BOOL_UNARY = ["isnan", "isinf", "isfinite", "logical_not", "signbit", "isposinf", "isneginf"]
# (shape, view): a pymx view is made by the same indexing on both sides.
LAYOUTS = [((), None), ((0,), None), ((3, 0), None), ((4, 5), None),
           ((6, 8), lambda x: x.T[::2]), ((5, 7), lambda x: x[1::2, ::-3])]


def _unary_case(name, dtype, shape, view):
    host = sample(shape, dtype)
    device = np.array(host)
    if view is not None:
        host, device = view(host), view(device)
    return host, device


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: str(l[0]) + ("v" if l[1] else ""))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", FLOAT_UNARY + SAME_UNARY + BOOL_UNARY)
def test_unary(name, dtype, layout):
    host, device = _unary_case(name, dtype, *layout)
    numpy_fn, pymx_fn = getattr(onp, name), getattr(np, name)
    if dtype == "bool" and name in ("negative", "positive", "sign"):  # NumPy has no bool loop
        assert_both_raise(lambda: pymx_fn(device), lambda: numpy_fn(host))
        return
    if dtype == "bool" and name in ("square", "rint", "round", "spacing", "fabs"):
        assert_bool_rule(name, pymx_fn(device), host)
        return
    if name == "rint" and dtype in ("int8", "uint8", "int32", "int64"):  # keeps the dtype
        result = pymx_fn(device)
        assert result.dtype == onp.dtype(dtype), result.dtype
        onp.testing.assert_array_equal(result.asnumpy(), numpy_fn(host))
        return
    if name in ("spacing", "i0") and dtype != "float64" and dtype in ("float16", "float32"):
        reference = numpy_result(numpy_fn, host)  # spacing depends on the dtype itself
    else:
        reference = numpy_result(numpy_fn, as_float64(host))
    dtype_out = expected_dtype(numpy_result(numpy_fn, host).dtype, [dtype])
    rtol = 1e-2 if dtype == "float16" or (dtype in ("int8", "uint8", "bool") and
                                            name in FLOAT_UNARY) else None
    assert_matches(pymx_fn(device), reference, dtype_out, rtol=rtol)


def test_abs_of_negative_zero_is_positive_zero():
    for dtype in ("float16", "float32", "float64"):
        result = np.abs(np.array([-0.0, -2.0, 0.0], dtype=dtype)).asnumpy()
        assert not onp.signbit(result).any(), (dtype, result)
    assert not onp.signbit(np.copysign(np.array([-0.0]), 1.0).asnumpy()).any()


# ---------------------------------------------------------------------------------------------
# Binary elementwise functions, operators and promotion
# ---------------------------------------------------------------------------------------------

ARITHMETIC = ["add", "subtract", "multiply", "maximum", "minimum", "fmax", "fmin", "mod",
              "remainder", "floor_divide", "power"]
FLOAT_BINARY = ["divide", "true_divide", "arctan2", "hypot"]
COMPARISON = ["equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
              "logical_and", "logical_or", "logical_xor"]
SHAPE_PAIRS = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (2, 3)), ((0, 3), (1, 3)),
               ((2, 0, 1), (5,))]


def _binary_expected(name, d1, d2):
    if name in COMPARISON:
        return onp.dtype(bool)
    promoted = onp.dtype(np.promote_types(d1, d2))
    if name in FLOAT_BINARY and promoted.kind != "f":
        return onp.dtype("float32")
    return promoted


def _binary_operands(name, d1, d2, s1, s2):
    a, b = sample(s1, d1, seed=1), sample(s2, d2, seed=2)
    if name in ("power",) and onp.dtype(d2).kind in "iu":
        b = onp.abs(b)  # integers to negative integer powers raise in NumPy
    return a, b


def _binary_reference(name, a, b):
    """NumPy's `name` of a and b first converted to pymx's promoted dtype (as the operators
    compute), in float64 where that dtype is a float."""
    computed = onp.dtype(np.promote_types(a.dtype, b.dtype))
    a, b = a.astype(computed), b.astype(computed)
    return numpy_result(getattr(onp, name), *((as_float64(a), as_float64(b))
                                              if computed.kind == "f" or name in FLOAT_BINARY
                                              else (a, b)))


# every dtype on every shape pair; mixed dtypes (promotion) on one broadcasting pair
BINARY_GRID = [(d, d, shapes) for d in DTYPES for shapes in SHAPE_PAIRS] + \
    [(d1, d2, SHAPE_PAIRS[1]) for d1, d2 in itertools.permutations(DTYPES, 2)]


@pytest.mark.parametrize("d1,d2,shapes", BINARY_GRID, ids=str)
@pytest.mark.parametrize("name", ARITHMETIC + FLOAT_BINARY + COMPARISON)
def test_binary(name, d1, d2, shapes):
    if name == "subtract" and d1 == d2 == "bool":  # NumPy has no boolean subtract
        a, b = sample(shapes[0], "bool"), sample(shapes[1], "bool", seed=1)
        assert_both_raise(lambda: np.array(a) - np.array(b), lambda: onp.subtract(a, b))
        return
    if name in ARITHMETIC + ["divide", "true_divide"] and "bool" in (d1, d2) and \
            onp.dtype(np.promote_types(d1, d2)) == onp.bool_ and name not in ("maximum",
                                                                              "minimum"):
        a, b = _binary_operands(name, d1, d2, *shapes)
        assert_bool_rule(name, getattr(np, name)(np.array(a), np.array(b)), a, b)
        return
    a, b = _binary_operands(name, d1, d2, *shapes)
    dtype = _binary_expected(name, d1, d2)
    result = getattr(np, name)(np.array(a), np.array(b))
    reference = _binary_reference(name, a, b)
    # maximum / minimum of 0.0 and -0.0 may give either zero, in NumPy too
    assert_matches(result, reference, dtype, rtol=1e-2 if "float16" in (d1, d2) else None,
                   check_zero_sign=name not in ("maximum", "minimum", "fmax", "fmin"))


SCALARS = [2, -3, 2.5, True, -0.0, float("nan")]


@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "true_divide", "maximum",
                                  "mod", "floor_divide", "greater", "equal"])
def test_binary_scalar_either_side(name, dtype, scalar):
    a = sample((3, 4), dtype)
    if dtype == "bool" and name == "subtract" and isinstance(scalar, bool):
        assert_both_raise(lambda: np.subtract(np.array(a), scalar), lambda: a - scalar)
        assert_both_raise(lambda: scalar - np.array(a), lambda: scalar - a)
        return
    if dtype == "bool" and name in ("mod", "floor_divide") and isinstance(scalar, bool):
        assert_bool_rule(name, getattr(np, name)(np.array(a), scalar), a, scalar)
        assert_bool_rule(name, getattr(np, name)(scalar, np.array(a)), scalar, a)
        return
    if dtype == "uint8" and isinstance(scalar, int) and scalar < 0:
        pytest.skip("NumPy 2 refuses a negative Python int beside uint8 (NEP 50)")
    for left, right, x1, x2 in ((np.array(a), scalar, a, scalar), (scalar, np.array(a), scalar, a)):
        dtype_out = onp.dtype(np.result_type(left, right))
        if name in COMPARISON + ["greater"]:
            dtype_out = onp.dtype(bool)
        elif name == "true_divide" and dtype_out.kind != "f":
            dtype_out = onp.dtype("float32")
        reference = numpy_result(getattr(onp, name),
                                 *[x.astype(dtype_out if dtype_out.kind != "b" else x.dtype)
                                   if isinstance(x, onp.ndarray) else x for x in (x1, x2)])
        if dtype_out.kind == "f":
            reference = numpy_result(getattr(onp, name), as_float64(x1), as_float64(x2))
        assert_matches(getattr(np, name)(left, right), reference, dtype_out,
                       rtol=1e-2 if dtype == "float16" else None,
                       check_zero_sign=name != "maximum")


def test_operators_match_functions():
    a, b = sample((3, 4), "float32"), sample((4,), "float32", seed=3)
    x, y = np.array(a), np.array(b)
    for op, fn in (("__add__", onp.add), ("__sub__", onp.subtract), ("__mul__", onp.multiply),
                   ("__truediv__", onp.true_divide), ("__mod__", onp.mod),
                   ("__floordiv__", onp.floor_divide), ("__pow__", onp.power),
                   ("__lt__", onp.less), ("__ge__", onp.greater_equal), ("__eq__", onp.equal)):
        assert_matches(getattr(x, op)(y), numpy_result(fn, a.astype("f8"), b.astype("f8")),
                       "bool" if fn in (onp.less, onp.greater_equal, onp.equal) else "float32")
    assert_matches(-x, -a, "float32")
    assert_matches(2 - x, 2 - a.astype("f8"), "float32")
    assert_matches(x.T @ x, numpy_result(onp.matmul, a.T.astype("f8"), a.astype("f8")), "float32",
                   rtol=1e-5)


def test_bool_scalar_beside_bool_array_stays_bool():
    host = onp.array([True, False, True])
    for result, reference in ((np.array(host) + True, host + True),
                              (False * np.array(host), False * host),
                              (np.maximum(np.array(host), onp.True_), onp.maximum(host, True)),
                              (np.array(host) + 2, host + 2)):
        assert_matches(result, reference, reference.dtype)


@pytest.mark.parametrize("decimals", [-2, -1, 0, 2])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64"])
def test_round_of_integers_keeps_the_dtype(dtype, decimals):
    host = onp.array([125, 115, 15, 25, 5, 7, 0, 99], dtype=dtype)
    if dtype != "uint8":
        host[-1] = -115
    assert_matches(np.round(np.array(host), decimals), onp.round(host, decimals), dtype)


def test_clip_without_bounds_copies():
    host = sample((3, 4), "float32")
    assert_matches(np.clip(np.array(host), None, None), host, "float32")
    out = np.zeros((3, 4))
    assert np.clip(np.array(host), None, None, out=out) is out
    assert_matches(out, host, "float32")


def test_mod_zero_takes_the_divisor_sign():
    x = onp.array([-0.0, 2.0, -3.0, 3.0, 0.0])
    y = onp.array([3.0, -2.0, 3.0, -3.0, -1.0])
    for dtype in ("float16", "float32", "float64"):
        assert_matches(np.mod(np.array(x, dtype=dtype), np.array(y, dtype=dtype)),
                       onp.mod(x, y), dtype)
        assert_matches(np.array(x, dtype=dtype) % -2.0, onp.mod(x, -2.0), dtype)


def test_floor_divide_goes_through_the_remainder():
    # NumPy's floor division is divmod's: inf // x is NaN, -tiny // inf is -1, and the sign of
    # a zero quotient is that of a / b.
    x = onp.array([onp.inf, -onp.inf, -1e-3, 1e-3, 1.0, -0.0, 7.0, -7.0, 0.3, 5.0])
    y = onp.array([2.5, 3.0, onp.inf, -onp.inf, 0.0, 3.0, -2.0, 2.0, 0.1, onp.nan])
    for dtype in ("float16", "float32", "float64"):
        host_x, host_y = x.astype(dtype), y.astype(dtype)
        reference = numpy_result(onp.floor_divide, host_x, host_y)
        assert_matches(np.floor_divide(np.array(host_x), np.array(host_y)), reference, dtype)
        assert_matches(np.array(host_x) // 2.5, numpy_result(onp.floor_divide, host_x,
                                                             onp.array(2.5, dtype)), dtype)


def test_sign_of_nan_is_nan():
    for dtype in ("float16", "float32", "float64"):
        result = np.sign(np.array([onp.nan, -onp.nan, -2.0, 0.0, -0.0, 3.0], dtype=dtype))
        assert_matches(result, [onp.nan, onp.nan, -1.0, 0.0, 0.0, 1.0], dtype)


@pytest.mark.parametrize("s1,s2", [((3,), (4,)), ((2, 3), (3, 2)), ((0, 2), (3, 2))])
def test_binary_shape_mismatch_raises(s1, s2):
    a, b = onp.ones(s1, onp.float32), onp.ones(s2, onp.float32)
    assert_both_raise(lambda: np.add(np.array(a), np.array(b)), lambda: onp.add(a, b))


def test_out_argument_is_written_and_returned():
    a, b = sample((3, 4), "float32"), sample((3, 4), "float32", seed=5)
    out = np.zeros((3, 4))
    assert np.add(np.array(a), np.array(b), out=out) is out
    assert_matches(out, a.astype("f8") + b, "float32")
    out = np.zeros((3,))
    assert np.sum(np.array(a), axis=1, out=out) is out
    assert_matches(out, numpy_result(onp.sum, a.astype("f8"), axis=1), "float32", rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------

REDUCTIONS = ["sum", "prod", "mean", "max", "min", "all", "any", "std", "var", "argmax",
              "argmin"]
AXES = [None, 0, -1, (0, 2), (-1, 0), ()]
REDUCE_SHAPES = [(2, 3, 4), (2, 0, 3), (0, 3, 1)]


def _reduction_expected(name, dtype, numpy_dtype):
    if name in ("argmax", "argmin"):
        return onp.dtype("int64")
    if name in ("all", "any"):
        return onp.dtype(bool)
    if name in ("sum", "prod") and dtype in ("bool", "int8", "uint8", "int32"):
        return onp.dtype("int64")  # NumPy's uint64 for uint8: pymx has no uint64 (documented)
    return expected_dtype(numpy_dtype, [dtype])


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("shape", REDUCE_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["bool", "int32", "uint8", "float16", "float32", "float64"])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction(name, dtype, shape, axis, keepdims):
    if name in ("argmax", "argmin") and not (axis is None or isinstance(axis, int)):
        pytest.skip("argmax / argmin take one axis")
    if name == "prod" and dtype == "float16" and axis is None:
        pytest.skip("the float64 reference does not overflow where float16 does")
    host = sample(shape, dtype)
    if dtype.startswith("float"):
        host = onp.abs(onp.nan_to_num(host, nan=1.5, posinf=2.0, neginf=-2.0)) + 0.5
    numpy_fn, pymx_fn = getattr(onp, name), getattr(np, name)

    def numpy_call(values):
        return numpy_result(numpy_fn, values, axis=axis, keepdims=keepdims)

    try:
        numpy_dtype = numpy_call(host).dtype
    except ValueError:  # zero-size max / min / argmax: NumPy refuses, so must pymx
        assert_both_raise(lambda: pymx_fn(np.array(host), axis=axis, keepdims=keepdims),
                          lambda: numpy_call(host))
        return
    dtype_out = _reduction_expected(name, dtype, numpy_dtype)
    reference = numpy_call(host.astype("f8") if dtype_out.kind == "f" else host)
    rtol = {"float16": 5e-3, "float32": 1e-5}.get(dtype_out.name, None)
    assert_matches(pymx_fn(np.array(host), axis=axis, keepdims=keepdims), reference, dtype_out,
                   rtol=rtol)


def test_reduction_of_strided_view_and_nan():
    host = sample((6, 8), "float32")
    view = np.array(host).T[::2, 1:]
    for name in ("sum", "max", "min", "mean"):
        assert_matches(getattr(np, name)(view, axis=1),
                       numpy_result(getattr(onp, name), host.T[::2, 1:].astype("f8"), axis=1),
                       "float32", rtol=1e-5)


@pytest.mark.parametrize("axis", [3, -4, (0, 0)], ids=str)
def test_reduction_bad_axis_raises(axis):
    host = onp.ones((2, 3, 4), onp.float32)
    assert_both_raise(lambda: np.sum(np.array(host), axis=axis), lambda: onp.sum(host, axis))


# ---------------------------------------------------------------------------------------------
# Shapes, joins, indexing, sorting
# ---------------------------------------------------------------------------------------------

SHAPE_CASES = [
    ("reshape", (2, 3, 4), dict(newshape=(4, -1)), dict(shape=(4, -1))),
    ("reshape", (0, 3), dict(newshape=(3, 0)), dict(shape=(3, 0))),
    ("transpose", (2, 3, 4), dict(axes=(2, 0, 1)), None),
    ("transpose", (), dict(), None),
    ("swapaxes", (2, 3, 4), dict(axis1=-1, axis2=0), None),
    ("moveaxis", (2, 3, 4), dict(source=(0, -1), destination=(-1, 0)), None),
    ("expand_dims", (2, 3), dict(axis=(0, -1)), None),
    ("squeeze", (1, 3, 1), dict(axis=-1), None),
    ("squeeze", (1, 0, 1), dict(), None),
    ("flip", (2, 3, 4), dict(axis=(0, -1)), None),
    ("flip", (0, 3), dict(axis=None), None),
    ("tile", (2, 3), dict(reps=(2, 1, 2)), None),
    ("tile", (0, 2), dict(reps=3), None),
    ("repeat", (2, 3), dict(repeats=2, axis=-1), None),
    ("repeat", (2, 0), dict(repeats=3, axis=None), None),
    ("broadcast_to", (3, 1), dict(shape=(2, 3, 4)), None),
    ("ravel", (2, 0, 3), dict(), None),
    ("sort", (3, 5), dict(axis=0), None),
    ("sort", (0, 4), dict(axis=-1), None),
    # pymx's argsort is always stable (documented)
    ("argsort", (3, 5), dict(axis=None), dict(axis=None, kind="stable")),
    ("cumsum", (3, 4), dict(axis=-1), None),
    ("cumsum", (), dict(axis=None), None),
    ("clip", (3, 4), dict(a_min=-1, a_max=2), None),
    ("take", (3, 4), dict(indices=[[2, -1], [0, 0]], axis=1), None),
    ("take", (3, 4), dict(indices=[7, -13], axis=0, mode="clip"), None),
    ("take", (3, 4), dict(indices=[7, -13], axis=-1, mode="wrap"), None),
]


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float16", "float64"])
@pytest.mark.parametrize("name,shape,kwargs,numpy_kwargs", SHAPE_CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(SHAPE_CASES)])
def test_shape_functions(name, shape, kwargs, numpy_kwargs, dtype):
    host = sample(shape, dtype)
    if name in ("sort", "argsort"):
        host = sample(shape, dtype, seed=7)
    if name == "clip" and dtype == "bool":
        pytest.skip("clip of bool with numbers promotes in NumPy")
    reference = numpy_result(getattr(onp, name), host, **(numpy_kwargs or kwargs))
    dtype_out = reference.dtype
    rtol = 0
    if name == "cumsum" and dtype == "bool":
        dtype_out = onp.dtype("int64")
    if name == "cumsum" and dtype == "float16":  # summed in float32, rounded once (documented)
        reference = numpy_result(onp.cumsum, host.astype("f8"), **kwargs)
        rtol = RTOL["float16"]
    result = getattr(np, name)(np.array(host), **kwargs)
    assert_matches(result, reference, dtype_out, rtol=rtol)
    # the same function of a non-contiguous view
    if len(shape) == 2 and name not in ("reshape", "take", "tile"):
        big = sample((shape[1] * 2, shape[0] + 1), dtype, seed=9)
        host_view, device_view = big[::2, :shape[0]].T, np.array(big)[::2, :shape[0]].T
        assert_matches(getattr(np, name)(device_view, **kwargs),
                       numpy_result(getattr(onp, name), host_view, **(numpy_kwargs or kwargs)),
                       dtype_out, rtol=0 if name != "cumsum" else None)


BAD_SHAPE_CALLS = [
    ("reshape", (2, 3), dict(newshape=(4, 2)), dict(shape=(4, 2))),
    ("transpose", (2, 3), dict(axes=(0, 0)), None),
    ("swapaxes", (2, 3), dict(axis1=2, axis2=0), None),
    ("expand_dims", (2, 3), dict(axis=3), None),
    ("squeeze", (2, 3), dict(axis=0), None),
    ("broadcast_to", (3, 2), dict(shape=(3, 3)), None),
    ("take", (3, 4), dict(indices=[4], axis=1), None),
    ("take", (3, 4), dict(indices=[0], axis=2), None),
    ("sort", (3, 4), dict(axis=2), None),
    ("repeat", (2, 3), dict(repeats=-1), None),
]


@pytest.mark.parametrize("name,shape,kwargs,numpy_kwargs", BAD_SHAPE_CALLS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_SHAPE_CALLS)])
def test_shape_functions_raise_where_numpy_raises(name, shape, kwargs, numpy_kwargs):
    host = onp.ones(shape, onp.float32)
    assert_both_raise(lambda: getattr(np, name)(np.array(host), **kwargs),
                      lambda: getattr(onp, name)(host, **(numpy_kwargs or kwargs)))


JOIN_CASES = [("concatenate", [(2, 3), (4, 3)], dict(axis=0)),
              ("concatenate", [(2, 3), (2, 0)], dict(axis=-1)),
              ("concatenate", [(2, 3), (3,)], dict(axis=None)),
              ("stack", [(2, 3), (2, 3)], dict(axis=-1)),
              ("stack", [(0, 3), (0, 3)], dict(axis=1)),
              ("vstack", [(3,), (2, 3)], dict()),
              ("hstack", [(2,), (0,)], dict()),
              ("column_stack", [(3,), (3, 2)], dict())]


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int32", "float16"),
                                    ("int8", "uint8"), ("bool", "int64")], ids=str)
@pytest.mark.parametrize("name,shapes,kwargs", JOIN_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(JOIN_CASES)])
def test_joins(name, shapes, kwargs, dtypes):
    hosts = [sample(s, d, seed=i) for i, (s, d) in enumerate(zip(shapes, dtypes))]
    reference = numpy_result(getattr(onp, name), hosts, **kwargs)
    result = getattr(np, name)([np.array(h) for h in hosts], **kwargs)
    assert_matches(result, reference, np.promote_types(*dtypes), rtol=0)


@pytest.mark.parametrize("sections,axis", [(3, 0), ([1, 4], 1), ([0, 0, 9], -1), (2, -2)],
                         ids=str)
def test_split(sections, axis):
    host = sample((6, 5), "float32")
    if isinstance(sections, int) and host.shape[axis] % sections:
        assert_both_raise(lambda: np.split(np.array(host), sections, axis=axis),
                          lambda: onp.split(host, sections, axis=axis))
        return
    results = np.split(np.array(host), sections, axis=axis)
    references = onp.split(host, sections, axis=axis)
    assert len(results) == len(references)
    for result, reference in zip(results, references):
        assert_matches(result, reference, "float32", rtol=0)


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), ()),
                                    ((0, 2), (1, 2), (2,))], ids=str)
def test_where(shapes):
    condition = sample(shapes[0], "bool")
    x, y = sample(shapes[1], "float32", seed=1), sample(shapes[2], "float32", seed=2)
    assert_matches(np.where(np.array(condition), np.array(x), np.array(y)),
                   onp.where(condition, x.astype("f8"), y.astype("f8")), "float32", rtol=0)


# Functions of one (2, 3, 4) array holding a NaN and negative values, each with arguments that
# exercise its axes, offsets or options; `m` is NumPy or pymx.np.
FUNCTION_CASES = {
    "nansum": lambda m, a: m.nansum(a, axis=(0, -1)),
    "nanmean": lambda m, a: m.nanmean(a, axis=1, keepdims=True),
    "nanmax": lambda m, a: m.nanmax(a, axis=-1),
    "nanargmin": lambda m, a: m.nanargmin(a, axis=0),
    "median": lambda m, a: m.median(a[1], axis=(0, 1)),
    "nanmedian": lambda m, a: m.nanmedian(a, axis=1),
    "quantile": lambda m, a: m.quantile(a[1], 0.3),
    "ptp": lambda m, a: m.ptp(a, axis=1),
    "cumprod": lambda m, a: m.cumprod(a / 8, axis=-1),
    "diff": lambda m, a: m.diff(a, n=2, axis=-1),
    "ediff1d": lambda m, a: m.ediff1d(a),
    "trapezoid": lambda m, a: m.trapezoid(a, axis=1),
    "roll": lambda m, a: m.roll(a, -5),
    "roll_axes": lambda m, a: m.roll(a, (1, -2), axis=(0, 2)),
    "rot90": lambda m, a: m.rot90(a, k=3, axes=(2, 0)),
    "atleast_3d": lambda m, a: m.atleast_3d(a[0, 0]),
    "diagonal": lambda m, a: m.diagonal(a, offset=-1, axis1=2, axis2=1),
    "diag": lambda m, a: m.diag(a[0], k=1),
    "tril": lambda m, a: m.tril(a, k=-1),
    "triu": lambda m, a: m.triu(a, k=2),
    "trace": lambda m, a: m.trace(a, offset=1, axis1=2, axis2=0),
    "trace_nan_off_diagonal": lambda m, a: m.trace(a, offset=1, axis1=1, axis2=2),
    "trace_empty_diagonal": lambda m, a: m.trace(a, offset=9),
    "argmax_nan": lambda m, a: m.argmax(a, axis=None),
    "max_nan": lambda m, a: m.max(a, axis=2),
    "count_nonzero": lambda m, a: m.count_nonzero(a, axis=(0, 1)),
    "tensordot": lambda m, a: m.tensordot(a[1], a[1], axes=([0], [0])),
    "inner": lambda m, a: m.inner(a[1], a[1, 0]),
    "outer": lambda m, a: m.outer(a[0, 0], a[1, 1]),
    "kron": lambda m, a: m.kron(a[0], a[1, :2, :2]),
    "cross": lambda m, a: m.cross(a[..., :3], a[..., 1:]),
    "pad_constant": lambda m, a: m.pad(a, ((0, 1), (2, 0), (1, 1)), mode="constant",
                                       constant_values=3),
    "pad_reflect": lambda m, a: m.pad(a, 2, mode="reflect"),
    "pad_edge": lambda m, a: m.pad(a, ((1, 1), (0, 0), (2, 3)), mode="edge"),
    "delete": lambda m, a: m.delete(a, [0, 2], axis=-1),
    "insert": lambda m, a: m.insert(a, 1, 5.0, axis=1),
    "append": lambda m, a: m.append(a, a, axis=0),
    "resize": lambda m, a: m.resize(a, (5, 7)),
    "nan_to_num": lambda m, a: m.nan_to_num(a, nan=-1.0),
    "isclose": lambda m, a: m.isclose(a, a + 1e-6),
    "array_split": lambda m, a: m.array_split(a, 3, axis=-1),
    "dsplit": lambda m, a: m.dsplit(a, [1, 3]),
    "dstack": lambda m, a: m.dstack([a[0], a[1]]),
    "partition": lambda m, a: m.partition(a[1], 2, axis=-1),
    "digitize": lambda m, a: m.digitize(a[1], m.array([-5.0, 0.0, 5.0])),
    "cov": lambda m, a: m.cov(a[1]),
    "round_decimals": lambda m, a: m.round(a / 3, 2),
    "sum_initial": lambda m, a: m.sum(a, axis=1, initial=5),
    "take_along_axis": lambda m, a: m.take_along_axis(a, m.argsort(a, axis=1), axis=1),
    "matmul_broadcast": lambda m, a: m.matmul(a, m.swapaxes(a, 1, 2)[:1]),
    "matmul_1d": lambda m, a: m.matmul(a[1, 0], a[1].T),
    "dot_nd": lambda m, a: m.dot(a[1:], a[1].T),
}


@pytest.mark.parametrize("name", list(FUNCTION_CASES))
def test_more_functions(name):
    host = onp.arange(24, dtype=onp.float32).reshape(2, 3, 4) - 7.5
    host[0, 0, 0] = onp.nan
    results = FUNCTION_CASES[name](np, np.array(host))
    references = numpy_result(FUNCTION_CASES[name], onp, host.astype(onp.float64))
    if not isinstance(references, (list, tuple)):
        results, references = [results], [references]
    assert len(results) == len(references)
    for result, reference in zip(results, references):
        reference = onp.asarray(reference)
        dtype = "float32" if reference.dtype == onp.float64 else reference.dtype
        assert_matches(result, reference, dtype, rtol=1e-5)


# ndarray methods, operators and indexing of the same array (`a` is a NumPy or a pymx array)
METHOD_CASES = {
    "sum": lambda a: a.sum(axis=(0, 2), keepdims=True),
    "mean": lambda a: a.mean(axis=-1),
    "max": lambda a: a.max(axis=1),
    "argmax": lambda a: a.argmax(axis=-1),
    "argsort": lambda a: a.argsort(axis=1),
    "reshape_args": lambda a: a.reshape(4, -1),
    "transpose_args": lambda a: a.transpose(2, 0, 1),
    "T": lambda a: a.T,
    "flatten": lambda a: a.flatten(),
    "flatten_of_view": lambda a: a.T[::2].flatten(),
    "ravel": lambda a: a.ravel(),
    "diagonal": lambda a: a.diagonal(1, 2, 1),
    "trace": lambda a: a.trace(-1),
    "squeeze": lambda a: a[:1].squeeze(0),
    "astype": lambda a: a.astype("int32"),
    "clip": lambda a: a.clip(-1, 1),
    "cumsum": lambda a: a.cumsum(axis=1),
    "std": lambda a: a.std(axis=0, ddof=1),
    "any": lambda a: (a > 10).any(axis=1),
    "repeat": lambda a: a.repeat(2, axis=1),
    "take": lambda a: a.take([0, 2], axis=1),
    "dot": lambda a: a[1].dot(a[1].T),
    "abs": lambda a: abs(a),
    "pow_negative": lambda a: a ** -1,
    "rpow": lambda a: 2 ** a,
    "rtruediv": lambda a: 1 / a,
    "rfloordiv": lambda a: 7 // a,
    "rmod": lambda a: 7 % a,
    "and": lambda a: (a > 0) & (a < 5),
    "xor": lambda a: (a > 0) ^ (a < 5),
    "invert": lambda a: ~(a > 0),
    "getitem_negative_steps": lambda a: a[::-1, ::-2],
    "getitem_ellipsis": lambda a: a[..., 1],
    "getitem_newaxis": lambda a: a[None, :, None, 1:],
    "getitem_negative": lambda a: a[-1, -2],
    "getitem_mask": lambda a: a[a > 0],
    "getitem_int_array": lambda a: a[[1, 0, 1]],
    "getitem_int_arrays": lambda a: a[[[0], [1]], [0, 2]],
    "getitem_mixed": lambda a: a[1, [0, 2], ::2],
    "getitem_empty": lambda a: a[:, 5:],
}


@pytest.mark.parametrize("name", list(METHOD_CASES))
def test_methods_and_indexing(name):
    host = onp.arange(24, dtype=onp.float32).reshape(2, 3, 4) - 7.5
    host[0, 0, 0] = onp.nan
    result = METHOD_CASES[name](np.array(host))
    reference = onp.asarray(numpy_result(METHOD_CASES[name], host.astype(onp.float64)))
    dtype = "float32" if reference.dtype == onp.float64 else reference.dtype
    assert_matches(result, reference, dtype, rtol=1e-5)


@pytest.mark.parametrize("index", [2, (slice(None), -4), (0, 0, 0, 0), slice(None, None, 0)],
                         ids=str)
def test_bad_index_raises(index):
    host = onp.zeros((2, 3, 4), onp.float32)
    assert_both_raise(lambda: np.array(host)[index], lambda: host[index])


# ---------------------------------------------------------------------------------------------
# take with mode='raise' on empty results (NumPy checks indices only when rows before the axis
# exist) and correlate
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,indices,axis", [((0, 3), [5], 1), ((0, 0), [0], 1),
                                                ((0, 2, 3), [[7, -9]], 2), ((3,), [], 0),
                                                ((0,), [], 0)], ids=str)
def test_take_raise_skips_the_check_without_rows(shape, indices, axis):
    host = onp.zeros(shape, onp.float32)
    index = onp.array(indices, onp.int64)
    assert_matches(np.take(np.array(host), np.array(index), axis=axis),
                   onp.take(host, index, axis=axis), "float32", rtol=0)


@pytest.mark.parametrize("shape,indices,axis", [((3, 0), [5], 0), ((2, 3, 0), [7], 1),
                                                ((2, 0, 0), [5], 1), ((0, 3), [5], 0),
                                                ((2, 0), [0], 1)], ids=str)
def test_take_raise_still_checks_with_rows(shape, indices, axis):
    host = onp.zeros(shape, onp.float32)
    index = onp.array(indices, onp.int64)
    assert_both_raise(lambda: np.take(np.array(host), np.array(index), axis=axis),
                      lambda: onp.take(host, index, axis=axis))


@pytest.mark.parametrize("mode", ["valid", "same", "full"])
@pytest.mark.parametrize("n_a,n_v", [(7, 3), (8, 4), (3, 7), (4, 8), (5, 5), (1, 1), (1, 6)])
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float64", "int32"),
                                    ("int32", "int32"), ("int8", "uint8"), ("float16", "float16"),
                                    ("bool", "bool")], ids=str)
def test_correlate(n_a, n_v, mode, dtypes):
    a, v = sample((n_a,), dtypes[0], seed=1), sample((n_v,), dtypes[1], seed=2)
    if dtypes[0].startswith("float"):
        a = onp.nan_to_num(a, nan=1.0, posinf=2.0, neginf=-2.0)
    dtype = onp.dtype(np.promote_types(*dtypes))
    reference = onp.correlate(a.astype(dtype if dtype.kind != "f" else "f8"),
                              v.astype(dtype if dtype.kind != "f" else "f8"), mode)
    assert_matches(np.correlate(np.array(a), np.array(v), mode), reference, dtype,
                   rtol=1e-2 if dtype == onp.float16 else 1e-5)


def test_correlate_long_inputs_in_linear_memory():
    # The window matrix of 'full' would hold 202_000 * 2_000 values (1.6 GB of float32, and
    # twice that in int64 positions); the operator needs the inputs and the output only.
    a = onp.random.default_rng(0).standard_normal(200_000).astype(onp.float32)
    v = onp.random.default_rng(1).standard_normal(2_000).astype(onp.float32)
    for mode in ("valid", "same", "full"):
        result = np.correlate(np.array(a), np.array(v), mode)
        reference = onp.correlate(a[:20_000].astype("f8"), v.astype("f8"), "full" if mode ==
                                  "full" else "valid")
        expected_length = {"valid": 198_001, "same": 200_000, "full": 201_999}[mode]
        assert result.shape == (expected_length,)
        head = {"valid": 0, "same": 1000, "full": 0}[mode]  # same: where valid[0] lands
        onp.testing.assert_allclose(result[head:head + 10_000].asnumpy(), reference[:10_000],
                                    rtol=1e-3, atol=1e-3)


def test_correlate_gradient_matches_finite_differences():
    a = sample((6,), "float64", seed=3)
    a = onp.nan_to_num(a, nan=1.0, posinf=2.0, neginf=-2.0)
    v = onp.array([0.5, -1.0, 2.0])
    weights = onp.random.default_rng(4).standard_normal(8)
    for mode in ("valid", "same", "full"):
        count = {"valid": 4, "same": 6, "full": 8}[mode]
        x, w = np.array(a), np.array(v)
        x.attach_grad()
        w.attach_grad()
        with autograd.record():
            loss = np.sum(np.correlate(x, w, mode) * np.array(weights[:count]))
        loss.backward()

        def value(a_, v_):
            return float((onp.correlate(a_, v_, mode) * weights[:count]).sum())

        for arg, grad in ((0, x.grad.asnumpy()), (1, w.grad.asnumpy())):
            base = [a.copy(), v.copy()]
            numeric = onp.zeros_like(base[arg])
            for i in range(base[arg].size):
                up, down = [b.copy() for b in base], [b.copy() for b in base]
                up[arg][i] += 1e-6
                down[arg][i] -= 1e-6
                numeric[i] = (value(*up) - value(*down)) / 2e-6
            onp.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# The GPU twins of the kernels fixed here against the CPU
# ---------------------------------------------------------------------------------------------

def _on_both_devices(fn, *host_arrays):
    """fn's result from the arrays on gpu(0) and on cpu(0), both as NumPy arrays."""
    return [fn(*[np.array(h, device=device) for h in host_arrays]).asnumpy()
            for device in (pymx.device.gpu(0), pymx.device.cpu(0))]


@requires_gpu
def test_gpu_elementwise_fixes_match_cpu():
    x = onp.array([onp.inf, -onp.inf, -1e-3, 1e-3, 1.0, -0.0, 7.0, -7.0, 0.3, onp.nan, 0.0])
    y = onp.array([2.5, 3.0, onp.inf, -onp.inf, 0.0, 3.0, -2.0, 2.0, 0.1, 1.0, -1.0])
    for dtype in ("float16", "float32", "float64"):
        host_x, host_y = x.astype(dtype), y.astype(dtype)
        for fn in (np.abs, np.sign):
            gpu, cpu = _on_both_devices(fn, host_x)
            onp.testing.assert_array_equal(gpu, cpu)
            assert (onp.signbit(gpu) == onp.signbit(cpu)).all()
        for fn in (np.mod, np.floor_divide):
            gpu, cpu = _on_both_devices(fn, host_x, host_y)
            onp.testing.assert_array_equal(gpu, cpu)
            assert (onp.signbit(gpu) == onp.signbit(cpu)).all()


@requires_gpu
def test_gpu_take_without_rows_matches_cpu():
    index = onp.array([5, -9], onp.int64)
    gpu, cpu = _on_both_devices(lambda a, i: np.take(a, i, axis=1), onp.zeros((0, 3), "f4"),
                                index)
    assert gpu.shape == cpu.shape == (0, 2)
    with pytest.raises(IndexError):
        np.take(np.zeros((3, 0), device=pymx.device.gpu(0)),
                np.array(index, device=pymx.device.gpu(0)), axis=0).asnumpy()


@requires_gpu
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "bool"])
def test_gpu_correlate_matches_cpu(dtype):
    a, v = sample((300,), dtype, seed=1), sample((17,), dtype, seed=2)
    if dtype.startswith("float"):
        a = onp.nan_to_num(a, nan=1.0, posinf=2.0, neginf=-2.0)
    for mode in ("valid", "same", "full"):
        gpu, cpu = _on_both_devices(lambda x, w: np.correlate(x, w, mode), a, v)
        onp.testing.assert_allclose(gpu.astype("f8"), cpu.astype("f8"), rtol=1e-5, atol=1e-5)
        gpu, cpu = _on_both_devices(lambda x, w: np.correlate(x, w, mode), v, a)
        onp.testing.assert_allclose(gpu.astype("f8"), cpu.astype("f8"), rtol=1e-5, atol=1e-5)
