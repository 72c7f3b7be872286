"""The fused gate operators of an LSTM and a GRU step (lstm_gates, gru_gates), which rnn_cell's
lstm_step and gru_step call with the default activations: outputs and gradients against float64
NumPy references and central differences, fused against the composed step in every float dtype,
edge shapes, the cells and layers (imperative, hybridized, which operators run), the serial
engine as the parallel kernels' oracle, GPU against CPU, and the errors."""

import numpy as onp
import pytest

from pymx import autograd, gluon, np, npx
from pymx._op import invoke
from pymx.device import cpu, gpu
from pymx.gluon.rnn import rnn_layer
from pymx.gluon.rnn.rnn_cell import gru_step, lstm_step
from pymx.ndarray import from_numpy
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import assert_engines_agree, ops_ran, requires_gpu

FLOAT_DTYPES = ["float32", "float64", "float16", "bfloat16"]
# Fused against composed: both compute in the data's precision (16-bit through float), so they
# differ by a few roundings of it; the composed step rounds every intermediate to 16 bits.
FUSED_TOLERANCES = {"float64": (1e-13, 1e-13), "float32": (1e-5, 1e-6),
                    "float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)}


def sigmoid(x):
    return 1.0 / (1.0 + onp.exp(-x))


def lstm_reference(i2h, h2h, c):
    """(h_next, c_next) and the activated gates, in float64."""
    i, f, g, o = onp.split(i2h.astype(onp.float64) + h2h, 4, axis=-1)
    i, f, g, o = sigmoid(i), sigmoid(f), onp.tanh(g), sigmoid(o)
    c_next = f * c + i * g
    return o * onp.tanh(c_next), c_next, (i, f, g, o)


def lstm_grad_reference(i2h, h2h, c, dh, dc):
    """(d_gates, d_c) in float64: the gradient of the gate pre-activations (that of i2h and of
    h2h) and of c."""
    _, c_next, (i, f, g, o) = lstm_reference(i2h, h2h, c)
    t = onp.tanh(c_next)
    dc_total = dc + dh * o * (1 - t * t)
    d_gates = onp.concatenate([dc_total * g * i * (1 - i), dc_total * c * f * (1 - f),
                               dc_total * i * (1 - g * g), dh * t * o * (1 - o)], axis=-1)
    return d_gates, dc_total * f


def gru_reference(i2h, h2h, h):
    i_r, i_z, i_n = onp.split(i2h.astype(onp.float64), 3, axis=-1)
    h_r, h_z, h_n = onp.split(h2h.astype(onp.float64), 3, axis=-1)
    r, z = sigmoid(i_r + h_r), sigmoid(i_z + h_z)
    n = onp.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def draw_step(rng, rows, hidden, gates, dtype, device=None):
    """(i2h, h2h, state) as float64 NumPy arrays rounded to `dtype`, and as pymx arrays."""
    shape = rows if isinstance(rows, tuple) else (rows,)
    values = [rng.uniform(-2, 2, size=shape + (gates * hidden,)),
              rng.uniform(-2, 2, size=shape + (gates * hidden,)),
              rng.uniform(-1.5, 1.5, size=shape + (hidden,))]
    arrays = [from_numpy(v, device=device, dtype=dtype) for v in values]
    return [a.astype("float64").asnumpy() for a in arrays], arrays


def composed_lstm(i2h, h2h, c):
    """lstm_step's composed path: callables for the activations select it."""
    return lstm_step(i2h, h2h, c, activation=np.tanh, recurrent_activation=npx.sigmoid)


def composed_gru(i2h, h2h, h):
    return gru_step(i2h, h2h, h, activation=np.tanh, recurrent_activation=npx.sigmoid)


def fused_lstm(i2h, h2h, c):
    """(h_next, c_next), leaving out the gates saved for the backward."""
    return tuple(invoke("lstm_gates", [i2h, h2h, c])[:2])


def fused_gru(i2h, h2h, h):
    return invoke("gru_gates", [i2h, h2h, h])[0]  # [1]: the gates saved for the backward


# ---------------------------------------------------------------------------------------------
# Values and gradients
# ---------------------------------------------------------------------------------------------
# Hidden sizes 1 and 7 (no multiple of a vector width), row counts 1 and 5, leading axes.
SHAPES = [(1, 1), (5, 7), ((2, 3), 4), (3, 16)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("rows,hidden", SHAPES)
def test_lstm_gates_matches_reference(dtype, rows, hidden, device):
    rng = onp.random.default_rng(0)
    (i2h, h2h, c), arrays = draw_step(rng, rows, hidden, 4, dtype, device)
    h_next, c_next = fused_lstm(*arrays)
    h_ref, c_ref, _ = lstm_reference(i2h, h2h, c)
    assert h_next.dtype == arrays[0].dtype and h_next.shape == c.shape
    assert_almost_equal(h_next, h_ref)
    assert_almost_equal(c_next, c_ref)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("rows,hidden", SHAPES)
def test_gru_gates_matches_reference(dtype, rows, hidden, device):
    rng = onp.random.default_rng(1)
    (i2h, h2h, h), arrays = draw_step(rng, rows, hidden, 3, dtype, device)
    h_next = fused_gru(*arrays)
    assert h_next.dtype == arrays[0].dtype and h_next.shape == h.shape
    assert_almost_equal(h_next, gru_reference(i2h, h2h, h))


def test_saved_gates_and_backward_match_reference():
    """The gates the forward saves for the backward, and the backward operators against the
    float64 derivatives, both LSTM output gradients nonzero."""
    rng = onp.random.default_rng(2)
    (i2h, h2h, c), arrays = draw_step(rng, 4, 6, 4, "float64")
    h_next, c_next, gates = invoke("lstm_gates", arrays)
    _, c_ref, activated = lstm_reference(i2h, h2h, c)
    assert_almost_equal(gates, onp.concatenate(activated + (onp.tanh(c_ref),), axis=-1),
                        rtol=1e-13, atol=1e-15)
    dh, dc = rng.uniform(-1, 1, size=(2, 4, 6))
    d_gates, d_c = invoke("lstm_gates_backward", [from_numpy(dh), from_numpy(dc), arrays[2], gates])
    d_gates_ref, d_c_ref = lstm_grad_reference(i2h, h2h, c, dh, dc)
    assert_almost_equal(d_gates, d_gates_ref, rtol=1e-12, atol=1e-14)
    assert_almost_equal(d_c, d_c_ref, rtol=1e-12, atol=1e-14)

    (i2h, h2h, h), arrays = draw_step(rng, 4, 6, 3, "float64")
    _, gates = invoke("gru_gates", arrays)
    i_r, i_z, i_n = onp.split(i2h, 3, axis=-1)
    h_r, h_z, h_n = onp.split(h2h, 3, axis=-1)
    r, z = sigmoid(i_r + h_r), sigmoid(i_z + h_z)
    n = onp.tanh(i_n + r * h_n)
    assert_almost_equal(gates, onp.concatenate([r, z, n, h_n], axis=-1), rtol=1e-13, atol=1e-15)
    d_i2h, d_h2h, d_h = invoke("gru_gates_backward", [from_numpy(dh), arrays[2], gates])
    d_n = dh * (1 - z) * (1 - n * n)
    d_rz = [d_n * h_n * r * (1 - r), dh * (h - n) * z * (1 - z)]
    assert_almost_equal(d_i2h, onp.concatenate(d_rz + [d_n], axis=-1), rtol=1e-12, atol=1e-14)
    assert_almost_equal(d_h2h, onp.concatenate(d_rz + [d_n * r], axis=-1), rtol=1e-12, atol=1e-14)
    assert_almost_equal(d_h, dh * z, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("which", ["both", "h", "c"])
def test_lstm_gates_gradient_numeric(which):
    """Central differences in float64 through h_next and c_next together, and through one of
    them (autograd then gives the backward a zero gradient for the other)."""
    rng = onp.random.default_rng(3)
    values = [rng.uniform(-2, 2, size=(3, 20)), rng.uniform(-2, 2, size=(3, 20)),
              rng.uniform(-1, 1, size=(3, 5))]
    pick = {"both": lambda h, c: np.concatenate([h, c], axis=-1),
            "h": lambda h, c: h, "c": lambda h, c: c}[which]
    check_numeric_gradient(lambda *xs: pick(*fused_lstm(*xs)), values, eps=1e-6, rtol=1e-6,
                           atol=1e-8)


def test_gru_gates_gradient_numeric():
    rng = onp.random.default_rng(4)
    values = [rng.uniform(-2, 2, size=(3, 15)), rng.uniform(-2, 2, size=(3, 15)),
              rng.uniform(-1, 1, size=(3, 5))]
    check_numeric_gradient(fused_gru, values, eps=1e-6, rtol=1e-6, atol=1e-8)


def grads_of(step, arrays, heads):
    """The outputs of `step` and the gradients of its inputs, for head gradients `heads`."""
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        outs = step(*arrays)
        outs = outs if isinstance(outs, tuple) else (outs,)
    autograd.backward(list(outs), list(heads))
    return [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in arrays]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("rows,hidden", SHAPES)
def test_lstm_fused_equals_composed(dtype, rows, hidden, device):
    rng = onp.random.default_rng(5)
    _, arrays = draw_step(rng, rows, hidden, 4, dtype, device)
    heads = [from_numpy(rng.uniform(-1, 1, size=arrays[2].shape), device=device, dtype=dtype)
             for _ in range(2)]
    fused = grads_of(fused_lstm, arrays, heads)
    composed = grads_of(composed_lstm, arrays, heads)
    rtol, atol = FUSED_TOLERANCES[dtype]
    for name, a, b in zip(["h_next", "c_next", "d_i2h", "d_h2h", "d_c"], fused, composed):
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=(f"fused {name}", "composed"))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("rows,hidden", SHAPES)
def test_gru_fused_equals_composed(dtype, rows, hidden, device):
    rng = onp.random.default_rng(6)
    _, arrays = draw_step(rng, rows, hidden, 3, dtype, device)
    heads = [from_numpy(rng.uniform(-1, 1, size=arrays[2].shape), device=device, dtype=dtype)]
    fused = grads_of(fused_gru, arrays, heads)
    composed = grads_of(composed_gru, arrays, heads)
    rtol, atol = FUSED_TOLERANCES[dtype]
    for name, a, b in zip(["h_next", "d_i2h", "d_h2h", "d_h"], fused, composed):
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=(f"fused {name}", "composed"))


@pytest.mark.parametrize("rows,hidden", [(0, 3), (2, 0), ((0, 2), 4)])
def test_empty_shapes(rows, hidden):
    rng = onp.random.default_rng(7)
    for gates, step in [(4, fused_lstm), (3, fused_gru)]:
        _, arrays = draw_step(rng, rows, hidden, gates, "float32")
        heads = [np.ones(arrays[2].shape)] * (2 if gates == 4 else 1)
        results = grads_of(step, arrays, heads)
        assert [r.shape for r in results[-3:]] == [a.shape for a in arrays]


# ---------------------------------------------------------------------------------------------
# The cells and layers use the fused operators
# ---------------------------------------------------------------------------------------------
def test_cells_run_the_fused_operators():
    """Default activations: one lstm_gates / gru_gates per step and no separate sigmoid; custom
    activations and clipping keep the composed step."""
    x = np.ones((2, 3))
    for cell, op in [(gluon.rnn.LSTMCell(4), "lstm_gates"), (gluon.rnn.GRUCell(4), "gru_gates")]:
        cell.initialize()
        states = cell.begin_state(batch_size=2)
        ran = ops_ran(lambda: cell(x, states))
        assert ran.get(op) == 1 and "sigmoid" not in ran, ran
    custom = gluon.rnn.LSTMCell(4, activation="softsign")
    custom.initialize()
    ran = ops_ran(lambda: custom(x, custom.begin_state(batch_size=2)))
    assert "lstm_gates" not in ran and "sigmoid" in ran, ran
    clipped = gluon.rnn.LSTM(4, state_clip_min=-1.0, state_clip_max=1.0)
    clipped.initialize()
    ran = ops_ran(lambda: clipped(np.ones((3, 2, 3))))
    assert "lstm_gates" not in ran, ran


def test_mixed_dtypes_take_the_composed_step():
    """float16 projections with a float32 state (amp's float16 matrix products) promote, as the
    composed step does, rather than reaching the fused operators, which take one dtype."""
    rng = onp.random.default_rng(13)
    for step, gates in [(lstm_step, 4), (gru_step, 3)]:
        _, (i2h, h2h, state) = draw_step(rng, 3, 5, gates, "float16")
        state = state.astype("float32")
        ran = ops_ran(lambda: step(i2h, h2h, state))
        assert "lstm_gates" not in ran and "gru_gates" not in ran, ran
        out = step(i2h, h2h, state)
        assert (out[0] if gates == 4 else out).dtype == onp.float32


@pytest.mark.parametrize("layer_type", ["LSTM", "GRU"])
def test_hybridized_layer_equals_imperative(layer_type, monkeypatch):
    """The trace records the fused operators: outputs and gradients equal the imperative run.
    The layer's per-step path, which GPUs run (on the CPU one rnn_sequence operator runs the
    time loop instead: test_rnn_sequence.py)."""
    monkeypatch.setattr(rnn_layer, "_runs_as_one_operator", lambda *args: False)
    op = {"LSTM": "lstm_gates", "GRU": "gru_gates"}[layer_type]
    x = from_numpy(onp.random.default_rng(8).uniform(-1, 1, size=(5, 3, 4)), dtype="float32")

    def run(net):
        x.attach_grad()
        with autograd.record():
            out = net(x)
        out.backward()
        return out.asnumpy(), x.grad.asnumpy(), net.l0_i2h_weight.grad().asnumpy()

    net = getattr(gluon.rnn, layer_type)(6, num_layers=2)
    net.initialize()
    imperative = run(net)
    net.hybridize()
    run(net)  # traces
    assert ops_ran(lambda: run(net)).get(op, 0) >= 5 * 2
    for a, b in zip(run(net), imperative):
        onp.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------------------------
# The serial engine as the parallel kernels' oracle; GPU against CPU
# ---------------------------------------------------------------------------------------------
_ENGINE_SCRIPT = r'''
import numpy as onp
from pymx import autograd
from pymx._op import invoke
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(9)
results = []
# 37 rows of 300 units: the kernels split them into several parallel chunks.
for op, gates, states in [("lstm_gates", 4, 2), ("gru_gates", 3, 1)]:
    arrays = [from_numpy(rng.uniform(-2, 2, size=(37, gates * 300)), dtype="float32"),
              from_numpy(rng.uniform(-2, 2, size=(37, gates * 300)), dtype="float32"),
              from_numpy(rng.uniform(-1, 1, size=(37, 300)), dtype="float32")]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        outs = invoke(op, arrays)  # the new states, then the saved gates
    heads = [from_numpy(rng.uniform(-1, 1, size=(37, 300)), dtype="float32") for _ in range(states)]
    autograd.backward(outs[:states], heads)
    results += [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in arrays]
onp.savez(OUT, *results)
'''


def test_threaded_engine_matches_naive(tmp_path):
    """Rows are split over the intra-op threads and every unit is computed alone, so the
    serial engine's results equal the threaded engine's bitwise."""
    assert_engines_agree(_ENGINE_SCRIPT, tmp_path)


@requires_gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("gates,step", [(4, fused_lstm), (3, fused_gru)])
@pytest.mark.parametrize("rows,hidden", [(1, 1), (5, 7), (70, 300)])
def test_gpu_matches_cpu(dtype, gates, step, rows, hidden):
    results = {}
    for device in (cpu(0), gpu(0)):
        _, arrays = draw_step(onp.random.default_rng(11), rows, hidden, gates, dtype, device)
        heads = [from_numpy(onp.random.default_rng(12).uniform(-1, 1, size=arrays[2].shape),
                            device=device, dtype=dtype) for _ in range(2 if gates == 4 else 1)]
        results[device] = grads_of(step, arrays, heads)
    # The same formulas in the same precision; the two devices' exp and tanh differ in the last
    # bits.
    rtol, atol = FUSED_TOLERANCES[dtype]
    for a, b in zip(results[gpu(0)], results[cpu(0)]):
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=("gpu", "cpu"))


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op,shapes,message", [
    ("lstm_gates", [(2, 6), (2, 6), (2, 2)], r"i2h must have a last axis of 4 \* hidden_size, "
                                             r"got shape \(2, 6\)"),
    ("lstm_gates", [(2, 8), (2, 4), (2, 2)], r"h2h shape \(2, 4\) differs from i2h \(2, 8\)"),
    ("lstm_gates", [(2, 8), (2, 8), (3, 2)], r"c must have shape \(2, 2\) for i2h \(2, 8\), "
                                             r"got \(3, 2\)"),
    ("gru_gates", [(2, 7), (2, 7), (2, 2)], r"i2h must have a last axis of 3 \* hidden_size"),
    ("gru_gates", [(2, 6), (2, 6), (2, 3)], r"h must have shape \(2, 2\) for i2h \(2, 6\), "
                                            r"got \(2, 3\)"),
    ("gru_gates", [(), (), ()], r"i2h must have a last axis of 3 \* hidden_size, got shape \(\)"),
    ("lstm_gates_backward", [(2, 2), (2, 2), (2, 2), (2, 8)],
     r"gates must have shape \(2, 10\) for c \(2, 2\), got \(2, 8\)"),
    ("lstm_gates_backward", [(2, 2), (3, 2), (2, 2), (2, 10)],
     r"dc_next shape \(3, 2\) differs from c \(2, 2\)"),
    ("gru_gates_backward", [(2, 3), (2, 2), (2, 8)], r"dh_next shape \(2, 3\) differs from h \(2, 2\)"),
])
def test_bad_shapes(op, shapes, message):
    with pytest.raises(ValueError, match=message):
        invoke(op, [np.zeros(s) for s in shapes])


@pytest.mark.parametrize("op", ["lstm_gates", "gru_gates"])
def test_bad_dtypes(op):
    gates = 4 if op == "lstm_gates" else 3
    with pytest.raises(TypeError, match="has dtype float64"):
        invoke(op, [np.zeros((2, gates * 2)), np.zeros((2, gates * 2), dtype="float64"),
                    np.zeros((2, 2))])
    with pytest.raises(TypeError, match="must be a floating-point array, got int32"):
        invoke(op, [np.zeros((2, gates * 2), dtype="int32")] * 2 + [np.zeros((2, 2), dtype="int32")])
