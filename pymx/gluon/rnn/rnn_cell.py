"""Recurrent cells: one time step per call, `unroll` over a whole sequence.

A cell maps (inputs (N, C), states) to (output, new states); `state_info` describes its states
and `begin_state` creates them. `unroll(length, inputs, begin_state, layout, merge_outputs,
valid_length)` runs a cell over a sequence given as one (T, N, C) / (N, T, C) array or as a list
of (N, C) arrays. Parameter names and shapes are MXNet 2.x's (`i2h_weight` (G*H, C),
`h2h_weight` (G*H, H), `i2h_bias`, `h2h_bias`; gates i, f, g, o for LSTM and r, z, n for GRU).

Deliberate differences from MXNet 2.x:
- with `valid_length`, `unroll` keeps each sequence's states unchanged past its length instead of
  picking the last valid state afterwards (sequence_last): the results are the same, and a
  sequence of length 0 returns its begin state;
- `begin_state` creates states on the current device (MXNet: cpu()) unless `device` is given;
  `unroll` creates them on the device and with the dtype of the inputs;
- bad arguments raise ValueError / TypeError naming the values where MXNet asserts;
- the cells take a `dtype` argument for their parameters; LSTMPCell and
  dynamic_unroll are not provided.
"""
from ... import numpy as np
from ... import numpy_extension as npx
from ..._op import invoke
from ...device import current_device
from ...ndarray import ndarray
from ..block import Block, HybridBlock
from ..parameter import Parameter

__all__ = ['RecurrentCell', 'HybridRecurrentCell', 'RNNCell', 'LSTMCell', 'GRUCell',
           'SequentialRNNCell', 'HybridSequentialRNNCell', 'DropoutCell', 'ModifierCell',
           'ZoneoutCell', 'ResidualCell', 'BidirectionalCell']

_LAYOUTS = ('TNC', 'NTC')
_ACTIVATIONS = ('tanh', 'relu', 'sigmoid', 'softrelu', 'softsign')


def _check_layout(layout, what):
    if layout not in _LAYOUTS:
        raise ValueError(f"{what}: invalid layout {layout!r}; must be one of 'TNC' or 'NTC'")


def _check_activation(activation, what):
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"{what}: unknown activation {activation!r}; expected one of "
                             f"{', '.join(_ACTIVATIONS)} or a callable")
    elif not callable(activation):
        raise TypeError(f"{what}: activation must be a name or a callable, got "
                        f"{type(activation).__name__}")


def _apply_activation(x, activation):
    if activation == 'tanh':
        return np.tanh(x)
    if activation == 'sigmoid':
        return npx.sigmoid(x)
    if activation == 'relu':
        return npx.relu(x)
    if isinstance(activation, str):
        return npx.activation(x, act_type=activation)
    return activation(x)


# ---- the gate arithmetic of one step, shared with the fused layers (rnn_layer.py) -------------
# i2h and h2h are the input and recurrent projections of the step, biases included.

def rnn_step(i2h, h2h, activation):
    """Elman step: h = activation(i2h + h2h)."""
    return _apply_activation(i2h + h2h, activation)


def _default_gates(activation, recurrent_activation, *arrays):
    """Whether the fused gate operators (lstm_gates, gru_gates) compute a step: the activations
    are theirs, and the arrays share one dtype (the composed step promotes mixed ones, as amp's
    float16 projections with float32 states give)."""
    return (isinstance(activation, str) and activation == 'tanh' and
            isinstance(recurrent_activation, str) and recurrent_activation == 'sigmoid' and
            len({a.dtype for a in arrays}) == 1)


def lstm_step(i2h, h2h, prev_c, activation='tanh', recurrent_activation='sigmoid',
              clip_cell_state=None):
    """LSTM step with gates in MXNet's order i, f, g, o. Returns (h, c) before any projection;
    clip_cell_state, if given, maps the new cell state before h is computed from it.
    With the default activations, no clipping and one dtype, one lstm_gates operator computes
    the step."""
    if clip_cell_state is None and _default_gates(activation, recurrent_activation, i2h, h2h,
                                                  prev_c):
        next_h, next_c, _ = invoke('lstm_gates', [i2h, h2h, prev_c])  # and the saved gates
        return next_h, next_c
    in_gate, forget_gate, in_transform, out_gate = np.split(i2h + h2h, 4, axis=-1)
    in_gate = _apply_activation(in_gate, recurrent_activation)
    forget_gate = _apply_activation(forget_gate, recurrent_activation)
    in_transform = _apply_activation(in_transform, activation)
    out_gate = _apply_activation(out_gate, recurrent_activation)
    next_c = forget_gate * prev_c + in_gate * in_transform
    if clip_cell_state is not None:
        next_c = clip_cell_state(next_c)
    return out_gate * _apply_activation(next_c, activation), next_c


def gru_step(i2h, h2h, prev_h, activation='tanh', recurrent_activation='sigmoid'):
    """GRU step with gates in MXNet's order r, z, n; the reset gate scales the recurrent
    projection after the matrix product (MXNet's and cuDNN's variant):
    n = act(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h.
    With the default activations and one dtype, one gru_gates operator computes the step."""
    if _default_gates(activation, recurrent_activation, i2h, h2h, prev_h):
        return invoke('gru_gates', [i2h, h2h, prev_h])[0]  # [1]: the saved gates
    i2h_r, i2h_z, i2h_n = np.split(i2h, 3, axis=-1)
    h2h_r, h2h_z, h2h_n = np.split(h2h, 3, axis=-1)
    reset_gate = _apply_activation(i2h_r + h2h_r, recurrent_activation)
    update_gate = _apply_activation(i2h_z + h2h_z, recurrent_activation)
    candidate = _apply_activation(i2h_n + reset_gate * h2h_n, activation)
    return candidate + update_gate * (prev_h - candidate)


def step_keep_masks(valid_length, length, like):
    """(length, N, 1) booleans: True where step t is inside sequence n (t < valid_length[n])."""
    steps = np.arange(length, dtype='float32', device=like.device).reshape(length, 1, 1)
    return steps < valid_length.astype('float32').reshape(1, -1, 1)


def keep_valid(keep, new_states, old_states):
    """States of the sequences still running from `new_states`, the others' from `old_states`
    (keep: (N, 1) booleans)."""
    return [np.where(keep.reshape(keep.shape + (1,) * (new.ndim - 2)), new, old)
            for new, old in zip(new_states, old_states)]


# ---- sequences ---------------------------------------------------------------------------------

def split_steps(inputs, time_axis):
    """The steps of a sequence as a list. One split, rather than an index per step: the
    backward pass of an index writes a gradient of the whole sequence per step."""
    return [np.squeeze(step, axis=time_axis)
            for step in np.split(inputs, inputs.shape[time_axis], axis=time_axis)]


def _format_sequence(length, inputs, layout, merge):
    """Returns (inputs as one array if merge, as a list of steps if not merge, unchanged if
    merge is None; the time axis of `layout`; the batch size)."""
    _check_layout(layout, 'unroll')
    axis = layout.find('T')
    if isinstance(inputs, ndarray):
        if inputs.ndim < 3:
            raise ValueError(f"unroll: inputs must have a batch, a time and a feature axis "
                             f"(layout {layout}), got shape {inputs.shape}")
        if length is not None and inputs.shape[axis] != length:
            raise ValueError(f"unroll: length is {length} but the inputs (layout {layout}) "
                             f"have {inputs.shape[axis]} steps (shape {inputs.shape})")
        batch_size = inputs.shape[layout.find('N')]
        if merge is False:
            inputs = split_steps(inputs, axis)
    elif isinstance(inputs, (list, tuple)) and inputs and \
            all(isinstance(x, ndarray) for x in inputs):
        if length is not None and len(inputs) != length:
            raise ValueError(f"unroll: length is {length} but {len(inputs)} input steps were "
                             f"given")
        batch_size = inputs[0].shape[0]
        if merge is True:
            inputs = np.stack(inputs, axis=axis)
    else:
        raise TypeError(f"unroll: inputs must be an ndarray or a non-empty list of ndarrays, "
                        f"got {type(inputs).__name__}")
    return inputs, axis, batch_size


def _mask_sequence_variable_length(data, length, valid_length, time_axis, merge):
    """Zeroes the steps past each sequence's valid length."""
    if not isinstance(data, ndarray):
        data = np.stack(data, axis=time_axis)
    outputs = npx.sequence_mask(data, sequence_length=valid_length, use_sequence_length=True,
                                axis=time_axis)
    return outputs if merge else split_steps(outputs, time_axis)


def _reverse_sequences(sequences, valid_length=None):
    """Reverses a list of steps; with valid_length, each sequence is reversed within its own
    length and its padding stays in place."""
    if valid_length is None:
        return list(reversed(sequences))
    stacked = np.stack(sequences, axis=0)
    length, batch_size = stacked.shape[:2]
    device = stacked.device
    steps = np.arange(length, dtype='int64', device=device).reshape(length, 1)
    lengths = valid_length.astype('int64').reshape(1, batch_size)
    source_step = np.where(steps < lengths, lengths - 1 - steps, steps)
    rows = source_step * batch_size + np.arange(batch_size, dtype='int64', device=device)
    flat = stacked.reshape((length * batch_size,) + stacked.shape[2:])
    reversed_flat = np.take(flat, rows.reshape(-1), axis=0)
    return split_steps(reversed_flat.reshape(stacked.shape), 0)


def _cells_state_info(cells, batch_size):
    return sum((cell.state_info(batch_size) for cell in cells), [])


def _cells_begin_state(cells, **kwargs):
    return sum((cell.begin_state(**kwargs) for cell in cells), [])


def _get_begin_state(cell, begin_state, inputs, batch_size):
    if begin_state is not None:
        return list(begin_state)
    first = inputs if isinstance(inputs, ndarray) else inputs[0]
    return cell.begin_state(batch_size=batch_size, device=first.device, dtype=first.dtype)


def _check_states(cell, states, batch_size):
    """Checks a step's states against the cell's state_info."""
    if isinstance(states, ndarray) or not isinstance(states, (list, tuple)):
        raise TypeError(f"{type(cell).__name__}: states must be a list of ndarrays, got "
                        f"{type(states).__name__}")
    infos = cell.state_info(batch_size)
    if len(states) != len(infos):
        raise ValueError(f"{type(cell).__name__}: expected {len(infos)} state(s), got "
                         f"{len(states)}")
    for state, info in zip(states, infos):
        if state.shape != info['shape']:
            raise ValueError(f"{type(cell).__name__}: invalid recurrent state shape. Expecting "
                             f"{info['shape']}, got {state.shape}.")


def begin_states(state_info, func, overrides):
    """func(shape=..., device=..., dtype=...) for each state_info entry, `overrides` (device,
    dtype) replacing the defaults (the current device, the entry's dtype or float32)."""
    states = []
    for info in state_info:
        info = dict(info, **overrides)
        states.append(func(shape=info['shape'], device=info.get('device', current_device()),
                           dtype=info.get('dtype', 'float32')))
    return states


# ---- base classes ------------------------------------------------------------------------------

class RecurrentCell(Block):
    """Base class of the recurrent cells. Subclasses implement `state_info` and
    `forward(inputs, states) -> (output, new_states)`."""

    def __init__(self):
        super().__init__()
        self._modified = False  # wrapped by a ModifierCell: use the modifier instead

    def reset(self):
        """Clears per-sequence state (ZoneoutCell's previous output); `unroll` calls it."""
        for cell in self._children.values():
            cell.reset()

    def state_info(self, batch_size=0):
        """A list with one dict per state: {'shape': ..., '__layout__': ...}."""
        raise NotImplementedError(f"{type(self).__name__} must implement state_info")

    def _check_not_modified(self):
        if self._modified:
            raise RuntimeError(f"After applying modifier cells (e.g. ZoneoutCell) the base cell "
                               f"{type(self).__name__} cannot be called directly. Call the "
                               f"modifier cell instead.")

    def begin_state(self, batch_size=0, func=np.zeros, **kwargs):
        """The initial states: func(shape=..., device=..., dtype=...) for each state_info entry.

        kwargs (device, dtype) override the defaults (current device, the cell's dtype)."""
        self._check_not_modified()
        return begin_states(self.state_info(batch_size), func, kwargs)

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None,
               valid_length=None):
        """Runs the cell over `length` steps.

        inputs: one array with layout `layout` ('NTC' or 'TNC') or a list of `length` (N, C)
        arrays. begin_state: the initial states (default zeros). merge_outputs: True returns one
        array with layout `layout`, False a list of steps, None whichever is at hand.
        valid_length: (N,) lengths; the outputs past them are zero and the returned states are
        those at each sequence's last valid step. Returns (outputs, states).
        """
        self.reset()
        inputs, axis, batch_size = _format_sequence(length, inputs, layout, False)
        states = _get_begin_state(self, begin_state, inputs, batch_size)
        keep = None if valid_length is None else step_keep_masks(valid_length, length, inputs[0])
        outputs = []
        for t in range(length):
            output, next_states = self(inputs[t], states)
            states = next_states if keep is None else keep_valid(keep[t], next_states, states)
            outputs.append(output)
        if valid_length is not None:
            outputs = _mask_sequence_variable_length(outputs, length, valid_length, axis, True)
        outputs, _, _ = _format_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def forward(self, inputs, states):
        raise NotImplementedError(f"{type(self).__name__} must implement forward")


class HybridRecurrentCell(RecurrentCell, HybridBlock):
    """A recurrent cell that can be hybridized (its step uses pymx.np / npx operations only)."""


class _GatedCell(HybridRecurrentCell):
    """RNNCell, LSTMCell and GRUCell: i2h_weight (G*H, C), h2h_weight (G*H, H) and biases."""

    _num_gates = 1

    def __init__(self, hidden_size, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer='zeros', h2h_bias_initializer='zeros', input_size=0,
                 activation='tanh', recurrent_activation='sigmoid', dtype='float32'):
        super().__init__()
        name = type(self).__name__
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive int, got {hidden_size!r}")
        _check_activation(activation, name)
        _check_activation(recurrent_activation, name)
        self._hidden_size = hidden_size
        self._input_size = input_size
        self._activation = activation
        self._recurrent_activation = recurrent_activation
        rows = self._num_gates * hidden_size
        self.i2h_weight = Parameter('i2h_weight', shape=(rows, input_size), dtype=dtype,
                                    init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = Parameter('h2h_weight', shape=(rows, hidden_size), dtype=dtype,
                                    init=h2h_weight_initializer, allow_deferred_init=True)
        self.i2h_bias = Parameter('i2h_bias', shape=(rows,), dtype=dtype,
                                  init=i2h_bias_initializer, allow_deferred_init=True)
        self.h2h_bias = Parameter('h2h_bias', shape=(rows,), dtype=dtype,
                                  init=h2h_bias_initializer, allow_deferred_init=True)

    def state_info(self, batch_size=0):
        info = {'shape': (batch_size, self._hidden_size), '__layout__': 'NC',
                'dtype': self.i2h_weight.dtype}
        return [dict(info) for _ in range(self._num_states)]

    def infer_shape(self, inputs, *args):
        self.i2h_weight.shape = (self._num_gates * self._hidden_size, inputs.shape[-1])

    def _projections(self, inputs, states):
        """(i2h, h2h) of one step, after checking its arguments."""
        name = type(self).__name__
        if not isinstance(inputs, ndarray) or inputs.ndim != 2:
            raise ValueError(f"{name}: inputs must be a 2-D (batch_size, input_size) array, got "
                             f"{getattr(inputs, 'shape', type(inputs).__name__)}")
        if inputs.shape[1] != self.i2h_weight.shape[1]:
            raise ValueError(f"{name}: inputs have {inputs.shape[1]} features but the cell "
                             f"expects {self.i2h_weight.shape[1]} (input_size)")
        _check_states(self, states, inputs.shape[0])
        device = inputs.device
        rows = self._num_gates * self._hidden_size
        i2h = npx.fully_connected(inputs, self.i2h_weight.data(device),
                                  self.i2h_bias.data(device), num_hidden=rows)
        h2h = npx.fully_connected(states[0], self.h2h_weight.data(device),
                                  self.h2h_bias.data(device), num_hidden=rows)
        return i2h, h2h

    def __repr__(self):
        shape = self.i2h_weight.shape
        return (f'{type(self).__name__}({shape[1] if shape[1] > 0 else None} -> '
                f'{self._hidden_size})')


class RNNCell(_GatedCell):
    """Elman cell: h' = activation(W_ih x + b_ih + W_hh h + b_hh). States: [h] (N, H)."""

    _num_states = 1

    def __init__(self, hidden_size, activation='tanh', i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer='zeros',
                 h2h_bias_initializer='zeros', input_size=0, dtype='float32'):
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, activation,
                         'sigmoid', dtype)

    def forward(self, inputs, states):
        i2h, h2h = self._projections(inputs, states)
        output = rnn_step(i2h, h2h, self._activation)
        return output, [output]

    def __repr__(self):
        return super().__repr__()[:-1] + f', {self._activation})'


class LSTMCell(_GatedCell):
    """LSTM cell (gates i, f, g, o): c' = f * c + i * g, h' = o * activation(c').
    States: [h, c], each (N, H)."""

    _num_gates = 4
    _num_states = 2

    def forward(self, inputs, states):
        i2h, h2h = self._projections(inputs, states)
        next_h, next_c = lstm_step(i2h, h2h, states[1], self._activation,
                                   self._recurrent_activation)
        return next_h, [next_h, next_c]


class GRUCell(_GatedCell):
    """GRU cell in cuDNN's form (gates r, z, n; the reset gate applied after the recurrent
    matrix product): n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h.
    States: [h] (N, H)."""

    _num_gates = 3
    _num_states = 1

    def forward(self, inputs, states):
        i2h, h2h = self._projections(inputs, states)
        next_h = gru_step(i2h, h2h, states[0], self._activation, self._recurrent_activation)
        return next_h, [next_h]


# ---- containers --------------------------------------------------------------------------------

class _SequentialCellMixin:
    """add / step / unroll shared by SequentialRNNCell and HybridSequentialRNNCell."""

    def add(self, cell):
        """Appends a cell to the stack (registered as child '0', '1', ...)."""
        self.register_child(cell)

    def state_info(self, batch_size=0):
        return _cells_state_info(self._children.values(), batch_size)

    def begin_state(self, **kwargs):
        self._check_not_modified()
        return _cells_begin_state(self._children.values(), **kwargs)

    def forward(self, inputs, states):
        """One step through every cell; `states` is the concatenation of the cells' states."""
        next_states = []
        position = 0
        for cell in self._children.values():
            if isinstance(cell, BidirectionalCell):
                raise ValueError(f"{type(self).__name__}: a BidirectionalCell cannot be "
                                 f"stepped; use unroll")
            count = len(cell.state_info())
            inputs, cell_states = cell(inputs, states[position:position + count])
            position += count
            next_states.extend(cell_states)
        return inputs, next_states

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None,
               valid_length=None):
        self.reset()
        inputs, _, batch_size = _format_sequence(length, inputs, layout, None)
        begin_state = _get_begin_state(self, begin_state, inputs, batch_size)
        position = 0
        next_states = []
        cells = list(self._children.values())
        for i, cell in enumerate(cells):
            count = len(cell.state_info())
            inputs, states = cell.unroll(
                length, inputs, begin_state=begin_state[position:position + count],
                layout=layout, merge_outputs=None if i < len(cells) - 1 else merge_outputs,
                valid_length=valid_length)
            position += count
            next_states.extend(states)
        return inputs, next_states

    def __getitem__(self, i):
        return list(self._children.values())[i]

    def __len__(self):
        return len(self._children)


class SequentialRNNCell(_SequentialCellMixin, RecurrentCell):
    """A stack of cells: each cell's output is the next cell's input."""


class HybridSequentialRNNCell(_SequentialCellMixin, HybridRecurrentCell):
    """A stack of hybridizable cells: each cell's output is the next cell's input."""


class DropoutCell(HybridRecurrentCell):
    """Dropout on the inputs (rate, axes as npx.dropout); no states. Identity in predict mode."""

    def __init__(self, rate, axes=()):
        super().__init__()
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < 1:
            raise ValueError(f"DropoutCell: rate must be a number in [0, 1), got {rate!r}")
        self._rate = rate
        self._axes = tuple(axes)

    def __repr__(self):
        return f'DropoutCell(rate={self._rate}, axes={self._axes})'

    def state_info(self, batch_size=0):
        return []

    def forward(self, inputs, states):
        if self._rate > 0:
            inputs = npx.dropout(inputs, p=self._rate, axes=self._axes)
        return inputs, states

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None,
               valid_length=None):
        self.reset()
        inputs, _, _ = _format_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, ndarray):  # the whole sequence at once
            return self.forward(inputs, list(begin_state) if begin_state else [])
        return super().unroll(length, inputs, begin_state=begin_state, layout=layout,
                              merge_outputs=merge_outputs)


# ---- modifiers ---------------------------------------------------------------------------------

class ModifierCell(HybridRecurrentCell):
    """Base class of the cells that wrap a base cell (registered as child 'base_cell') and
    modify it. The base cell must not be used directly any more."""

    def __init__(self, base_cell):
        if not isinstance(base_cell, RecurrentCell):
            raise TypeError(f"{type(self).__name__}: base_cell must be a recurrent cell, got "
                            f"{type(base_cell).__name__}")
        if base_cell._modified:
            raise ValueError(f"Cell {type(base_cell).__name__} is already modified. One cell "
                             f"cannot be modified twice")
        super().__init__()
        base_cell._modified = True
        self.base_cell = base_cell

    @property
    def params(self):
        return self.base_cell.params

    def state_info(self, batch_size=0):
        return self.base_cell.state_info(batch_size)

    def begin_state(self, batch_size=0, func=np.zeros, **kwargs):
        self._check_not_modified()
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(batch_size=batch_size, func=func, **kwargs)
        finally:
            self.base_cell._modified = True

    def __repr__(self):
        return f'{type(self).__name__}({self.base_cell!r})'


class ZoneoutCell(ModifierCell):
    """Zoneout: each output and state element keeps its previous value with probability
    zoneout_outputs / zoneout_states in train mode (Krueger et al., 2016)."""

    def __init__(self, base_cell, zoneout_outputs=0., zoneout_states=0.):
        if isinstance(base_cell, BidirectionalCell):
            raise ValueError("BidirectionalCell doesn't support zoneout since it doesn't "
                             "support step. Please add ZoneoutCell to the cells underneath "
                             "instead.")
        for name, rate in (('zoneout_outputs', zoneout_outputs),
                           ('zoneout_states', zoneout_states)):
            if not 0 <= rate < 1:
                raise ValueError(f"ZoneoutCell: {name} must be in [0, 1), got {rate!r}")
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self._prev_output = None

    def __repr__(self):
        return (f'ZoneoutCell(p_out={self.zoneout_outputs}, p_state={self.zoneout_states}, '
                f'{self.base_cell!r})')

    def reset(self):
        super().reset()
        self._prev_output = None

    def forward(self, inputs, states):
        next_output, next_states = self.base_cell(inputs, states)

        def zoneout(p, new, old):
            # dropout of ones is 0 (keep the old value) with probability p, in train mode only
            keep_new = npx.dropout(np.ones(new.shape, dtype=new.dtype, device=new.device), p=p)
            return np.where(keep_new, new, old)

        prev_output = self._prev_output
        if prev_output is None:
            prev_output = np.zeros(next_output.shape, dtype=next_output.dtype,
                                   device=next_output.device)
        output = (zoneout(self.zoneout_outputs, next_output, prev_output)
                  if self.zoneout_outputs else next_output)
        if self.zoneout_states:
            next_states = [zoneout(self.zoneout_states, new, old)
                           for new, old in zip(next_states, states)]
        self._prev_output = output
        return output, next_states


class ResidualCell(ModifierCell):
    """Adds the input to the base cell's output (Wu et al., 2016)."""

    def forward(self, inputs, states):
        output, states = self.base_cell(inputs, states)
        return output + inputs, states

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None,
               valid_length=None):
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs, begin_state=begin_state,
                                                    layout=layout, merge_outputs=merge_outputs,
                                                    valid_length=valid_length)
        finally:
            self.base_cell._modified = True
        merge_outputs = isinstance(outputs, ndarray) if merge_outputs is None else merge_outputs
        inputs, axis, _ = _format_sequence(length, inputs, layout, merge_outputs)
        if valid_length is not None:  # the padded steps stay zero
            inputs = _mask_sequence_variable_length(inputs, length, valid_length, axis,
                                                    merge_outputs)
        if merge_outputs:
            return outputs + inputs, states
        return [o + i for o, i in zip(outputs, inputs)], states


class BidirectionalCell(HybridRecurrentCell):
    """Runs l_cell forward and r_cell backward over the sequence and concatenates their outputs
    on the feature axis. Can only be unrolled. States: l_cell's then r_cell's."""

    def __init__(self, l_cell, r_cell):
        super().__init__()
        self.l_cell = l_cell
        self.r_cell = r_cell

    def __call__(self, inputs, states):
        raise NotImplementedError("Bidirectional cannot be stepped. Please use unroll")

    def __repr__(self):
        return f'BidirectionalCell(forward={self.l_cell!r}, backward={self.r_cell!r})'

    def state_info(self, batch_size=0):
        return _cells_state_info([self.l_cell, self.r_cell], batch_size)

    def begin_state(self, **kwargs):
        self._check_not_modified()
        return _cells_begin_state([self.l_cell, self.r_cell], **kwargs)

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None,
               valid_length=None):
        self.reset()
        inputs, axis, batch_size = _format_sequence(length, inputs, layout, False)
        reversed_inputs = _reverse_sequences(inputs, valid_length)
        states = _get_begin_state(self, begin_state, inputs, batch_size)
        num_l_states = len(self.l_cell.state_info(batch_size))
        l_outputs, l_states = self.l_cell.unroll(length, inputs, begin_state=states[:num_l_states],
                                                 layout=layout, merge_outputs=False,
                                                 valid_length=valid_length)
        r_outputs, r_states = self.r_cell.unroll(length, reversed_inputs,
                                                 begin_state=states[num_l_states:],
                                                 layout=layout, merge_outputs=False,
                                                 valid_length=valid_length)
        r_outputs = _reverse_sequences(r_outputs, valid_length)
        outputs = [np.concatenate([l_out, r_out], axis=1)
                   for l_out, r_out in zip(l_outputs, r_outputs)]
        if merge_outputs:
            outputs = np.stack(outputs, axis=axis)
        return outputs, l_states + r_states
