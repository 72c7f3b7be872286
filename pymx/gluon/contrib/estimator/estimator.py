"""Estimator: fit and evaluate a Gluon network with a loop driven by event handlers, as
MXNet 2.x's ``mxnet.gluon.contrib.estimator.Estimator``.

One training step is BatchProcessor.fit_batch (split the batch over ``device`` with
split_and_load, forward and backward on each slice) followed by the batch-end handlers, among
them GradientUpdateHandler (``trainer.step``), MetricHandler, ValidationHandler and
LoggingHandler, which fit adds when the caller passes none of their kind.

Differences from MXNet: devices are pymx Devices and the argument is ``device`` (pymx has no
Context); a device that does not exist raises ValueError (MXNet asserts); ``epochs``,
``batches`` and ``batch_axis`` are checked and a bad value raises ValueError naming it; the
default loss metric is named after the loss class ('training SoftmaxCrossEntropyLoss').
"""
import copy
import logging
import sys
import warnings

from ....device import Device, cpu, gpu, num_gpus
from ...block import Block
from ...data import DataLoader
from ...loss import Loss
from ...metric import Loss as LossMetric
from ...trainer import Trainer
from .batch_processor import BatchProcessor
from .event_handler import (BatchBegin, BatchEnd, EpochBegin, EpochEnd, GradientUpdateHandler,
                            LoggingHandler, MetricHandler, StoppingHandler, TrainBegin, TrainEnd,
                            ValidationHandler, _check_event_handlers)
from .utils import _check_handler_metric_ref, _check_metrics, _suggest_metric_for_loss

__all__ = ['Estimator']


def _check_loss(loss, what):
    if not isinstance(loss, Loss):
        raise ValueError(f"{what} must be a gluon.loss.Loss, got {type(loss).__name__}: "
                         f"{loss!r}")
    return loss


def _check_count(value, name):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"fit: {name} must be a positive integer, got {value!r}")
    return value


class Estimator:
    """Trains ``net`` with ``loss`` on ``device`` (a Device or a list: each batch is split
    over the list; default gpu(0) when a GPU exists, else cpu(0)).

    ``train_metrics`` / ``val_metrics``: EvalMetrics (default: Accuracy for
    SoftmaxCrossEntropyLoss, plus the mean loss; validation copies the training metrics).
    Their names get the prefix 'training ' / 'validation ', which LoggingHandler uses.
    ``initializer`` initializes the parameters not yet initialized (a warning if all are);
    ``trainer`` defaults to SGD with learning rate 0.001. ``val_net`` and ``val_loss`` (default
    ``net`` and ``loss``) are used for validation. ``batch_processor`` (default
    BatchProcessor()) provides fit_batch and evaluate_batch.

    ``logger`` is a logging.Logger writing INFO and above to stdout; add handlers to it to log
    elsewhere.
    """

    def __init__(self, net, loss, train_metrics=None, val_metrics=None, initializer=None,
                 trainer=None, device=None, val_net=None, val_loss=None, batch_processor=None):
        if not isinstance(net, Block):
            raise ValueError(f"net must be a gluon.Block, got {type(net).__name__}: {net!r}")
        self.net = net
        self.loss = _check_loss(loss, 'loss')
        self._train_metrics = _check_metrics(train_metrics)
        self._val_metrics = _check_metrics(val_metrics)
        self._add_default_training_metrics()
        self._add_validation_metrics()
        self.val_loss = self.loss if val_loss is None else _check_loss(val_loss, 'val_loss')
        self.val_net = self.net if val_net is None else val_net
        self.logger = logging.Logger(name='Estimator', level=logging.INFO)
        self.logger.addHandler(logging.StreamHandler(sys.stdout))
        self.device = self._check_devices(device)
        self._initialize(initializer)
        self.trainer = self._check_trainer(trainer)
        self.batch_processor = self._check_batch_processor(batch_processor)
        self.max_epoch = None
        self.max_batch = None
        self.batch_axis = 0

    @staticmethod
    def _check_devices(device):
        if device is None:
            gpus = num_gpus()
            if gpus > 1:
                warnings.warn("You have multiple GPUs, gpu(0) will be used by default. To use "
                              "all of them, pass device=[gpu(0), gpu(1), ...]")
            return [gpu(0)] if gpus > 0 else [cpu()]
        devices = [device] if isinstance(device, Device) else device
        if not isinstance(devices, (list, tuple)) or not devices or \
                not all(isinstance(d, Device) for d in devices):
            raise ValueError(f"device must be a Device or a non-empty list of Devices, for "
                             f"example cpu() or [gpu(0), gpu(1)], got {device!r}")
        gpus = num_gpus()
        for d in devices:
            if d.device_type == 'gpu' and d.device_id >= gpus:
                raise ValueError(f"device {d} is not available: this machine has {gpus} "
                                 f"GPU(s); use cpu() or one of "
                                 f"{[str(gpu(i)) for i in range(gpus)]}")
        return list(devices)

    def _is_initialized(self):
        for param in self.net.collect_params().values():
            try:
                param.list_device()
            except RuntimeError:
                return False
        return True

    def _initialize(self, initializer):
        if not self._is_initialized():
            # only the parameters not yet initialized are initialized
            self.net.initialize(init=initializer, device=self.device)
        elif initializer is not None:
            warnings.warn("Network already fully initialized, skipping initialization. You "
                          "don't need to pass initializer if you already initialized your "
                          "net; use net.initialize(init=..., force_reinit=True) to "
                          "re-initialize it.")

    def _check_trainer(self, trainer):
        if trainer is None:
            warnings.warn("No trainer specified, default SGD optimizer with learning rate "
                          "0.001 is used.")
            return Trainer(self.net.collect_params(), 'sgd', {'learning_rate': 0.001})
        if not isinstance(trainer, Trainer):
            raise ValueError(f"trainer must be a gluon.Trainer, got {type(trainer).__name__}: "
                             f"{trainer!r}")
        return trainer

    @staticmethod
    def _check_batch_processor(batch_processor):
        if batch_processor is None:
            return BatchProcessor()
        for method in ('fit_batch', 'evaluate_batch'):
            if not callable(getattr(batch_processor, method, None)):
                raise ValueError(f"batch_processor must have fit_batch() and "
                                 f"evaluate_batch() methods; {type(batch_processor).__name__} "
                                 f"has no {method}()")
        return batch_processor

    def _add_default_training_metrics(self):
        if not self._train_metrics:
            suggested = _suggest_metric_for_loss(self.loss)
            if suggested is not None:
                self._train_metrics = [suggested]
            self._train_metrics.append(LossMetric(type(self.loss).__name__))
        for metric in self._train_metrics:
            # the prefix tells handlers (LoggingHandler) training from validation metrics
            metric.name = 'training ' + metric.name

    def _add_validation_metrics(self):
        if not self._val_metrics:
            self._val_metrics = [copy.deepcopy(metric) for metric in self._train_metrics]
        for metric in self._val_metrics:
            if 'training' in metric.name:
                metric.name = metric.name.replace('training', 'validation')
            else:
                metric.name = 'validation ' + metric.name

    @property
    def train_metrics(self):
        return self._train_metrics

    @property
    def val_metrics(self):
        return self._val_metrics

    @staticmethod
    def _check_data(data, what):
        if not isinstance(data, DataLoader):
            raise ValueError(f"{what} must be a gluon.data.DataLoader, got "
                             f"{type(data).__name__}; wrap arrays in a gluon.data.ArrayDataset "
                             f"and a DataLoader")

    @staticmethod
    def _check_batch_axis(batch_axis):
        if isinstance(batch_axis, bool) or not isinstance(batch_axis, int):
            raise ValueError(f"batch_axis must be an integer, got {batch_axis!r}")
        return batch_axis

    def evaluate(self, val_data, batch_axis=0, event_handlers=None):
        """Runs ``batch_processor.evaluate_batch`` over `val_data` (a DataLoader) after resetting
        the validation metrics. Besides `event_handlers`, a MetricHandler and a LoggingHandler
        of the validation metrics are added unless handlers of those kinds are given."""
        self._check_data(val_data, 'val_data')
        batch_axis = self._check_batch_axis(batch_axis)
        for metric in self.val_metrics:
            metric.reset()
        handlers = self._prepare_default_validation_handlers(event_handlers)
        _, epoch_begin, batch_begin, batch_end, epoch_end, _ = self._categorize_handlers(handlers)
        for handler in epoch_begin:
            handler.epoch_begin(self)
        for batch in val_data:
            for handler in batch_begin:
                handler.batch_begin(self, batch=batch)
            _, label, pred, loss = self.batch_processor.evaluate_batch(self, batch, batch_axis)
            for handler in batch_end:
                handler.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
        for handler in epoch_end:
            handler.epoch_end(self)

    def fit(self, train_data, val_data=None, epochs=None, event_handlers=None, batches=None,
            batch_axis=0):
        """Trains on `train_data` (a DataLoader) for `epochs` epochs or `batches` batches
        (exactly one of them), validating on `val_data` after every epoch when it is given.
        Besides `event_handlers`, a StoppingHandler is always added, and a
        GradientUpdateHandler, MetricHandler, ValidationHandler (with val_data) and
        LoggingHandler unless handlers of those kinds are given."""
        self._check_data(train_data, 'train_data')
        if val_data is not None:
            self._check_data(val_data, 'val_data')
        epochs = _check_count(epochs, 'epochs')
        batches = _check_count(batches, 'batches')
        if (epochs is None) == (batches is None):
            raise ValueError(f"fit trains for a number of epochs or of batches: give exactly "
                             f"one of them, got epochs={epochs}, batches={batches}")
        self.max_epoch = epochs
        self.max_batch = batches
        self.batch_axis = self._check_batch_axis(batch_axis)

        handlers = self._prepare_default_handlers(val_data, event_handlers)
        train_begin, epoch_begin, batch_begin, batch_end, epoch_end, train_end = \
            self._categorize_handlers(handlers)
        for handler in train_begin:
            handler.train_begin(self)
        while True:
            for handler in epoch_begin:
                handler.epoch_begin(self)
            for batch in train_data:
                for handler in batch_begin:
                    handler.batch_begin(self, batch=batch)
                _, label, pred, loss = self.batch_processor.fit_batch(self, batch, batch_axis)
                # every handler sees the batch end, even after one has asked to stop
                stop = [handler.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
                        for handler in batch_end]
                if any(stop):
                    break
            stop = [handler.epoch_end(self) for handler in epoch_end]
            if any(stop):
                break
        for handler in train_end:
            handler.train_end(self)

    def _prepare_default_handlers(self, val_data, event_handlers):
        handlers = _check_event_handlers(event_handlers)
        added = [StoppingHandler(self.max_epoch, self.max_batch)]
        if not any(isinstance(h, GradientUpdateHandler) for h in handlers):
            added.append(GradientUpdateHandler())
        if not any(isinstance(h, MetricHandler) for h in handlers):
            added.append(MetricHandler(metrics=self.train_metrics))
        if val_data is not None and not any(isinstance(h, ValidationHandler) for h in handlers):
            added.append(ValidationHandler(val_data=val_data, eval_fn=self.evaluate))
        if not any(isinstance(h, LoggingHandler) for h in handlers):
            added.append(LoggingHandler(metrics=self.train_metrics))
        if handlers:
            # the added handlers use the estimator's metrics: so must the caller's
            known = self.train_metrics + self.val_metrics
            for handler in handlers:
                _check_handler_metric_ref(handler, known)
        return sorted(handlers + added, key=lambda h: getattr(h, 'priority', 0))

    def _prepare_default_validation_handlers(self, event_handlers):
        handlers = _check_event_handlers(event_handlers)
        added = []
        if not any(isinstance(h, MetricHandler) for h in handlers):
            added.append(MetricHandler(metrics=self.val_metrics))
        if not any(isinstance(h, LoggingHandler) for h in handlers):
            added.append(LoggingHandler(metrics=self.val_metrics))
        if handlers and added:
            for handler in handlers:
                _check_handler_metric_ref(handler, self.val_metrics)
        return sorted(handlers + added, key=lambda h: getattr(h, 'priority', 0))

    @staticmethod
    def _categorize_handlers(handlers):
        """The handlers of each event, in the order train_begin, epoch_begin, batch_begin,
        batch_end, epoch_end, train_end."""
        kinds = (TrainBegin, EpochBegin, BatchBegin, BatchEnd, EpochEnd, TrainEnd)
        return tuple([h for h in handlers if isinstance(h, kind)] for kind in kinds)
