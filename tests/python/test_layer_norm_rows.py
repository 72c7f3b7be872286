"""layer_norm's CPU kernels (Note [Layer-norm rows] in engine/src/ops/nn_norm.cc): rows split over
the intra-op threads, statistics in double over lane sums, the forward's element pass in float
with the mean split into hi + lo, strided rows gathered, and the backward's gamma/beta sums added
per block of rows in a fixed order.

Accuracy against float64 NumPy: float64 within 1e-12 relative, float32 within 1e-5 relative (plus
1e-6 absolute for outputs near 0, also for rows whose mean is 10^4 times their deviation),
float16 within its rounding of the float32 result. Results do not depend on the thread count or
the engine."""
import numpy as onp
import pytest

import pymx
from pymx import autograd, np, npx
from pymx._op import invoke
from pymx.test_utils import assert_almost_equal, check_numeric_gradient

from conftest import assert_engines_agree, assert_thread_count_independent, requires_gpu

# (shape, axis): rows of 1, 7, 8, 9, 17 elements (around the 8 lanes), BERT's rows of 256 and
# enough of them to split over threads and over several gradient blocks, many short rows (more
# gradient blocks than the cap), rows so long that the gradient blocks' scratch bound merges
# rows into few blocks, strided rows (inner axes), and empty arrays.
CASES = [((4, 1), -1), ((5, 7), -1), ((5, 8), -1), ((5, 9), -1), ((3, 17), -1),
         ((300, 256), -1), ((2, 3, 256), -1), ((5000, 4), -1), ((12, 1 << 19), -1),
         ((17, 100), 0), ((6, 9, 3), 1), ((2, 33, 130), 1), ((0, 5), -1), ((1,), 0)]

TOLERANCE = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-13)}
EPS = 1e-5


def reference(x, gamma, beta, dy, axis):
    """Forward (out, mean, std) and backward (dx, dgamma, dbeta) of layer_norm in float64."""
    x, gamma, beta, dy = (onp.asarray(a, onp.float64) for a in (x, gamma, beta, dy))
    axis %= x.ndim
    view = [1] * x.ndim
    view[axis] = -1
    g = gamma.reshape(view)
    mean = x.mean(axis=axis, keepdims=True)
    std = onp.sqrt(((x - mean) ** 2).mean(axis=axis, keepdims=True) + EPS)
    xhat = (x - mean) / std
    out = xhat * g + beta.reshape(view)
    dxhat = dy * g
    dx = (dxhat - dxhat.mean(axis=axis, keepdims=True) -
          xhat * (dxhat * xhat).mean(axis=axis, keepdims=True)) / std
    others = tuple(a for a in range(x.ndim) if a != axis)
    return out, mean, std, dx, (dy * xhat).sum(axis=others), dy.sum(axis=others)


def inputs(shape, axis, dtype, seed):
    rng = onp.random.default_rng(seed)
    n = shape[axis]
    # An offset and scale per sample, as activations have them, so that the mean matters.
    x = rng.standard_normal(shape) * 3 + 2
    return (x.astype(dtype), (rng.standard_normal(n) + 1).astype(dtype),
            rng.standard_normal(n).astype(dtype), rng.standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,axis", CASES)
def test_forward_and_backward_match_float64_numpy(shape, axis, dtype):
    x, gamma, beta, dy = inputs(shape, axis, dtype, 1)
    rtol, atol = TOLERANCE[dtype]
    out, mean, std = invoke("layer_norm", [np.array(a) for a in (x, gamma, beta)],
                            {"axis": axis, "eps": EPS})
    dx, dgamma, dbeta = invoke("layer_norm_backward",
                               [np.array(dy), np.array(x), np.array(gamma), mean, std],
                               {"axis": axis, "eps": EPS})
    want = reference(x, gamma, beta, dy, axis)
    names = ("out", "mean", "std", "data_grad", "gamma_grad", "beta_grad")
    # gamma_grad and beta_grad sum over up to 5000 rows: their error grows with the row count.
    rows = max(1, x.size // max(1, shape[axis]))
    for name, got, expected in zip(names, (out, mean, std, dx, dgamma, dbeta), want):
        got = got.asnumpy()
        assert got.dtype == onp.dtype(dtype) and got.shape == expected.shape, name
        scale = rows if name in ("gamma_grad", "beta_grad") else 1
        assert_almost_equal(got, expected, rtol=rtol, atol=atol * scale, names=(name, "float64"))


def test_float16_rounds_the_float32_result():
    x, gamma, beta, dy = inputs((9, 70), -1, "float16", 2)
    results = {}
    for dtype in ("float16", "float32"):
        data = np.array(x.astype(dtype))
        data.attach_grad()
        with autograd.record():
            out = npx.layer_norm(data, np.array(gamma.astype(dtype)),
                                 np.array(beta.astype(dtype)))
        out.backward(np.array(dy.astype(dtype)))
        results[dtype] = (out.asnumpy(), data.grad.asnumpy())
    for got, want in zip(results["float16"], results["float32"]):
        assert got.dtype == onp.float16
        assert_almost_equal(got, want.astype(onp.float16), rtol=1e-3, atol=2e-3)


def test_gradient_matches_finite_differences():
    rng = onp.random.default_rng(3)
    for shape, axis in (((3, 11), -1), ((2, 5, 3), 1)):
        x = np.array(rng.standard_normal(shape))
        gamma = np.array(rng.standard_normal(shape[axis]) + 1)
        beta = np.array(rng.standard_normal(shape[axis]))
        weights = np.array(rng.standard_normal(shape))  # a loss that weighs every output
        check_numeric_gradient(lambda a, g, b: npx.layer_norm(a, g, b, axis=axis) * weights,
                               [x, gamma, beta], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("offset", [1e3, -3e4])
def test_rows_far_from_zero_keep_their_accuracy(offset):
    # x - mean in float cancels nearly all of x: the mean's low part (hi + lo) must enter, or
    # the result loses |mean| / std float ulp.
    rng = onp.random.default_rng(7)
    x = (offset + rng.standard_normal((6, 300))).astype(onp.float32)
    gamma = (rng.standard_normal(300) + 1).astype(onp.float32)
    beta = rng.standard_normal(300).astype(onp.float32)
    dy = rng.standard_normal(x.shape).astype(onp.float32)
    got = npx.layer_norm(np.array(x), np.array(gamma), np.array(beta)).asnumpy()
    assert_almost_equal(got, reference(x, gamma, beta, dy, -1)[0], rtol=1e-5, atol=1e-6)


def test_rows_with_equal_elements_normalise_to_beta():
    # var = 0: std = sqrt(eps), every xhat is 0, so out = beta and the data gradient is
    # gamma * dy / sqrt(eps) minus its row mean.
    x = onp.full((3, 13), 2.5, onp.float32)
    gamma = onp.linspace(0.5, 1.5, 13).astype(onp.float32)
    beta = onp.linspace(-1, 1, 13).astype(onp.float32)
    dy = onp.random.default_rng(4).standard_normal((3, 13)).astype(onp.float32)
    data = np.array(x)
    data.attach_grad()
    with autograd.record():
        out = npx.layer_norm(data, np.array(gamma), np.array(beta))
    out.backward(np.array(dy))
    assert_almost_equal(out.asnumpy(), onp.broadcast_to(beta, x.shape), rtol=0, atol=1e-6)
    want = reference(x, gamma, beta, dy, -1)[3]
    assert_almost_equal(data.grad.asnumpy(), want, rtol=1e-5, atol=1e-3)


def test_bad_gamma_shape_and_integer_data_are_refused():
    with pytest.raises(ValueError, match=r"layer_norm: gamma \(4,\) and beta \(5,\)"):
        npx.layer_norm(np.ones((2, 5)), np.ones(4), np.ones(5)).wait_to_read()
    with pytest.raises(TypeError, match="layer_norm"):
        npx.layer_norm(np.ones((2, 5), dtype="int32"), np.ones(5, dtype="int32"),
                       np.ones(5, dtype="int32")).wait_to_read()


# The arrays a script saves for the thread-count and engine checks: BERT's rows (several
# threads' chunks and gradient blocks), many short rows, and strided rows.
_ARRAYS_SCRIPT = r"""
import numpy as onp
from pymx import autograd, np, npx
out = {}
rng = onp.random.default_rng(11)
for name, (shape, axis) in {"rows": ((8, 128, 256), -1), "short": ((6000, 5), -1),
                            "strided": ((4, 257, 70), 1)}.items():
    for dtype in ("float32", "float64", "float16"):
        x = np.array((rng.standard_normal(shape) * 5).astype(dtype))
        gamma = np.array(rng.standard_normal(shape[axis]).astype(dtype))
        beta = np.array(rng.standard_normal(shape[axis]).astype(dtype))
        dy = np.array(rng.standard_normal(shape).astype(dtype))
        for a in (x, gamma, beta):
            a.attach_grad()
        with autograd.record():
            y = npx.layer_norm(x, gamma, beta, axis=axis)
        y.backward(dy)
        key = f"{name} {dtype}"
        for label, a in (("out", y), ("dx", x.grad), ("dgamma", gamma.grad), ("dbeta", beta.grad)):
            out[f"{key} {label}"] = a.asnumpy()
onp.savez(OUT, **out)
"""


def test_naive_and_threaded_engines_agree(tmp_path):
    assert_engines_agree(_ARRAYS_SCRIPT, tmp_path)


def test_one_thread_gives_the_same_bits(tmp_path):
    assert_thread_count_independent(_ARRAYS_SCRIPT, tmp_path)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_gpu_equals_cpu(dtype):
    tolerance = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3}[dtype]
    for shape, axis in [((300, 256), -1), ((5, 9), -1), ((2, 33, 130), 1), ((17, 100), 0)]:
        x, gamma, beta, dy = inputs(shape, axis, dtype, 12)
        results = []
        for device in (pymx.cpu(), pymx.gpu(0)):
            arrays = [np.array(a, device=device) for a in (x, gamma, beta)]
            for a in arrays:
                a.attach_grad()
            with autograd.record():
                out = npx.layer_norm(*arrays, axis=axis)
            out.backward(np.array(dy, device=device))
            results.append([out.asnumpy()] + [a.grad.asnumpy() for a in arrays])
        rows = x.size // shape[axis]
        for name, got, want in zip(("out", "dx", "dgamma", "dbeta"), *results):
            scale = rows if name in ("dgamma", "dbeta") else 1
            assert_almost_equal(got, want, rtol=tolerance, atol=tolerance * scale,
                                names=(f"gpu {name}", f"cpu {name}"))
