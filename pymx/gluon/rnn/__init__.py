"""Recurrent layers and cells (MXNet's `gluon.rnn`)."""
from .rnn_cell import *  # noqa: F401,F403
from .rnn_cell import __all__ as _cell_all
from .rnn_layer import *  # noqa: F401,F403
from .rnn_layer import __all__ as _layer_all
from .variational_dropout_cell import VariationalDropoutCell

__all__ = _cell_all + _layer_all + ['VariationalDropoutCell']
