"""AdaDelta, Adamax, Nadam, FTML, Ftrl, Signum, LAMB, LARS, AdaBelief, SGLD and DCASGD: several
Trainer steps against float64 NumPy reimplementations of MXNet's update formulas (with wd,
clip_gradient, rescale_grad, lr_mult and an lr scheduler), float16 and bfloat16 weights with
multi_precision, state save/load through the Trainer, and bad arguments."""
import math
import pickle

import numpy as onp
import pytest

from conftest import requires_gpu
from pymx import autograd, cpu, gpu, lr_scheduler, np, optimizer as opt
from pymx.gluon import Parameter, Trainer

SHAPE = (3, 4)
BATCH = 2  # Trainer.step(BATCH) sets rescale_grad = 1 / BATCH


def _clip(g, c):
    return g if c is None else onp.clip(g, -c, c)


def _grad(g, w, o):
    """MXNet's usual preprocessing: clip(rescale * g) + wd * w."""
    return _clip(o['rescale'] * g, o['clip']) + o['wd'] * w


# Each reference takes the float64 weight, gradient, state list, update count t and the options
# o (lr, wd, rescale, clip, plus the optimizer's own) and returns the new weight and state.

def ref_adadelta(w, g, s, t, o):
    g = _grad(g, w, o)
    acc_g = o['rho'] * s[0] + (1 - o['rho']) * g * g
    delta = onp.sqrt(s[1] + o['epsilon']) / onp.sqrt(acc_g + o['epsilon']) * g
    acc_delta = o['rho'] * s[1] + (1 - o['rho']) * delta * delta
    return w - o['lr'] * delta, [acc_g, acc_delta]


def ref_adamax(w, g, s, t, o):
    g = _grad(g, w, o)
    m = o['beta1'] * s[0] + (1 - o['beta1']) * g
    u = onp.maximum(o['beta2'] * s[1], onp.abs(g))
    return w - o['lr'] / (1 - o['beta1'] ** t) * m / u, [m, u]


def ref_nadam(w, g, s, t, o):
    g = _grad(g, w, o)
    b1, b2, decay = o['beta1'], o['beta2'], o['schedule_decay']
    momentum_t = b1 * (1 - 0.5 * 0.96 ** (t * decay))
    momentum_t_1 = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * decay))
    m_schedule = s[2] * momentum_t
    m_schedule_next = m_schedule * momentum_t_1
    m = b1 * s[0] + (1 - b1) * g
    v = b2 * s[1] + (1 - b2) * g * g
    mean_bar = momentum_t_1 * m / (1 - m_schedule_next) + (1 - momentum_t) * g / (1 - m_schedule)
    d = mean_bar / (onp.sqrt(v / (1 - b2 ** t)) + o['epsilon'])
    return w - o['lr'] * d, [m, v, m_schedule]


def ref_ftml(w, g, s, t, o):
    g = _grad(g, w, o)
    b1, b2 = o['beta1'], o['beta2']
    d_prev, v, z = s
    v = b2 * v + (1 - b2) * g * g
    d = (1 - b1 ** t) / o['lr'] * (onp.sqrt(v / (1 - b2 ** t)) + o['epsilon'])
    z = b1 * z + (1 - b1) * g - (d - b1 * d_prev) * w
    return -z / d, [d, v, z]


def ref_ftrl(w, g, s, t, o):
    g = _clip(o['rescale'] * g, o['clip'])
    z, n = s
    z = z + g - (onp.sqrt(n + g * g) - onp.sqrt(n)) * w / o['lr']
    n = n + g * g
    w = (onp.sign(z) * o['lamda1'] - z) / ((o['beta'] + onp.sqrt(n)) / o['lr'] + o['wd']) * \
        (onp.abs(z) > o['lamda1'])
    return w, [z, n]


def ref_signum(w, g, s, t, o):
    lr = o['lr']
    if o['momentum'] == 0:
        return (1 - lr * (o['wd'] + o['wd_lh'])) * w - lr * onp.sign(g), s
    mom = o['momentum'] * s[0] - (1 - o['momentum']) * _grad(g, w, o)
    return (1 - lr * o['wd_lh']) * w + lr * onp.sign(mom), [mom]


def ref_lamb(w, g, s, t, o):
    g = _clip(o['rescale'] * g, o['clip'])
    b1, b2 = o['beta1'], o['beta2']
    m = b1 * s[0] + (1 - b1) * g
    v = b2 * s[1] + (1 - b2) * g * g
    if o['bias_correction']:
        r = (m / (1 - b1 ** t)) / (onp.sqrt(v / (1 - b2 ** t)) + o['epsilon'])
    else:
        r = m / (onp.sqrt(v) + o['epsilon'])
    r = r + o['wd'] * w
    r1 = onp.linalg.norm(w)
    if o['lower_bound'] is not None:
        r1 = max(r1, o['lower_bound'])
    if o['upper_bound'] is not None:
        r1 = min(r1, o['upper_bound'])
    r2 = onp.linalg.norm(r)
    ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
    return w - o['lr'] * ratio * r, [m, v]


def ref_lars(w, g, s, t, o):
    w_norm, g_norm = onp.linalg.norm(w), onp.linalg.norm(o['rescale'] * g)
    lars = 1.0
    if not o['excluded'] and w_norm > 0 and g_norm > 0:
        lars = o['eta'] * w_norm / (g_norm + o['wd'] * w_norm + o['epsilon'])
    lr = o['lr'] * lars
    g = _grad(g, w, o)
    if o['momentum'] == 0:
        return w - lr * g, s
    mom = o['momentum'] * s[0] - lr * g
    return w + mom, [mom]


def ref_adabelief(w, g, s, t, o):
    g = _clip(o['rescale'] * g + o['wd'] * w, o['clip'])  # decay before clipping, as MXNet
    b1, b2, eps = o['beta1'], o['beta2'], o['epsilon']
    m = b1 * s[0] + (1 - b1) * g
    v = b2 * s[1] + (1 - b2) * (g - m) ** 2 + eps
    lr = o['lr'] * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) if o['correct_bias'] else o['lr']
    return w - lr * m / (onp.sqrt(v) + eps), [m, v]


def ref_dcasgd(w, g, s, t, o):
    g = _grad(g, w, o)
    d = g + o['lamda'] * g * g * (w - s[1])
    if o['momentum'] == 0:
        return w - o['lr'] * d, [None, w]
    mom = o['momentum'] * s[0] - o['lr'] * d
    return w + mom, [mom, w]


def _zeros(n):
    return lambda w: [onp.zeros_like(w) for _ in range(n)]


# (id, optimizer name, its arguments, reference, reference defaults, initial reference states)
CASES = [
    ('adadelta', 'adadelta', dict(wd=0.01), ref_adadelta, dict(lr=1.0, rho=0.9, epsilon=1e-6),
     _zeros(2)),
    ('adadelta_args', 'adadelta', dict(learning_rate=0.5, rho=0.8, epsilon=1e-4,
                                       clip_gradient=0.3), ref_adadelta, {}, _zeros(2)),
    ('adamax', 'adamax', dict(wd=0.01, clip_gradient=0.5), ref_adamax,
     dict(lr=0.002, beta1=0.9, beta2=0.999), _zeros(2)),
    ('nadam', 'nadam', dict(learning_rate=0.01, wd=0.01), ref_nadam,
     dict(beta1=0.9, beta2=0.999, epsilon=1e-8, schedule_decay=0.004),
     lambda w: [onp.zeros_like(w), onp.zeros_like(w), 1.0]),
    ('ftml', 'ftml', dict(wd=0.01, clip_gradient=0.8), ref_ftml,
     dict(lr=0.0025, beta1=0.6, beta2=0.999, epsilon=1e-8), _zeros(3)),
    ('ftrl', 'ftrl', dict(wd=0.1), ref_ftrl, dict(lr=0.1, lamda1=0.01, beta=1.0), _zeros(2)),
    ('ftrl_l1', 'ftrl', dict(learning_rate=0.5, lamda1=0.2, beta=0.5, clip_gradient=1.0),
     ref_ftrl, {}, _zeros(2)),
    ('signum', 'signum', dict(wd=0.01, wd_lh=0.05), ref_signum,
     dict(lr=0.01, momentum=0.9), _zeros(1)),
    ('signsgd', 'signum', dict(learning_rate=0.05, momentum=0.0, wd=0.01, wd_lh=0.02),
     ref_signum, {}, _zeros(0)),
    ('lamb', 'lamb', dict(wd=0.01, clip_gradient=1.0), ref_lamb,
     dict(lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6, lower_bound=None, upper_bound=None,
          bias_correction=True), _zeros(2)),
    ('lamb_bounds', 'lamb', dict(learning_rate=0.01, lower_bound=2.0, upper_bound=2.5,
                                 bias_correction=False), ref_lamb,
     dict(beta1=0.9, beta2=0.999, epsilon=1e-6, wd=0.0), _zeros(2)),
    ('lars', 'lars', dict(wd=0.01), ref_lars,
     dict(lr=0.1, momentum=0.0, eta=0.001, epsilon=1e-8, excluded=False), _zeros(0)),
    ('lars_momentum', 'lars', dict(learning_rate=1.0, momentum=0.9, eta=0.1, wd=0.001,
                                   clip_gradient=0.5), ref_lars,
     dict(epsilon=1e-8, excluded=False), _zeros(1)),
    ('adabelief', 'adabelief', dict(wd=0.01, clip_gradient=0.5), ref_adabelief,
     dict(lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6, correct_bias=True), _zeros(2)),
    ('adabelief_uncorrected', 'adabelief', dict(learning_rate=0.01, correct_bias=False,
                                                beta1=0.8, beta2=0.99), ref_adabelief,
     dict(epsilon=1e-6), _zeros(2)),
    ('dcasgd', 'dcasgd', dict(wd=0.01), ref_dcasgd, dict(lr=0.1, momentum=0.0, lamda=0.04),
     lambda w: [None, w.copy()]),
    ('dcasgd_momentum', 'dcasgd', dict(momentum=0.9, lamda=0.5, clip_gradient=1.0),
     ref_dcasgd, dict(lr=0.1), lambda w: [onp.zeros_like(w), w.copy()]),
]
IDS = [c[0] for c in CASES]


def _options(kwargs, defaults):
    """The reference's options: the optimizer's arguments over its documented defaults."""
    o = dict(defaults, rescale=1.0 / BATCH, clip=kwargs.get('clip_gradient'),
             wd=kwargs.get('wd', defaults.get('wd', 0.0)))
    for key, value in kwargs.items():
        o['lr' if key == 'learning_rate' else key] = value
    return o


def _make_param(values, dtype='float32', device=None, name='weight'):
    param = Parameter(name, shape=values.shape, dtype=dtype)
    param.initialize(device=device or cpu())
    param.set_data(np.array(values, dtype=dtype))
    return param


def _train(param, trainer, grads):
    """One Trainer step per gradient (the gradient of sum(w * G) is G)."""
    for g in grads:
        with autograd.record():
            loss = (param.data() * np.array(g, dtype=param.dtype, device=param.data().device)) \
                .sum()
        loss.backward()
        trainer.step(BATCH)


def _data(seed, steps=4):
    rng = onp.random.default_rng(seed)
    w = rng.standard_normal(SHAPE)
    return w, [rng.standard_normal(SHAPE) for _ in range(steps)]


def _reference_run(ref, kwargs, defaults, init_states, w, grads, lr_of_t=None, lr_mult=1.0):
    o = _options(kwargs, defaults)
    states = init_states(w)
    base_lr = o['lr']
    trajectory = []
    for t, g in enumerate(grads, start=1):
        o['lr'] = (lr_of_t(t) if lr_of_t else base_lr) * lr_mult
        w, states = ref(w, g, states, t, o)
        trajectory.append(w)
    return trajectory


@pytest.mark.parametrize('case', CASES, ids=IDS)
def test_trainer_steps_match_numpy(case):
    _, name, kwargs, ref, defaults, init_states = case
    w0, grads = _data(0)
    w0 = w0.astype('float32').astype('float64')
    grads = [g.astype('float32').astype('float64') for g in grads]
    param = _make_param(w0)
    trainer = Trainer([param], name, dict(kwargs))
    assert type(trainer.optimizer).__name__.lower() == name
    want = _reference_run(ref, kwargs, defaults, init_states, w0, grads)
    for step, g in enumerate(grads):
        _train(param, trainer, [g])
        onp.testing.assert_allclose(param.data().asnumpy(), want[step], rtol=2e-5, atol=1e-6,
                                    err_msg=f'{name} step {step + 1}')


@pytest.mark.parametrize('case', CASES[::2], ids=IDS[::2])
def test_lr_scheduler_and_lr_mult(case):
    _, name, kwargs, ref, defaults, init_states = case
    w0, grads = _data(1)
    w0 = w0.astype('float32').astype('float64')
    grads = [g.astype('float32').astype('float64') for g in grads]
    param = _make_param(w0)
    param.lr_mult = 0.5
    base_lr = kwargs.get('learning_rate', defaults.get('lr'))
    schedule = lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=base_lr)
    trainer = Trainer([param], name, dict(kwargs, lr_scheduler=schedule))
    reference_schedule = lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=base_lr)
    want = _reference_run(ref, kwargs, defaults, init_states, w0, grads,
                          lr_of_t=reference_schedule, lr_mult=0.5)
    _train(param, trainer, grads)
    onp.testing.assert_allclose(param.data().asnumpy(), want[-1], rtol=2e-5, atol=1e-6)


# Every rule with float16; bfloat16 takes the same master-copy path, so a few rules suffice.
LOW_PRECISION = [(case, 'float16') for case in CASES] + \
    [(case, 'bfloat16') for case in CASES if case[0] in ('nadam', 'lamb', 'lars')]


@pytest.mark.parametrize('case,dtype', LOW_PRECISION,
                         ids=[f'{case[0]}-{dtype}' for case, dtype in LOW_PRECISION])
def test_multi_precision_keeps_a_float32_master_copy(case, dtype):
    _, name, kwargs, ref, defaults, init_states = case
    w0, grads = _data(2, steps=3)
    param = _make_param(w0, dtype=dtype)
    w_low = param.data().asnumpy().astype('float64')  # the values the low-precision weight holds
    grads_low = [np.array(g, dtype=dtype).asnumpy().astype('float64') for g in grads]
    trainer = Trainer([param], name, dict(kwargs, multi_precision=True))
    _train(param, trainer, grads)
    want = _reference_run(ref, kwargs, defaults, init_states, w_low, grads_low)[-1]
    master = trainer._updaters[0].states[0][0]
    assert master.dtype == onp.float32 and param.data().dtype == master.astype(dtype).dtype
    onp.testing.assert_allclose(master.asnumpy(), want, rtol=2e-5, atol=1e-6)
    onp.testing.assert_array_equal(param.data().asnumpy(), master.astype(dtype).asnumpy())


@pytest.mark.parametrize('case', CASES, ids=IDS)
def test_states_save_and_load_through_the_trainer(case, tmp_path):
    _, name, kwargs, *_ = case
    w0, grads = _data(3)
    param = _make_param(w0)
    trainer = Trainer([param], name, dict(kwargs))
    _train(param, trainer, grads[:2])
    saved_weight = param.data().asnumpy()
    path = str(tmp_path / 'trainer.states')
    trainer.save_states(path)
    _train(param, trainer, grads[2:])
    want = param.data().asnumpy()
    # A fresh Trainer that loads the states continues exactly where the first one was.
    fresh = _make_param(saved_weight)
    restored = Trainer([fresh], name, dict(kwargs))
    restored.load_states(path)
    assert type(restored.optimizer).__name__.lower() == name
    _train(fresh, restored, grads[2:])
    onp.testing.assert_array_equal(fresh.data().asnumpy(), want)


def test_states_written_without_update_counts_continue_the_counts(tmp_path):
    """A states file holding only (states, optimizer), as written before the update counts were
    saved beside them, continues Adam's bias correction from the optimizer's own counts."""
    w0, grads = _data(8)
    param = _make_param(w0)
    trainer = Trainer([param], 'adam', {'learning_rate': 0.01})
    _train(param, trainer, grads[:2])
    states, optimizer, _ = pickle.loads(trainer._updaters[0].get_states(dump_optimizer=True))
    path = tmp_path / 'old.states'
    path.write_bytes(pickle.dumps((states, optimizer)))
    fresh = _make_param(param.data().asnumpy())
    _train(param, trainer, grads[2:])
    restored = Trainer([fresh], 'adam', {'learning_rate': 0.01})
    restored.load_states(str(path))
    _train(fresh, restored, grads[2:])
    onp.testing.assert_array_equal(fresh.data().asnumpy(), param.data().asnumpy())


def test_loaded_update_counts_follow_parameters_moved_before_the_first_step(tmp_path):
    """Loading the states and then moving the parameter to another device before the first
    step: the new device's updater continues the loaded counts (Adam's bias correction)."""
    w0, grads = _data(10)
    param = _make_param(w0)
    trainer = Trainer([param], 'adam', {'learning_rate': 0.01})
    _train(param, trainer, grads[:2])
    path = str(tmp_path / 'trainer.states')
    trainer.save_states(path)
    fresh = _make_param(param.data().asnumpy())
    _train(param, trainer, grads[2:])
    restored = Trainer([fresh], 'adam', {'learning_rate': 0.01})
    restored.load_states(path)
    fresh.reset_device(cpu(1))
    _train(fresh, restored, grads[2:])
    onp.testing.assert_array_equal(fresh.data(cpu(1)).asnumpy(), param.data().asnumpy())


def test_lamb_float16_weight_norms_do_not_overflow():
    """A float16 weight whose sum of squares passes float16's 65504 (without multi_precision):
    the trust ratio's norms are taken in float32, so the step stays finite and correct."""
    w0, g = onp.ones((300, 300)), onp.full((300, 300), 0.5)
    param = _make_param(w0, dtype='float16')
    _train(param, Trainer([param], 'lamb', {'learning_rate': 0.01}), [g])
    o = dict(lr=0.01, wd=0.0, rescale=1.0 / BATCH, clip=None, beta1=0.9, beta2=0.999,
             epsilon=1e-6, lower_bound=None, upper_bound=None, bias_correction=True)
    want, _ = ref_lamb(w0, g, [onp.zeros_like(w0)] * 2, 1, o)
    onp.testing.assert_allclose(param.data().asnumpy(), want, rtol=1e-3)


def test_lars_leaves_biases_unscaled():
    w0, grads = _data(4, steps=2)
    bias = _make_param(w0[0], name='bias')
    trainer = Trainer([bias], 'lars', {'learning_rate': 0.1, 'wd': 0.01})
    _train(bias, trainer, [g[0] for g in grads])
    o = dict(_options({'learning_rate': 0.1, 'wd': 0.01}, {}), momentum=0.0, eta=0.001,
             epsilon=1e-8, excluded=True)
    w = w0[0].astype('float32').astype('float64')
    for t, g in enumerate(grads, start=1):
        w, _ = ref_lars(w, g[0].astype('float32').astype('float64'), [], t, o)
    onp.testing.assert_allclose(bias.data().asnumpy(), w, rtol=1e-5)
    # Zero weights: the trust ratio is undefined and the factor falls back to 1.
    zero = _make_param(onp.zeros(SHAPE))
    trainer = Trainer([zero], 'lars', {'learning_rate': 0.1})
    _train(zero, trainer, [onp.ones(SHAPE)])
    onp.testing.assert_allclose(zero.data().asnumpy(), onp.full(SHAPE, -0.1 / BATCH), rtol=1e-6)


def test_nadam_schedule_does_not_depend_on_the_number_of_parameters():
    w0, grads = _data(5)
    single = _make_param(w0)
    _train(single, Trainer([single], 'nadam', {'learning_rate': 0.01}), grads)
    pair = [_make_param(w0), _make_param(w0 * 2, name='other')]
    trainer = Trainer(pair, 'nadam', {'learning_rate': 0.01})
    for g in grads:
        with autograd.record():
            loss = sum((p.data() * np.array(g)).sum() for p in pair)
        loss.backward()
        trainer.step(BATCH)
    onp.testing.assert_allclose(pair[0].data().asnumpy(), single.data().asnumpy(), rtol=1e-6)


def test_sgld_adds_gaussian_noise_of_variance_lr():
    lr, shape = 0.01, (200, 50)
    rng = onp.random.default_rng(6)
    w0, g = rng.standard_normal(shape).astype('float32'), rng.standard_normal(shape)
    param = _make_param(w0.astype('float64'))
    trainer = Trainer([param], 'sgld', {'learning_rate': lr, 'wd': 0.1})
    np.random.seed(11)
    _train(param, trainer, [g.astype('float32')])
    drift = -lr / 2 * (g.astype('float32') / BATCH + 0.1 * w0)
    noise = param.data().asnumpy().astype('float64') - w0 - drift
    assert abs(noise.mean()) < 4 * math.sqrt(lr / noise.size)
    assert noise.std() == pytest.approx(math.sqrt(lr), rel=0.03)
    # The noise is pymx's generator: the same seed draws the same noise.
    np.random.seed(11)
    expected = np.random.normal(0.0, math.sqrt(lr), size=shape).asnumpy()
    onp.testing.assert_allclose(noise, expected, atol=1e-6)


def test_sgld_copies_on_several_devices_stay_identical():
    """The Trainer updates each device's copy of a parameter: SGLD's noise is drawn once per
    update and shared, so the copies do not drift apart (and differ from step to step)."""
    w0, grads = _data(9, steps=2)
    param = Parameter('weight', shape=SHAPE)
    param.initialize(device=[cpu(0), cpu(1)])
    param.set_data(np.array(w0, dtype='float32'))
    trainer = Trainer([param], 'sgld', {'learning_rate': 0.1})
    previous = w0.astype('float32')
    for g in grads:
        with autograd.record():
            losses = [(data * np.array(g, dtype='float32', device=data.device)).sum()
                      for data in param.list_data()]
        for loss in losses:
            loss.backward()
        trainer.step(BATCH)
        copies = [data.asnumpy() for data in param.list_data()]
        onp.testing.assert_array_equal(copies[1], copies[0])
        # the summed gradient (2 g) steps, plus noise of standard deviation sqrt(0.1)
        noise = copies[0] - (previous - 0.1 / 2 * 2 * g.astype('float32') / BATCH)
        assert 0.05 < noise.std() < 0.8
        previous = copies[0]


def test_bad_arguments():
    with pytest.raises(TypeError, match=r"Nadam got unexpected optimizer parameter\(s\) "
                                        r"\['beta3'\]"):
        opt.Nadam(beta3=0.5)
    with pytest.raises(ValueError, match="LAMB: lower_bound 3.0 is above upper_bound 1.0"):
        opt.LAMB(lower_bound=3.0, upper_bound=1.0)
    with pytest.raises(ValueError, match="Cannot find optimizer 'adamaxx'"):
        opt.create('adamaxx')


def test_registered_under_mxnet_names():
    for name, klass in (('adadelta', opt.AdaDelta), ('adamax', opt.Adamax), ('nadam', opt.Nadam),
                        ('ftml', opt.FTML), ('ftrl', opt.Ftrl), ('signum', opt.Signum),
                        ('lamb', opt.LAMB), ('lars', opt.LARS), ('adabelief', opt.AdaBelief),
                        ('sgld', opt.SGLD), ('dcasgd', opt.DCASGD)):
        assert type(opt.create(name)) is klass
        assert type(opt.create(name.upper())) is klass


@requires_gpu
@pytest.mark.parametrize('case', CASES, ids=IDS)
def test_gpu_steps_match_cpu(case):
    _, name, kwargs, *_ = case
    w0, grads = _data(7)
    results = []
    for device in (cpu(), gpu(0)):
        param = _make_param(w0, device=device)
        trainer = Trainer([param], name, dict(kwargs))
        _train(param, trainer, grads)
        results.append(param.data().asnumpy())
    onp.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-6)
