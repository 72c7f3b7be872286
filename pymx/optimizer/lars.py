"""LARS (You et al., "Large Batch Training of Convolutional Networks", arXiv:1708.03888)."""
from .. import numpy as np
from .optimizer import Optimizer, _zeros_like, register

__all__ = ['LARS']


@register
class LARS(Optimizer):
    """SGD with momentum whose learning rate is scaled per layer by
    lars = eta * |w| / (|rescale_grad * grad| + wd * |w| + epsilon)
    (1 when either norm is 0, and for parameters whose name ends in 'gamma', 'beta' or 'bias').

        g = clip(rescale_grad * grad, clip_gradient) + wd * w
        mom = momentum * mom - learning_rate * lars * g      (mom = -learning_rate * lars * g
        w += mom                                              without momentum)

    State: mom, or None without momentum. A parameter's name comes from param_idx2name, else
    from the Trainer's Parameter (MXNet 2.x looks at param_idx2name only). lazy_update is
    accepted for MXNet compatibility; gradients are dense, so every row is updated.
    """

    _EXCLUDED_SUFFIXES = ('gamma', 'beta', 'bias')

    def __init__(self, learning_rate=0.1, momentum=0.0, eta=0.001, epsilon=1e-8,
                 lazy_update=False, aggregate_num=1, **kwargs):
        super().__init__(learning_rate=learning_rate, aggregate_num=aggregate_num, **kwargs)
        self.momentum = momentum
        self.eta = eta
        self.epsilon = epsilon
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        return _zeros_like(weight) if self.momentum != 0.0 else None

    def _name(self, index):
        if index in self.idx2name:
            return self.idx2name[index]
        if index in self.param_dict:
            return self.param_dict[index].name
        return str(index)

    def _lars(self, index, weight, grad, wd):
        """The layer's learning-rate factor: a 0-d array on the weight's device, or 1.0."""
        if self._name(index).endswith(self._EXCLUDED_SUFFIXES):
            return 1.0
        weight_norm = np.linalg.norm(weight.astype('float32', copy=False))
        grad_norm = np.linalg.norm(grad.astype('float32', copy=False) * self.rescale_grad)
        usable = np.logical_and(weight_norm > 0, grad_norm > 0)
        lars = self.eta * weight_norm / (grad_norm + wd * weight_norm + self.epsilon)
        return np.where(usable, lars, 1.0)

    def unfused_step(self, index, weight, grad, state):
        wd = self._get_wd(index)
        lr = self._get_lr(index) * self._lars(index, weight, grad, wd)
        g = self._preprocessed_grad(grad, weight, wd)
        if state is None:
            weight[:] = weight - lr * g
            return
        state[:] = self.momentum * state - lr * g
        weight[:] = weight + state
