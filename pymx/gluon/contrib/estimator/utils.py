"""Checks shared by the Estimator and its event handlers."""
from ...loss import SoftmaxCrossEntropyLoss
from ...metric import Accuracy, CompositeEvalMetric, EvalMetric


def _as_list_of(values, kind, expected):
    """A new list of `kind` instances from None, one instance or a list; anything else raises
    ValueError: "`expected`, but got a <type>: <value>"."""
    if isinstance(values, kind):
        return [values]
    if values is not None and not isinstance(values, (list, tuple)):
        raise ValueError(f"{expected}, but got a {type(values).__name__}: {values!r}")
    values = list(values or [])
    for value in values:
        if not isinstance(value, kind):
            raise ValueError(f"{expected}, but got a {type(value).__name__}: {value!r}")
    return values


def _check_metrics(metrics):
    """A list of EvalMetrics from None, one metric or a list; a CompositeEvalMetric is
    flattened into its members."""
    if isinstance(metrics, CompositeEvalMetric):
        return [m for member in metrics.metrics for m in _check_metrics(member)]
    return _as_list_of(metrics, EvalMetric,
                       "metrics must be an EvalMetric or a list of EvalMetrics (gluon.metric)")


def _suggest_metric_for_loss(loss):
    """The metric the Estimator adds by default for `loss`, or None."""
    if isinstance(loss, SoftmaxCrossEntropyLoss):
        return Accuracy()
    return None


def _check_handler_metric_ref(handler, known_metrics):
    """Raises ValueError when `handler` holds (in an attribute named *metric* or *monitor*) a
    metric that is not one of `known_metrics`: such a metric would never be updated."""
    for attribute, value in vars(handler).items():
        if 'metric' not in attribute and 'monitor' not in attribute:
            continue
        for metric in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(metric, EvalMetric) and not any(metric is m for m in known_metrics):
                raise ValueError(
                    f"Event handler {type(handler).__name__} refers (in {attribute}) to the "
                    f"metric '{metric.name}', which is not one of the estimator's training and "
                    f"validation metrics {[m.name for m in known_metrics]}; use the metrics "
                    f"from estimator.train_metrics and estimator.val_metrics instead.")
