"""MXNet's fused `RNN` operator (what gluon.rnn's RNN, LSTM and GRU layers export), run by
the recurrent layers' own run_layers, so that it gives exactly what pymx's rnn.RNN / LSTM / GRU
give with the same weights.

The operator's weights and biases come as one flat vector in cuDNN's order (see
rnn_layer.flat_parameter_layout); it is split with one differentiable `np.split`, so gradients
reach the vector itself. The input size is read from the vector's size (the one unknown of the
layout) and checked against the data's features.
"""
from .. import numpy_extension as npx
from .rnn.rnn_cell import split_steps, step_keep_masks
from .rnn.rnn_layer import (GATES, flat_input_size, flat_parameter_layout, flat_parameter_size,
                            run_layers, split_flat_parameters)

__all__ = ['fused_rnn']


def fused_rnn(data, parameters, states, sequence_length, mode, state_size, num_layers,
              bidirectional, projection_size, dropout, clip, where):
    """Runs the operator on data (T, N, C) with the flat `parameters` and the begin `states`
    ([h] or [h, c] for LSTM, each (num_layers * directions, N, size)); `sequence_length` (N,)
    or None. `clip` is None or (min, max, nan) for the LSTM cell state; `where` names the node
    in errors. Returns (out (T, N, directions * (projection_size or state_size)), final
    states)."""
    if data.ndim != 3:
        raise ValueError(f"RNN of {where} needs 3-D data (T, N, C), got shape {data.shape}")
    directions = 2 if bidirectional else 1
    input_size = flat_input_size(parameters.size, mode, num_layers, state_size, bidirectional,
                                 projection_size)
    if input_size is None:
        known = flat_parameter_size(mode, num_layers, 0, state_size, bidirectional,
                                    projection_size)
        first_rows = directions * GATES[mode] * state_size
        raise ValueError(f"RNN of {where}: its flat parameter vector has {parameters.size} "
                         f"values, which is not {known} + {first_rows} * input_size for any "
                         f"input_size > 0 (mode {mode}, state_size {state_size}, num_layers "
                         f"{num_layers}, bidirectional {bidirectional}, projection_size "
                         f"{projection_size})")
    if input_size != data.shape[2]:
        raise ValueError(f"RNN of {where}: its flat parameter vector of {parameters.size} values "
                         f"is for inputs of {input_size} features, the data has shape "
                         f"{data.shape}")
    length, batch_size = data.shape[:2]
    fed_back = projection_size or state_size
    expected = [(num_layers * directions, batch_size, fed_back)]
    if mode == 'lstm':
        expected.append((num_layers * directions, batch_size, state_size))
    if [tuple(s.shape) for s in states] != expected:
        raise ValueError(f"RNN of {where} (mode {mode}) needs begin states of shapes {expected}, "
                         f"got {[tuple(s.shape) for s in states]}")
    weights = split_flat_parameters(parameters, flat_parameter_layout(
        mode, num_layers, input_size, state_size, bidirectional, projection_size))
    keep = None if sequence_length is None else \
        split_steps(step_keep_masks(sequence_length, length, data), 0)
    x, final_states = run_layers(data, weights, states, keep, mode, state_size, projection_size,
                                 num_layers, bidirectional, dropout, clip)
    if sequence_length is not None:
        x = npx.sequence_mask(x, sequence_length=sequence_length, use_sequence_length=True,
                              axis=0)
    return x, final_states
