"""np.random's distributions on gpu(0) against cpu(0) with the same seed. The GPU runs the same
algorithms on the same per-element streams (Note [Per-element random streams] in
engine/src/ops/random_samplers.h), so counts are equal, and real-valued draws equal up to the
rounding of CUDA's transcendental functions: a few ulps of float64 (the tolerance, 1e-11, also
covers the cancellation where a result nears 0). The statistics of the GPU draws are checked in
test_np_random_distributions.py through its `device` fixture.
"""
import numpy as onp
import pytest

from pymx import np, npx
from pymx.device import cpu, gpu
from conftest import requires_gpu

pytestmark = requires_gpu

SEED = 2024


def on_both(fn):
    """fn(device) on cpu(0) and on gpu(0), each after seeding with SEED."""
    results = []
    for device in (cpu(0), gpu(0)):
        np.random.seed(SEED)
        results.append(fn(device).asnumpy())
    return results


@pytest.mark.parametrize("fn", [
    lambda d: np.random.poisson(np.array([0.3, 4.0, 9.9, 10.0, 75.0, 3e6], device=d),
                                size=(2000, 6), device=d),
    lambda d: np.random.binomial(np.array([1.0, 30.0, 400.0, 1e9], device=d),
                                 np.array([[0.02], [0.3], [0.5], [0.97]], device=d),
                                 size=(500, 4, 4), device=d),
    lambda d: np.random.negative_binomial(2.5, 0.3, size=(4000,), device=d),
    lambda d: np.random.multinomial(40, [0.1, 0.2, 0.3, 0.4], size=(1000,), device=d),
    lambda d: np.random.poisson(5.0, size=(300,), dtype="int32", device=d),
])
def test_counts_equal_the_cpu(fn):
    cpu_draws, gpu_draws = on_both(fn)
    onp.testing.assert_array_equal(gpu_draws, cpu_draws)


@pytest.mark.parametrize("fn", [
    lambda d: np.random.gamma(np.array([0.01, 0.5, 1.0, 3.0, 250.0], device=d), 2.0,
                              size=(2000, 5), dtype="float64", device=d),
    lambda d: np.random.beta(0.7, 2.0, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.chisquare(3.0, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.f(4.0, 9.0, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.standard_t(6.0, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.exponential(np.array([1.0, 3.0], device=d), size=(2000, 2),
                                    dtype="float64", device=d),
    lambda d: np.random.laplace(1.0, 2.0, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.gumbel(1.0, 2.0, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.logistic(1.0, 2.0, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.lognormal(0.5, 0.3, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.rayleigh(2.0, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.weibull(1.5, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.pareto(2.5, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.power(3.0, size=(4000,), dtype="float64", device=d),
    lambda d: np.random.uniform(np.array([0.0, -4.0], device=d), 5.0, size=(2000, 2),
                                dtype="float64", device=d),
    lambda d: np.random.normal(np.array([0.0, 10.0], device=d), 3.0, size=(2000, 2),
                               dtype="float64", device=d),
    lambda d: np.random.multivariate_normal(np.array([1.0, 2.0], dtype="float64", device=d),
                                            np.array([[2.0, 0.5], [0.5, 1.0]], dtype="float64",
                                                     device=d), size=(2000,), dtype="float64"),
    lambda d: npx.random.bernoulli(np.array([0.1, 0.5, 0.9], device=d), size=(1000, 3),
                                   device=d),
])
def test_real_draws_equal_the_cpu(fn):
    cpu_draws, gpu_draws = on_both(fn)
    onp.testing.assert_allclose(gpu_draws, cpu_draws, rtol=1e-11, atol=1e-11)


def test_gamma_float32_output_equals_the_cpu():
    cpu_draws, gpu_draws = on_both(
        lambda d: np.random.gamma(np.array([0.2, 5.0], device=d), size=(3000, 2), device=d))
    assert gpu_draws.dtype == onp.float32
    onp.testing.assert_allclose(gpu_draws, cpu_draws, rtol=1e-6)
