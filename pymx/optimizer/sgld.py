"""SGLD, Stochastic Gradient Langevin Dynamics (Welling & Teh, ICML 2011)."""
import math

from .. import numpy as np
from .optimizer import Optimizer, register

__all__ = ['SGLD']


@register
class SGLD(Optimizer):
    """A gradient step of half the learning rate plus Gaussian noise of variance learning_rate,
    so that the weights sample the posterior instead of converging to a mode.

        g = clip(rescale_grad * grad, clip_gradient) + wd * w
        w += -learning_rate / 2 * g + N(0, learning_rate)

    No state. The noise comes from pymx's random generator on the weight's device.
    """

    def __init__(self, learning_rate=0.1, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)

    def unfused_step(self, index, weight, grad, state):
        lr = self._get_lr(index)
        g = self._preprocessed_grad(grad, weight, self._get_wd(index))
        noise = np.random.normal(0.0, math.sqrt(lr), size=weight.shape, dtype=weight.dtype,
                                 device=weight.device)
        weight[:] = weight - lr / 2 * g + noise
