"""pymx.np's NaN-ignoring reductions (nanargmax, nanargmin, nanprod, nancumsum, nancumprod,
nanmedian, nanquantile, nanpercentile) against NumPy in float64 (tolerance 1e-12), their
gradients against central differences, and NumPy's errors."""
import warnings

import numpy as onp
import pytest

import pymx
from pymx import np
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import requires_gpu
from test_np_manipulation import check, on

METHODS = ["linear", "lower", "higher", "midpoint", "nearest"]


def with_nans(shape, fraction=0.3, seed=0):
    generator = onp.random.default_rng(seed)
    x = generator.uniform(-2, 2, size=shape)
    x[generator.uniform(size=shape) < fraction] = onp.nan
    return x


def numpy_quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


@pytest.mark.parametrize("name", ["nanargmax", "nanargmin"])
def test_nanarg_extremes(name, device):
    x = with_nans((4, 5, 6), 0.3)
    x[0, 0, :] = [onp.nan, -onp.inf, 1.0, 1.0, onp.nan, onp.inf]  # NaN before an infinity, ties
    for axis in (None, 0, 1, 2, -1):
        for keepdims in (False, True):
            want = getattr(onp, name)(x, axis=axis, keepdims=keepdims)
            got = getattr(np, name)(on(device, x), axis=axis, keepdims=keepdims)
            check(got, want, device, 0, 0)
    check(getattr(np, name)(on(device, onp.array([onp.nan, -onp.inf]))),
          getattr(onp, name)(onp.array([onp.nan, -onp.inf])), device, 0, 0)
    ints = onp.array([[3, 1, 3], [0, 7, 7]])
    check(getattr(np, name)(on(device, ints), axis=1), getattr(onp, name)(ints, axis=1), device)
    out = np.zeros((5, 6), dtype="int64", device=device)
    assert getattr(np, name)(on(device, x), axis=0, out=out) is out
    check(out, getattr(onp, name)(x, axis=0), device, 0, 0)


@pytest.mark.parametrize("name", ["nanargmax", "nanargmin"])
def test_nanarg_extremes_all_nan_slice(name, device):
    x = with_nans((3, 4), 0.0)
    x[:, 2] = onp.nan
    x[1, :] = onp.nan
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        getattr(onp, name)(x, axis=1)
    with pytest.raises(ValueError, match=r"All-NaN slice encountered.*axis 0 at index \(2,\)"):
        getattr(np, name)(on(device, x), axis=0)
    with pytest.raises(ValueError, match=r"All-NaN slice encountered.*axis 1 at index \(1,\)"):
        getattr(np, name)(on(device, x), axis=1)
    with pytest.raises(ValueError, match="every element"):
        getattr(np, name)(on(device, onp.full((2, 2), onp.nan)))
    with pytest.raises(onp.exceptions.AxisError, match="axis 2"):
        getattr(np, name)(on(device, x), axis=2)
    check(getattr(np, name)(on(device, x[[0, 2]]), axis=1),
          getattr(onp, name)(x[[0, 2]], axis=1), device)  # the process stays usable


def test_nanprod(device):
    x = with_nans((3, 4, 5), 0.25)
    for axis in (None, 0, 2, (0, 1), -1):
        for keepdims in (False, True):
            check(np.nanprod(on(device, x), axis=axis, keepdims=keepdims),
                  onp.nanprod(x, axis=axis, keepdims=keepdims), device)
    check(np.nanprod(on(device, onp.full((2, 3), onp.nan)), axis=1),
          onp.nanprod(onp.full((2, 3), onp.nan), axis=1), device)
    check(np.nanprod(on(device, onp.zeros((0, 3))), axis=0), onp.nanprod(onp.zeros((0, 3)),
                                                                         axis=0), device)
    check(np.nanprod(on(device, onp.float64(onp.nan))), onp.nanprod(onp.nan), device)
    ints = onp.array([[1, 2, 3], [4, 5, 6]], dtype="int32")
    check(np.nanprod(on(device, ints), axis=1), onp.nanprod(ints, axis=1).astype("int32"), device)
    check_numeric_gradient(lambda v: np.nanprod(v, axis=1), [with_nans((3, 4), 0.3, 1)],
                           device=device)


@pytest.mark.parametrize("name", ["nancumsum", "nancumprod"])
def test_nan_cumulative(name, device):
    x = with_nans((3, 4, 5), 0.3)
    x[0, :2, 0] = onp.nan  # leading NaNs
    for axis in (None, 0, 1, 2, -1):
        check(getattr(np, name)(on(device, x), axis=axis), getattr(onp, name)(x, axis=axis),
              device)
    check(getattr(np, name)(on(device, onp.float64(onp.nan))),
          getattr(onp, name)(onp.float64(onp.nan)), device)
    check(getattr(np, name)(on(device, onp.zeros((0, 2))), axis=1),
          getattr(onp, name)(onp.zeros((0, 2)), axis=1), device)
    ints = onp.array([[1, 2], [3, 4]], dtype="int32")
    check(getattr(np, name)(on(device, ints), axis=0), getattr(onp, name)(ints, axis=0), device)
    out = np.zeros((3, 4, 5), dtype="float64", device=device)
    assert getattr(np, name)(on(device, x), axis=1, out=out) is out
    check(out, getattr(onp, name)(x, axis=1), device)
    check_numeric_gradient(lambda v: getattr(np, name)(v, axis=1),
                           [with_nans((2, 4), 0.3, 2)], device=device)


def reference_nanquantile(x, q, **kwargs):
    """NumPy's nanquantile with q's axes first, quantile by quantile (NumPy itself puts them
    elsewhere for a tuple axis and a 2-d q, unlike its quantile and its documentation)."""
    q = onp.asarray(q)
    parts = [numpy_quiet(onp.nanquantile, x, value, **kwargs) for value in q.flat]
    return onp.stack(parts).reshape(q.shape + onp.shape(parts[0]))


@pytest.mark.parametrize("method", METHODS)
def test_nanquantile_and_nanpercentile(method, device):
    x = with_nans((4, 5, 6), 0.3)
    x[1, 2, :] = onp.nan  # an all-NaN slice along the last axis
    for axis in (None, 0, 1, -1, (0, 2), (1, 2)):
        for q in (0.0, 0.3, 0.5, 1.0, [0.1, 0.75], [[0.2, 0.9], [0.5, 0.25]]):
            for keepdims in (False, True):
                want = reference_nanquantile(x, q, axis=axis, method=method,
                                             keepdims=keepdims)
                check(np.nanquantile(on(device, x), q, axis=axis, method=method,
                                     keepdims=keepdims), want, device)
        want = numpy_quiet(onp.nanpercentile, x, [10, 62.5], axis=axis, method=method)
        check(np.nanpercentile(on(device, x), [10, 62.5], axis=axis, interpolation=method),
              want, device)


def test_nanmedian(device):
    x = with_nans((3, 4, 5), 0.4)
    x[0, 0, :] = onp.nan
    for axis in (None, 0, 1, 2, (0, 1)):
        for keepdims in (False, True):
            check(np.nanmedian(on(device, x), axis=axis, keepdims=keepdims),
                  numpy_quiet(onp.nanmedian, x, axis=axis, keepdims=keepdims), device)
    for empty, axis in ((onp.zeros((0,)), None), (onp.zeros((0, 3)), 0), (onp.zeros((3, 0)), 1)):
        check(np.nanmedian(on(device, empty), axis=axis),
              numpy_quiet(onp.nanmedian, empty, axis=axis), device)
    check(np.nanmedian(on(device, onp.float64(2.5))), onp.nanmedian(2.5), device)
    got = np.nanmedian(on(device, onp.array([[1, 7, 3], [4, 2, 9]])), axis=1)
    assert got.dtype == onp.float32
    out = np.zeros((4, 5), dtype="float64", device=device)
    assert np.nanmedian(on(device, x), axis=0, out=out) is out


def test_nan_order_statistics_gradients(device):
    # distinct values (no two within the finite differences' step)
    x = onp.array([[0.5, onp.nan, -1.25, 2.0, 0.75], [onp.nan, 3.5, 1.0, onp.nan, -0.5],
                   [1.5, -2.0, onp.nan, 0.25, 2.75]])
    check_numeric_gradient(lambda v: np.nanmedian(v, axis=1), [x], device=device)
    check_numeric_gradient(lambda v: np.nanquantile(v, [0.3, 0.8], axis=0), [x], device=device)


def test_nan_quantile_errors(device):
    x = on(device, with_nans((3, 4)))
    with pytest.raises(ValueError, match=r"nanquantile: quantiles must be in the range \[0, 1\]"):
        np.nanquantile(x, 1.5)
    with pytest.raises(ValueError, match=r"nanpercentile: percentiles must be in the range"):
        np.nanpercentile(x, -1)
    with pytest.raises(ValueError, match="method 'cubic' is not supported"):
        np.nanquantile(x, 0.5, method="cubic")
    with pytest.raises(TypeError, match="not both"):
        np.nanquantile(x, 0.5, method="lower", interpolation="higher")
    with pytest.raises(onp.exceptions.AxisError, match="axis 3"):
        np.nanmedian(x, axis=3)


@requires_gpu
def test_gpu_matches_cpu():
    gpu, cpu = pymx.device.gpu(0), pymx.device.cpu(0)
    x = with_nans((6, 7), 0.3)
    for fn in (lambda v: np.nanargmax(v, axis=0), lambda v: np.nanprod(v, axis=1),
               lambda v: np.nancumsum(v, axis=1), lambda v: np.nancumprod(v, axis=0),
               lambda v: np.nanmedian(v, axis=1),
               lambda v: np.nanquantile(v, [0.2, 0.7], axis=0, method="midpoint")):
        assert_almost_equal(fn(on(gpu, x)), fn(on(cpu, x)), rtol=1e-12, atol=1e-12,
                            equal_nan=True)
