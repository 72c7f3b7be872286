"""npx.rnn, MXNet's fused recurrent operator over one flat parameter vector: equal (rtol 1e-5,
atol 1e-6 in float32) to gluon.rnn.RNN / LSTM / GRU holding the same weights, for every mode,
one and two layers, one and two directions, LSTM projections and cell clipping; against the
float64 NumPy reference of test_gluon_rnn.py with sequence lengths; gradients of data,
parameters and states against central differences (float64); state_outputs; dropout between
layers; a hybridized block against the imperative one; argument errors naming the values; and
the GPU against the CPU."""
import numpy as onp
import pytest
from conftest import requires_gpu
from test_gluon_rnn import MODES, make_layer, np_layer, random_params, random_states

from pymx import autograd, gluon, np, npx
from pymx.device import cpu, gpu
from pymx.gluon.rnn.rnn_layer import flat_parameter_layout, flat_parameter_size
from pymx.test_utils import assert_almost_equal, check_numeric_gradient


def packed(values, mode, num_layers, input_size, hidden, bidirectional, projection_size=None):
    """The layer's parameter values {name: array} as MXNet's flat vector."""
    layout = flat_parameter_layout(mode, num_layers, input_size, hidden, bidirectional,
                                   projection_size)
    return onp.concatenate([values[name].reshape(-1) for name, _ in layout])


def run(mode, x, flat, states, **kwargs):
    cell = states[1] if mode == 'lstm' else None
    return npx.rnn(x, flat, states[0], cell, mode=mode, **kwargs)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('num_layers,bidirectional', [(1, False), (2, False), (2, True)])
def test_equals_gluon_layer_with_the_same_weights(mode, num_layers, bidirectional):
    rng = onp.random.default_rng(0)
    steps, batch, inputs, hidden = 4, 3, 5, 3
    layer = make_layer(mode, hidden, num_layers=num_layers, bidirectional=bidirectional,
                       input_size=inputs)
    layer.initialize()
    values = random_params(layer, rng)
    states = [np.array(s, dtype='float32') for s in random_states(layer, batch, rng)]
    x = np.array(rng.uniform(-1, 1, (steps, batch, inputs)), dtype='float32')
    want, want_states = layer(x, states)
    flat = np.array(packed(values, mode, num_layers, inputs, hidden, bidirectional),
                    dtype='float32')
    out = run(mode, x, flat, states, state_size=hidden, num_layers=num_layers,
              bidirectional=bidirectional)
    assert out.shape == (steps, batch, (2 if bidirectional else 1) * hidden)
    assert_almost_equal(out, want, rtol=1e-5, atol=1e-6, names=('npx.rnn', 'gluon'))
    outs = run(mode, x, flat, states, state_size=hidden, num_layers=num_layers,
               bidirectional=bidirectional, state_outputs=True)
    assert isinstance(outs, list) and len(outs) == 1 + len(states)
    for got, expected in zip(outs, [want] + want_states):
        assert_almost_equal(got, expected, rtol=1e-5, atol=1e-6, names=('npx.rnn', 'gluon'))


@pytest.mark.parametrize('bidirectional', [False, True])
def test_lstm_projection_and_clipping_equal_gluon(bidirectional):
    rng = onp.random.default_rng(1)
    steps, batch, inputs, hidden, projection = 3, 2, 4, 5, 2
    layer = make_layer('lstm', hidden, num_layers=2, bidirectional=bidirectional,
                       input_size=inputs, projection_size=projection, state_clip_min=-0.2,
                       state_clip_max=0.3)
    layer.initialize()
    values = random_params(layer, rng, scale=1.0)
    states = [np.array(s, dtype='float32') for s in random_states(layer, batch, rng)]
    x = np.array(rng.uniform(-1, 1, (steps, batch, inputs)), dtype='float32')
    want, want_states = layer(x, states)
    flat = np.array(packed(values, 'lstm', 2, inputs, hidden, bidirectional, projection),
                    dtype='float32')
    out, h, c = run('lstm', x, flat, states, state_size=hidden, num_layers=2,
                    bidirectional=bidirectional, projection_size=projection,
                    lstm_state_clip_min=-0.2, lstm_state_clip_max=0.3, state_outputs=True)
    for got, expected in ((out, want), (h, want_states[0]), (c, want_states[1])):
        assert_almost_equal(got, expected, rtol=1e-5, atol=1e-6, names=('npx.rnn', 'gluon'))
    assert float(np.max(np.abs(c))) <= 0.3 + 1e-6


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('bidirectional', [False, True])
def test_sequence_length_matches_numpy(mode, bidirectional):
    """Outputs past each length are zero and the states are those at the last valid step."""
    rng = onp.random.default_rng(2)
    steps, batch, inputs, hidden, lengths = 5, 4, 3, 2, [3, 5, 1, 4]
    layer = make_layer(mode, hidden, num_layers=2, bidirectional=bidirectional,
                       input_size=inputs)
    layer.initialize()
    values = random_params(layer, rng)
    states = random_states(layer, batch, rng)
    x = rng.uniform(-1, 1, (steps, batch, inputs))
    want, want_states = np_layer(mode, x, values, states, 2, 2 if bidirectional else 1, lengths)
    flat = packed(values, mode, 2, inputs, hidden, bidirectional)
    outs = run(mode, np.array(x, dtype='float32'), np.array(flat, dtype='float32'),
               [np.array(s, dtype='float32') for s in states],
               sequence_length=np.array(lengths, dtype='int32'), use_sequence_length=True,
               state_size=hidden, num_layers=2, bidirectional=bidirectional,
               state_outputs=True)
    for got, expected in zip(outs, [want] + want_states):
        assert_almost_equal(got, expected, rtol=1e-5, atol=1e-6, names=('npx.rnn', 'numpy'))
    assert onp.all(outs[0].asnumpy()[3:, 0] == 0) and onp.all(outs[0].asnumpy()[1:, 2] == 0)


@pytest.mark.parametrize('mode', MODES)
def test_gradients_against_finite_differences(mode):
    rng = onp.random.default_rng(3)
    steps, batch, inputs, hidden = 3, 2, 2, 2
    layer = make_layer(mode, hidden, num_layers=2, bidirectional=True, input_size=inputs)
    layer.initialize()
    flat = packed(random_params(layer, rng), mode, 2, inputs, hidden, True)
    states = random_states(layer, batch, rng)
    x = rng.uniform(-1, 1, (steps, batch, inputs))

    def fn(data, parameters, *begin):
        out, *final = run(mode, data, parameters, begin, state_size=hidden, num_layers=2,
                          bidirectional=True, state_outputs=True)
        # every output reaches the objective, so the final states' gradients are checked too
        return np.concatenate([out.reshape(-1)] + [s.reshape(-1) for s in final])

    check_numeric_gradient(fn, [x, flat] + states, eps=1e-6, rtol=1e-5, atol=1e-7)


def test_dropout_between_layers_only_in_training():
    rng = onp.random.default_rng(4)
    x = np.array(rng.uniform(-1, 1, (4, 3, 2)), dtype='float32')
    flat = np.array(rng.uniform(-0.5, 0.5, flat_parameter_size('rnn_tanh', 2, 2, 4)),
                    dtype='float32')
    h = np.zeros((2, 3, 4))
    kwargs = dict(mode='rnn_tanh', state_size=4, num_layers=2)
    plain = npx.rnn(x, flat, h, **kwargs)
    assert_almost_equal(npx.rnn(x, flat, h, p=0.5, **kwargs), plain, rtol=0, atol=0)
    with autograd.record():
        dropped = npx.rnn(x, flat, h, p=0.5, **kwargs)
    assert not onp.allclose(dropped.asnumpy(), plain.asnumpy())


def test_hybridized_block_equals_imperative():
    class FlatLSTM(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.flat = gluon.Parameter('flat', shape=(flat_parameter_size('lstm', 2, 3, 4),))

        def forward(self, x, h, c):
            return npx.rnn(x, self.flat.data(x.device), h, c, mode='lstm', state_size=4,
                           num_layers=2, state_outputs=True)

    rng = onp.random.default_rng(6)
    block = FlatLSTM()
    block.initialize()
    x = np.array(rng.uniform(-1, 1, (5, 2, 3)), dtype='float32')
    h, c = (np.array(rng.uniform(-1, 1, (2, 2, 4)), dtype='float32') for _ in range(2))
    want = [a.asnumpy() for a in block(x, h, c)]
    block.hybridize()
    for _ in range(2):  # the trace, then the replay
        for got, expected in zip(block(x, h, c), want):
            assert_almost_equal(got, expected, rtol=1e-6, atol=1e-7)


def test_errors_name_the_values():
    x = np.zeros((4, 3, 5))
    h = np.zeros((1, 3, 2))
    good = 4 * 2 * 5 + 4 * 2 * 2 + 2 * 4 * 2  # lstm: i2h, h2h, two biases
    with pytest.raises(ValueError, match=r"npx.rnn: parameters has 10 values, expected 72 "
                                         r"\(mode 'lstm', num_layers 1, input size 5, "
                                         r"state_size 2"):
        npx.rnn(x, np.zeros((10,)), h, h, mode='lstm', state_size=2, num_layers=1)
    flat = np.zeros((good,))
    with pytest.raises(ValueError, match="mode must be one of .* got 'LSTM'"):
        npx.rnn(x, flat, h, h, mode='LSTM', state_size=2, num_layers=1)
    with pytest.raises(ValueError, match="mode 'lstm' needs state_cell"):
        npx.rnn(x, flat, h, mode='lstm', state_size=2, num_layers=1)
    with pytest.raises(ValueError, match="num_layers must be a positive integer, got 0"):
        npx.rnn(x, flat, h, h, mode='lstm', state_size=2, num_layers=0)
    with pytest.raises(ValueError, match="use_sequence_length=True needs sequence_length"):
        npx.rnn(x, flat, h, h, mode='lstm', state_size=2, num_layers=1,
                use_sequence_length=True)
    with pytest.raises(ValueError, match="projection_size is for mode 'lstm' only"):
        npx.rnn(x, flat, h, mode='gru', state_size=2, num_layers=1, projection_size=1)
    with pytest.raises(ValueError, match=r"data must be 3-D \(T, N, C\), got shape \(3, 5\)"):
        npx.rnn(np.zeros((3, 5)), flat, h, h, mode='lstm', state_size=2, num_layers=1)
    with pytest.raises(ValueError, match=r"needs begin states of shapes \[\(1, 3, 2\), "
                                         r"\(1, 3, 2\)\], got \[\(1, 4, 2\)"):
        npx.rnn(x, flat, np.zeros((1, 4, 2)), h, mode='lstm', state_size=2, num_layers=1)
    # the process stays usable
    assert npx.rnn(x, flat, h, h, mode='lstm', state_size=2, num_layers=1).shape == (4, 3, 2)


@requires_gpu
@pytest.mark.parametrize('mode', MODES)
def test_gpu_forward_and_gradients_equal_cpu(mode):
    rng = onp.random.default_rng(5)
    layer = make_layer(mode, 3, num_layers=2, bidirectional=True, input_size=4)
    layer.initialize()
    flat = packed(random_params(layer, rng), mode, 2, 4, 3, True)
    states = random_states(layer, 2, rng)
    x = rng.uniform(-1, 1, (5, 2, 4))
    results = []
    for device in (cpu(0), gpu(0)):
        inputs = [np.array(a, dtype='float32', device=device) for a in [x, flat] + states]
        for a in inputs:
            a.attach_grad()
        with autograd.record():
            out, *final = run(mode, inputs[0], inputs[1], inputs[2:], state_size=3,
                              num_layers=2, bidirectional=True, state_outputs=True,
                              sequence_length=np.array([5, 2], device=device),
                              use_sequence_length=True)
            loss = (out * out).sum() + sum((s * s).sum() for s in final)
        loss.backward()
        results.append([out.asnumpy()] + [a.grad.asnumpy() for a in inputs])
    for got, want in zip(results[1], results[0]):
        assert_almost_equal(got, want, rtol=1e-4, atol=1e-5, names=('gpu', 'cpu'))
