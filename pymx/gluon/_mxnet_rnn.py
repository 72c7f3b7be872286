"""MXNet's fused `RNN` operator (what gluon.rnn's RNN, LSTM and GRU layers export), run with the
gate arithmetic of pymx's recurrent layers (rnn_cell's rnn_step, lstm_step, gru_step) and in
the same order of operations, so that it gives exactly what pymx's rnn.RNN / LSTM / GRU give
with the same weights.

The operator's weights and biases come as one flat vector in cuDNN's order (see
rnn_layer.flat_parameter_layout); it is split with one differentiable `np.split`, so gradients
reach the vector itself. The input size is read from the vector's size (the one unknown of the
layout) and checked against the data's features.
"""
import math

from .. import numpy as np
from .. import numpy_extension as npx
from .rnn.rnn_cell import gru_step, keep_valid, lstm_step, rnn_step, split_steps, \
    step_keep_masks
from .rnn.rnn_layer import flat_parameter_layout

__all__ = ['MODES', 'flat_parameter_size', 'fused_rnn']

# Gates per mode, as the layers count them.
MODES = {'rnn_relu': 1, 'rnn_tanh': 1, 'lstm': 4, 'gru': 3}


def flat_parameter_size(mode, num_layers, input_size, state_size, bidirectional,
                        projection_size):
    """How many values the flat parameter vector of such an operator holds."""
    layout = flat_parameter_layout(mode, num_layers, input_size, state_size, bidirectional,
                                   projection_size)
    return sum(math.prod(shape) for _, shape in layout)


def _input_size(size, mode, num_layers, state_size, bidirectional, projection_size, where):
    """The input size a flat vector of `size` values implies: it multiplies the rows of the
    first layer's i2h weights (one matrix per direction), everything else is known."""
    known = flat_parameter_size(mode, num_layers, 0, state_size, bidirectional, projection_size)
    first_rows = (2 if bidirectional else 1) * MODES[mode] * state_size
    input_size, rest = divmod(size - known, first_rows)
    if rest or input_size <= 0:
        raise ValueError(f"RNN of {where}: its flat parameter vector has {size} values, which is "
                         f"not {known} + {first_rows} * input_size for any input_size > 0 "
                         f"(mode {mode}, state_size {state_size}, num_layers {num_layers}, "
                         f"bidirectional {bidirectional}, projection_size {projection_size})")
    return input_size


def _split_parameters(flat, layout):
    """{name: array} for each (name, shape) of `layout`, cut from `flat` by one split."""
    sizes = [math.prod(shape) for _, shape in layout]
    bounds = [sum(sizes[:i + 1]) for i in range(len(sizes) - 1)]
    parts = np.split(flat.reshape(-1), bounds)
    return {name: part.reshape(shape) for (name, shape), part in zip(layout, parts)}


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
    input_size = _input_size(parameters.size, mode, num_layers, state_size, bidirectional,
                             projection_size, where)
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
    weights = _split_parameters(parameters, flat_parameter_layout(
        mode, num_layers, input_size, state_size, bidirectional, projection_size))
    keep = None if sequence_length is None else \
        split_steps(step_keep_masks(sequence_length, length, data), 0)
    cell = _Cell(mode, state_size, projection_size, clip)
    begin_states = [split_steps(state, 0) for state in states]  # per layer and direction
    final_states = [[] for _ in states]
    x = data
    for i in range(num_layers):
        outputs = []
        for j, d in enumerate('lr'[:directions]):
            begin = [state[i * directions + j] for state in begin_states]
            out, last = cell.unroll(x, weights, f'{d}{i}_', begin, keep, reverse=d == 'r')
            outputs.append(out)
            for collected, state in zip(final_states, last):
                collected.append(state)
        x = outputs[0] if directions == 1 else np.concatenate(outputs, axis=2)
        if dropout and i < num_layers - 1:
            x = npx.dropout(x, p=dropout)  # the identity outside training
    if sequence_length is not None:
        x = npx.sequence_mask(x, sequence_length=sequence_length, use_sequence_length=True,
                              axis=0)
    return x, [np.stack(collected, axis=0) for collected in final_states]


class _Cell:
    """One layer's time loop in one direction, for one mode."""

    def __init__(self, mode, state_size, projection_size, clip):
        self.mode = mode
        self.rows = MODES[mode] * state_size
        self.projection_size = projection_size
        self.clip = clip

    def unroll(self, x, weights, prefix, states, keep, reverse):
        """Returns (outputs (T, N, size), final states). The inputs of all steps are projected
        by one product; with `keep` (one (N, 1) mask per step), the states of a finished
        sequence stop changing."""
        rows = self.rows
        i2h_steps = split_steps(npx.fully_connected(x, weights[prefix + 'i2h_weight'],
                                                    weights[prefix + 'i2h_bias'],
                                                    num_hidden=rows, flatten=False), 0)
        h2h_weight, h2h_bias = weights[prefix + 'h2h_weight'], weights[prefix + 'h2h_bias']
        h2r_weight = weights[prefix + 'h2r_weight'] if self.projection_size else None
        length = x.shape[0]
        outputs = [None] * length
        for t in (reversed(range(length)) if reverse else range(length)):
            h2h = npx.fully_connected(states[0], h2h_weight, h2h_bias, num_hidden=rows)
            next_states = self._step(i2h_steps[t], h2h, states, h2r_weight)
            states = next_states if keep is None else keep_valid(keep[t], next_states, states)
            outputs[t] = states[0]
        return np.stack(outputs, axis=0), states

    def _step(self, i2h, h2h, states, h2r_weight):
        if self.mode == 'lstm':
            clip = None if self.clip is None else self._clip_cell_state
            next_h, next_c = lstm_step(i2h, h2h, states[1], clip_cell_state=clip)
            if h2r_weight is not None:
                next_h = npx.fully_connected(next_h, h2r_weight, None,
                                             num_hidden=self.projection_size, no_bias=True)
            return [next_h, next_c]
        if self.mode == 'gru':
            return [gru_step(i2h, h2h, states[0])]
        return [rnn_step(i2h, h2h, self.mode[len('rnn_'):])]

    def _clip_cell_state(self, cell_state):
        low, high, nan_to_low = self.clip
        clipped = np.clip(cell_state, low, high)
        if nan_to_low:  # cuDNN's NaN-free clip: NaN becomes the lower bound
            clipped = np.where(np.isnan(cell_state), np.full_like(clipped, low), clipped)
        return clipped
