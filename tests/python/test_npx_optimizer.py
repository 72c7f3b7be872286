"""Fused optimizer update ops against the NumPy formulas they implement (MXNet's), in place."""
import numpy as onp
import pytest

from pymx._op import invoke
from test_npx_nn import arr, randn


def clip(g, c):
    return onp.clip(g, -c, c) if c >= 0 else g


def sgd(w, g, lr, wd, rescale, c):
    return [(1 - lr * wd) * w - lr * clip(rescale * g, c)]


def sgd_mom(w, g, mom, lr, wd, rescale, c, momentum):
    mom = momentum * mom - lr * wd * w - lr * clip(rescale * g, c)
    return [w + mom, mom]


def nag_mom(w, g, mom, lr, wd, rescale, c, momentum):
    grad = clip(rescale * g, c) + wd * w
    mom = momentum * mom + grad
    return [w - lr * (grad + momentum * mom), mom]


def adam(w, g, mean, var, lr, wd, rescale, c, beta1, beta2, epsilon):
    grad = clip(rescale * g + wd * w, c)
    mean = beta1 * mean + (1 - beta1) * grad
    var = beta2 * var + (1 - beta2) * grad ** 2
    return [w - lr * mean / (onp.sqrt(var) + epsilon), mean, var]


def adamw(w, g, mean, var, lr, wd, rescale, c, beta1, beta2, epsilon, eta):
    grad = clip(rescale * g, c)
    mean = beta1 * mean + (1 - beta1) * grad
    var = beta2 * var + (1 - beta2) * grad ** 2
    return [w - eta * (lr * mean / (onp.sqrt(var) + epsilon) + wd * w), mean, var]


def rmsprop(w, g, n, lr, wd, rescale, c, rho, epsilon):
    grad = clip(rescale * g, c) + wd * w
    n = rho * n + (1 - rho) * grad ** 2
    return [w - lr * grad / (onp.sqrt(n) + epsilon), n]


def adagrad(w, g, h, lr, wd, rescale, c, epsilon):
    grad = clip(rescale * g, c) + wd * w
    h = h + grad ** 2
    return [w - lr * grad / (onp.sqrt(h) + epsilon), h]


CASES = [
    ("sgd_update", sgd, 0, {}),
    ("sgd_mom_update", sgd_mom, 1, {"momentum": 0.9}),
    ("nag_mom_update", nag_mom, 1, {"momentum": 0.8}),
    ("adam_update", adam, 2, {"beta1": 0.9, "beta2": 0.99, "epsilon": 1e-6}),
    ("adamw_update", adamw, 2, {"beta1": 0.8, "beta2": 0.95, "epsilon": 1e-6, "eta": 0.5}),
    ("rmsprop_update", rmsprop, 1, {"rho": 0.85, "epsilon": 1e-6}),
    ("adagrad_update", adagrad, 1, {"epsilon": 1e-6}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("clip_gradient", [-1.0, 0.3])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(4, 5), (3, 70001)], ids=["small", "split"])
def test_update_matches_formula(case, clip_gradient, dtype, shape):
    # "split": large enough that the elements are split across the intra-op threads, unevenly.
    op, formula, num_states, extra = case
    w, g = randn(*shape), randn(*shape)
    states = [onp.abs(randn(*shape)) for _ in range(num_states)]
    hyper = {"lr": 0.05, "wd": 0.01, "rescale_grad": 0.5, "clip_gradient": clip_gradient}
    arrays = [arr(v, dtype) for v in [w, g] + states]
    expected = [w] + states
    for _ in range(3):  # the state carries over between steps
        assert invoke(op, arrays, {**hyper, **extra}) == []
        expected = formula(expected[0], g, *expected[1:], 0.05, 0.01, 0.5, clip_gradient,
                           *extra.values())
    tol = 1e-12 if dtype == "float64" else 2e-6
    onp.testing.assert_allclose(arrays[0].asnumpy(), expected[0], rtol=tol, atol=tol)
    for state, want in zip(arrays[2:], expected[1:]):
        onp.testing.assert_allclose(state.asnumpy(), want, rtol=tol, atol=tol)
    onp.testing.assert_array_equal(arrays[1].asnumpy(), g.astype(dtype))  # grad is read only


def test_update_errors():
    w = arr(randn(3))
    with pytest.raises(ValueError, match=r"grad has shape \(4,\)"):
        invoke("sgd_update", [w, arr(randn(4))], {"lr": 0.1})
    with pytest.raises(ValueError, match="lr"):
        invoke("sgd_update", [w, arr(randn(3))], {})


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_multi_update_equals_one_update_per_parameter(case):
    """multi_<op> over parameters of several shapes and dtypes, each with its own lr and wd, gives
    bitwise what <op> gives on each of them (Note [Updates of many parameters in one op])."""
    op, _, num_states, extra = case
    shapes_dtypes = [((4, 5), "float32"), ((0,), "float32"), ((70001,), "float32"),
                     ((3,), "float64"), ((2, 2), "float16")]
    lrs, wds = [0.05, 0.1, 0.02, 0.3, 0.01], [0.01, 0.0, 0.02, 0.1, 0.0]
    shared = {"rescale_grad": 0.5, "clip_gradient": 0.3, **extra}
    groups = [[randn(*shape).astype(dtype), randn(*shape).astype(dtype)] +
              [onp.abs(randn(*shape)).astype(dtype) for _ in range(num_states)]
              for shape, dtype in shapes_dtypes]
    one_by_one = [[arr(v, v.dtype.name) for v in group] for group in groups]
    together = [[arr(v, v.dtype.name) for v in group] for group in groups]
    for _ in range(2):
        for group, lr, wd in zip(one_by_one, lrs, wds):
            invoke(op, group, {**shared, "lr": lr, "wd": wd})
        assert invoke("multi_" + op, [a for group in together for a in group],
                      {**shared, "num_weights": len(lrs), "lrs": tuple(lrs),
                       "wds": tuple(wds)}) == []
    for want, got in zip(one_by_one, together):
        for a, b in zip(want, got):
            onp.testing.assert_array_equal(b.asnumpy(), a.asnumpy())


def test_multi_update_errors_name_the_numbers():
    w, g = arr(randn(3)), arr(randn(3))
    with pytest.raises(ValueError, match=r"num_weights 2 needs 4 inputs \(groups of 2\), got 2"):
        invoke("multi_sgd_update", [w, g], {"num_weights": 2, "lrs": (0.1, 0.1), "wds": (0, 0)})
    with pytest.raises(ValueError, match="lrs has 2 and wds 1 values for num_weights 1"):
        invoke("multi_sgd_update", [w, g], {"num_weights": 1, "lrs": (0.1, 0.2), "wds": (0,)})
    with pytest.raises(ValueError, match=r"parameter 1's grad has shape \(4,\)"):
        invoke("multi_sgd_update", [w, g, arr(randn(3)), arr(randn(4))],
               {"num_weights": 2, "lrs": (0.1, 0.1), "wds": (0, 0)})
    with pytest.raises(ValueError, match="'lrs' must be a tuple of numbers"):
        invoke("multi_sgd_update", [w, g], {"num_weights": 1, "lrs": "(0.1, x)", "wds": (0,)})
