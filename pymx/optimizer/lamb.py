"""LAMB (You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes",
arXiv:1904.00962)."""
from .. import numpy as np
from .optimizer import Optimizer, _zeros_like, register

__all__ = ['LAMB']


@register
class LAMB(Optimizer):
    """Adam's direction, rescaled per parameter by the trust ratio |w| / |direction|.

        g = clip(rescale_grad * grad, clip_gradient)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g^2
        m_hat, v_hat = m / (1 - beta1^t), v / (1 - beta2^t)     (m, v without bias_correction)
        r = m_hat / (sqrt(v_hat) + epsilon) + wd * w
        r1 = min(max(|w|, lower_bound), upper_bound)             (bounds that are not None)
        w -= learning_rate * (r1 / |r| if r1 > 0 and |r| > 0 else 1) * r

    State: (m, v). The norms stay on the weight's device (no host round trip per parameter).
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 lower_bound=None, upper_bound=None, bias_correction=True, aggregate_num=4,
                 **kwargs):
        super().__init__(learning_rate=learning_rate, aggregate_num=aggregate_num, **kwargs)
        if lower_bound is not None and upper_bound is not None and lower_bound > upper_bound:
            raise ValueError(f"LAMB: lower_bound {lower_bound} is above upper_bound "
                             f"{upper_bound}")
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.bias_correction = bias_correction

    def create_state(self, index, weight):
        return _zeros_like(weight), _zeros_like(weight)

    def unfused_step(self, index, weight, grad, state):
        mean, var = state
        t = self._index_update_count[index]
        g = self._preprocessed_grad(grad)
        mean[:] = self.beta1 * mean + (1.0 - self.beta1) * g
        var[:] = self.beta2 * var + (1.0 - self.beta2) * np.square(g)
        if self.bias_correction:
            direction = (mean / (1.0 - self.beta1 ** t)) / \
                (np.sqrt(var / (1.0 - self.beta2 ** t)) + self.epsilon)
        else:
            direction = mean / (np.sqrt(var) + self.epsilon)
        direction = direction + self._get_wd(index) * weight
        # The norms are taken in float32: a float16 sum of squares overflows at 65504.
        weight_norm = np.linalg.norm(weight.astype('float32', copy=False))
        if self.lower_bound is not None:
            weight_norm = np.maximum(weight_norm, self.lower_bound)
        if self.upper_bound is not None:
            weight_norm = np.minimum(weight_norm, self.upper_bound)
        direction_norm = np.linalg.norm(direction.astype('float32', copy=False))
        usable = np.logical_and(weight_norm > 0, direction_norm > 0)
        # The quotient is computed for both branches; the denominator is kept off zero so that
        # the discarded branch does not raise a division warning or produce inf * 0.
        ratio = np.where(usable, weight_norm / np.where(usable, direction_norm, 1.0), 1.0)
        weight[:] = weight - self._get_lr(index) * ratio * direction
