"""The deterministic mode on a GPU (Note [Deterministic mode] in engine/src/determinism.h): the
kernels it swaps in for atomic ones (pooling backward as a gather, embedding backward by a
stable sort) against NumPy in float64 and the CPU, and bitwise equal run after run where
windows overlap heavily and indices repeat; cuDNN convolution gradients bitwise equal run after
run; CUDA graphs kept per mode; and a convolution net's training bitwise equal across two
processes. Skipped when no GPU is visible."""
import os

import numpy as onp
import pytest
from conftest import requires_gpu, run_python

from determinism_net import training_script
from pymx import autograd, np, npx
from pymx._c import core as _core
from pymx.device import cpu, gpu
from pymx.gluon import nn

pytestmark = requires_gpu

# The devices of the training test's script, as source (a fresh process).
GPU_DEVICES = "[gpu(0)]"
RUNS = 3


@pytest.fixture(autouse=True)
def deterministic_mode():
    before = npx.set_deterministic(True)
    yield
    npx.set_deterministic(before)


def pool_backward_reference(dy, x, kernel, stride, pad, pool_type):
    """dx of 2-D pooling (valid convention, count_include_pad) in float64: max sends each
    window's gradient to its first maximum in row-major order, avg and sum spread it."""
    dx = onp.zeros(x.shape)
    h, w = x.shape[2:]
    for i in range(dy.shape[2]):
        for j in range(dy.shape[3]):
            y0, x0 = i * stride - pad, j * stride - pad
            ys, ye, xs, xe = max(y0, 0), min(y0 + kernel, h), max(x0, 0), min(x0 + kernel, w)
            g = dy[:, :, i, j].astype(onp.float64)
            if pool_type == "max":
                window = x[:, :, ys:ye, xs:xe].reshape(x.shape[0], x.shape[1], -1)
                first = window.argmax(axis=2)
                rows, cols = ys + first // (xe - xs), xs + first % (xe - xs)
                n, c = onp.indices(first.shape)
                dx[n, c, rows, cols] += g
            else:
                divisor = kernel * kernel if pool_type == "avg" else 1
                dx[:, :, ys:ye, xs:xe] += (g / divisor)[:, :, None, None]
    return dx


def pooling_grad(x, dy, device, **attrs):
    data = np.array(x, device=device)
    data.attach_grad()
    with autograd.record():
        out = npx.pooling(data, **attrs)
    out.backward(np.array(dy, device=device))
    return data.grad.asnumpy()


@pytest.mark.parametrize("cudnn_off", [True, False])
@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
def test_pooling_backward_overlapping_windows(pool_type, cudnn_off):
    """3x3 windows at stride 1: every input is in up to 9 windows. Many ties for max (a relu's
    zeros). avg with cuDNN runs cuDNN's backward (deterministic); the others the gather."""
    rng = onp.random.default_rng(1)
    x = onp.maximum(rng.standard_normal((4, 8, 40, 40)), 0).astype("float32")
    dy = rng.standard_normal((4, 8, 40, 40)).astype("float32")
    attrs = dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type=pool_type,
                 cudnn_off=cudnn_off)
    grads = [pooling_grad(x, dy, gpu(0), **attrs) for _ in range(RUNS)]
    for again in grads[1:]:
        assert onp.array_equal(grads[0], again), "the gradient changed between runs"
    reference = pool_backward_reference(dy, x, 3, 1, 1, pool_type)
    onp.testing.assert_allclose(grads[0], reference, rtol=1e-5, atol=1e-5)
    onp.testing.assert_allclose(grads[0], pooling_grad(x, dy, cpu(0), **attrs), rtol=1e-5,
                                atol=1e-5)


@pytest.mark.parametrize("kernel, stride", [(3, 2), (2, 2)])  # overlapping, disjoint
def test_pooling_backward_float16_and_strided_windows(kernel, stride):
    rng = onp.random.default_rng(2)
    x = rng.standard_normal((2, 4, 17, 17)).astype("float16")
    out = (17 - kernel) // stride + 1
    dy = rng.standard_normal((2, 4, out, out)).astype("float16")
    attrs = dict(kernel=(kernel, kernel), stride=(stride, stride), pool_type="max",
                 cudnn_off=True)
    grads = [pooling_grad(x, dy, gpu(0), **attrs) for _ in range(RUNS)]
    for again in grads[1:]:
        assert onp.array_equal(grads[0], again)
    reference = pool_backward_reference(dy, x.astype(onp.float64), kernel, stride, 0, "max")
    onp.testing.assert_allclose(grads[0], reference, rtol=2e-3, atol=2e-3)


def embedding_grad(indices, dy, rows, device):
    weight = np.zeros((rows, dy.shape[-1]), device=device)
    weight.attach_grad()
    with autograd.record():
        out = npx.embedding(np.array(indices, device=device), weight)
    out.backward(np.array(dy, device=device))
    return weight.grad.asnumpy()


@pytest.mark.parametrize("index_dtype", ["int32", "float32", "int64"])
def test_embedding_backward_with_heavily_repeated_indices(index_dtype):
    """20000 indices on 5 of 50 rows (and out-of-range ones, clipped to the first and last).
    The rows sum in index order, so float32 equals the CPU's sequential sum bit for bit."""
    rng = onp.random.default_rng(3)
    indices = rng.choice([0, 3, 3, 7, 49, -4, 60], size=(40, 500)).astype(index_dtype)
    dy = rng.standard_normal((40, 500, 64)).astype("float32")
    grads = [embedding_grad(indices, dy, 50, gpu(0)) for _ in range(RUNS)]
    for again in grads[1:]:
        assert onp.array_equal(grads[0], again), "the gradient changed between runs"
    reference = onp.zeros((50, 64))
    onp.add.at(reference, onp.clip(indices.astype(onp.int64), 0, 49).ravel(),
               dy.reshape(-1, 64).astype(onp.float64))
    onp.testing.assert_allclose(grads[0], reference, rtol=1e-4, atol=1e-3)
    assert onp.array_equal(grads[0], embedding_grad(indices, dy, 50, cpu(0)))


def test_embedding_backward_of_no_indices_and_of_one_row():
    assert not embedding_grad(onp.zeros((0,), "int32"), onp.zeros((0, 4), "float32"), 3,
                              gpu(0)).any()
    dy = onp.ones((7, 4), "float32")
    expected = onp.zeros((1, 4))
    expected[0] = 7
    assert onp.array_equal(embedding_grad(onp.arange(7), dy, 1, gpu(0)), expected)


def convolution_grads(x, w, dy, device, **attrs):
    data, weight = np.array(x, device=device), np.array(w, device=device)
    data.attach_grad()
    weight.attach_grad()
    with autograd.record():
        out = npx.convolution(data, weight, no_bias=True, **attrs)
    out.backward(np.array(dy, device=device))
    return data.grad.asnumpy(), weight.grad.asnumpy()


@pytest.mark.parametrize("cudnn_tune", ["fastest", "limited_workspace", "off"])
def test_convolution_gradients_repeat_bitwise(cudnn_tune):
    """Many images into few filters: the weight gradient sums 64 * 32 * 32 products per weight,
    which cuDNN's backward filter algorithms 0 and 3 split into partial sums added with atomics.
    The mode keeps to deterministic algorithms, whatever cudnn_tune says."""
    rng = onp.random.default_rng(4)
    x = rng.standard_normal((64, 16, 32, 32)).astype("float32")
    w = rng.standard_normal((8, 16, 3, 3)).astype("float32")
    dy = rng.standard_normal((64, 8, 32, 32)).astype("float32")
    attrs = dict(pad=(1, 1), cudnn_tune=cudnn_tune)
    grads = [convolution_grads(x, w, dy, gpu(0), **attrs) for _ in range(RUNS)]
    for again in grads[1:]:
        assert onp.array_equal(grads[0][0], again[0]), "the data gradient changed between runs"
        assert onp.array_equal(grads[0][1], again[1]), "the weight gradient changed between runs"
    on_cpu = convolution_grads(x, w, dy, cpu(0), **attrs)
    onp.testing.assert_allclose(grads[0][0], on_cpu[0], rtol=1e-4, atol=1e-3)
    onp.testing.assert_allclose(grads[0][1], on_cpu[1], rtol=1e-4, atol=1e-2)


def test_a_cuda_graph_captured_outside_the_mode_is_not_replayed_in_it():
    """A hybridized inference replay is captured as a CUDA graph; its convolution's cuDNN
    algorithm may differ between the modes, so the mode is part of the graph's key."""
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, kernel_size=3), nn.MaxPool2D(pool_size=3, strides=1), nn.Dense(4))
    net.initialize(device=gpu(0))
    net.hybridize(static_alloc=True, static_shape=True)
    x = np.ones((2, 3, 16, 16), device=gpu(0))
    npx.set_deterministic(False)
    start = _core.cuda_graph_stats()
    for _ in range(6):  # captured, then replayed (two output buffers alternate: both)
        net(x).asnumpy()
    before = _core.cuda_graph_stats()
    assert before["replayed"] > start["replayed"], (start, before)
    npx.set_deterministic(True)
    net(x).asnumpy()  # a new key, seen first: launched directly
    after = _core.cuda_graph_stats()
    assert after["replayed"] == before["replayed"], (before, after)


def test_training_is_bitwise_reproducible_across_processes():
    """Convolution (cuDNN's deterministic algorithms by rank, not measured), batch norm,
    overlapping pooling, embedding, dropout: the parameters after four Adam steps hash alike."""
    env = {k: v for k, v in os.environ.items() if k != "PYMX_ENFORCE_DETERMINISM"}
    script = training_script(GPU_DEVICES)
    runs = []
    for _ in range(2):
        done = run_python(script, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        runs.append(done.stdout.split())
    assert runs[0] == runs[1], runs
