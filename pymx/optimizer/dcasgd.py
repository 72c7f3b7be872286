"""DCASGD, delay-compensated asynchronous SGD (Zheng et al., arXiv:1609.08326)."""
from .. import numpy as np
from .optimizer import Optimizer, _zeros_like, register

__all__ = ['DCASGD']


@register
class DCASGD(Optimizer):
    """SGD whose gradient is corrected for the weight's drift since the previous update by a
    diagonal approximation of the Hessian (lamda * g^2).

        g = clip(rescale_grad * grad, clip_gradient) + wd * w
        d = g + lamda * g^2 * (w - w_previous)
        mom = momentum * mom - learning_rate * d     (mom = -learning_rate * d without momentum)
        w_previous = w
        w += mom

    State: (mom or None, w_previous).
    """

    def __init__(self, learning_rate=0.1, momentum=0.0, lamda=0.04, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.lamda = lamda

    def create_state(self, index, weight):
        mom = _zeros_like(weight) if self.momentum != 0.0 else None
        return mom, weight.copy()

    def unfused_step(self, index, weight, grad, state):
        mom, previous_weight = state
        lr = self._get_lr(index)
        g = self._preprocessed_grad(grad, weight, self._get_wd(index))
        compensated = g + self.lamda * np.square(g) * (weight - previous_weight)
        previous_weight[:] = weight
        if mom is None:
            weight[:] = weight - lr * compensated
            return
        mom[:] = self.momentum * mom - lr * compensated
        weight[:] = weight + mom
