"""Evaluation metrics. They run on the host: labels and predictions (pymx arrays on any device,
or numpy arrays) are copied with asnumpy() and reduced with numpy.

Deliberate differences from MXNet 2.x:
- CustomMetric's feval receives NumPy arrays (MXNet passes mx.np arrays), so `np(feval)` and
  `CustomMetric(feval)` are the same metric.
- MeanPairwiseDistance takes |label - pred|^p, so odd p gives the p-norm distance (MXNet raises
  negative differences to the power p).
- Invalid arguments and inputs raise ValueError naming the values instead of failing asserts.
"""
import math

import numpy as _onp

__all__ = ['EvalMetric', 'Accuracy', 'TopKAccuracy', 'CrossEntropy', 'MAE', 'MSE', 'RMSE', 'F1',
           'Fbeta', 'BinaryAccuracy', 'MCC', 'PCC', 'Perplexity', 'PearsonCorrelation',
           'NegativeLogLikelihood', 'MeanPairwiseDistance', 'MeanCosineSimilarity', 'Loss',
           'CustomMetric', 'CompositeEvalMetric', 'create', 'np', 'register', 'alias',
           'check_label_shapes']


def _host(array):
    return array.asnumpy() if hasattr(array, 'asnumpy') else _onp.asarray(array)


def check_label_shapes(labels, preds, wrap=False, shape=False):
    """Checks that labels and preds have the same length (or shape when `shape`); with `wrap`,
    single arrays are wrapped into lists. Returns (labels, preds)."""
    if not shape:
        label_shape, pred_shape = len(labels), len(preds)
    else:
        label_shape, pred_shape = labels.shape, preds.shape
    if label_shape != pred_shape:
        raise ValueError(f"Shape of labels {label_shape} does not match shape of predictions "
                         f"{pred_shape}")
    if wrap:
        if not isinstance(labels, (list, tuple)):
            labels = [labels]
        if not isinstance(preds, (list, tuple)):
            preds = [preds]
    return labels, preds


def _pairs(labels, preds):
    if not isinstance(labels, (list, tuple)):
        labels = [labels]
    if not isinstance(preds, (list, tuple)):
        preds = [preds]
    check_label_shapes(labels, preds)
    return [(_host(label), _host(pred)) for label, pred in zip(labels, preds)]


class EvalMetric:
    """Base class: accumulates `sum_metric` over `num_inst` instances."""

    def __init__(self, name, output_names=None, label_names=None):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self.reset()

    def __str__(self):
        return f'EvalMetric: {dict(self.get_name_value())}'

    def update(self, labels, preds):
        raise NotImplementedError(f"{type(self).__name__} must implement update")

    def update_dict(self, label, pred):
        """Updates from {name: array} dicts, using output_names / label_names when set."""
        preds = [pred[n] for n in self.output_names] if self.output_names else list(pred.values())
        labels = [label[n] for n in self.label_names] if self.label_names else \
            list(label.values())
        self.update(labels, preds)

    def reset(self):
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self):
        """(name, value); value is nan before any update."""
        if self.num_inst == 0:
            return self.name, float('nan')
        return self.name, self.sum_metric / self.num_inst

    def get_name_value(self):
        name, value = self.get()
        if not isinstance(name, list):
            name, value = [name], [value]
        return list(zip(name, value))


class Accuracy(EvalMetric):
    """Fraction of correct predictions. Predictions whose shape differs from the label's are
    turned into classes by argmax over `axis`."""

    def __init__(self, axis=1, name='accuracy', output_names=None, label_names=None):
        self.axis = axis
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            if pred.shape != label.shape:
                pred = pred.argmax(axis=self.axis)
            pred = pred.astype(_onp.int32).reshape(-1)
            label = label.astype(_onp.int32).reshape(-1)
            check_label_shapes(label, pred, shape=True)
            self.sum_metric += float((pred == label).sum())
            self.num_inst += len(pred)


class TopKAccuracy(EvalMetric):
    """Fraction of samples whose label is among the `top_k` highest-scoring classes."""

    def __init__(self, top_k=1, name='top_k_accuracy', output_names=None, label_names=None):
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self.top_k = top_k
        super().__init__(f'{name}_{top_k}', output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            if pred.ndim > 2:
                raise ValueError(f"TopKAccuracy: predictions must be 1-D or 2-D, got shape "
                                 f"{pred.shape}")
            label = label.astype(_onp.int64).reshape(-1)
            if len(label) != len(pred):
                raise ValueError(f"TopKAccuracy: {len(label)} labels for predictions of shape "
                                 f"{pred.shape}")
            if pred.ndim == 1:
                correct = (pred.astype(_onp.int64) == label).sum()
            else:
                k = min(self.top_k, pred.shape[1])
                top = _onp.argpartition(pred, -k, axis=1)[:, -k:]
                correct = (top == label[:, None]).any(axis=1).sum()
            self.sum_metric += float(correct)
            self.num_inst += len(label)


class _Regression(EvalMetric):
    """Per-sample mean of an error over the non-batch axes, averaged over samples."""

    def _error(self, diff):
        raise NotImplementedError

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            if label.ndim == 1:
                label = label.reshape(-1, 1)
            if pred.ndim == 1:
                pred = pred.reshape(-1, 1)
            # as MXNet, the other axes broadcast ((N,) labels against (N, k) predictions), but
            # two batch sizes would broadcast into a silently wrong error
            if label.shape[0] != pred.shape[0] or label.ndim != pred.ndim:
                raise ValueError(f"{type(self).__name__}: labels of shape {label.shape} do not "
                                 f"match predictions of shape {pred.shape}")
            num = label.shape[0]
            diff = label.astype(_onp.float64) - pred.astype(_onp.float64)
            self.sum_metric += float(self._error(diff).reshape(num, -1).mean(axis=-1).sum())
            self.num_inst += num


class MAE(_Regression):
    """Mean absolute error."""

    def __init__(self, name='mae', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    def _error(self, diff):
        return _onp.abs(diff)


class MSE(_Regression):
    """Mean squared error."""

    def __init__(self, name='mse', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    def _error(self, diff):
        return diff * diff


class RMSE(MSE):
    """Root of the mean squared error."""

    def __init__(self, name='rmse', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    def get(self):
        if self.num_inst == 0:
            return self.name, float('nan')
        return self.name, math.sqrt(self.sum_metric / self.num_inst)


def _predict_with_threshold(pred, threshold):
    """pred > threshold; an array threshold holds one value per class (pred's last axis)."""
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
        return pred > threshold
    if hasattr(threshold, 'shape'):
        threshold = _host(threshold)
        if threshold.shape[-1] != pred.shape[-1]:
            raise ValueError(f"threshold has {threshold.shape[-1]} values for predictions with "
                             f"{pred.shape[-1]} classes (shape {pred.shape})")
        return pred > threshold
    raise ValueError(f"threshold must be a number or an array, got {type(threshold).__name__}")


class _ClassificationStats:
    """True/false positive/negative counts per class, accumulated over updates; the sufficient
    statistics of F1, Fbeta and MCC.

    class_type 'binary': labels are 0/1; predictions are positive-class probabilities with the
    label's shape, or (..., 2) scores whose column 1 is the positive probability; positive
    where > threshold. 'multiclass': predictions are (..., classes) scores, the class is their
    argmax. 'multilabel': predictions and 0/1 labels are (..., classes), positive where
    > threshold.
    """

    CLASS_TYPES = ('binary', 'multiclass', 'multilabel')

    def __init__(self, class_type='binary', threshold=0.5, beta=1):
        if class_type not in self.CLASS_TYPES:
            raise ValueError(f"class_type must be one of {list(self.CLASS_TYPES)}, got "
                             f"{class_type!r}")
        self.class_type = class_type
        self.threshold = threshold
        self.beta = beta
        self.reset_stats()

    def reset_stats(self):
        self.num_classes = None
        self.true_positives = self.false_positives = None
        self.true_negatives = self.false_negatives = None

    def _set(self, num_classes):
        if self.num_classes is None:
            self.num_classes = num_classes
            self.true_positives = _onp.zeros(num_classes)
            self.false_positives = _onp.zeros(num_classes)
            self.true_negatives = _onp.zeros(num_classes)
            self.false_negatives = _onp.zeros(num_classes)
        elif self.num_classes != num_classes:
            raise ValueError(f"The number of classes changed from {self.num_classes} to "
                             f"{num_classes}")

    def update_stats(self, label, pred):
        label = label.astype(_onp.int64)
        if self.class_type == 'binary':
            if label.size and (label.max() > 1 or label.min() < 0):
                raise ValueError(f"Binary classification needs labels 0 or 1, got labels "
                                 f"{sorted(set(_onp.unique(label).tolist()))}")
            self._set(1)
            if pred.shape != label.shape:
                if pred.shape[-1] != 2:
                    raise ValueError(f"The shape of prediction {pred.shape} is wrong for binary "
                                     f"classification with labels of shape {label.shape}")
                pred = pred.reshape(-1, 2)[:, 1]
            pred_label = _predict_with_threshold(pred, self.threshold).reshape(-1)
            label = label.reshape(-1)
        elif self.class_type == 'multiclass':
            num_classes = pred.shape[-1]
            if label.size and label.max() >= num_classes:
                raise ValueError(f"Label {label.max()} is out of range for predictions with "
                                 f"{num_classes} classes")
            self._set(num_classes)
            pred_label = _onp.eye(num_classes, dtype=_onp.int64)[
                pred.reshape(-1, num_classes).argmax(axis=-1)]
            label = _onp.eye(num_classes, dtype=_onp.int64)[label.reshape(-1)]
        else:
            num_classes = pred.shape[-1]
            if pred.shape != label.shape:
                raise ValueError(f"Multilabel classification needs labels of the prediction's "
                                 f"shape {pred.shape}, got {label.shape}")
            self._set(num_classes)
            pred_label = _predict_with_threshold(pred, self.threshold).reshape(-1, num_classes)
            label = label.reshape(-1, num_classes)
        check_label_shapes(label, pred_label, shape=True)
        pred_true, label_true = pred_label == 1, label == 1
        self.true_positives += (pred_true & label_true).sum(0)
        self.false_positives += (pred_true & ~label_true).sum(0)
        self.false_negatives += (~pred_true & label_true).sum(0)
        self.true_negatives += (~pred_true & ~label_true).sum(0)

    @property
    def total_examples(self):
        if self.num_classes is None:
            return 0
        return int(self.true_positives[0] + self.false_positives[0] + self.true_negatives[0] +
                   self.false_negatives[0])

    def fscore(self):
        """Per-class F-beta score."""
        precision = self.true_positives / _onp.maximum(
            self.true_positives + self.false_positives, 1e-12)
        recall = self.true_positives / _onp.maximum(
            self.true_positives + self.false_negatives, 1e-12)
        beta2 = self.beta ** 2
        return (1 + beta2) * precision * recall / _onp.maximum(beta2 * precision + recall, 1e-12)

    def micro_fscore(self):
        """F-beta score of the counts pooled over classes."""
        tp, fp, fn = (self.true_positives.sum(), self.false_positives.sum(),
                      self.false_negatives.sum())
        precision = tp / max(tp + fp, 1e-12)
        recall = tp / max(tp + fn, 1e-12)
        if precision + recall == 0:
            return 0.0
        beta2 = self.beta ** 2
        return (1 + beta2) * precision * recall / (beta2 * precision + recall)

    def binary_matthewscc(self):
        """Matthews correlation coefficient; zero factors of the denominator count as 1."""
        if not self.total_examples:
            return 0.0
        tp, fp = float(self.true_positives[0]), float(self.false_positives[0])
        tn, fn = float(self.true_negatives[0]), float(self.false_negatives[0])
        denominator = 1.0
        for term in (tp + fp, tp + fn, tn + fp, tn + fn):
            if term != 0:
                denominator *= term
        return (tp * tn - fp * fn) / math.sqrt(denominator)


class F1(EvalMetric):
    """F1 score: 2 * precision * recall / (precision + recall), from counts accumulated over
    all updates.

    class_type: 'binary', 'multiclass' or 'multilabel' (see _ClassificationStats for the
    prediction formats). average: 'micro' pools the counts of all classes; 'macro' averages
    the per-class scores; None returns the per-class scores as an array. For binary
    classification (one class) 'micro' and 'macro' agree.
    """

    def __init__(self, name='f1', output_names=None, label_names=None, class_type='binary',
                 threshold=0.5, average='micro'):
        self._check_average(average)
        self.average = average
        self.metrics = _ClassificationStats(class_type=class_type, threshold=threshold)
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _check_average(average):
        if average not in ('micro', 'macro', None):
            raise ValueError(f"average must be 'micro', 'macro' or None, got {average!r}")

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            self.metrics.update_stats(label, pred)
        total = self.metrics.total_examples
        if self.average == 'micro':
            self.sum_metric = self.metrics.micro_fscore() * total
        elif self.average == 'macro':
            self.sum_metric = float(self.metrics.fscore().mean()) * total
        else:
            self.sum_metric = self.metrics.fscore() * total
        self.num_inst = total

    def reset(self):
        super().reset()
        self.metrics.reset_stats()


class Fbeta(F1):
    """F-beta score: (1 + beta^2) * precision * recall / (beta^2 * precision + recall); beta > 1
    weighs recall more. Arguments as F1."""

    def __init__(self, name='fbeta', output_names=None, label_names=None, class_type='binary',
                 beta=1, threshold=0.5, average='micro'):
        super().__init__(name, output_names, label_names, class_type, threshold, average)
        self.metrics = _ClassificationStats(class_type=class_type, threshold=threshold, beta=beta)


class BinaryAccuracy(EvalMetric):
    """Accuracy of binary or multilabel predictions: positive where pred > threshold (a number,
    or an array of one threshold per class), compared elementwise with 0/1 labels."""

    def __init__(self, name='binary_accuracy', output_names=None, label_names=None,
                 threshold=0.5):
        self.threshold = threshold
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            pred_label = _predict_with_threshold(pred, self.threshold).astype(_onp.int64)
            pred_label, label = pred_label.reshape(-1), label.astype(_onp.int64).reshape(-1)
            check_label_shapes(label, pred_label, shape=True)
            self.sum_metric += float((pred_label == label).sum())
            self.num_inst += len(pred_label)


class MCC(EvalMetric):
    """Matthews correlation coefficient of a binary classification, from counts accumulated
    over all updates: (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)), zero factors of the
    denominator replaced by 1. Predictions as F1's binary ones (threshold 0.5)."""

    def __init__(self, name='mcc', output_names=None, label_names=None):
        self._metrics = _ClassificationStats()
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            self._metrics.update_stats(label, pred)
        self.sum_metric = self._metrics.binary_matthewscc() * self._metrics.total_examples
        self.num_inst = self._metrics.total_examples

    def reset(self):
        super().reset()
        self._metrics.reset_stats()


class PCC(EvalMetric):
    """Multiclass Matthews correlation (Gorodkin's R_K) from a K x K confusion matrix
    accumulated over all updates; equal to MCC for two classes. The matrix grows when a larger
    class index appears. Predictions are class indices (label's shape) or (N, K) scores."""

    def __init__(self, name='pcc', output_names=None, label_names=None):
        self.k = 2
        super().__init__(name, output_names, label_names)

    def reset(self):
        self.num_inst = 0
        self.lcm = _onp.zeros((self.k, self.k))

    def _grow(self, increment):
        self.lcm = _onp.pad(self.lcm, ((0, increment), (0, increment)), 'constant')
        self.k += increment

    @staticmethod
    def _calc_mcc(cmat):
        n = cmat.sum()
        x, y = cmat.sum(axis=1), cmat.sum(axis=0)
        cov_xx, cov_yy = _onp.sum(x * (n - x)), _onp.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float('nan')
        cov_xy = _onp.sum(_onp.diag(cmat) * n - x * y)
        return float(cov_xy / math.sqrt(cov_xx * cov_yy))

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            label = label.astype(_onp.int64).reshape(-1)
            if pred.shape != label.shape and pred.ndim == 2:
                pred = pred.argmax(axis=1)
            pred = pred.astype(_onp.int64).reshape(-1)
            check_label_shapes(label, pred, shape=True)
            if label.size and min(label.min(), pred.min()) < 0:
                raise ValueError(f"PCC needs class indices >= 0, got labels "
                                 f"{sorted(set(label.tolist()))} and predictions "
                                 f"{sorted(set(pred.tolist()))}")
            largest = int(max(pred.max(), label.max())) if label.size else 0
            if largest >= self.k:
                self._grow(largest + 1 - self.k)
            _onp.add.at(self.lcm, (pred, label), 1)
        self.num_inst += 1

    @property
    def sum_metric(self):
        return self._calc_mcc(self.lcm) * self.num_inst


class CrossEntropy(EvalMetric):
    """Mean of -log(max(p[label], eps)) over the labels. `pred` holds probabilities along `axis`
    (logits with from_logits=True, turned into probabilities by softmax); `label` holds one
    class index per prediction. Labels equal to ignore_label are not counted."""

    def __init__(self, eps=1e-12, ignore_label=None, axis=-1, from_logits=False,
                 name='cross-entropy', output_names=None, label_names=None):
        self.eps = eps
        self.ignore_label = ignore_label
        self.axis = axis
        self.from_logits = from_logits
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            pred = _onp.moveaxis(pred.astype(_onp.float64), self.axis, -1)
            num_classes = pred.shape[-1]
            if label.size * num_classes != pred.size:
                raise ValueError(f"Labels of shape {label.shape} do not match predictions of "
                                 f"shape {pred.shape} with classes along axis {self.axis}")
            pred, label = pred.reshape(-1, num_classes), label.reshape(-1)
            if self.from_logits:
                pred = _onp.exp(pred - pred.max(axis=-1, keepdims=True))
                pred /= pred.sum(axis=-1, keepdims=True)
            keep = _onp.ones(label.shape, bool) if self.ignore_label is None else \
                label != self.ignore_label
            label = label[keep].astype(_onp.int64)
            prob = pred[keep][_onp.arange(len(label)), label]
            self.sum_metric += float(-_onp.log(_onp.maximum(prob, self.eps)).sum())
            self.num_inst += len(label)


class Perplexity(CrossEntropy):
    """exp(cross-entropy): exp(-mean(log p[label])) over all updates. Arguments as
    CrossEntropy."""

    def __init__(self, eps=1e-12, ignore_label=None, axis=-1, from_logits=False,
                 name='perplexity', output_names=None, label_names=None):
        super().__init__(eps, ignore_label, axis, from_logits, name, output_names, label_names)

    def get(self):
        if self.num_inst == 0:
            return self.name, float('nan')
        return self.name, math.exp(self.sum_metric / self.num_inst)


class NegativeLogLikelihood(EvalMetric):
    """Mean of -log(p[label] + eps) over samples; `pred` holds (N, classes) probabilities."""

    def __init__(self, eps=1e-12, name='nll-loss', output_names=None, label_names=None):
        self.eps = eps
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            label = label.astype(_onp.int64).reshape(-1)
            if pred.shape[0] != len(label):
                raise ValueError(f"{len(label)} labels for {pred.shape[0]} predictions (shape "
                                 f"{pred.shape})")
            prob = pred.reshape(len(label), -1)[_onp.arange(len(label)), label]
            self.sum_metric += float((-_onp.log(prob + self.eps)).sum())
            self.num_inst += len(label)


class PearsonCorrelation(EvalMetric):
    """Pearson correlation between all labels and all predictions seen (flattened), accumulated
    with Welford's online mean and co-moment updates."""

    def __init__(self, name='pearsonr', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    def reset(self):
        self.num_inst = 0
        self.sum_metric = 0.0
        self._count = 0
        self._mean_label = self._mean_pred = 0.0
        self._sse_label = self._sse_pred = self._co_moment = 0.0

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            check_label_shapes(label, pred, shape=True)
            label = label.astype(_onp.float64).reshape(-1)
            pred = pred.astype(_onp.float64).reshape(-1)
            count = self._count + len(label)
            delta_label = label - self._mean_label
            delta_pred = pred - self._mean_pred
            mean_label = self._mean_label + delta_label.sum() / count
            mean_pred = self._mean_pred + delta_pred.sum() / count
            self._sse_label += float(_onp.sum(delta_label * (label - mean_label)))
            self._sse_pred += float(_onp.sum(delta_pred * (pred - mean_pred)))
            self._co_moment += float(_onp.sum(delta_label * (pred - mean_pred)))
            self._count, self._mean_label, self._mean_pred = count, mean_label, mean_pred
            self.num_inst += 1

    def get(self):
        if self.num_inst == 0 or self._sse_label * self._sse_pred == 0:
            return self.name, float('nan')  # no data, or a constant has no correlation
        return self.name, self._co_moment / math.sqrt(self._sse_label * self._sse_pred)


class MeanPairwiseDistance(EvalMetric):
    """Mean over samples of the p-norm distance (sum |label - pred|^p)^(1/p), each sample
    flattened."""

    def __init__(self, name='mpd', output_names=None, label_names=None, p=2):
        self.p = p
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            label = label.astype(_onp.float64).reshape(label.shape[0], -1)
            pred = pred.astype(_onp.float64).reshape(pred.shape[0], -1)
            distance = (_onp.abs(label - pred) ** self.p).sum(axis=-1) ** (1.0 / self.p)
            self.sum_metric += float(distance.sum())
            self.num_inst += label.shape[0]


class MeanCosineSimilarity(EvalMetric):
    """Mean cosine similarity along the last axis: label.pred / max(|label| |pred|, eps)."""

    def __init__(self, name='cos_sim', output_names=None, label_names=None, eps=1e-8):
        self.eps = eps
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            label = _onp.atleast_2d(label.astype(_onp.float64))
            pred = _onp.atleast_2d(pred.astype(_onp.float64))
            similarity = (label * pred).sum(axis=-1) / _onp.maximum(
                _onp.linalg.norm(label, axis=-1) * _onp.linalg.norm(pred, axis=-1), self.eps)
            self.sum_metric += float(similarity.sum())
            self.num_inst += similarity.size


class Loss(EvalMetric):
    """Mean of the loss values passed as predictions (labels are ignored)."""

    def __init__(self, name='loss', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    def update(self, _, preds):
        for pred in preds if isinstance(preds, (list, tuple)) else [preds]:
            pred = _host(pred)
            self.sum_metric += float(pred.sum())
            self.num_inst += pred.size


class CustomMetric(EvalMetric):
    """A metric from feval(label, pred) (NumPy arrays), called per (label, pred) pair. feval
    returns the batch's metric (counted as one instance) or a (sum_metric, num_inst) tuple.
    allow_extra_outputs: predictions may outnumber labels (e.g. RNN states); the extra ones are
    ignored."""

    def __init__(self, feval, name=None, allow_extra_outputs=False, output_names=None,
                 label_names=None):
        if not callable(feval):
            raise TypeError(f"feval must be callable, got {type(feval).__name__}")
        if name is None:
            name = feval.__name__
            if '<' in name:
                name = f'custom({name})'
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        if not isinstance(labels, (list, tuple)):
            labels = [labels]
        if not isinstance(preds, (list, tuple)):
            preds = [preds]
        if not self._allow_extra_outputs:
            check_label_shapes(labels, preds)
        for label, pred in zip(labels, preds):
            value = self._feval(_host(label), _host(pred))
            if isinstance(value, tuple):
                sum_metric, num_inst = value
                self.sum_metric += sum_metric
                self.num_inst += num_inst
            else:
                self.sum_metric += value
                self.num_inst += 1


def np(numpy_feval, name=None, allow_extra_outputs=False):
    """A CustomMetric from numpy_feval(label, pred), which receives NumPy arrays and returns the
    batch's metric."""
    return CustomMetric(numpy_feval, name, allow_extra_outputs)


class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; get() returns (names, values)."""

    def __init__(self, metrics=None, name='composite', output_names=None, label_names=None):
        self.metrics = [create(m) for m in (metrics or [])]
        super().__init__(name, output_names, label_names)

    def add(self, metric):
        self.metrics.append(create(metric))

    def get_metric(self, index):
        if not 0 <= index < len(self.metrics):
            raise ValueError(f"Metric index {index} is out of range 0 to {len(self.metrics)}")
        return self.metrics[index]

    def update(self, labels, preds):
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self):
        for metric in getattr(self, 'metrics', []):
            metric.reset()

    def get(self):
        names, values = [], []
        for metric in self.metrics:
            name, value = metric.get()
            names.extend(name if isinstance(name, list) else [name])
            values.extend(value if isinstance(value, list) else [value])
        return names, values


_METRICS = {}


def register(klass):
    """Registers a metric class under its lower-cased name, for create('f1')."""
    _METRICS[klass.__name__.lower()] = klass
    return klass


def alias(*names):
    """Registers a metric class under further names (decorator), as MXNet's 'acc' for
    Accuracy."""
    def add(klass):
        for name in names:
            _METRICS[name.lower()] = klass
        return klass
    return add


for _klass in (Accuracy, TopKAccuracy, CrossEntropy, MAE, MSE, RMSE, F1, Fbeta, BinaryAccuracy,
               MCC, PCC, Perplexity, PearsonCorrelation, NegativeLogLikelihood,
               MeanPairwiseDistance, MeanCosineSimilarity, Loss, CustomMetric,
               CompositeEvalMetric):
    register(_klass)
alias('acc')(Accuracy)
alias('top_k_accuracy', 'top_k_acc')(TopKAccuracy)
alias('ce', 'cross-entropy')(CrossEntropy)
alias('pearsonr')(PearsonCorrelation)
alias('nll_loss', 'nll-loss')(NegativeLogLikelihood)
alias('composite')(CompositeEvalMetric)


def create(metric, *args, **kwargs):
    """A metric from an instance, a registered name ('acc', 'mse', ...; *args and **kwargs go
    to its constructor), a function feval(label, pred) (a CustomMetric), or a list of those
    (a CompositeEvalMetric)."""
    if isinstance(metric, EvalMetric):
        return metric
    if isinstance(metric, (list, tuple)):
        return CompositeEvalMetric([create(m, *args, **kwargs) for m in metric])
    if isinstance(metric, str):
        klass = _METRICS.get(metric.lower())
        if klass is None:
            raise ValueError(f"Unknown metric '{metric}'. Known metrics: {sorted(_METRICS)}")
        return klass(*args, **kwargs)
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    raise TypeError(f"metric must be an EvalMetric, a name, a function or a list, got "
                    f"{type(metric).__name__}")
