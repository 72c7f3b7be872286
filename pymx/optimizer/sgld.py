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

    No state. The noise comes from pymx's random generator on the weight's device, drawn once
    per update of a parameter: the Trainer's copies of the parameter on other devices add the
    same noise, so that they stay identical.
    """

    def __init__(self, learning_rate=0.1, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self._last_noise = {}  # index -> (update count, the noise drawn for that update)

    def unfused_step(self, index, weight, grad, state):
        lr = self._get_lr(index)
        g = self._preprocessed_grad(grad, weight, self._get_wd(index))
        weight[:] = weight - lr / 2 * g + self._noise(index, weight, lr)

    def _noise(self, index, weight, lr):
        count = self._index_update_count[index]
        drawn = self._last_noise.get(index)
        if drawn is not None and drawn[0] == count:  # another device's copy of this update
            return drawn[1].to_device(weight.device)
        noise = np.random.normal(0.0, math.sqrt(lr), size=weight.shape, dtype=weight.dtype,
                                 device=weight.device)
        self._last_noise[index] = (count, noise)
        return noise

    def __getstate__(self):
        state = super().__getstate__()
        state['_last_noise'] = {}  # drawn afresh after loading; not worth a weight per file
        return state
