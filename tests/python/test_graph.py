"""The graph executor behind hybridize: trace a function once, replay it natively. Replays must
equal the imperative path exactly (same kernels in the same order), forward and backward, in both
training modes, on another device, and after a JSON round trip.
"""
import json

import numpy as onp
import pytest

import pymx
from pymx import autograd, np, npx
from pymx._c.autograd import Graph

RNG = onp.random.default_rng(42)
X = RNG.standard_normal((4, 3)).astype("float32")
W = RNG.standard_normal((3, 5)).astype("float32")
C = RNG.standard_normal((5,)).astype("float32")


def _arrays(device=None):
    device = device or pymx.cpu(0)
    return [np.array(X, device=device), np.array(W, device=device)]


def _model(constant):
    """Two outputs; reads a constant it did not receive as input and creates an array."""
    def f(x, w):
        h = np.tanh(np.dot(x, w) + 1.0) * constant
        bias = np.ones((5,), device=x.device)
        return [(h + bias).sum(axis=1), h]
    return f


def test_replay_equals_imperative_forward():
    constant = np.array(C)
    f = _model(constant)
    graph, traced = autograd._trace(f, _arrays())
    assert graph.num_inputs == 2 and graph.num_outputs == 2
    assert len(graph.constants) == 1
    x2 = np.array(X * 2.0)
    w2 = np.array(W - 1.0)
    for got, want in zip(graph.run([x2, w2]), f(x2, w2)):
        onp.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
    for got, want in zip(graph.run(_arrays()), traced):
        onp.testing.assert_array_equal(got.asnumpy(), want.asnumpy())


def test_backward_through_a_replay_equals_imperative(device):
    f = _model(np.array(C, device=device))
    graph, _ = autograd._trace(f, _arrays(device))

    def gradients(run):
        x, w = _arrays(device)
        x.attach_grad()
        w.attach_grad()
        with autograd.record():
            out, h = run(x, w)
            loss = out.sum() + (h * h).sum()
        loss.backward()
        return x.grad.asnumpy(), w.grad.asnumpy()

    for got, want in zip(gradients(lambda x, w: graph.run([x, w])), gradients(f)):
        onp.testing.assert_array_equal(got, want)


def test_captured_variable_constant_receives_its_gradient():
    w = np.array(W)
    w.attach_grad()
    graph, _ = autograd._trace(lambda x: np.dot(x, w), [np.array(X)])
    with autograd.record():
        loss = graph.run([np.array(X)])[0].sum()
    loss.backward()
    onp.testing.assert_allclose(w.grad.asnumpy(), onp.tile(X.sum(axis=0)[:, None], (1, 5)),
                                rtol=1e-5)


def test_training_mode_is_read_at_run_time():
    graph, _ = autograd._trace(lambda x: npx.dropout(x, p=0.5), [np.ones((1000,))])
    x = np.ones((1000,))
    with autograd.train_mode():
        dropped = graph.run([x])[0].asnumpy()
    with autograd.predict_mode():
        kept = graph.run([x])[0].asnumpy()
    assert (dropped == 0).sum() > 300
    onp.testing.assert_array_equal(kept, onp.ones(1000))


def test_replay_on_another_device_moves_created_arrays_and_constants():
    f = _model(np.array(C))
    graph, _ = autograd._trace(f, _arrays(pymx.cpu(0)))
    outs = graph.run(_arrays(pymx.cpu(1)))
    assert all(o.device == pymx.cpu(1) for o in outs)
    for got, want in zip(outs, f(*_arrays())):
        onp.testing.assert_array_equal(got.asnumpy(), want.asnumpy())


def test_json_round_trip():
    constant = np.array(C)
    graph, _ = autograd._trace(_model(constant), _arrays())
    text = graph.to_json()
    doc = json.loads(text)
    assert set(doc) >= {"nodes", "arg_nodes", "heads"}
    ops = [n["op"] for n in doc["nodes"]]
    assert ops[:3] == ["null", "null", "null"] and "tanh" in ops
    assert [doc["nodes"][i]["name"] for i in doc["arg_nodes"]] == ["data0", "data1", "const0"]
    assert len(doc["heads"]) == 2

    loaded = Graph.from_json(text)
    assert loaded.num_inputs == 3 and loaded.num_outputs == 2
    assert loaded.to_json() == Graph.from_json(loaded.to_json()).to_json()
    for got, want in zip(loaded.run(_arrays() + [constant]), graph.run(_arrays())):
        onp.testing.assert_array_equal(got.asnumpy(), want.asnumpy())


def test_output_that_is_an_input_or_a_constant():
    constant = np.array(C)
    graph, _ = autograd._trace(lambda x: [x, constant, x * 2.0], [np.array(X)])
    x = np.array(X + 1.0)
    same, const, doubled = graph.run([x])
    onp.testing.assert_array_equal(same.asnumpy(), X + 1.0)
    onp.testing.assert_array_equal(const.asnumpy(), C)
    onp.testing.assert_array_equal(doubled.asnumpy(), (X + 1.0) * 2.0)


def test_errors_leave_the_thread_usable():
    graph, _ = autograd._trace(lambda x: x * 2.0, [np.array(X)])
    with pytest.raises(ValueError, match="the graph takes 1 inputs, got 2"):
        graph.run(_arrays())
    with pytest.raises(ZeroDivisionError):
        autograd._trace(lambda x: 1 / 0, [np.array(X)])
    with pytest.raises(ValueError, match="graph JSON"):
        Graph.from_json('{"nodes": [{"op": "no_such_op"')
    with pytest.raises(ValueError, match="unknown operator 'no_such_op'"):
        Graph.from_json('{"nodes": [{"op": "no_such_op", "inputs": []}], "heads": [[0, 0, 0]]}')
    pymx._c.autograd.trace_begin([np.array(X)])
    with pytest.raises(ValueError, match="already tracing"):
        pymx._c.autograd.trace_begin([np.array(X)])
    pymx._c.autograd.trace_abort()
    graph, _ = autograd._trace(lambda x: x + 1.0, [np.array(X)])  # tracing works again
    onp.testing.assert_array_equal(graph.run([np.array(X)])[0].asnumpy(), X + 1.0)
