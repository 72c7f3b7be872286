"""Recurrent layers RNN, LSTM and GRU: several layers, one or two directions, a whole sequence
per call.

Each layer and direction projects the inputs of all time steps with one matrix product before
its time loop; only the recurrent product and the gate arithmetic (rnn_cell's step functions)
run per step. The layers are composed of pymx.np / npx operations, so they run on every device,
autograd differentiates them and hybridize traces them (the loop unrolls into the graph).
On the CPU, a layer and direction whose steps take the fused gate arithmetic (no cell clipping,
no projection, no sequence lengths, one dtype) runs its whole time loop as one rnn_sequence
operator instead (Note [Recurrent time loop in one operator] in engine/src/ops/rnn_sequence.cc):
the same values to float rounding, one node per layer and direction instead of a few per step.
On a GPU the per-step operators stay.

Parameters are named as MXNet's fused layers name them: `{d}{i}_i2h_weight` (G*H, C_in),
`{d}{i}_h2h_weight` (G*H, H), `{d}{i}_i2h_bias`, `{d}{i}_h2h_bias` (G*H,) and, for LSTM with a
projection, `{d}{i}_h2r_weight` (P, H), where d is 'l' (forward) or 'r' (backward) and i the
layer; gates in the order i, f, g, o (LSTM) and r, z, n (GRU, reset gate applied after the
recurrent product as in cuDNN).

Note [Recurrent bias in the projection]
LSTM and Elman steps read a step's two projections only through their sum, so the recurrent
bias h2h_bias is added to the input projection's bias once (one add of G*H values) and the
per-step recurrent product has no bias: per layer and direction that saves T broadcasts of the
bias into the step's (N, G*H) product, T reductions of its gradient over the batch and T - 1
additions of those gradients (the bias was used at every step). Both biases still get the
gradient of the sum. GRU's n gate scales the recurrent projection, bias included, by the reset
gate, so there the bias stays in each step's product.

Deliberate differences from MXNet 2.x:
- the weights are separate parameters with the names above, as in MXNet 1.x's layers and in the
  cells, instead of MXNet 2.x's single flat `rnn_param` vector (which exists only to feed the
  fused cuDNN kernel); a layer's weights can be copied to or from cells one to one, and
  load_parameters reads both MXNet 2.x's `rnn_param` and MXNet 1.x's per-cell names
  (`_unfused.0.l_cell.i2h_weight`, ...) into them;
- `forward(inputs, states=None, sequence_length=None)` creates the zero begin states itself, so
  a hybridized layer keeps one graph for calls with states and one for calls without;
- with `use_sequence_length`, the outputs past each sequence's length are zero and the returned
  states are those at its last valid step (what the cuDNN kernel does; MXNet's CPU kernel has no
  sequence lengths at all);
- bad arguments raise ValueError naming the values where MXNet asserts.
"""
import functools
import itertools
import math
import re

import numpy as _onp

from ... import numpy as np
from ... import numpy_extension as npx
from ..._op import invoke
from ...ndarray import ndarray
from ..block import HybridBlock
from ..parameter import Parameter
from .rnn_cell import (begin_states, gru_step, keep_valid, lstm_step, rnn_step, split_steps,
                       step_keep_masks)

__all__ = ['RNN', 'LSTM', 'GRU']

GATES = {'rnn_relu': 1, 'rnn_tanh': 1, 'lstm': 4, 'gru': 3}  # gate blocks per mode

# MXNet 1.x saves a layer's weights as those of its internal stack of cells: `_unfused.{k}.`,
# then `l_cell.` / `r_cell.` inside a bidirectional pair; k also counts the dropout cells
# (which have no parameters) between layers.
_UNFUSED_NAME = re.compile(r'_unfused\.(\d+)\.(?:([lr])_cell\.)?(\w+)$')


def flat_parameter_layout(mode, num_layers, input_size, hidden_size, bidirectional=False,
                          projection_size=None):
    """[(name, shape)] of a recurrent layer's parameters in the order MXNet 2.x packs them into
    its one flat `rnn_param` vector (the cuDNN order): every weight, layer by layer and direction
    by direction (i2h, h2h, then h2r with a projection), then every bias likewise."""
    if mode not in GATES:
        raise ValueError(f"unknown recurrent mode {mode!r}; expected one of {sorted(GATES)}")
    rows = GATES[mode] * hidden_size
    fed_back = projection_size or hidden_size
    directions = 'lr' if bidirectional else 'l'
    weights, biases = [], []
    layer_input = input_size
    for i in range(num_layers):
        for d in directions:
            weights += [(f'{d}{i}_i2h_weight', (rows, layer_input)),
                        (f'{d}{i}_h2h_weight', (rows, fed_back))]
            if projection_size:
                weights.append((f'{d}{i}_h2r_weight', (projection_size, hidden_size)))
            biases += [(f'{d}{i}_i2h_bias', (rows,)), (f'{d}{i}_h2h_bias', (rows,))]
        layer_input = fed_back * len(directions)
    return weights + biases


def flat_parameter_size(mode, num_layers, input_size, hidden_size, bidirectional=False,
                        projection_size=None):
    """How many values the flat vector of such a layer's parameters holds."""
    return sum(math.prod(shape) for _, shape in flat_parameter_layout(
        mode, num_layers, input_size, hidden_size, bidirectional, projection_size))


def flat_input_size(size, mode, num_layers, hidden_size, bidirectional=False,
                    projection_size=None):
    """The input size a flat parameter vector of `size` values implies, or None when none
    fits: it multiplies the rows of the first layer's i2h weights (one matrix per direction);
    every other size is known."""
    known = flat_parameter_size(mode, num_layers, 0, hidden_size, bidirectional, projection_size)
    first_rows = (2 if bidirectional else 1) * GATES[mode] * hidden_size
    input_size, rest = divmod(size - known, first_rows)
    return input_size if rest == 0 and input_size > 0 else None


def split_flat_parameters(flat, layout):
    """{name: flat's part reshaped} for each (name, shape) of `layout`, in order; `flat` (a
    1-d pymx or NumPy array) must hold exactly their values. A pymx array is cut by one split,
    through which gradients reach `flat`."""
    sizes = [math.prod(shape) for _, shape in layout]
    if flat.size != sum(sizes):
        raise ValueError(f"a flat recurrent parameter vector of {flat.size} values does not match "
                         f"the layer, which has {sum(sizes)}")
    split = np.split if isinstance(flat, ndarray) else _onp.split
    parts = split(flat.reshape(-1), list(itertools.accumulate(sizes[:-1])))
    return {name: part.reshape(shape) for (name, shape), part in zip(layout, parts)}


def run_layers(x, weights, states, keep, mode, hidden_size, projection_size, num_layers,
               bidirectional, dropout, clip):
    """Runs a stack of recurrent layers over x (T, N, C): `weights` {name: array} named as
    flat_parameter_layout names them, `states` the begin states ([h], or [h, c] for LSTM, each
    (num_layers * directions, N, size)), `keep` None or one (N, 1) mask per step (with it, the
    states of a finished sequence stop changing), `dropout` the rate between layers (in
    training), `clip` None or the LSTM cell state's (min, max, NaN to min). Returns the last
    layer's outputs (T, N, directions * size) and the final states, stacked as the begin
    states."""
    directions = 'lr' if bidirectional else 'l'
    begin_states = [split_steps(state, 0) for state in states]  # per layer and direction
    final_states = [[] for _ in states]  # per state kind, one (N, size) per layer/direction
    for i in range(num_layers):
        outputs = []
        for j, d in enumerate(directions):
            begin = [state[i * len(directions) + j] for state in begin_states]
            out, last = _unroll_direction(x, weights, f'{d}{i}_', begin, keep, d == 'r', mode,
                                          hidden_size, projection_size, clip)
            outputs.append(out)
            for collected, state in zip(final_states, last):
                collected.append(state)
        x = outputs[0] if len(outputs) == 1 else np.concatenate(outputs, axis=2)
        if dropout and i < num_layers - 1:
            x = npx.dropout(x, p=dropout)
    return x, [np.stack(collected, axis=0) for collected in final_states]


def _unroll_direction(x, weights, prefix, states, keep, reverse, mode, hidden_size,
                      projection_size, clip):
    """One layer in one direction over x (T, N, C): the inputs of all steps are projected by
    one product, then each step runs the recurrent product and the gate arithmetic. Returns
    (outputs (T, N, size), final states)."""
    rows = GATES[mode] * hidden_size
    h2h_weight, h2h_bias = weights[prefix + 'h2h_weight'], weights[prefix + 'h2h_bias']
    i2h_bias = weights[prefix + 'i2h_bias']
    # See Note [Recurrent bias in the projection].
    fold_bias = mode != 'gru'
    i2h = npx.fully_connected(x, weights[prefix + 'i2h_weight'],
                              i2h_bias + h2h_bias if fold_bias else i2h_bias, num_hidden=rows,
                              flatten=False)
    if _runs_as_one_operator(i2h, h2h_weight, states, keep, projection_size, clip):
        inputs = [i2h, h2h_weight] + states + ([h2h_bias] if mode == 'gru' else [])
        results = invoke('rnn_sequence', inputs, {'mode': mode, 'reverse': reverse})
        return results[0], results[1:len(states) + 1]  # the rest: what the backward reads
    i2h_steps = split_steps(i2h, 0)
    h2r_weight = weights[prefix + 'h2r_weight'] if projection_size else None
    length = x.shape[0]
    outputs = [None] * length
    for t in (reversed(range(length)) if reverse else range(length)):
        h2h = npx.fully_connected(states[0], h2h_weight, None if fold_bias else h2h_bias,
                                  num_hidden=rows)
        next_states = _step(mode, i2h_steps[t], h2h, states, h2r_weight, projection_size, clip)
        states = next_states if keep is None else keep_valid(keep[t], next_states, states)
        outputs[t] = states[0]
    return np.stack(outputs, axis=0), states


def _runs_as_one_operator(i2h, h2h_weight, states, keep, projection_size, clip):
    """Whether the rnn_sequence operator runs the time loop: on the CPU (it has no GPU kernel),
    where each step would take the fused gate arithmetic (no sequence lengths, projection or
    cell clipping, and one dtype: the composed step promotes mixed ones)."""
    return (i2h.device.device_type != 'gpu' and keep is None and not projection_size and
            clip is None and len({a.dtype for a in [i2h, h2h_weight] + states}) == 1)


def _step(mode, i2h, h2h, states, h2r_weight, projection_size, clip):
    if mode == 'lstm':
        clip_cell_state = None if clip is None else functools.partial(_clip_cell_state, clip=clip)
        next_h, next_c = lstm_step(i2h, h2h, states[1], clip_cell_state=clip_cell_state)
        if h2r_weight is not None:
            next_h = npx.fully_connected(next_h, h2r_weight, None, num_hidden=projection_size,
                                         no_bias=True)
        return [next_h, next_c]
    if mode == 'gru':
        return [gru_step(i2h, h2h, states[0])]
    return [rnn_step(i2h, h2h, mode[len('rnn_'):])]


def _clip_cell_state(cell_state, clip):
    low, high, nan_to_low = clip
    clipped = np.clip(cell_state, low, high)
    if nan_to_low:  # NaN clips to the lower bound (cuDNN's NaN-free clip)
        clipped = np.where(np.isnan(cell_state), np.full_like(clipped, low), clipped)
    return clipped


class _RNNLayer(HybridBlock):
    """The shared implementation of RNN, LSTM and GRU."""

    def __init__(self, hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                 i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                 h2h_bias_initializer, mode, projection_size, h2r_weight_initializer,
                 lstm_state_clip_min, lstm_state_clip_max, lstm_state_clip_nan, dtype,
                 use_sequence_length):
        super().__init__()
        name = type(self).__name__
        if layout not in ('TNC', 'NTC'):
            raise ValueError(f"{name}: invalid layout {layout!r}; must be one of 'TNC' or 'NTC'")
        for arg, value in (('hidden_size', hidden_size), ('num_layers', num_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}: {arg} must be a positive int, got {value!r}")
        if not 0 <= dropout < 1:
            raise ValueError(f"{name}: dropout must be in [0, 1), got {dropout!r}")
        if projection_size is not None and (not isinstance(projection_size, int) or
                                            projection_size <= 0):
            raise ValueError(f"{name}: projection_size must be a positive int or None, got "
                             f"{projection_size!r}")
        if (lstm_state_clip_min is None) != (lstm_state_clip_max is None):
            raise ValueError(f"{name}: state_clip_min and state_clip_max must be given together, "
                             f"got {lstm_state_clip_min!r} and {lstm_state_clip_max!r}")
        if lstm_state_clip_min is not None and lstm_state_clip_min > lstm_state_clip_max:
            raise ValueError(f"{name}: state_clip_min {lstm_state_clip_min} is greater than "
                             f"state_clip_max {lstm_state_clip_max}")
        self._hidden_size = hidden_size
        self._projection_size = projection_size
        self._num_layers = num_layers
        self._mode = mode
        self._layout = layout
        self._dropout = dropout
        self._dir = 2 if bidirectional else 1
        self._input_size = input_size
        self._lstm_state_clip_min = lstm_state_clip_min
        self._lstm_state_clip_max = lstm_state_clip_max
        self._lstm_state_clip_nan = lstm_state_clip_nan
        self._dtype = dtype
        self._use_sequence_length = use_sequence_length
        self._gates = GATES[mode]

        rows = self._gates * hidden_size
        recurrent_size = projection_size or hidden_size  # the size of the state fed back
        layer_input_size = input_size
        for i in range(num_layers):
            for d in 'lr'[:self._dir]:
                self._register_param(f'{d}{i}_i2h_weight', (rows, layer_input_size),
                                     i2h_weight_initializer, dtype)
                self._register_param(f'{d}{i}_h2h_weight', (rows, recurrent_size),
                                     h2h_weight_initializer, dtype)
                self._register_param(f'{d}{i}_i2h_bias', (rows,), i2h_bias_initializer, dtype)
                self._register_param(f'{d}{i}_h2h_bias', (rows,), h2h_bias_initializer, dtype)
                if projection_size:
                    self._register_param(f'{d}{i}_h2r_weight', (projection_size, hidden_size),
                                         h2r_weight_initializer, dtype)
            layer_input_size = recurrent_size * self._dir

    def _register_param(self, name, shape, init, dtype):
        setattr(self, name, Parameter(name, shape=shape, init=init, dtype=dtype,
                                      allow_deferred_init=True))

    def __repr__(self):
        input_size = self.l0_i2h_weight.shape[1]
        s = (f'{type(self).__name__}({input_size if input_size > 0 else None} -> '
             f'{self._hidden_size}, {self._layout}')
        if self._num_layers != 1:
            s += f', num_layers={self._num_layers}'
        if self._dropout != 0:
            s += f', dropout={self._dropout}'
        if self._dir == 2:
            s += ', bidirectional'
        return s + ')'

    def _rename_loaded_parameters(self, loaded, prefix):
        """Reads the layouts MXNet saves a recurrent layer in: MXNet 2.x's flat `rnn_param`
        vector and MXNet 1.x's stack of cells (see _UNFUSED_NAME)."""
        flat = loaded.pop(prefix + 'rnn_param', None)
        if flat is not None:
            for name, value in self._split_rnn_param(flat.reshape(-1)).items():
                loaded[prefix + name] = value
        unfused = {}
        for key in loaded:
            match = _UNFUSED_NAME.match(key[len(prefix):]) if key.startswith(prefix) else None
            if match:
                unfused[key] = match
        cells = sorted({int(match.group(1)) for match in unfused.values()})
        for key, match in unfused.items():
            direction = match.group(2) or 'l'
            layer = cells.index(int(match.group(1)))
            loaded[f'{prefix}{direction}{layer}_{match.group(3)}'] = loaded.pop(key)

    def _split_rnn_param(self, flat):
        input_size = flat_input_size(flat.size, self._mode, self._num_layers, self._hidden_size,
                                     self._dir == 2, self._projection_size)
        if input_size is None or self._input_size not in (0, input_size):
            known = flat_parameter_size(self._mode, self._num_layers, 0, self._hidden_size,
                                        self._dir == 2, self._projection_size)
            first_rows = self._dir * self._gates * self._hidden_size
            raise ValueError(f"{self!r}: the flat parameter vector 'rnn_param' has {flat.size} "
                             f"values; this layer has {known} + {first_rows} * input_size"
                             + (f" with input_size {self._input_size}" if self._input_size
                                else ""))
        return split_flat_parameters(flat, flat_parameter_layout(
            self._mode, self._num_layers, input_size, self._hidden_size, self._dir == 2,
            self._projection_size))

    def cast(self, dtype):
        super().cast(dtype)
        self._dtype = dtype

    def state_info(self, batch_size=0):
        """One dict per state ({'shape', '__layout__', 'dtype'}): [h] for RNN and GRU, [h, c]
        for LSTM, each (num_layers * directions, batch_size, size)."""
        raise NotImplementedError

    def begin_state(self, batch_size=0, func=np.zeros, **kwargs):
        """The initial states: func(shape=..., device=..., dtype=...) for each state_info entry;
        kwargs (device, dtype) override the defaults (current device, the layer's dtype)."""
        return begin_states(self.state_info(batch_size), func, kwargs)

    def infer_shape(self, inputs, *args):
        for d in 'lr'[:self._dir]:
            getattr(self, f'{d}0_i2h_weight').shape = (self._gates * self._hidden_size,
                                                       inputs.shape[2])

    # ---- calls --------------------------------------------------------------------------------

    def __call__(self, inputs, states=None, sequence_length=None):
        """Runs the layer over `inputs` ((T, N, C) or (N, T, C) by layout).

        states: the begin states (an array or a list, shapes as state_info), zeros if None.
        sequence_length: (N,) valid lengths, required with use_sequence_length=True.
        Returns the outputs ((T, N, directions * size) by layout) alone when `states` is None,
        else (outputs, list of the final states).
        """
        self._check_call(inputs, states, sequence_length)
        if isinstance(states, ndarray):
            states = [states]
        args = [inputs, states, sequence_length]
        while args[-1] is None:  # a single-array call keeps the cheap hybridized path
            args.pop()
        return super().__call__(*args)

    def _check_call(self, inputs, states, sequence_length):
        name = type(self).__name__
        if not isinstance(inputs, ndarray):
            raise TypeError(f"{name}: inputs must be an ndarray, got {type(inputs).__name__}")
        if inputs.ndim != 3:
            raise ValueError(f"{name}: inputs must be 3-D (layout {self._layout}), got shape "
                             f"{inputs.shape}")
        input_size = self.l0_i2h_weight.shape[1]
        if input_size > 0 and inputs.shape[2] != input_size:
            raise ValueError(f"{name}: inputs have {inputs.shape[2]} features (shape "
                             f"{inputs.shape}) but the layer expects {input_size}")
        batch_size = inputs.shape[self._layout.find('N')]
        if states is not None:
            states = [states] if isinstance(states, ndarray) else states
            if not isinstance(states, (list, tuple)) or \
                    not all(isinstance(s, ndarray) for s in states):
                raise TypeError(f"{name}: states must be an ndarray or a list of ndarrays, got "
                                f"{type(states).__name__}")
            infos = self.state_info(batch_size)
            if len(states) != len(infos):
                raise ValueError(f"{name}: expected {len(infos)} state(s), got {len(states)}")
            for state, info in zip(states, infos):
                if state.shape != info['shape']:
                    raise ValueError(f"{name}: invalid recurrent state shape. Expecting "
                                     f"{info['shape']}, got {state.shape}.")
        if self._use_sequence_length:
            if sequence_length is None:
                raise ValueError(f"{name}: use_sequence_length=True needs sequence_length")
            if not isinstance(sequence_length, ndarray) or \
                    sequence_length.shape != (batch_size,):
                raise ValueError(f"{name}: sequence_length must be an array of shape "
                                 f"({batch_size},), got "
                                 f"{getattr(sequence_length, 'shape', sequence_length)}")
        elif sequence_length is not None:
            raise ValueError(f"{name}: sequence_length was given but the layer was built with "
                             f"use_sequence_length=False")

    def forward(self, inputs, states=None, sequence_length=None):
        skip_states = states is None
        x = np.swapaxes(inputs, 0, 1) if self._layout == 'NTC' else inputs
        length, batch_size = x.shape[:2]
        if skip_states:
            states = self.begin_state(batch_size, device=x.device, dtype=x.dtype)
        keep = None if sequence_length is None else \
            split_steps(step_keep_masks(sequence_length, length, x), 0)
        weights = {name: param.data(x.device) for name, param in self._reg_params.items()}
        clip = None if self._lstm_state_clip_min is None else \
            (self._lstm_state_clip_min, self._lstm_state_clip_max, self._lstm_state_clip_nan)
        x, final_states = run_layers(x, weights, states, keep, self._mode, self._hidden_size,
                                     self._projection_size, self._num_layers, self._dir == 2,
                                     self._dropout, clip)
        if sequence_length is not None:
            x = npx.sequence_mask(x, sequence_length=sequence_length, use_sequence_length=True,
                                  axis=0)
        if self._layout == 'NTC':
            x = np.swapaxes(x, 0, 1)
        return x if skip_states else (x, final_states)


class RNN(_RNNLayer):
    r"""Multi-layer Elman RNN: h_t = activation(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh) with
    activation 'relu' or 'tanh'.

    Arguments: hidden_size; num_layers (1); activation ('relu'); layout ('TNC' or 'NTC');
    dropout (0: the rate of the dropout applied to each layer's outputs but the last's, in
    training); bidirectional (False); i2h/h2h weight and bias initializers (biases 'zeros');
    input_size (0: inferred from the first input); dtype ('float32'); use_sequence_length
    (False: True makes forward take (N,) sequence lengths).

    Inputs: data (T, N, C) by layout; states: [h] or h, (num_layers * directions, N, H) (zeros
    if omitted); sequence_length (N,) with use_sequence_length.
    Outputs: out (T, N, directions * H) by layout; with states given, also [h_T].
    """

    def __init__(self, hidden_size, num_layers=1, activation='relu', layout='TNC', dropout=0,
                 bidirectional=False, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer='zeros', h2h_bias_initializer='zeros', input_size=0,
                 dtype='float32', use_sequence_length=False):
        if activation not in ('relu', 'tanh'):
            raise ValueError(f"RNN: activation must be 'relu' or 'tanh', got {activation!r}")
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, 'rnn_' + activation, None, None, None, None,
                         False, dtype, use_sequence_length)

    def state_info(self, batch_size=0):
        return [{'shape': (self._num_layers * self._dir, batch_size, self._hidden_size),
                 '__layout__': 'LNC', 'dtype': self._dtype}]


class LSTM(_RNNLayer):
    r"""Multi-layer LSTM (gates i, f, g, o): c_t = f * c_{t-1} + i * g, h_t = o * tanh(c_t).

    Arguments as RNN's (no activation), plus projection_size (None: with P, h_t is projected
    to r_t = W_hr h_t (P) which is fed back and output), h2r_weight_initializer, and
    state_clip_min / state_clip_max (None: clip the cell state c_t to [min, max]),
    state_clip_nan (False: with clipping, True turns NaN cell states into state_clip_min).

    Inputs: data; states: [h, c], h (num_layers * directions, N, P or H), c (..., N, H);
    sequence_length. Outputs: out (T, N, directions * (P or H)) by layout; with states given,
    also [h_T, c_T].
    """

    def __init__(self, hidden_size, num_layers=1, layout='TNC', dropout=0, bidirectional=False,
                 input_size=0, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer='zeros', h2h_bias_initializer='zeros',
                 projection_size=None, h2r_weight_initializer=None, state_clip_min=None,
                 state_clip_max=None, state_clip_nan=False, dtype='float32',
                 use_sequence_length=False):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, 'lstm', projection_size, h2r_weight_initializer,
                         state_clip_min, state_clip_max, state_clip_nan, dtype,
                         use_sequence_length)

    def state_info(self, batch_size=0):
        num_states = self._num_layers * self._dir
        h_size = self._projection_size or self._hidden_size
        return [{'shape': (num_states, batch_size, h_size), '__layout__': 'LNC',
                 'dtype': self._dtype},
                {'shape': (num_states, batch_size, self._hidden_size), '__layout__': 'LNC',
                 'dtype': self._dtype}]


class GRU(_RNNLayer):
    r"""Multi-layer GRU in cuDNN's form (gates r, z, n):
    n_t = tanh(W_in x_t + b_in + r * (W_hn h_{t-1} + b_hn)), h_t = (1 - z) * n_t + z * h_{t-1}.

    Arguments, inputs and outputs as RNN's (no activation).
    """

    def __init__(self, hidden_size, num_layers=1, layout='TNC', dropout=0, bidirectional=False,
                 input_size=0, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer='zeros', h2h_bias_initializer='zeros', dtype='float32',
                 use_sequence_length=False):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, 'gru', None, None, None, None, False, dtype,
                         use_sequence_length)

    def state_info(self, batch_size=0):
        return [{'shape': (self._num_layers * self._dir, batch_size, self._hidden_size),
                 '__layout__': 'LNC', 'dtype': self._dtype}]
