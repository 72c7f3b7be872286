"""Optimizers (MXNet's `mx.optimizer`), registered by lower-cased name for create() and Trainer.

The rules in optimizer.py each run one fused native update op per parameter; the others, one
file each, compose np ops on the weight's device (so they run wherever np does). All share the
Optimizer base: lr schedulers, lr_mult / wd_mult, rescale_grad, clip_gradient, multi_precision
master copies for float16 / bfloat16 weights, and states saved with Trainer.save_states.
"""
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
from .lbsgd import LBSGD
from .nadam import Nadam
from .sgld import SGLD
from .signum import Signum

__all__ = ['Optimizer', 'SGD', 'NAG', 'Adam', 'AdamW', 'RMSProp', 'AdaGrad', 'AdaDelta',
           'Adamax', 'Nadam', 'FTML', 'Ftrl', 'Signum', 'LAMB', 'LARS', 'LBSGD', 'AdaBelief', 'SGLD',
           'DCASGD', 'Updater', 'create', 'register', 'get_updater']
