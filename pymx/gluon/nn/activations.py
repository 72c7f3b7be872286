"""Activation layers: LeakyReLU, PReLU, ELU, SELU, GELU, SiLU, Swish (MXNet 2.x's gluon.nn).

Each runs one native operator (npx.leaky_relu for the ReLU family and GELU) or, for SiLU and
Swish, x * sigmoid(beta * x) from npx.sigmoid. (nn.Activation, by name, is in basic_layers.)

Differences from MXNet 2.x: LeakyReLU's alpha, PReLU's in_channels and GELU's approximation
are checked at construction and a bad value raises ValueError naming it (MXNet: an
AssertionError, a later failure, or a ValueError).
"""
from ... import initializer
from ... import numpy_extension as npx
from ..block import HybridBlock
from ..parameter import Parameter

__all__ = ['LeakyReLU', 'PReLU', 'ELU', 'SELU', 'GELU', 'SiLU', 'Swish']


class LeakyReLU(HybridBlock):
    """x if x >= 0 else alpha * x, with a fixed slope alpha >= 0."""

    def __init__(self, alpha):
        super().__init__()
        if not alpha >= 0:
            raise ValueError(f"LeakyReLU: alpha (the negative slope) must be >= 0, got {alpha}")
        self._alpha = alpha

    def forward(self, x):
        return npx.leaky_relu(x, act_type='leaky', slope=self._alpha)

    def __repr__(self):
        return f'LeakyReLU({self._alpha})'


class PReLU(HybridBlock):
    """x if x >= 0 else alpha_c * x, with learned slopes `alpha` of shape (in_channels,): one
    slope for all (in_channels=1, the default) or one per channel (axis 1 of the input)."""

    def __init__(self, alpha_initializer=initializer.Constant(0.25), in_channels=1):
        super().__init__()
        if not isinstance(in_channels, int) or in_channels < 1:
            raise ValueError(f"PReLU: in_channels must be a positive int, got {in_channels!r}")
        self._in_channels = in_channels
        self.alpha = Parameter('alpha', shape=(in_channels,), init=alpha_initializer)

    def forward(self, x):
        return npx.leaky_relu(x, gamma=self.alpha.data(x.device), act_type='prelu')

    def __repr__(self):
        return f'PReLU(in_channels={self._in_channels})'


class ELU(HybridBlock):
    """Exponential linear unit (Clevert et al., 2016): x if x > 0 else alpha * (exp(x) - 1)."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def forward(self, x):
        return npx.leaky_relu(x, act_type='elu', slope=self._alpha)

    def __repr__(self):
        return f'ELU({self._alpha})'


class SELU(HybridBlock):
    """Scaled exponential linear unit (Klambauer et al., 2017):
    1.0507 * (x if x > 0 else 1.6733 * (exp(x) - 1))."""

    def forward(self, x):
        return npx.leaky_relu(x, act_type='selu')

    def __repr__(self):
        return 'SELU()'


class GELU(HybridBlock):
    """Gaussian error linear unit (Hendrycks and Gimpel, 2016): x * Phi(x), Phi the standard
    normal CDF, computed exactly (approximation='erf') or by its tanh approximation
    0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) (approximation='tanh')."""

    _ACT_TYPES = {'erf': 'gelu', 'tanh': 'gelu_tanh'}

    def __init__(self, approximation='erf'):
        super().__init__()
        if approximation not in self._ACT_TYPES:
            raise ValueError(f"GELU: approximation must be 'erf' or 'tanh', got "
                             f"{approximation!r}")
        self._approximation = approximation

    def forward(self, x):
        return npx.leaky_relu(x, act_type=self._ACT_TYPES[self._approximation])

    def __repr__(self):
        return f'GELU(approximation={self._approximation!r})'


class SiLU(HybridBlock):
    """Sigmoid linear unit (Hendrycks and Gimpel, 2016): x * sigmoid(x)."""

    def forward(self, x):
        return x * npx.sigmoid(x)

    def __repr__(self):
        return 'SiLU()'


class Swish(HybridBlock):
    """Swish (Ramachandran et al., 2017): x * sigmoid(beta * x)."""

    def __init__(self, beta=1.0):
        super().__init__()
        self._beta = beta

    def forward(self, x):
        return x * npx.sigmoid(self._beta * x)

    def __repr__(self):
        return f'Swish(beta={self._beta})'
