"""FTRL-Proximal (McMahan et al., "Ad Click Prediction: a View from the Trenches", KDD 2013)."""
from .. import numpy as np
from .optimizer import Optimizer, _zeros_like, register

__all__ = ['Ftrl']


@register
class Ftrl(Optimizer):
    """FTRL-Proximal with L1 strength `lamda1` and L2 strength wd.

        g = clip(rescale_grad * grad, clip_gradient)
        z += g - (sqrt(n + g^2) - sqrt(n)) / learning_rate * w
        n += g^2
        w = -sign(z) * max(|z| - lamda1, 0) / ((beta + sqrt(n)) / learning_rate + wd)

    State: (z, n).
    """

    def __init__(self, learning_rate=0.1, lamda1=0.01, beta=1.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.lamda1 = lamda1
        self.beta = beta

    def create_state(self, index, weight):
        return _zeros_like(weight), _zeros_like(weight)

    def unfused_step(self, index, weight, grad, state):
        z, n = state
        lr = self._get_lr(index)
        g = self._preprocessed_grad(grad)
        sqrt_n = np.sqrt(n)
        n[:] = n + np.square(g)
        sqrt_n_next = np.sqrt(n)
        z[:] = z + g - (sqrt_n_next - sqrt_n) / lr * weight
        shrunk = np.sign(z) * np.maximum(np.abs(z) - self.lamda1, 0.0)
        weight[:] = -shrunk / ((self.beta + sqrt_n_next) / lr + self._get_wd(index))
