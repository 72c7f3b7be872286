"""Optimizers (MXNet's `mx.optimizer`)."""
from .optimizer import (SGD, NAG, AdaGrad, Adam, AdamW, Optimizer, RMSProp, Updater, create,
                        get_updater, register)
from .adabelief import AdaBelief
from .adadelta import AdaDelta
from .adamax import Adamax
from .dcasgd import DCASGD
from .ftml import FTML
from .ftrl import Ftrl
from .lamb import LAMB
from .lars import LARS
from .nadam import Nadam
from .sgld import SGLD
from .signum import Signum

__all__ = ['Optimizer', 'SGD', 'NAG', 'Adam', 'AdamW', 'RMSProp', 'AdaGrad', 'AdaDelta',
           'Adamax', 'Nadam', 'FTML', 'Ftrl', 'Signum', 'LAMB', 'LARS', 'AdaBelief', 'SGLD',
           'DCASGD', 'Updater', 'create', 'register', 'get_updater']
