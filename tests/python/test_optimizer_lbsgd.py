"""LBSGD: updates through an Updater and through the Trainer against a float64 NumPy
reimplementation of MXNet 1.9.1's rule (gradient accumulation over batch_scale updates, the
warmup strategies and LARS, momentum, wd, clip_gradient, rescale_grad), multi_precision,
states saved mid-way through a large batch, and bad arguments."""
import math

import numpy as onp
import pytest

from conftest import requires_gpu
from pymx import autograd, cpu, gpu, np, optimizer as opt
from pymx.gluon import Parameter, Trainer

SHAPE = (3, 4)


def reference_lbsgd(w, grads, lr=0.01, momentum=0.0, wd=0.0, clip_gradient=None,
                    rescale_grad=1.0, warmup_strategy='linear', warmup_epochs=5, batch_scale=1,
                    updates_per_epoch=32, begin_epoch=0):
    """The weight after each gradient, in float64."""
    mom = onp.zeros_like(w)
    accumulated = onp.zeros_like(w)
    warmup = warmup_epochs * updates_per_epoch
    trajectory = []
    for n, g in enumerate(grads, start=begin_epoch * updates_per_epoch + 1):
        accumulated = accumulated + g
        if n % batch_scale == 0:
            mean = accumulated / batch_scale
            accumulated = onp.zeros_like(w)
            if warmup_strategy == 'lars':
                w2, g2 = (w * w).sum(), (mean * mean).sum()
                mult = min(max(math.sqrt(w2 / (g2 + wd * w2 + 1e-18)), 0.01), 100.0)
            elif n >= warmup:
                mult = batch_scale
            elif warmup <= 1:
                mult = 1.0
            else:
                p = n / warmup
                mult = 1 + (batch_scale - 1) * {'linear': p, 'power2': p * p,
                                                 'sqrt': math.sqrt(p)}[warmup_strategy]
            r = rescale_grad * mean
            if clip_gradient is not None:
                r = onp.clip(r, -clip_gradient, clip_gradient)
            mom = momentum * mom - lr * mult * (r + wd * w)
            w = w + mom
        trajectory.append(w)
    return trajectory


CASES = [
    dict(),
    dict(momentum=0.9, batch_scale=2, warmup_epochs=2, updates_per_epoch=2),
    dict(momentum=0.9, wd=0.01, warmup_strategy='power2', batch_scale=3, warmup_epochs=3,
         updates_per_epoch=2),
    dict(wd=0.1, clip_gradient=0.5, rescale_grad=0.5, warmup_strategy='sqrt', batch_scale=2,
         warmup_epochs=3, updates_per_epoch=1),
    dict(momentum=0.5, wd=0.01, warmup_strategy='lars', batch_scale=2),
    dict(lr=0.5, wd=0.5, warmup_strategy='lars'),
    dict(batch_scale=4, begin_epoch=1, updates_per_epoch=3, warmup_epochs=3),
]


def _data(seed, steps=12):
    rng = onp.random.default_rng(seed)
    to32 = lambda a: a.astype('float32').astype('float64')  # noqa: E731
    return to32(rng.standard_normal(SHAPE)), [to32(rng.standard_normal(SHAPE))
                                              for _ in range(steps)]


def _optimizer(case, **extra):
    kwargs = dict(case, **extra)
    kwargs['learning_rate'] = kwargs.pop('lr', 0.01)
    return opt.create('lbsgd', **kwargs)


@pytest.mark.parametrize('case', CASES, ids=[str(sorted(c.items())) for c in CASES])
def test_updates_match_numpy(case):
    w0, grads = _data(0)
    updater = opt.get_updater(_optimizer(case))
    weight = np.array(w0, dtype='float32')
    want = reference_lbsgd(w0, grads, **case)
    for step, g in enumerate(grads):
        updater(0, np.array(g, dtype='float32'), weight)
        onp.testing.assert_allclose(weight.asnumpy(), want[step], rtol=1e-5, atol=1e-6,
                                    err_msg=f'step {step + 1}')


def test_weight_moves_only_when_a_large_batch_is_complete():
    w0, grads = _data(1, steps=6)
    updater = opt.get_updater(_optimizer(dict(batch_scale=3, momentum=0.9)))
    weight = np.array(w0, dtype='float32')
    moved = []
    for g in grads:
        before = weight.asnumpy()
        updater(0, np.array(g, dtype='float32'), weight)
        moved.append(not onp.array_equal(before, weight.asnumpy()))
    assert moved == [False, False, True, False, False, True]


def test_trainer_accumulates_the_gradient_buffer_by_value():
    # The Trainer's gradient buffer is rewritten by every backward: the accumulator must hold a
    # copy of the earlier gradients, not the buffer.
    case = dict(momentum=0.9, batch_scale=2, warmup_epochs=1, updates_per_epoch=1)
    w0, grads = _data(2, steps=4)
    param = Parameter('weight', shape=SHAPE)
    param.initialize()
    param.set_data(np.array(w0, dtype='float32'))
    trainer = Trainer([param], _optimizer(case))
    for g in grads:
        with autograd.record():
            loss = (param.data() * np.array(g, dtype='float32')).sum()
        loss.backward()
        trainer.step(1)
    want = reference_lbsgd(w0, grads, **case)[-1]
    onp.testing.assert_allclose(param.data().asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_multi_precision_float16_updates_a_float32_master_copy():
    case = dict(momentum=0.9, batch_scale=2, warmup_epochs=2, updates_per_epoch=2)
    w0, grads = _data(3)
    w16 = onp.float16(w0).astype('float64')
    grads16 = [onp.float16(g).astype('float64') for g in grads]
    updater = opt.get_updater(_optimizer(case, multi_precision=True))
    weight = np.array(w16, dtype='float16')
    for g in grads16:
        updater(0, np.array(g, dtype='float16'), weight)
    master = updater.states[0][0]
    assert master.dtype == onp.float32
    onp.testing.assert_allclose(master.asnumpy(), reference_lbsgd(w16, grads16, **case)[-1],
                                rtol=1e-5, atol=1e-6)
    onp.testing.assert_array_equal(weight.asnumpy(), master.asnumpy().astype('float16'))


def test_states_saved_inside_a_large_batch_continue_it():
    case = dict(momentum=0.9, batch_scale=3, warmup_epochs=1, updates_per_epoch=2)
    w0, grads = _data(4, steps=6)
    first = opt.get_updater(_optimizer(case))
    weight = np.array(w0, dtype='float32')
    for g in grads[:4]:  # one large batch and a third of the next
        first(0, np.array(g, dtype='float32'), weight)
    second = opt.get_updater(_optimizer(case))
    second.set_states(first.get_states(dump_optimizer=True))
    for g in grads[4:]:
        second(0, np.array(g, dtype='float32'), weight)
    onp.testing.assert_allclose(weight.asnumpy(), reference_lbsgd(w0, grads, **case)[-1],
                                rtol=1e-5, atol=1e-6)


def test_registered_and_bad_arguments():
    assert type(opt.create('LBSGD')) is opt.LBSGD
    assert opt.LBSGD().learning_rate == 0.01
    with pytest.raises(ValueError, match=r"warmup_strategy must be one of .* got 'cubic'"):
        opt.LBSGD(warmup_strategy='cubic')
    with pytest.raises(ValueError, match=r"batch_scale must be a positive integer .* got 0"):
        opt.LBSGD(batch_scale=0)
    with pytest.raises(TypeError, match=r"unexpected optimizer parameter\(s\) \['beta1'\]"):
        opt.LBSGD(beta1=0.9)


@requires_gpu
@pytest.mark.parametrize('case', CASES[1:5], ids=[str(sorted(c.items())) for c in CASES[1:5]])
def test_gpu_updates_match_cpu(case):
    w0, grads = _data(5)
    results = []
    for device in (cpu(), gpu(0)):
        updater = opt.get_updater(_optimizer(case))
        weight = np.array(w0, dtype='float32', device=device)
        for g in grads:
            updater(0, np.array(g, dtype='float32', device=device), weight)
        results.append(weight.asnumpy())
    onp.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-6)
