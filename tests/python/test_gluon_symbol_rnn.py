"""SymbolBlock running MXNet's fused RNN operator.

Symbol files are written as MXNet writes them: MXNet 2.x's layers feed one flat `rnn_param`
variable, MXNet 1.x's concatenate their reshaped weights with `_rnn_param_concat` in the graph.
The imported block must give exactly what pymx's rnn.RNN / LSTM / GRU give with the same
weights, agree with the float64 NumPy reference of test_gluon_rnn, and train its flat vector."""
import numpy as onp
import pytest
from conftest import requires_gpu
from test_gluon_rnn import make_layer, np_layer, random_params, random_states
from test_gluon_symbol_block import _mxnet_symbol, _var, _write

from pymx import autograd, gluon, np
from pymx.device import cpu, gpu
from pymx.gluon.rnn.rnn_layer import flat_parameter_layout
from pymx.test_utils import assert_almost_equal

SymbolBlock = gluon.SymbolBlock


def _rnn_attrs(mode, hidden, num_layers=1, bidirectional=False, state_outputs=True, **extra):
    """The attributes MXNet 1.9.1 writes on an RNN node (every one, 'None' when unset)."""
    attrs = {'mode': mode, 'state_size': hidden, 'num_layers': num_layers,
             'bidirectional': bidirectional, 'p': '0', 'state_outputs': state_outputs,
             'projection_size': 'None', 'lstm_state_clip_min': 'None',
             'lstm_state_clip_max': 'None', 'lstm_state_clip_nan': 'False',
             'use_sequence_length': 'False'}
    attrs.update(extra)
    return {k: str(v) for k, v in attrs.items()}


def _state_names(mode):
    return ['state', 'state_cell'] if mode == 'lstm' else ['state']


def _flat_symbol(attrs, with_lengths=False):
    """data, rnn_param, state(s)[, sequence_length] -> RNN, as MXNet 2.x's layers export; the
    heads are the output and, with state_outputs, the final states."""
    states = _state_names(attrs['mode'])
    inputs = ['data', 'rnn_param'] + states + (['sequence_length'] if with_lengths else [])
    nodes = [_var(name) for name in inputs] + [('RNN', 'rnn', attrs, inputs)]
    heads = [('rnn', i) for i in range(1 + len(states))] if attrs['state_outputs'] == 'True' \
        else ['rnn']
    return _mxnet_symbol(nodes, heads), [n for n in inputs if n != 'rnn_param']


def _flat_vector(values, mode, num_layers, input_size, hidden, bidirectional,
                 projection_size=None):
    """The layer's parameter values packed as MXNet's rnn_param."""
    layout = flat_parameter_layout(mode, num_layers, input_size, hidden, bidirectional,
                                   projection_size)
    return onp.concatenate([values[name].reshape(-1) for name, _ in layout])


def _layer_and_block(tmp_path, mode, hidden, num_layers, bidirectional, device, rng, **options):
    """(pymx layer, imported block, float64 layer values) sharing random weights; `options`
    are the layer's arguments and, under their RNN attribute names, the node's."""
    layer_options = {k: v for k, v in options.items() if k != 'attrs'}
    layer = make_layer(mode, hidden, num_layers=num_layers, bidirectional=bidirectional,
                       input_size=3, **layer_options)
    layer.initialize(device=device)
    values = random_params(layer, rng)
    attrs = _rnn_attrs(mode, hidden, num_layers, bidirectional, **options.get('attrs', {}))
    symbol, input_names = _flat_symbol(attrs, layer_options.get('use_sequence_length', False))
    flat = _flat_vector(values, mode, num_layers, 3, hidden, bidirectional,
                        layer_options.get('projection_size'))
    symbol_file, param_file = _write(tmp_path, symbol, {'rnn_param': flat})
    block = SymbolBlock.imports(symbol_file, input_names, param_file, device=device)
    return layer, block, values


@pytest.mark.parametrize('mode, num_layers, bidirectional', [
    ('lstm', 2, True), ('gru', 2, False), ('gru', 1, True), ('rnn_tanh', 2, True),
    ('rnn_relu', 1, False)])
@pytest.mark.parametrize('hybridize', [False, True])
def test_flat_parameter_rnn_equals_pymx_layer(tmp_path, device, mode, num_layers, bidirectional,
                                              hybridize):
    rng = onp.random.default_rng(0)
    layer, block, values = _layer_and_block(tmp_path, mode, 4, num_layers, bidirectional, device,
                                            rng)
    x = np.array(rng.uniform(-1, 1, (5, 2, 3)), dtype='float32', device=device)
    states = [np.array(s, dtype='float32', device=device) for s in random_states(layer, 2, rng)]
    block.hybridize(hybridize)
    got = block(x, *states)
    expected, expected_states = layer(x, states)
    for g, e in zip(got, [expected] + expected_states):
        assert_almost_equal(g, e, rtol=0, atol=0)
    reference, reference_states = np_layer(mode, x.asnumpy().astype(onp.float64), values,
                                           [s.asnumpy().astype(onp.float64) for s in states],
                                           num_layers, 2 if bidirectional else 1)
    for g, e in zip(got, [reference] + reference_states):
        assert_almost_equal(g, e, rtol=1e-5, atol=1e-6)


def test_lstm_projection_clipping_and_sequence_lengths(tmp_path, device):
    """LSTMP with a clipped cell state over sequences of different lengths: outputs past a
    sequence's end are zero and its final states are those of its last step."""
    rng = onp.random.default_rng(1)
    layer, block, values = _layer_and_block(
        tmp_path, 'lstm', 4, 2, True, device, rng, projection_size=2, state_clip_min=-0.3,
        state_clip_max=0.4, use_sequence_length=True,
        attrs={'projection_size': 2, 'lstm_state_clip_min': -0.3, 'lstm_state_clip_max': 0.4,
               'use_sequence_length': True})
    x = np.array(rng.uniform(-1, 1, (4, 3, 3)), dtype='float32', device=device)
    lengths = np.array([4, 1, 2], dtype='int32', device=device)
    states = [np.array(s, dtype='float32', device=device) for s in random_states(layer, 3, rng)]
    got = block(x, *states, lengths)
    expected, expected_states = layer(x, states, lengths)
    for g, e in zip(got, [expected] + expected_states):
        assert_almost_equal(g, e, rtol=0, atol=0)
    reference, reference_states = np_layer('lstm', x.asnumpy().astype(onp.float64), values,
                                           [s.asnumpy().astype(onp.float64) for s in states],
                                           2, 2, lengths=[4, 1, 2], clip=(-0.3, 0.4))
    for g, e in zip(got, [reference] + reference_states):
        assert_almost_equal(g, e, rtol=1e-5, atol=1e-6)


def test_state_outputs_false_and_dropout_in_predict_mode(tmp_path):
    """Without state_outputs the node has one output; p (dropout between layers) is the
    identity outside training."""
    rng = onp.random.default_rng(2)
    layer, block, _ = _layer_and_block(tmp_path, 'gru', 3, 2, False, cpu(), rng,
                                       attrs={'state_outputs': False, 'p': '0.4'})
    x = np.array(rng.uniform(-1, 1, (3, 2, 3)), dtype='float32')
    state = np.array(random_states(layer, 2, rng)[0], dtype='float32')
    out = block(x, state)
    assert_almost_equal(out, layer(x, [state])[0], rtol=0, atol=0)


def _mxnet1_symbol(mode, hidden, num_layers, bidirectional, input_size):
    """What MXNet 1.x's hybridized layers export: each weight and bias reshaped to one
    dimension, then `_rnn_param_concat`; begin states are inputs data1 (and data2)."""
    layout = flat_parameter_layout(mode, num_layers, input_size, hidden, bidirectional)
    nodes = [_var('data0')]
    for name, shape in layout:
        nodes += [_var(f'lstm0_{name}', __shape__=str(shape)),
                  ('Reshape', f'reshape_{name}', {'shape': '-1'}, [f'lstm0_{name}'])]
    nodes.append(('_rnn_param_concat', 'concat', {'dim': '0', 'num_args': str(len(layout))},
                  [f'reshape_{name}' for name, _ in layout]))
    states = ['data1', 'data2'] if mode == 'lstm' else ['data1']
    nodes += [_var(name) for name in states]
    nodes.append(('RNN', 'rnn', _rnn_attrs(mode, hidden, num_layers, bidirectional),
                  ['data0', 'concat'] + states))
    return _mxnet_symbol(nodes, ['rnn']), ['data0'] + states


@pytest.mark.parametrize('mode', ['lstm', 'gru'])
def test_mxnet1_export_trains_like_the_pymx_layer(tmp_path, mode):
    """The per-weight parameters of MXNet 1.x's files: equal outputs, and the gradients reach
    each weight through the concatenation exactly as in the layer."""
    rng = onp.random.default_rng(3)
    layer = make_layer(mode, 3, num_layers=2, bidirectional=True, input_size=2)
    layer.initialize()
    values = random_params(layer, rng)
    symbol, input_names = _mxnet1_symbol(mode, 3, 2, True, 2)
    symbol_file, param_file = _write(tmp_path, symbol,
                                     {f'lstm0_{k}': v for k, v in values.items()})
    block = SymbolBlock.imports(symbol_file, input_names, param_file)
    block.hybridize()
    x = np.array(rng.uniform(-1, 1, (4, 2, 2)), dtype='float32')
    states = [np.array(s, dtype='float32') for s in random_states(layer, 2, rng)]
    for model in (layer, block):
        with autograd.record():
            out = model(x, states)[0] if model is layer else model(x, *states)
            loss = (out * out).sum()
        loss.backward()
    assert_almost_equal(block(x, *states), layer(x, states)[0], rtol=0, atol=0)
    grads = {k: p.grad() for k, p in layer.collect_params().items()}
    for name, param in block.collect_params().items():
        assert_almost_equal(param.grad(), grads[name[len('lstm0_'):]], rtol=1e-6, atol=1e-7)


def test_gradient_reaches_the_flat_vector(tmp_path, device):
    """d(loss)/d(rnn_param) is the layer's parameter gradients in the flat vector's order;
    the data gradient is the layer's."""
    rng = onp.random.default_rng(4)
    layer, block, _ = _layer_and_block(tmp_path, 'lstm', 3, 2, True, device, rng)
    block.hybridize()
    x = np.array(rng.uniform(-1, 1, (3, 2, 3)), dtype='float32', device=device)
    states = [np.array(s, dtype='float32', device=device) for s in random_states(layer, 2, rng)]
    head = np.array(rng.uniform(-1, 1, (3, 2, 6)), dtype='float32', device=device)
    data_grads = []
    for model in (layer, block):
        x.attach_grad()
        with autograd.record():
            out = model(x, states)[0] if model is layer else model(x, *states)[0]
        out.backward(head)
        data_grads.append(x.grad.asnumpy())
    layer_grads = {k: p.grad().asnumpy() for k, p in layer.collect_params().items()}
    expected = _flat_vector(layer_grads, 'lstm', 2, 3, 3, True)
    assert_almost_equal(block.collect_params()['rnn_param'].grad(), expected, rtol=1e-6,
                        atol=1e-7)
    assert_almost_equal(data_grads[1], data_grads[0], rtol=1e-6, atol=1e-7)


def test_flat_vector_shape_inferred_from_the_data(tmp_path):
    """Without a parameter file, initialize() sizes rnn_param from the data's features."""
    symbol, input_names = _flat_symbol(_rnn_attrs('gru', 4, 2, True))
    block = SymbolBlock(symbol, input_names)
    block.initialize()
    out, state = block(np.ones((3, 2, 5)), np.zeros((4, 2, 4)))
    assert out.shape == (3, 2, 8) and state.shape == (4, 2, 4)
    size = sum(onp.prod(s) for _, s in flat_parameter_layout('gru', 2, 5, 4, True))
    assert block.collect_params()['rnn_param'].shape == (size,)


# ---- errors ----------------------------------------------------------------------------------

def _run(symbol, input_names, arrays, params=None):
    block = SymbolBlock(symbol, input_names)
    block.initialize()
    for name, value in (params or {}).items():
        block.collect_params()[name].set_data(np.array(value))
    return block(*[np.array(a) for a in arrays])


@pytest.mark.parametrize('attrs, message', [
    ({'mode': 'elman'}, "RNN mode='elman' of node 'rnn' \\(op RNN\\) .* is not one of rnn_relu"),
    ({'mode': 'gru', 'projection_size': '2'}, "projection_size=2 of node 'rnn' .* needs mode "
                                              "lstm, not gru"),
    ({'lstm_state_clip_min': '-1'}, "lstm_state_clip_min=-1.0 and lstm_state_clip_max=None .* "
                                    "must be given together"),
])
def test_bad_attributes_are_named(attrs, message):
    symbol, input_names = _flat_symbol(dict(_rnn_attrs('lstm', 2), **attrs))
    states = [onp.zeros((1, 1, 2)) for _ in input_names[1:]]
    with pytest.raises(ValueError, match=message):
        _run(symbol, input_names, [onp.ones((2, 1, 3))] + states, {'rnn_param': onp.ones(56)})


def test_bad_inputs_are_named():
    symbol, input_names = _flat_symbol(_rnn_attrs('gru', 2))
    data, state = onp.ones((2, 1, 3)), onp.zeros((1, 1, 2))
    # gru, 1 layer, 1 direction, 2 features: 6 * C + 6 * 2 + 12 values.
    with pytest.raises(ValueError, match="flat parameter vector has 37 values, which is not 24 "
                                         "\\+ 6 \\* input_size"):
        _run(symbol, input_names, [data, state], {'rnn_param': onp.ones(37)})
    with pytest.raises(ValueError, match="vector of 36 values is for inputs of 2 features, the "
                                         "data has shape \\(2, 1, 3\\)"):
        _run(symbol, input_names, [data, state], {'rnn_param': onp.ones(36)})
    with pytest.raises(ValueError, match="needs begin states of shapes \\[\\(1, 1, 2\\)\\], got "
                                         "\\[\\(1, 2, 2\\)\\]"):
        _run(symbol, input_names, [data, onp.zeros((1, 2, 2))], {'rnn_param': onp.ones(42)})
    with pytest.raises(ValueError, match="needs 3-D data \\(T, N, C\\), got shape \\(2, 3\\)"):
        _run(symbol, input_names, [onp.ones((2, 3)), state], {'rnn_param': onp.ones(42)})
    lstm_symbol = _mxnet_symbol([_var('data'), _var('rnn_param'), _var('state'),
                                 ('RNN', 'rnn', _rnn_attrs('lstm', 2), ['data', 'rnn_param',
                                                                        'state'])], ['rnn'])
    with pytest.raises(ValueError, match="RNN mode=lstm with use_sequence_length=False needs 4 "
                                         "inputs, node 'rnn' .* has 3"):
        _run(lstm_symbol, ['data', 'state'], [data, state], {'rnn_param': onp.ones(72)})


# ---- GPU -------------------------------------------------------------------------------------

@requires_gpu
def test_gpu_matches_cpu(tmp_path):
    """A bidirectional 2-layer LSTM with sequence lengths: equal outputs and gradients."""
    rng = onp.random.default_rng(5)
    x = rng.uniform(-1, 1, (4, 3, 3)).astype(onp.float32)
    lengths = onp.array([4, 2, 3], dtype=onp.int32)
    states = [rng.uniform(-1, 1, (4, 3, 5)).astype(onp.float32) for _ in range(2)]
    flat = rng.uniform(-0.5, 0.5, sum(onp.prod(s) for _, s in
                                      flat_parameter_layout('lstm', 2, 3, 5, True)))
    symbol, input_names = _flat_symbol(_rnn_attrs('lstm', 5, 2, True, use_sequence_length=True),
                                       with_lengths=True)
    symbol_file, param_file = _write(tmp_path, symbol, {'rnn_param': flat})
    results = []
    for device in (cpu(0), gpu(0)):
        block = SymbolBlock.imports(symbol_file, input_names, param_file, device=device)
        block.hybridize()
        with autograd.record():
            out, h, c = block(*[np.array(a, device=device) for a in [x] + states + [lengths]])
            loss = (out * out).sum() + (h * c).sum()
        loss.backward()
        results.append([out.asnumpy(), h.asnumpy(), c.asnumpy(),
                        block.collect_params()['rnn_param'].grad().asnumpy()])
    for on_gpu, on_cpu in zip(*reversed(results)):
        assert_almost_equal(on_gpu, on_cpu, rtol=1e-4, atol=1e-5)
