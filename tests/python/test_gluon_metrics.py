"""Loss, BinaryAccuracy, Perplexity, CrossEntropy, NegativeLogLikelihood, PearsonCorrelation,
PCC, MCC, F1, Fbeta, MeanPairwiseDistance, MeanCosineSimilarity, CustomMetric and np(): each over
several update() calls (pymx and NumPy inputs) against a NumPy computation on all the data,
reset, get / get_name_value, metric.create by name, and the errors for bad input."""
import math

import numpy as onp
import pytest

from conftest import requires_gpu
from pymx import cpu, gpu, np
from pymx.gluon import metric

RNG_SEEDS = (0, 1, 2)


def _batches(make, seeds=RNG_SEEDS):
    """One (label, pred) batch per seed, as float64 NumPy arrays."""
    return [make(onp.random.default_rng(seed)) for seed in seeds]


def _feed(m, batches):
    """Updates `m` with each batch; the even ones as pymx arrays, the odd ones as NumPy."""
    for i, (label, pred) in enumerate(batches):
        if i % 2 == 0:
            m.update([np.array(label)], [np.array(pred)])
        else:
            m.update(label, pred)


def _concat(batches):
    labels, preds = zip(*batches)
    return onp.concatenate(labels), onp.concatenate(preds)


def _check_get_and_reset(m, name, value, rtol=1e-6):
    got_name, got = m.get()
    assert got_name == name
    onp.testing.assert_allclose(got, value, rtol=rtol, atol=1e-12)
    assert m.get_name_value()[0][0] == name
    onp.testing.assert_allclose(m.get_name_value()[0][1], value, rtol=rtol, atol=1e-12)
    m.reset()
    assert m.num_inst == 0
    assert math.isnan(m.get()[1])


def _probabilities(rng, n, k):
    p = rng.random((n, k)) + 0.01
    return p / p.sum(-1, keepdims=True)


def test_loss_metric_averages_every_value():
    batches = _batches(lambda rng: (None, rng.random((3, 2))))
    m = metric.Loss()
    for i, (_, pred) in enumerate(batches):
        m.update(None, np.array(pred) if i % 2 == 0 else [pred])
    values = onp.concatenate([p.ravel() for _, p in batches])
    _check_get_and_reset(m, 'loss', values.mean())


def test_binary_accuracy_with_scalar_and_per_class_thresholds():
    batches = _batches(lambda rng: ((rng.random((5, 3)) > 0.5).astype('float64'),
                                    rng.random((5, 3))))
    m = metric.BinaryAccuracy(threshold=0.6)
    _feed(m, batches)
    label, pred = _concat(batches)
    _check_get_and_reset(m, 'binary_accuracy', ((pred > 0.6) == label).mean())
    thresholds = onp.array([0.2, 0.5, 0.8])
    m = metric.BinaryAccuracy(threshold=np.array(thresholds))
    _feed(m, batches)
    _check_get_and_reset(m, 'binary_accuracy', ((pred > thresholds) == label).mean())
    with pytest.raises(ValueError, match="threshold has 2 values for predictions with 3 classes"):
        metric.BinaryAccuracy(threshold=onp.array([0.5, 0.5])).update(label, pred)


def _nll(label, prob):
    return -onp.log(prob[onp.arange(len(label)), label.astype(int)])


def test_perplexity_cross_entropy_and_nll():
    batches = _batches(lambda rng: (rng.integers(0, 4, 6).astype('float64'),
                                    _probabilities(rng, 6, 4)))
    label, pred = _concat(batches)
    per_sample = _nll(label, pred)
    m = metric.Perplexity()
    _feed(m, batches)
    _check_get_and_reset(m, 'perplexity', math.exp(per_sample.mean()))
    m = metric.Perplexity(ignore_label=2)
    _feed(m, batches)
    _check_get_and_reset(m, 'perplexity', math.exp(per_sample[label != 2].mean()))
    m = metric.CrossEntropy()
    _feed(m, batches)
    _check_get_and_reset(m, 'cross-entropy', per_sample.mean())
    m = metric.NegativeLogLikelihood()
    _feed(m, batches)
    _check_get_and_reset(m, 'nll-loss', per_sample.mean())
    # Logits along axis 1 of (N, classes, T) predictions.
    rng = onp.random.default_rng(3)
    logits, seq_label = rng.standard_normal((2, 4, 3)), rng.integers(0, 4, (2, 3))
    log_p = logits - onp.log(onp.exp(logits).sum(axis=1, keepdims=True))
    want = -onp.take_along_axis(log_p, seq_label[:, None, :], axis=1).mean()
    m = metric.Perplexity(axis=1, from_logits=True)
    m.update(np.array(seq_label), np.array(logits))
    _check_get_and_reset(m, 'perplexity', math.exp(want), rtol=1e-5)
    with pytest.raises(ValueError, match=r"Labels of shape \(5,\) do not match predictions of "
                                         r"shape \(6, 4\)"):
        metric.Perplexity().update(onp.zeros(5), onp.ones((6, 4)) / 4)


def test_pearson_correlation_over_updates():
    batches = _batches(lambda rng: (rng.standard_normal((4, 2)), None))
    batches = [(label, label + onp.random.default_rng(9).standard_normal((4, 2)) + 1.0)
               for label, _ in batches]
    m = metric.PearsonCorrelation()
    _feed(m, batches)
    label, pred = _concat(batches)
    want = onp.corrcoef(label.ravel(), pred.ravel())[0, 1]
    _check_get_and_reset(m, 'pearsonr', want)


def _counts(label, pred_label):
    tp = float(((pred_label == 1) & (label == 1)).sum())
    fp = float(((pred_label == 1) & (label == 0)).sum())
    fn = float(((pred_label == 0) & (label == 1)).sum())
    tn = float(((pred_label == 0) & (label == 0)).sum())
    return tp, fp, fn, tn


def _fbeta(tp, fp, fn, beta):
    precision, recall = tp / max(tp + fp, 1e-12), tp / max(tp + fn, 1e-12)
    if precision + recall == 0:
        return 0.0
    return (1 + beta ** 2) * precision * recall / (beta ** 2 * precision + recall)


def _binary_batches():
    return _batches(lambda rng: (rng.integers(0, 2, 8).astype('float64'),
                                 _probabilities(rng, 8, 2)))


def test_mcc_and_binary_f_scores():
    batches = _binary_batches()
    label, pred = _concat(batches)
    tp, fp, fn, tn = _counts(label, (pred[:, 1] > 0.5).astype(int))
    m = metric.MCC()
    _feed(m, batches)
    want = (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    _check_get_and_reset(m, 'mcc', want)
    for beta in (0.5, 1, 2):
        m = metric.Fbeta(beta=beta)
        _feed(m, batches)
        _check_get_and_reset(m, 'fbeta', _fbeta(tp, fp, fn, beta))
    m = metric.F1(average='macro')
    _feed(m, batches)
    _check_get_and_reset(m, 'f1', _fbeta(tp, fp, fn, 1))
    # Positive-class probabilities with the label's shape, thresholded.
    m = metric.F1(threshold=0.3)
    m.update(label, pred[:, 1])
    _check_get_and_reset(m, 'f1', _fbeta(*_counts(label, (pred[:, 1] > 0.3).astype(int))[:3],
                                         1))


def test_mcc_replaces_zero_factors_of_the_denominator():
    m = metric.MCC()
    m.update(onp.array([0, 1, 1]), onp.array([[0.2, 0.8]] * 3))  # always positive: TN = FN = 0
    assert m.get() == ('mcc', 0.0)


def test_multiclass_and_multilabel_f1():
    batches = _batches(lambda rng: (rng.integers(0, 3, 10).astype('float64'),
                                    _probabilities(rng, 10, 3)))
    label, pred = _concat(batches)
    predicted = pred.argmax(-1)
    per_class = [_counts((label == k).astype(int), (predicted == k).astype(int))
                 for k in range(3)]
    scores = onp.array([_fbeta(tp, fp, fn, 1) for tp, fp, fn, _ in per_class])
    pooled = [sum(c[i] for c in per_class) for i in range(3)]
    for average, want in (('macro', scores.mean()), ('micro', _fbeta(*pooled, 1)),
                          (None, scores)):
        m = metric.F1(class_type='multiclass', average=average)
        _feed(m, batches)
        _check_get_and_reset(m, 'f1', want)
    multilabel = _batches(lambda rng: ((rng.random((6, 3)) > 0.5).astype('float64'),
                                       rng.random((6, 3))))
    label, pred = _concat(multilabel)
    scores = onp.array([_fbeta(*_counts(label[:, k], (pred[:, k] > 0.5).astype(int))[:3], 2)
                        for k in range(3)])
    m = metric.Fbeta(class_type='multilabel', beta=2, average='macro')
    _feed(m, multilabel)
    _check_get_and_reset(m, 'fbeta', scores.mean())


def _gorodkin(label, pred, k):
    """Multiclass MCC (R_K) from its covariance form."""
    confusion = onp.zeros((k, k))
    for t, p in zip(label.astype(int), pred.astype(int)):
        confusion[t, p] += 1
    t_sum, p_sum = confusion.sum(1), confusion.sum(0)
    correct, s = onp.trace(confusion), confusion.sum()
    return (correct * s - t_sum @ p_sum) / math.sqrt((s ** 2 - p_sum @ p_sum) *
                                                     (s ** 2 - t_sum @ t_sum))


def test_pcc_multiclass_grows_and_matches_mcc_for_two_classes():
    batches = _binary_batches()
    mcc, pcc = metric.MCC(), metric.PCC()
    _feed(mcc, batches)
    _feed(pcc, batches)
    onp.testing.assert_allclose(pcc.get()[1], mcc.get()[1], rtol=1e-12)
    # Class indices up to 4 appear only in the second update: the matrix grows from 2 x 2.
    first = (onp.array([0, 1, 1, 0]), onp.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]))
    second = (onp.array([2, 4, 3, 0, 4]), onp.array([2, 4, 1, 0, 3]))
    pcc = metric.PCC()
    pcc.update([np.array(first[0])], [np.array(first[1])])
    pcc.update(second[0], second[1])
    assert pcc.k == 5
    label = onp.concatenate([first[0], second[0]])
    pred = onp.concatenate([first[1].argmax(1), second[1]])
    _check_get_and_reset(pcc, 'pcc', _gorodkin(label, pred, 5))


def test_mean_pairwise_distance_and_cosine_similarity():
    batches = _batches(lambda rng: (rng.standard_normal((3, 2, 2)), rng.standard_normal((3, 2, 2))))
    label, pred = _concat(batches)
    diff = (label - pred).reshape(len(label), -1)
    for p in (1, 2, 3):
        m = metric.MeanPairwiseDistance(p=p)
        _feed(m, batches)
        want = (onp.abs(diff) ** p).sum(-1) ** (1 / p)
        _check_get_and_reset(m, 'mpd', want.mean())
    m = metric.MeanCosineSimilarity()
    _feed(m, batches)
    cos = (label * pred).sum(-1) / (onp.linalg.norm(label, axis=-1) *
                                     onp.linalg.norm(pred, axis=-1))
    _check_get_and_reset(m, 'cos_sim', cos.mean())
    m = metric.MeanCosineSimilarity()
    m.update(onp.array([3.0, 4.0]), onp.array([1.0, 0.0]))  # 1-D: one pair
    assert m.get() == ('cos_sim', pytest.approx(0.6))


def test_custom_metric_and_np():
    batches = _batches(lambda rng: (rng.standard_normal(5), rng.standard_normal(5)))

    def mean_abs(label, pred):
        assert isinstance(label, onp.ndarray) and isinstance(pred, onp.ndarray)
        return onp.abs(label - pred).mean()

    m = metric.np(mean_abs)
    _feed(m, batches)
    _check_get_and_reset(m, 'mean_abs', onp.mean([mean_abs(*b) for b in batches]))
    totals = metric.CustomMetric(lambda label, pred: (onp.abs(label - pred).sum(), label.size))
    _feed(totals, batches)
    label, pred = _concat(batches)
    _check_get_and_reset(totals, 'custom(<lambda>)', onp.abs(label - pred).mean())
    extra = metric.create(mean_abs, allow_extra_outputs=True)
    extra.update([batches[0][0]], [batches[0][1], onp.zeros(7)])  # the extra output is ignored
    assert extra.get() == ('mean_abs', pytest.approx(mean_abs(*batches[0])))
    with pytest.raises(ValueError, match="Shape of labels 1 does not match shape of predictions 2"):
        metric.np(mean_abs).update([batches[0][0]], [batches[0][1], onp.zeros(7)])
    with pytest.raises(TypeError, match="feval must be callable, got int"):
        metric.CustomMetric(3)


@pytest.mark.parametrize('name,klass', [
    ('loss', metric.Loss), ('binaryaccuracy', metric.BinaryAccuracy),
    ('perplexity', metric.Perplexity), ('pearsonr', metric.PearsonCorrelation),
    ('pearsoncorrelation', metric.PearsonCorrelation), ('pcc', metric.PCC),
    ('mcc', metric.MCC), ('fbeta', metric.Fbeta), ('f1', metric.F1),
    ('nll_loss', metric.NegativeLogLikelihood),
    ('negativeloglikelihood', metric.NegativeLogLikelihood),
    ('meanpairwisedistance', metric.MeanPairwiseDistance),
    ('meancosinesimilarity', metric.MeanCosineSimilarity), ('ce', metric.CrossEntropy),
    ('acc', metric.Accuracy), ('top_k_accuracy', metric.TopKAccuracy),
    ('composite', metric.CompositeEvalMetric)])
def test_create_by_mxnet_name(name, klass):
    assert type(metric.create(name)) is klass


def test_create_passes_arguments_and_composes():
    fbeta = metric.create('Fbeta', beta=2, class_type='multiclass')
    assert fbeta.metrics.beta == 2 and fbeta.metrics.class_type == 'multiclass'
    composite = metric.create(['mcc', 'pcc', lambda label, pred: 1.0])
    label, pred = _concat(_binary_batches())
    composite.update(label, pred)
    names, values = composite.get()
    assert names == ['mcc', 'pcc', 'custom(<lambda>)'] and values[2] == 1.0
    onp.testing.assert_allclose(values[0], values[1], rtol=1e-12)


def test_bad_arguments_and_inputs():
    with pytest.raises(ValueError, match="class_type must be one of .*, got 'ternary'"):
        metric.F1(class_type='ternary')
    with pytest.raises(ValueError, match="average must be 'micro', 'macro' or None, got 'weighted'"):
        metric.Fbeta(average='weighted')
    with pytest.raises(ValueError, match=r"Binary classification needs labels 0 or 1, got labels "
                                         r"\[0, 1, 2\]"):
        metric.MCC().update(onp.array([0, 1, 2]), onp.array([0.1, 0.7, 0.9]))
    with pytest.raises(ValueError, match=r"The shape of prediction \(2, 3\) is wrong for binary"):
        metric.F1().update(onp.array([0, 1]), onp.ones((2, 3)))
    with pytest.raises(ValueError, match="Label 3 is out of range for predictions with 3 classes"):
        metric.F1(class_type='multiclass').update(onp.array([0, 3]), onp.ones((2, 3)))
    f1 = metric.F1(class_type='multiclass')
    f1.update(onp.array([0, 1]), onp.ones((2, 3)))
    with pytest.raises(ValueError, match="number of classes changed from 3 to 4"):
        f1.update(onp.array([0, 1]), onp.ones((2, 4)))
    with pytest.raises(ValueError, match="threshold must be a number or an array, got str"):
        metric.BinaryAccuracy(threshold='0.5').update(onp.array([1]), onp.array([0.7]))
    with pytest.raises(ValueError, match=r"3 labels for 2 predictions \(shape \(2, 2\)\)"):
        metric.NegativeLogLikelihood().update(onp.zeros(3), onp.ones((2, 2)))
    with pytest.raises(TypeError, match="metric must be an EvalMetric, a name, a function or a "
                                        "list, got int"):
        metric.create(3)


@requires_gpu
def test_gpu_inputs_give_the_cpu_result():
    batches = _binary_batches()
    for name in ('mcc', 'pcc', 'f1', 'perplexity', 'binaryaccuracy'):
        results = []
        for device in (cpu(), gpu(0)):
            m = metric.create(name)
            for label, pred in batches:
                m.update([np.array(label, device=device)], [np.array(pred, device=device)])
            results.append(m.get()[1])
        assert results[1] == pytest.approx(results[0], rel=1e-12), name


def test_pearson_correlation_of_a_constant_is_nan():
    m = metric.PearsonCorrelation()
    m.update(onp.ones(4), onp.arange(4.0))
    assert m.get()[0] == 'pearsonr' and math.isnan(m.get()[1])
