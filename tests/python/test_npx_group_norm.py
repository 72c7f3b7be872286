"""npx.group_norm and npx.instance_norm against float64 NumPy references: outputs and statistics
in every float dtype, gradients of data, gamma and beta against central differences, data far
from 0 (one-pass statistics), empty shapes, the serial engine as the parallel kernels' oracle,
GPU against CPU, and the errors."""

import numpy as onp
import pytest

import pymx
from pymx import autograd, npx
from pymx.ndarray import from_numpy
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import assert_engines_agree, requires_gpu


def group_norm_reference(x, gamma, beta, num_groups, eps):
    """(out, mean, std) in float64; mean and std are (N, num_groups)."""
    n, c = x.shape[:2]
    grouped = x.reshape(n, num_groups, -1)
    mean = grouped.mean(axis=2)
    std = onp.sqrt(grouped.var(axis=2) + eps)
    normalised = ((grouped - mean[:, :, None]) / std[:, :, None]).reshape(x.shape)
    param_shape = (1, c) + (1,) * (x.ndim - 2)
    return normalised * gamma.reshape(param_shape) + beta.reshape(param_shape), mean, std


def rand(*shape):
    return onp.random.uniform(-1, 1, size=shape)


CASES = [((2, 6, 5), 3), ((2, 6, 5), 1), ((2, 6, 5), 6), ((3, 4, 2, 3), 2), ((1, 2, 1, 1, 3), 2)]


@pytest.mark.parametrize("shape,num_groups", CASES)
def test_group_norm_values(device, shape, num_groups):
    x, gamma, beta = rand(*shape), rand(shape[1]), rand(shape[1])
    out, mean, std = npx.group_norm(*(from_numpy(a, device=device) for a in (x, gamma, beta)),
                                    num_groups=num_groups, eps=1e-5, output_mean_var=True)
    want = group_norm_reference(x, gamma, beta, num_groups, 1e-5)
    for got, expected in zip((out, mean, std), want):
        assert got.shape == expected.shape
        assert_almost_equal(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape,num_groups", CASES[:4])
def test_group_norm_gradients(device, shape, num_groups):
    check_numeric_gradient(lambda x, g, b: npx.group_norm(x, g, b, num_groups=num_groups),
                           [rand(*shape), rand(shape[1]), rand(shape[1])], device=device)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_group_norm_dtypes(device, dtype):
    x, gamma, beta = rand(2, 8, 3, 3), rand(8), rand(8)
    arrays = [from_numpy(a, dtype=dtype, device=device) for a in (x, gamma, beta)]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        out, mean, std = npx.group_norm(*arrays, num_groups=4, output_mean_var=True)
    head = rand(*x.shape)
    out.backward(from_numpy(head, dtype=dtype, device=device))
    assert out.dtype == mean.dtype == std.dtype == arrays[0].dtype
    values = [a.asnumpy().astype(onp.float64) for a in arrays]  # the values pymx holds
    want = group_norm_reference(*values, 4, 1e-5)
    for got, expected in zip((out, mean, std), want):
        assert_almost_equal(got, expected.astype(onp.float32))
    # Gradients against the float64 op on the same (rounded) values.
    exact = [from_numpy(v) for v in values]
    for a in exact:
        a.attach_grad()
    with autograd.record():
        out64 = npx.group_norm(*exact, num_groups=4)
    out64.backward(from_numpy(from_numpy(head, dtype=dtype).asnumpy().astype(onp.float64)))
    for got, expected in zip(arrays, exact):
        assert_almost_equal(got.grad, expected.grad.asnumpy().astype(onp.float32),
                            rtol=0.05 if dtype != "float32" else None)


def test_group_norm_data_far_from_zero(device):
    """One-pass statistics shift by a value of the group: no cancellation at an offset of 1e3
    with a spread of 0.1, where sum(x^2)/n - mean^2 in float would keep no correct digit."""
    x = 1e3 + 0.1 * rand(2, 4, 64)
    data = from_numpy(x, dtype="float32", device=device)
    held = data.asnumpy().astype(onp.float64)
    ones, zeros = from_numpy(onp.ones(4), dtype="float32"), from_numpy(onp.zeros(4), dtype="float32")
    out, mean, std = npx.group_norm(data, ones.to_device(device), zeros.to_device(device),
                                    num_groups=2, output_mean_var=True)
    want_out, want_mean, want_std = group_norm_reference(held, onp.ones(4), onp.zeros(4), 2, 1e-5)
    assert_almost_equal(std, want_std.astype(onp.float32), rtol=1e-3, atol=0)
    assert_almost_equal(out, want_out.astype(onp.float32), rtol=1e-3, atol=2e-3)


def test_group_norm_constant_groups(device):
    """A constant group has variance exactly 0: std = sqrt(eps), out = beta."""
    x = onp.full((2, 4, 5), 3.25)
    out, mean, std = npx.group_norm(from_numpy(x, device=device),
                                    from_numpy(onp.ones(4), device=device),
                                    from_numpy(onp.arange(4.0), device=device), num_groups=2,
                                    eps=1e-3, output_mean_var=True)
    assert_almost_equal(std, onp.full((2, 2), onp.sqrt(1e-3)), rtol=1e-15, atol=0)
    assert_almost_equal(out, onp.broadcast_to(onp.arange(4.0)[None, :, None], x.shape),
                        rtol=0, atol=1e-15)


def test_group_norm_empty_shapes(device):
    gamma, beta = from_numpy(onp.ones(4), device=device), from_numpy(onp.zeros(4), device=device)
    out, mean, std = npx.group_norm(from_numpy(onp.zeros((0, 4, 3)), device=device), gamma, beta,
                                    num_groups=2, output_mean_var=True)
    assert out.shape == (0, 4, 3) and mean.shape == (0, 2) and std.shape == (0, 2)
    # No positions: the groups have no mean (NaN), as layer_norm's empty axis.
    out, mean, std = npx.group_norm(from_numpy(onp.zeros((2, 4, 0)), device=device), gamma, beta,
                                    num_groups=2, output_mean_var=True)
    assert out.shape == (2, 4, 0) and onp.isnan(mean.asnumpy()).all()
    # Gradients of an empty batch: zero for gamma and beta.
    x = from_numpy(onp.zeros((0, 4, 3)), device=device)
    for a in (x, gamma, beta):
        a.attach_grad()
    with autograd.record():
        y = npx.group_norm(x, gamma, beta, num_groups=2)
    y.backward()
    assert_almost_equal(gamma.grad, onp.zeros(4), rtol=0, atol=0)
    assert_almost_equal(beta.grad, onp.zeros(4), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# instance_norm
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 2, 2), (1, 2, 3, 1, 2)])
def test_instance_norm_values_and_gradients(device, shape):
    x, gamma, beta = rand(*shape), rand(shape[1]), rand(shape[1])
    out = npx.instance_norm(*(from_numpy(a, device=device) for a in (x, gamma, beta)))
    want, _, _ = group_norm_reference(x, gamma, beta, shape[1], 1e-3)  # MXNet's eps 1e-3
    assert_almost_equal(out, want, rtol=1e-10, atol=1e-12)
    check_numeric_gradient(lambda d, g, b: npx.instance_norm(d, g, b, eps=1e-4),
                           [x, gamma, beta], device=device)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_instance_norm_dtypes(device, dtype):
    x, gamma, beta = rand(2, 3, 4, 4), rand(3), rand(3)
    arrays = [from_numpy(a, dtype=dtype, device=device) for a in (x, gamma, beta)]
    out = npx.instance_norm(*arrays, eps=1e-5)
    values = [a.asnumpy().astype(onp.float64) for a in arrays]
    want, _, _ = group_norm_reference(*values, 3, 1e-5)
    assert out.dtype == arrays[0].dtype
    assert_almost_equal(out, want.astype(onp.float32))


def test_instance_norm_empty_channels(device):
    out = npx.instance_norm(from_numpy(onp.zeros((2, 0, 3)), device=device),
                            from_numpy(onp.zeros(0), device=device),
                            from_numpy(onp.zeros(0), device=device))
    assert out.shape == (2, 0, 3)


# ---------------------------------------------------------------------------------------------
# The serial engine as the parallel kernels' oracle; GPU against CPU
# ---------------------------------------------------------------------------------------------
_ENGINE_SCRIPT = r'''
import numpy as onp
from pymx import autograd, npx
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(3)
results = []
for op, kwargs in [(npx.group_norm, {"num_groups": 4}), (npx.instance_norm, {})]:
    x = from_numpy(rng.uniform(-2, 2, size=(4, 8, 40, 30)), dtype="float32")
    gamma = from_numpy(rng.uniform(0.5, 1.5, size=8), dtype="float32")
    beta = from_numpy(rng.uniform(-1, 1, size=8), dtype="float32")
    head = from_numpy(rng.uniform(-1, 1, size=x.shape), dtype="float32")
    for a in (x, gamma, beta):
        a.attach_grad()
    with autograd.record():
        out = op(x, gamma, beta, **kwargs)
    out.backward(head)
    results += [out.asnumpy(), x.grad.asnumpy(), gamma.grad.asnumpy(), beta.grad.asnumpy()]
onp.savez(OUT, *results)
'''


def test_threaded_engine_matches_naive(tmp_path):
    """Groups and rows are split over the intra-op threads; the serial engine runs the same
    chunks and every sum has a fixed order, so results are bitwise equal."""
    assert_engines_agree(_ENGINE_SCRIPT, tmp_path)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("op,kwargs,shape", [
    ("group_norm", {"num_groups": 4}, (3, 8, 5, 7)),
    # Groups of 4503 and rows of 1501 elements: the GPU sums them in 5 and 2 chunks, the last
    # one partial (Note [Segment sums in chunks]).
    ("group_norm", {"num_groups": 1}, (2, 3, 1501)),
    ("instance_norm", {}, (3, 5, 4, 9)),
])
def test_gpu_matches_cpu(dtype, op, kwargs, shape):
    x, gamma, beta, head = rand(*shape), rand(shape[1]), rand(shape[1]), rand(*shape)
    results = []
    for device in (pymx.cpu(0), pymx.gpu(0)):
        arrays = [from_numpy(a, dtype=dtype, device=device) for a in (x, gamma, beta)]
        for a in arrays:
            a.attach_grad()
        with autograd.record():
            if op == "group_norm":  # with its statistics, which the backward reads
                out, *stats = npx.group_norm(*arrays, **kwargs, output_mean_var=True)
            else:
                out, stats = npx.instance_norm(*arrays, **kwargs), []
        out.backward(from_numpy(head, dtype=dtype, device=device))
        results.append([out] + stats + [a.grad for a in arrays])
    cpu, gpu = results
    for got, want in zip(gpu, cpu):
        assert_almost_equal(got.asnumpy(), want.asnumpy(),
                            rtol=1e-9 if dtype == "float64" else None,
                            atol=1e-9 if dtype == "float64" else None)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
def _arrays(shape, channels):
    return (from_numpy(onp.ones(shape)), from_numpy(onp.ones(channels)),
            from_numpy(onp.zeros(channels)))


def test_num_groups_must_divide_channels():
    with pytest.raises(ValueError, match=r"num_groups 4 does not divide the 6 channels of data "
                                         r"\(2, 6, 5\)"):
        npx.group_norm(*_arrays((2, 6, 5), 6), num_groups=4)
    with pytest.raises(ValueError, match="num_groups must be >= 1, got 0"):
        npx.group_norm(*_arrays((2, 6, 5), 6), num_groups=0)


@pytest.mark.parametrize("op", ["group_norm", "instance_norm"])
def test_wrong_gamma_shape(op):
    x, gamma, beta = _arrays((2, 6, 5), 4)
    with pytest.raises(ValueError, match=rf"{op}: gamma \(4,\) and beta \(4,\) must have shape "
                                         r"\(6,\)"):
        getattr(npx, op)(x, gamma, beta)


@pytest.mark.parametrize("op", ["group_norm", "instance_norm"])
def test_data_needs_three_dimensions(op):
    with pytest.raises(ValueError, match=rf"{op}: data must have at least 3 dimensions.*\(2, 6\)"):
        getattr(npx, op)(*_arrays((2, 6), 6))


def test_dtype_mismatch_and_integer_data():
    x = from_numpy(onp.ones((2, 4, 3)), dtype="float32")
    with pytest.raises(TypeError, match="float64"):
        npx.group_norm(x, from_numpy(onp.ones(4)), from_numpy(onp.zeros(4)))
    ints = from_numpy(onp.ones((2, 4, 3), dtype="int32"))
    with pytest.raises(TypeError, match="int32"):
        npx.instance_norm(ints, from_numpy(onp.ones(4), dtype="int32"),
                          from_numpy(onp.zeros(4), dtype="int32"))
