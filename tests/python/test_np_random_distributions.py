"""np.random's distributions and npx.random (bernoulli, uniform_n, normal_n): goodness of fit,
moments, parameter checks, broadcasting, out=, dtype, gradients, hybridize, and determinism (same
seed, same numbers; threaded engine == naive engine).

Statistical tests draw with a fixed seed, so each is deterministic: a pass stays a pass. Their
thresholds are those of tests at significance 0.001 (Kolmogorov-Smirnov: D < 1.95 / sqrt(n);
chi-square: the 0.999 quantile) or below (moments: within 4.5 standard errors), so that a correct
sampler would pass with almost any other seed too, while a wrong shape, scale or tail (a
systematic error of a few percent) fails. Reference CDFs and probability masses are computed
here in float64 (no SciPy).
"""
import math

import numpy as onp
import pytest

import pymx
from pymx import np, npx
from conftest import run_python

FIXED_SEED = 1234
KS_C = 1.95  # Kolmogorov-Smirnov critical value at significance 0.001
Z = 3.09     # standard normal 0.999 quantile


def draws(fn, *args, **kwargs):
    np.random.seed(FIXED_SEED)
    return fn(*args, **kwargs).asnumpy().astype(onp.float64)


# ---------------------------------------------------------------------------------------------
# Reference distributions in float64
# ---------------------------------------------------------------------------------------------

def normal_cdf(x):
    return 0.5 * (1.0 + onp.vectorize(math.erf)(onp.asarray(x) / math.sqrt(2.0)))


def gammainc(a, x):
    """The regularized lower incomplete gamma P(a, x): its series below a + 1, the continued
    fraction of 1 - P (modified Lentz) above."""
    if x <= 0:
        return 0.0
    log_prefactor = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        k = a
        while abs(term) > 1e-17 * abs(total):
            k += 1
            term *= x / k
            total += term
        return total * math.exp(log_prefactor)
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return 1.0 - math.exp(log_prefactor) * h


def gamma_cdf(shape, scale):
    return onp.vectorize(lambda x: gammainc(shape, x / scale))


def ks_statistic(samples, cdf):
    x = onp.sort(samples.ravel())
    n = x.size
    f = cdf(x)
    return max(onp.max(onp.arange(1, n + 1) / n - f), onp.max(f - onp.arange(n) / n))


def assert_fits(samples, cdf):
    d, bound = ks_statistic(samples, cdf), KS_C / math.sqrt(samples.size)
    assert d < bound, f"Kolmogorov-Smirnov D = {d:.4f} >= {bound:.4f}"


def chi2_quantile_999(df):
    """Wilson-Hilferty's approximation of the chi-square 0.999 quantile."""
    return df * (1.0 - 2.0 / (9 * df) + Z * math.sqrt(2.0 / (9 * df))) ** 3


def assert_counts_fit(samples, log_pmf):
    """Chi-square goodness of fit of integer samples: bins of expected count >= 5, the tails
    pooled into the end bins."""
    samples = samples.ravel().astype(onp.int64)
    n = samples.size
    assert samples.min() >= 0
    top = int(samples.max()) + 50
    expected = n * onp.exp(onp.array([log_pmf(k) for k in range(top + 1)]))
    observed = onp.bincount(samples, minlength=top + 1).astype(onp.float64)
    edges, acc = [], 0.0  # bin boundaries, each bin holding at least 5 expected draws
    for k in range(top + 1):
        acc += expected[k]
        if acc >= 5:
            edges.append(k + 1)
            acc = 0.0
    edges[-1] = top + 1
    starts = [0] + edges[:-1]
    exp_bins = onp.array([expected[s:e].sum() for s, e in zip(starts, edges)])
    exp_bins[-1] += n - expected.sum()  # the mass beyond `top`
    obs_bins = onp.array([observed[s:e].sum() for s, e in zip(starts, edges)])
    stat = float(((obs_bins - exp_bins) ** 2 / exp_bins).sum())
    bound = chi2_quantile_999(len(exp_bins) - 1)
    assert stat < bound, f"chi-square {stat:.1f} >= {bound:.1f} with {len(exp_bins) - 1} df"


def assert_moments(samples, mean, var, fourth_central=None):
    """Sample mean and variance within 4.5 standard errors (the variance's from the fourth
    central moment, 3 var^2 for a normal-like default)."""
    n = samples.size
    m4 = 3 * var * var if fourth_central is None else fourth_central
    assert abs(samples.mean() - mean) < 4.5 * math.sqrt(var / n), (samples.mean(), mean)
    assert abs(samples.var() - var) < 4.5 * math.sqrt((m4 - var * var) / n), (samples.var(), var)


def log_poisson(lam):
    return lambda k: k * math.log(lam) - lam - math.lgamma(k + 1)


def log_binomial(n, p):
    def log_pmf(k):
        if k > n:
            return -math.inf
        return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                + k * math.log(p) + (n - k) * math.log1p(-p))
    return log_pmf


# ---------------------------------------------------------------------------------------------
# Continuous distributions: goodness of fit
# ---------------------------------------------------------------------------------------------

N = 20000


@pytest.mark.parametrize("name, args, cdf", [
    ("exponential", (2.0,), lambda x: 1 - onp.exp(-x / 2.0)),
    ("laplace", (1.0, 2.0),
     lambda x: onp.where(x < 1, 0.5 * onp.exp((x - 1) / 2), 1 - 0.5 * onp.exp(-(x - 1) / 2))),
    ("gumbel", (0.5, 2.0), lambda x: onp.exp(-onp.exp(-(x - 0.5) / 2.0))),
    ("logistic", (-1.0, 0.5), lambda x: 1 / (1 + onp.exp(-(x + 1) / 0.5))),
    ("lognormal", (0.3, 0.7), lambda x: normal_cdf((onp.log(x) - 0.3) / 0.7)),
    ("rayleigh", (1.5,), lambda x: 1 - onp.exp(-x * x / (2 * 1.5 ** 2))),
    ("weibull", (1.7,), lambda x: 1 - onp.exp(-x ** 1.7)),
    ("pareto", (3.0,), lambda x: 1 - (1 + x) ** -3.0),
    ("power", (2.5,), lambda x: x ** 2.5),
    ("normal", (onp.array([1.0]), 2.0), lambda x: normal_cdf((x - 1) / 2.0)),
    ("uniform", (onp.array([-1.0]), 3.0), lambda x: (x + 1) / 4.0),
])
def test_inverse_cdf_samplers_fit(name, args, cdf, device):
    args = tuple(np.array(a, dtype="float64", device=device) if isinstance(a, onp.ndarray)
                 else a for a in args)
    samples = draws(getattr(np.random, name), *args, size=(N,), dtype="float64", device=device)
    assert_fits(samples, cdf)


@pytest.mark.parametrize("shape, scale", [(0.3, 1.0), (1.0, 2.0), (4.5, 0.5), (120.0, 1.0)])
def test_gamma_fits(shape, scale, device):
    samples = draws(np.random.gamma, shape, scale, size=(5000,), dtype="float64", device=device)
    assert_fits(samples, gamma_cdf(shape, scale))
    assert_moments(samples, shape * scale, shape * scale ** 2,
                   (3 * shape * shape + 6 * shape) * scale ** 4)


def test_chisquare_fits(device):
    samples = draws(np.random.chisquare, 3.0, size=(5000,), dtype="float64", device=device)
    assert_fits(samples, gamma_cdf(1.5, 2.0))


@pytest.mark.parametrize("a, b, cdf", [(0.5, 1.0, lambda x: x ** 0.5),
                                       (1.0, 3.0, lambda x: 1 - (1 - x) ** 3)])
def test_beta_fits(a, b, cdf, device):
    assert_fits(draws(np.random.beta, a, b, size=(N,), dtype="float64", device=device), cdf)


@pytest.mark.parametrize("a, b", [(2.0, 5.0), (0.3, 0.4)])
def test_beta_moments(a, b, device):
    samples = draws(np.random.beta, a, b, size=(N,), dtype="float64", device=device)
    mean, var = a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))
    assert_moments(samples, mean, var, fourth_central=var)  # |x - mean| <= 1 bounds m4 by var
    assert samples.min() >= 0 and samples.max() <= 1


def test_beta_with_tiny_parameters(device):
    """Both gamma draws underflow for a = b = 1e-3 (where X / (X + Y) would be 0 / 0); the
    log-space ratio still gives Beta's shape: nearly all mass within t = 1e-6 of 0 or 1, with
    P(X < t) = t^a / (a B(a, b)) up to a relative O(t)."""
    a = b = 1e-3
    samples = draws(np.random.beta, a, b, size=(N,), dtype="float64", device=device)
    assert not onp.isnan(samples).any()
    t = 1e-6
    tail = t ** a / (a * math.exp(math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)))
    for observed in ((samples < t).mean(), (samples > 1 - t).mean()):
        assert abs(observed - tail) < 4.5 * math.sqrt(tail * (1 - tail) / N), (observed, tail)
    assert_moments(samples, 0.5, a * b / ((a + b) ** 2 * (a + b + 1)), fourth_central=0.25)


def test_f_and_t_fit(device):
    # F(2, 2) has CDF x / (1 + x); t with 1 degree of freedom is the Cauchy distribution.
    assert_fits(draws(np.random.f, 2.0, 2.0, size=(N,), dtype="float64", device=device),
                lambda x: x / (1 + x))
    assert_fits(draws(np.random.standard_t, 1.0, size=(N,), dtype="float64", device=device),
                lambda x: 0.5 + onp.arctan(x) / math.pi)
    t5 = draws(np.random.standard_t, 5.0, size=(N,), dtype="float64", device=device)
    assert_moments(t5, 0.0, 5.0 / 3.0, fourth_central=25.0)  # m4 of t5 is infinite: a loose bound
    f = draws(np.random.f, 5.0, 20.0, size=(N,), dtype="float64", device=device)
    assert abs(f.mean() - 20.0 / 18.0) < 4.5 * f.std() / math.sqrt(N)


# ---------------------------------------------------------------------------------------------
# Counts: chi-square goodness of fit
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lam", [0.7, 6.5, 10.0, 48.0])  # inversion below 10, PTRS from 10
def test_poisson_fits(lam, device):
    samples = draws(np.random.poisson, lam, size=(N,), device=device)
    assert_counts_fit(samples, log_poisson(lam))


def test_poisson_large_mean(device):
    samples = draws(np.random.poisson, 2.5e7, size=(N,), device=device)
    assert_moments(samples, 2.5e7, 2.5e7)


@pytest.mark.parametrize("n, p", [(20, 0.3), (30, 0.85), (100, 0.4), (1000, 0.93), (1, 0.5)])
def test_binomial_fits(n, p, device):  # inversion, inversion of 1 - p, BTRS, BTRS of 1 - p
    samples = draws(np.random.binomial, n, p, size=(N,), device=device)
    assert samples.max() <= n
    assert_counts_fit(samples, log_binomial(n, p))


def test_binomial_large_n(device):
    n, p = 10 ** 9, 0.3
    samples = draws(np.random.binomial, n, p, size=(N,), device=device)
    assert_moments(samples, n * p, n * p * (1 - p))


def test_negative_binomial_fits(device):
    n, p = 3.5, 0.4
    samples = draws(np.random.negative_binomial, n, p, size=(N,), device=device)
    assert_counts_fit(samples, lambda k: (math.lgamma(k + n) - math.lgamma(n) - math.lgamma(k + 1)
                                          + n * math.log(p) + k * math.log1p(-p)))


def test_multinomial(device):
    pvals = [0.1, 0.25, 0.4, 0.25]
    samples = draws(np.random.multinomial, 50, pvals, size=(N // 4, 2), device=device)
    assert samples.shape == (N // 4, 2, 4)
    assert (samples.sum(axis=-1) == 50).all()
    for j, p in enumerate(pvals):  # each count is Binomial(50, p_j)
        assert_counts_fit(samples[..., j], log_binomial(50, p))
    # Counts of two outcomes are negatively correlated: cov = -n p_i p_j.
    cov = onp.cov(samples[..., 1].ravel(), samples[..., 2].ravel())[0, 1]
    assert abs(cov - (-50 * 0.25 * 0.4)) < 4.5 * 50 * 0.25 / math.sqrt(N // 2)


def test_multinomial_pvals_array_and_remainder(device):
    np.random.seed(FIXED_SEED)
    x = np.random.multinomial(10, np.array([0.5, 0.5, 0.0], dtype="float64", device=device),
                              device=device).asnumpy()
    assert x.shape == (3,) and x.sum() == 10 and x[2] == 0
    # The last outcome takes what the others leave (here 0.7), as in NumPy.
    y = draws(np.random.multinomial, 4, [0.3, 0.5], size=(N,), device=device)
    assert_moments(y[:, 1], 4 * 0.7, 4 * 0.7 * 0.3, fourth_central=4 * 0.7 * 0.3)


def test_bernoulli(device):
    samples = draws(npx.random.bernoulli, 0.3, size=(N,), device=device)
    assert set(onp.unique(samples)) <= {0.0, 1.0}
    assert_moments(samples, 0.3, 0.21, fourth_central=0.21)
    from_logit = draws(npx.random.bernoulli, logit=math.log(0.3 / 0.7), size=(N,), device=device)
    onp.testing.assert_array_equal(from_logit, samples)  # the same uniforms and threshold


def test_multivariate_normal(device):
    mean = onp.array([1.0, -2.0, 0.5])
    cov = onp.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]])
    samples = draws(np.random.multivariate_normal, np.array(mean, dtype="float64", device=device),
                    np.array(cov, dtype="float64", device=device), size=(N // 2, 2),
                    dtype="float64")
    assert samples.shape == (N // 2, 2, 3)
    flat = samples.reshape(-1, 3)
    n = flat.shape[0]
    onp.testing.assert_array_less(abs(flat.mean(axis=0) - mean), 4.5 * onp.sqrt(onp.diag(cov) / n))
    sample_cov = onp.cov(flat, rowvar=False)
    # var of a product of two normals: cov_ij^2 + cov_ii cov_jj
    se = onp.sqrt((cov ** 2 + onp.outer(onp.diag(cov), onp.diag(cov))) / n)
    onp.testing.assert_array_less(abs(sample_cov - cov), 4.5 * se)
    # Any direction v is N(v.mean, v cov v): Kolmogorov-Smirnov on one projection.
    v = onp.array([0.3, -1.0, 2.0])
    assert_fits(flat @ v, lambda x: normal_cdf((x - v @ mean) / math.sqrt(v @ cov @ v)))


# ---------------------------------------------------------------------------------------------
# Array parameters, size, out=, dtype
# ---------------------------------------------------------------------------------------------

def test_array_parameters_broadcast(device):
    scale = np.array([[1.0], [10.0], [100.0]], device=device)  # float32: cast to float64
    np.random.seed(FIXED_SEED)
    x = np.random.exponential(scale, size=(3, 4000), device=device).asnumpy()
    assert x.shape == (3, 4000) and x.dtype == onp.float32
    means = x.mean(axis=1)
    onp.testing.assert_array_less(abs(means / onp.array([1.0, 10.0, 100.0]) - 1), 4.5 / 63)
    # size None: the parameters' broadcast shape
    lam = np.array([1.0, 50.0], device=device)
    assert np.random.poisson(lam, device=device).shape == (2,)
    assert np.random.gamma(np.array([[1.0], [2.0]]), np.array([1.0, 2.0, 3.0])).shape == (2, 3)
    assert np.random.binomial(np.array([5.0, 8.0], device=device), 0.5).dtype == onp.int64
    # each element follows its own parameters
    np.random.seed(FIXED_SEED)
    g = np.random.gamma(np.array([0.5, 50.0], dtype="float64", device=device), 2.0,
                        size=(5000, 2), dtype="float64").asnumpy()
    assert_fits(g[:, 0], gamma_cdf(0.5, 2.0))
    assert_fits(g[:, 1], gamma_cdf(50.0, 2.0))
    b = draws(np.random.binomial, np.array([10.0, 400.0], device=device),
              np.array([[0.2], [0.9]], device=device), size=(5000, 2, 2))
    for i, p in enumerate([0.2, 0.9]):
        for j, n in enumerate([10, 400]):
            assert_counts_fit(b[:, i, j], log_binomial(n, p))


def test_array_bounds_uniform_and_normal(device):
    low = np.array([0.0, 10.0, -5.0], device=device)
    np.random.seed(FIXED_SEED)
    u = np.random.uniform(low, low + 2.0, size=(4000, 3), device=device).asnumpy()
    assert (u >= low.asnumpy()).all() and (u <= low.asnumpy() + 2).all()
    n = draws(np.random.normal, np.array([0.0, 100.0], device=device),
              np.array([1.0, 0.01], device=device), size=(4000, 2))
    assert_moments(n[:, 0], 0.0, 1.0)
    assert_moments(n[:, 1], 100.0, 1e-4)


def test_scalar_uniform_and_normal_unchanged(device):
    """Scalar parameters still run the native uniform / normal ops: same numbers as before."""
    np.random.seed(7)
    a = np.random.normal(2.0, 3.0, size=(100,), device=device).asnumpy()
    np.random.seed(7)
    base = pymx._c.core.invoke("normal", [], {"shape": (100,), "dtype": "float32", "loc": 2.0,
                                              "scale": 3.0}, device=device)[0].asnumpy()
    onp.testing.assert_array_equal(a, base)


def test_size_mismatch_is_an_error():
    with pytest.raises(ValueError, match=r"do not broadcast to size \(4,\)"):
        np.random.exponential(np.ones((3,)), size=(4,))
    with pytest.raises(ValueError, match="do not broadcast together"):
        np.random.gamma(np.ones((3,)), np.ones((2,)))


@pytest.mark.parametrize("fn, args", [
    (np.random.gamma, (2.0,)), (np.random.exponential, (1.0,)), (np.random.poisson, (3.0,)),
    (np.random.binomial, (10, 0.3)), (np.random.beta, (2.0, 3.0)), (np.random.laplace, ()),
    (np.random.uniform, (np.zeros(1), 1.0)), (np.random.negative_binomial, (3, 0.5)),
])
def test_out_and_dtype(fn, args, device):
    for dtype in ("float32", "float64"):
        out = np.zeros((3, 4), dtype=dtype, device=device)
        np.random.seed(FIXED_SEED)
        result = fn(*args, out=out)
        assert result is out and out.dtype == dtype
        np.random.seed(FIXED_SEED)
        again = fn(*args, size=(3, 4), dtype=dtype, device=device)
        assert again.dtype == dtype
        onp.testing.assert_array_equal(out.asnumpy(), again.asnumpy())
    assert fn(*args, size=(2,), dtype="float16", device=device).dtype == onp.float16
    with pytest.raises(ValueError, match="shape"):
        fn(*args, size=(2, 2), out=np.zeros((3,), device=device))


def test_count_dtypes(device):
    np.random.seed(FIXED_SEED)
    as_int64 = np.random.poisson(4.0, size=(50,), device=device)
    np.random.seed(FIXED_SEED)
    as_int32 = np.random.poisson(4.0, size=(50,), dtype="int32", device=device)
    np.random.seed(FIXED_SEED)
    as_float = np.random.poisson(4.0, size=(50,), dtype="float64", device=device)
    assert (as_int64.dtype, as_int32.dtype) == (onp.int64, onp.int32)
    onp.testing.assert_array_equal(as_int64.asnumpy(), as_int32.asnumpy())
    onp.testing.assert_array_equal(as_int64.asnumpy(), as_float.asnumpy())


def test_counts_beyond_int32_saturate(device):
    x = np.random.poisson(np.array([3.0, 5e9], device=device), size=(4, 2), dtype="int32",
                          device=device).asnumpy()
    assert (x[:, 1] == onp.iinfo(onp.int32).max).all() and (x[:, 0] < 100).all()


def test_degenerate_parameters(device):
    assert (np.random.gamma(0.0, 2.0, size=(5,), device=device).asnumpy() == 0).all()
    assert (np.random.poisson(0.0, size=(5,), device=device).asnumpy() == 0).all()
    assert (np.random.binomial(7, 1.0, size=(5,), device=device).asnumpy() == 7).all()
    assert (np.random.binomial(0, 0.5, size=(5,), device=device).asnumpy() == 0).all()
    assert (np.random.weibull(0.0, size=(5,), device=device).asnumpy() == 0).all()
    assert (np.random.exponential(0.0, size=(5,), device=device).asnumpy() == 0).all()
    assert (np.random.negative_binomial(2, 1.0, size=(5,), device=device).asnumpy() == 0).all()
    assert np.random.gamma(2.0, size=(0, 3), device=device).shape == (0, 3)


# ---------------------------------------------------------------------------------------------
# Parameter checks
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: np.random.exponential(-1.0), "exponential: scale must be non-negative, got -1.0"),
    (lambda: np.random.normal(0.0, -2.0), "normal: scale must be non-negative, got -2.0"),
    (lambda: np.random.gamma(-0.5), "gamma: shape must be non-negative, got -0.5"),
    (lambda: np.random.gamma(1.0, -1.0), "gamma: scale must be non-negative, got -1.0"),
    (lambda: np.random.beta(0.0, 1.0), "beta: a must be positive, got 0.0"),
    (lambda: np.random.beta(1.0, float("nan")), "beta: b must be positive, got nan"),
    (lambda: np.random.chisquare(0), "chisquare: df must be positive, got 0.0"),
    (lambda: np.random.f(1.0, -3), "f: dfden must be positive, got -3.0"),
    (lambda: np.random.standard_t(0.0), "standard_t: df must be positive, got 0.0"),
    (lambda: np.random.poisson(-1.0), r"poisson: lam must be in \[0, .*\], got -1.0"),
    (lambda: np.random.poisson(1e19), r"poisson: lam must be in \[0, .*\], got 1e\+19"),
    (lambda: np.random.binomial(-1, 0.5), r"binomial: n must be an integer .*, got -1.0"),
    (lambda: np.random.binomial(2.5, 0.5), r"binomial: n must be an integer .*, got 2.5"),
    (lambda: np.random.binomial(5, 1.5), r"binomial: p must be in \[0, 1\], got 1.5"),
    (lambda: np.random.negative_binomial(0, 0.5), "negative_binomial: n must be positive"),
    (lambda: np.random.negative_binomial(1, 0.0), r"negative_binomial: p must be in \(0, 1\]"),
    (lambda: np.random.laplace(0, -1), "laplace: scale must be non-negative, got -1.0"),
    (lambda: np.random.gumbel(0, -1), "gumbel: scale must be non-negative, got -1.0"),
    (lambda: np.random.logistic(0, -1), "logistic: scale must be non-negative, got -1.0"),
    (lambda: np.random.lognormal(0, -1), "lognormal: sigma must be non-negative, got -1.0"),
    (lambda: np.random.rayleigh(-1), "rayleigh: scale must be non-negative, got -1.0"),
    (lambda: np.random.weibull(-1), "weibull: a must be non-negative, got -1.0"),
    (lambda: np.random.pareto(0), "pareto: a must be positive, got 0.0"),
    (lambda: np.random.power(-2), "power: a must be positive, got -2.0"),
    (lambda: npx.random.bernoulli(1.5), r"bernoulli: prob must be in \[0, 1\], got 1.5"),
    (lambda: npx.random.bernoulli(), "exactly one of prob and logit"),
    (lambda: npx.random.bernoulli(0.5, logit=0.0), "exactly one of prob and logit"),
    (lambda: npx.random.bernoulli(logit=float("nan")), "bernoulli: logit must be a number"),
    (lambda: np.random.multinomial(-1, [0.5, 0.5]), "n must be a non-negative integer, got -1"),
    (lambda: np.random.multinomial(3, [0.7, 0.6, 0.1]), r"sum\(pvals\[:-1\]\) = 1.3"),
    (lambda: np.random.multinomial(3, [[0.5, 0.5]]), "pvals must be a non-empty 1-d"),
    (lambda: np.random.multinomial(3, [-0.1, 1.1]), r"pvals must be in \[0, 1\], got -0.1"),
    (lambda: np.random.multivariate_normal(np.zeros(2), np.eye(3)), "mean must be 1-d and cov"),
])
def test_parameter_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_array_parameter_errors_name_the_value(device):
    scale = np.array([1.0, -3.0, 2.0, -4.0], device=device)
    with pytest.raises(ValueError, match=r"exponential: scale must be non-negative, got -3.0 "
                                         r"\(one of 2 such values in an array of shape \(4,\)\)"):
        np.random.exponential(scale)
    with pytest.raises(ValueError, match=r"binomial: p must be in \[0, 1\], got 2.0"):
        np.random.binomial(3, np.array([0.5, 2.0], device=device))


def test_multivariate_normal_needs_positive_definite_cov():
    with pytest.raises(np.linalg.LinAlgError):
        np.random.multivariate_normal(np.zeros(2), np.array([[1.0, 2.0], [2.0, 1.0]]))


# ---------------------------------------------------------------------------------------------
# Determinism
# ---------------------------------------------------------------------------------------------

SAMPLERS = [
    lambda d: np.random.gamma(np.array([0.2, 3.0, 40.0], device=d), 2.0, size=(600, 3),
                              dtype="float64", device=d),
    lambda d: np.random.poisson(np.array([2.0, 30.0, 1e5], device=d), size=(600, 3), device=d),
    lambda d: np.random.binomial(np.array([5.0, 60.0, 1e6], device=d), 0.3, size=(600, 3),
                                 device=d),
    lambda d: np.random.beta(0.5, 0.5, size=(300,), device=d),
    lambda d: np.random.laplace(size=(300,), device=d),
    lambda d: np.random.multinomial(20, [0.2, 0.3, 0.5], size=(50,), device=d),
]


@pytest.mark.parametrize("sampler", range(len(SAMPLERS)))
def test_same_seed_same_numbers(sampler, device):
    np.random.seed(99)
    first = SAMPLERS[sampler](device).asnumpy()
    second = SAMPLERS[sampler](device).asnumpy()
    np.random.seed(99)
    again = SAMPLERS[sampler](device).asnumpy()
    onp.testing.assert_array_equal(first, again)
    assert not onp.array_equal(first, second)


DETERMINISM_SCRIPT = """
import numpy as onp
from pymx import np
np.random.seed(5)
parts = [np.random.gamma(np.array([0.4, 7.0]), 1.0, size=(40000, 2), dtype='float64'),
         np.random.poisson(np.array([3.0, 300.0]), size=(40000, 2)),
         np.random.binomial(np.array([9.0, 5000.0]), 0.7, size=(40000, 2)),
         np.random.standard_t(3.0, size=(1000,))]
print(onp.concatenate([p.asnumpy().astype('float64').ravel() for p in parts]).tobytes().hex())
"""


def test_threaded_engine_equals_naive_engine_bitwise():
    import os
    outputs = []
    for env in ({"PYMX_ENGINE": "threaded", "PYMX_CPU_WORKERS": "2"}, {"PYMX_ENGINE": "naive"}):
        result = run_python(DETERMINISM_SCRIPT, env={**os.environ, **env})
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]


def test_hybridized_sampling_equals_imperative(device):
    from pymx import gluon

    class Noisy(gluon.HybridBlock):
        def forward(self, x):
            return (x + np.random.gamma(np.abs(x) + 0.5, 2.0) + np.random.poisson(3.0, size=x.shape)
                    + np.random.laplace(x, 1.0) + np.random.binomial(20, 0.4, size=x.shape))

    x = np.array([[1.0, -2.0, 3.0], [0.5, 0.1, 9.0]], device=device)
    results = []
    for hybridize in (False, True):
        net = Noisy()
        if hybridize:
            net.hybridize()
        np.random.seed(FIXED_SEED)
        results.append([net(x).asnumpy() for _ in range(3)])  # trace, then replays
    onp.testing.assert_array_equal(onp.stack(results[0]), onp.stack(results[1]))
    assert not onp.array_equal(results[1][1], results[1][2])  # each replay draws anew


def test_pathwise_gradients(device):
    """d/d scale of scale * (a draw that does not depend on scale) is the draw itself."""
    from pymx import autograd
    loc = np.array([1.0, 2.0], dtype="float64", device=device)
    scale = np.array([0.5, 3.0], dtype="float64", device=device)
    for p in (loc, scale):
        p.attach_grad()
    np.random.seed(FIXED_SEED)
    with autograd.record():
        y = np.random.normal(loc, scale, size=(4, 2), dtype="float64")
    y.backward()
    standard = (y.asnumpy() - loc.asnumpy()) / scale.asnumpy()
    onp.testing.assert_allclose(loc.grad.asnumpy(), [4.0, 4.0])
    onp.testing.assert_allclose(scale.grad.asnumpy(), standard.sum(axis=0), rtol=1e-12)
    theta = np.array([2.0], dtype="float64", device=device)
    theta.attach_grad()
    with autograd.record():
        g = np.random.gamma(3.0, theta, size=(5,), dtype="float64")
    g.backward()
    onp.testing.assert_allclose(theta.grad.asnumpy(), [g.asnumpy().sum() / 2.0], rtol=1e-12)
    alpha = np.array([2.0], dtype="float64", device=device)
    alpha.attach_grad()
    with pytest.raises(ValueError, match="random_gamma' is not differentiable"):
        with autograd.record():
            g = np.random.gamma(alpha, size=(5,), dtype="float64")
        g.backward()


# ---------------------------------------------------------------------------------------------
# npx.random.uniform_n / normal_n, dtypes
# ---------------------------------------------------------------------------------------------

def test_uniform_n_and_normal_n(device):
    low = np.array([0.0, 10.0], device=device)
    u = npx.random.uniform_n(low, low + 1.0, batch_shape=(3000,), device=device)
    assert u.shape == (3000, 2) and u.dtype == onp.float32
    u = u.asnumpy()
    assert (u[:, 0] < 1).all() and (u[:, 1] >= 10).all()
    n = npx.random.normal_n(np.zeros((2, 1), device=device), np.ones((3,), device=device),
                            batch_shape=4, dtype="float64", device=device)
    assert n.shape == (4, 2, 3) and n.dtype == onp.float64
    assert npx.random.normal_n(batch_shape=(5,), device=device).shape == (5,)


def test_continuous_samplers_refuse_integer_dtypes():
    with pytest.raises(TypeError, match="gamma: dtype must be a floating-point type, got int32"):
        np.random.gamma(1.0, dtype="int32")
    with pytest.raises(TypeError, match="exponential: dtype must be a floating-point type"):
        np.random.exponential(size=(2,), dtype="int64")
