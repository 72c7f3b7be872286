"""MXNet's gluon.contrib.nn layers. Most of them moved into gluon.nn, where pymx implements
them; here they keep their contrib names, so MXNet code that imports them from contrib runs:
Concurrent and HybridConcurrent are nn.Concatenate and nn.HybridConcatenate under their contrib
names, Identity, SyncBatchNorm and PixelShuffle1D/2D/3D are gluon.nn's classes themselves
(the same parameters, so checkpoints load either way).

Deliberate differences from MXNet 2.x: SparseEmbedding is not provided (pymx has no row_sparse
storage; nn.Embedding is the dense equivalent). The concatenation axis of Concurrent and
HybridConcurrent is also readable as `axis`, as in MXNet.
"""
from ...nn import (Concatenate, HybridConcatenate, Identity, PixelShuffle1D, PixelShuffle2D,
                   PixelShuffle3D, SyncBatchNorm)

__all__ = ['Concurrent', 'HybridConcurrent', 'Identity', 'SyncBatchNorm', 'PixelShuffle1D',
           'PixelShuffle2D', 'PixelShuffle3D']


class Concurrent(Concatenate):
    """Feeds its input to every child block and concatenates their outputs along `axis`
    (default -1)."""

    @property
    def axis(self):
        return self._axis


class HybridConcurrent(HybridConcatenate):
    """Feeds its input to every (hybridizable) child block and concatenates their outputs along
    `axis` (default -1)."""

    @property
    def axis(self):
        return self._axis
