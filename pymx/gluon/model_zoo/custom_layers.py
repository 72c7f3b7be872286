"""Layers the model zoo composes its networks from that pymx.gluon.nn does not offer:
HybridConcatenate (run children on one input, concatenate their outputs) and Identity.

They have MXNet 2.x's names and signatures (`gluon.nn.HybridConcatenate(axis=-1)`,
`gluon.nn.Identity()`); children register as '0', '1', ..., so parameter names match MXNet's.
"""
from ... import numpy as np
from ..block import HybridBlock
from ..nn import HybridSequential

__all__ = ['HybridConcatenate', 'Identity']


class HybridConcatenate(HybridSequential):
    """Feeds its input to every child and concatenates the children's outputs along `axis`."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        return np.concatenate([block(x) for block in self._children.values()], axis=self.axis)


class Identity(HybridBlock):
    """Returns its input unchanged (the shortcut branch of a HybridConcatenate)."""

    def forward(self, x):
        return x

    def __repr__(self):
        return 'Identity'
