"""npx.gamma and npx.gammaln against float64 references from Python's math module (math.gamma,
math.lgamma) in every float dtype and for integers; their poles, infinities and NaN; their
gradients (gamma * digamma and digamma) against central differences; the digamma kernel behind
them against known values, the recurrence psi(x + 1) = psi(x) + 1/x, the reflection formula and
fourth-order differences of math.lgamma, in float64 to 1e-13 (known values) and 1e-8
(differences); and the GPU against the CPU."""
import math

import numpy as onp
import pytest
from conftest import requires_gpu

from pymx import autograd, npx
from pymx.device import cpu, gpu
from pymx.ndarray import from_numpy
from pymx.test_utils import assert_almost_equal, check_numeric_gradient, check_op

EULER_GAMMA = 0.57721566490153286061
# psi at a few points, from psi(1) = -gamma, psi(1/2) = -gamma - 2 ln 2, the recurrence,
# psi(n) = H_{n-1} - gamma and the series at 0.
KNOWN_DIGAMMA = {
    1.0: -EULER_GAMMA,
    2.0: 1 - EULER_GAMMA,
    0.5: -EULER_GAMMA - 2 * math.log(2),
    -0.5: -EULER_GAMMA - 2 * math.log(2) + 2,
    1.5: -EULER_GAMMA - 2 * math.log(2) + 2,
    10.0: sum(1 / k for k in range(1, 10)) - EULER_GAMMA,
    100.0: sum(1 / k for k in range(1, 100)) - EULER_GAMMA,
    # psi(x) = -1/x - gamma + sum_k (-1)^(k+1) zeta(k+1) x^k near 0, to k = 4
    1e-3: (-1000.0 - EULER_GAMMA + 1.6449340668482264e-3 - 1.2020569031595942e-6
           + 1.0823232337111382e-9 - 1.0369277551433699e-12),
}


def gamma_reference(x):
    x = onp.asarray(x)
    return onp.vectorize(math.gamma, otypes=[x.dtype])(x)


def gammaln_reference(x):
    x = onp.asarray(x)
    return onp.vectorize(math.lgamma, otypes=[x.dtype])(x)


def digamma(x, device=cpu(0)):
    """psi(x) as the gradient of npx.gammaln."""
    x = from_numpy(onp.asarray(x, dtype=onp.float64), device=device)
    x.attach_grad()
    with autograd.record():
        y = npx.gammaln(x)
    y.backward()
    return x.grad.asnumpy()


def away_from_poles(rng, n, low, high):
    """Uniform values in [low, high) at least 0.1 from 0 and the negative integers."""
    x = rng.uniform(low, high, n)
    fraction = x - onp.floor(x)
    return onp.where((x < 0.1) & ((fraction < 0.1) | (fraction > 0.9)), onp.floor(x) + 0.5, x)


@pytest.mark.parametrize("op,reference", [(npx.gamma, gamma_reference),
                                          (npx.gammaln, gammaln_reference)])
def test_values_and_gradients(device, op, reference):
    check_op(reference, op, shapes=[(3, 4), (0,), (2, 0), ()], low=0.1, high=5, grad=True,
             device=device)
    check_op(reference, op, shapes=[(50,)], dtype="float64", low=0.05, high=30,
             rtol=1e-13, atol=0, device=device)


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("op,reference", [(npx.gamma, gamma_reference),
                                          (npx.gammaln, gammaln_reference)])
def test_dtypes(device, dtype, op, reference):
    check_op(reference, op, shapes=[(5, 6)], dtype=dtype, low=0.2, high=6, device=device)


def test_negative_arguments_against_math():
    x = away_from_poles(onp.random.default_rng(0), 200, -30, 0)
    assert_almost_equal(npx.gamma(from_numpy(x)), gamma_reference(x), rtol=1e-12, atol=0)
    assert_almost_equal(npx.gammaln(from_numpy(x)), gammaln_reference(x), rtol=1e-12,
                        atol=1e-13)


def test_integers_compute_in_float32(device):
    x = from_numpy(onp.array([1, 2, 5, 10], dtype="int32"), device=device)
    for op, want in ((npx.gamma, [1, 1, 24, 362880]),
                     (npx.gammaln, [0, 0, math.log(24), math.log(362880)])):
        out = op(x)
        assert out.dtype == onp.float32
        assert_almost_equal(out, onp.array(want, dtype="float32"), rtol=1e-6, atol=1e-6)


def test_poles_infinities_and_nan(device):
    x = from_numpy(onp.array([0.0, -0.0, -1.0, -7.0, onp.inf, -onp.inf, onp.nan, 200.0]),
                   device=device)
    onp.testing.assert_array_equal(
        npx.gamma(x).asnumpy(),
        [onp.inf, -onp.inf, onp.nan, onp.nan, onp.inf, onp.nan, onp.nan, onp.inf])
    onp.testing.assert_allclose(
        npx.gammaln(x).asnumpy(),
        [onp.inf, onp.inf, onp.inf, onp.inf, onp.inf, onp.inf, onp.nan, math.lgamma(200.0)],
        rtol=1e-14)
    # digamma, the gradient: NaN at the poles and for NaN, +inf at +inf.
    grads = digamma(onp.array([0.0, -3.0, onp.nan, onp.inf]), device)
    onp.testing.assert_array_equal(grads, [onp.nan, onp.nan, onp.nan, onp.inf])


def test_digamma_known_values(device):
    x = onp.array(list(KNOWN_DIGAMMA))
    assert_almost_equal(digamma(x, device), onp.array(list(KNOWN_DIGAMMA.values())),
                        rtol=1e-14, atol=0)
    big = onp.array([1e6, 1e15])
    assert_almost_equal(digamma(big, device), onp.log(big) - 0.5 / big - 1 / (12 * big ** 2),
                        rtol=1e-15, atol=0)


def test_digamma_recurrence_and_reflection():
    x = away_from_poles(onp.random.default_rng(1), 500, -20, 20)
    x = x[onp.abs(x + 1 - onp.round(x + 1)) > 0.05]  # x + 1 away from the poles too
    assert_almost_equal(digamma(x + 1) - digamma(x), 1 / x, rtol=1e-12, atol=1e-13)
    # psi(1 - x) - psi(x) = pi / tan(pi x)
    assert_almost_equal(digamma(1 - x) - digamma(x), math.pi / onp.tan(math.pi * x), rtol=1e-11,
                        atol=1e-12)


def test_digamma_against_differences_of_lgamma():
    x = onp.concatenate([away_from_poles(onp.random.default_rng(2), 300, -15, 60),
                         [0.1, 0.2, 1.4616321449683622, 9.99, 10.0, 10.01]])
    h = 1e-3
    lg = gammaln_reference
    # The five-point stencil errs by h^4 |psi''''| / 30: under 1e-8 relative away from poles.
    want = (-lg(x + 2 * h) + 8 * lg(x + h) - 8 * lg(x - h) + lg(x - 2 * h)) / (12 * h)
    assert_almost_equal(digamma(x), want, rtol=1e-8, atol=1e-9)


def test_gamma_gradient_on_both_sides_of_zero():
    x = onp.array([-2.5, -1.3, -0.4, 0.3, 1.0, 2.7, 6.2])
    check_numeric_gradient(npx.gamma, [x], eps=1e-6, rtol=1e-6, atol=1e-8)
    check_numeric_gradient(npx.gammaln, [x], eps=1e-6, rtol=1e-6, atol=1e-8)


@requires_gpu
@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 1e-5)])
def test_gpu_values_and_gradients_equal_cpu(dtype, rtol):
    x = away_from_poles(onp.random.default_rng(3), 1000, -20, 40).astype(dtype)
    for op in (npx.gamma, npx.gammaln):
        results = []
        for device in (cpu(0), gpu(0)):
            v = from_numpy(x, device=device)
            v.attach_grad()
            with autograd.record():
                y = op(v)
            y.backward()
            results.append((y.asnumpy(), v.grad.asnumpy()))
        (cpu_y, cpu_grad), (gpu_y, gpu_grad) = results
        assert_almost_equal(gpu_y, cpu_y, rtol=rtol, atol=rtol, names=("gpu", "cpu"))
        assert_almost_equal(gpu_grad, cpu_grad, rtol=rtol, atol=rtol, names=("gpu", "cpu"))
    edges = from_numpy(onp.array([0.0, -0.0, -2.0, onp.inf, onp.nan], dtype=dtype), device=gpu(0))
    onp.testing.assert_array_equal(npx.gamma(edges).asnumpy(),
                                   [onp.inf, -onp.inf, onp.nan, onp.inf, onp.nan])
