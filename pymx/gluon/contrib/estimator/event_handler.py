"""Event handlers of the Estimator: objects called at the six points of the training loop.

A handler inherits the mixin of each event it handles (TrainBegin, TrainEnd, EpochBegin,
EpochEnd, BatchBegin, BatchEnd) and overrides its method; the Estimator calls handlers in
increasing ``priority`` (default 0). batch_end and epoch_end return True to stop training.

Differences from MXNet: the 'auto' mode of CheckpointHandler and EarlyStoppingHandler maximises
metrics whose name contains 'acc' or 'f1' and minimises the others (MXNet's test is always
true, so it always maximises); an unknown mode raises ValueError instead of warning.
CheckpointHandler writes every file atomically (a temporary file renamed over the target), the
trainer states before the parameters, so that a .params file always has its .states; it prunes
exactly the files of the oldest checkpoint (MXNet removes every file whose name starts with its
prefix, so model-epoch1batch2 also takes model-epoch1batch20), and on resume counts the
checkpoints already in model_dir towards max_checkpoints. The symbol file is the one
HybridBlock.export writes.
"""
import os
import tempfile
import time
import warnings

import numpy as onp

from ...metric import CompositeEvalMetric, EvalMetric
from ...metric import Loss as LossMetric
from .utils import _as_list_of, _check_metrics

__all__ = ['TrainBegin', 'TrainEnd', 'EpochBegin', 'EpochEnd', 'BatchBegin', 'BatchEnd',
           'StoppingHandler', 'MetricHandler', 'ValidationHandler', 'LoggingHandler',
           'CheckpointHandler', 'EarlyStoppingHandler', 'GradientUpdateHandler']


class EventHandler:
    """Base of every event mixin."""


def _check_event_handlers(handlers):
    """A new list of EventHandlers from None, one handler or a list."""
    return _as_list_of(handlers, EventHandler,
                       "event_handlers must be an EventHandler or a list of EventHandlers")


class TrainBegin(EventHandler):
    def train_begin(self, estimator, *args, **kwargs):
        """Called by Estimator.fit; handlers that act then override it."""


class TrainEnd(EventHandler):
    def train_end(self, estimator, *args, **kwargs):
        """Called by Estimator.fit; handlers that act then override it."""


class EpochBegin(EventHandler):
    def epoch_begin(self, estimator, *args, **kwargs):
        """Called by Estimator.fit; handlers that act then override it."""


class EpochEnd(EventHandler):
    def epoch_end(self, estimator, *args, **kwargs):
        return False


class BatchBegin(EventHandler):
    def batch_begin(self, estimator, *args, **kwargs):
        """Called by Estimator.fit; handlers that act then override it."""


class BatchEnd(EventHandler):
    def batch_end(self, estimator, *args, **kwargs):
        return False


def _check_period(value, name, handler, allow_none=True):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{handler}: {name} must be a positive integer"
                         f"{' or None' if allow_none else ''}, got {value!r}")
    return value


class StoppingHandler(TrainBegin, BatchEnd, EpochEnd):
    """Stops training after ``max_epoch`` epochs or ``max_batch`` batches (the Estimator adds
    one, set from fit's ``epochs`` / ``batches``)."""

    def __init__(self, max_epoch=None, max_batch=None):
        self.max_epoch = max_epoch
        self.max_batch = max_batch
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def train_begin(self, estimator, *args, **kwargs):
        self.max_epoch = estimator.max_epoch
        self.max_batch = estimator.max_batch
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def batch_end(self, estimator, *args, **kwargs):
        self.current_batch += 1
        if self.current_batch == self.max_batch:
            self.stop_training = True
        return self.stop_training

    def epoch_end(self, estimator, *args, **kwargs):
        self.current_epoch += 1
        if self.current_epoch == self.max_epoch:
            self.stop_training = True
        return self.stop_training


class MetricHandler(EpochBegin, BatchEnd):
    """Resets ``metrics`` at each epoch begin and updates them after each batch: a
    gluon.metric.Loss with the batch's losses, any other metric with (label, pred). Its low
    priority makes it run before the handlers that read the metrics."""

    def __init__(self, metrics, priority=-1000):
        self.metrics = _check_metrics(metrics)
        self.priority = priority

    def epoch_begin(self, estimator, *args, **kwargs):
        for metric in self.metrics:
            metric.reset()

    def batch_end(self, estimator, *args, **kwargs):
        pred, label, loss = kwargs['pred'], kwargs['label'], kwargs['loss']
        for metric in self.metrics:
            if isinstance(metric, LossMetric):
                metric.update(0, loss)
            else:
                metric.update(label, pred)


class ValidationHandler(TrainBegin, BatchEnd, EpochEnd):
    """Calls ``eval_fn(val_data=..., batch_axis=..., event_handlers=...)`` (usually
    Estimator.evaluate) every ``epoch_period`` epochs and every ``batch_period`` batches
    (None: never)."""

    def __init__(self, val_data, eval_fn, epoch_period=1, batch_period=None, priority=-1000,
                 event_handlers=None):
        if not callable(eval_fn):
            raise ValueError(f"ValidationHandler: eval_fn must be callable, got {eval_fn!r}")
        self.val_data = val_data
        self.eval_fn = eval_fn
        self.epoch_period = _check_period(epoch_period, 'epoch_period', 'ValidationHandler')
        self.batch_period = _check_period(batch_period, 'batch_period', 'ValidationHandler')
        self.current_batch = 0
        self.current_epoch = 0
        self.priority = priority
        self.event_handlers = event_handlers

    def train_begin(self, estimator, *args, **kwargs):
        self.current_batch = 0
        self.current_epoch = 0

    def _validate(self, estimator):
        self.eval_fn(val_data=self.val_data, batch_axis=getattr(estimator, 'batch_axis', 0),
                     event_handlers=self.event_handlers)

    def batch_end(self, estimator, *args, **kwargs):
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self._validate(estimator)

    def epoch_end(self, estimator, *args, **kwargs):
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self._validate(estimator)


def _format_metrics(metrics):
    parts = []
    for metric in metrics:
        for name, value in metric.get_name_value():
            parts.append('%s: %.4f' % (name, value))
    return ', '.join(parts)


class LoggingHandler(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchBegin, BatchEnd):
    """Logs to ``estimator.logger``: the optimizer and learning rate at train begin, each epoch's
    time and ``metrics`` at epoch end, and with an integer ``log_interval`` also every
    log_interval-th batch (epoch, batch, samples so far, time and metrics). The highest
    priority (run last) makes it see every metric already updated. An epoch whose metrics are
    validation metrics (no 'training' in their names) is logged as a validation."""

    def __init__(self, log_interval='epoch', metrics=None, priority=onp.inf):
        if log_interval != 'epoch' and (isinstance(log_interval, bool)
                                        or not isinstance(log_interval, int)
                                        or log_interval < 1):
            raise ValueError(f"LoggingHandler: log_interval must be a positive integer or "
                             f"'epoch', got {log_interval!r}")
        self.metrics = _check_metrics(metrics)
        self.log_interval = log_interval
        self.priority = priority
        self.batch_index = 0
        self.current_epoch = 0
        self.processed_samples = 0
        self.log_interval_time = 0.0
        self.train_start = self.epoch_start = self.batch_start = time.time()

    def train_begin(self, estimator, *args, **kwargs):
        self.train_start = time.time()
        trainer = estimator.trainer
        estimator.logger.info("Training begin: using optimizer %s with current learning rate "
                              "%.4f ", type(trainer.optimizer).__name__, trainer.learning_rate)
        if estimator.max_epoch:
            estimator.logger.info("Train for %d epochs.", estimator.max_epoch)
        else:
            estimator.logger.info("Train for %d batches.", estimator.max_batch)
        self.current_epoch = 0
        self.batch_index = 0
        self.processed_samples = 0
        self.log_interval_time = 0.0

    def train_end(self, estimator, *args, **kwargs):
        train_time = time.time() - self.train_start
        msg = 'Train finished using total %ds with %d epochs. ' % (train_time, self.current_epoch)
        estimator.logger.info((msg + _format_metrics(self.metrics)).rstrip(', '))

    def batch_begin(self, estimator, *args, **kwargs):
        if isinstance(self.log_interval, int):
            self.batch_start = time.time()

    def batch_end(self, estimator, *args, **kwargs):
        if isinstance(self.log_interval, int):
            self.log_interval_time += time.time() - self.batch_start
            self.processed_samples += kwargs['batch'][0].shape[0]
            if self.batch_index % self.log_interval == 0:
                msg = '[Epoch %d][Batch %d][Samples %d] time/interval: %.3fs ' % (
                    self.current_epoch, self.batch_index, self.processed_samples,
                    self.log_interval_time)
                self.log_interval_time = 0.0
                estimator.logger.info((msg + _format_metrics(self.metrics)).rstrip(' '))
        self.batch_index += 1

    def _is_training(self):
        return any('training' in metric.name for metric in self.metrics)

    def epoch_begin(self, estimator, *args, **kwargs):
        self.epoch_start = time.time()
        if self._is_training():
            estimator.logger.info("[Epoch %d] Begin, current learning rate: %.4f",
                                  self.current_epoch, estimator.trainer.learning_rate)
        else:
            estimator.logger.info("Validation Begin")

    def epoch_end(self, estimator, *args, **kwargs):
        epoch_time = time.time() - self.epoch_start
        msg = '[Epoch %d] Finished in %.3fs, ' % (self.current_epoch, epoch_time)
        estimator.logger.info((msg + _format_metrics(self.metrics)).rstrip(', '))
        self.current_epoch += 1
        self.batch_index = 0


def _monitor_op(monitor, mode, handler):
    """onp.greater or onp.less: how `handler` compares values of `monitor` in `mode`."""
    if mode not in ('auto', 'min', 'max'):
        raise ValueError(f"{handler}: mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode == 'auto':
        name = monitor.get()[0].lower()
        mode = 'max' if 'acc' in name or 'f1' in name else 'min'
    return onp.greater if mode == 'max' else onp.less


def _check_monitor(monitor, handler):
    if not isinstance(monitor, EvalMetric):
        raise ValueError(f"{handler}: monitor must be one of the metric objects of "
                         f"estimator.train_metrics or estimator.val_metrics, got {monitor!r}")
    if isinstance(monitor, CompositeEvalMetric):
        raise ValueError(f"{handler}: a CompositeEvalMetric ('{monitor.name}') cannot be "
                         f"monitored; pass one of its metrics")


class CheckpointHandler(TrainBegin, BatchEnd, EpochEnd):
    """Saves the parameters (``net.save_parameters``) and trainer states every
    ``epoch_period`` epochs and every ``batch_period`` batches, as
    ``{model_dir}/{model_prefix}-epoch{E}batch{B}.params`` and ``.states``, keeping the newest
    ``max_checkpoints``. At an epoch end E is that epoch's index and B the number of batches
    trained; at a batch end E is the number of epochs finished and B that batch's index. With
    ``save_best`` it also keeps ``{model_prefix}-best.params`` / ``.states`` for the best value
    of ``monitor`` so far ('min', 'max', or 'auto': max for accuracy and f1). The symbol of a
    hybridized net is saved once, after its first batch, as ``{model_prefix}-symbol.json``.
    With ``resume_from_checkpoint``, training starts from the newest checkpoint in model_dir and
    trains only the epochs (or batches) that remain."""

    def __init__(self, model_dir, model_prefix='model', monitor=None, verbose=0,
                 save_best=False, mode='auto', epoch_period=1, batch_period=None,
                 max_checkpoints=5, resume_from_checkpoint=False):
        self.monitor = monitor
        self.verbose = verbose
        os.makedirs(model_dir, exist_ok=True)
        self.model_dir = model_dir
        self.model_prefix = model_prefix
        self.save_best = save_best
        if save_best:
            _check_monitor(monitor, 'CheckpointHandler')
            self.monitor_op = _monitor_op(monitor, mode, 'CheckpointHandler')
            self.best = onp.inf if self.monitor_op is onp.less else -onp.inf
        self.epoch_period = _check_period(epoch_period, 'epoch_period', 'CheckpointHandler')
        self.batch_period = _check_period(batch_period, 'batch_period', 'CheckpointHandler')
        self.max_checkpoints = _check_period(max_checkpoints, 'max_checkpoints',
                                             'CheckpointHandler', allow_none=False)
        self.resume_from_checkpoint = resume_from_checkpoint
        self.current_batch = 0
        self.current_epoch = 0
        self.trained_epoch = -1
        self.trained_batch = -1
        self.saved_checkpoints = []

    def train_begin(self, estimator, *args, **kwargs):
        self.current_epoch = 0
        self.current_batch = 0
        if self.save_best:
            self.best = onp.inf if self.monitor_op is onp.less else -onp.inf
        if self.resume_from_checkpoint:
            self._check_resume_periods(estimator)
            self._resume_from_checkpoint(estimator)

    def batch_end(self, estimator, *args, **kwargs):
        if self.current_batch == 0:
            self._save_symbol(estimator)
        if self.batch_period and (self.current_batch + 1) % self.batch_period == 0:
            self._save_checkpoint(estimator)
        self.current_batch += 1

    def epoch_end(self, estimator, *args, **kwargs):
        if self.epoch_period and (self.current_epoch + 1) % self.epoch_period == 0:
            self._save_checkpoint(estimator)
        self.current_epoch += 1

    def _path(self, name):
        return os.path.join(self.model_dir, name)

    def _save_checkpoint(self, estimator):
        if self.trained_epoch >= 0:
            # resumed: number on from the checkpoint training started from
            epoch = self.current_epoch + self.trained_epoch + 1
            batch = self.current_batch + self.trained_batch + (0 if estimator.max_epoch else 1)
        else:
            epoch, batch = self.current_epoch, self.current_batch
        prefix = '%s-epoch%dbatch%d' % (self.model_prefix, epoch, batch)
        self._save_params_and_trainer(estimator, prefix)
        self.saved_checkpoints.append(prefix)
        while len(self.saved_checkpoints) > self.max_checkpoints:
            oldest = self.saved_checkpoints.pop(0)
            for suffix in ('.params', '.states'):
                if os.path.exists(self._path(oldest + suffix)):
                    os.remove(self._path(oldest + suffix))
        if self.verbose > 0:
            estimator.logger.info('[Epoch %d] CheckpointHandler: trained total %d batches, '
                                  'saving model at %s with prefix: %s', self.current_epoch,
                                  self.current_batch + 1, self.model_dir, prefix)
        if self.save_best:
            self._save_if_best(estimator)

    def _save_if_best(self, estimator):
        name, value = self.monitor.get()
        if onp.isnan(value):
            warnings.warn(f"CheckpointHandler: skipping save_best because the monitored metric "
                          f"'{name}' has not been updated; monitor one of "
                          f"estimator.train_metrics or estimator.val_metrics", RuntimeWarning)
            return
        if self.monitor_op(value, self.best):
            prefix = self.model_prefix + '-best'
            self._save_params_and_trainer(estimator, prefix)
            if self.verbose > 0:
                estimator.logger.info('[Epoch %d] CheckpointHandler: %s improved from %0.5f to '
                                      '%0.5f, updating best model at %s with prefix: %s',
                                      self.current_epoch, name, self.best, value,
                                      self.model_dir, prefix)
            self.best = value
        elif self.verbose > 0:
            estimator.logger.info('[Epoch %d] CheckpointHandler: %s did not improve from '
                                  '%0.5f, skipping updating best model', self.current_epoch,
                                  name, self.best)

    def _save_symbol(self, estimator):
        path = self._path(self.model_prefix + '-symbol.json')
        if not getattr(estimator.net, '_cached_graphs', None):
            estimator.logger.info("Model architecture (symbol file) is not saved: build the "
                                  "model from HybridBlocks and call net.hybridize() before "
                                  "passing it to the Estimator to save it as %s.", path)
            return
        # export writes the symbol and a parameter file; only the symbol is kept, renamed
        # into place from a scratch directory beside it (atomic on one file system)
        with tempfile.TemporaryDirectory(prefix='.symbol-', dir=self.model_dir) as scratch:
            estimator.net.export(os.path.join(scratch, 'net'))
            os.replace(os.path.join(scratch, 'net-symbol.json'), path)

    def _save_params_and_trainer(self, estimator, prefix):
        # The states go first: a .params file marks a complete checkpoint for resuming. Both
        # writes are atomic (Trainer.save_states and save_parameters write a temporary file and
        # rename it).
        estimator.trainer.save_states(self._path(prefix + '.states'))
        estimator.net.save_parameters(self._path(prefix + '.params'))

    def _check_resume_periods(self, estimator):
        if (self.batch_period and estimator.max_batch is None) or \
                (self.epoch_period and estimator.max_epoch is None):
            raise ValueError(
                f"CheckpointHandler: to resume from a checkpoint, save by the same unit you "
                f"train for: training for epochs={estimator.max_epoch}, "
                f"batches={estimator.max_batch} with epoch_period={self.epoch_period}, "
                f"batch_period={self.batch_period}. For example, train with epochs=10 and "
                f"epoch_period=1, batch_period=None.")

    def _existing_checkpoints(self):
        """[(epoch, batch, prefix)] of this model's checkpoints in model_dir, oldest first."""
        head = self.model_prefix + '-epoch'
        found = []
        for name in os.listdir(self.model_dir):
            if not (name.startswith(head) and name.endswith('.params')):
                continue
            stem = name[:-len('.params')]
            epoch, sep, batch = stem[len(head):].partition('batch')
            if not (sep and epoch.isdigit() and batch.isdigit()):
                raise ValueError(f"CheckpointHandler: cannot parse the checkpoint file {name} "
                                 f"in {self.model_dir}; checkpoints are named "
                                 f"{self.model_prefix}-epoch<E>batch<B>.params")
            found.append((int(epoch), int(batch), stem))
        return sorted(found)

    def _resume_from_checkpoint(self, estimator):
        found = self._existing_checkpoints()
        self.saved_checkpoints = [prefix for _, _, prefix in found]
        if not found:
            self.trained_epoch = self.trained_batch = -1
            estimator.logger.info("CheckpointHandler: no checkpoint found, training from "
                                  "scratch for %s", '%d batches' % estimator.max_batch
                                  if estimator.max_batch else '%d epochs' % estimator.max_epoch)
            return
        self.trained_epoch, self.trained_batch, prefix = found[-1]
        msg = "CheckpointHandler: checkpoint resumed from epoch %d batch %d, continue to " \
              "train for " % (self.trained_epoch, self.trained_batch)
        if estimator.max_epoch:
            if self.trained_epoch >= estimator.max_epoch - 1:
                raise ValueError(f"CheckpointHandler: the checkpoint {prefix} already reached "
                                 f"epochs={estimator.max_epoch}; pass "
                                 f"resume_from_checkpoint=False to train from scratch")
            estimator.max_epoch -= self.trained_epoch + 1
            msg += "%d epochs" % estimator.max_epoch
        if estimator.max_batch:
            if self.trained_batch >= estimator.max_batch - 1:
                raise ValueError(f"CheckpointHandler: the checkpoint {prefix} already reached "
                                 f"batches={estimator.max_batch}; pass "
                                 f"resume_from_checkpoint=False to train from scratch")
            estimator.max_batch -= self.trained_batch + 1
            msg += "%d batches" % estimator.max_batch
        states = self._path(prefix + '.states')
        if not os.path.exists(states):
            raise ValueError(f"CheckpointHandler: cannot resume from {prefix}: {states} is "
                             f"missing")
        estimator.net.load_parameters(self._path(prefix + '.params'), device=estimator.device)
        estimator.trainer.load_states(states)
        estimator.logger.warning(msg)


class EarlyStoppingHandler(TrainBegin, EpochEnd, TrainEnd):
    """Stops training when ``monitor`` has not improved by more than ``min_delta`` for
    ``patience`` epochs in a row ('min', 'max', or 'auto': max for accuracy and f1). With a
    ``baseline``, improvement is counted from it rather than from the first epoch."""

    def __init__(self, monitor, min_delta=0, patience=0, mode='auto', baseline=None):
        _check_monitor(monitor, 'EarlyStoppingHandler')
        if min_delta < 0:
            raise ValueError(f"EarlyStoppingHandler: min_delta must be >= 0, got {min_delta!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ValueError(f"EarlyStoppingHandler: patience must be a non-negative integer, "
                             f"got {patience!r}")
        self.monitor = monitor
        self.monitor_op = _monitor_op(monitor, mode, 'EarlyStoppingHandler')
        # improvement must exceed min_delta in the direction of monitor_op
        self.min_delta = min_delta if self.monitor_op is onp.greater else -min_delta
        self.patience = patience
        self.baseline = baseline
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        self.best = None

    def train_begin(self, estimator, *args, **kwargs):
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        if self.baseline is not None:
            self.best = self.baseline
        else:
            self.best = onp.inf if self.monitor_op is onp.less else -onp.inf

    def epoch_end(self, estimator, *args, **kwargs):
        name, value = self.monitor.get()
        if onp.isnan(value):
            warnings.warn(f"EarlyStoppingHandler: the monitored metric '{name}' has not been "
                          f"updated; monitor one of estimator.train_metrics or "
                          f"estimator.val_metrics", RuntimeWarning)
        elif self.monitor_op(value - self.min_delta, self.best):
            self.best = value
            self.wait = 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = self.current_epoch
                self.stop_training = True
        self.current_epoch += 1
        return self.stop_training

    def train_end(self, estimator, *args, **kwargs):
        if self.stop_training:
            estimator.logger.info('[Epoch %d] EarlyStoppingHandler: early stopping due to %s '
                                  'not improving', self.stopped_epoch, self.monitor.get()[0])


class GradientUpdateHandler(BatchEnd):
    """Applies the optimizer after each batch: ``trainer.step(batch_size)`` with batch_size the
    number of loss values over all devices. Its priority (-2000) runs it before the metrics."""

    def __init__(self, priority=-2000):
        self.priority = priority

    def batch_end(self, estimator, *args, **kwargs):
        loss = kwargs['loss']
        if not isinstance(loss, (list, tuple)):
            loss = [loss]
        estimator.trainer.step(sum(value.shape[0] for value in loss))
