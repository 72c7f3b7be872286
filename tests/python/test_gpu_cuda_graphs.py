"""CUDA graphs for bulk replays (Note [CUDA graphs for bulk replays]): a hybridized static graph's
inference replay on a GPU is captured once and later launched as one graph. A replay must give
exactly what the op-by-op replay gives, see new input data and new parameter values written in
place, and never capture what it cannot repeat (random numbers). Skipped when no GPU is visible."""
import os

import numpy as onp
from conftest import requires_gpu, run_python

import pymx
from pymx import autograd, np
from pymx._c import core as _core
from pymx.gluon import nn

pytestmark = requires_gpu

RNG = onp.random.default_rng(3)
IMAGES = RNG.standard_normal((2, 3, 32, 32)).astype("float32")


def _net(dropout=0.0, static_alloc=True):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, kernel_size=2, activation="relu"), nn.MaxPool2D(pool_size=4, strides=2),
            nn.BatchNorm(), nn.Conv2D(16, kernel_size=2, activation="relu"), nn.Flatten(),
            nn.Dense(10, activation="relu"), nn.Dropout(dropout), nn.Dense(2))
    net.initialize(pymx.initializer.Xavier(), device=pymx.gpu(0))
    net(np.zeros((1, 3, 32, 32), device=pymx.gpu(0)))
    net.hybridize(static_alloc=static_alloc, static_shape=static_alloc)
    return net


def _op_by_op(net, x):
    """The same replay, op by op: a twin of `net` whose graph has no static buffers (never
    bulked), with `net`'s current parameters."""
    twin = _net(static_alloc=False)
    for mine, theirs in zip(twin.collect_params().values(), net.collect_params().values()):
        mine.set_data(theirs.data())
    return twin(x).asnumpy()


def _stats():
    return _core.cuda_graph_stats()


def test_replays_launch_one_captured_graph_and_match_op_by_op():
    net = _net()
    x = np.array(IMAGES, device=pymx.gpu(0))
    want = _op_by_op(net, x)
    before = _stats()
    outputs = [net(x) for _ in range(6)]  # all held: each call writes new buffers
    got = [o.asnumpy() for o in outputs]
    for result in got:
        onp.testing.assert_array_equal(result, want)
    del outputs
    for _ in range(6):  # outputs dropped each time: two buffers alternate, both captured
        onp.testing.assert_array_equal(net(x).asnumpy(), want)
    after = _stats()
    assert after["refused"] == before["refused"], after
    assert after["captured"] > before["captured"] and after["replayed"] > before["replayed"], after


def test_replay_reads_inputs_and_parameters_written_in_place():
    net = _net()
    x = np.array(IMAGES, device=pymx.gpu(0))
    for _ in range(4):
        net(x).wait_to_read()
    replayed = _stats()["replayed"]
    x[:] = np.array(IMAGES * -0.5, device=pymx.gpu(0))
    dense = net[-1].weight.data()
    dense[:] = dense * 3.0
    want = _op_by_op(net, x)
    for _ in range(3):
        onp.testing.assert_array_equal(net(x).asnumpy(), want)
    assert _stats()["replayed"] > replayed


def test_new_shapes_and_new_input_arrays_run_correctly():
    net = _net()
    for batch in (2, 5, 2, 5, 2):
        x = np.array(RNG.standard_normal((batch, 3, 32, 32)).astype("float32"), device=pymx.gpu(0))
        for _ in range(3):
            onp.testing.assert_array_equal(net(x).asnumpy(), _op_by_op(net, x))


def test_fresh_input_arrays_still_replay_the_graph():
    """A serving loop passes a new array every call: the inputs are copied into static buffers
    outside the graph, so the graph is still replayed, and reads each call's data."""
    net = _net()
    twin_outputs = []
    replayed = _stats()["replayed"]
    for i in range(6):
        x = np.array(IMAGES * (i + 1), device=pymx.gpu(0))
        twin_outputs.append(_op_by_op(net, x))
        onp.testing.assert_array_equal(net(x).asnumpy(), twin_outputs[-1])
    assert _stats()["replayed"] > replayed


def test_random_draws_are_never_captured():
    net = _net(dropout=0.5)
    x = np.array(IMAGES, device=pymx.gpu(0))
    before = _stats()
    with autograd.train_mode():
        masks = [net(x).asnumpy() for _ in range(4)]
    assert _stats()["captured"] == before["captured"]
    assert any((m != masks[0]).any() for m in masks[1:]), "dropout drew the same mask 4 times"
    # In predict mode dropout draws nothing (the identity), so the same graph is captured.
    replayed = _stats()["replayed"]
    for _ in range(4):
        onp.testing.assert_array_equal(net(x).asnumpy(), _op_by_op(net, x))
    assert _stats()["replayed"] > replayed


def test_cuda_graphs_off_and_under_the_naive_engine():
    code = """
import numpy as onp, pymx
from pymx import np
from pymx._c import core
from pymx.gluon import nn
net = nn.HybridSequential()
net.add(nn.Dense(4, activation="relu"), nn.Dense(2))
net.initialize(device=pymx.gpu(0))
x = np.ones((3, 5), device=pymx.gpu(0))
net(x)
net.hybridize(static_alloc=True, static_shape=True)
for _ in range(5):
    net(x).wait_to_read()
print(core.cuda_graph_stats()["captured"])
"""
    off = run_python(code, env={**os.environ, "PYMX_ENABLE_CUDA_GRAPHS": "0"})
    assert off.returncode == 0, off.stderr
    assert off.stdout.strip() == "0"
    on = run_python(code, env={**os.environ, "PYMX_ENABLE_CUDA_GRAPHS": "1"})
    assert on.returncode == 0, on.stderr
    assert int(on.stdout.strip()) >= 1
    # The naive engine's threads share a stream, so a capture could take in another's kernels.
    naive = run_python(code, env={**os.environ, "PYMX_ENABLE_CUDA_GRAPHS": "1",
                                  "PYMX_ENGINE": "naive"})
    assert naive.returncode == 0, naive.stderr
    assert naive.stdout.strip() == "0"


def test_training_forward_replays_train_like_op_by_op():
    """Recorded forward passes are bulked and, without dropout, captured too: training through
    them must give the parameters of the op-by-op twin (to rounding: the backward passes of max
    pooling and of cuDNN's fastest algorithms add with atomics, in no fixed order)."""
    from pymx import gluon
    nets = [_net(), _net(static_alloc=False)]
    for mine, theirs in zip(nets[1].collect_params().values(), nets[0].collect_params().values()):
        mine.set_data(theirs.data())
    x = np.array(IMAGES, device=pymx.gpu(0))
    y = np.array(onp.array([0.0, 1.0], dtype="float32"), device=pymx.gpu(0))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainers = [gluon.Trainer(n.collect_params(), "sgd", {"learning_rate": 0.05}) for n in nets]
    before = _stats()
    for _ in range(6):
        for net, trainer in zip(nets, trainers):
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(2)
    for mine, theirs in zip(nets[0].collect_params().values(), nets[1].collect_params().values()):
        onp.testing.assert_allclose(mine.data().asnumpy(), theirs.data().asnumpy(), rtol=1e-5,
                                    atol=1e-6)
    after = _stats()
    assert after["refused"] == before["refused"] and after["replayed"] > before["replayed"], after


def test_an_input_returned_as_an_output_is_the_callers_array():
    """Replays read staged copies of the inputs; an output that is an input is still the caller's."""
    def model(a):
        return [a * 2.0, a]

    x = np.array(IMAGES, device=pymx.gpu(0))
    graph, _ = autograd._trace(model, [x])
    graph.static_alloc = True
    for _ in range(4):
        doubled, same = graph.run([x])
        assert same._data_address() == x._data_address()
        onp.testing.assert_array_equal(doubled.asnumpy(), IMAGES * 2.0)
