"""AdaDelta (Zeiler, arXiv:1212.5701)."""
from .. import numpy as np
from .optimizer import Optimizer, _zeros_like, register

__all__ = ['AdaDelta']


@register
class AdaDelta(Optimizer):
    """AdaDelta: per coordinate, the step is scaled by the ratio of the running RMS of past
    steps to the running RMS of gradients.

        g = clip(rescale_grad * grad, clip_gradient) + wd * w
        acc_g = rho * acc_g + (1 - rho) * g^2
        delta = sqrt(acc_delta + epsilon) / sqrt(acc_g + epsilon) * g
        acc_delta = rho * acc_delta + (1 - rho) * delta^2
        w -= learning_rate * delta

    State: (acc_g, acc_delta).
    """

    def __init__(self, learning_rate=1.0, rho=0.9, epsilon=1e-6, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.rho = rho
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return _zeros_like(weight), _zeros_like(weight)

    def unfused_step(self, index, weight, grad, state):
        acc_g, acc_delta = state
        g = self._preprocessed_grad(grad, weight, self._get_wd(index))
        acc_g[:] = self.rho * acc_g + (1.0 - self.rho) * np.square(g)
        delta = np.sqrt(acc_delta + self.epsilon) / np.sqrt(acc_g + self.epsilon) * g
        acc_delta[:] = self.rho * acc_delta + (1.0 - self.rho) * np.square(delta)
        weight[:] = weight - self._get_lr(index) * delta
