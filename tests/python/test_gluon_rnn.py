"""gluon.rnn layers (RNN, LSTM, GRU) against a float64 NumPy implementation written here, their
gradients against finite differences, hybridize, training, files, data parallelism and errors.

The cells have their own file, test_gluon_rnn_cells.py."""
import numpy as onp
import pytest
from conftest import assert_engines_agree, requires_gpu

import pymx
from pymx import autograd, gluon, np
from pymx.device import cpu, gpu
from pymx.gluon import rnn
from pymx.test_utils import assert_almost_equal, check_numeric_gradient

MODES = ['rnn_relu', 'rnn_tanh', 'lstm', 'gru']


# ---- the NumPy reference -----------------------------------------------------------------------

def _sigmoid(x):
    return 1 / (1 + onp.exp(-x))


def np_step(mode, x, h, c, p, clip=None):
    """One step for one sequence (x (C,), h, c vectors) in float64; returns (h, c)."""
    i2h = p['i2h_weight'] @ x + p['i2h_bias']
    h2h = p['h2h_weight'] @ h + p['h2h_bias']
    if mode == 'rnn_relu':
        return onp.maximum(i2h + h2h, 0), None
    if mode == 'rnn_tanh':
        return onp.tanh(i2h + h2h), None
    if mode == 'gru':
        xr, xz, xn = onp.split(i2h, 3)
        hr, hz, hn = onp.split(h2h, 3)
        r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
        n = onp.tanh(xn + r * hn)
        return (1 - z) * n + z * h, None
    i, f, g, o = onp.split(i2h + h2h, 4)
    c = _sigmoid(f) * c + _sigmoid(i) * onp.tanh(g)
    if clip is not None:
        c = onp.clip(c, *clip)
    h = _sigmoid(o) * onp.tanh(c)
    if 'h2r_weight' in p:
        h = p['h2r_weight'] @ h
    return h, c


def np_layer(mode, x, params, states, num_layers, num_dirs, lengths=None, clip=None):
    """The layer in TNC layout, one sequence at a time: the forward direction runs over steps
    0..L-1, the backward one over L-1..0; steps past L output zeros."""
    steps, batch, _ = x.shape
    lengths = [steps] * batch if lengths is None else lengths
    final = [onp.zeros_like(s) for s in states]
    layer_input = x
    for i in range(num_layers):
        outputs = []
        for j, d in enumerate('lr'[:num_dirs]):
            p = {k[3:]: v for k, v in params.items() if k.startswith(f'{d}{i}_')}
            index = i * num_dirs + j
            out = None
            for b in range(batch):
                h = states[0][index, b]
                c = states[1][index, b] if mode == 'lstm' else None
                order = range(lengths[b]) if d == 'l' else reversed(range(lengths[b]))
                for t in order:
                    h, c = np_step(mode, layer_input[t, b], h, c, p, clip)
                    if out is None:
                        out = onp.zeros((steps, batch, h.shape[0]))
                    out[t, b] = h
                final[0][index, b] = h
                if mode == 'lstm':
                    final[1][index, b] = c
            outputs.append(out)
        layer_input = onp.concatenate(outputs, axis=2)
    return layer_input, final


def make_layer(mode, hidden, **kwargs):
    if mode.startswith('rnn_'):
        return rnn.RNN(hidden, activation=mode[4:], **kwargs)
    return {'lstm': rnn.LSTM, 'gru': rnn.GRU}[mode](hidden, **kwargs)


def random_params(layer, rng, scale=0.5):
    """Sets every parameter of `layer` to uniform values; returns them in float64."""
    values = {}
    for name, param in layer.collect_params().items():
        values[name] = rng.uniform(-scale, scale, param.shape)
        param.set_data(np.array(values[name], dtype=param.dtype))
    return values


def random_states(layer, batch, rng):
    return [rng.uniform(-1, 1, info['shape']) for info in layer.state_info(batch)]


def to_tnc(x, layout):
    return x if layout == 'TNC' else x.swapaxes(0, 1)


# ---- forward against NumPy ---------------------------------------------------------------------

@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('num_layers,bidirectional', [(1, False), (1, True), (2, False),
                                                      (2, True)])
@pytest.mark.parametrize('layout,with_states', [('TNC', False), ('NTC', True)])
def test_layer_matches_numpy(mode, num_layers, bidirectional, layout, with_states):
    rng = onp.random.default_rng(0)
    steps, batch, inputs, hidden = 4, 3, 5, 3
    layer = make_layer(mode, hidden, num_layers=num_layers, bidirectional=bidirectional,
                       layout=layout, input_size=inputs)
    layer.initialize()
    params = random_params(layer, rng)
    x = rng.uniform(-1, 1, (steps, batch, inputs))
    states = random_states(layer, batch, rng) if with_states else \
        [onp.zeros(info['shape']) for info in layer.state_info(batch)]
    expected, expected_states = np_layer(mode, x, params, states, num_layers,
                                         2 if bidirectional else 1)
    x_in = np.array(to_tnc(x, layout), dtype='float32')
    if with_states:
        out, out_states = layer(x_in, [np.array(s, dtype='float32') for s in states])
        assert len(out_states) == len(states)
        for got, want in zip(out_states, expected_states):
            assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)
    else:
        out = layer(x_in)
    assert out.shape == to_tnc(expected, layout).shape
    assert_almost_equal(out, to_tnc(expected, layout), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('bidirectional', [False, True])
@pytest.mark.parametrize('layout', ['TNC', 'NTC'])
def test_sequence_length_matches_numpy(mode, bidirectional, layout):
    """Outputs past each length are zero; the states are those at the last valid step; the
    backward direction starts at each sequence's own end."""
    rng = onp.random.default_rng(1)
    steps, batch, inputs, hidden, lengths = 5, 4, 3, 2, [3, 5, 1, 4]
    layer = make_layer(mode, hidden, num_layers=2, bidirectional=bidirectional, layout=layout,
                       use_sequence_length=True)
    layer.initialize()
    x = rng.uniform(-1, 1, (steps, batch, inputs))
    states = random_states(layer, batch, rng)
    layer(np.array(to_tnc(x, layout), dtype='float32'),
          [np.array(s, dtype='float32') for s in states],
          np.array(lengths, dtype='int32'))  # deferred initialisation from the first input
    params = random_params(layer, rng)
    expected, expected_states = np_layer(mode, x, params, states, 2, 2 if bidirectional else 1,
                                         lengths)
    for hybridize in (False, True):
        layer.hybridize(hybridize)
        for length_dtype in ('int32', 'float32'):
            out, out_states = layer(np.array(to_tnc(x, layout), dtype='float32'),
                                    [np.array(s, dtype='float32') for s in states],
                                    np.array(lengths, dtype=length_dtype))
            assert_almost_equal(out, to_tnc(expected, layout), rtol=1e-5, atol=1e-6)
            for got, want in zip(out_states, expected_states):
                assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('bidirectional', [False, True])
def test_lstm_projection_and_state_clipping_match_numpy(bidirectional):
    rng = onp.random.default_rng(2)
    steps, batch, inputs, hidden, projection = 4, 2, 3, 4, 2
    layer = rnn.LSTM(hidden, num_layers=2, bidirectional=bidirectional, input_size=inputs,
                     projection_size=projection, state_clip_min=-0.3, state_clip_max=0.4)
    layer.initialize()
    assert layer.l0_h2h_weight.shape == (4 * hidden, projection)
    assert layer.l0_h2r_weight.shape == (projection, hidden)
    assert layer.l1_i2h_weight.shape == (4 * hidden, projection * (2 if bidirectional else 1))
    params = random_params(layer, rng, scale=1.0)
    x = rng.uniform(-2, 2, (steps, batch, inputs))
    states = random_states(layer, batch, rng)
    assert states[0].shape[2] == projection and states[1].shape[2] == hidden
    expected, expected_states = np_layer('lstm', x, params, states, 2,
                                         2 if bidirectional else 1, clip=(-0.3, 0.4))
    out, out_states = layer(np.array(x, dtype='float32'),
                            [np.array(s, dtype='float32') for s in states])
    assert_almost_equal(out, expected, rtol=1e-5, atol=1e-6)
    for got, want in zip(out_states, expected_states):
        assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)
    assert float(np.abs(out_states[1]).max()) <= 0.4 + 1e-6


def test_lstm_state_clip_nan():
    layer = rnn.LSTM(2, input_size=1, state_clip_min=-1.0, state_clip_max=1.0,
                     state_clip_nan=True)
    layer.initialize()
    x = np.array([[[float('nan')]]])
    _, (h, c) = layer(x, layer.begin_state(1))
    assert_almost_equal(c, onp.full((1, 1, 2), -1.0))
    propagating = rnn.LSTM(2, input_size=1, state_clip_min=-1.0, state_clip_max=1.0)
    propagating.initialize()
    _, (h, c) = propagating(x, propagating.begin_state(1))
    assert onp.isnan(c.asnumpy()).all()


# ---- gradients ---------------------------------------------------------------------------------

@pytest.mark.parametrize('mode', MODES)
def test_input_and_state_gradients_against_finite_differences(mode):
    rng = onp.random.default_rng(3)
    layer = make_layer(mode, 2, num_layers=2, bidirectional=True, input_size=2, dtype='float64',
                       use_sequence_length=True)
    layer.initialize()
    random_params(layer, rng)
    x = rng.uniform(-1, 1, (3, 2, 2))
    states = random_states(layer, 2, rng)
    lengths = np.array([2, 3])

    def forward(x, *states):
        out, new_states = layer(x, list(states), lengths)
        # every output and final state takes part in the differentiated scalar
        return np.concatenate([out.reshape(-1)] + [s.reshape(-1) for s in new_states])

    check_numeric_gradient(forward, [x] + states, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize('mode, projection', [(mode, None) for mode in MODES] + [('lstm', 2)])
def test_parameter_gradients_against_numpy_finite_differences(mode, projection):
    """Autograd's parameter gradients against central differences of the float64 NumPy
    reference (projection is an LSTM option)."""
    rng = onp.random.default_rng(4)
    extra = {'projection_size': projection} if projection else {}
    layer = make_layer(mode, 3, num_layers=2, bidirectional=True, input_size=2,
                       dtype='float64', **extra)
    layer.initialize()
    params = random_params(layer, rng)
    x = rng.uniform(-1, 1, (3, 2, 2))
    states = random_states(layer, 2, rng)
    weights = rng.uniform(-1, 1, (3, 2, 2 * (projection or 3)))

    with autograd.record():
        out = layer(np.array(x), [np.array(s) for s in states])[0]
        loss = (out * np.array(weights)).sum()
    loss.backward()

    def objective(values):
        return (np_layer(mode, x, values, states, 2, 2)[0] * weights).sum()

    eps = 1e-6
    for name, param in layer.collect_params().items():
        numeric = onp.zeros_like(params[name])
        for index in onp.ndindex(numeric.shape):
            shifted = dict(params)
            for sign in (1, -1):
                value = params[name].copy()
                value[index] += sign * eps
                shifted[name] = value
                numeric[index] += sign * objective(shifted) / (2 * eps)
        assert_almost_equal(param.grad(), numeric, rtol=1e-5, atol=1e-8,
                            names=(f'autograd d/d{name}', f'numeric d/d{name}'))


@pytest.mark.parametrize('mode', ['rnn_relu', 'rnn_tanh', 'lstm'])
@pytest.mark.parametrize('hybridize', [False, True])
def test_recurrent_bias_gradient_with_sequence_lengths(mode, hybridize):
    """The recurrent bias is added once, to the input projection (Note [Recurrent bias in the
    projection]): both biases still get the gradient of the per-step sum, including its zero
    past each sequence's length, against central differences of the float64 reference."""
    rng = onp.random.default_rng(8)
    steps, batch, lengths = 4, 3, [2, 4, 1]
    layer = make_layer(mode, 3, num_layers=2, bidirectional=True, input_size=2, dtype='float64',
                       use_sequence_length=True)
    layer.initialize()
    params = random_params(layer, rng)
    layer.hybridize(hybridize)
    x = rng.uniform(-1, 1, (steps, batch, 2))
    states = random_states(layer, batch, rng)
    weights = rng.uniform(-1, 1, (steps, batch, 6))
    with autograd.record():
        out = layer(np.array(x), [np.array(s) for s in states],
                    np.array(lengths, dtype='int32'))[0]
        loss = (out * np.array(weights)).sum()
    loss.backward()

    def objective(values):
        return (np_layer(mode, x, values, states, 2, 2, lengths)[0] * weights).sum()

    eps = 1e-6
    for prefix in ('l0_', 'r0_', 'l1_', 'r1_'):
        name = prefix + 'h2h_bias'
        numeric = onp.zeros_like(params[name])
        for index in onp.ndindex(numeric.shape):
            for sign in (1, -1):
                value = params[name].copy()
                value[index] += sign * eps
                numeric[index] += sign * objective({**params, name: value}) / (2 * eps)
        for kind in ('h2h_bias', 'i2h_bias'):
            assert_almost_equal(getattr(layer, prefix + kind).grad(), numeric, rtol=1e-5,
                                atol=1e-8, names=(f'autograd d/d{prefix}{kind}', 'numeric'))


# The forward and backward of a hybridized two-layer LSTM and GRU (the GRU keeps its per-step
# recurrent bias): the threaded engine, with the intra-op helper thread, must give the naive
# engine's values bit for bit.
ENGINE_SCRIPT = """
import numpy as onp
from pymx import autograd, np
from pymx.gluon import rnn
rng = onp.random.default_rng(9)
arrays = []
for layer in (rnn.LSTM(37, num_layers=2, input_size=5), rnn.GRU(37, num_layers=2, input_size=5)):
    layer.initialize()
    for param in layer.collect_params().values():
        param.set_data(np.array(rng.uniform(-0.3, 0.3, param.shape), dtype='float32'))
    layer.hybridize(static_alloc=True, static_shape=True)
    x = np.array(rng.uniform(-1, 1, (6, 9, 5)), dtype='float32')
    for _ in range(2):  # the trace, then a bulk replay
        x.attach_grad()
        with autograd.record():
            out = layer(x)
            loss = (out * out).sum()
        loss.backward()
    arrays += [out.asnumpy(), x.grad.asnumpy()]
    arrays += [p.grad().asnumpy() for p in layer.collect_params().values()]
onp.savez(OUT, *arrays)
"""


def test_threaded_engine_equals_naive_engine(tmp_path):
    assert_engines_agree(ENGINE_SCRIPT, tmp_path)


# ---- cells, hybridize, training, files, devices ------------------------------------------------

def _cell_stack(mode, hidden, num_layers, bidirectional):
    def cell():
        if mode.startswith('rnn_'):
            return rnn.RNNCell(hidden, activation=mode[4:])
        return {'lstm': rnn.LSTMCell, 'gru': rnn.GRUCell}[mode](hidden)

    stack = rnn.HybridSequentialRNNCell()
    for _ in range(num_layers):
        stack.add(rnn.BidirectionalCell(cell(), cell()) if bidirectional else cell())
    return stack


def _copy_layer_weights_to_cells(layer, stack, num_layers, bidirectional):
    for i in range(num_layers):
        for d, direction in zip('lr', ('l_cell', 'r_cell')):
            if d == 'r' and not bidirectional:
                continue
            cell = getattr(stack[i], direction) if bidirectional else stack[i]
            for kind in ('i2h_weight', 'h2h_weight', 'i2h_bias', 'h2h_bias'):
                getattr(cell, kind).set_data(getattr(layer, f'{d}{i}_{kind}').data())


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('bidirectional', [False, True])
@pytest.mark.parametrize('with_lengths', [False, True])
def test_layer_equals_unrolled_cells(mode, bidirectional, with_lengths):
    """A layer and the stack of cells it is made of, with the same weights, give the same
    outputs and states; the layer's states are the cells' stacked per layer and direction."""
    rng = onp.random.default_rng(5)
    steps, batch, inputs, hidden = 4, 3, 3, 2
    layer = make_layer(mode, hidden, num_layers=2, bidirectional=bidirectional,
                       layout='NTC', input_size=inputs, use_sequence_length=with_lengths)
    layer.initialize(pymx.initializer.Uniform(0.6))
    stack = _cell_stack(mode, hidden, 2, bidirectional)
    x = np.array(rng.uniform(-1, 1, (batch, steps, inputs)), dtype='float32')
    lengths = np.array([2, 4, 3]) if with_lengths else None
    stack.initialize()
    stack.unroll(steps, x, layout='NTC')  # deferred initialisation
    _copy_layer_weights_to_cells(layer, stack, 2, bidirectional)

    args = (x, None, lengths) if with_lengths else (x,)
    expected = layer(*args)
    got, cell_states = stack.unroll(steps, x, layout='NTC', merge_outputs=True,
                                    valid_length=lengths)
    assert_almost_equal(got, expected, rtol=1e-5, atol=1e-6)
    begin = layer.begin_state(batch)
    _, layer_states = layer(x, begin, lengths) if with_lengths else layer(x, begin)
    num_kinds = len(layer_states)
    for kind, stacked in enumerate(layer_states):
        assert_almost_equal(stacked, np.stack(cell_states[kind::num_kinds], axis=0),
                            rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('mode', MODES)
def test_hybridized_equals_imperative(mode):
    rng = onp.random.default_rng(6)
    layer = make_layer(mode, 3, num_layers=2, bidirectional=True, dropout=0.3)
    layer.initialize()
    x = np.array(rng.uniform(-1, 1, (4, 2, 3)), dtype='float32')
    states = [np.array(s, dtype='float32') for s in random_states(layer, 2, rng)]
    imperative_out = layer(x)
    imperative_out_states = layer(x, states)
    layer.hybridize()
    for _ in range(2):  # the trace, then a replay
        assert_almost_equal(layer(x), imperative_out, rtol=1e-6, atol=1e-7)
        out, out_states = layer(x, states)
        assert_almost_equal(out, imperative_out_states[0], rtol=1e-6, atol=1e-7)
        for got, want in zip(out_states, imperative_out_states[1]):
            assert_almost_equal(got, want, rtol=1e-6, atol=1e-7)
    # gradients through the replayed graph equal the imperative ones (predict mode: no dropout)
    grads = []
    for active in (False, True):
        layer.hybridize(active)
        x.attach_grad()
        with autograd.record(train_mode=False):
            loss = (layer(x, states)[0] ** 2).sum()
        loss.backward()
        grads.append((x.grad.asnumpy(), layer.l1_h2h_weight.grad().asnumpy()))
    for got, want in zip(*grads):
        assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)


def test_dropout_between_layers_only_in_training():
    layer = rnn.GRU(4, num_layers=2, dropout=0.5, input_size=3)
    plain = rnn.GRU(4, num_layers=2, input_size=3)
    layer.initialize()
    plain.initialize()
    for name, param in layer.collect_params().items():
        plain.collect_params()[name].set_data(param.data())
    x = np.array(onp.random.default_rng(7).uniform(-1, 1, (5, 2, 3)), dtype='float32')
    assert_almost_equal(layer(x), plain(x))
    with autograd.record():
        trained = layer(x)
    assert not onp.allclose(trained.asnumpy(), plain(x).asnumpy())


def test_parameter_names_shapes_and_deferred_input_size():
    layer = rnn.LSTM(3, num_layers=2, bidirectional=True)
    assert list(layer.collect_params()) == [
        f'{d}{i}_{kind}' for i in range(2) for d in 'lr'
        for kind in ('i2h_weight', 'h2h_weight', 'i2h_bias', 'h2h_bias')]
    assert layer.l0_i2h_weight.shape == (12, -1)
    assert repr(layer) == 'LSTM(None -> 3, TNC, num_layers=2, bidirectional)'
    layer.initialize()
    layer(np.ones((2, 1, 5)))
    shapes = {name: p.shape for name, p in layer.collect_params().items()}
    assert shapes['l0_i2h_weight'] == shapes['r0_i2h_weight'] == (12, 5)
    assert shapes['l1_i2h_weight'] == (12, 6)
    assert shapes['r1_h2h_weight'] == (12, 3) and shapes['l1_h2h_bias'] == (12,)
    assert repr(layer) == 'LSTM(5 -> 3, TNC, num_layers=2, bidirectional)'
    gru = rnn.GRU(4)
    assert gru.state_info(2) == [{'shape': (1, 2, 4), '__layout__': 'LNC', 'dtype': 'float32'}]
    begin = rnn.RNN(4, dtype='float64').begin_state(3, device=cpu(1))
    assert begin[0].shape == (1, 3, 4) and begin[0].dtype == onp.float64
    assert begin[0].device == cpu(1)


def test_save_and_load_parameters_round_trip(tmp_path):
    net = gluon.nn.HybridSequential()
    net.add(rnn.LSTM(3, num_layers=2, bidirectional=True, layout='NTC'),
            gluon.nn.Dense(2, flatten=False))
    net.initialize()
    x = np.array(onp.random.default_rng(8).uniform(-1, 1, (2, 4, 3)), dtype='float32')
    expected = net(x)
    path = str(tmp_path / 'lstm.params')
    net.save_parameters(path)
    loaded = gluon.nn.HybridSequential()
    loaded.add(rnn.LSTM(3, num_layers=2, bidirectional=True, layout='NTC'),
               gluon.nn.Dense(2, flatten=False))
    loaded.load_parameters(path)
    assert sorted(loaded.collect_params()) == sorted(net.collect_params())
    assert_almost_equal(loaded(x), expected)


class _Regressor(gluon.HybridBlock):
    """LSTM + Dense on the last step: predicts the sum of a sequence."""

    def __init__(self):
        super().__init__()
        self.lstm = rnn.LSTM(8, layout='NTC', input_size=1)
        self.out = gluon.nn.Dense(1, in_units=8)

    def forward(self, x):
        return self.out(self.lstm(x)[:, -1])


@pytest.mark.parametrize('hybridize', [False, True])
def test_tiny_sequence_model_learns(hybridize):
    rng = onp.random.default_rng(9)
    x = rng.uniform(-1, 1, (16, 5, 1)).astype('float32')
    y = x.sum(axis=1)
    net = _Regressor()
    net.initialize(pymx.initializer.Xavier())
    if hybridize:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': 0.05})
    loss_fn = gluon.loss.L2Loss()
    losses = []
    for _ in range(30):
        with autograd.record():
            loss = loss_fn(net(np.array(x)), np.array(y))
        loss.backward()
        trainer.step(x.shape[0])
        losses.append(float(loss.mean()))
    assert losses[-1] < 0.25 * losses[0], losses


def test_data_parallel_copies_stay_identical():
    devices = [cpu(0), cpu(1)]
    net = rnn.GRU(4, num_layers=2, bidirectional=True, input_size=3)
    net.initialize(device=devices)
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
    x = onp.random.default_rng(10).uniform(-1, 1, (5, 4, 3)).astype('float32')
    for _ in range(2):
        parts = gluon.utils.split_and_load(np.array(x), devices, batch_axis=1)
        with autograd.record():
            losses = [(net(part) ** 2).sum() for part in parts]
        for loss in losses:
            loss.backward()
        trainer.step(4)
    for name, param in net.collect_params().items():
        copies = [d.asnumpy() for d in param.list_data()]
        onp.testing.assert_array_equal(copies[0], copies[1], err_msg=name)
        assert param.list_data()[1].device == cpu(1)


@pytest.mark.parametrize('mode', MODES)
def test_layer_on_device_matches_numpy(mode, device):
    rng = onp.random.default_rng(11)
    layer = make_layer(mode, 3, num_layers=2, bidirectional=True, input_size=2,
                       use_sequence_length=True)
    layer.initialize(device=device)
    params = random_params(layer, rng)
    x = rng.uniform(-1, 1, (4, 3, 2))
    states = random_states(layer, 3, rng)
    lengths = [4, 2, 3]
    expected, expected_states = np_layer(mode, x, params, states, 2, 2, lengths)
    out, out_states = layer(np.array(x, dtype='float32', device=device),
                            [np.array(s, dtype='float32', device=device) for s in states],
                            np.array(lengths, device=device))
    assert out.device == device and out_states[0].device == device
    assert_almost_equal(out, expected, rtol=1e-5, atol=1e-6)
    for got, want in zip(out_states, expected_states):
        assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)


@requires_gpu
@pytest.mark.parametrize('mode', MODES)
def test_gpu_forward_and_gradients_equal_cpu(mode):
    rng = onp.random.default_rng(12)
    x = rng.uniform(-1, 1, (2, 5, 4)).astype('float32')
    results = []
    for device in (cpu(0), gpu(0)):
        layer = make_layer(mode, 3, num_layers=2, bidirectional=True, layout='NTC',
                           use_sequence_length=True)
        layer.initialize(pymx.initializer.Uniform(0.5), device=device)
        layer(np.array(x, device=device), None, np.array([5, 3], device=device))
        for name, param in layer.collect_params().items():
            param.set_data(np.array(onp.random.default_rng(hash(name) % 1000).uniform(
                -0.5, 0.5, param.shape), dtype='float32', device=device))
        layer.hybridize()
        data = np.array(x, device=device)
        data.attach_grad()
        with autograd.record():
            out = layer(data, None, np.array([5, 3], device=device))
            loss = (out ** 2).sum()
        loss.backward()
        results.append([out.asnumpy(), data.grad.asnumpy()] +
                       [p.grad().asnumpy() for p in layer.collect_params().values()])
    for got, want in zip(*results):
        assert_almost_equal(got, want, rtol=1e-4, atol=1e-5)


# ---- errors ------------------------------------------------------------------------------------

def test_constructor_errors_name_the_values():
    with pytest.raises(ValueError, match="invalid layout 'NCT'"):
        rnn.LSTM(3, layout='NCT')
    with pytest.raises(ValueError, match="activation must be 'relu' or 'tanh', got 'gelu'"):
        rnn.RNN(3, activation='gelu')
    with pytest.raises(ValueError, match="hidden_size must be a positive int, got 0"):
        rnn.GRU(0)
    with pytest.raises(ValueError, match="num_layers must be a positive int, got 1.5"):
        rnn.GRU(3, num_layers=1.5)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1"):
        rnn.LSTM(3, dropout=1)
    with pytest.raises(ValueError, match="projection_size must be a positive int or None, got -2"):
        rnn.LSTM(3, projection_size=-2)
    with pytest.raises(ValueError, match="must be given together, got -1.0 and None"):
        rnn.LSTM(3, state_clip_min=-1.0)
    with pytest.raises(ValueError, match="state_clip_min 2.0 is greater than state_clip_max 1.0"):
        rnn.LSTM(3, state_clip_min=2.0, state_clip_max=1.0)


def test_call_errors_name_the_values():
    layer = rnn.LSTM(3, num_layers=2, input_size=4)
    layer.initialize()
    x = np.ones((5, 2, 4))
    with pytest.raises(ValueError, match=r"inputs must be 3-D \(layout TNC\), got shape \(5, 4\)"):
        layer(np.ones((5, 4)))
    with pytest.raises(TypeError, match="inputs must be an ndarray, got list"):
        layer([x])
    with pytest.raises(ValueError, match=r"inputs have 3 features \(shape \(5, 2, 3\)\) but the "
                                         r"layer expects 4"):
        layer(np.ones((5, 2, 3)))
    with pytest.raises(ValueError, match=r"Expecting \(2, 2, 3\), got \(1, 2, 3\)"):
        layer(x, [np.zeros((1, 2, 3)), np.zeros((2, 2, 3))])
    with pytest.raises(ValueError, match=r"expected 2 state\(s\), got 1"):
        layer(x, np.zeros((2, 2, 3)))
    with pytest.raises(ValueError, match="use_sequence_length=False"):
        layer(x, None, np.array([5, 5]))
    with_lengths = rnn.GRU(3, use_sequence_length=True)
    with_lengths.initialize()
    with pytest.raises(ValueError, match="use_sequence_length=True needs sequence_length"):
        with_lengths(x)
    with pytest.raises(ValueError, match=r"sequence_length must be an array of shape \(2,\), got "
                                         r"\(3,\)"):
        with_lengths(x, None, np.array([1, 2, 3]))
