"""npx.ctc_loss against a float64 NumPy forward algorithm: both blank conventions, lengths,
gradients, hybridize, bad input."""
import warnings

import numpy as onp
import pytest

from pymx import gluon, np, npx
from pymx.test_utils import assert_almost_equal, check_numeric_gradient


def _ctc_reference(data, label, data_lengths, label_lengths, blank):
    """-log p(label | data) per sequence, by the forward recursion over the label with blanks
    interleaved, in float64 probabilities (short sequences keep them far from underflow)."""
    data = data.astype(onp.float64)
    probs = onp.exp(data - data.max(axis=2, keepdims=True))
    probs /= probs.sum(axis=2, keepdims=True)
    losses = []
    for n in range(data.shape[1]):
        target = list(label[n, :label_lengths[n]])
        states = [blank]
        for c in target:
            states += [c, blank]
        alpha = onp.zeros(len(states))
        alpha[0] = probs[0, n, blank]
        if len(states) > 1:
            alpha[1] = probs[0, n, states[1]]
        for t in range(1, data_lengths[n]):
            new = onp.zeros_like(alpha)
            for s, c in enumerate(states):
                total = alpha[s] + (alpha[s - 1] if s >= 1 else 0.0)
                if s >= 2 and c != blank and c != states[s - 2]:
                    total += alpha[s - 2]
                new[s] = total * probs[t, n, c]
            alpha = new
        likelihood = alpha[-1] + (alpha[-2] if len(states) > 1 else 0.0)
        losses.append(-onp.log(likelihood))
    return onp.array(losses)


def _case(steps=6, batch=3, alphabet=5, max_label=3):
    data = onp.random.uniform(-2, 2, size=(steps, batch, alphabet))
    label_lengths = onp.array([max_label, 1, 2][:batch])
    labels = onp.random.randint(1, alphabet, size=(batch, max_label))
    return data, labels, label_lengths


@pytest.mark.parametrize("blank_label", ["first", "last"])
def test_ctc_loss_padded_labels(device, blank_label):
    data, labels, label_lengths = _case()
    alphabet = data.shape[2]
    blank = 0 if blank_label == "first" else alphabet - 1
    if blank_label == "last":
        labels = labels - 1  # classes 0 .. alphabet - 2
    padding = 0 if blank_label == "first" else -1
    padded = onp.where(onp.arange(labels.shape[1]) < label_lengths[:, None], labels, padding)
    got = npx.ctc_loss(np.array(data, dtype="float32", device=device),
                       np.array(padded, dtype="int32", device=device), blank_label=blank_label)
    want = _ctc_reference(data.astype(onp.float32), padded, [data.shape[0]] * data.shape[1],
                          label_lengths, blank)
    assert got.shape == (data.shape[1],) and got.device == device
    assert_almost_equal(got, want, rtol=1e-4, atol=1e-4)


def test_ctc_loss_with_lengths(device):
    data, labels, label_lengths = _case(steps=7)
    data_lengths = onp.array([7, 4, 5])
    got = npx.ctc_loss(np.array(data, device=device), np.array(labels, device=device),
                       np.array(data_lengths, device=device),
                       np.array(label_lengths, device=device),
                       use_data_lengths=True, use_label_lengths=True)
    want = _ctc_reference(data, labels, data_lengths, label_lengths, blank=0)
    assert_almost_equal(got, want, rtol=1e-4, atol=1e-4)


def test_ctc_loss_equals_gluon_ctc_loss(device):
    data, labels, _ = _case()
    last = np.array(labels - 1, device=device)
    got = npx.ctc_loss(np.array(data, device=device), last, blank_label="last")
    gluon_loss = gluon.loss.CTCLoss(layout="TNC")(np.array(data, device=device), last)
    assert_almost_equal(got, gluon_loss)


def test_ctc_loss_gradient(device):
    data, labels, _ = _case(steps=4, batch=2, alphabet=3, max_label=2)
    label = np.array(labels, device=device)
    check_numeric_gradient(lambda x: npx.ctc_loss(x, label), [data], device=device,
                           rtol=1e-3, atol=1e-4)


class _CTCBlock(gluon.HybridBlock):
    def forward(self, data, label):
        return npx.ctc_loss(data, label)


def test_ctc_loss_hybridized_equals_imperative(device):
    block = _CTCBlock()
    block.hybridize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it traces: no "runs imperatively" warning
        for _ in range(2):  # the trace, then a replay on new values
            data, labels, _ = _case()
            data, labels = np.array(data, device=device), np.array(labels, device=device)
            assert_almost_equal(block(data, labels), npx.ctc_loss(data, labels))


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(blank_label="middle"), ValueError, "blank_label must be 'first' or 'last', got 'middle'"),
    (dict(use_data_lengths=True), ValueError, "use_data_lengths=True needs data_lengths"),
    (dict(use_label_lengths=True, label_lengths=np.array([1, 2])), ValueError,
     r"label_lengths must have shape \(3,\) \(one length per sequence\), got \(2,\)"),
])
def test_ctc_loss_argument_errors(kwargs, error, message):
    data, labels, _ = _case()
    with pytest.raises(error, match=message):
        npx.ctc_loss(np.array(data), np.array(labels), **kwargs)


def test_ctc_loss_shape_and_label_errors():
    with pytest.raises(ValueError, match=r"got data \(6, 5\) and label \(3, 2\)"):
        npx.ctc_loss(np.zeros((6, 5)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"label values must be 1 \.\. 4, or 0 for padding "
                                         r"\(blank_label='first', alphabet_size 5\), got 5"):
        npx.ctc_loss(np.zeros((6, 3, 5)), np.array([[1, 5], [1, 1], [2, 2]]))
    with pytest.raises(ValueError, match=r"label values must be 0 \.\. 3, or -1 for padding"):
        npx.ctc_loss(np.zeros((6, 3, 5)), np.array([[1, 4], [1, 1], [2, 2]]),
                     blank_label="last")
    with pytest.raises(ValueError, match="alphabet_size .* must be at least 2"):
        npx.ctc_loss(np.zeros((6, 3, 1)), np.zeros((3, 2)))
    with pytest.raises(TypeError, match="label must be a pymx ndarray, got list"):
        npx.ctc_loss(np.zeros((6, 3, 5)), [[1]])
