"""gluon.rnn.VariationalDropoutCell against a float64 NumPy RNN with the same masks."""
import warnings

import numpy as onp
import pytest

from pymx import autograd, gluon, np
from pymx.gluon import rnn
from pymx.test_utils import assert_almost_equal


def _rnn_reference(cell, x, h, masks):
    """tanh RNN over x (N, T, C) from h, masks (inputs, states, outputs) applied per step, in
    float64; returns the outputs (N, T, H) and the last state."""
    weights = {name: p.data().asnumpy().astype(onp.float64)
               for name, p in cell.collect_params().items()}
    m_in, m_state, m_out = masks
    outputs = []
    for t in range(x.shape[1]):
        h = onp.tanh((x[:, t] * m_in) @ weights["i2h_weight"].T + weights["i2h_bias"] +
                     (h * m_state) @ weights["h2h_weight"].T + weights["h2h_bias"])
        outputs.append(h * m_out)
    return onp.stack(outputs, axis=1), h


def _cell(**rates):
    base = rnn.RNNCell(4, input_size=3)
    cell = rnn.VariationalDropoutCell(base, **rates)
    cell.initialize()
    return cell, base


@pytest.mark.parametrize("rates", [dict(drop_inputs=0.5, drop_states=0.3, drop_outputs=0.4),
                                   dict(drop_inputs=0.5), dict(drop_states=0.5),
                                   dict(drop_outputs=0.5)])
def test_variational_dropout_uses_one_mask_per_sequence(device, rates):
    cell, base = _cell(**rates)
    cell.reset_device(device)
    x = onp.random.uniform(-1, 1, (3, 5, 3))
    with autograd.train_mode():
        out, states = cell.unroll(5, np.array(x, dtype="float32", device=device),
                                  merge_outputs=True)
    masks = []
    for name, shape in (("inputs", (3, 3)), ("states", (3, 4)), ("outputs", (3, 4))):
        mask = getattr(cell, f"drop_{name}_mask")
        rate = rates.get(f"drop_{name}", 0)
        if not rate:
            assert mask is None
            masks.append(onp.ones(shape))
            continue
        mask = mask.asnumpy().astype(onp.float64)
        assert mask.shape == shape
        # Dropout of ones: each element is 0 or 1 / (1 - rate).
        assert onp.all(onp.isclose(mask, 0) | onp.isclose(mask, 1 / (1 - rate)))
        masks.append(mask)
    want_out, want_h = _rnn_reference(base, x, onp.zeros((3, 4)), masks)
    assert_almost_equal(out, want_out, rtol=1e-5, atol=1e-6)
    assert_almost_equal(states[0], want_h, rtol=1e-5, atol=1e-6)


def test_variational_dropout_masks_are_redrawn_after_reset():
    cell, _ = _cell(drop_inputs=0.5)
    x = np.ones((64, 3))
    states = cell.begin_state(batch_size=64)
    with autograd.train_mode():
        cell(x, states)
        first = cell.drop_inputs_mask.asnumpy()
        cell(x, states)
        assert onp.array_equal(cell.drop_inputs_mask.asnumpy(), first)  # kept across steps
        cell.reset()
        assert cell.drop_inputs_mask is None
        cell(x, states)
    assert not onp.array_equal(cell.drop_inputs_mask.asnumpy(), first)


def test_variational_dropout_in_predict_mode_is_the_base_cell(device):
    cell, base = _cell(drop_inputs=0.5, drop_states=0.5, drop_outputs=0.5)
    cell.reset_device(device)
    x = onp.random.uniform(-1, 1, (2, 4, 3))
    out, _ = cell.unroll(4, np.array(x, dtype="float32", device=device), merge_outputs=True)
    want, _ = _rnn_reference(base, x, onp.zeros((2, 4)), [1.0, 1.0, 1.0])
    assert_almost_equal(out, want, rtol=1e-5, atol=1e-6)


def test_variational_dropout_gradient_flows_through_the_masks():
    cell, base = _cell(drop_inputs=0.5)
    x = np.array(onp.random.uniform(-1, 1, (2, 2, 3)), dtype="float32")
    with autograd.record():
        out, _ = cell.unroll(2, x, merge_outputs=True)
        out.sum().backward()
    grad = base.i2h_weight.grad().asnumpy()
    assert grad.shape == (4, 3) and onp.all(onp.isfinite(grad))
    # Inputs dropped at every step contribute nothing: their columns of i2h_weight get no
    # gradient.
    dropped = onp.all(cell.drop_inputs_mask.asnumpy() == 0, axis=0)
    assert onp.all(grad[:, dropped] == 0)


def test_variational_dropout_hybridized_runs_imperatively(device):
    cell, base = _cell(drop_inputs=0.5)
    cell.reset_device(device)
    cell.hybridize()
    x = np.array(onp.random.uniform(-1, 1, (2, 3, 3)), dtype="float32", device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with autograd.train_mode():
            out, _ = cell.unroll(3, x, merge_outputs=True)
    assert any("VariationalDropoutCell" in str(w.message) for w in caught)
    want, _ = _rnn_reference(base, x.asnumpy().astype(onp.float64), onp.zeros((2, 4)),
                             [cell.drop_inputs_mask.asnumpy(), 1.0, 1.0])
    assert_almost_equal(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rates, message", [
    (dict(drop_inputs=1.0), "drop_inputs must be a number in \\[0, 1\\), got 1.0"),
    (dict(drop_states=-0.1), "drop_states must be a number in \\[0, 1\\), got -0.1"),
    (dict(drop_outputs="0.5"), "drop_outputs must be a number in \\[0, 1\\), got '0.5'"),
])
def test_variational_dropout_rejects_bad_rates(rates, message):
    with pytest.raises(ValueError, match=message):
        rnn.VariationalDropoutCell(rnn.RNNCell(4), **rates)


def test_variational_dropout_cell_errors():
    bidirectional = rnn.BidirectionalCell(rnn.RNNCell(2), rnn.RNNCell(2))
    with pytest.raises(ValueError, match="BidirectionalCell doesn't support variational state"):
        rnn.VariationalDropoutCell(bidirectional, drop_states=0.5)
    rnn.VariationalDropoutCell(rnn.BidirectionalCell(rnn.RNNCell(2), rnn.RNNCell(2)),
                               drop_inputs=0.5)
    with pytest.raises(TypeError, match="base_cell must be a recurrent cell, got Dense"):
        rnn.VariationalDropoutCell(gluon.nn.Dense(2))


def test_variational_dropout_parameters_are_the_base_cells():
    cell, base = _cell(drop_inputs=0.1)
    assert sorted(cell.collect_params()) == ["base_cell.h2h_bias", "base_cell.h2h_weight",
                                             "base_cell.i2h_bias", "base_cell.i2h_weight"]
    assert "VariationalDropoutCell(p_out=0.0, p_state=0.0, p_in=0.1" in repr(cell)
