"""Losses. Each returns one value per sample: the loss averaged over all non-batch axes
(TripletLoss sums them, as its formula is a squared distance).

Deliberate differences from MXNet 2.x:
- SDMLLoss applies its `weight` (MXNet accepts one and ignores it).
- PoissonNLLLoss(compute_full=True) adds the Stirling term only where target > 1 and evaluates
  it at max(target, 1), so zero targets give a finite loss (MXNet multiplies a NaN by the mask).
- Invalid arguments (label_format, smoothing_parameter, a batch of one for SDMLLoss, CTCLoss's
  layouts) raise ValueError naming the value instead of failing an assert.
- CTCLoss is a composition of np ops (the forward algorithm in log space, unrolled over time)
  rather than a fused kernel: exact and differentiable on every device, but its cost grows with
  the sequence length in op launches, so it is slow for long sequences. An impossible alignment
  (a label longer than its input allows) gives a loss near 1e30 instead of inf.
"""
import math

from .. import numpy as np
from .. import numpy_extension as npx
from .block import HybridBlock

__all__ = ['Loss', 'SoftmaxCrossEntropyLoss', 'SoftmaxCELoss', 'SigmoidBinaryCrossEntropyLoss',
           'SigmoidBCELoss', 'L1Loss', 'L2Loss', 'HuberLoss', 'KLDivLoss', 'HingeLoss',
           'SquaredHingeLoss', 'LogisticLoss', 'TripletLoss', 'PoissonNLLLoss',
           'CosineEmbeddingLoss', 'SDMLLoss', 'CTCLoss']


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


class KLDivLoss(Loss):
    """Kullback-Leibler divergence label * (log(label) - log_q), summed per element and averaged
    over the non-batch axes.

    from_logits=True (default): `pred` holds log-probabilities log_q; otherwise log_q is
    log_softmax(pred) along `axis`. `label` holds probabilities with pred's shape.
    """

    def __init__(self, from_logits=True, axis=-1, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._from_logits = from_logits
        self._axis = axis

    def forward(self, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = npx.log_softmax(pred, axis=self._axis)
        label = _reshape_like(label, pred)
        # The 1e-12 keeps 0 * log(0) at 0, the limit of the divergence.
        loss = label * (np.log(label + 1e-12) - pred)
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return _batch_mean(loss, self._batch_axis)


class HingeLoss(Loss):
    """max(0, margin - pred * label), labels in {-1, 1} (the SVM loss)."""

    def __init__(self, margin=1, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._margin = margin

    def forward(self, pred, label, sample_weight=None):
        loss = npx.relu(self._margin - pred * _reshape_like(label, pred))
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return _batch_mean(loss, self._batch_axis)


class SquaredHingeLoss(Loss):
    """max(0, margin - pred * label)^2, labels in {-1, 1} (the soft-margin SVM loss)."""

    def __init__(self, margin=1, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._margin = margin

    def forward(self, pred, label, sample_weight=None):
        loss = np.square(npx.relu(self._margin - pred * _reshape_like(label, pred)))
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return _batch_mean(loss, self._batch_axis)


class LogisticLoss(Loss):
    """log(1 + exp(-pred * label)) for labels in {-1, 1} (label_format='signed'), or the same
    loss written for labels in {0, 1} (label_format='binary'). Computed in the stable form
    relu(x) - x*z + log(1 + exp(-|x|)) with z = (label + 1) / 2 or label."""

    def __init__(self, weight=None, batch_axis=0, label_format='signed'):
        super().__init__(weight, batch_axis)
        if label_format not in ('signed', 'binary'):
            raise ValueError(f"LogisticLoss: label_format must be 'signed' or 'binary', got "
                             f"{label_format!r}")
        self._label_format = label_format

    def forward(self, pred, label, sample_weight=None):
        label = _reshape_like(label, pred)
        if self._label_format == 'signed':
            label = (label + 1.0) / 2.0
        loss = npx.relu(pred) - pred * label + \
            npx.activation(-np.abs(pred), act_type='softrelu')
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return _batch_mean(loss, self._batch_axis)


class TripletLoss(Loss):
    """max(0, |positive - pred|^2 - |negative - pred|^2 + margin), the squared distances summed
    over the non-batch axes. sample_weight multiplies the per-sample loss (shape (batch,))."""

    def __init__(self, margin=1, weight=None, batch_axis=0):
        super().__init__(weight, batch_axis)
        self._margin = margin

    def forward(self, pred, positive, negative, sample_weight=None):
        positive = _reshape_like(positive, pred)
        negative = _reshape_like(negative, pred)
        distance_gap = np.square(positive - pred) - np.square(negative - pred)
        axes = tuple(i for i in range(pred.ndim) if i != self._batch_axis % pred.ndim)
        loss = npx.relu(np.sum(distance_gap, axis=axes) + self._margin)
        return _apply_weighting(loss, self._weight, sample_weight)


class PoissonNLLLoss(Loss):
    """Negative log-likelihood of `target` under Poisson(rate), without the log(target!) term.

    from_logits=True (default): `pred` is log(rate) and the loss is exp(pred) - target * pred;
    otherwise `pred` is the rate and the loss is pred - target * log(pred + epsilon).
    compute_full=True adds Stirling's approximation of log(target!),
    target*log(target) - target + 0.5*log(2*pi*target), where target > 1.
    """

    def __init__(self, weight=None, from_logits=True, batch_axis=0, compute_full=False):
        super().__init__(weight, batch_axis)
        self._from_logits = from_logits
        self._compute_full = compute_full

    def forward(self, pred, target, sample_weight=None, epsilon=1e-08):
        target = _reshape_like(target, pred)
        if self._from_logits:
            loss = np.exp(pred) - target * pred
        else:
            loss = pred - target * np.log(pred + epsilon)
        if self._compute_full:
            # Evaluated at max(target, 1) so that the discarded branch stays finite.
            safe = np.maximum(target, 1.0)
            stirling = safe * np.log(safe) - safe + 0.5 * np.log(2 * math.pi * safe)
            loss = loss + np.where(target > 1, stirling, np.zeros_like(stirling))
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return _batch_mean(loss, self._batch_axis)


class CosineEmbeddingLoss(Loss):
    """1 - cos(input1, input2) where label == 1, else clip(cos - margin, 0, 1 - margin); the
    cosine is taken along the last axis, with |x|*|y| floored at 1e-12.

    `label` holds one value (1 or -1) per pair: shape input.shape[:-1] (or any shape with as
    many elements). The loss before averaging has shape input.shape[:-1] + (1,), so a
    sample_weight of shape (N, 1) weighs each pair of a 2-D batch.
    """

    def __init__(self, weight=None, batch_axis=0, margin=0):
        super().__init__(weight, batch_axis)
        self._margin = margin

    def forward(self, input1, input2, label, sample_weight=None):
        input1 = _reshape_like(input1, input2)
        cos_sim = self._cosine_similarity(input1, input2)
        label = _reshape_like(label, cos_sim)
        loss = np.where(label == 1, 1 - cos_sim,
                        np.clip(cos_sim - self._margin, 0, 1 - self._margin))
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return _batch_mean(loss, self._batch_axis)

    @staticmethod
    def _cosine_similarity(x, y, axis=-1):
        x_norm = np.linalg.norm(x, axis=axis, keepdims=True)
        y_norm = np.linalg.norm(y, axis=axis, keepdims=True)
        x_dot_y = np.sum(x * y, axis=axis, keepdims=True)
        return x_dot_y / np.maximum(x_norm * y_norm, 1e-12)


class SDMLLoss(Loss):
    """Smoothed Deep Metric Learning loss (Bonadiman et al., arXiv:1905.12786).

    x1 and x2 are (batch, dim) batches whose rows are aligned: x1[i] and x2[i] form a positive
    pair, every other row of x2 is a negative for x1[i]. Row i of softmax(-squared distances
    between x1[i] and each x2[j]) is compared (KL divergence, averaged over j) with the smoothed
    one-hot target: 1 - smoothing_parameter at j == i, smoothing_parameter / (batch - 1)
    elsewhere. Returns one loss per row of x1.
    """

    def __init__(self, smoothing_parameter=0.3, weight=1., batch_axis=0):
        super().__init__(weight, batch_axis)
        if not 0 <= smoothing_parameter < 1:
            raise ValueError(f"SDMLLoss: smoothing_parameter must be in [0, 1), got "
                             f"{smoothing_parameter}")
        self.kl_loss = KLDivLoss(from_logits=True)
        self.smoothing_parameter = smoothing_parameter

    def _smoothed_labels(self, batch_size, like):
        gold = np.eye(batch_size, dtype=like.dtype, device=like.device)
        off_target = self.smoothing_parameter / (batch_size - 1)
        return gold * (1 - self.smoothing_parameter) + (1 - gold) * off_target

    def forward(self, x1, x2):
        if x1.ndim != 2 or x1.shape != x2.shape:
            raise ValueError(f"SDMLLoss: x1 and x2 must be (batch, dim) arrays of one shape, got "
                             f"{x1.shape} and {x2.shape}")
        batch_size = x1.shape[0]
        if batch_size < 2:
            raise ValueError(f"SDMLLoss needs a batch of at least 2 pairs (the other rows are the "
                             f"negatives), got {batch_size}")
        distances = np.sum(np.square(np.expand_dims(x1, 1) - np.expand_dims(x2, 0)), axis=2)
        log_probabilities = npx.log_softmax(-distances, axis=1)
        loss = self.kl_loss(log_probabilities, self._smoothed_labels(batch_size, distances))
        return _apply_weighting(loss, self._weight)


class CTCLoss(Loss):
    """Connectionist Temporal Classification loss (Graves et al., ICML 2006): -log of the total
    probability of all alignments of the input sequence that collapse to the label.

    layout 'NTC' or 'TNC' for `pred` (unnormalised scores over alphabet_size classes; class
    alphabet_size - 1 is the blank), label_layout 'NT' or 'TN' for `label` (class indices,
    padded with -1 when label_lengths is not given). pred_lengths and label_lengths (shape
    (batch,)) give each sequence's length when they differ. Returns one loss per sequence.

    The forward algorithm runs in log space over the label with blanks interleaved; it is
    unrolled over time, one small group of ops per step (see the module docstring).
    """

    def __init__(self, layout='NTC', label_layout='NT', weight=None):
        if layout not in ('NTC', 'TNC'):
            raise ValueError(f"CTCLoss: layout must be 'NTC' or 'TNC', got {layout!r}")
        if label_layout not in ('NT', 'TN'):
            raise ValueError(f"CTCLoss: label_layout must be 'NT' or 'TN', got "
                             f"{label_layout!r}")
        super().__init__(weight, label_layout.find('N'))
        self._layout = layout
        self._label_layout = label_layout

    def forward(self, pred, label, pred_lengths=None, label_lengths=None, sample_weight=None):
        if self._layout == 'TNC':
            pred = np.swapaxes(pred, 0, 1)
        if self._label_layout == 'TN':
            label = np.swapaxes(label, 0, 1)
        batch, steps, num_classes = pred.shape
        blank = num_classes - 1
        # Unreachable states hold a large finite negative instead of -inf, which keeps the
        # gradients of the log-sum-exp free of NaN.
        unreachable = -1e30 if pred.dtype in (np.float32, np.float64) else -1e4
        log_probs = npx.log_softmax(pred, axis=-1)
        label = label.astype('int32')
        if label_lengths is None:
            label_lengths = np.sum((label >= 0).astype('int32'), axis=1)
        label_lengths = label_lengths.astype('int32')
        positions = np.arange(label.shape[1], dtype='int32', device=label.device)
        label = np.where(positions < np.expand_dims(label_lengths, 1), label, blank)
        extended = self._with_blanks(label, blank)  # (batch, 2 * max_label + 1)
        states = extended.shape[1]
        # emissions[n, t, s] = log_probs[n, t, extended[n, s]]
        one_hot = npx.one_hot(extended, num_classes, dtype=log_probs.dtype)
        emissions = np.matmul(log_probs, np.swapaxes(one_hot, 1, 2))
        # A state may be entered from two states back unless it is a blank or repeats the label
        # before it.
        can_skip = np.concatenate(
            [np.zeros((batch, 2), dtype='bool', device=label.device),
             np.logical_and(extended[:, 2:] != blank, extended[:, 2:] != extended[:, :-2])],
            axis=1)
        state_index = np.arange(states, dtype='int32', device=label.device)
        alpha = np.where(state_index < 2, emissions[:, 0, :], unreachable)
        pad = np.full((batch, 2), unreachable, dtype=alpha.dtype, device=alpha.device)
        for t in range(1, steps):
            from_previous = np.concatenate([pad[:, :1], alpha[:, :-1]], axis=1)
            from_skip = np.where(can_skip, np.concatenate([pad, alpha[:, :-2]], axis=1),
                                 unreachable)
            stepped = self._log_sum_exp(alpha, from_previous, from_skip) + emissions[:, t, :]
            if pred_lengths is None:
                alpha = stepped
            else:
                alpha = np.where(np.expand_dims(pred_lengths > t, 1), stepped, alpha)
        last = 2 * label_lengths  # the final blank; the final label is one before it
        end_blank = npx.pick(alpha, last, axis=1)
        end_label = np.where(label_lengths > 0, npx.pick(alpha, np.maximum(last - 1, 0), axis=1),
                             unreachable)
        loss = -self._log_sum_exp(end_blank, end_label)
        return _apply_weighting(loss, self._weight, sample_weight)

    @staticmethod
    def _with_blanks(label, blank):
        """[blank, l1, blank, l2, ..., blank] per row."""
        blanks = np.full(label.shape, blank, dtype=label.dtype, device=label.device)
        interleaved = np.stack([blanks, label], axis=-1).reshape(label.shape[0], -1)
        return np.concatenate([interleaved, blanks[:, :1]], axis=1)

    @staticmethod
    def _log_sum_exp(*terms):
        largest = terms[0]
        for term in terms[1:]:
            largest = np.maximum(largest, term)
        return largest + np.log(sum(np.exp(term - largest) for term in terms))
