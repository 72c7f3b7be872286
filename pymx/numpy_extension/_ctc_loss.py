"""npx.ctc_loss: MXNet's CTCLoss operator, the Connectionist Temporal Classification loss of
unnormalised scores `data` (sequence_length, batch, alphabet_size) against integer labels
(batch, label_length). It runs gluon.loss.CTCLoss, whose forward algorithm is composed of np
operators (its docstring says how), so it is differentiable in data and runs on every device.

blank_label='first' (the default) reserves class 0 for the blank: labels are 1 ..
alphabet_size - 1 and padded with 0. blank_label='last' reserves class alphabet_size - 1:
labels are 0 .. alphabet_size - 2 and padded with -1. CTCLoss itself uses the 'last'
convention, so 'first' moves data's class 0 to the end and shifts the labels down by one.

Deliberate differences from MXNet 2.x: an impossible alignment gives a loss near 1e30 (CTCLoss's
stand-in for inf); a label value outside the alphabet raises a ValueError. The labels are read
on the host for that check at every imperative call and when a hybridized block is traced, but
not when its graph replays (the graph checks nothing on the host, and CTCLoss's unrolled graph
is what makes it fast).
"""
from pymx import numpy as _np
from pymx.numpy_extension._shape_ops import _check_array

__all__ = ["ctc_loss"]


def _check_labels(label, blank_label, alphabet_size):
    """Labels must be classes of the alphabet other than the blank, or the padding value."""
    values = label._values_outside_trace()
    if blank_label == "first":
        bad = values[(values < 0) | (values >= alphabet_size)]
        valid = f"1 .. {alphabet_size - 1}, or 0 for padding"
    else:
        bad = values[(values < -1) | (values >= alphabet_size - 1)]
        valid = f"0 .. {alphabet_size - 2}, or -1 for padding"
    if bad.size:
        raise ValueError(f"ctc_loss: label values must be {valid} (blank_label={blank_label!r}, "
                         f"alphabet_size {alphabet_size}), got {bad.flat[0]}")


def ctc_loss(data, label, data_lengths=None, label_lengths=None, use_data_lengths=False,
             use_label_lengths=False, blank_label="first"):
    """The CTC loss of each sequence, shape (batch,).

    data: (sequence_length, batch, alphabet_size) scores (softmax is applied inside).
    label: (batch, label_length) class indices, padded as blank_label says.
    data_lengths, label_lengths: (batch,) lengths, used when use_data_lengths /
    use_label_lengths is True (otherwise every sequence has the full length, and labels end at
    their first padding value).
    """
    _check_array("ctc_loss", "data", data)
    _check_array("ctc_loss", "label", label)
    if blank_label not in ("first", "last"):
        raise ValueError(f"ctc_loss: blank_label must be 'first' or 'last', got {blank_label!r}")
    if data.ndim != 3 or label.ndim != 2 or label.shape[0] != data.shape[1]:
        raise ValueError(f"ctc_loss: data must be (sequence_length, batch, alphabet_size) and "
                         f"label (batch, label_length), got data {data.shape} and label "
                         f"{label.shape}")
    alphabet_size = data.shape[2]
    if alphabet_size < 2:
        raise ValueError(f"ctc_loss: alphabet_size (data.shape[2]) must be at least 2 (the "
                         f"blank and one label), got {alphabet_size}")
    lengths = {}
    for name, use, value in (("data_lengths", use_data_lengths, data_lengths),
                             ("label_lengths", use_label_lengths, label_lengths)):
        if not use:
            continue
        if value is None:
            raise ValueError(f"ctc_loss: use_{name}=True needs {name}")
        _check_array("ctc_loss", name, value)
        if value.shape != (data.shape[1],):
            raise ValueError(f"ctc_loss: {name} must have shape ({data.shape[1]},) (one length "
                             f"per sequence), got {value.shape}")
        lengths[name] = value
    _check_labels(label, blank_label, alphabet_size)
    label = label.astype("int32")
    if blank_label == "first":
        data = _np.concatenate([data[:, :, 1:], data[:, :, :1]], axis=2)
        label = label - 1  # the padding 0 becomes CTCLoss's -1
    # gluon.loss imports pymx.numpy_extension, so it is imported at the first call.
    from pymx.gluon.loss import CTCLoss
    return CTCLoss(layout="TNC", label_layout="NT")(
        data, label, lengths.get("data_lengths"), lengths.get("label_lengths"))
