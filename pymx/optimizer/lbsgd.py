"""LBSGD, large-batch SGD (MXNet 1.9.1's optimizer): a large batch emulated by accumulating the
gradients of batch_scale small ones, with a learning-rate warmup or LARS scaling."""
import math

from .. import numpy as np
from .optimizer import SGD, _zeros_like, register

__all__ = ['LBSGD']


@register
class LBSGD(SGD):
    """SGD over large batches of batch_scale small ones, with momentum and weight decay.

    Each update adds the gradient to an accumulator; the weight moves only on every
    batch_scale-th update n (counted from begin_epoch * updates_per_epoch), with the mean of
    the accumulated gradients g and the learning rate lr * mult:

        g = clip(rescale_grad * g, clip_gradient) + wd * w
        mom = momentum * mom - lr * mult * g                 (w -= lr * mult * g without
        w += mom                                              momentum)

    With N = warmup_epochs * updates_per_epoch and B = batch_scale, mult is B once n >= N,
    1 when N <= 1, and otherwise grows from 1 to B by warmup_strategy:
        'linear' 1 + (B - 1) * n / N,  'power2' 1 + (B - 1) * (n / N)^2,
        'sqrt'   1 + (B - 1) * sqrt(n / N),
        'lars'   sqrt(|w|^2 / (|g|^2 + wd * |w|^2 + 1e-18)) clipped to [0.01, 100], with g the
                 mean gradient before rescale_grad (this case ignores N).
    num_epochs is accepted for compatibility and unused.

    State: (mom or None, the accumulated gradient). Unlike MXNet, an unknown warmup_strategy
    raises ValueError (MXNet silently uses mult 1), and an lr_scheduler sees the update count
    including the current update, as for every other rule (MXNet's LBSGD reads it before).
    """

    _WARMUP_STRATEGIES = ('linear', 'power2', 'sqrt', 'lars')

    def __init__(self, learning_rate=0.01, momentum=0.0, multi_precision=False,
                 warmup_strategy='linear', warmup_epochs=5, batch_scale=1, updates_per_epoch=32,
                 begin_epoch=0, num_epochs=60, **kwargs):
        super().__init__(learning_rate=learning_rate, momentum=momentum,
                         multi_precision=multi_precision, **kwargs)
        if warmup_strategy not in self._WARMUP_STRATEGIES:
            raise ValueError(f"LBSGD: warmup_strategy must be one of {self._WARMUP_STRATEGIES}, "
                             f"got {warmup_strategy!r}")
        if not isinstance(batch_scale, int) or batch_scale < 1:
            raise ValueError(f"LBSGD: batch_scale must be a positive integer (the number of "
                             f"small batches in a large one), got {batch_scale!r}")
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = warmup_epochs
        self.batch_scale = batch_scale
        self.updates_per_epoch = updates_per_epoch
        self.begin_epoch = begin_epoch
        self.num_epochs = num_epochs

    def create_state(self, index, weight):
        return super().create_state(index, weight), _zeros_like(weight)

    def _warmup_multiplier(self, small_batches):
        warmup = self.warmup_epochs * self.updates_per_epoch
        largest = float(self.batch_scale)
        if small_batches >= warmup:
            return largest
        if warmup <= 1:
            return 1.0
        progress = small_batches / warmup
        if self.warmup_strategy == 'linear':
            return 1.0 + (largest - 1) * progress
        if self.warmup_strategy == 'power2':
            return 1.0 + (largest - 1) * progress * progress
        return 1.0 + (largest - 1) * math.sqrt(progress)

    @staticmethod
    def _lars(weight, grad, wd):
        """The layer's factor as a 0-d array on the weight's device (no host sync)."""
        weight_sq = np.sum(np.square(weight.astype('float32', copy=False)))
        grad_sq = np.sum(np.square(grad.astype('float32', copy=False)))
        return np.clip(np.sqrt(weight_sq / (grad_sq + wd * weight_sq + 1e-18)), 0.01, 100.0)

    def step(self, index, weight, grad, state):
        momentum, accumulated = state
        accumulated[:] = accumulated + grad
        small_batches = (self.begin_epoch * self.updates_per_epoch +
                         self._index_update_count[index] - self.begin_num_update)
        if small_batches % self.batch_scale:
            return  # the large batch is not complete: the weight stays
        mean_grad = accumulated / self.batch_scale
        accumulated[:] = 0
        wd = self._get_wd(index)
        if self.warmup_strategy == 'lars':
            multiplier = self._lars(weight, mean_grad, wd)
        else:
            multiplier = self._warmup_multiplier(small_batches)
        lr = self._get_lr(index) * multiplier
        g = self._preprocessed_grad(mean_grad, weight, wd)
        if momentum is None:
            weight[:] = weight - lr * g
            return
        momentum[:] = self.momentum * momentum - lr * g
        weight[:] = weight + momentum
