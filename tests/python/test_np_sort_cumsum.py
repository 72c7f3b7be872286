"""np.sort, np.argsort and np.cumsum (operators sort, argsort, cumsum) against NumPy.

Sorting is exact: values and indices must equal NumPy's bit for bit (argsort against NumPy's
kind='stable'), NaNs last. cumsum of integers is exact; float32 and float64 rows are summed in
NumPy's sequential order, so they match its bits too; float16 and bfloat16 keep a float32 running
sum, so the reference is NumPy's float32 cumsum rounded once. On the GPU, sorting must give the
CPU's bits; the block scans of cumsum may round float sums differently (integers stay exact).
"""
import warnings

import numpy as onp
import pytest

from pymx import autograd, gluon, np
from pymx._c import core as _core
from pymx.base import bfloat16
from pymx.device import cpu, gpu
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import (assert_engines_agree, assert_thread_count_independent, ops_ran,
                      requires_gpu)

DTYPES = ["float32", "float64", "float16", "bfloat16", "uint8", "int8", "int32", "int64", "bool"]
FLOATS = ["float32", "float64", "float16", "bfloat16"]
AXES = [0, 1, -1, None]  # first, middle, last, flattened (of a 3-d array)


def values_of(dtype, shape, low=-4, high=5):
    """Random NumPy values for a pymx array of `dtype` (float32 for bfloat16), with many ties."""
    ints = onp.random.randint(low, high, size=shape)
    if dtype == "bool":
        return ints > 0
    if dtype == "uint8":
        return (ints - low).astype(onp.uint8)
    if dtype in ("float16", "bfloat16"):
        return (ints / 2).astype(onp.float32 if dtype == "bfloat16" else onp.float16)
    return (ints / 2 if dtype.startswith("float") else ints).astype(dtype)


def on(device, values, dtype=None):
    return np.array(values, dtype=dtype, device=device)


def assert_bitwise(got, want):
    got = got.asnumpy() if hasattr(got, "asnumpy") else got
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    assert got.tobytes() == want.tobytes(), f"got {got}\nwant {want}"


# ---------------------------------------------------------------------------------------------
# sort and argsort
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", AXES)
def test_sort_argsort_match_numpy(dtype, axis, device):
    values = values_of(dtype, (3, 4, 5))
    x = on(device, values, dtype)
    got = np.sort(x, axis=axis)
    assert got.dtype == x.dtype
    assert_bitwise(got, onp.sort(values, axis=axis))
    assert_bitwise(np.argsort(x, axis=axis), onp.argsort(values, axis=axis, kind="stable"))


# Rows of 12 take the insertion sort, of 240 the radix passes (Note [CPU sort by radix]).
@pytest.mark.parametrize("repeats", [1, 20])
@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_inf_and_signed_zero_placement(dtype, repeats, device):
    neg_nan = -onp.float32("nan")
    row = [onp.nan, 1.0, -onp.inf, neg_nan, -0.0, 0.0, onp.inf, -1.0, 0.0, -0.0, onp.nan, 1.0]
    values = onp.array(row * repeats, dtype=onp.float32 if dtype == "bfloat16" else dtype)
    values[::7] *= onp.random.uniform(0.5, 2, len(values[::7])).astype(values.dtype)
    if dtype == "bfloat16":  # the values bfloat16 holds
        values = on(cpu(), values, dtype).asnumpy()
    x = on(device, values, dtype)
    order = onp.argsort(values, kind="stable")
    assert_bitwise(np.argsort(x), order)
    # The sorted values are the input gathered by that order: the signs of zeros and NaNs stay.
    assert_bitwise(np.sort(x), values[order])


@pytest.mark.parametrize("width", [9, 90])
@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16", "uint8", "float16"])
def test_descending_is_the_stable_reverse_with_nan_first(dtype, width, device):
    values = values_of(dtype, (4, width))
    if dtype.startswith("float") or dtype == "bfloat16":
        values[1, 3] = values[2, 0] = values[2, 5] = onp.nan
    x = on(device, values, dtype)

    def descending(row):
        # NaNs first, then larger before smaller; equal values keep their order.
        return sorted(range(len(row)), key=lambda j: (not onp.isnan(row[j]), -float(row[j])
                                                      if not onp.isnan(row[j]) else 0.0))
    want = onp.array([descending(row.astype(onp.float64)) for row in values], dtype=onp.int64)
    got = _core.invoke("argsort", [x], {"axis": -1, "is_ascend": False})[0]
    assert_bitwise(got, want)
    got_values = _core.invoke("sort", [x], {"axis": -1, "is_ascend": False})[0]
    assert_bitwise(got_values.asnumpy(), onp.take_along_axis(values, want, axis=-1))


@pytest.mark.parametrize("shape, axis", [((0,), -1), ((3, 0), 1), ((3, 0), 0), ((0, 4), 1),
                                         ((0, 4), None), ((5, 1), 1), ((1, 5), 0), ((), None)])
def test_empty_length_one_and_0d(shape, axis, device):
    values = onp.random.uniform(-1, 1, size=shape).astype(onp.float32)
    x = on(device, values)
    assert_bitwise(np.sort(x, axis=axis), onp.sort(values, axis=axis))
    assert_bitwise(np.argsort(x, axis=axis), onp.argsort(values, axis=axis, kind="stable"))
    assert_bitwise(np.cumsum(x, axis=axis), onp.cumsum(values, axis=axis))


@pytest.mark.parametrize("axis", [0, -1, None])
def test_long_rows_over_threads(axis, device):
    values = onp.random.randint(-50, 50, size=(40, 3000)).astype(onp.float32)
    x = on(device, values)
    assert_bitwise(np.sort(x, axis=axis), onp.sort(values, axis=axis))
    assert_bitwise(np.argsort(x, axis=axis), onp.argsort(values, axis=axis, kind="stable"))


def test_argsort_index_dtypes():
    values = values_of("float32", (3, 7))
    for dtype in ("int32", "float32", "float64"):
        got = _core.invoke("argsort", [on(cpu(), values)], {"axis": 0, "dtype": dtype})[0]
        assert_bitwise(got, onp.argsort(values, axis=0, kind="stable").astype(dtype))


@pytest.mark.parametrize("axis", [0, 1, None])
def test_sort_gradient_against_finite_differences(axis, device):
    values = onp.random.permutation(12).reshape(3, 4) + onp.random.uniform(0, 0.5, (3, 4))
    check_numeric_gradient(lambda v: np.sort(v, axis=axis), [values], device=device)


def test_sort_gradient_scatters_through_the_permutation(device):
    values = onp.array([[3.0, 1.0, 2.0], [0.5, 0.25, 1.0]], dtype=onp.float32)
    head = onp.array([[10.0, 20.0, 30.0], [1.0, 2.0, 3.0]], dtype=onp.float32)
    x = on(device, values)
    x.attach_grad()
    with autograd.record():
        y = np.sort(x)
    y.backward(on(device, head))
    assert_bitwise(x.grad, onp.array([[30.0, 10.0, 20.0], [2.0, 1.0, 3.0]], dtype=onp.float32))


# ---------------------------------------------------------------------------------------------
# cumsum
# ---------------------------------------------------------------------------------------------

# NumPy's accumulation dtypes, except uint8: NumPy's uint64 is int64 in pymx.
CUMSUM_DTYPE = {"float32": "float32", "float64": "float64", "float16": "float16",
                "bfloat16": bfloat16, "uint8": "int64", "int8": "int64", "int32": "int64",
                "int64": "int64", "bool": "int64"}


def cumsum_reference(values, dtype, axis):
    """NumPy's cumsum, for float16 and bfloat16 accumulated in float32 and rounded once."""
    if dtype in ("float16", "bfloat16"):
        total = onp.cumsum(values.astype(onp.float32), axis=axis)
        return total.astype(onp.float16) if dtype == "float16" else total
    return onp.cumsum(values, axis=axis, dtype=onp.int64 if dtype == "uint8" else None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", AXES)
def test_cumsum_matches_numpy(dtype, axis, device):
    values = values_of(dtype, (3, 4, 5))
    if dtype.startswith("float"):
        values = (values * onp.random.uniform(0.9, 1.1, values.shape)).astype(values.dtype)
    got = np.cumsum(on(device, values, dtype), axis=axis)
    assert got.dtype == CUMSUM_DTYPE[dtype]
    want = cumsum_reference(values, dtype, axis)
    if device.device_type == "gpu" and dtype in FLOATS:  # block scans round differently
        assert_almost_equal(got, want)
    elif dtype == "bfloat16":  # asnumpy widens to float32: compare rounded bits
        assert_bitwise(got.asnumpy(), np.array(want, dtype="bfloat16").asnumpy())
    else:
        assert_bitwise(got, want)


def test_cumsum_float16_rounds_each_output_once():
    # NumPy rounds every partial sum to float16 and stalls at 256; a float32 sum does not.
    got = np.cumsum(np.full((4096,), 0.1, dtype="float16"))
    want = onp.cumsum(onp.full(4096, onp.float16(0.1), dtype=onp.float32)).astype(onp.float16)
    assert_bitwise(got, want)
    assert float(got[-1].asnumpy()) == pytest.approx(409.6, rel=1e-3)


@pytest.mark.parametrize("data_dtype, dtype", [("int32", "float32"), ("float32", "int32"),
                                               ("float32", "float16"), ("int8", "int8"),
                                               ("float64", "float32"), ("bool", "int32")])
def test_cumsum_dtype_argument(data_dtype, dtype, device):
    values = values_of(data_dtype, (6, 7), low=-100, high=100)
    if data_dtype.startswith("float"):
        values = values + onp.random.uniform(-0.5, 0.5, values.shape).astype(values.dtype)
    got = np.cumsum(on(device, values, data_dtype), axis=1, dtype=dtype)
    assert got.dtype == dtype
    if dtype == "float16":  # each element to float16 first (NumPy's astype), then a float32 sum
        want = onp.cumsum(values.astype(onp.float16).astype(onp.float32), axis=1)
        want = want.astype(onp.float16)
    else:
        want = onp.cumsum(values, axis=1, dtype=dtype)  # int8 wraps around, as in NumPy
    if device.device_type == "gpu" and dtype.startswith("float"):
        assert_almost_equal(got, want)
    else:
        assert_bitwise(got, want)


def test_cumsum_out_and_method(device):
    values = values_of("float32", (3, 4))
    out = np.zeros((12,), device=device)
    result = np.cumsum(on(device, values), out=out)
    assert result is out
    assert_bitwise(out, onp.cumsum(values))
    assert_bitwise(on(device, values).cumsum(axis=0), onp.cumsum(values, axis=0))
    assert_bitwise(np.cumsum(on(device, 7.0), axis=0), onp.cumsum(onp.float32(7.0), axis=0))


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_cumsum_gradient_against_finite_differences(axis, device):
    check_numeric_gradient(lambda v: np.cumsum(v, axis=axis), [onp.random.randn(3, 4, 2)],
                           device=device)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cumsum_gradient_is_the_reversed_cumsum(dtype, device):
    values = values_of(dtype, (5, 6))
    head = values_of(dtype, (5, 6))
    x = on(device, values, dtype)
    x.attach_grad()
    with autograd.record():
        y = np.cumsum(x, axis=0)
    y.backward(on(device, head, dtype))
    want = onp.cumsum(head.astype(onp.float32)[::-1], axis=0)[::-1]
    assert x.grad.dtype == x.dtype
    assert_almost_equal(x.grad, want, rtol=0, atol=0)  # small integers and halves: exact


def test_cumsum_gradient_through_a_dtype_change(device):
    x = on(device, onp.random.randn(2, 3).astype(onp.float32))
    x.attach_grad()
    with autograd.record():
        y = np.cumsum(x, dtype="float64")
    assert y.dtype == onp.float64 and y.shape == (6,)
    y.backward()
    assert x.grad.dtype == onp.float32
    assert_bitwise(x.grad, onp.arange(6, 0, -1, dtype=onp.float32).reshape(2, 3))


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

def test_errors():
    x = np.zeros((2, 3))
    with pytest.raises(onp.exceptions.AxisError, match="sort: axis 2 is out of bounds"):
        np.sort(x, axis=2)
    with pytest.raises(onp.exceptions.AxisError, match="argsort: axis -3 is out of bounds"):
        np.argsort(x, axis=-3)
    with pytest.raises(onp.exceptions.AxisError, match="cumsum: axis 2 is out of bounds"):
        np.cumsum(x, axis=2)
    with pytest.raises(onp.exceptions.AxisError, match="cumsum: axis 1 is out of bounds for "
                                                       "array of dimension 1"):
        np.cumsum(np.array(3.0), axis=1)
    with pytest.raises(onp.exceptions.AxisError, match="axis -1 is out of bounds for array of "
                                                       "dimension 0"):
        np.sort(np.array(3.0))
    with pytest.raises(TypeError, match=r"sort: axis must be an integer or None, got 1\.0"):
        np.sort(x, axis=1.0)
    with pytest.raises(ValueError, match="argsort: kind must be one of .* got 'bubble'"):
        np.argsort(x, kind="bubble")
    with pytest.raises(ValueError, match="sort: cannot specify order .'f'. when the array has "
                                         "no fields"):
        np.sort(x, order="f")
    with pytest.raises(TypeError):
        np.cumsum(x, dtype="complex64")
    with pytest.raises(ValueError, match="argsort: dtype bool cannot hold indices"):
        _core.invoke("argsort", [x], {"dtype": "bool"})
    with pytest.raises(ValueError, match="sort: axis 0 is out of range for a 0-d array"):
        _core.invoke("sort", [np.array(1.0)], {"axis": 0})


# ---------------------------------------------------------------------------------------------
# Hybridization, engines, threads
# ---------------------------------------------------------------------------------------------

class _SortScan(gluon.HybridBlock):
    def forward(self, x):
        return np.sort(x, axis=0) + np.cumsum(x, axis=1) + np.argsort(x, axis=-1).astype("float32")


def test_hybridized_equals_imperative_and_traces(device):
    block = _SortScan()
    block.hybridize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it traces: no "runs imperatively" warning
        for _ in range(2):  # the trace, then a replay on new values
            x = on(device, values_of("float32", (4, 6)))
            got = block(x)
            assert_bitwise(got.asnumpy(), _SortScan.forward(block, x).asnumpy())
    ran = ops_ran(lambda: block(on(device, values_of("float32", (4, 6)))), str(device))
    assert {"sort", "argsort", "cumsum"} <= set(ran)


_SCRIPT = """
import numpy as onp
from pymx import np
rng = onp.random.default_rng(3)
x = np.array(rng.integers(-20, 20, size=(300, 257)).astype(onp.float32))
y = np.array(rng.standard_normal((300, 257)).astype(onp.float32))
arrays = {}
for axis in (0, 1, None):
    arrays[f"sort{axis}"] = np.sort(x, axis=axis).asnumpy()
    arrays[f"argsort{axis}"] = np.argsort(x, axis=axis).asnumpy()
    arrays[f"cumsum{axis}"] = np.cumsum(y, axis=axis).asnumpy()
onp.savez(OUT, **arrays)
"""


def test_naive_and_threaded_engines_agree(tmp_path):
    assert_engines_agree(_SCRIPT, tmp_path)


def test_results_do_not_depend_on_the_thread_count(tmp_path):
    assert_thread_count_independent(_SCRIPT, tmp_path)


# ---------------------------------------------------------------------------------------------
# GPU against CPU
# ---------------------------------------------------------------------------------------------

@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_matches_cpu(dtype):
    values = values_of(dtype, (7, 300, 5))
    if dtype in FLOATS:
        values[0, :3, 0] = onp.nan
        values[1, 4, 1] = -onp.float32("nan")
        values[2, :2, 2] = [-0.0, 0.0]
    on_cpu, on_gpu = on(cpu(), values, dtype), on(gpu(), values, dtype)
    for axis in (0, 1, -1, None):
        for op in ("sort", "argsort"):
            for ascend in (True, False):
                attrs = {"axis": axis, "is_ascend": ascend}
                assert_bitwise(_core.invoke(op, [on_gpu], attrs)[0].asnumpy(),
                               _core.invoke(op, [on_cpu], attrs)[0].asnumpy())
        got, want = np.cumsum(on_gpu, axis=axis), np.cumsum(on_cpu, axis=axis)
        assert got.dtype == want.dtype
        if dtype in FLOATS:
            assert_almost_equal(got, want, equal_nan=True)
        else:
            assert_bitwise(got.asnumpy(), want.asnumpy())


@requires_gpu
def test_gpu_gradients_match_cpu():
    values = onp.random.permutation(60).reshape(3, 20).astype(onp.float32)
    head = onp.random.randn(3, 20).astype(onp.float32)
    grads = {}
    for device in (cpu(), gpu()):
        for name, fn in (("sort", lambda v: np.sort(v, axis=0)),
                         ("cumsum", lambda v: np.cumsum(v, axis=1))):
            x = on(device, values)
            x.attach_grad()
            with autograd.record():
                y = fn(x)
            y.backward(on(device, head))
            grads[device.device_type, name] = x.grad.asnumpy()
    assert_bitwise(grads["gpu", "sort"], grads["cpu", "sort"])
    assert_almost_equal(grads["gpu", "cumsum"], grads["cpu", "cumsum"])
