"""FTML, Follow the Moving Leader (Zheng & Kwok, ICML 2017)."""
from .. import numpy as np
from .optimizer import Optimizer, _zeros_like, register

__all__ = ['FTML']


@register
class FTML(Optimizer):
    """FTML.

        g = clip(rescale_grad * grad, clip_gradient) + wd * w
        v = beta2 * v + (1 - beta2) * g^2
        d_t = (1 - beta1^t) / learning_rate * (sqrt(v / (1 - beta2^t)) + epsilon)
        z = beta1 * z + (1 - beta1) * g - (d_t - beta1 * d_{t-1}) * w
        w = -z / d_t

    State: (d, v, z).
    """

    def __init__(self, learning_rate=0.0025, beta1=0.6, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return _zeros_like(weight), _zeros_like(weight), _zeros_like(weight)

    def unfused_step(self, index, weight, grad, state):
        d, v, z = state
        t = self._index_update_count[index]
        g = self._preprocessed_grad(grad, weight, self._get_wd(index))
        v[:] = self.beta2 * v + (1.0 - self.beta2) * np.square(g)
        d_next = (1.0 - self.beta1 ** t) / self._get_lr(index) * \
            (np.sqrt(v / (1.0 - self.beta2 ** t)) + self.epsilon)
        z[:] = self.beta1 * z + (1.0 - self.beta1) * g - (d_next - self.beta1 * d) * weight
        d[:] = d_next
        weight[:] = -z / d
