"""Static allocation in the graph executor (hybridize(static_alloc=True)): a graph keeps its output
buffers between runs and reuses only those nothing else holds. Results must be exactly those of a
graph without it, whatever the caller keeps (outputs, autograd tapes), and a steady loop must not
allocate.
"""
import os
import textwrap
import threading

import numpy as onp
import pytest

import pymx
from pymx import autograd, gluon, np, npx
from pymx.gluon import nn
from conftest import ops_ran, run_python

RNG = onp.random.default_rng(7)
X = RNG.standard_normal((2, 3, 12, 12)).astype("float32")
W = RNG.standard_normal((4, 3, 3, 3)).astype("float32")


def _model(x, w):
    """Conv, relu, pool, a view (reshape), a reduction; three outputs, one of them a view."""
    h = npx.relu(npx.convolution(x, w, kernel=(3, 3), num_filter=4, no_bias=True))
    p = npx.pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max")
    flat = p.reshape((p.shape[0], -1))
    return [np.tanh(flat).sum(axis=1), flat, h * 2.0]


def _graphs(device=None):
    """The same trace twice: without and with static allocation."""
    device = device or pymx.cpu(0)
    arrays = [np.array(X, device=device), np.array(W, device=device)]
    plain, _ = autograd._trace(_model, arrays)
    static, _ = autograd._trace(_model, arrays)
    static.static_alloc = True
    return plain, static


def _inputs(scale, device=None):
    device = device or pymx.cpu(0)
    return [np.array(X * scale, device=device), np.array(W, device=device)]


def _assert_same(got, want):
    for g, w in zip(got, want):
        onp.testing.assert_array_equal(g.asnumpy(), w.asnumpy())


def test_static_replay_equals_plain_replay_and_keeps_held_outputs(device):
    plain, static = _graphs(device)
    assert static.static_alloc and not plain.static_alloc
    held = [static.run(_inputs(s, device)) for s in (1.0, -2.0, 0.5)]  # all alive at once
    for scale, outs in zip((1.0, -2.0, 0.5), held):
        _assert_same(outs, plain.run(_inputs(scale, device)))
    # Dropped outputs are recycled; the new results are still right.
    del held
    for scale in (3.0, 1.0):
        _assert_same(static.run(_inputs(scale, device)), plain.run(_inputs(scale, device)))


def test_steady_runs_reuse_the_same_buffers():
    _, static = _graphs()
    inputs = _inputs(1.0)
    static.run(inputs)[0].wait_to_read()
    addresses = None
    before = pymx.cpu(0).memory_stats()["num_allocs"]
    for _ in range(4):
        outs = static.run(inputs)
        pymx.waitall()
        now = sorted(o._data_address() for o in outs)
        assert addresses is None or now == addresses
        addresses = now
        del outs
    assert pymx.cpu(0).memory_stats()["num_allocs"] == before


def test_input_shape_change_reinfers_buffers():
    plain, static = _graphs()
    x = RNG.standard_normal((5, 3, 9, 9)).astype("float32")
    for inputs in ([np.array(x), np.array(W)], _inputs(1.0)):
        _assert_same(static.run(inputs), plain.run(inputs))


def test_failed_run_leaves_the_graph_usable():
    plain, static = _graphs()
    bad_weight = np.array(RNG.standard_normal((4, 5, 3, 3)).astype("float32"))  # 5 != 3 channels
    with pytest.raises(ValueError):
        static.run([np.array(X), bad_weight])
    _assert_same(static.run(_inputs(1.0)), plain.run(_inputs(1.0)))


def test_gradients_with_two_recorded_runs_alive(device):
    """Both tapes hold their activations until backward, so no buffer may be reused under them."""
    plain, static = _graphs(device)

    def gradients(graph):
        x1, x2 = np.array(X, device=device), np.array(-X, device=device)
        w = np.array(W, device=device)
        for a in (x1, x2, w):
            a.attach_grad()
        with autograd.record():
            first = graph.run([x1, w])
            second = graph.run([x2, w])
            loss = sum((o * o).sum() for o in first + second)
        loss.backward()
        return [a.grad.asnumpy() for a in (x1, x2, w)]

    for _ in range(2):  # the second round reuses what the first round's tape released
        for got, want in zip(gradients(static), gradients(plain)):
            if device.device_type == "cpu":
                onp.testing.assert_array_equal(got, want)
            else:  # cuDNN's fastest backward algorithms add with atomics: equal to rounding
                onp.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_runs_on_two_devices_use_separate_buffers():
    plain, static = _graphs()
    on_0 = static.run(_inputs(1.0, pymx.cpu(0)))
    on_1 = static.run(_inputs(2.0, pymx.cpu(1)))
    assert all(o.device == pymx.cpu(1) for o in on_1)
    _assert_same(on_0, plain.run(_inputs(1.0)))
    _assert_same(on_1, plain.run(_inputs(2.0)))


def test_concurrent_runs_from_two_threads():
    """Data parallelism: one thread per device runs the same graph; each run takes its own pool."""
    plain, static = _graphs()
    want = {scale: [o.asnumpy() for o in plain.run(_inputs(scale))] for scale in (1.0, 2.0)}
    failures = []

    def worker(device, scale):
        try:
            for _ in range(20):
                for got, expected in zip(static.run(_inputs(scale, device)), want[scale]):
                    onp.testing.assert_array_equal(got.asnumpy(), expected)
        except Exception as err:  # reported by the main thread
            failures.append(err)

    threads = [threading.Thread(target=worker, args=(pymx.cpu(i), 1.0 + i)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures


def test_replays_run_as_one_engine_op():
    """Note [Bulk execution]: once a signature's shapes are known, a replay into static buffers is
    one engine op ("graph") whose kernels are profiled one by one, recorded or not."""
    plain, static = _graphs()
    inputs = _inputs(1.0)
    static.run(inputs)  # infers the buffers' shapes: op by op
    npx.waitall()
    kernels = {"convolution": 1, "relu": 1, "pooling": 1, "reshape": 1, "tanh": 1, "sum": 1,
               "multiply_scalar": 1}
    assert ops_ran(lambda: static.run(inputs)) == {"graph": 1, **kernels}
    _assert_same(static.run(inputs), plain.run(inputs))
    x = _inputs(1.0)[0]
    x.attach_grad()
    npx.waitall()
    with autograd.record():
        recorded = ops_ran(lambda: static.run([x, inputs[1]]))
    assert recorded == {"graph": 1, **kernels}, recorded
    assert "graph" not in ops_ran(lambda: plain.run(inputs))


def test_bulk_replay_equals_op_by_op_replay(device):
    _, static = _graphs(device)
    plain, _ = _graphs(device)
    for scale in (1.0, -2.0, 0.5):
        _assert_same(static.run(_inputs(scale, device)), plain.run(_inputs(scale, device)))


def test_kernel_error_in_a_bulk_replay_reaches_every_output_once():
    def model(x, indices):
        picked = np.take(x, indices, axis=0, mode="raise")
        return [picked * 2.0, np.tanh(x).sum()]

    x = np.array(X[0, 0])
    good, bad = np.array(onp.array([0, 3, 11])), np.array(onp.array([0, 12, 1]))
    graph, _ = autograd._trace(model, [x, good])
    graph.static_alloc = True
    for _ in range(2):
        want = [o.asnumpy() for o in graph.run([x, good])]
    outs = graph.run([x, bad])
    with pytest.raises(IndexError, match="index 12 is out of bounds for axis 0 with size 12"):
        outs[0].asnumpy()
    npx.waitall()  # reported once: nothing left to raise
    del outs
    for got, expected in zip(graph.run([x, good]), want):
        onp.testing.assert_array_equal(got.asnumpy(), expected)


def test_bulk_execution_off_replays_op_by_op():
    code = textwrap.dedent("""
        import json, numpy as onp, pymx
        from pymx import autograd, np, npx, profiler
        x = np.array(onp.arange(24, dtype="float32").reshape(2, 12))
        def model(a):
            return [np.tanh(a * 2.0).sum(axis=1)]
        graph, _ = autograd._trace(model, [x])
        graph.static_alloc = True
        want = np.tanh(x * 2.0).sum(axis=1).asnumpy()
        graph.run([x])
        x.attach_grad()
        profiler.set_state("run")
        got = graph.run([x])[0].asnumpy()
        npx.waitall()
        inference = {e["name"] for e in json.loads(profiler.dumps(reset=True, format="json"))}
        with autograd.record():
            y = graph.run([x])[0]
        y.backward()
        npx.waitall()
        profiler.set_state("stop")
        training = {e["name"] for e in json.loads(profiler.dumps(format="json"))}
        onp.testing.assert_allclose(got, want, rtol=1e-6)
        t = onp.tanh(2.0 * onp.arange(24).reshape(2, 12))
        onp.testing.assert_allclose(x.grad.asnumpy(), 2.0 * (1 - t * t), rtol=1e-5, atol=1e-6)
        print("graph" in inference, "graph" in training)
    """)

    def bulked(**settings):
        result = run_python(code, env={**os.environ, **settings})
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    assert bulked() == ["True", "True"]
    assert bulked(PYMX_EXEC_BULK_EXEC_INFERENCE="0") == ["False", "True"]
    assert bulked(PYMX_EXEC_BULK_EXEC_TRAIN="0") == ["True", "False"]
    bad = run_python(code, env={**os.environ, "PYMX_EXEC_BULK_EXEC_TRAIN": "yes"})
    assert bad.returncode != 0
    assert 'PYMX_EXEC_BULK_EXEC_TRAIN="yes" is not an integer' in bad.stderr, bad.stderr


def _leafnet_like():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(6, kernel_size=3, activation="relu"), nn.MaxPool2D(pool_size=2),
            nn.BatchNorm(), nn.Flatten(), nn.Dense(8, activation="relu"), nn.Dropout(0.3),
            nn.Dense(2))
    net.initialize(pymx.initializer.Xavier())
    net(np.zeros((1, 3, 12, 12)))
    return net


def test_hybridize_static_alloc_trains_like_imperative():
    nets = [_leafnet_like() for _ in range(2)]
    for p0, p1 in zip(nets[0].collect_params().values(), nets[1].collect_params().values()):
        p1.set_data(p0.data())
    nets[1].hybridize(static_alloc=True, static_shape=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainers = [gluon.Trainer(n.collect_params(), "sgd", {"learning_rate": 0.1}) for n in nets]
    x = np.array(X)
    y = np.array([0.0, 1.0])
    for _ in range(3):
        losses = []
        for net, trainer in zip(nets, trainers):
            np.random.seed(11)  # same dropout masks in both
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(2)
            losses.append(loss.asnumpy())
        onp.testing.assert_allclose(losses[1], losses[0], rtol=1e-6, atol=1e-7)
    with autograd.predict_mode():
        onp.testing.assert_allclose(nets[1](x).asnumpy(), nets[0](x).asnumpy(), rtol=1e-6,
                                    atol=1e-7)
