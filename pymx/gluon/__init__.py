"""Gluon: the imperative/hybrid model API (MXNet's `mxnet.gluon`)."""
from . import data, loss, metric, nn, utils
from . import model_zoo
from .block import Block, HybridBlock
from .parameter import Constant, DeferredInitializationError, Parameter
from .trainer import Trainer

__all__ = ['Block', 'HybridBlock', 'Parameter', 'Constant', 'DeferredInitializationError',
           'Trainer', 'nn', 'loss', 'metric', 'utils', 'data']
