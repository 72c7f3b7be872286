"""Losses. Each returns one value per sample: the loss averaged over all non-batch axes."""
from .. import numpy as np
from .. import numpy_extension as npx
from .block import HybridBlock

__all__ = ['Loss', 'SoftmaxCrossEntropyLoss', 'SoftmaxCELoss', 'SigmoidBinaryCrossEntropyLoss',
           'SigmoidBCELoss', 'L1Loss', 'L2Loss', 'HuberLoss']


def _apply_weighting(loss, weight=None, sample_weight=None):
    if sample_weight is not None:
        loss = loss * sample_weight
    if weight is not None:
        if not isinstance(weight, (int, float)):
            raise ValueError(f"weight must be a number, got {type(weight).__name__}")
        loss = loss * weight
    return loss


def _batch_mean(loss, batch_axis):
    axes = tuple(i for i in range(loss.ndim) if i != batch_axis % max(loss.ndim, 1))
    return np.mean(loss, axis=axes) if axes else loss


def _reshape_like(label, pred):
    return label if label.shape == pred.shape else label.reshape(pred.shape)


class Loss(HybridBlock):
    """Base class: `weight` scales the loss, `batch_axis` is kept, other axes are averaged."""

    def __init__(self, weight, batch_axis):
        super().__init__()
        self._weight = weight
        self._batch_axis = batch_axis

    def __repr__(self):
        return f'{self.__class__.__name__}(batch_axis={self._batch_axis}, w={self._weight})'


class SoftmaxCrossEntropyLoss(Loss):
    """-sum(label * log_softmax(pred)) along `axis`.

    sparse_label=True: `label` holds class indices (shape of pred without `axis`); otherwise a
    distribution with pred's shape. from_logits=True: `pred` is already log-probabilities.
    """

    def __init__(self, axis=-1, sparse_label=True, from_logits=False, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._axis = axis
        self._sparse_label = sparse_label
        self._from_logits = from_logits

    def forward(self, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = npx.log_softmax(pred, axis=self._axis)
        if self._sparse_label:
            loss = -npx.pick(pred, label, axis=self._axis, keepdims=True)
        else:
            label = _reshape_like(label, pred)
            loss = -np.sum(pred * label, axis=self._axis, keepdims=True)
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return _batch_mean(loss, self._batch_axis)


SoftmaxCELoss = SoftmaxCrossEntropyLoss


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy of sigmoid(pred) against labels in [0, 1].

    from_sigmoid=True: `pred` is already a probability. `pos_weight` (forward argument) scales
    the positive term. The logits form is the numerically stable
    relu(x) - x*z + log(1 + exp(-|x|)).
    """

    def __init__(self, from_sigmoid=False, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._from_sigmoid = from_sigmoid

    def forward(self, pred, label, sample_weight=None, pos_weight=None):
        label = _reshape_like(label, pred)
        if not self._from_sigmoid:
            log1p_exp = npx.activation(-np.abs(pred), act_type='softrelu')
            if pos_weight is None:
                loss = npx.relu(pred) - pred * label + log1p_exp
            else:
                log_weight = 1 + (pos_weight - 1) * label
                loss = pred - pred * label + log_weight * (log1p_exp + npx.relu(-pred))
        else:
            eps = 1e-12
            positive = np.log(pred + eps) * label
            if pos_weight is not None:
                positive = positive * pos_weight
            loss = -(positive + np.log(1.0 - pred + eps) * (1.0 - label))
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return _batch_mean(loss, self._batch_axis)


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


class L1Loss(Loss):
    """|label - pred|."""

    def __init__(self, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)

    def forward(self, pred, label, sample_weight=None):
        loss = np.abs(_reshape_like(label, pred) - pred)
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return _batch_mean(loss, self._batch_axis)


class L2Loss(Loss):
    """(label - pred)^2 / 2 (the 1/2 makes the gradient pred - label)."""

    def __init__(self, weight=1.0, batch_axis=0):
        super().__init__(weight, batch_axis)

    def forward(self, pred, label, sample_weight=None):
        loss = np.square(_reshape_like(label, pred) - pred)
        loss = _apply_weighting(loss, self._weight / 2, sample_weight)
        return _batch_mean(loss, self._batch_axis)


class HuberLoss(Loss):
    """Smooth L1: 0.5/rho * d^2 where |d| <= rho, else |d| - 0.5*rho (d = label - pred)."""

    def __init__(self, rho=1, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._rho = rho

    def forward(self, pred, label, sample_weight=None):
        diff = np.abs(_reshape_like(label, pred) - pred)
        loss = np.where(diff > self._rho, diff - 0.5 * self._rho,
                        (0.5 / self._rho) * np.square(diff))
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return _batch_mean(loss, self._batch_axis)
