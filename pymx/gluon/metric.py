"""Evaluation metrics. They run on the host: labels and predictions (pymx arrays on any device,
or numpy arrays) are copied with asnumpy() and reduced with numpy."""
import math

import numpy as _onp

__all__ = ['EvalMetric', 'Accuracy', 'TopKAccuracy', 'CrossEntropy', 'MAE', 'MSE', 'RMSE', 'F1',
           'CompositeEvalMetric', 'create', 'check_label_shapes']


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
            if pred.ndim == 1:
                correct = (pred.astype(_onp.int64) == label).sum()
            else:
                k = min(self.top_k, pred.shape[1])
                top = _onp.argpartition(pred, -k, axis=1)[:, -k:]
                correct = (top == label[:, None]).any(axis=1).sum()
            self.sum_metric += float(correct)
            self.num_inst += len(label)


class CrossEntropy(EvalMetric):
    """Mean of -log(p[label]) over samples; `pred` holds probabilities (N, classes)."""

    def __init__(self, eps=1e-12, name='cross-entropy', output_names=None, label_names=None):
        self.eps = eps
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            label = label.astype(_onp.int64).reshape(-1)
            pred = pred.reshape(len(label), -1)
            prob = pred[_onp.arange(len(label)), label]
            self.sum_metric += float((-_onp.log(prob + self.eps)).sum())
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


class F1(EvalMetric):
    """Binary F1 score. Predictions are (N, 2) scores (argmax) or (N,) probabilities of the
    positive class (> threshold). average='micro' pools counts over all updates; 'macro'
    averages the F1 of each update."""

    def __init__(self, name='f1', output_names=None, label_names=None, threshold=0.5,
                 average='micro'):
        if average not in ('micro', 'macro'):
            raise ValueError(f"F1: average must be 'micro' or 'macro', got {average!r}")
        self.threshold = threshold
        self.average = average
        super().__init__(name, output_names, label_names)

    def reset(self):
        super().reset()
        self.true_positives = self.false_positives = self.false_negatives = 0

    @staticmethod
    def _f1(tp, fp, fn):
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            label = label.astype(_onp.int64).reshape(-1)
            if pred.ndim == 2 and pred.shape[1] == 2:
                pred = pred.argmax(axis=1)
            else:
                pred = (pred.reshape(-1) > self.threshold)
            pred = pred.astype(_onp.int64)
            if set(_onp.unique(label)) - {0, 1}:
                raise ValueError(f"F1 handles binary labels only, got labels "
                                 f"{sorted(set(_onp.unique(label).tolist()))}")
            tp = int(((pred == 1) & (label == 1)).sum())
            fp = int(((pred == 1) & (label == 0)).sum())
            fn = int(((pred == 0) & (label == 1)).sum())
            self.true_positives += tp
            self.false_positives += fp
            self.false_negatives += fn
            if self.average == 'macro':
                self.sum_metric += self._f1(tp, fp, fn)
                self.num_inst += 1
            else:
                self.num_inst += len(label)

    def get(self):
        if self.num_inst == 0:
            return self.name, float('nan')
        if self.average == 'macro':
            return self.name, self.sum_metric / self.num_inst
        return self.name, self._f1(self.true_positives, self.false_positives,
                                   self.false_negatives)


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


_METRICS = {'acc': Accuracy, 'accuracy': Accuracy, 'top_k_accuracy': TopKAccuracy,
            'top_k_acc': TopKAccuracy, 'ce': CrossEntropy, 'cross-entropy': CrossEntropy,
            'crossentropy': CrossEntropy, 'mae': MAE, 'mse': MSE, 'rmse': RMSE, 'f1': F1,
            'composite': CompositeEvalMetric}


def create(metric, *args, **kwargs):
    """A metric from an instance, a name ('acc', 'mse', ...) or a list of those (composite)."""
    if isinstance(metric, EvalMetric):
        return metric
    if isinstance(metric, (list, tuple)):
        return CompositeEvalMetric([create(m, *args, **kwargs) for m in metric])
    if isinstance(metric, str):
        klass = _METRICS.get(metric.lower())
        if klass is None:
            raise ValueError(f"Unknown metric '{metric}'. Known metrics: {sorted(_METRICS)}")
        return klass(*args, **kwargs)
    raise TypeError(f"metric must be an EvalMetric, a name or a list, got "
                    f"{type(metric).__name__}")
