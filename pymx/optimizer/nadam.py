"""Nadam: Adam with Nesterov momentum (Dozat, http://cs229.stanford.edu/proj2015/054_report.pdf).
"""
from .. import numpy as np
from .optimizer import Optimizer, _zeros_like, register

__all__ = ['Nadam']


@register
class Nadam(Optimizer):
    """Nadam, with the warming momentum schedule mu_t = beta1 * (1 - 0.5 * 0.96^(t * decay)).

        g = clip(rescale_grad * grad, clip_gradient) + wd * w
        m_schedule_t = mu_1 * ... * mu_t
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g^2
        m_bar = mu_{t+1} * m / (1 - m_schedule_t * mu_{t+1}) + (1 - mu_t) * g / (1 - m_schedule_t)
        w -= learning_rate * m_bar / (sqrt(v / (1 - beta2^t)) + epsilon)

    State: (m, v). m_schedule_t is a function of the parameter's update count t alone (MXNet
    keeps one running product for all parameters, which advances once per parameter per step).
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 schedule_decay=0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.schedule_decay = schedule_decay
        self._last_schedule = (0, 1.0)  # (t, m_schedule_t): parameters share their step count

    def _momentum(self, t):
        return self.beta1 * (1.0 - 0.5 * 0.96 ** (t * self.schedule_decay))

    def _m_schedule(self, t):
        last_t, product = self._last_schedule
        if last_t > t:
            last_t, product = 0, 1.0
        for step in range(last_t + 1, t + 1):
            product *= self._momentum(step)
        self._last_schedule = (t, product)
        return product

    def create_state(self, index, weight):
        return _zeros_like(weight), _zeros_like(weight)

    def unfused_step(self, index, weight, grad, state):
        mean, var = state
        t = self._index_update_count[index]
        momentum_t, momentum_next = self._momentum(t), self._momentum(t + 1)
        m_schedule = self._m_schedule(t)
        g = self._preprocessed_grad(grad, weight, self._get_wd(index))
        mean[:] = self.beta1 * mean + (1.0 - self.beta1) * g
        var[:] = self.beta2 * var + (1.0 - self.beta2) * np.square(g)
        mean_bar = momentum_next * mean / (1.0 - m_schedule * momentum_next) + \
            (1.0 - momentum_t) * g / (1.0 - m_schedule)
        var_hat = var / (1.0 - self.beta2 ** t)
        weight[:] = weight - self._get_lr(index) * mean_bar / (np.sqrt(var_hat) + self.epsilon)
