"""Gluon: the imperative/hybrid model API (MXNet's `mxnet.gluon`)."""
from . import contrib, data, loss, metric, model_zoo, nn, rnn, utils
from .block import Block, HybridBlock
from .parameter import Constant, DeferredInitializationError, Parameter
from .symbol_block import SymbolBlock
from .trainer import Trainer

__all__ = ['Block', 'HybridBlock', 'SymbolBlock', 'Parameter', 'Constant',
           'DeferredInitializationError', 'Trainer', 'nn', 'rnn', 'loss', 'metric', 'utils',
           'data', 'model_zoo', 'contrib']
