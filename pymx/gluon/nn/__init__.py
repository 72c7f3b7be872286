"""Gluon layers (MXNet's `gluon.nn`)."""
from .activations import *  # noqa: F401,F403
from .activations import __all__ as _activations_all
from .basic_layers import *  # noqa: F401,F403
from .basic_layers import __all__ as _basic_all
from .conv_layers import *  # noqa: F401,F403
from .conv_layers import __all__ as _conv_all
from .sync_batch_norm import *  # noqa: F401,F403
from .sync_batch_norm import __all__ as _sync_batch_norm_all
from ..block import Block, HybridBlock  # noqa: F401
from ..symbol_block import SymbolBlock  # noqa: F401

__all__ = (_basic_all + _activations_all + _conv_all + _sync_batch_norm_all
           + ['Block', 'HybridBlock', 'SymbolBlock'])
