"""The rnn_sequence operator, which runs one recurrent layer and direction over a whole sequence
(Note [Recurrent time loop in one operator]): its outputs and saved gates against a float64 NumPy
loop, its gradients against central differences, its float32 steps in blocks of hidden units
(Note [Gates beside their product]) against those at sizes that leave narrower or padded blocks,
the gates' libmvec spans at hidden sizes no multiple of a vector width and at saturating
pre-activations (+-30, +-90: exact 0, 1, +-1, finite gradients), the layers that use it against
their composed per-step path (forward and every gradient, each mode, both directions, several
layers, odd sizes), when the layers use it, hybridized against imperative, the serial engine and
one thread as the parallel kernels' oracles, GPU layers against CPU, and the errors."""
import numpy as onp
import pytest

from pymx import autograd, gluon, np
from pymx._op import invoke
from pymx.device import cpu, gpu
from pymx.gluon.rnn import rnn_layer
from pymx.ndarray import from_numpy
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import assert_engines_agree, assert_thread_count_independent, ops_ran, requires_gpu

MODES = ["lstm", "gru", "rnn_tanh", "rnn_relu"]
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
LAYERS = {"lstm": gluon.rnn.LSTM, "gru": gluon.rnn.GRU,
          "rnn_tanh": lambda *a, **k: gluon.rnn.RNN(*a, activation="tanh", **k),
          "rnn_relu": lambda *a, **k: gluon.rnn.RNN(*a, activation="relu", **k)}
# Fused against composed: the same products and gate formulas, sums in another order (the
# recurrent weight gradient over all steps at once, the state gradients' two terms).
# 16-bit data: both compute in float and round to 16 bits, the composed path after every step's
# operators (its weight gradients are sums of per-step 16-bit products), this one once.
TOLERANCES = {"float64": (1e-11, 1e-12), "float32": (2e-5, 2e-6), "float16": (2e-2, 2e-2),
              "bfloat16": (1e-1, 1e-1)}


def sigmoid(x):
    return 1 / (1 + onp.exp(-x))


def reference(mode, i2h, weight, h0, c0=None, bias=None, reverse=False):
    """(out, h_last, c_last or None, saved or None) of the operator in float64, step by step."""
    steps, hidden = i2h.shape[0], weight.shape[1]
    h, c = h0.astype(onp.float64), None if c0 is None else c0.astype(onp.float64)
    out = onp.zeros(i2h.shape[:2] + (hidden,))
    saved = []
    for t in (reversed(range(steps)) if reverse else range(steps)):
        h2h = h @ weight.T + (0 if bias is None else bias)
        if mode == "lstm":
            i, f, g, o = onp.split(i2h[t] + h2h, 4, axis=-1)
            i, f, g, o = sigmoid(i), sigmoid(f), onp.tanh(g), sigmoid(o)
            c = f * c + i * g
            h = o * onp.tanh(c)
            saved.append((t, onp.concatenate([i, f, g, o, onp.tanh(c), c], axis=-1)))
        elif mode == "gru":
            x_r, x_z, x_n = onp.split(i2h[t], 3, axis=-1)
            h_r, h_z, h_n = onp.split(h2h, 3, axis=-1)
            r, z = sigmoid(x_r + h_r), sigmoid(x_z + h_z)
            n = onp.tanh(x_n + r * h_n)
            h = (1 - z) * n + z * h
            saved.append((t, onp.concatenate([r, z, n, h_n], axis=-1)))
        else:
            pre = i2h[t] + h2h
            h = onp.tanh(pre) if mode == "rnn_tanh" else onp.maximum(pre, 0)
        out[t] = h
    saved = onp.stack([s for _, s in sorted(saved, key=lambda p: p[0])]) if saved else None
    return out, h, c, saved


def draw_inputs(rng, mode, steps, batch, hidden, dtype="float64"):
    """The operator's inputs [i2h, weight, h0, c0 or bias] as float64 NumPy arrays."""
    rows = GATES[mode] * hidden
    values = [rng.uniform(-1.5, 1.5, size=(steps, batch, rows)),
              rng.uniform(-0.6, 0.6, size=(rows, hidden)),
              rng.uniform(-1, 1, size=(batch, hidden))]
    if mode == "lstm":
        values.append(rng.uniform(-1, 1, size=(batch, hidden)))
    if mode == "gru":
        values.append(rng.uniform(-0.5, 0.5, size=(rows,)))
    arrays = [from_numpy(v, dtype=dtype) for v in values]
    return [a.astype("float64").asnumpy() for a in arrays], arrays


def run_op(mode, arrays, reverse=False):
    return invoke("rnn_sequence", arrays, {"mode": mode, "reverse": reverse})


def reference_of(mode, values, reverse):
    extra = {"c0": values[3]} if mode == "lstm" else {"bias": values[3]} if mode == "gru" else {}
    return reference(mode, *values[:3], reverse=reverse, **extra)


# ---------------------------------------------------------------------------------------------
# The operator against NumPy
# ---------------------------------------------------------------------------------------------
# Hidden sizes 1, 5 and 19 (no multiple of a vector width), one step, one sequence.
SHAPES = [(1, 1, 1), (4, 3, 5), (3, 1, 19), (1, 2, 6)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("steps,batch,hidden", SHAPES)
def test_outputs_and_saved_gates_match_reference(mode, reverse, steps, batch, hidden):
    values, arrays = draw_inputs(onp.random.default_rng(0), mode, steps, batch, hidden)
    results = run_op(mode, arrays, reverse)
    out, h_last, c_last, saved = reference_of(mode, values, reverse)
    expected = [out, h_last] + ([c_last] if mode == "lstm" else []) + \
        ([saved] if saved is not None else [])
    assert len(results) == len(expected)
    for name, got, want in zip(["out", "h_last", "c_last/saved", "saved"], results, expected):
        assert got.shape == want.shape, name
        assert_almost_equal(got, want, rtol=1e-12, atol=1e-13, names=(name, "reference"))


# float32 steps run in blocks of hidden units beside their product (Note [Gates beside their
# product]): about H / threads units per block, whole panels of 16 or 32 columns, so 33 and 70
# leave a narrower last block, 1 one unit in a padded block, 100 no multiple of a vector width;
# one sequence, and 9 rows (tiles of 4 and 5).
UNIT_BLOCK_SHAPES = [(3, 1, 33, False), (2, 5, 70, True), (2, 9, 1, False), (2, 3, 100, True)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("steps,batch,hidden,reverse", UNIT_BLOCK_SHAPES)
def test_float32_unit_blocks_match_reference(mode, steps, batch, hidden, reverse):
    values, arrays = draw_inputs(onp.random.default_rng(7), mode, steps, batch, hidden,
                                 "float32")
    if mode in ("rnn_tanh", "rnn_relu"):  # keep sums of many terms out of tanh's flat tails
        arrays[1] = from_numpy(values[1] / onp.sqrt(hidden), dtype="float32")
        values[1] = arrays[1].astype("float64").asnumpy()
    results = run_op(mode, arrays, reverse)
    expected = [r for r in reference_of(mode, values, reverse) if r is not None]
    for name, got, want in zip(["out", "h_last", "c_last/saved", "saved"], results, expected):
        assert got.dtype == onp.float32, name
        assert_almost_equal(got, want, rtol=1e-4, atol=1e-5, names=(name, "reference"))


# The gate functions compute sigmoid and tanh over spans of units through libmvec (Note [Vector
# math through libmvec]), whose results are within a few ulp of libm's: hidden sizes 1, 3, 17 and
# 33 leave spans shorter than a vector and tails past whole vectors (in float32, on two threads
# with AVX-512, 33 units are a block of 32 and one of 1). Tolerances against the float64 reference: float64 1e-12 relative (a few
# ulp per function, compounded over the steps); float32 1e-5 relative, 1e-6 absolute (float
# rounding of the recurrent products and the gates, ~1e-7 each).
SPAN_TOLERANCES = {"float64": (1e-12, 1e-13), "float32": (1e-5, 1e-6)}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("hidden", [1, 3, 17, 33])
def test_gate_spans_of_any_width_match_reference(mode, dtype, hidden):
    values, arrays = draw_inputs(onp.random.default_rng(hidden), mode, 3, 2, hidden, dtype)
    arrays[1] = from_numpy(values[1] / onp.sqrt(hidden), dtype=dtype)
    values[1] = arrays[1].astype("float64").asnumpy()
    results = run_op(mode, arrays, reverse=hidden % 2 == 1)
    expected = [r for r in reference_of(mode, values, hidden % 2 == 1) if r is not None]
    rtol, atol = SPAN_TOLERANCES[dtype]
    for name, got, want in zip(["out", "h_last", "c_last/saved", "saved"], results, expected):
        assert got.dtype == onp.dtype(dtype), name
        assert_almost_equal(got, want, rtol=rtol, atol=atol, names=(name, "reference"))


def extreme_inputs(rng, mode, dtype, steps=2, batch=3, hidden=19):
    """Inputs whose gate pre-activations are +-30 or +-90 (sigmoid and tanh saturate; float32's
    exp overflows past 88.7) or moderate, the recurrent products small beside them."""
    values, _ = draw_inputs(rng, mode, steps, batch, hidden)
    magnitudes = rng.choice([30.0, 90.0, 0.5], size=values[0].shape)
    values[0] = magnitudes * rng.choice([-1.0, 1.0], size=values[0].shape)
    values[1] = values[1] / hidden
    arrays = [from_numpy(v, dtype=dtype) for v in values]
    return [a.astype("float64").asnumpy() for a in arrays], arrays


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_extreme_pre_activations_saturate_without_nan(mode, dtype):
    """Saturated gates are exactly 0, 1 or +-1 where the reference rounds to them, and every
    output and gradient is finite (no 0 * inf, no inf / inf) and right: float32 against float64,
    float64 against central differences."""
    rng = onp.random.default_rng(11)
    values, arrays = extreme_inputs(rng, mode, dtype)
    results = run_op(mode, arrays)
    expected = [r for r in reference_of(mode, values, False) if r is not None]
    rtol, atol = SPAN_TOLERANCES[dtype]
    for name, got, want in zip(["out", "h_last", "c_last/saved", "saved"], results, expected):
        got = got.asnumpy()
        assert onp.isfinite(got).all(), name
        assert_almost_equal(got, want, rtol=rtol, atol=atol, names=(name, "reference"))
    if mode in ("lstm", "gru"):  # sigmoid(90), tanh(+-30) and beyond round to 1 and +-1
        saved = results[-1].asnumpy().astype(onp.float64)
        want = expected[-1]
        saturated = onp.isin(want, [0.0, 1.0, -1.0])
        assert saturated.any()
        onp.testing.assert_array_equal(saved[saturated], want[saturated])
    steps, (batch, hidden) = values[0].shape[0], values[2].shape
    shapes = [(steps, batch, hidden)] + [(batch, hidden)] * (2 if mode == "lstm" else 1)
    heads = [rng.uniform(-1, 1, size=shape) for shape in shapes]
    got = gradients(mode, arrays, [from_numpy(h, dtype=dtype) for h in heads], False)
    for name, g in zip(["d_i2h", "d_weight", "d_h0", "d_c0/d_bias"], got):
        assert onp.isfinite(g.asnumpy()).all(), name
    if dtype == "float32":
        arrays64 = [from_numpy(v, dtype="float64") for v in values]
        want = gradients(mode, arrays64, [from_numpy(h, dtype="float64") for h in heads], False)
        for name, g, w in zip(["d_i2h", "d_weight", "d_h0", "d_c0/d_bias"], got, want):
            assert_almost_equal(g, w, rtol=rtol, atol=atol, names=(name, "float64"))
    else:
        def outputs(*inputs):
            states = run_op(mode, list(inputs))[:3 if mode == "lstm" else 2]
            return np.concatenate([s.reshape(-1) for s in states])

        # Outputs up to ~90 (ReLU passes them on): central differences carry ~1e-8 of rounding.
        check_numeric_gradient(outputs, values, eps=1e-6, rtol=1e-5, atol=1e-7)


def gradients(mode, arrays, heads, reverse):
    """The gradients of every input through all outputs but `saved`, with head gradients."""
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        results = run_op(mode, arrays, reverse)[:3 if mode == "lstm" else 2]
    autograd.backward(results, heads)
    return [a.grad for a in arrays]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("steps,batch,hidden,reverse", UNIT_BLOCK_SHAPES)
def test_float32_unit_block_gradients_match_float64(mode, steps, batch, hidden, reverse):
    """float32 backward steps in blocks of units against the float64 operator (its steps through
    nn::gemm, checked against central differences below)."""
    rng = onp.random.default_rng(8)
    values, arrays32 = draw_inputs(rng, mode, steps, batch, hidden, "float32")
    arrays32[1] = from_numpy(values[1] / onp.sqrt(hidden), dtype="float32")
    arrays64 = [a.astype("float64") for a in arrays32]
    shapes = [(steps, batch, hidden)] + [(batch, hidden)] * (2 if mode == "lstm" else 1)
    heads = [rng.uniform(-1, 1, size=shape) for shape in shapes]
    got = gradients(mode, arrays32, [from_numpy(h, dtype="float32") for h in heads], reverse)
    want = gradients(mode, arrays64, [from_numpy(h, dtype="float64") for h in heads], reverse)
    for name, g, w in zip(["d_i2h", "d_weight", "d_h0", "d_c0/d_bias"], got, want):
        assert g.dtype == onp.float32, name
        assert_almost_equal(g, w, rtol=1e-4, atol=1e-5, names=(name, "float64"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse", [False, True])
def test_gradients_against_finite_differences(mode, reverse):
    """Every input's gradient in float64, through out, h_last and c_last together (the head
    gradients are random, so each output's gradient counts)."""
    values, _ = draw_inputs(onp.random.default_rng(1), mode, 3, 2, 3)
    # ReLU's kink: keep pre-activations away from 0 so central differences stay on one side.
    if mode == "rnn_relu":
        values[0] += onp.sign(values[0]) * 0.5

    def outputs(*arrays):
        states = run_op(mode, list(arrays), reverse)[:3 if mode == "lstm" else 2]
        return np.concatenate([s.reshape(-1) for s in states])

    check_numeric_gradient(outputs, values, eps=1e-6, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", MODES)
def test_empty_sequence_passes_the_states_through(mode):
    values, arrays = draw_inputs(onp.random.default_rng(2), mode, 0, 2, 3)
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        results = run_op(mode, arrays)
        states = results[1:3 if mode == "lstm" else 2]
    assert results[0].shape == (0, 2, 3)
    for state, begin in zip(states, values[2:]):
        assert_almost_equal(state, begin, rtol=0, atol=0)
    autograd.backward(states, [np.ones(s.shape, dtype="float64") for s in states])
    assert_almost_equal(arrays[1].grad, onp.zeros(values[1].shape), rtol=0, atol=0)
    assert_almost_equal(arrays[2].grad, onp.ones(values[2].shape), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# The layers: fused against their composed per-step path
# ---------------------------------------------------------------------------------------------
def layer_run(net, x, states, heads):
    """Outputs, final states and the gradients of x, the begin states and every parameter."""
    x.attach_grad()
    for s in states:
        s.attach_grad()
    with autograd.record():
        out, final = net(x, states)
    autograd.backward([out] + final, heads)
    params = sorted(net.collect_params().items())
    return ([("out", out), ("x.grad", x.grad)] +
            [(f"state{i}", s) for i, s in enumerate(final)] +
            [(f"state{i}.grad", s.grad) for i, s in enumerate(states)] +
            [(f"{name}.grad", p.grad()) for name, p in params])


def build_layer(mode, hidden, num_layers, bidirectional, dtype, rng, input_size=4):
    net = LAYERS[mode](hidden, num_layers=num_layers, bidirectional=bidirectional,
                       input_size=input_size, dtype=dtype)
    net.initialize()
    for _, p in sorted(net.collect_params().items()):  # nonzero biases, seeded
        p.set_data(from_numpy(rng.uniform(-0.5, 0.5, size=p.shape), dtype=dtype))
    return net


def layer_inputs(net, steps, batch, dtype, rng, input_size=4):
    x = from_numpy(rng.uniform(-1, 1, size=(steps, batch, input_size)), dtype=dtype)
    states = [from_numpy(rng.uniform(-1, 1, size=info["shape"]), dtype=dtype)
              for info in net.state_info(batch)]
    return x, states


def fused_and_composed(monkeypatch, mode, steps, batch, hidden, num_layers, bidirectional,
                       dtype):
    rng = onp.random.default_rng(3)
    net = build_layer(mode, hidden, num_layers, bidirectional, dtype, rng)
    x, states = layer_inputs(net, steps, batch, dtype, rng)
    dirs = 2 if bidirectional else 1
    heads = [from_numpy(rng.uniform(-1, 1, size=(steps, batch, dirs * hidden)), dtype=dtype)] + \
        [from_numpy(rng.uniform(-1, 1, size=s.shape), dtype=dtype) for s in states]
    ran = ops_ran(lambda: layer_run(net, x, states, heads))
    assert ran.get("rnn_sequence") == num_layers * dirs and "lstm_gates" not in ran, ran
    fused = layer_run(net, x, states, heads)
    with monkeypatch.context() as patch:
        patch.setattr(rnn_layer, "_runs_as_one_operator", lambda *args: False)
        composed = layer_run(net, x, states, heads)
    return fused, composed


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_layer_equals_composed_path(monkeypatch, mode, bidirectional, num_layers):
    fused, composed = fused_and_composed(monkeypatch, mode, 4, 3, 5, num_layers, bidirectional,
                                         "float32")
    rtol, atol = TOLERANCES["float32"]
    for (name, a), (_, b) in zip(fused, composed):
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=(f"fused {name}", "composed"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("steps,batch,hidden", [(1, 1, 3), (5, 1, 9), (1, 4, 17)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_layer_equals_composed_path_odd_sizes(monkeypatch, mode, steps, batch, hidden, dtype):
    """T = 1, N = 1 and hidden sizes no multiple of a vector width, bidirectional."""
    fused, composed = fused_and_composed(monkeypatch, mode, steps, batch, hidden, 1, True, dtype)
    rtol, atol = TOLERANCES[dtype]
    for (name, a), (_, b) in zip(fused, composed):
        assert a.dtype == b.dtype, name
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=(f"fused {name}", "composed"))


def test_layers_outside_the_operator_keep_the_composed_path():
    """Cell clipping, a projection and sequence lengths keep the per-step operators."""
    x = np.ones((3, 2, 4))
    for net, args in [(gluon.rnn.LSTM(4, state_clip_min=-1.0, state_clip_max=1.0), ()),
                      (gluon.rnn.LSTM(4, projection_size=2), ()),
                      (gluon.rnn.GRU(4, use_sequence_length=True),
                       (None, np.array([3, 1], dtype="int32")))]:
        net.initialize()
        ran = ops_ran(lambda: net(x, *args))
        assert "rnn_sequence" not in ran and "fully_connected" in ran, ran


@pytest.mark.parametrize("mode", MODES)
def test_hybridized_layer_equals_imperative(mode):
    """The trace holds one rnn_sequence per layer and direction and one input projection each;
    outputs and every gradient equal the imperative run's bitwise."""
    rng = onp.random.default_rng(4)
    net = build_layer(mode, 6, 2, True, "float32", rng)
    x, states = layer_inputs(net, 5, 3, "float32", rng)
    heads = [from_numpy(rng.uniform(-1, 1, size=(5, 3, 12)), dtype="float32")] + \
        [from_numpy(rng.uniform(-1, 1, size=s.shape), dtype="float32") for s in states]
    imperative = layer_run(net, x, states, heads)
    net.hybridize()
    layer_run(net, x, states, heads)  # traces
    ran = ops_ran(lambda: layer_run(net, x, states, heads))
    assert ran.get("rnn_sequence") == 4 and ran.get("rnn_sequence_backward") == 4, ran
    assert ran.get("fully_connected") == 4, ran
    for (name, a), (_, b) in zip(layer_run(net, x, states, heads), imperative):
        onp.testing.assert_array_equal(a.asnumpy(), b.asnumpy(), err_msg=name)


# ---------------------------------------------------------------------------------------------
# Determinism: the serial engine and one thread as the oracles
# ---------------------------------------------------------------------------------------------
# 37 sequences of 70 units: each step's gate rows split into several parallel chunks.
_TRAINING_SCRIPT = r'''
import numpy as onp
from pymx import autograd, gluon
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(5)
results = []
for net in [gluon.rnn.LSTM(70, num_layers=2, bidirectional=True), gluon.rnn.GRU(70),
            gluon.rnn.RNN(70, activation="tanh", bidirectional=True)]:
    net.initialize()
    x = from_numpy(rng.uniform(-1, 1, size=(4, 37, 16)), dtype="float32")
    x.attach_grad()
    with autograd.record():
        out = net(x)
    out.backward(from_numpy(rng.uniform(-1, 1, size=out.shape), dtype="float32"))
    results += [out.asnumpy(), x.grad.asnumpy()]
    results += [p.grad().asnumpy() for _, p in sorted(net.collect_params().items())]
onp.savez(OUT, *results)
'''


def test_threaded_engine_matches_naive(tmp_path):
    assert_engines_agree(_TRAINING_SCRIPT, tmp_path)


def test_results_do_not_depend_on_the_thread_count(tmp_path):
    assert_thread_count_independent(_TRAINING_SCRIPT, tmp_path)


# ---------------------------------------------------------------------------------------------
# GPU layers (the composed per-step path) against CPU layers (this operator)
# ---------------------------------------------------------------------------------------------
@requires_gpu
@pytest.mark.parametrize("mode", MODES)
def test_gpu_layer_matches_cpu_layer(mode):
    results = {}
    for device in (cpu(0), gpu(0)):
        rng = onp.random.default_rng(6)
        net = build_layer(mode, 7, 2, True, "float32", rng)
        net.reset_device(device)
        x, states = layer_inputs(net, 4, 3, "float32", rng)
        x, states = x.to_device(device), [s.to_device(device) for s in states]
        heads = [from_numpy(rng.uniform(-1, 1, size=(4, 3, 14)), dtype="float32",
                            device=device)] + \
            [from_numpy(rng.uniform(-1, 1, size=s.shape), dtype="float32", device=device)
             for s in states]
        ran = ops_ran(lambda: layer_run(net, x, states, heads), device=str(device))
        assert ("rnn_sequence" in ran) == (device == cpu(0)), ran
        results[device] = layer_run(net, x, states, heads)
    for (name, a), (_, b) in zip(results[gpu(0)], results[cpu(0)]):
        assert_almost_equal(a, b, rtol=1e-4, atol=1e-5, names=(f"gpu {name}", "cpu"))


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,shapes,message", [
    ("lstm", [(2, 3, 8), (8, 2), (3, 2)], r"mode 'lstm' takes 4 inputs \(i2h, weight, h0, c0\), "
                                          r"got 3"),
    ("rnn_tanh", [(2, 3, 2), (2, 2), (3, 2), (3, 2)], r"mode 'rnn_tanh' takes 3 inputs"),
    ("gru", [(2, 3, 6), (6, 3), (3, 3), (6,)], r"weight must have shape \(3 \* hidden_size, "
                                               r"hidden_size\), got \(6, 3\)"),
    ("lstm", [(2, 3, 12), (8, 2), (3, 2), (3, 2)], r"i2h must have shape \(T, N, 8\) for weight "
                                                   r"\(8, 2\), got \(2, 3, 12\)"),
    ("lstm", [(3, 8), (8, 2), (3, 2), (3, 2)], r"i2h must have shape \(T, N, 8\)"),
    ("rnn_relu", [(2, 3, 2), (2, 2), (2, 2)], r"h0 must have shape \(3, 2\) for i2h \(2, 3, 2\) "
                                              r"and weight \(2, 2\), got \(2, 2\)"),
    ("lstm", [(2, 3, 8), (8, 2), (3, 2), (3, 3)], r"c0 must have shape \(3, 2\), got \(3, 3\)"),
    ("gru", [(2, 3, 6), (6, 2), (3, 2), (2,)], r"bias must have shape \(6,\), got \(2,\)"),
])
def test_bad_shapes_name_the_values(mode, shapes, message):
    with pytest.raises(ValueError, match=message):
        run_op(mode, [np.zeros(s) for s in shapes])


def test_bad_mode_and_dtypes_name_the_values():
    arrays = [np.zeros((2, 3, 2)), np.zeros((2, 2)), np.zeros((3, 2))]
    with pytest.raises(ValueError, match=r"unknown mode 'lstn'; expected one of 'lstm', 'gru', "
                                         r"'rnn_tanh', 'rnn_relu'"):
        run_op("lstn", arrays)
    with pytest.raises(ValueError, match=r"unknown mode ''"):
        invoke("rnn_sequence", arrays)
    with pytest.raises(TypeError, match="has dtype float64"):
        run_op("rnn_tanh", arrays[:2] + [arrays[2].astype("float64")])
    with pytest.raises(TypeError, match="must be a floating-point array, got int32"):
        run_op("rnn_tanh", [a.astype("int32") for a in arrays])


def test_backward_shapes_name_the_values():
    d_out, state = np.zeros((2, 3, 2)), np.zeros((3, 2))
    with pytest.raises(ValueError, match=r"saved must have shape \(2, 3, 8\), got \(2, 3, 6\)"):
        invoke("rnn_sequence_backward",
               [d_out, state, np.zeros((6, 2)), state, d_out, np.zeros((2, 3, 6))],
               {"mode": "gru"})
    with pytest.raises(ValueError, match=r"d_h_last must have shape \(3, 2\), got \(2, 2\)"):
        invoke("rnn_sequence_backward", [d_out, np.zeros((2, 2)), np.zeros((2, 2)), state, d_out],
               {"mode": "rnn_relu"})
