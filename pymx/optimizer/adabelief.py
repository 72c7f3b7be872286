"""AdaBelief (Zhuang et al., "AdaBelief Optimizer: Adapting Stepsizes by the Belief in Observed
Gradients", arXiv:2010.07468)."""
import math

from .. import numpy as np
from .optimizer import Optimizer, _zeros_like, register

__all__ = ['AdaBelief']


@register
class AdaBelief(Optimizer):
    """Adam whose second moment tracks the gradient's deviation from its running mean.

        g = clip(rescale_grad * grad + wd * w, clip_gradient)
        m = beta1 * m + (1 - beta1) * g
        s = beta2 * s + (1 - beta2) * (g - m)^2 + epsilon
        lr = learning_rate * sqrt(1 - beta2^t) / (1 - beta1^t)     (learning_rate without
        w -= lr * m / (sqrt(s) + epsilon)                           correct_bias)

    State: (m, s). Note that, as in MXNet, weight decay is added before clipping.
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 correct_bias=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.correct_bias = correct_bias

    def create_state(self, index, weight):
        return _zeros_like(weight), _zeros_like(weight)

    def unfused_step(self, index, weight, grad, state):
        mean, var = state
        t = self._index_update_count[index]
        lr = self._get_lr(index)
        if self.correct_bias:
            lr *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        g = grad * self.rescale_grad + self._get_wd(index) * weight
        if self._clip_bound is not None:
            g = np.clip(g, -self._clip_bound, self._clip_bound)
        mean[:] = self.beta1 * mean + (1.0 - self.beta1) * g
        var[:] = self.beta2 * var + (1.0 - self.beta2) * np.square(g - mean) + self.epsilon
        weight[:] = weight - lr * mean / (np.sqrt(var) + self.epsilon)
