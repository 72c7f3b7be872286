"""Signum and signSGD (Bernstein et al., "signSGD: Compressed Optimisation for Non-Convex
Problems", ICML 2018)."""
from .. import numpy as np
from .optimizer import Optimizer, _zeros_like, register

__all__ = ['Signum']


@register
class Signum(Optimizer):
    """Steps by the sign of the momentum (Signum), or of the gradient when momentum is 0
    (signSGD). wd_lh is a decoupled weight decay.

    momentum > 0:
        g = clip(rescale_grad * grad, clip_gradient) + wd * w
        mom = momentum * mom - (1 - momentum) * g
        w = (1 - learning_rate * wd_lh) * w + learning_rate * sign(mom)
    momentum == 0:
        w = (1 - learning_rate * (wd + wd_lh)) * w - learning_rate * sign(grad)

    State: mom, or None without momentum.
    """

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index, weight):
        return _zeros_like(weight) if self.momentum != 0.0 else None

    def unfused_step(self, index, weight, grad, state):
        lr, wd = self._get_lr(index), self._get_wd(index)
        if state is None:
            # sign(clip(rescale_grad * grad)) is sign(grad): no preprocessing needed.
            weight[:] = (1.0 - lr * (wd + self.wd_lh)) * weight - lr * np.sign(grad)
            return
        mom = state
        g = self._preprocessed_grad(grad, weight, wd)
        mom[:] = self.momentum * mom - (1.0 - self.momentum) * g
        weight[:] = (1.0 - lr * self.wd_lh) * weight + lr * np.sign(mom)
