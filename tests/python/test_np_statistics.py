"""pymx.np order statistics, NaN reductions, covariance and histograms against NumPy (float64
reference), gradients against central differences, NumPy's errors."""
import warnings

import numpy as onp
import pytest

import pymx
from pymx import gluon, np
from pymx.base import bfloat16
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from test_np_manipulation import check, on, rand



METHODS = ["linear", "lower", "higher", "midpoint", "nearest"]
AXES = [None, 0, 1, -1, (0, 2), (1, 2)]


@pytest.mark.parametrize("method", METHODS)
def test_quantile_and_percentile(method, device):
    x = rand((3, 4, 5))
    for axis in AXES:
        for q in (0.0, 0.3, 0.5, 1.0, [0.1, 0.75], [[0.2, 0.9], [0.5, 0.25]]):
            for keepdims in (False, True):
                want = onp.quantile(x, q, axis=axis, method=method, keepdims=keepdims)
                check(np.quantile(on(device, x), q, axis=axis, interpolation=method,
                                  keepdims=keepdims), want, device)
        want = onp.percentile(x, [10, 62.5], axis=axis, method=method)
        check(np.percentile(on(device, x), [10, 62.5], axis=axis, method=method), want, device)
    # Ties and an exact midpoint (position 2.5 rounds to 2 for 'nearest', half to even).
    ties = onp.array([1.0, 3.0, 3.0, 2.0, 8.0, 5.0])
    check(np.quantile(on(device, ties), 0.5, interpolation=method),
          onp.quantile(ties, 0.5, method=method), device)
    q = on(device, onp.array([0.25, 0.8]))
    check(np.quantile(on(device, x), q, axis=1, interpolation=method),
          onp.quantile(x, [0.25, 0.8], axis=1, method=method), device)


def test_median(device):
    for shape in [(7,), (6,), (3, 4), (2, 3, 5), (1,)]:
        x = rand(shape)
        for axis in [None] + list(range(len(shape))):
            check(np.median(on(device, x), axis=axis), onp.median(x, axis=axis), device)
            check(np.median(on(device, x), axis=axis, keepdims=True),
                  onp.median(x, axis=axis, keepdims=True), device)
    check(np.median(on(device, onp.float64(2.5))), onp.median(onp.float64(2.5)), device)
    ints = onp.array([[1, 7, 3], [4, 2, 9]])
    got = np.median(on(device, ints), axis=1)
    assert got.dtype == onp.float32  # MXNet: float-valued functions of integers give float32
    assert_almost_equal(got, onp.median(ints, axis=1))
    with_nan = onp.array([[1.0, onp.nan, 3.0], [4.0, 5.0, 6.0]])
    check(np.median(on(device, with_nan), axis=1), onp.median(with_nan, axis=1), device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(np.median(on(device, onp.zeros((2, 0))), axis=1),
              onp.median(onp.zeros((2, 0)), axis=1), device)


def test_quantiles_with_an_empty_kept_axis(device):
    # The reduced axes are not empty, a kept one is: the result is empty, as in NumPy.
    empty = onp.zeros((2, 0, 3))
    check(np.median(on(device, empty), axis=-1), onp.median(empty, axis=-1), device)
    check(np.quantile(on(device, empty), [0.2, 0.5], axis=0),
          onp.quantile(empty, [0.2, 0.5], axis=0), device)
    check(np.percentile(on(device, empty), 30, axis=2, keepdims=True),
          onp.percentile(empty, 30, axis=2, keepdims=True), device)
    got = np.median(on(device, empty), axis=(0, 2))  # NumPy 2.x cannot reshape this one
    assert got.shape == (0,) and got.device == device


def spread_values(shape, seed):
    """Distinct values 0.1 apart in random order: a quantile's finite differences (steps of
    1e-4) then never reorder two values, where its gradient jumps."""
    size = int(onp.prod(shape))
    return onp.random.default_rng(seed).permutation(size).reshape(shape) * 0.1 - 0.05 * size


def test_quantile_gradient(device):
    x = spread_values((3, 5), seed=0)
    check_numeric_gradient(lambda a: np.median(a, axis=1), [x], device=device)
    check_numeric_gradient(lambda a: np.median(a), [spread_values((4, 2), seed=1)], device=device)
    check_numeric_gradient(lambda a: np.quantile(a, [0.3, 0.65], axis=0), [x], device=device)
    check_numeric_gradient(lambda a: np.percentile(a, 40, axis=1, interpolation="midpoint"),
                           [x], device=device)


def test_quantile_errors(device):
    x = on(device, rand((3, 4)))
    with pytest.raises(ValueError, match=r"quantiles must be in the range \[0, 1\], got 1.5"):
        np.quantile(x, 1.5)
    with pytest.raises(ValueError, match=r"percentiles must be in the range \[0, 100\]"):
        np.percentile(x, [50, -1])
    with pytest.raises(ValueError, match="'cubic' is not supported"):
        np.quantile(x, 0.5, interpolation="cubic")
    with pytest.raises(TypeError, match="either interpolation='lower' or method='higher'"):
        np.quantile(x, 0.5, interpolation="lower", method="higher")
    with pytest.raises(IndexError, match="empty axis"):
        np.quantile(on(device, onp.zeros(0)), 0.5)
    with pytest.raises(onp.exceptions.AxisError, match="axis 2 is out of bounds"):
        np.median(x, axis=2)


def test_nan_reductions(device):
    x = rand((3, 4))
    x[0, 1] = x[2, 3] = onp.nan
    x[1, :] = onp.nan
    with warnings.catch_warnings():  # NumPy warns about the all-NaN row
        warnings.simplefilter("ignore", RuntimeWarning)
        for axis in (None, 0, 1):
            for name in ("nansum", "nanmean", "nanmax", "nanmin"):
                check(getattr(np, name)(on(device, x), axis=axis),
                      getattr(onp, name)(x, axis=axis), device)
            check(np.nanmean(on(device, x), axis=axis, keepdims=True),
                  onp.nanmean(x, axis=axis, keepdims=True), device)
    ints = onp.arange(6).reshape(2, 3)
    check(np.nansum(on(device, ints), axis=1), onp.nansum(ints, axis=1), device)
    check(np.nanmax(on(device, ints)), onp.nanmax(ints), device)
    finite = rand((3, 4))
    check_numeric_gradient(lambda a: np.nanmean(a, axis=0), [finite], device=device)
    check_numeric_gradient(lambda a: np.nanmax(a, axis=1), [finite], device=device)


def test_ptp(device):
    x = rand((3, 4, 2))
    for axis in (None, 0, 1, (0, 2)):
        check(np.ptp(on(device, x), axis=axis), onp.ptp(x, axis=axis), device)
    check(np.ptp(on(device, x), axis=1, keepdims=True), onp.ptp(x, axis=1, keepdims=True),
          device)
    check_numeric_gradient(lambda a: np.ptp(a, axis=0), [rand((3, 2))], device=device)
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        np.ptp(on(device, onp.zeros(0)))
    # Empty kept axes give an empty result; only an empty reduced axis has no range.
    empty = onp.zeros((2, 0, 3))
    for axis in (-1, (0, 2)):
        check(np.ptp(on(device, empty), axis=axis, keepdims=True),
              onp.ptp(empty, axis=axis, keepdims=True), device)
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        np.ptp(on(device, empty), axis=1)


def test_cov_corrcoef(device):
    m, y = rand((3, 6)), rand((2, 6))
    fweights = onp.array([1, 2, 1, 3, 1, 2])
    aweights = rand((6,), 0.1, 1.0)
    cases = [{}, {"rowvar": False}, {"bias": True}, {"ddof": 3}, {"fweights": fweights},
             {"aweights": aweights}, {"fweights": fweights, "aweights": aweights, "ddof": 2},
             {"aweights": aweights, "bias": True}]
    for kwargs in cases:
        data = m.T if kwargs.get("rowvar") is False else m
        check(np.cov(on(device, data), **kwargs), onp.cov(data, **kwargs), device,
              rtol=1e-10, atol=1e-12)
    check(np.cov(on(device, m), on(device, y)), onp.cov(m, y), device, rtol=1e-10)
    check(np.cov(on(device, m[0])), onp.cov(m[0]), device, rtol=1e-10)
    with warnings.catch_warnings():  # one observation of 6 variables: NumPy warns, gives NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        check(np.cov(on(device, m[:1]), rowvar=False), onp.cov(m[:1], rowvar=False), device,
              rtol=1e-10)
    check(np.corrcoef(on(device, m)), onp.corrcoef(m), device, rtol=1e-10)
    check(np.corrcoef(on(device, m[0]), on(device, y[0])), onp.corrcoef(m[0], y[0]), device,
          rtol=1e-10)
    check(np.corrcoef(on(device, m), rowvar=False), onp.corrcoef(m, rowvar=False), device,
          rtol=1e-10)
    check_numeric_gradient(lambda a: np.cov(a), [rand((2, 4))], device=device)
    check_numeric_gradient(lambda a: np.corrcoef(a), [rand((3, 4))], device=device)
    with pytest.raises(ValueError, match=r"more than 2 dimensions \(shape \(2, 2, 2\)\)"):
        np.cov(on(device, onp.ones((2, 2, 2))))
    with pytest.raises(TypeError, match="fweights must be integer"):
        np.cov(on(device, m), fweights=on(device, aweights))
    with pytest.raises(ValueError, match="aweights cannot be negative"):
        np.cov(on(device, m), aweights=on(device, -aweights))
    with pytest.raises(RuntimeError, match="incompatible numbers of samples and fweights"):
        np.cov(on(device, m), fweights=on(device, fweights[:3]))
    with pytest.raises(ValueError, match="ddof must be an integer, got 1.5"):
        np.cov(on(device, m), ddof=1.5)


def test_cov_weights_follow_the_array_device():
    other = pymx.cpu(1)  # not the current device: list weights must be made where m is
    m = rand((2, 4))
    fweights, aweights = [1, 2, 1, 3], [0.5, 1.0, 0.25, 2.0]
    check(np.cov(on(other, m), fweights=fweights, aweights=aweights),
          onp.cov(m, fweights=fweights, aweights=aweights), other, rtol=1e-10)


def test_bfloat16_keeps_its_dtype_and_its_nan(device):
    values = onp.array([[-1.5, 0.5, onp.nan, 2.0], [1.0, 3.0, -2.0, 0.25]])
    x = np.array(values, dtype="bfloat16", device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for name in ("nansum", "nanmean", "nanmax", "nanmin"):
            got = getattr(np, name)(x, axis=1)
            assert got.dtype == bfloat16, name
            assert_almost_equal(got, getattr(onp, name)(values, axis=1), names=(name, "numpy"))
    finite = x[1]
    results = {"median": np.median(finite), "quantile": np.quantile(finite, 0.3),
               "cov": np.cov(x[:, [0, 1, 3]]), "histogram edges": np.histogram(finite, 3)[1]}
    for name, got in results.items():
        assert got.dtype == bfloat16, name
    assert_almost_equal(results["median"], onp.median(values[1]))
    assert_almost_equal(results["cov"], onp.cov(values[:, [0, 1, 3]]))


def test_histogram(device):
    x = rand((50,))
    weights = rand((50,), 0.0, 1.0)
    cases = [{}, {"bins": 7}, {"bins": 4, "range": (-1.0, 1.5)}, {"bins": [-2, -0.5, 0, 2.5]},
             {"bins": 5, "weights": weights}, {"bins": 6, "density": True},
             {"bins": [-1.0, 0.0, 0.5, 3.0], "density": True, "weights": weights}]
    for kwargs in cases:
        device_kwargs = dict(kwargs)
        if "weights" in kwargs:
            device_kwargs["weights"] = on(device, weights)
        hist, edges = np.histogram(on(device, x), **device_kwargs)
        want_hist, want_edges = onp.histogram(x, **kwargs)
        check(hist, want_hist, device)
        check(edges, want_edges, device)
    # Values on the edges: each interior edge opens its bin; the last edge closes the last bin.
    on_edges = onp.array([0.0, 1.0, 1.0, 2.0, 3.0, 4.0, 4.0])
    for args in [(4,), ([0, 1, 2, 4],), (2, (1.0, 3.0))]:
        for g, w in zip(np.histogram(on(device, on_edges), *args), onp.histogram(on_edges, *args)):
            check(g, w, device)
    constant = onp.full(5, 3.0)
    for g, w in zip(np.histogram(on(device, constant), 3), onp.histogram(constant, 3)):
        check(g, w, device)
    for g, w in zip(np.histogram(on(device, onp.zeros(0)), 3), onp.histogram(onp.zeros(0), 3)):
        check(g, w, device)
    with pytest.raises(ValueError, match="must increase monotonically"):
        np.histogram(on(device, x), bins=[0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="max must be larger than min"):
        np.histogram(on(device, x), bins=3, range=(1.0, 0.0))
    with pytest.raises(ValueError, match=r"autodetected range of \[.*inf\] is not finite"):
        np.histogram(on(device, onp.array([1.0, onp.inf])))
    with pytest.raises(ValueError, match="bins must be an int or a sequence of edges, got 'auto'"):
        np.histogram(on(device, x), bins="auto")
    with pytest.raises(ValueError, match="bins must be positive, got 0"):
        np.histogram(on(device, x), bins=0)


def test_hybridized_equals_imperative(device):
    class Block(gluon.HybridBlock):
        def forward(self, x):
            return np.median(x, axis=1) + np.quantile(x, 0.25, axis=1) + np.nanmax(x, axis=1)

    x = np.array(rand((4, 5)), device=device)
    block = Block()
    block.hybridize()
    block(x)
    x2 = np.array(rand((4, 5)), device=device)
    assert_almost_equal(block(x2), Block()(x2), rtol=0, atol=0)
    assert_almost_equal(block(x2), onp.median(x2.asnumpy(), axis=1) +
                        onp.quantile(x2.asnumpy(), 0.25, axis=1) +
                        onp.max(x2.asnumpy(), axis=1))
