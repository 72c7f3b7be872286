"""VariationalDropoutCell (Gal & Ghahramani, 2016, https://arxiv.org/abs/1512.05287): dropout
whose masks are drawn once per sequence and reused at every time step, on a base cell's inputs,
its first state (h) and its outputs, each with its own mask.

The masks are drawn at the first step after reset() (unroll calls reset() first), as npx.dropout
of ones, so in predict mode they are ones and the cell computes its base cell. Stepping the cell
by hand, call reset() between sequences.

Deliberate differences from MXNet 2.x: bad rates and a state dropout on a BidirectionalCell raise
ValueError (MXNet asserts). The masks live in the cell across steps, which a hybridized graph
cannot replay: in a hybridized cell with a rate above 0 the trace stops and the cell runs
imperatively (with a warning), its base cell still hybridized on its own. unroll always steps
(MXNet drops merged inputs and outputs in one go; the numbers are the same).
"""
from ... import autograd
from ... import numpy as np
from ... import numpy_extension as npx
from ..._c import autograd as _c_autograd
from .rnn_cell import BidirectionalCell, ModifierCell

__all__ = ['VariationalDropoutCell']


class VariationalDropoutCell(ModifierCell):
    """Applies variational dropout to `base_cell`: drop_inputs on its inputs, drop_states on
    its first state, drop_outputs on its outputs (rates in [0, 1); 0 applies none), with masks
    fixed for the whole sequence."""

    def __init__(self, base_cell, drop_inputs=0., drop_states=0., drop_outputs=0.):
        for name, rate in (('drop_inputs', drop_inputs), ('drop_states', drop_states),
                           ('drop_outputs', drop_outputs)):
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < 1:
                raise ValueError(f"VariationalDropoutCell: {name} must be a number in [0, 1), "
                                 f"got {rate!r}")
        if drop_states and isinstance(base_cell, BidirectionalCell):
            raise ValueError("BidirectionalCell doesn't support variational state dropout. "
                             "Please add VariationalDropoutCell to the cells underneath "
                             "instead.")
        super().__init__(base_cell)
        self.drop_inputs = drop_inputs
        self.drop_states = drop_states
        self.drop_outputs = drop_outputs
        self.drop_inputs_mask = None
        self.drop_states_mask = None
        self.drop_outputs_mask = None

    def __repr__(self):
        return (f'VariationalDropoutCell(p_out={self.drop_outputs}, p_state={self.drop_states}, '
                f'p_in={self.drop_inputs}, {self.base_cell!r})')

    def reset(self):
        super().reset()
        self.drop_inputs_mask = None
        self.drop_states_mask = None
        self.drop_outputs_mask = None

    @staticmethod
    def _mask(like, rate):
        return npx.dropout(np.ones(like.shape, dtype=like.dtype, device=like.device), p=rate)

    def forward(self, inputs, states):
        if (self.drop_inputs or self.drop_states or self.drop_outputs) and \
                _c_autograd.is_tracing():
            autograd._stop_tracing("VariationalDropoutCell (its dropout masks are kept across "
                                   "time steps)")
        if self.drop_states:
            if self.drop_states_mask is None:
                self.drop_states_mask = self._mask(states[0], self.drop_states)
            states = [states[0] * self.drop_states_mask] + list(states[1:])
        if self.drop_inputs:
            if self.drop_inputs_mask is None:
                self.drop_inputs_mask = self._mask(inputs, self.drop_inputs)
            inputs = inputs * self.drop_inputs_mask
        output, next_states = self.base_cell(inputs, states)
        if self.drop_outputs:
            if self.drop_outputs_mask is None:
                self.drop_outputs_mask = self._mask(output, self.drop_outputs)
            output = output * self.drop_outputs_mask
        return output, next_states
