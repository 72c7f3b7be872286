"""Adamax (Kingma & Ba, arXiv:1412.6980, section 7)."""
from .. import numpy as np
from .optimizer import Optimizer, _zeros_like, register

__all__ = ['Adamax']


@register
class Adamax(Optimizer):
    """Adam with the infinity norm in place of the second moment.

        g = clip(rescale_grad * grad, clip_gradient) + wd * w
        m = beta1 * m + (1 - beta1) * g
        u = maximum(beta2 * u, |g|)
        w -= learning_rate / (1 - beta1^t) * m / u

    State: (m, u).
    """

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2

    def create_state(self, index, weight):
        return _zeros_like(weight), _zeros_like(weight)

    def unfused_step(self, index, weight, grad, state):
        mean, var = state
        t = self._index_update_count[index]
        lr = self._get_lr(index) / (1.0 - self.beta1 ** t)
        g = self._preprocessed_grad(grad, weight, self._get_wd(index))
        mean[:] = self.beta1 * mean + (1.0 - self.beta1) * g
        var[:] = np.maximum(self.beta2 * var, np.abs(g))
        weight[:] = weight - lr * mean / var
