"""Contributed Gluon APIs (MXNet's ``mxnet.gluon.contrib``): the high-level training loop
``estimator``."""
from . import estimator

__all__ = ['estimator']
