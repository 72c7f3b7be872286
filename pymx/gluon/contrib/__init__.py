"""Contributed Gluon APIs (MXNet's ``mxnet.gluon.contrib``): the high-level training loop
``estimator`` and the contributed layers ``nn``."""
from . import estimator, nn

__all__ = ['estimator', 'nn']
