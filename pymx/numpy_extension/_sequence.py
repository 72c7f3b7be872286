"""npx.sequence_last and sequence_reverse: per-sequence operations on a padded batch of
sequences (time on `axis`, batch on the other of axes 0 and 1), as MXNet's SequenceLast and
SequenceReverse.

Both gather rows with pymx's take operator on the (time * batch, ...) view, so they run on every
device, are differentiable with respect to data (take's gradient scatters back) and trace into
hybridized graphs. sequence_length holds the valid length of each sequence (any numeric dtype,
as in MXNet, where it is usually float32). Differences from MXNet: sequence_reverse also accepts
axis=1 (MXNet only 0).
"""
from pymx import numpy as _np


def _time_major(data, axis, op):
    if axis not in (0, 1):
        raise ValueError(f"{op}: axis must be 0 or 1 (the time axis), got {axis!r}")
    if data.ndim < 2:
        raise ValueError(f"{op}: data must have at least 2 dimensions (time and batch), got "
                         f"shape {data.shape}")
    return _np.swapaxes(data, 0, 1) if axis == 1 else data


def _lengths(sequence_length, use_sequence_length, steps, batch, op):
    """Each sequence's length as int64 (all `steps` when not used)."""
    if not use_sequence_length:
        return None
    if sequence_length is None:
        raise ValueError(f"{op}: use_sequence_length=True needs sequence_length")
    if tuple(sequence_length.shape) != (batch,):
        raise ValueError(f"{op}: sequence_length must have shape ({batch},), one length per "
                         f"sequence, got {sequence_length.shape}")
    return sequence_length.astype("int64")


def _gather_steps(data, steps_per_sequence):
    """data (T, B, ...) at time steps_per_sequence[..., b] of each sequence b."""
    steps, batch = data.shape[:2]
    rows = _np.reshape(data, (steps * batch,) + tuple(data.shape[2:]))
    sequence = _np.arange(batch, dtype="int64", device=data.device)
    return _np.take(rows, steps_per_sequence * batch + sequence, axis=0)


def sequence_last(data, sequence_length=None, use_sequence_length=False, axis=0):
    """The last valid step of each sequence: data[sequence_length[b] - 1, b] for time on axis 0
    (data[b, sequence_length[b] - 1] for axis=1), shape data.shape without the time axis.
    Without use_sequence_length, the last step of the time axis. Lengths must lie in
    [1, time steps]."""
    data_tb = _time_major(data, axis, "sequence_last")
    steps, batch = data_tb.shape[:2]
    lengths = _lengths(sequence_length, use_sequence_length, steps, batch, "sequence_last")
    if lengths is None:
        return data_tb[steps - 1]
    return _gather_steps(data_tb, lengths - 1)


def sequence_reverse(data, sequence_length=None, use_sequence_length=False, axis=0):
    """Each sequence's first sequence_length[b] steps reversed, the padding after them left in
    place (all steps reversed without use_sequence_length)."""
    data_tb = _time_major(data, axis, "sequence_reverse")
    steps, batch = data_tb.shape[:2]
    lengths = _lengths(sequence_length, use_sequence_length, steps, batch, "sequence_reverse")
    if lengths is None:
        out = _np.flip(data_tb, 0)
    else:
        time = _np.reshape(_np.arange(steps, dtype="int64", device=data.device), (steps, 1))
        source = _np.where(time < lengths, lengths - 1 - time, time)  # (T, B)
        out = _np.reshape(_gather_steps(data_tb, source), data_tb.shape)
    return _np.swapaxes(out, 0, 1) if axis == 1 else out
