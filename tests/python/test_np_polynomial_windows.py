"""np's polynomials (polyadd, polysub, polymul, polydiv, polyint, polyfit, roots), histograms
(histogram_bin_edges, histogramdd, histogram2d), windows (hanning, hamming, blackman), vander and
bit packing (packbits, unpackbits) against NumPy.

Float results are compared with NumPy's float64 results at the dtype's tolerance (float32:
rtol 1e-5; polyfit's least squares, float64 only, 1e-8); integer results, counts and bits must
be equal. On the GPU every function must give the CPU's results within float32 rounding.
"""
import warnings

import numpy as onp
import pytest

from pymx import gluon, np
from pymx.device import cpu, gpu
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import ops_ran, requires_gpu
from test_np_sets_indexing import assert_exact, on


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    got = got.asnumpy()
    assert got.shape == onp.shape(want), (got.shape, onp.shape(want))
    assert_almost_equal(got, onp.asarray(want, dtype=onp.float64), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------------
# Polynomials
# ---------------------------------------------------------------------------------------------

PAIRS = [([1.0, 2.0], [9.0, 5.0, 4.0]), ([3.0], [1.0, -1.0]), ([0.5, 0.0, -2.0], [4.0]),
         (2.0, [1.0, 1.0, 1.0])]


@pytest.mark.parametrize("name", ["polyadd", "polysub", "polymul"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_polyadd_polysub_polymul_match_numpy(name, dtype, device):
    for a, b in PAIRS:
        a_host, b_host = onp.atleast_1d(onp.asarray(a, dtype)), onp.atleast_1d(onp.asarray(b,
                                                                                          dtype))
        # NumPy's polymul drops leading zero coefficients first (through poly1d); pymx keeps
        # them, so the result's length depends on the shapes only: the same polynomial.
        want = onp.convolve(a_host, b_host) if name == "polymul" else \
            getattr(onp, name)(a_host, b_host)
        got = getattr(np, name)(on(device, onp.asarray(a, dtype)), on(device, onp.asarray(b,
                                                                                         dtype)))
        assert got.dtype == onp.dtype(dtype)
        assert_close(got, want, rtol=1e-6)


def test_polynomial_arithmetic_gradients(device):
    for name in ("polyadd", "polysub", "polymul"):
        check_numeric_gradient(getattr(np, name), [onp.random.randn(3), onp.random.randn(5)],
                               device=device)
    check_numeric_gradient(lambda p: np.polyint(p, 2, k=[1.0, 2.0]), [onp.random.randn(4)],
                           device=device)
    check_numeric_gradient(lambda u, v: np.polydiv(u, v)[0], [onp.random.randn(5),
                                                              onp.random.randn(3) + 3],
                           device=device)
    with pytest.raises(ValueError, match="coefficients cannot be empty, got lengths 0 and 2"):
        np.polymul(np.zeros(0, device=device), [1.0, 2.0])
    with pytest.raises(ValueError, match="must be 1-d, got shape \\(2, 2\\)"):
        np.polyadd(np.zeros((2, 2), device=device), [1.0])


@pytest.mark.parametrize("u,v", [([3.0, 5.0, 2.0], [2.0, 1.0]), ([1.0, 0.0, -1.0], [1.0, -1.0]),
                                 ([1.0, 2.0], [1.0, 2.0, 3.0]), ([4.0], [2.0]),
                                 ([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 0.0, 1.0])])
def test_polydiv_matches_numpy(u, v, device):
    quotient, remainder = np.polydiv(on(device, u, "float64"), on(device, v, "float64"))
    want_q, want_r = onp.polydiv(u, v)
    assert_close(quotient, want_q, rtol=1e-12, atol=1e-12)
    assert_close(remainder, want_r, rtol=1e-12, atol=1e-12)
    quotient, remainder = np.polydiv(on(device, u), on(device, v))  # float32
    assert quotient.dtype == onp.float32
    assert_close(quotient, want_q)


@pytest.mark.parametrize("m,k", [(0, None), (1, None), (2, None), (3, 1.5), (2, [1.0, -2.0]),
                                 (1, [4.0, 5.0, 6.0])])
def test_polyint_matches_numpy(m, k, device):
    p = [3.0, -2.0, 0.5, 1.0]
    assert_close(np.polyint(on(device, p, "float64"), m, k), onp.polyint(p, m, k), rtol=1e-12)
    assert_close(np.polyint(on(device, p), m, k), onp.polyint(p, m, k))
    with pytest.raises(ValueError, match="length 1 or >= m, got 2 constants for m=3"):
        np.polyint(on(device, p), 3, k=[1.0, 2.0])
    with pytest.raises(ValueError, match="non-negative integer, got m=-1"):
        np.polyint(on(device, p), -1)


@pytest.mark.parametrize("deg", [0, 1, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("columns", [None, 2])
def test_polyfit_matches_numpy(deg, weighted, columns, device):
    x = onp.linspace(-1, 2, 12)
    y = onp.random.randn(12) if columns is None else onp.random.randn(12, columns)
    w = onp.random.uniform(0.5, 2, 12) if weighted else None
    pw = None if w is None else on(device, w, "float64")
    px, py = on(device, x, "float64"), on(device, y, "float64")
    assert_close(np.polyfit(px, py, deg, w=pw), onp.polyfit(x, y, deg, w=w), rtol=1e-8,
                 atol=1e-10)
    got = np.polyfit(px, py, deg, w=pw, full=True)
    want = onp.polyfit(x, y, deg, w=w, full=True)
    for g, wnt in zip(got[:2], want[:2]):
        assert_close(g, wnt, rtol=1e-8, atol=1e-10)
    assert got[2] == want[2]
    assert_close(got[3], want[3], rtol=1e-8)
    assert got[4] == pytest.approx(want[4])
    for cov in (True, "unscaled"):
        coefficients, covariance = np.polyfit(px, py, deg, w=pw, cov=cov)
        assert_close(covariance, onp.polyfit(x, y, deg, w=w, cov=cov)[1], rtol=1e-8, atol=1e-12)
    float32 = np.polyfit(on(device, x, "float32"), on(device, y, "float32"), deg)
    assert float32.dtype == onp.float32
    assert_close(float32, onp.polyfit(x, y, deg), rtol=1e-3, atol=1e-4)


def test_polyfit_bad_input_and_rank_warning(device):
    x = on(device, onp.arange(5.0))
    with pytest.raises(ValueError, match="expected deg >= 0 \\(an integer\\), got -1"):
        np.polyfit(x, x, -1)
    with pytest.raises(TypeError, match="same length, got 5 and 4"):
        np.polyfit(x, x[:4], 1)
    with pytest.raises(TypeError, match="w and y to have the same length, got 3 and 5"):
        np.polyfit(x, x, 1, w=[1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="1-d vector for x, got shape \\(5, 1\\)"):
        np.polyfit(x.reshape(5, 1), x, 1)
    with pytest.raises(ValueError, match="number of data points \\(3\\) must exceed order \\(3\\)"):
        np.polyfit(x[:3], x[:3], 2, cov=True)
    with pytest.warns(onp.exceptions.RankWarning, match="rank 1 < 3"):
        np.polyfit(on(device, onp.ones(5)), x, 2)


def test_roots_match_numpy(device):
    for p in ([1.0, -6.0, 11.0, -6.0], [2.0, 0.0, -8.0, 0.0, 0.0], [0.0, 0.0, 1.0, -3.0],
              [5.0], [0.0, 0.0]):
        got = np.roots(on(device, p, "float64"))
        want = onp.roots(p)
        assert got.device == device
        assert_close(np.sort(got), onp.sort(want), rtol=1e-10, atol=1e-10)
    complex_roots = np.roots(on(device, [1.0, 0.0, 4.0]))
    assert isinstance(complex_roots, onp.ndarray)
    onp.testing.assert_allclose(onp.sort_complex(complex_roots), [-2j, 2j], atol=1e-6)
    with pytest.raises(ValueError, match="must be 1-d, got shape \\(2, 2\\)"):
        np.roots(np.ones((2, 2), device=device))


# ---------------------------------------------------------------------------------------------
# Histograms
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bins", [5, [0.0, 0.5, 1.0, 3.0], [-1, 0, 2]])
@pytest.mark.parametrize("value_range", [None, (-2.0, 2.0)])
def test_histogram_bin_edges_match_histogram(bins, value_range, device):
    values = onp.random.randn(40).astype(onp.float32)
    x = on(device, values)
    got = np.histogram_bin_edges(x, bins, value_range)
    assert_exact(got, np.histogram(x, bins, value_range)[1].asnumpy())
    assert_close(got, onp.histogram_bin_edges(values, bins, value_range))
    assert_close(np.histogram_bin_edges(np.zeros(0, device=device), 3),
                 onp.histogram_bin_edges(onp.zeros(0), 3))


@pytest.mark.parametrize("density", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("bins", [4, (2, 3, 5), [[-3.0, 0.0, 3.0], 4, [-1, 0, 1, 2]]])
def test_histogramdd_matches_numpy(density, weighted, bins, device):
    # float64 values on the edges: bins are compared in the data's dtype, as np.histogram does,
    # which for float64 data is NumPy's comparison exactly.
    sample = onp.round(onp.random.randn(60, 3), 1)
    sample[0] = [-3.0, 3.0, 2.0]  # the last edges are closed
    weights = onp.random.uniform(0, 2, 60) if weighted else None
    got, edges = np.histogramdd(on(device, sample, "float64"), bins, density=density,
                                weights=None if weights is None else on(device, weights,
                                                                        "float64"))
    want, want_edges = onp.histogramdd(sample, bins, density=density, weights=weights)
    assert got.dtype == onp.float64
    assert_close(got, want, rtol=1e-5, atol=1e-6)
    for e, w in zip(edges, want_edges):
        assert_close(e, w)
    sample = onp.random.randn(60, 3).astype(onp.float32)
    columns = [on(device, sample[:, d]) for d in range(3)]
    value_range = [(-1, 1), (-2, 2), None] if bins == 4 else None
    got, edges = np.histogramdd(columns, bins, range=value_range)
    want, want_edges = onp.histogramdd(sample, bins, range=value_range)
    assert_close(got, want)
    for e, w in zip(edges, want_edges):
        assert e.dtype == (onp.float32 if w.dtype.kind == "f" else w.dtype)
        assert_close(e, w)


def test_histogram2d_matches_numpy(device):
    x, y = onp.random.randn(2, 50).astype(onp.float32)
    for bins in (5, [3, 4], onp.array([-2.0, -1.0, 0.0, 1.0, 2.0]), [[-1.0, 0.0, 1.0], 3]):
        got, xedges, yedges = np.histogram2d(on(device, x), on(device, y), bins)
        want, want_x, want_y = onp.histogram2d(x, y, bins)
        assert_close(got, want)
        assert_close(xedges, want_x)
        assert_close(yedges, want_y)
    got = np.histogram2d(on(device, x), on(device, y), 3, range=[[-1, 1], [0, 2]], density=True)
    assert_close(got[0], onp.histogram2d(x, y, 3, range=[[-1, 1], [0, 2]], density=True)[0])
    empty = np.histogram2d(np.zeros(0, device=device), np.zeros(0, device=device), 2)[0]
    assert_exact(empty, onp.zeros((2, 2)))


def test_histograms_bad_input(device):
    sample = np.zeros((5, 2), device=device)
    with pytest.raises(ValueError, match="dimension of bins \\(3\\) must be equal to the "
                                         "dimension of the sample x \\(2\\)"):
        np.histogramdd(sample, bins=[2, 2, 2])
    with pytest.raises(ValueError, match="one value per point, got 4 weights for 5 points"):
        np.histogramdd(sample, weights=np.ones(4, device=device))
    with pytest.raises(ValueError, match="one length, got \\[5, 4\\]"):
        np.histogram2d(np.zeros(5, device=device), np.zeros(4, device=device))
    with pytest.raises(ValueError, match="bins must be positive, got 0"):
        np.histogram_bin_edges(np.zeros(3, device=device), 0)
    with pytest.raises(ValueError, match="increase monotonically"):
        np.histogramdd(sample, bins=[[0.0, 1.0], [1.0, 0.0]])


# ---------------------------------------------------------------------------------------------
# Windows, vander, bits
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["hanning", "hamming", "blackman"])
@pytest.mark.parametrize("dtype", [None, "float32", "float64", "float16"])
def test_windows_match_numpy(name, dtype, device):
    for M in (-2, 0, 1, 2, 7, 64):
        got = getattr(np, name)(M, dtype=dtype, device=device)
        want = getattr(onp, name)(M)
        assert got.dtype == onp.dtype(dtype or "float32") and got.device == device
        tolerance = {"float16": 1e-3, "float64": 1e-14}.get(dtype, 1e-6)
        assert_close(got, want, rtol=tolerance, atol=tolerance)
    with pytest.raises(TypeError, match="M must be an integer, got 2.5"):
        getattr(np, name)(2.5)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("N", [None, 0, 1, 4])
@pytest.mark.parametrize("increasing", [False, True])
def test_vander_matches_numpy(dtype, N, increasing, device):
    values = onp.array([1, 2, 0, 3, 1], dtype=dtype) if dtype == "bool" else \
        onp.array([-1.5, 2, 0, 3, 0.5] if dtype.startswith("float") else [1, 2, 0, 3, 5], dtype)
    got = np.vander(on(device, values, dtype), N, increasing)
    want = onp.vander(values, N, increasing)
    assert got.dtype == (onp.dtype(dtype) if dtype.startswith("float") else onp.int64)
    assert_close(got, want, rtol=1e-6)
    assert np.vander(np.zeros(0, device=device), 3).shape == (0, 3)


def test_vander_gradient_and_bad_input(device):
    check_numeric_gradient(lambda v: np.vander(v, 4), [onp.random.randn(3)], device=device)
    with pytest.raises(ValueError, match="one-dimensional array or sequence, got shape \\(2, 2\\)"):
        np.vander(np.zeros((2, 2), device=device))
    with pytest.raises(ValueError, match="non-negative integer, got -1"):
        np.vander(np.zeros(2, device=device), -1)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits_matches_numpy(dtype, axis, bitorder, device):
    for shape in ((3, 11), (2, 16), (0, 5), (4, 0)):
        values = onp.random.randint(-1, 2, size=shape).astype(dtype)
        got = np.packbits(on(device, values, dtype), axis=axis, bitorder=bitorder)
        assert got.dtype == onp.uint8
        assert_exact(got, onp.packbits(values, axis=axis, bitorder=bitorder))
    assert_exact(np.packbits(on(device, onp.int32(5))), onp.packbits(onp.int32(5)))


@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("count", [None, 0, 5, 17, 40, -3, -16])
@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_unpackbits_matches_numpy(axis, count, bitorder, device):
    values = onp.random.randint(0, 256, size=(2, 3)).astype(onp.uint8)
    got = np.unpackbits(on(device, values), axis=axis, count=count, bitorder=bitorder)
    assert got.dtype == onp.uint8
    assert_exact(got, onp.unpackbits(values, axis=axis, count=count, bitorder=bitorder))
    packed = np.packbits(np.unpackbits(on(device, values), axis=1, bitorder=bitorder), axis=1,
                         bitorder=bitorder)
    assert_exact(packed, values)


def test_bits_bad_input(device):
    with pytest.raises(TypeError, match="integer or boolean data type, got float32"):
        np.packbits(np.zeros(3, device=device))
    with pytest.raises(TypeError, match="unsigned byte data type, got int32"):
        np.unpackbits(np.zeros(3, dtype="int32", device=device))
    with pytest.raises(ValueError, match="'little' or 'big', got 'middle'"):
        np.packbits(np.zeros(3, dtype="uint8", device=device), bitorder="middle")
    with pytest.raises(ValueError, match="-count larger than number of elements \\(25 > 24 "):
        np.unpackbits(np.zeros(3, dtype="uint8", device=device), count=-25)
    with pytest.raises(TypeError, match="count must be an integer or None, got 2.5"):
        np.unpackbits(np.zeros(3, dtype="uint8", device=device), count=2.5)
    with pytest.raises(onp.exceptions.AxisError, match="axis 2"):
        np.packbits(np.zeros((2, 2), dtype="uint8", device=device), axis=2)


# ---------------------------------------------------------------------------------------------
# Hybridization, GPU against CPU
# ---------------------------------------------------------------------------------------------

class _StaticShapes(gluon.HybridBlock):
    def forward(self, p, q, bits):
        product = np.polymul(np.polyadd(p, q), np.polysub(p, q))
        integral = np.polyint(product, 2, k=1.0)[:4]
        window = np.hanning(4, device=p.device) * np.blackman(4, device=p.device)
        powers = np.vander(p, 4)[0]
        unpacked = np.unpackbits(np.packbits(bits, axis=-1), axis=-1, count=4)
        return integral + window + powers + unpacked[0].astype("float32")


def test_static_shape_functions_hybridize(device):
    block = _StaticShapes()
    block.hybridize()

    def inputs():
        return (on(device, onp.random.randn(3).astype(onp.float32)),
                on(device, onp.random.randn(2).astype(onp.float32)),
                on(device, onp.random.randint(0, 2, (2, 4)).astype(onp.uint8)))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it traces: no "runs imperatively" warning
        for _ in range(2):
            args = inputs()
            assert_almost_equal(block(*args).asnumpy(),
                                _StaticShapes.forward(block, *args).asnumpy(), rtol=1e-6,
                                atol=1e-6)
    ran = ops_ran(lambda: block(*inputs()), str(device))
    assert {"index_update", "cos"} <= set(ran)


def _all_functions(device):
    rng = onp.random.RandomState(5)
    p, q = on(device, rng.randn(4).astype(onp.float32)), on(device, rng.randn(3).astype(
        onp.float32))
    sample = on(device, rng.randn(30, 2).astype(onp.float32))
    results = [np.polyadd(p, q), np.polysub(p, q), np.polymul(p, q), *np.polydiv(p, q),
               np.polyint(p, 2), np.polyfit(sample[:, 0], sample[:, 1], 2),
               np.histogram_bin_edges(sample, 4), np.histogramdd(sample, (3, 4))[0],
               np.histogram2d(sample[:, 0], sample[:, 1], 3, density=True)[0],
               np.hanning(9, device=device), np.hamming(9, device=device),
               np.blackman(9, device=device), np.vander(p), np.packbits(p > 0),
               np.unpackbits(on(device, rng.randint(0, 256, (3, 2)).astype(onp.uint8)), axis=0)]
    return [r.asnumpy() for r in results]


@requires_gpu
def test_gpu_matches_cpu():
    for got, want in zip(_all_functions(gpu(0)), _all_functions(cpu(0))):
        assert_almost_equal(got, want, rtol=1e-5, atol=1e-5)
