"""Losses against NumPy references (values and gradients), metrics, and gluon.utils."""
import warnings

import numpy as onp
import pytest

from pymx import autograd, cpu, cpu_pinned, np
from pymx.gluon import loss as gloss
from pymx.gluon import metric, utils


def _rand(*shape, seed=0):
    return onp.random.default_rng(seed).standard_normal(shape).astype('float32')


def _log_softmax(x, axis=-1):
    x = x.astype('float64')
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - onp.log(onp.exp(shifted).sum(axis=axis, keepdims=True))


def _loss_and_grad(loss_fn, pred, *args):
    p = np.array(pred)
    p.attach_grad()
    with autograd.record():
        out = loss_fn(p, *[np.array(a) if isinstance(a, onp.ndarray) else a for a in args])
    out.backward()
    return out.asnumpy(), p.grad.asnumpy()


def test_softmax_cross_entropy_sparse_and_dense():
    pred, label = _rand(4, 3), onp.array([0, 2, 1, 2], dtype='float32')
    out, grad = _loss_and_grad(gloss.SoftmaxCrossEntropyLoss(), pred, label)
    logp = _log_softmax(pred)
    onp.testing.assert_allclose(out, -logp[onp.arange(4), label.astype(int)], 1e-5)
    onehot = onp.eye(3)[label.astype(int)]
    onp.testing.assert_allclose(grad, onp.exp(logp) - onehot, 1e-5, 1e-6)
    dense = onp.abs(_rand(4, 3, seed=1))
    dense /= dense.sum(-1, keepdims=True)
    out, _ = _loss_and_grad(gloss.SoftmaxCELoss(sparse_label=False, weight=2.0), pred, dense)
    onp.testing.assert_allclose(out, -2 * (logp * dense).sum(-1), 1e-5)
    # Non-batch axes are averaged: (N, T, C) -> (N,).
    seq, seq_label = _rand(2, 5, 3), onp.array([[0, 1, 2, 0, 1]] * 2, dtype='float32')
    out, _ = _loss_and_grad(gloss.SoftmaxCrossEntropyLoss(), seq, seq_label)
    lp = _log_softmax(seq)
    ref = -onp.take_along_axis(lp, seq_label.astype(int)[..., None], -1)[..., 0].mean(-1)
    onp.testing.assert_allclose(out, ref, 1e-5)
    out, _ = _loss_and_grad(gloss.SoftmaxCrossEntropyLoss(from_logits=True), lp.astype('float32'),
                            seq_label)
    onp.testing.assert_allclose(out, ref, 1e-5)


def test_sigmoid_bce():
    pred, label = _rand(3, 4), (onp.random.default_rng(1).random((3, 4)) > 0.5).astype('float32')
    out, grad = _loss_and_grad(gloss.SigmoidBinaryCrossEntropyLoss(), pred, label)
    sig = 1 / (1 + onp.exp(-pred.astype('float64')))
    ref = -(label * onp.log(sig) + (1 - label) * onp.log(1 - sig))
    onp.testing.assert_allclose(out, ref.mean(-1), 1e-5)
    onp.testing.assert_allclose(grad, (sig - label) / 4, 1e-5, 1e-6)
    pos_weight = onp.full((3, 4), 3.0, 'float32')
    bce = gloss.SigmoidBCELoss()
    p = np.array(pred)
    weighted = bce(p, np.array(label), None, np.array(pos_weight)).asnumpy()
    ref_w = -(3 * label * onp.log(sig) + (1 - label) * onp.log(1 - sig))
    onp.testing.assert_allclose(weighted, ref_w.mean(-1), 1e-5)
    probs = sig.astype('float32')
    out, _ = _loss_and_grad(gloss.SigmoidBCELoss(from_sigmoid=True), probs, label)
    onp.testing.assert_allclose(out, ref.mean(-1), 1e-4)


def test_l1_l2_huber_and_sample_weight():
    pred, label = _rand(3, 4), _rand(3, 4, seed=1)
    d = (label - pred).astype('float64')
    out, grad = _loss_and_grad(gloss.L2Loss(), pred, label)
    onp.testing.assert_allclose(out, (d ** 2 / 2).mean(-1), 1e-5)
    onp.testing.assert_allclose(grad, -d / 4, 1e-5, 1e-6)
    out, _ = _loss_and_grad(gloss.L1Loss(), pred, label)
    onp.testing.assert_allclose(out, onp.abs(d).mean(-1), 1e-5)
    out, _ = _loss_and_grad(gloss.HuberLoss(rho=0.5), pred, label)
    a = onp.abs(d)
    onp.testing.assert_allclose(out, onp.where(a > 0.5, a - 0.25, a ** 2).mean(-1), 1e-5)
    sample_weight = onp.array([[1.0], [0.0], [2.0]], 'float32')
    out, _ = _loss_and_grad(gloss.L1Loss(), pred, label, sample_weight)
    onp.testing.assert_allclose(out, (onp.abs(d) * sample_weight).mean(-1), 1e-5)
    flat_label = _rand(3, seed=3)
    out, _ = _loss_and_grad(gloss.L2Loss(), _rand(3, 1), flat_label)  # label reshaped like pred
    assert out.shape == (3,)


def test_loss_hybridized_matches():
    pred, label = _rand(4, 3), onp.array([0, 2, 1, 2], 'float32')
    fn = gloss.SoftmaxCrossEntropyLoss()
    expected = _loss_and_grad(fn, pred, label)
    fn.hybridize()
    for _ in range(2):
        got = _loss_and_grad(fn, pred, label)
        onp.testing.assert_allclose(got[0], expected[0], 1e-6)
        onp.testing.assert_allclose(got[1], expected[1], 1e-6)


def test_accuracy_lists_on_several_devices():
    acc = metric.Accuracy()
    assert acc.get()[0] == 'accuracy' and onp.isnan(acc.get()[1])
    preds = [np.array([[0.1, 0.9], [0.8, 0.2]], device=cpu(0)),
             np.array([[0.3, 0.7], [0.6, 0.4]], device=cpu(1))]
    labels = [np.array([1, 1], device=cpu(0)), np.array([1.0, 0.0], device=cpu(1))]
    acc.update(labels, preds)
    assert acc.get() == ('accuracy', 0.75)
    acc.update(onp.array([0, 1]), onp.array([0, 1]))  # same shapes: compared directly
    assert acc.get() == ('accuracy', 5 / 6)
    with pytest.raises(ValueError, match='Shape of labels 2 does not match shape of predictions '
                                         '1'):
        acc.update(labels, preds[:1])
    acc.reset()
    assert acc.num_inst == 0 and acc.sum_metric == 0.0


def test_other_metrics():
    pred = onp.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3], [0.3, 0.1, 0.6]])
    label = onp.array([2, 0, 1])
    top2 = metric.TopKAccuracy(top_k=2)
    top2.update([label], [pred])
    assert top2.get() == ('top_k_accuracy_2', 2 / 3)
    ce = metric.CrossEntropy()
    ce.update(label, pred)
    onp.testing.assert_allclose(ce.get()[1], -onp.log([0.3, 0.5, 0.1]).mean())
    y, yhat = onp.array([1.0, 2.0, 3.0]), onp.array([1.5, 2.0, 1.0])
    for klass, value in ((metric.MAE, onp.abs(y - yhat).mean()),
                         (metric.MSE, ((y - yhat) ** 2).mean()),
                         (metric.RMSE, onp.sqrt(((y - yhat) ** 2).mean()))):
        m = klass()
        m.update(np.array(y), np.array(yhat))
        onp.testing.assert_allclose(m.get()[1], value, 1e-6)
    f1 = metric.F1()
    f1.update(onp.array([1, 0, 1, 1]), onp.array([[0.2, 0.8], [0.6, 0.4], [0.7, 0.3],
                                                 [0.1, 0.9]]))
    onp.testing.assert_allclose(f1.get()[1], 0.8)  # precision 1, recall 2/3
    comp = metric.create(['acc', 'mse'])
    comp.update([np.array([0, 1])], [np.array([[0.9, 0.1], [0.2, 0.8]])])
    names, _ = comp.get()
    assert names == ['accuracy', 'mse']
    with pytest.raises(ValueError, match="Unknown metric 'bogus'"):
        metric.create('bogus')


def test_split_data_and_load():
    x = np.array(onp.arange(10, dtype='float32').reshape(5, 2))
    parts = utils.split_data(x, 2, even_split=False)
    assert [p.shape for p in parts] == [(3, 2), (2, 2)]  # the first r slices get one more
    with pytest.raises(ValueError, match=r"data with shape \(5, 2\) cannot be evenly split into 2 "
                                         r"slices along axis 0. Use a batch size that's multiple "
                                         r"of 2 or set even_split=False"):
        utils.split_data(x, 2)
    cols = utils.split_data(x, 2, batch_axis=1)
    onp.testing.assert_array_equal(cols[1].asnumpy(), x.asnumpy()[:, 1:])
    assert len(utils.split_data(x, 1)) == 1
    loaded = utils.split_and_load(onp.ones((4, 3), 'float32'), [cpu(0), cpu(1)])
    assert [a.device for a in loaded] == [cpu(0), cpu(1)] and loaded[1].shape == (2, 3)
    single = utils.split_and_load(x, [cpu(1)])  # one device: no divisibility check
    assert single[0].device == cpu(1) and single[0].shape == (5, 2)
    tiny = utils.split_data(np.ones((1, 2)), 2, even_split=False)
    assert [t.shape for t in tiny] == [(1, 2), (0, 2)]


def test_split_along_the_batch_is_a_view_and_keeps_pinned_memory():
    """Slices along axis 0 share the batch's memory: no host copy, and a pinned batch's slices
    stay pinned for their copies to the GPUs. Under autograd they are recorded slices."""
    x = np.array(onp.arange(12, dtype='float32').reshape(6, 2)).copyto(cpu_pinned(0))
    parts = utils.split_data(x, 4, even_split=False)
    assert [p.device for p in parts] == [cpu_pinned(0)] * 4
    assert parts[0]._data_address() == x._data_address()
    onp.testing.assert_array_equal(parts[1].asnumpy(), [[4, 5], [6, 7]])
    loaded = utils.split_and_load(x, [cpu(1), cpu(2)])
    onp.testing.assert_array_equal(loaded[1].asnumpy(), x.asnumpy()[3:])
    w = np.ones((4, 2))
    w.attach_grad()
    with autograd.record():
        halves = utils.split_data(w * 2, 2)
        total = (halves[0] * 3).sum() + halves[1].sum()
    total.backward()
    onp.testing.assert_array_equal(w.grad.asnumpy(), [[6, 6], [6, 6], [2, 2], [2, 2]])


def test_clip_global_norm():
    a, b = np.array([3.0, 0.0]), np.array([[4.0]], device=cpu(1))
    norm = utils.clip_global_norm([a, b], 1.0)
    assert norm == pytest.approx(5.0)
    onp.testing.assert_allclose(a.asnumpy(), [0.6, 0.0], 1e-6)
    onp.testing.assert_allclose(b.asnumpy(), [[0.8]], 1e-6)
    c = np.array([0.3, 0.4])
    assert utils.clip_global_norm([c], 10.0) == pytest.approx(0.5)
    onp.testing.assert_allclose(c.asnumpy(), [0.3, 0.4], 1e-6)  # under the limit: unchanged
    with pytest.warns(UserWarning, match='nan or inf is detected'):
        utils.clip_global_norm([np.array([float('inf')])], 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        lazy = utils.clip_global_norm([np.array([1.0])], 1.0, check_isfinite=False)
    assert float(lazy.item()) == pytest.approx(1.0)
