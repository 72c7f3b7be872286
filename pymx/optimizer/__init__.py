"""Optimizers (MXNet's `mx.optimizer`)."""
from .optimizer import (SGD, NAG, AdaGrad, Adam, AdamW, Optimizer, RMSProp, Updater, create,
                        get_updater, register)

__all__ = ['Optimizer', 'SGD', 'NAG', 'Adam', 'AdamW', 'RMSProp', 'AdaGrad', 'Updater', 'create',
           'register', 'get_updater']
