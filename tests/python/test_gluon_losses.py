"""KLDivLoss, Hinge, SquaredHinge, Logistic, Triplet, PoissonNLL, CosineEmbedding and SDML
losses: values against float64 NumPy formulas, gradients against central differences, weight and
sample_weight, hybridized == imperative, and the errors for bad arguments."""
import math

import numpy as onp
import pytest

from conftest import requires_gpu
from pymx import autograd, cpu, gpu, np
from pymx.gluon import loss as gloss
from pymx.test_utils import assert_almost_equal, check_numeric_gradient

N = 4  # batch


def _normal(*shape, seed=0):
    return onp.random.default_rng(seed).standard_normal(shape)


def _signs(*shape, seed=1):
    return onp.where(onp.random.default_rng(seed).random(shape) > 0.5, 1.0, -1.0)


def _log_softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - onp.log(onp.exp(shifted).sum(axis=axis, keepdims=True))


def _softrelu(x):
    return onp.log1p(onp.exp(x))


def _probabilities(*shape, seed=2):
    p = onp.random.default_rng(seed).random(shape) + 0.05
    return p / p.sum(-1, keepdims=True)


def _cosine(x, y):
    dot = (x * y).sum(-1, keepdims=True)
    return dot / onp.maximum(onp.linalg.norm(x, axis=-1, keepdims=True) *
                             onp.linalg.norm(y, axis=-1, keepdims=True), 1e-12)


# Each case: (id, loss factory, [pred, *other inputs] as float64 NumPy, reference). The reference
# returns the elementwise loss (batch axis first) that the block averages over the non-batch
# axes, so that sample_weight can be applied to it in the test.
_KL_LABEL = _probabilities(N, 5)
_COUNTS = onp.random.default_rng(3).poisson(2.0, size=(N, 3)).astype('float64')
_COS_LABEL = onp.array([1.0, -1.0, 1.0, -1.0])
CASES = [
    ('kl_logits', lambda **kw: gloss.KLDivLoss(**kw),
     [_log_softmax(_normal(N, 5)), _KL_LABEL],
     lambda p, y: y * (onp.log(y) - p)),
    ('kl_softmax', lambda **kw: gloss.KLDivLoss(from_logits=False, **kw),
     [_normal(N, 5), _KL_LABEL],
     lambda p, y: y * (onp.log(y) - _log_softmax(p))),
    ('hinge', lambda **kw: gloss.HingeLoss(**kw),
     [_normal(N, 3), _signs(N, 3)],
     lambda p, y: onp.maximum(0, 1 - p * y)),
    ('hinge_margin', lambda **kw: gloss.HingeLoss(margin=0.5, **kw),
     [_normal(N, 3), _signs(N, 3)],
     lambda p, y: onp.maximum(0, 0.5 - p * y)),
    ('squared_hinge', lambda **kw: gloss.SquaredHingeLoss(margin=1.5, **kw),
     [_normal(N, 3), _signs(N, 3)],
     lambda p, y: onp.maximum(0, 1.5 - p * y) ** 2),
    ('logistic_signed', lambda **kw: gloss.LogisticLoss(**kw),
     [3 * _normal(N, 3), _signs(N, 3)],
     lambda p, y: _softrelu(-p * y)),
    ('logistic_binary', lambda **kw: gloss.LogisticLoss(label_format='binary', **kw),
     [3 * _normal(N, 3), (_signs(N, 3) + 1) / 2],
     lambda p, z: _softrelu(-p * (2 * z - 1))),
    ('poisson_logits', lambda **kw: gloss.PoissonNLLLoss(**kw),
     [0.5 * _normal(N, 3), _COUNTS],
     lambda p, t: onp.exp(p) - t * p),
    ('poisson_rate_full', lambda **kw: gloss.PoissonNLLLoss(from_logits=False, compute_full=True,
                                                            **kw),
     [onp.exp(0.5 * _normal(N, 3)), _COUNTS],
     lambda p, t: p - t * onp.log(p + 1e-8) + onp.where(
         t > 1, t * onp.log(onp.maximum(t, 1)) - t + 0.5 * onp.log(2 * math.pi *
                                                                   onp.maximum(t, 1)), 0)),
    ('cosine', lambda **kw: gloss.CosineEmbeddingLoss(**kw),
     [_normal(N, 6), _normal(N, 6, seed=5), _COS_LABEL],
     lambda a, b, y: onp.where(y[:, None] == 1, 1 - _cosine(a, b),
                               onp.clip(_cosine(a, b), 0, 1))),
    ('cosine_margin', lambda **kw: gloss.CosineEmbeddingLoss(margin=0.2, **kw),
     [_normal(N, 6), _normal(N, 6, seed=5), _COS_LABEL],
     lambda a, b, y: onp.where(y[:, None] == 1, 1 - _cosine(a, b),
                               onp.clip(_cosine(a, b) - 0.2, 0, 0.8))),
]


def _per_sample(elementwise, sample_weight=None, weight=1.0):
    if sample_weight is not None:
        elementwise = elementwise * sample_weight
    return weight * elementwise.reshape(len(elementwise), -1).mean(-1)


def _call(block, inputs, sample_weight=None):
    arrays = [np.array(x.astype('float32')) for x in inputs]
    if sample_weight is not None:  # positional: a HybridBlock takes arrays only
        arrays.append(np.array(sample_weight.astype('float32')))
    return block(*arrays)


@pytest.mark.parametrize('case', CASES, ids=[c[0] for c in CASES])
def test_loss_values_weights_and_gradient(case):
    _, make, inputs, reference = case
    elementwise = reference(*inputs)
    got = _call(make(), inputs)
    assert got.shape == (N,) and got.dtype == onp.float32
    assert_almost_equal(got, _per_sample(elementwise), rtol=1e-5, atol=1e-6)
    sample_weight = onp.array([[0.5], [0.0], [2.0], [1.0]])
    weighted = _call(make(weight=3.0), inputs,
                     sample_weight=sample_weight)
    assert_almost_equal(weighted, _per_sample(elementwise, sample_weight, 3.0), rtol=1e-5,
                        atol=1e-6)
    # d/dpred by central differences in float64; the other inputs are held fixed.
    block, others = make(), [np.array(x) for x in inputs[1:]]
    check_numeric_gradient(lambda pred: block(pred, *others), [inputs[0]])


@pytest.mark.parametrize('case', CASES, ids=[c[0] for c in CASES])
def test_hybridized_loss_matches_imperative(case):
    _, make, inputs, _ = case
    block = make(weight=2.0)
    arrays = [np.array(x.astype('float32')) for x in inputs]

    def run():
        pred = arrays[0].copy()
        pred.attach_grad()
        with autograd.record():
            out = block(pred, *arrays[1:])
        out.backward()
        return out.asnumpy(), pred.grad.asnumpy()

    imperative = run()
    block.hybridize()
    for _ in range(2):  # the trace, then the replay
        hybrid = run()
        assert_almost_equal(hybrid[0], imperative[0], rtol=1e-6, atol=1e-7)
        assert_almost_equal(hybrid[1], imperative[1], rtol=1e-6, atol=1e-7)


def test_label_reshaped_like_pred():
    pred, label = _normal(N, 3), _signs(N * 3)  # same size, flat
    got = _call(gloss.HingeLoss(), [pred, label])
    assert_almost_equal(got, onp.maximum(0, 1 - pred * label.reshape(N, 3)).mean(-1), rtol=1e-5)


def test_kl_div_loss_along_another_axis_and_zero_label():
    pred, label = _normal(N, 3, 2), _probabilities(N, 2, 3).transpose(0, 2, 1)
    got = _call(gloss.KLDivLoss(from_logits=False, axis=1), [pred, label])
    ref = label * (onp.log(label) - _log_softmax(pred, axis=1))
    assert_almost_equal(got, ref.reshape(N, -1).mean(-1), rtol=1e-5)
    # A zero probability contributes 0, the limit of y*log(y).
    label = onp.array([[0.0, 1.0]])
    got = _call(gloss.KLDivLoss(), [onp.log(onp.array([[0.5, 0.5]])), label])
    assert_almost_equal(got, [math.log(2) / 2], rtol=1e-5)


def _triplet_reference(pred, positive, negative, margin):
    gap = ((positive - pred) ** 2 - (negative - pred) ** 2).reshape(len(pred), -1).sum(-1)
    return onp.maximum(gap + margin, 0)


def test_triplet_loss():
    pred, positive, negative = _normal(N, 2, 3), _normal(N, 2, 3, seed=1), \
        _normal(N, 2, 3, seed=2)
    for margin in (1, 4.0):
        got = _call(gloss.TripletLoss(margin=margin), [pred, positive, negative])
        assert got.shape == (N,)
        assert_almost_equal(got, _triplet_reference(pred, positive, negative, margin),
                            rtol=1e-5, atol=1e-6)
    sample_weight = onp.array([0.5, 0.0, 2.0, 1.0])
    got = _call(gloss.TripletLoss(margin=4.0, weight=2.0), [pred, positive, negative],
                sample_weight=sample_weight)
    assert_almost_equal(got, 2 * sample_weight * _triplet_reference(pred, positive, negative, 4.0),
                        rtol=1e-5, atol=1e-6)
    block = gloss.TripletLoss(margin=4.0)
    check_numeric_gradient(block, [pred, positive, negative])
    flat = [x.reshape(N, -1) for x in (positive, negative)]  # reshaped like pred
    assert_almost_equal(_call(block, [pred] + flat),
                        _triplet_reference(pred, positive, negative, 4.0), rtol=1e-5)
    block.hybridize()
    assert_almost_equal(_call(block, [pred, positive, negative]),
                        _triplet_reference(pred, positive, negative, 4.0), rtol=1e-5)


def test_poisson_nll_zero_targets_are_finite_with_compute_full():
    pred, target = onp.full((2, 2), 0.5), onp.array([[0.0, 1.0], [2.0, 0.0]])
    got = _call(gloss.PoissonNLLLoss(compute_full=True), [pred, target]).asnumpy()
    stirling_2 = 2 * math.log(2) - 2 + 0.5 * math.log(4 * math.pi)
    ref = onp.exp(0.5) - target * 0.5
    ref[1, 0] += stirling_2
    assert onp.isfinite(got).all()
    assert_almost_equal(got, ref.mean(-1), rtol=1e-5)


def _sdml_reference(x1, x2, smoothing, weight=1.0):
    n = len(x1)
    distances = ((x1[:, None, :] - x2[None, :, :]) ** 2).sum(-1)
    log_p = _log_softmax(-distances, axis=1)
    labels = onp.where(onp.eye(n) == 1, 1 - smoothing, smoothing / (n - 1))
    return weight * (labels * (onp.log(labels + 1e-12) - log_p)).mean(-1)


def test_sdml_loss():
    x1, x2 = 0.5 * _normal(N, 3), 0.5 * _normal(N, 3, seed=1)
    got = _call(gloss.SDMLLoss(), [x1, x2])
    assert got.shape == (N,)
    assert_almost_equal(got, _sdml_reference(x1, x2, 0.3), rtol=1e-5, atol=1e-6)
    weighted = gloss.SDMLLoss(smoothing_parameter=0.1, weight=0.5)
    assert_almost_equal(_call(weighted, [x1, x2]), _sdml_reference(x1, x2, 0.1, 0.5), rtol=1e-5,
                        atol=1e-6)
    check_numeric_gradient(gloss.SDMLLoss(), [x1, x2])
    # Aligned pairs cost less than shuffled ones.
    aligned = _call(gloss.SDMLLoss(), [x1, x1 + 0.01]).asnumpy().mean()
    shuffled = _call(gloss.SDMLLoss(), [x1, x1[::-1] + 0.01]).asnumpy().mean()
    assert aligned < shuffled
    weighted.hybridize()
    for _ in range(2):
        assert_almost_equal(_call(weighted, [x1, x2]), _sdml_reference(x1, x2, 0.1, 0.5),
                            rtol=1e-5, atol=1e-6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="label_format must be 'signed' or 'binary', got 'bool'"):
        gloss.LogisticLoss(label_format='bool')
    with pytest.raises(ValueError, match=r"smoothing_parameter must be in \[0, 1\), got 1.5"):
        gloss.SDMLLoss(smoothing_parameter=1.5)
    with pytest.raises(ValueError, match="needs a batch of at least 2 pairs.*got 1"):
        gloss.SDMLLoss()(np.ones((1, 3)), np.ones((1, 3)))
    with pytest.raises(ValueError, match=r"got \(2, 3\) and \(2, 4\)"):
        gloss.SDMLLoss()(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="weight must be a number, got str"):
        gloss.HingeLoss(weight='2')(np.ones((2, 3)), np.ones((2, 3)))


@requires_gpu
@pytest.mark.parametrize('case', CASES, ids=[c[0] for c in CASES])
def test_gpu_loss_and_gradient_match_cpu(case):
    _, make, inputs, _ = case
    results = []
    for device in (cpu(), gpu(0)):
        arrays = [np.array(x.astype('float32'), device=device) for x in inputs]
        arrays[0].attach_grad()
        with autograd.record():
            out = make(weight=2.0)(*arrays)
        out.backward()
        results.append((out.asnumpy(), arrays[0].grad.asnumpy()))
    assert_almost_equal(results[1][0], results[0][0], rtol=1e-5, atol=1e-6)
    assert_almost_equal(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)


@requires_gpu
def test_gpu_sdml_triplet_and_ctc_match_cpu():
    x1, x2, x3 = _normal(N, 3), _normal(N, 3, seed=1), _normal(N, 3, seed=2)
    ctc_inputs = [_normal(2, 5, 4), onp.array([[0, 1, 1], [2, -1, -1]]), onp.array([5, 4]),
                  onp.array([3, 1])]
    for block, inputs in ((gloss.SDMLLoss(), [x1, x2]), (gloss.TripletLoss(), [x1, x2, x3]),
                          (gloss.CTCLoss(), ctc_inputs)):
        cpu_out = block(*[np.array(x.astype('float32')) for x in inputs])
        gpu_out = block(*[np.array(x.astype('float32'), device=gpu(0)) for x in inputs])
        assert_almost_equal(gpu_out, cpu_out, rtol=1e-5, atol=1e-6)


def _ctc_reference(logits, label, length=None):
    """-log p(label | logits) for one (T, C) sequence by the forward algorithm in float64."""
    logits = logits[:length]
    log_p = _log_softmax(logits)
    blank = logits.shape[1] - 1
    extended = [blank]
    for symbol in label:
        extended += [int(symbol), blank]
    alpha = onp.full(len(extended), -onp.inf)
    alpha[:2] = log_p[0, extended[:2]]
    for t in range(1, len(log_p)):
        previous = alpha.copy()
        for s in range(len(extended)):
            total = previous[s]
            if s >= 1:
                total = onp.logaddexp(total, previous[s - 1])
            if s >= 2 and extended[s] != blank and extended[s] != extended[s - 2]:
                total = onp.logaddexp(total, previous[s - 2])
            alpha[s] = total + log_p[t, extended[s]]
    return -onp.logaddexp(alpha[-1], alpha[-2]) if label else -alpha[-1]


def test_ctc_reference_agrees_with_enumerating_every_path():
    logits, label = _normal(3, 3), [0, 1]
    log_p, total = _log_softmax(logits), 0.0
    for path in onp.ndindex(3, 3, 3):  # collapse repeats, then drop blanks (class 2)
        collapsed = [c for i, c in enumerate(path) if i == 0 or c != path[i - 1]]
        if [c for c in collapsed if c != 2] == label:
            total += math.exp(sum(log_p[t, c] for t, c in enumerate(path)))
    assert _ctc_reference(logits, label) == pytest.approx(-math.log(total))


def test_ctc_loss_values_lengths_layouts_and_gradient():
    logits = _normal(3, 6, 4)
    labels = [[0, 1, 1], [2], [1, 0]]  # the repeated 1 1 needs a blank between
    padded = onp.array([row + [-1] * (3 - len(row)) for row in labels], dtype='float64')
    want = [_ctc_reference(logits[n], labels[n]) for n in range(3)]
    got = _call(gloss.CTCLoss(), [logits, padded])
    assert got.shape == (3,)
    assert_almost_equal(got, want, rtol=1e-5)
    tnc = gloss.CTCLoss(layout='TNC', label_layout='TN', weight=2.0)
    assert_almost_equal(_call(tnc, [logits.transpose(1, 0, 2), padded.T]), 2 * onp.array(want),
                        rtol=1e-5)
    # Explicit lengths: the labels' padding may hold anything, inputs stop early.
    pred_lengths, label_lengths = onp.array([6, 4, 5.0]), onp.array([3, 1, 2.0])
    garbage = onp.where(padded < 0, 0, padded)
    want = [_ctc_reference(logits[n], labels[n], int(pred_lengths[n])) for n in range(3)]
    got = _call(gloss.CTCLoss(), [logits, garbage, pred_lengths, label_lengths])
    assert_almost_equal(got, want, rtol=1e-5)
    block, label = gloss.CTCLoss(), np.array(padded[:2])
    check_numeric_gradient(lambda pred: block(pred, label), [logits[:2, :4]])
    block.hybridize()
    for _ in range(2):
        assert_almost_equal(_call(block, [logits, garbage, pred_lengths, label_lengths]), want,
                            rtol=1e-5)


def test_ctc_loss_bad_layouts():
    with pytest.raises(ValueError, match="layout must be 'NTC' or 'TNC', got 'NCT'"):
        gloss.CTCLoss(layout='NCT')
    with pytest.raises(ValueError, match="label_layout must be 'NT' or 'TN', got 'N'"):
        gloss.CTCLoss(label_layout='N')
