"""pymx.np.random: sampling on a device. Seeds are per process: seed(s) makes every later
sampling op deterministic (each op takes the next seed of one stream, in push order).

Every sampler follows MXNet 2.x's np.random signatures: parameters are Python numbers or arrays
that broadcast against `size` (size None: the parameters' broadcast shape; with `out` and no
size, out's shape); `dtype` (float32 by default, int64 for counts), `device` (`ctx` is its
older name) and `out`. Parameters are checked as NumPy checks them, array ones too (which waits
for them), and a ValueError names the offending value.

How each distribution is drawn (all arithmetic in float64, cast to `dtype` once at the end;
U is uniform on [0, 1), N standard normal, E = -log(1 - U) standard exponential):
  - uniform, normal: native ops (random.cc); with array parameters low + (high - low) U and
    loc + scale N.
  - gamma, beta, poisson, binomial: native per-element rejection samplers
    (random_distributions.cc: Marsaglia-Tsang, X / (X + Y) of two gammas in log space,
    inversion / PTRS, inversion / BTRS), each element on its own counter-based stream. CPU and
    GPU run them on the same numbers: counts are equal, real values equal up to a few ulps
    (CUDA's logarithms and exponentials round differently from the host's).
  - chisquare: 2 Gamma(df / 2); f: a ratio of scaled chi-squares;
    standard_t: N / sqrt(chisquare(df) / df); negative_binomial: Poisson(Gamma(n, (1 - p) / p));
    multinomial: binomials conditioned on the counts so far, one category at a time.
  - exponential, laplace, gumbel, logistic, rayleigh, weibull, pareto, power: the inverse CDF
    applied to U (through E); lognormal: exp of a normal; multivariate_normal: mean + L N with L
    the Cholesky factor of cov.

Gradients: under autograd.record() the compositions are differentiable where the draw is a
smooth function of its parameters (normal's loc and scale, exponential's and gamma's scale,
lognormal, laplace, ...: the pathwise or reparameterization gradient). The native samplers have
no gradient in their own parameters (gamma's shape, beta's a and b, counts): a gradient
requested through one raises a ValueError naming the op.

Deliberate differences from NumPy / MXNet 2.x:
  - Counts (poisson, binomial, negative_binomial, multinomial) are int64 by default, as in
    NumPy. `dtype` may be any numeric type: int32 counts beyond its range saturate at its
    maximum; types other than int32, int64, float32 and float64 are cast from float64 draws as
    astype casts. binomial's n must hold integer values up to 2^53 (a float n such as 2.5 is a
    ValueError, where NumPy truncates).
  - multivariate_normal factors cov by Cholesky, so cov must be positive definite (NumPy's SVD
    also takes singular covariances); check_valid and tol are accepted and unused.
  - Inverse-CDF samplers take U on the 2^-53 grid of [0, 1), so their tails end where that grid
    ends (E <= 36.7: a probability of 2^-53 is cut off) and U = 0 (probability 2^-53) gives the
    infinite end value for gumbel, logistic and laplace.
  - uniform with array bounds may return `high` itself when low + (high - low) U rounds up in the
    output dtype (as NumPy's documentation warns); with scalar bounds it never does.
"""
import numbers

import numpy as _onp

from pymx._c import core as _c_core
from pymx.base import DEFAULT_DTYPE, as_dtype, dtype_name
from pymx.device import current_device
from pymx.numpy import _core as _np

__all__ = ["seed", "uniform", "normal", "randn", "rand", "randint", "choice", "shuffle",
           "permutation", "exponential", "gamma", "beta", "chisquare", "f", "standard_t",
           "poisson", "binomial", "negative_binomial", "multinomial", "laplace", "gumbel",
           "logistic", "lognormal", "rayleigh", "weibull", "pareto", "power",
           "multivariate_normal"]

# The dtypes the native count samplers write (others are cast from float64).
_COUNT_DTYPES = ("int32", "int64", "float32", "float64")

# NumPy's bound on Poisson means: beyond it, draws overflow int64.
_POISSON_LAM_MAX = float(_onp.iinfo(_onp.int64).max - _onp.sqrt(_onp.iinfo(_onp.int64).max) * 10)


def seed(seed):
    """Seeds every later random op of this process."""
    if not isinstance(seed, (numbers.Integral, _onp.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    _c_core.random_seed(int(seed))


def _size(size):
    if size is None:
        return ()
    return _np._shape_tuple(size)


# ---------------------------------------------------------------------------------------------
# Parameters: Python floats, or float64 arrays on the sampling device
# ---------------------------------------------------------------------------------------------

def _parameter(value, device):
    """A float for a scalar (a size-1 array of any shape stays an array: its shape broadcasts),
    else a float64 pymx array on `device`."""
    if isinstance(value, _np.ndarray):
        if value.device != device:
            value = value.to_device(device)
        return value if value.dtype == _onp.float64 else value.astype(_onp.float64)
    if _np._is_scalar(value):
        return float(_np._scalar_value(value))
    return _np._to_array(value, device=device, dtype=_onp.float64)


def _check(op, name, value, valid, requirement):
    """Raises ValueError naming the first value of `value` (a float or an array) that is not
    `valid` (a predicate written with comparisons, so that it works on both; NaN fails it)."""
    if isinstance(value, float):
        if not valid(value):
            raise ValueError(f"{op}: {name} must be {requirement}, got {value}")
        return
    if value.size and bool(_np.any(_np.logical_not(valid(value)))._values_outside_trace()):
        host = value._values_outside_trace()
        bad = host[~valid(host)]
        raise ValueError(f"{op}: {name} must be {requirement}, got {bad.flat[0]} (one of "
                         f"{bad.size} such values in an array of shape {host.shape})")


def _device(device, ctx, out, params):
    """Where to sample: device (or ctx), else out's device, else the first array parameter's."""
    if device is not None or ctx is not None:
        return device or ctx
    if out is not None:
        return out.device
    for value in params:
        if isinstance(value, _np.ndarray):
            return value.device
    return current_device()


def _broadcast_shape(shapes):
    """NumPy's broadcast of `shapes`, or None when they do not broadcast. (numpy.broadcast_shapes
    would refuse shapes too big for an array, whose allocation should fail instead, naming its
    size.)"""
    result = []
    for axis in range(1, max((len(s) for s in shapes), default=0) + 1):
        sizes = {s[-axis] for s in shapes if len(s) >= axis} - {1}
        if len(sizes) > 1:
            return None
        result.append(sizes.pop() if sizes else 1)
    return tuple(reversed(result))


def _output_shape(op, size, out, params):
    """`size` (which every parameter must broadcast to), else out's shape, else the parameters'
    broadcast shape."""
    shapes = [() if isinstance(p, float) else p.shape for p in params]
    common = _broadcast_shape(shapes)
    if common is None:
        raise ValueError(f"{op}: parameters of shapes {', '.join(map(str, shapes))} do not "
                         f"broadcast together")
    if size is None:
        return out.shape if out is not None else common
    shape = _size(size)
    if _broadcast_shape([shape, common]) != shape:
        raise ValueError(f"{op}: parameters of shapes {', '.join(map(str, shapes))} do not "
                         f"broadcast to size {shape}")
    return shape


def _dtype(dtype, out, default):
    if dtype is not None:
        return as_dtype(dtype)
    return out.dtype if out is not None else default


def _finish(result, dtype, out):
    """result (float64) cast to `dtype`, written into `out` when given."""
    if out is not None and out.shape != result.shape:
        raise ValueError(f"out has shape {out.shape}, the samples have shape {result.shape}")
    if out is None and result.dtype == dtype:
        return result
    return _c_core.invoke("cast", [result], {"dtype": dtype_name(dtype)}, out=out)[0]


def _filled(value, shape, device):
    """value (a float or an array) as a float64 array of `shape`."""
    if isinstance(value, float):
        return _np.full(shape, value, dtype=_onp.float64, device=device)
    return _np.broadcast_to(value, shape)


def _prepare(op, params, size, dtype, device, ctx, out, counts=False):
    """(parameters, shape, dtype, device) of a sampling call. Counts default to int64 and may
    take any numeric dtype; other samples default to float32 and take floating dtypes only."""
    device = _device(device, ctx, out, params)
    params = [_parameter(p, device) for p in params]
    dtype = _dtype(dtype, out, _onp.dtype(_onp.int64) if counts else DEFAULT_DTYPE)
    if not counts and not _np._is_float(dtype):
        raise TypeError(f"{op}: dtype must be a floating-point type, got {dtype_name(dtype)}")
    return params, _output_shape(op, size, out, params), dtype, device


# ---------------------------------------------------------------------------------------------
# Draws in float64
# ---------------------------------------------------------------------------------------------

def _standard(op, shape, device):
    """U[0, 1) (op 'uniform') or N(0, 1) (op 'normal') in float64."""
    return _c_core.invoke(op, [], {"shape": shape, "dtype": _onp.float64}, device=device)[0]


def _standard_exponential(shape, device):
    """E = -log(1 - U): 1 - U is in (0, 1], so E is finite."""
    return _np.negative(_np.log1p(_np.negative(_standard("uniform", shape, device))))


def _gamma(alpha, scale, shape, device):
    """scale * Gamma(alpha) in float64 (differentiable in scale)."""
    draws = _c_core.invoke("random_gamma", [_filled(alpha, shape, device)],
                           {"dtype": "float64"})[0]
    return draws if isinstance(scale, float) and scale == 1.0 else _np.multiply(scale, draws)


def _native(op, params, shape, device, dtype, out):
    """A native sampler's draws, straight into `out` when its dtype is one the op writes."""
    inputs = [_filled(p, shape, device) for p in params]
    if out is not None and out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, the samples have shape {shape}")
    written = _COUNT_DTYPES if op in ("random_poisson", "random_binomial") else ("float32",
                                                                              "float64")
    if dtype.name in written:
        return _c_core.invoke(op, inputs, {"dtype": dtype_name(dtype)}, out=out)[0]
    drawn = _c_core.invoke(op, inputs, {"dtype": "float64"})[0]
    return _finish(drawn, dtype, out)


# ---------------------------------------------------------------------------------------------
# Uniform and normal
# ---------------------------------------------------------------------------------------------

def _sample(op, size, dtype, device, out, **attrs):
    dtype = _dtype(dtype, out, DEFAULT_DTYPE)
    shape = out.shape if out is not None and size is None else _size(size)
    return _c_core.invoke(op, [], {"shape": shape, "dtype": dtype, **attrs},
                          device=device or (out.device if out is not None else current_device()),
                          out=out)[0]


def uniform(low=0.0, high=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples U[low, high); low and high may be arrays."""
    (low, high), shape, dtype, device = _prepare("uniform", [low, high], size, dtype, device,
                                                 ctx, out)
    if isinstance(low, float) and isinstance(high, float):
        return _sample("uniform", shape, dtype, device, out, low=low, high=high)
    draws = _standard("uniform", shape, device)
    return _finish(_np.add(low, _np.multiply(_np.subtract(high, low), draws)), dtype, out)


def normal(loc=0.0, scale=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples N(loc, scale^2); loc and scale may be arrays."""
    (loc, scale), shape, dtype, device = _prepare("normal", [loc, scale], size, dtype, device,
                                                  ctx, out)
    _check("normal", "scale", scale, lambda v: v >= 0, "non-negative")
    if isinstance(loc, float) and isinstance(scale, float):
        return _sample("normal", shape, dtype, device, out, loc=loc, scale=scale)
    draws = _standard("normal", shape, device)
    return _finish(_np.add(loc, _np.multiply(scale, draws)), dtype, out)


def randn(*size, **kwargs):
    return normal(0.0, 1.0, size=size, **kwargs)


def rand(*size, **kwargs):
    return uniform(0.0, 1.0, size=size, **kwargs)


def lognormal(mean=0.0, sigma=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples exp(N(mean, sigma^2))."""
    (mean, sigma), shape, dtype, device = _prepare("lognormal", [mean, sigma], size, dtype,
                                                   device, ctx, out)
    _check("lognormal", "sigma", sigma, lambda v: v >= 0, "non-negative")
    draws = _standard("normal", shape, device)
    return _finish(_np.exp(_np.add(mean, _np.multiply(sigma, draws))), dtype, out)


# ---------------------------------------------------------------------------------------------
# Inverse-CDF distributions
# ---------------------------------------------------------------------------------------------

def exponential(scale=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the exponential distribution of mean `scale`."""
    (scale,), shape, dtype, device = _prepare("exponential", [scale], size, dtype, device, ctx,
                                              out)
    _check("exponential", "scale", scale, lambda v: v >= 0, "non-negative")
    return _finish(_np.multiply(scale, _standard_exponential(shape, device)), dtype, out)


def laplace(loc=0.0, scale=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the Laplace (double exponential) distribution."""
    (loc, scale), shape, dtype, device = _prepare("laplace", [loc, scale], size, dtype, device,
                                                  ctx, out)
    _check("laplace", "scale", scale, lambda v: v >= 0, "non-negative")
    # u = U - 1/2 in [-1/2, 1/2): loc - scale sign(u) log(1 - 2|u|).
    u = _np.subtract(_standard("uniform", shape, device), 0.5)
    magnitude = _np.negative(_np.log1p(_np.multiply(_np.abs(u), -2.0)))
    return _finish(_np.add(loc, _np.multiply(scale, _np.multiply(_np.sign(u), magnitude))),
                   dtype, out)


def gumbel(loc=0.0, scale=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the Gumbel (extreme value type I) distribution: loc - scale log(E)."""
    (loc, scale), shape, dtype, device = _prepare("gumbel", [loc, scale], size, dtype, device,
                                                  ctx, out)
    _check("gumbel", "scale", scale, lambda v: v >= 0, "non-negative")
    log_e = _np.log(_standard_exponential(shape, device))
    return _finish(_np.subtract(loc, _np.multiply(scale, log_e)), dtype, out)


def logistic(loc=0.0, scale=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the logistic distribution: loc + scale log(U / (1 - U))."""
    (loc, scale), shape, dtype, device = _prepare("logistic", [loc, scale], size, dtype, device,
                                                  ctx, out)
    _check("logistic", "scale", scale, lambda v: v >= 0, "non-negative")
    u = _standard("uniform", shape, device)
    log_odds = _np.subtract(_np.log(u), _np.log1p(_np.negative(u)))
    return _finish(_np.add(loc, _np.multiply(scale, log_odds)), dtype, out)


def rayleigh(scale=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the Rayleigh distribution: scale sqrt(2 E)."""
    (scale,), shape, dtype, device = _prepare("rayleigh", [scale], size, dtype, device, ctx, out)
    _check("rayleigh", "scale", scale, lambda v: v >= 0, "non-negative")
    radius = _np.sqrt(_np.multiply(_standard_exponential(shape, device), 2.0))
    return _finish(_np.multiply(scale, radius), dtype, out)


def weibull(a, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the Weibull distribution of shape a (scale 1): E^(1/a); a = 0 gives 0, as NumPy."""
    (a,), shape, dtype, device = _prepare("weibull", [a], size, dtype, device, ctx, out)
    _check("weibull", "a", a, lambda v: v >= 0, "non-negative")
    if isinstance(a, float) and a == 0:
        return _finish(_np.zeros(shape, dtype=_onp.float64, device=device), dtype, out)
    draws = _np.power(_standard_exponential(shape, device), 1.0 / a)
    return _finish(draws if isinstance(a, float) else _np.where(a == 0, 0.0, draws), dtype, out)


def pareto(a, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the Pareto II (Lomax) distribution, as NumPy: exp(E / a) - 1."""
    (a,), shape, dtype, device = _prepare("pareto", [a], size, dtype, device, ctx, out)
    _check("pareto", "a", a, lambda v: v > 0, "positive")
    return _finish(_np.expm1(_np.divide(_standard_exponential(shape, device), a)), dtype, out)


def power(a, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the power distribution on [0, 1] (CDF x^a): (1 - U)^(1/a)."""
    (a,), shape, dtype, device = _prepare("power", [a], size, dtype, device, ctx, out)
    _check("power", "a", a, lambda v: v > 0, "positive")
    base = _np.subtract(1.0, _standard("uniform", shape, device))
    return _finish(_np.power(base, 1.0 / a), dtype, out)


# ---------------------------------------------------------------------------------------------
# Gamma family
# ---------------------------------------------------------------------------------------------

def gamma(shape, scale=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples Gamma(shape, scale) (mean shape * scale); shape 0 gives 0, as NumPy."""
    (alpha, scale), out_shape, dtype, device = _prepare("gamma", [shape, scale], size, dtype,
                                                        device, ctx, out)
    _check("gamma", "shape", alpha, lambda v: v >= 0, "non-negative")
    _check("gamma", "scale", scale, lambda v: v >= 0, "non-negative")
    if isinstance(scale, float) and scale == 1.0:
        return _native("random_gamma", [alpha], out_shape, device, dtype, out)
    return _finish(_gamma(alpha, scale, out_shape, device), dtype, out)


def beta(a, b, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples Beta(a, b) as X / (X + Y), X ~ Gamma(a), Y ~ Gamma(b) (native: through log-gamma
    draws, so that tiny a and b do not give 0 / 0)."""
    (a, b), shape, dtype, device = _prepare("beta", [a, b], size, dtype, device, ctx, out)
    _check("beta", "a", a, lambda v: v > 0, "positive")
    _check("beta", "b", b, lambda v: v > 0, "positive")
    return _native("random_beta", [a, b], shape, device, dtype, out)


def chisquare(df, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the chi-square distribution with df degrees of freedom: 2 Gamma(df / 2)."""
    (df,), shape, dtype, device = _prepare("chisquare", [df], size, dtype, device, ctx, out)
    _check("chisquare", "df", df, lambda v: v > 0, "positive")
    return _finish(_gamma(df * 0.5, 2.0, shape, device), dtype, out)


def _chisquare_per_df(df, shape, device):
    """chisquare(df) / df = Gamma(df / 2, 2 / df), in float64."""
    half = df * 0.5
    return _gamma(half, 1.0 / half, shape, device)


def f(dfnum, dfden, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the F distribution: (chisquare(dfnum) / dfnum) / (chisquare(dfden) / dfden)."""
    (dfnum, dfden), shape, dtype, device = _prepare("f", [dfnum, dfden], size, dtype, device,
                                                    ctx, out)
    _check("f", "dfnum", dfnum, lambda v: v > 0, "positive")
    _check("f", "dfden", dfden, lambda v: v > 0, "positive")
    return _finish(_np.divide(_chisquare_per_df(dfnum, shape, device),
                              _chisquare_per_df(dfden, shape, device)), dtype, out)


def standard_t(df, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples Student's t distribution: N / sqrt(chisquare(df) / df)."""
    (df,), shape, dtype, device = _prepare("standard_t", [df], size, dtype, device, ctx, out)
    _check("standard_t", "df", df, lambda v: v > 0, "positive")
    normal_draws = _standard("normal", shape, device)
    return _finish(_np.divide(normal_draws, _np.sqrt(_chisquare_per_df(df, shape, device))),
                   dtype, out)


# ---------------------------------------------------------------------------------------------
# Counts
# ---------------------------------------------------------------------------------------------

def poisson(lam=1.0, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples Poisson(lam) counts (int64 unless dtype says otherwise)."""
    (lam,), shape, dtype, device = _prepare("poisson", [lam], size, dtype, device, ctx, out,
                                            counts=True)
    _check("poisson", "lam", lam, lambda v: (v >= 0) & (v <= _POISSON_LAM_MAX),
           f"in [0, {_POISSON_LAM_MAX:.6g}]")
    return _native("random_poisson", [lam], shape, device, dtype, out)


def binomial(n, p, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples Binomial(n, p) counts (int64 unless dtype says otherwise)."""
    (n, p), shape, dtype, device = _prepare("binomial", [n, p], size, dtype, device, ctx, out,
                                            counts=True)
    _check("binomial", "n", n, lambda v: (v >= 0) & (v <= 2.0 ** 53) & (v % 1 == 0),
           "an integer in [0, 2^53]")
    _check("binomial", "p", p, lambda v: (v >= 0) & (v <= 1), "in [0, 1]")
    return _native("random_binomial", [n, p], shape, device, dtype, out)


def negative_binomial(n, p, size=None, dtype=None, device=None, out=None, ctx=None):
    """Samples the failures before the n-th success of trials that succeed with probability p:
    Poisson(Gamma(n, (1 - p) / p)), n > 0 may be fractional (as NumPy)."""
    (n, p), shape, dtype, device = _prepare("negative_binomial", [n, p], size, dtype, device,
                                            ctx, out, counts=True)
    _check("negative_binomial", "n", n, lambda v: v > 0, "positive")
    _check("negative_binomial", "p", p, lambda v: (v > 0) & (v <= 1), "in (0, 1]")
    rates = _gamma(n, (1.0 - p) / p, shape, device)
    return _native("random_poisson", [rates], shape, device, dtype, out)


def multinomial(n, pvals, size=None, dtype=None, device=None, out=None, ctx=None):
    """Counts of n draws among len(pvals) outcomes, shape size + (len(pvals),). The last outcome
    takes the probability the others leave, as in NumPy."""
    if not isinstance(n, (numbers.Integral, _onp.integer)) or isinstance(n, bool) or n < 0:
        raise ValueError(f"multinomial: n must be a non-negative integer, got {n!r}")
    probabilities = pvals.asnumpy() if isinstance(pvals, _np.ndarray) else _onp.asarray(pvals)
    probabilities = probabilities.astype(_onp.float64)
    if probabilities.ndim != 1 or probabilities.size == 0:
        raise ValueError(f"multinomial: pvals must be a non-empty 1-d sequence, got shape "
                         f"{probabilities.shape}")
    if not ((probabilities >= 0) & (probabilities <= 1)).all():
        bad = probabilities[~((probabilities >= 0) & (probabilities <= 1))]
        raise ValueError(f"multinomial: pvals must be in [0, 1], got {bad[0]}")
    if probabilities[:-1].sum() > 1.0 + 1e-12:
        raise ValueError(f"multinomial: sum(pvals[:-1]) = {probabilities[:-1].sum():.6g} > 1.0")
    device = _device(device, ctx, out, [pvals])
    dtype = _dtype(dtype, out, _onp.dtype(_onp.int64))
    shape = _size(size)
    # Count j is Binomial(remaining draws, p_j / (probability not yet assigned)).
    remaining = _np.full(shape, float(n), dtype=_onp.float64, device=device)
    left, counts = 1.0, []
    for p_j in probabilities[:-1]:
        conditional = min(1.0, p_j / left) if left > 0 else 0.0
        count = _native("random_binomial", [remaining, conditional], shape, device,
                        _onp.dtype(_onp.float64), None)
        counts.append(count)
        remaining = _np.subtract(remaining, count)
        left -= p_j
    counts.append(remaining)
    return _finish(_np.stack(counts, axis=-1), dtype, out)


def multivariate_normal(mean, cov, size=None, check_valid=None, tol=None, dtype=None,
                        device=None, out=None, ctx=None):
    """Samples N(mean, cov), shape size + (k,), as mean + L z with cov = L L^T (Cholesky)."""
    device = _device(device, ctx, out, [mean, cov])
    mean = _parameter(mean, device)
    cov = _parameter(cov, device)
    mean_shape = () if isinstance(mean, float) else mean.shape
    cov_shape = () if isinstance(cov, float) else cov.shape
    if len(mean_shape) != 1 or cov_shape != mean_shape * 2:
        raise ValueError(f"multivariate_normal: mean must be 1-d and cov square of the same "
                         f"size, got shapes {mean_shape} and {cov_shape}")
    from pymx.numpy import linalg
    lower = linalg.cholesky(cov)
    lower.wait_to_read()  # a cov that is not positive definite raises LinAlgError here, not later
    shape = _size(size) + mean_shape
    z = _standard("normal", shape, device)
    samples = _np.add(mean, _np.matmul(z, _np.transpose(lower)))
    return _finish(samples, _dtype(dtype, out, DEFAULT_DTYPE), out)


# ---------------------------------------------------------------------------------------------
# Integers, permutations, choice
# ---------------------------------------------------------------------------------------------

def randint(low, high=None, size=None, dtype=None, device=None, out=None, ctx=None):
    if high is None:
        low, high = 0, low
    if int(low) >= int(high):
        raise ValueError(f"randint: low >= high (low={low}, high={high})")
    return _sample("randint", size, _onp.int64 if dtype is None else dtype, device or ctx, out,
                   low=int(low), high=int(high))


def permutation(x, device=None):
    """A permuted range(x) for an int, or a shuffled copy of array x (along axis 0)."""
    if isinstance(x, (numbers.Integral, _onp.integer)):
        return _c_core.invoke("permutation", [], {"n": int(x), "dtype": _onp.int64},
                              device=device or current_device())[0]
    x = _np._to_array(x)
    if x.ndim == 0:
        raise ValueError("permutation: x must be an integer or at least 1-dimensional")
    order = _c_core.invoke("permutation", [], {"n": x.shape[0], "dtype": _onp.int64},
                           device=x.device)[0]
    return _np.take(x, order, axis=0)


def shuffle(x):
    """Shuffles array x in place along axis 0."""
    if not isinstance(x, _np.ndarray):
        raise TypeError(f"shuffle expects a pymx ndarray, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError("shuffle: cannot shuffle a 0-d array")
    shuffled = permutation(x)
    _c_core.invoke("copy", [shuffled], out=x)


def _check_probabilities(p, given_dtype):
    """NumPy's checks of choice's p (float64 values on the host; `given_dtype` the dtype the
    caller passed them in, or None): each finite and non-negative, summing to 1 within sqrt(eps)
    of float64 or of the given float type, if coarser. The inverse-CDF draw would silently read
    anything else as some other distribution."""
    shown = _onp.array2string(p, threshold=8)
    if not _onp.isfinite(p).all() or (p < 0).any():
        raise ValueError(f"choice: probabilities must be finite and non-negative, got p={shown}")
    tolerance = _onp.sqrt(_onp.finfo(_onp.float64).eps)
    if given_dtype is not None and _onp.dtype(given_dtype).kind == "f":
        tolerance = max(tolerance, _onp.sqrt(_onp.finfo(given_dtype).eps))
    total = p.sum()
    if abs(total - 1.0) > tolerance:
        raise ValueError(f"choice: probabilities do not sum to 1 (sum {total:g}), p={shown}")


def choice(a, size=None, replace=True, p=None, device=None, ctx=None):
    """Samples from range(a) (an int) or from the 1-d array a."""
    device = device or ctx
    if isinstance(a, (numbers.Integral, _onp.integer)):
        n, values = int(a), None
    else:
        values = _np._to_array(a, device=device)
        if values.ndim != 1:
            raise ValueError(f"choice: a must be 1-dimensional, got shape {values.shape}")
        n = values.shape[0]
    if n <= 0:
        raise ValueError("choice: a must be non-empty")
    shape = _size(size)
    count = int(_onp.prod(shape, dtype=_onp.int64))
    device = device or (values.device if values is not None else current_device())
    if p is not None:
        # Inverse-CDF sampling: count the cumulative probabilities below each uniform draw.
        given_dtype = getattr(p, "dtype", None)
        p = _np._to_array(p, device=device, dtype=_onp.float64)
        if p.shape != (n,):
            raise ValueError(f"choice: p must have shape ({n},), got {p.shape}")
        _check_probabilities(p.asnumpy(), given_dtype)
        cdf = _np.cumsum(p)
        draws = uniform(0.0, 1.0, size=(count, 1), dtype=_onp.float64, device=device)
        index = _np.sum(_np.less_equal(_np.reshape(cdf, (1, n)), draws), axis=1)
        index = _np.minimum(index, n - 1)
        if not replace:
            raise ValueError("choice: replace=False with p is not supported")
    elif replace:
        index = randint(0, n, size=(count,), device=device)
    else:
        if count > n:
            raise ValueError(f"choice: cannot take a larger sample ({count}) than the population "
                             f"({n}) when replace=False")
        index = _np.take(permutation(n, device=device), _np.arange(count, dtype=_onp.int64,
                                                                   device=device))
    index = _np.reshape(index, shape)
    return index if values is None else _np.take(values, index)
