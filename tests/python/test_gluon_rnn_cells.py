"""gluon.rnn cells: steps and unroll against the float64 NumPy reference of test_gluon_rnn.py,
the containers and modifiers, gradients, hybridize, parameter names and errors."""
import numpy as onp
import pytest
from test_gluon_rnn import MODES, np_step

from pymx import autograd, gluon, np
from pymx.gluon import rnn
from pymx.test_utils import assert_almost_equal, check_numeric_gradient


def make_cell(mode, hidden, **kwargs):
    if mode.startswith('rnn_'):
        return rnn.RNNCell(hidden, activation=mode[4:], **kwargs)
    return {'lstm': rnn.LSTMCell, 'gru': rnn.GRUCell}[mode](hidden, **kwargs)


def random_cell(mode, hidden, inputs, rng, **kwargs):
    cell = make_cell(mode, hidden, input_size=inputs, **kwargs)
    cell.initialize()
    params = {}
    for name, param in cell.collect_params().items():
        params[name] = rng.uniform(-0.6, 0.6, param.shape)
        param.set_data(np.array(params[name], dtype=param.dtype))
    return cell, params


def np_unroll(mode, x, params, states, lengths=None, reverse=False):
    """x (N, T, C); returns outputs (N, T, H), zero past each length, and the final states."""
    batch, steps, _ = x.shape
    lengths = [steps] * batch if lengths is None else lengths
    outputs = onp.zeros((batch, steps, states[0].shape[1]))
    finals = [onp.zeros_like(s) for s in states]
    for b in range(batch):
        h = states[0][b]
        c = states[1][b] if mode == 'lstm' else None
        for t in (reversed(range(lengths[b])) if reverse else range(lengths[b])):
            h, c = np_step(mode, x[b, t], h, c, params)
            outputs[b, t] = h
        finals[0][b] = h
        if mode == 'lstm':
            finals[1][b] = c
    return outputs, finals


@pytest.mark.parametrize('mode', MODES)
def test_cell_step_matches_numpy(mode):
    rng = onp.random.default_rng(20)
    cell, params = random_cell(mode, 3, 4, rng)
    x = rng.uniform(-1, 1, (2, 4))
    states = [rng.uniform(-1, 1, info['shape']) for info in cell.state_info(2)]
    out, new_states = cell(np.array(x, dtype='float32'),
                           [np.array(s, dtype='float32') for s in states])
    for b in range(2):
        h, c = np_step(mode, x[b], states[0][b], states[1][b] if mode == 'lstm' else None,
                       params)
        assert_almost_equal(out[b], h, rtol=1e-5, atol=1e-6)
        assert_almost_equal(new_states[0][b], h, rtol=1e-5, atol=1e-6)
        if mode == 'lstm':
            assert_almost_equal(new_states[1][b], c, rtol=1e-5, atol=1e-6)


def test_custom_activations():
    """LSTMCell's activation and recurrent_activation replace tanh and sigmoid."""
    rng = onp.random.default_rng(21)
    cell, params = random_cell('lstm', 2, 3, rng, activation='softsign',
                               recurrent_activation='relu')
    x = rng.uniform(-1, 1, (1, 3))
    h0, c0 = rng.uniform(-1, 1, (2, 1, 2))
    out, (h, c) = cell(np.array(x, dtype='float32'), [np.array(h0, dtype='float32'),
                                                      np.array(c0, dtype='float32')])
    gates = params['i2h_weight'] @ x[0] + params['i2h_bias'] + params['h2h_weight'] @ h0[0] + \
        params['h2h_bias']
    i, f, g, o = onp.split(gates, 4)

    def softsign(v):
        return v / (1 + onp.abs(v))

    def relu(v):
        return onp.maximum(v, 0)

    want_c = relu(f) * c0[0] + relu(i) * softsign(g)
    assert_almost_equal(c[0], want_c, rtol=1e-5, atol=1e-6)
    assert_almost_equal(out[0], relu(o) * softsign(want_c), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('layout', ['NTC', 'TNC'])
@pytest.mark.parametrize('merge_outputs', [True, False, None])
def test_unroll_matches_numpy(mode, layout, merge_outputs):
    rng = onp.random.default_rng(22)
    cell, params = random_cell(mode, 3, 2, rng)
    x = rng.uniform(-1, 1, (2, 4, 2))
    states = [rng.uniform(-1, 1, info['shape']) for info in cell.state_info(2)]
    expected, expected_states = np_unroll(mode, x, params, states)
    x_in = np.array(x if layout == 'NTC' else x.swapaxes(0, 1), dtype='float32')
    out, out_states = cell.unroll(4, x_in, [np.array(s, dtype='float32') for s in states],
                                  layout=layout, merge_outputs=merge_outputs)
    if merge_outputs:
        assert_almost_equal(out, expected if layout == 'NTC' else expected.swapaxes(0, 1),
                            rtol=1e-5, atol=1e-6)
    else:
        assert isinstance(out, list) and len(out) == 4
        for t, step in enumerate(out):
            assert_almost_equal(step, expected[:, t], rtol=1e-5, atol=1e-6)
    for got, want in zip(out_states, expected_states):
        assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('mode', MODES)
def test_unroll_valid_length_and_list_inputs(mode):
    rng = onp.random.default_rng(23)
    cell, params = random_cell(mode, 2, 3, rng)
    x = rng.uniform(-1, 1, (3, 5, 3))
    lengths = [5, 2, 3]
    expected, expected_states = np_unroll(mode, x, params,
                                          [onp.zeros(i['shape']) for i in cell.state_info(3)],
                                          lengths)
    steps = [np.array(x[:, t], dtype='float32') for t in range(5)]
    out, states = cell.unroll(5, steps, valid_length=np.array(lengths, dtype='float32'),
                              merge_outputs=True)
    assert_almost_equal(out, expected, rtol=1e-5, atol=1e-6)
    for got, want in zip(states, expected_states):
        assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('mode', ['lstm', 'gru'])
def test_bidirectional_unroll_matches_numpy(mode):
    """The backward cell reads each sequence reversed within its own length."""
    rng = onp.random.default_rng(24)
    l_cell, l_params = random_cell(mode, 2, 3, rng)
    r_cell, r_params = random_cell(mode, 2, 3, rng)
    cell = rnn.BidirectionalCell(l_cell, r_cell)
    x = rng.uniform(-1, 1, (3, 4, 3))
    lengths = [4, 1, 3]
    zeros = [onp.zeros(i['shape']) for i in l_cell.state_info(3)]
    l_out, l_states = np_unroll(mode, x, l_params, zeros, lengths)
    r_out, r_states = np_unroll(mode, x, r_params, zeros, lengths, reverse=True)
    out, states = cell.unroll(4, np.array(x, dtype='float32'),
                              valid_length=np.array(lengths), merge_outputs=True)
    assert_almost_equal(out, onp.concatenate([l_out, r_out], axis=2), rtol=1e-5, atol=1e-6)
    for got, want in zip(states, l_states + r_states):
        assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)
    assert len(cell.state_info(3)) == 2 * len(zeros)


def test_sequential_cells_step_and_unroll():
    rng = onp.random.default_rng(25)
    lstm, lstm_params = random_cell('lstm', 3, 2, rng)
    gru, gru_params = random_cell('gru', 2, 3, rng)
    for stack in (rnn.SequentialRNNCell(), rnn.HybridSequentialRNNCell()):
        stack.add(lstm)
        stack.add(gru)
        assert len(stack) == 2 and stack[1] is gru
        assert [i['shape'] for i in stack.state_info(4)] == [(4, 3), (4, 3), (4, 2)]
        x = rng.uniform(-1, 1, (4, 3, 2))
        h1, c1 = np_unroll('lstm', x, lstm_params, [onp.zeros((4, 3))] * 2)
        expected, (h2,) = np_unroll('gru', h1, gru_params, [onp.zeros((4, 2))])
        out, states = stack.unroll(3, np.array(x, dtype='float32'), merge_outputs=True)
        assert_almost_equal(out, expected, rtol=1e-5, atol=1e-6)
        for got, want in zip(states, c1 + [h2]):
            assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)
        step_out, step_states = stack(np.array(x[:, 0], dtype='float32'),
                                      stack.begin_state(batch_size=4))
        assert_almost_equal(step_out, expected[:, 0], rtol=1e-5, atol=1e-6)
        assert len(step_states) == 3


def test_hybridized_cells_equal_imperative():
    rng = onp.random.default_rng(26)
    stack = rnn.HybridSequentialRNNCell()
    stack.add(rnn.LSTMCell(3))
    stack.add(rnn.DropoutCell(0.5))
    stack.add(rnn.ResidualCell(rnn.GRUCell(3)))
    stack.initialize()
    x = np.array(rng.uniform(-1, 1, (2, 4)), dtype='float32')
    states = stack.begin_state(batch_size=2)
    expected = stack(x, states)
    stack.hybridize()
    for _ in range(2):
        got = stack(x, states)
        assert_almost_equal(got[0], expected[0], rtol=1e-6, atol=1e-7)
        for a, b in zip(got[1], expected[1]):
            assert_almost_equal(a, b, rtol=1e-6, atol=1e-7)

    class Unrolled(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.cell = rnn.BidirectionalCell(rnn.GRUCell(2), rnn.GRUCell(2))

        def forward(self, x, valid_length):
            return self.cell.unroll(3, x, valid_length=valid_length, merge_outputs=True)[0]

    net = Unrolled()
    net.initialize()
    seq = np.array(rng.uniform(-1, 1, (2, 3, 4)), dtype='float32')
    valid = np.array([2, 3])
    expected = net(seq, valid)
    net.hybridize()
    for _ in range(2):
        assert_almost_equal(net(seq, valid), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('mode', MODES)
def test_unroll_gradients_against_finite_differences(mode):
    rng = onp.random.default_rng(27)
    cell, _ = random_cell(mode, 2, 2, rng, dtype='float64')
    x = rng.uniform(-1, 1, (2, 3, 2))
    states = [rng.uniform(-1, 1, info['shape']) for info in cell.state_info(2)]
    lengths = np.array([3, 2])

    def forward(x, *states):
        out, new_states = cell.unroll(3, x, list(states), merge_outputs=True,
                                      valid_length=lengths)
        return np.concatenate([out.reshape(-1)] + [s.reshape(-1) for s in new_states])

    check_numeric_gradient(forward, [x] + states, rtol=1e-5, atol=1e-7)


def test_dropout_cell():
    cell = rnn.DropoutCell(0.5)
    x = np.ones((20, 30))
    out, states = cell(x, [])
    assert states == [] and cell.state_info() == []
    assert_almost_equal(out, x)
    with autograd.record():
        out, _ = cell(x, [])
    values = out.asnumpy()
    assert set(onp.unique(values)) <= {0.0, 2.0} and 0.3 < (values == 0).mean() < 0.7
    merged, _ = cell.unroll(4, np.ones((2, 4, 3)), layout='NTC', merge_outputs=True)
    assert merged.shape == (2, 4, 3)
    assert repr(cell) == 'DropoutCell(rate=0.5, axes=())'


def test_residual_cell_adds_the_inputs():
    rng = onp.random.default_rng(28)
    base, params = random_cell('gru', 3, 3, rng)
    cell = rnn.ResidualCell(base)
    x = rng.uniform(-1, 1, (2, 4, 3))
    lengths = [4, 2]
    expected, expected_states = np_unroll('gru', x, params, [onp.zeros((2, 3))], lengths)
    expected += x * (onp.arange(4)[None, :, None] < onp.array(lengths)[:, None, None])
    out, states = cell.unroll(4, np.array(x, dtype='float32'), merge_outputs=True,
                              valid_length=np.array(lengths))
    assert_almost_equal(out, expected, rtol=1e-5, atol=1e-6)
    assert_almost_equal(states[0], expected_states[0], rtol=1e-5, atol=1e-6)
    steps, _ = cell.unroll(4, np.array(x, dtype='float32'), merge_outputs=False)
    assert_almost_equal(steps[0], np_unroll('gru', x, params, [onp.zeros((2, 3))])[0][:, 0] +
                        x[:, 0], rtol=1e-5, atol=1e-6)
    assert list(cell.collect_params()) == ['base_cell.i2h_weight', 'base_cell.h2h_weight',
                                           'base_cell.i2h_bias', 'base_cell.h2h_bias']


def test_zoneout_cell():
    rng = onp.random.default_rng(29)
    base, params = random_cell('lstm', 4, 3, rng)
    cell = rnn.ZoneoutCell(base, zoneout_outputs=0.5, zoneout_states=0.5)
    x = np.array(rng.uniform(-1, 1, (3, 5, 3)), dtype='float32')
    base_out, _ = np_unroll('lstm', x.asnumpy().astype('float64'), params,
                                      [onp.zeros((3, 4))] * 2)
    out, _ = cell.unroll(5, x, merge_outputs=True)  # predict mode: the base cell's results
    assert_almost_equal(out, base_out, rtol=1e-5, atol=1e-6)
    # train mode: each element takes the base cell's new value or keeps the previous one
    cell.reset()
    states = cell.begin_state(batch_size=3)
    prev_output = onp.zeros((3, 4))
    kept = []
    for t in range(5):
        base_output, base_states = base(x[:, t], states)  # the base cell is deterministic
        with autograd.record():
            output, new_states = cell(x[:, t], states)
        pairs = [(output, base_output, prev_output)] + \
            [(new, from_base, old) for new, from_base, old in zip(new_states, base_states, states)]
        for got, new, old in pairs:
            got, new, old = (onp.asarray(v) for v in (got, new, old))
            took_new, kept_old = got == new, got == old
            assert onp.all(took_new | kept_old)
            kept.append(kept_old[~took_new].size / got.size)
        prev_output, states = output.asnumpy(), new_states
    assert 0.2 < onp.mean(kept) < 0.8
    assert repr(cell).startswith('ZoneoutCell(p_out=0.5, p_state=0.5, LSTMCell(3 -> 4)')


def test_parameter_names_match_mxnet_and_round_trip(tmp_path):
    stack = rnn.SequentialRNNCell()
    stack.add(rnn.LSTMCell(3, input_size=4))
    stack.add(rnn.BidirectionalCell(rnn.GRUCell(2, input_size=3), rnn.GRUCell(2, input_size=3)))
    assert list(stack.collect_params()) == [
        '0.i2h_weight', '0.h2h_weight', '0.i2h_bias', '0.h2h_bias',
        '1.l_cell.i2h_weight', '1.l_cell.h2h_weight', '1.l_cell.i2h_bias', '1.l_cell.h2h_bias',
        '1.r_cell.i2h_weight', '1.r_cell.h2h_weight', '1.r_cell.i2h_bias', '1.r_cell.h2h_bias']
    assert stack[0].i2h_weight.shape == (12, 4) and stack[1].l_cell.h2h_weight.shape == (6, 2)
    stack.initialize()
    x = np.array(onp.random.default_rng(30).uniform(-1, 1, (2, 3, 4)), dtype='float32')
    expected, _ = stack.unroll(3, x, merge_outputs=True)
    path = str(tmp_path / 'cells.params')
    stack.save_parameters(path)
    loaded = rnn.SequentialRNNCell()
    loaded.add(rnn.LSTMCell(3))
    loaded.add(rnn.BidirectionalCell(rnn.GRUCell(2), rnn.GRUCell(2)))
    loaded.load_parameters(path)
    assert_almost_equal(loaded.unroll(3, x, merge_outputs=True)[0], expected)


def test_begin_state_and_deferred_input_size():
    cell = rnn.LSTMCell(5, dtype='float64')
    assert [i['shape'] for i in cell.state_info(2)] == [(2, 5), (2, 5)]
    h, c = cell.begin_state(batch_size=2)
    assert h.shape == (2, 5) and h.dtype == onp.float64
    ones = cell.begin_state(batch_size=1, func=np.ones)
    assert_almost_equal(ones[1], onp.ones((1, 5)))
    assert repr(cell) == 'LSTMCell(None -> 5)'
    cell.initialize()
    cell(np.ones((2, 7), dtype='float64'), [h, c])
    assert cell.i2h_weight.shape == (20, 7)
    assert repr(cell) == 'LSTMCell(7 -> 5)'
    assert repr(rnn.RNNCell(3, activation='relu', input_size=2)) == 'RNNCell(2 -> 3, relu)'


@pytest.mark.parametrize('mode', MODES)
def test_cell_unroll_on_device_matches_numpy(mode, device):
    rng = onp.random.default_rng(31)
    cell = make_cell(mode, 3, input_size=2)
    cell.initialize(device=device)
    params = {}
    for name, param in cell.collect_params().items():
        params[name] = rng.uniform(-0.6, 0.6, param.shape)
        param.set_data(np.array(params[name], dtype='float32', device=device))
    x = rng.uniform(-1, 1, (2, 4, 2))
    lengths = [4, 3]
    expected, expected_states = np_unroll(mode, x, params,
                                          [onp.zeros((2, 3)) for _ in cell.state_info(2)],
                                          lengths)
    out, states = cell.unroll(4, np.array(x, dtype='float32', device=device),
                              merge_outputs=True, valid_length=np.array(lengths, device=device))
    assert out.device == device and states[0].device == device
    assert_almost_equal(out, expected, rtol=1e-5, atol=1e-6)
    for got, want in zip(states, expected_states):
        assert_almost_equal(got, want, rtol=1e-5, atol=1e-6)


def test_cell_errors_name_the_values():
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        rnn.RNNCell(3, activation='swish')
    with pytest.raises(TypeError, match="activation must be a name or a callable, got int"):
        rnn.LSTMCell(3, recurrent_activation=3)
    with pytest.raises(ValueError, match="hidden_size must be a positive int, got -1"):
        rnn.GRUCell(-1)
    with pytest.raises(ValueError, match=r"rate must be a number in \[0, 1\), got 1.5"):
        rnn.DropoutCell(1.5)
    cell = rnn.GRUCell(3, input_size=2)
    cell.initialize()
    x = np.ones((4, 2))
    with pytest.raises(ValueError, match=r"inputs must be a 2-D \(batch_size, input_size\) "
                                         r"array, got \(4, 2, 1\)"):
        cell(np.ones((4, 2, 1)), cell.begin_state(batch_size=4))
    with pytest.raises(ValueError, match="inputs have 5 features but the cell expects 2"):
        cell(np.ones((4, 5)), cell.begin_state(batch_size=4))
    with pytest.raises(ValueError, match=r"Expecting \(4, 3\), got \(4, 2\)"):
        cell(x, [np.zeros((4, 2))])
    with pytest.raises(ValueError, match=r"expected 1 state\(s\), got 2"):
        cell(x, [np.zeros((4, 3))] * 2)
    with pytest.raises(TypeError, match="states must be a list of ndarrays, got ndarray"):
        cell(x, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="invalid layout 'NCT'"):
        cell.unroll(3, np.ones((4, 3, 2)), layout='NCT')
    with pytest.raises(ValueError, match=r"length is 5 but the inputs \(layout NTC\) have 3 "
                                         r"steps"):
        cell.unroll(5, np.ones((4, 3, 2)))
    with pytest.raises(ValueError, match="length is 2 but 3 input steps were given"):
        cell.unroll(2, [x, x, x])
    with pytest.raises(TypeError, match="inputs must be an ndarray or a non-empty list"):
        cell.unroll(2, None)
    with pytest.raises(NotImplementedError, match="Bidirectional cannot be stepped"):
        rnn.BidirectionalCell(rnn.GRUCell(3), rnn.GRUCell(3))(x, [])
    base = rnn.LSTMCell(3)
    rnn.ResidualCell(base)
    with pytest.raises(ValueError, match="LSTMCell is already modified"):
        rnn.ZoneoutCell(base)
    with pytest.raises(RuntimeError, match="cannot be called directly"):
        base.begin_state(batch_size=2)
    with pytest.raises(ValueError, match="BidirectionalCell doesn't support zoneout"):
        rnn.ZoneoutCell(rnn.BidirectionalCell(rnn.GRUCell(3), rnn.GRUCell(3)))
    with pytest.raises(ValueError, match=r"zoneout_states must be in \[0, 1\), got 2"):
        rnn.ZoneoutCell(rnn.GRUCell(3), zoneout_states=2)
