"""Gluon Estimator: a training loop (fit / evaluate) driven by event handlers, as MXNet's
``mxnet.gluon.contrib.estimator``."""
from .batch_processor import *     # noqa: F401,F403
from .batch_processor import __all__ as _batch_processor_all
from .estimator import *           # noqa: F401,F403
from .estimator import __all__ as _estimator_all
from .event_handler import *       # noqa: F401,F403
from .event_handler import __all__ as _event_handler_all

__all__ = _estimator_all + _batch_processor_all + _event_handler_all
