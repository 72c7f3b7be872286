"""gluon.contrib.estimator: fit equals the hand-written loop (also split over two CPU devices),
evaluate's metrics equal NumPy's, and each event handler's behaviour (stopping, validation
periods, logging lines, checkpoints written, pruned and resumed, early stopping) and errors."""
import logging
import os
import re

import numpy as onp
import pytest

from conftest import requires_gpu
from pymx import autograd, gluon, np
from pymx.device import cpu, gpu
from pymx.gluon.contrib.estimator import (BatchEnd, BatchProcessor, CheckpointHandler,
                                          EarlyStoppingHandler, EpochBegin, Estimator,
                                          GradientUpdateHandler, LoggingHandler, MetricHandler,
                                          StoppingHandler, ValidationHandler)
from pymx.test_utils import assert_almost_equal

pytestmark = pytest.mark.filterwarnings("ignore:No trainer specified")

NUM_SAMPLES, BATCH = 24, 8      # three batches per epoch


def _data():
    rng = onp.random.default_rng(0)
    x = rng.standard_normal((NUM_SAMPLES, 4)).astype(onp.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(onp.float32) + (x[:, 2] > 1)
    return x, y


def _loader():
    return gluon.data.DataLoader(gluon.data.ArrayDataset(*_data()), batch_size=BATCH)


def _net():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, activation='relu', in_units=4), gluon.nn.Dense(3, in_units=5))
    return net


def _twin_nets(tmp_path, devices):
    """Two nets with the same initial parameters, the first on `devices`, the second on cpu(0)."""
    first = _net()
    first.initialize(device=devices)
    first.save_parameters(str(tmp_path / 'init.params'))
    second = _net()
    second.load_parameters(str(tmp_path / 'init.params'), device=cpu(0))
    return first, second


def _sgd(net, lr=0.1):
    return gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': lr, 'momentum': 0.9})


def _estimator(net=None, lr=0.1):
    """An estimator with an SGD trainer of learning rate `lr` for `net` (default a new one)."""
    if net is None:
        net = _net()
        net.initialize()
    return Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=_sgd(net, lr))


def _params(net):
    return {name: p.data(p.list_device()[0]).asnumpy() for name, p in
            net.collect_params().items()}


def _hand_loop(net, epochs):
    trainer, loss_fn = _sgd(net), gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(epochs):
        for x, y in _loader():
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(x.shape[0])


@pytest.mark.parametrize("devices", [[cpu(0)], [cpu(0), cpu(1)]])
def test_fit_matches_hand_written_loop(tmp_path, devices):
    net, reference = _twin_nets(tmp_path, devices)
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=_sgd(net), device=devices)
    est.logger.disabled = True
    est.fit(_loader(), epochs=3)
    _hand_loop(reference, epochs=3)
    got, want = _params(net), _params(reference)
    for name in want:
        assert_almost_equal(got[name], want[name], rtol=1e-5, atol=1e-6, names=(name, 'hand'))
    for device in devices[1:]:   # every device's copy took the same steps
        for name, p in net.collect_params().items():
            assert_almost_equal(p.data(device), got[name], rtol=0, atol=0)


def test_default_metrics_and_evaluate_match_numpy(tmp_path):
    net = _net()
    net.initialize()
    est = _estimator(net)
    assert [m.name for m in est.train_metrics] == ['training accuracy',
                                                   'training SoftmaxCrossEntropyLoss']
    assert [m.name for m in est.val_metrics] == ['validation accuracy',
                                                 'validation SoftmaxCrossEntropyLoss']
    est.logger.disabled = True
    est.evaluate(_loader())
    x, y = _data()
    logits = net(np.array(x)).asnumpy().astype(onp.float64)
    log_softmax = logits - onp.log(onp.exp(logits).sum(axis=1, keepdims=True))
    accuracy, loss = est.val_metrics[0].get()[1], est.val_metrics[1].get()[1]
    assert accuracy == pytest.approx((logits.argmax(axis=1) == y).mean())
    assert loss == pytest.approx(-log_softmax[onp.arange(len(y)), y.astype(int)].mean(),
                                 rel=1e-5)


class _Recorder(EpochBegin, BatchEnd):
    def __init__(self):
        self.epochs, self.batches = 0, 0

    def epoch_begin(self, estimator, *args, **kwargs):
        self.epochs += 1

    def batch_end(self, estimator, *args, **kwargs):
        self.batches += 1


@pytest.mark.parametrize("kwargs,epochs,batches", [({'epochs': 2}, 2, 6),
                                                   ({'batches': 5}, 2, 5),
                                                   ({'batches': 3}, 1, 3)])
def test_fit_stops_after_epochs_or_batches(kwargs, epochs, batches):
    est = _estimator()
    est.logger.disabled = True
    recorder = _Recorder()
    est.fit(_loader(), event_handlers=[recorder], **kwargs)
    assert (recorder.epochs, recorder.batches) == (epochs, batches)


def test_stopping_handler_counts():
    handler = StoppingHandler(max_batch=2)

    class Est:
        max_epoch, max_batch = None, 2
    handler.train_begin(Est)
    assert [handler.batch_end(Est), handler.batch_end(Est)] == [False, True]


def test_validation_handler_periods():
    calls = []
    handler = ValidationHandler(val_data='data', epoch_period=2, batch_period=4,
                                eval_fn=lambda **kw: calls.append(kw))
    est = _estimator()
    est.logger.disabled = True
    est.fit(_loader(), epochs=4, event_handlers=[handler])
    # 12 batches: validation after batches 4, 8, 12 and after epochs 2, 4
    assert len(calls) == 5
    assert calls[0] == {'val_data': 'data', 'batch_axis': 0, 'event_handlers': None}


def test_logging_lines(tmp_path):
    est = _estimator()
    lines = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())
    est.logger.handlers = [Collect()]
    est.fit(_loader(), val_data=_loader(), epochs=2,
            event_handlers=[LoggingHandler(log_interval=2, metrics=est.train_metrics)])
    number = r'\d+\.\d{4}'
    assert re.fullmatch(r'Training begin: using optimizer SGD with current learning rate '
                        r'0\.1000 ', lines[0])
    assert lines[1] == 'Train for 2 epochs.'
    batch_lines = [line for line in lines if line.startswith('[Epoch 0][Batch')]
    assert [line[:36] for line in batch_lines] == ['[Epoch 0][Batch 0][Samples 8] time/i',
                                                   '[Epoch 0][Batch 2][Samples 24] time/']
    assert re.search(rf'time/interval: \d+\.\d{{3}}s training accuracy: {number}, training '
                     rf'SoftmaxCrossEntropyLoss: {number}$', batch_lines[0])
    assert sum(line == 'Validation Begin' for line in lines) == 2
    assert any(re.fullmatch(rf'\[Epoch 0\] Finished in \d+\.\d{{3}}s, validation accuracy: '
                            rf'{number}, validation SoftmaxCrossEntropyLoss: {number}', line)
               for line in lines)
    assert re.fullmatch(rf'Train finished using total \d+s with 2 epochs\. training accuracy: '
                        rf'{number}, training SoftmaxCrossEntropyLoss: {number}', lines[-1])


def test_checkpoints_written_and_pruned(tmp_path):
    net = _net()
    net.initialize()
    net.hybridize()
    est = _estimator(net)
    est.logger.disabled = True
    handler = CheckpointHandler(str(tmp_path), model_prefix='m', max_checkpoints=2,
                                batch_period=4, monitor=est.train_metrics[1], save_best=True)
    est.fit(_loader(), epochs=3, event_handlers=[handler])
    # in order: epoch0batch3 (end of epoch 0), epoch1batch3 (batch index 3), epoch1batch6,
    # epoch2batch7 (batch index 7), epoch2batch9: the newest two are kept
    files = sorted(f for f in os.listdir(tmp_path))
    assert files == ['m-best.params', 'm-best.states', 'm-epoch2batch7.params',
                     'm-epoch2batch7.states', 'm-epoch2batch9.params', 'm-epoch2batch9.states',
                     'm-symbol.json']
    restored = _net()
    restored.load_parameters(str(tmp_path / 'm-epoch2batch9.params'))
    for name, value in _params(net).items():
        assert_almost_equal(_params(restored)[name], value, rtol=0, atol=0)


def test_checkpoint_resume_continues_training(tmp_path):
    straight, resumed = _twin_nets(tmp_path, [cpu(0)])
    est = Estimator(straight, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=_sgd(straight))
    est.logger.disabled = True
    est.fit(_loader(), epochs=4)

    ckpt_dir = str(tmp_path / 'ckpt')
    first = _net()
    first.load_parameters(str(tmp_path / 'init.params'))
    est = Estimator(first, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=_sgd(first))
    est.logger.disabled = True
    est.fit(_loader(), epochs=2, event_handlers=[CheckpointHandler(ckpt_dir)])
    # a fresh process would start from other parameters: resuming must load them and the
    # momentum states, then train the two remaining epochs
    est = Estimator(resumed, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=_sgd(resumed))
    est.logger.disabled = True
    recorder = _Recorder()
    est.fit(_loader(), epochs=4, event_handlers=[
        CheckpointHandler(ckpt_dir, max_checkpoints=3, resume_from_checkpoint=True), recorder])
    assert recorder.epochs == 2
    assert sorted(os.listdir(ckpt_dir)) == [f'model-epoch{e}batch{b}.{ext}' for e, b in
                                            ((1, 6), (2, 9), (3, 12)) for ext in
                                            ('params', 'states')]
    for name, value in _params(straight).items():
        assert_almost_equal(_params(resumed)[name], value, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="already reached epochs=4"):
        est.fit(_loader(), epochs=4,
                event_handlers=[CheckpointHandler(ckpt_dir, resume_from_checkpoint=True)])
    with pytest.raises(ValueError, match="same unit you train for: training for epochs=None, "
                                         "batches=3 with epoch_period=1"):
        est.fit(_loader(), batches=3,
                event_handlers=[CheckpointHandler(ckpt_dir, resume_from_checkpoint=True)])


def test_early_stopping_on_monitored_metric():
    est = _estimator(lr=0.0)         # nothing is learnt: the loss never improves
    est.logger.disabled = True
    recorder = _Recorder()
    stopper = EarlyStoppingHandler(monitor=est.train_metrics[1], patience=2)
    est.fit(_loader(), epochs=10, event_handlers=[stopper, recorder])
    assert recorder.epochs == 3 and stopper.stopped_epoch == 2


def test_early_stopping_modes_and_min_delta():
    metric = gluon.metric.Loss('validation accuracy')
    handler = EarlyStoppingHandler(monitor=metric, min_delta=0.06, patience=2)   # auto: max
    handler.train_begin(None)
    stops = []
    # 0.5 improves on -inf; 0.55 and 0.54 are within min_delta of 0.5: stop at the second
    for value in (0.5, 0.55, 0.54):
        metric.reset()
        metric.update(None, [np.array([value])])
        stops.append(handler.epoch_end(None))
    assert stops == [False, False, True] and handler.best == pytest.approx(0.5)
    handler = EarlyStoppingHandler(monitor=gluon.metric.Loss(), mode='max', baseline=2.0)
    handler.train_begin(None)
    assert handler.best == 2.0 and handler.monitor_op is onp.greater
    assert EarlyStoppingHandler(monitor=gluon.metric.Loss()).monitor_op is onp.less


def test_custom_batch_processor_and_gradient_handler():
    class Counting(BatchProcessor):
        fits = 0

        def fit_batch(self, estimator, train_batch, batch_axis=0):
            Counting.fits += 1
            return super().fit_batch(estimator, train_batch, batch_axis)
    net = _net()
    net.initialize()
    steps = []
    trainer = _sgd(net)
    original_step = trainer.step
    trainer.step = lambda batch_size: steps.append(batch_size) or original_step(batch_size)
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer,
                    batch_processor=Counting())
    est.logger.disabled = True
    est.fit(_loader(), batches=4, event_handlers=[GradientUpdateHandler()])
    assert Counting.fits == 4 and steps == [8, 8, 8, 8]     # one gradient handler, not two


def test_estimator_errors(tmp_path):
    loss = gluon.loss.L2Loss()
    with pytest.raises(ValueError, match="loss must be a gluon.loss.Loss, got str"):
        Estimator(_net(), 'l2')
    with pytest.raises(ValueError, match="val_loss must be a gluon.loss.Loss, got int"):
        Estimator(_net(), loss, val_loss=3)
    with pytest.raises(ValueError, match="list of EvalMetrics.*got a str: 'acc'"):
        Estimator(_net(), loss, train_metrics=['acc'])
    with pytest.raises(ValueError, match="trainer must be a gluon.Trainer, got str"):
        Estimator(_net(), loss, trainer='sgd')
    with pytest.raises(ValueError, match=r"device gpu\(99\) is not available"):
        Estimator(_net(), loss, device=[cpu(0), gpu(99)])
    with pytest.raises(ValueError, match="device must be a Device.*got 'cpu'"):
        Estimator(_net(), loss, device='cpu')
    with pytest.raises(ValueError, match="has no evaluate_batch"):
        Estimator(_net(), loss, batch_processor=type('P', (), {'fit_batch': lambda s: 0})())
    est = Estimator(_net(), loss)
    with pytest.raises(ValueError, match=r"a \(data, label\) pair, got ndarray"):
        BatchProcessor().fit_batch(est, np.zeros((2, 4)))
    with pytest.raises(ValueError, match="exactly one of them, got epochs=2, batches=3"):
        est.fit(_loader(), epochs=2, batches=3)
    with pytest.raises(ValueError, match="exactly one of them, got epochs=None, batches=None"):
        est.fit(_loader())
    with pytest.raises(ValueError, match="epochs must be a positive integer, got 0"):
        est.fit(_loader(), epochs=0)
    with pytest.raises(ValueError, match="train_data must be a gluon.data.DataLoader, got list"):
        est.fit([(1, 2)], epochs=1)
    with pytest.raises(ValueError, match="batch_axis must be an integer, got 0.5"):
        est.fit(_loader(), epochs=1, batch_axis=0.5)
    with pytest.raises(ValueError, match="EventHandlers, but got a str"):
        est.fit(_loader(), epochs=1, event_handlers=['log'])
    with pytest.raises(ValueError, match="MetricHandler refers \\(in metrics\\) to the metric "
                                         "'accuracy'"):
        est.fit(_loader(), epochs=1,
                event_handlers=[MetricHandler(metrics=[gluon.metric.Accuracy()])])


def test_handler_errors(tmp_path):
    metric = gluon.metric.Accuracy()
    with pytest.raises(ValueError, match="log_interval must be a positive integer or 'epoch', "
                                         "got 'batch'"):
        LoggingHandler(log_interval='batch')
    with pytest.raises(ValueError, match="epoch_period must be a positive integer or None, "
                                         "got 0"):
        ValidationHandler(val_data=None, eval_fn=print, epoch_period=0)
    with pytest.raises(ValueError, match="eval_fn must be callable"):
        ValidationHandler(val_data=None, eval_fn=None)
    with pytest.raises(ValueError, match="max_checkpoints must be a positive integer, got 0"):
        CheckpointHandler(str(tmp_path), max_checkpoints=0)
    with pytest.raises(ValueError, match="monitor must be one of the metric objects"):
        CheckpointHandler(str(tmp_path), save_best=True)
    with pytest.raises(ValueError, match="mode must be 'auto', 'min' or 'max', got 'best'"):
        CheckpointHandler(str(tmp_path), monitor=metric, save_best=True, mode='best')
    with pytest.raises(ValueError, match="CompositeEvalMetric \\('composite'\\) cannot be"):
        EarlyStoppingHandler(monitor=gluon.metric.CompositeEvalMetric([metric]))
    with pytest.raises(ValueError, match="patience must be a non-negative integer, got -1"):
        EarlyStoppingHandler(monitor=metric, patience=-1)
    (tmp_path / 'model-epochXbatch1.params').write_bytes(b'')
    est = _estimator()
    est.logger.disabled = True
    with pytest.raises(ValueError, match="cannot parse the checkpoint file model-epochXbatch1"):
        est.fit(_loader(), epochs=1,
                event_handlers=[CheckpointHandler(str(tmp_path), resume_from_checkpoint=True)])


@requires_gpu
def test_fit_on_gpu_matches_cpu(tmp_path):
    _twin_nets(tmp_path, [cpu(0)])         # writes the initial parameters
    results = []
    for device in (cpu(0), gpu(0)):
        net = _net()
        net.load_parameters(str(tmp_path / 'init.params'), device=device)
        est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=_sgd(net),
                        device=device)
        est.logger.disabled = True
        est.fit(_loader(), epochs=2)
        results.append(_params(net))
    for name in results[0]:
        assert_almost_equal(results[1][name], results[0][name], rtol=1e-4, atol=1e-5)
