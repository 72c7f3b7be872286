"""npx.rnn: MXNet's fused recurrent operator (vanilla RNN with relu or tanh, LSTM, GRU; several
layers, one or two directions) over data (T, N, C) and one flat parameter vector.

The vector holds every weight, layer by layer and direction by direction (i2h (G*H, C_in),
h2h (G*H, P or H), then h2r (P, H) with an LSTM projection), then every bias likewise (i2h,
h2h, each (G*H,)); G is 4 (LSTM, gates i, f, g, o), 3 (GRU, gates r, z, n) or 1. It is the
layout of gluon.rnn's layers (rnn_layer.flat_parameter_layout), and the operator runs their
time loops (gluon/_mxnet_rnn.py), so npx.rnn gives what rnn.RNN / LSTM / GRU give with the same
weights, on every device, with gradients reaching `parameters` through one split.

Differences from MXNet 2.x: bad arguments raise ValueError naming the values where MXNet
asserts; with use_sequence_length the outputs past each sequence's length are zero and the
returned states are those at its last valid step (what MXNet's cuDNN kernel does; its CPU kernel
has no sequence lengths).
"""
import numbers

__all__ = ["rnn"]


def _positive_int(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"npx.rnn: {name} must be a positive integer, got {value!r}")
    return int(value)


def rnn(data=None, parameters=None, state=None, state_cell=None, sequence_length=None,
        mode=None, state_size=None, num_layers=None, bidirectional=False, state_outputs=False,
        p=0.0, use_sequence_length=False, projection_size=None, lstm_state_clip_min=None,
        lstm_state_clip_max=None, lstm_state_clip_nan=None):
    """Applies `num_layers` recurrent layers of `mode` ('rnn_relu', 'rnn_tanh', 'lstm', 'gru')
    to data (T, N, C).

    parameters: the flat weights and biases (see the module docstring). state: the begin hidden
    state (num_layers * directions, N, P or H); state_cell: LSTM's begin cell state
    (num_layers * directions, N, H), required for 'lstm' and ignored otherwise. p: the dropout
    rate on each layer's outputs but the last's, in training. sequence_length (N,): each
    sequence's valid length, read with use_sequence_length=True. projection_size: LSTM only.
    lstm_state_clip_min / _max: clip LSTM's cell state to [min, max], lstm_state_clip_nan
    turning NaN into min.

    Returns out (T, N, directions * (P or H)), or with state_outputs [out, h_T] ([out, h_T, c_T]
    for LSTM).
    """
    # Imported here: gluon's layers import pymx.numpy_extension, which imports this module.
    from pymx.gluon._mxnet_rnn import fused_rnn
    from pymx.gluon.rnn.rnn_layer import GATES, flat_parameter_size

    if data is None or parameters is None or state is None:
        raise ValueError("npx.rnn: data, parameters and state are required")
    if mode not in GATES:
        raise ValueError(f"npx.rnn: mode must be one of {sorted(GATES)}, got {mode!r}")
    state_size = _positive_int(state_size, "state_size")
    num_layers = _positive_int(num_layers, "num_layers")
    if projection_size is not None:
        if mode != 'lstm':
            raise ValueError(f"npx.rnn: projection_size is for mode 'lstm' only, got mode "
                             f"{mode!r}")
        projection_size = _positive_int(projection_size, "projection_size")
    if mode == 'lstm' and state_cell is None:
        raise ValueError("npx.rnn: mode 'lstm' needs state_cell (the begin cell state)")
    if use_sequence_length and sequence_length is None:
        raise ValueError("npx.rnn: use_sequence_length=True needs sequence_length")
    if (lstm_state_clip_min is None) != (lstm_state_clip_max is None):
        raise ValueError(f"npx.rnn: lstm_state_clip_min and lstm_state_clip_max must be given "
                         f"together, got {lstm_state_clip_min!r} and {lstm_state_clip_max!r}")
    if lstm_state_clip_min is not None and lstm_state_clip_min > lstm_state_clip_max:
        raise ValueError(f"npx.rnn: lstm_state_clip_min {lstm_state_clip_min} is greater than "
                         f"lstm_state_clip_max {lstm_state_clip_max}")
    if data.ndim != 3:
        raise ValueError(f"npx.rnn: data must be 3-D (T, N, C), got shape {data.shape}")
    expected = flat_parameter_size(mode, num_layers, data.shape[2], state_size, bidirectional,
                                   projection_size)
    if parameters.size != expected:
        raise ValueError(
            f"npx.rnn: parameters has {parameters.size} values, expected {expected} (mode "
            f"{mode!r}, num_layers {num_layers}, input size {data.shape[2]}, state_size "
            f"{state_size}, bidirectional {bool(bidirectional)}, projection_size "
            f"{projection_size})")
    clip = None if lstm_state_clip_min is None or mode != 'lstm' else \
        (float(lstm_state_clip_min), float(lstm_state_clip_max), bool(lstm_state_clip_nan))
    states = [state, state_cell] if mode == 'lstm' else [state]
    out, final_states = fused_rnn(data, parameters, states,
                                  sequence_length if use_sequence_length else None, mode=mode,
                                  state_size=state_size, num_layers=num_layers,
                                  bidirectional=bool(bidirectional),
                                  projection_size=projection_size, dropout=p, clip=clip,
                                  where="npx.rnn")
    return [out] + final_states if state_outputs else out
