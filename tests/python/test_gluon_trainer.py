"""Optimizers against NumPy reference updates, lr schedulers, kvstore and Trainer."""
import math

import numpy as onp
import pytest

from pymx import autograd, cpu, kvstore, lr_scheduler, np, optimizer as opt
from pymx.gluon import Parameter, Trainer, nn


def _clip(g, c):
    return g if c is None else onp.clip(g, -c, c)


def ref_sgd(w, g, s, t, lr, wd, rescale, clip, momentum=0.0):
    r = _clip(rescale * g, clip)
    if momentum == 0.0:
        return (1 - lr * wd) * w - lr * r, s
    mom = momentum * s[0] - lr * wd * w - lr * r
    return w + mom, [mom]


def ref_nag(w, g, s, t, lr, wd, rescale, clip, momentum=0.9):
    g = _clip(rescale * g, clip) + wd * w
    mom = momentum * s[0] + g
    return w - lr * (g + momentum * mom), [mom]


def ref_adam(w, g, s, t, lr, wd, rescale, clip, beta1=0.9, beta2=0.999, epsilon=1e-8):
    g = _clip(rescale * g + wd * w, clip)
    mean = beta1 * s[0] + (1 - beta1) * g
    var = beta2 * s[1] + (1 - beta2) * g * g
    lr_t = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    return w - lr_t * mean / (onp.sqrt(var) + epsilon), [mean, var]


def ref_adamw(w, g, s, t, lr, wd, rescale, clip, beta1=0.9, beta2=0.999, epsilon=1e-6):
    g = _clip(rescale * g, clip)
    mean = beta1 * s[0] + (1 - beta1) * g
    var = beta2 * s[1] + (1 - beta2) * g * g
    lr_t = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    return w - lr_t * (mean / (onp.sqrt(var) + epsilon) + wd * w), [mean, var]


def ref_rmsprop(w, g, s, t, lr, wd, rescale, clip, rho=0.9, epsilon=1e-8):
    g = _clip(rescale * g, clip) + wd * w
    n = rho * s[0] + (1 - rho) * g * g
    return w - lr * g / (onp.sqrt(n) + epsilon), [n]


def ref_rmsprop_centered(w, g, s, t, lr, wd, rescale, clip, rho=0.9, momentum=0.9,
                         epsilon=1e-8):
    g = _clip(rescale * g, clip) + wd * w
    n = rho * s[0] + (1 - rho) * g * g
    mean = rho * s[1] + (1 - rho) * g
    delta = momentum * s[2] - lr * g / onp.sqrt(n - mean * mean + epsilon)
    return w + delta, [n, mean, delta]


def ref_adagrad(w, g, s, t, lr, wd, rescale, clip, epsilon=1e-6):
    g = _clip(rescale * g, clip) + wd * w
    h = s[0] + g * g
    return w - lr * g / (onp.sqrt(h) + epsilon), [h]


CASES = [
    ('sgd', dict(learning_rate=0.1), ref_sgd, {}, 0),
    ('sgd', dict(learning_rate=0.1, momentum=0.9, wd=0.01, clip_gradient=0.5), ref_sgd,
     dict(momentum=0.9), 1),
    ('nag', dict(learning_rate=0.05, momentum=0.8, wd=0.01), ref_nag, dict(momentum=0.8), 1),
    ('adam', dict(learning_rate=0.01, wd=0.001, clip_gradient=1.0), ref_adam, {}, 2),
    ('adamw', dict(learning_rate=0.01, wd=0.1), ref_adamw, {}, 2),
    ('rmsprop', dict(learning_rate=0.01, rho=0.8), ref_rmsprop, dict(rho=0.8), 1),
    ('rmsprop', dict(learning_rate=0.01, centered=True, momentum=0.5), ref_rmsprop_centered,
     dict(momentum=0.5), 3),
    ('adagrad', dict(learning_rate=0.1, wd=0.01), ref_adagrad, {}, 1),
]


@pytest.mark.parametrize('name,kwargs,ref,ref_kwargs,num_states', CASES,
                         ids=[f'{c[0]}{i}' for i, c in enumerate(CASES)])
def test_optimizer_matches_numpy(name, kwargs, ref, ref_kwargs, num_states):
    rng = onp.random.default_rng(0)
    optimizer = opt.create(name, rescale_grad=0.5, **kwargs)
    updater = opt.get_updater(optimizer)
    w_ref = rng.standard_normal((3, 4))
    weight = np.array(w_ref.astype('float32'))
    w_ref = weight.asnumpy().astype('float64')
    states = [onp.zeros_like(w_ref) for _ in range(num_states)]
    for t in range(1, 4):
        g = rng.standard_normal((3, 4)).astype('float32')
        updater(0, np.array(g), weight)
        w_ref, states = ref(w_ref, g.astype('float64'), states, t, kwargs['learning_rate'],
                            kwargs.get('wd', 0.0), 0.5, kwargs.get('clip_gradient'),
                            **ref_kwargs)
        onp.testing.assert_allclose(weight.asnumpy(), w_ref, rtol=1e-5, atol=1e-6,
                                    err_msg=f'step {t}')


@pytest.mark.parametrize('name,kwargs,ref,ref_kwargs,num_states', CASES,
                         ids=[f'{c[0]}{i}' for i, c in enumerate(CASES)])
def test_updater_updates_a_device_s_parameters_in_one_call(name, kwargs, ref, ref_kwargs,
                                                           num_states, monkeypatch):
    """The updater hands all of a device's parameters to one multi_ op (each with its own
    lr_mult and wd_mult), with the results of one op per parameter to the bit."""
    from pymx.optimizer import optimizer as optimizer_module
    rng = onp.random.default_rng(1)
    shapes = [(3, 4), (5,), (2, 2, 2)]
    values = [rng.standard_normal(s).astype('float32') for s in shapes]
    grads = [[rng.standard_normal(s).astype('float32') for s in shapes] for _ in range(3)]

    def run(together):
        optimizer = opt.create(name, rescale_grad=0.5, **kwargs)
        optimizer.set_lr_mult({1: 0.5})
        optimizer.set_wd_mult({2: 2.0})
        updater = opt.get_updater(optimizer)
        weights = [np.array(v) for v in values]
        calls = []
        real_invoke = optimizer_module.invoke
        monkeypatch.setattr(optimizer_module, 'invoke',
                            lambda op, *a, **k: calls.append(op) or real_invoke(op, *a, **k))
        for step_grads in grads:
            g = [np.array(v) for v in step_grads]
            if together:
                updater([0, 1, 2], g, weights)
            else:
                for i in range(3):
                    updater(i, g[i], weights[i])
        monkeypatch.setattr(optimizer_module, 'invoke', real_invoke)
        return [w.asnumpy() for w in weights], calls

    one_by_one, _ = run(together=False)
    together, calls = run(together=True)
    for want, got in zip(one_by_one, together):
        onp.testing.assert_array_equal(got, want)
    fused = name != 'rmsprop' or not kwargs.get('centered')
    if fused:
        assert len(calls) == 3 and all(c.startswith('multi_') for c in calls), calls


def test_a_subclass_step_sees_every_update():
    """An optimizer subclass that overrides step is called for each parameter, not bypassed by
    the batched update."""
    seen = []

    class Logged(opt.SGD):
        def step(self, index, weight, grad, state):
            seen.append(index)
            super().step(index, weight, grad, state)

    updater = opt.get_updater(Logged(learning_rate=0.1))
    weights = [np.ones(3), np.ones(2)]
    updater([0, 1], [np.ones(3), np.ones(2)], weights)
    assert seen == [0, 1]
    onp.testing.assert_allclose(weights[1].asnumpy(), [0.9, 0.9], rtol=1e-6)


def test_optimizer_lr_mult_wd_mult_and_multi_precision():
    p = Parameter('w', shape=(2,))
    p.lr_mult, p.wd_mult = 0.5, 0.0
    sgd = opt.SGD(learning_rate=1.0, wd=1.0, param_dict={0: p})
    weight = np.array([1.0, 2.0])
    opt.get_updater(sgd)(0, np.array([1.0, 1.0]), weight)
    onp.testing.assert_allclose(weight.asnumpy(), [0.5, 1.5])  # lr 0.5, no decay
    half = np.array([1.0, 2.0], dtype='float16')
    mp = opt.SGD(learning_rate=1e-4, multi_precision=True)
    updater = opt.get_updater(mp)
    for _ in range(10):
        updater(0, np.array([1.0, 1.0], dtype='float16'), half)
    master = updater.states[0][0]
    assert master.dtype == onp.float32 and half.dtype == onp.float16
    onp.testing.assert_allclose(master.asnumpy(), [1.0 - 1e-3, 2.0 - 1e-3], rtol=1e-6)
    with pytest.raises(TypeError, match=r"SGD got unexpected optimizer parameter\(s\) "
                                        r"\['learning_rte'\]"):
        opt.SGD(learning_rte=0.1)
    with pytest.raises(ValueError, match="Cannot find optimizer 'sdg'"):
        opt.create('sdg')


def test_lr_schedulers():
    factor = lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    assert [factor(t) for t in (1, 2, 3, 5, 7)] == [1.0, 1.0, 0.5, 0.25, 0.125]
    multi = lr_scheduler.MultiFactorScheduler(step=[2, 5], factor=0.1, base_lr=1.0)
    assert [round(multi(t), 6) for t in (1, 3, 6)] == [1.0, 0.1, 0.01]
    poly = lr_scheduler.PolyScheduler(max_update=10, base_lr=1.0, pwr=2, final_lr=0.0)
    assert poly(5) == pytest.approx(0.25) and poly(10) == pytest.approx(0.0)
    cosine = lr_scheduler.CosineScheduler(max_update=10, base_lr=1.0, final_lr=0.1,
                                          warmup_steps=2, warmup_begin_lr=0.0)
    assert cosine(1) == pytest.approx(0.5)  # linear warm-up
    assert cosine(2) == pytest.approx(1.0)
    assert cosine(6) == pytest.approx(0.1 + 0.9 * (1 + math.cos(math.pi * 0.5)) / 2)
    assert cosine(10) == pytest.approx(0.1)
    sgd = opt.SGD(learning_rate=2.0, lr_scheduler=lr_scheduler.FactorScheduler(1, 0.5))
    assert sgd.learning_rate == 2.0
    with pytest.raises(UserWarning, match='LRScheduler of the optimizer has already been '
                                          'defined'):
        sgd.set_learning_rate(1.0)
    with pytest.raises(ValueError, match='factor must be <= 1'):
        lr_scheduler.FactorScheduler(step=1, factor=2.0)


def _two_device_param(values0, values1, grads0, grads1):
    p = Parameter('w', shape=(len(values0),))
    p.initialize(device=[cpu(0), cpu(1)])
    p.data(cpu(0))[:] = np.array(values0)
    p.data(cpu(1))[:] = np.array(values1, device=cpu(1))
    p.grad(cpu(0))[:] = np.array(grads0)
    p.grad(cpu(1))[:] = np.array(grads1, device=cpu(1))
    for data in p.list_data():  # the gradients stand in for a backward pass
        data._fresh_grad = True
    return p


@pytest.mark.parametrize('store', ['device', 'local'])
@pytest.mark.parametrize('on_kvstore', [False, True])
def test_trainer_sums_gradients_across_devices(store, on_kvstore):
    p = _two_device_param([1.0, 1.0], [1.0, 1.0], [1.0, 2.0], [3.0, 6.0])
    trainer = Trainer([p], 'sgd', {'learning_rate': 0.5}, kvstore=store,
                      update_on_kvstore=on_kvstore)
    trainer.step(batch_size=4)
    expected = onp.array([1.0, 1.0]) - 0.5 * onp.array([4.0, 8.0]) / 4
    for data in p.list_data():
        onp.testing.assert_allclose(data.asnumpy(), expected)
    if not on_kvstore:
        for grad in p.list_grad():  # the sum is written back into every device's gradient
            onp.testing.assert_allclose(grad.asnumpy(), [4.0, 8.0])


@pytest.mark.parametrize('optimizer', ['sgd', 'adam'])
@pytest.mark.parametrize('first,second', [([0], [0, 1]), ([0, 1], [0, 1, 2]), ([1], [2])])
def test_trainer_follows_parameters_moved_after_it_was_made(optimizer, first, second):
    """reset_device after the Trainer exists: the next step sums and updates every new copy
    (they stay identical), the optimizer states follow to the new devices, and the result equals
    a trainer that was on the new devices from the start."""
    x = onp.random.default_rng(3).uniform(-1, 1, (4, 5)).astype("float32")

    def trained(devices_before, devices_after):
        net = nn.Dense(3, in_units=5)
        net.initialize(device=[cpu(i) for i in devices_before])
        net.weight.set_data(np.array(onp.linspace(-1, 1, 15).reshape(3, 5)))
        trainer = Trainer(net.collect_params(), optimizer, {'learning_rate': 0.1})

        def step(devices):
            with autograd.record():
                losses = [(net(np.array(x, device=cpu(i))) ** 2).sum() for i in devices]
            for loss in losses:
                loss.backward()
            trainer.step(4 * len(devices))

        step(devices_before)
        net.collect_params().reset_device([cpu(i) for i in devices_after])
        step(devices_after)
        step(devices_after)
        return [w.asnumpy() for w in net.weight.list_data()], net.weight.list_device()

    moved, devices = trained(first, second)
    assert devices == [cpu(i) for i in second]
    for w in moved:
        onp.testing.assert_array_equal(w, moved[0])
    unmoved, _ = trained(second, second)
    onp.testing.assert_allclose(moved[0], unmoved[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('on_kvstore', [False, True])
def test_moving_parameters_keeps_the_optimizer_states(on_kvstore):
    """Adam's states and update counts survive the store being set up again after reset_device:
    moving to the same devices changes nothing, with or without update_on_kvstore."""
    x = onp.ones((4, 5), 'float32')

    def trained(reset):
        net = nn.Dense(3, in_units=5)
        net.initialize(device=[cpu(0), cpu(1)])
        net.weight.set_data(np.array(onp.linspace(-1, 1, 15).reshape(3, 5)))
        trainer = Trainer(net.collect_params(), 'adam', {'learning_rate': 0.1},
                          update_on_kvstore=on_kvstore)
        for step in range(3):
            if reset and step == 1:
                net.collect_params().reset_device([cpu(0), cpu(1)])
            with autograd.record():
                losses = [(net(np.array(x, device=cpu(i))) ** 2).sum() for i in (0, 1)]
            for loss in losses:
                loss.backward()
            trainer.step(8)
        return net.weight.data(cpu(0)).asnumpy()

    onp.testing.assert_array_equal(trained(reset=True), trained(reset=False))


@pytest.mark.filterwarnings('ignore:update_on_kvstore=True has no effect')  # one device
@pytest.mark.parametrize('on_kvstore', [False, True])
@pytest.mark.parametrize('first,second', [([0], [0, 1]), ([0, 1], [0])])
def test_optimizer_states_follow_between_local_and_store_updates(on_kvstore, first, second):
    """Moving between one device (local updates) and two (updates on the store with
    update_on_kvstore) keeps Adam's states and counts: the same global batch gives the weights of
    a run that never moved."""
    x = onp.random.default_rng(4).uniform(-1, 1, (4, 5)).astype('float32')

    def trained(devices_before, devices_after):
        net = nn.Dense(3, in_units=5)
        net.initialize(device=[cpu(i) for i in devices_before])
        net.weight.set_data(np.array(onp.linspace(-1, 1, 15).reshape(3, 5)))
        trainer = Trainer(net.collect_params(), 'adam', {'learning_rate': 0.1},
                          update_on_kvstore=on_kvstore)
        for step in range(3):
            devices = devices_before if step == 0 else devices_after
            if step == 1:
                net.collect_params().reset_device([cpu(i) for i in devices_after])
            parts = onp.array_split(x, len(devices))  # one global batch of 4, split
            with autograd.record():
                losses = [(net(np.array(part, device=cpu(i))) ** 2).sum()
                          for i, part in zip(devices, parts)]
            for loss in losses:
                loss.backward()
            trainer.step(4)
        return net.weight.list_data()[0].asnumpy()

    onp.testing.assert_allclose(trained(first, second), trained(second, second), rtol=1e-5,
                                atol=1e-6)


def test_a_distributed_trainer_refuses_moves_before_anything_changes():
    net = nn.Dense(3, in_units=5)
    net.initialize()
    Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1}, kvstore='dist_sync')
    before = net.weight.data().asnumpy()
    for move in (lambda: net.initialize(force_reinit=True),
                 lambda: net.collect_params().reset_device(cpu(1))):
        with pytest.raises(RuntimeError, match='distributed kvstore'):
            move()
        assert net.weight.list_device() == [cpu(0)]
        onp.testing.assert_array_equal(net.weight.data().asnumpy(), before)


def test_update_on_kvstore_spreads_master_weights_over_the_devices():
    """The master weights (and their updates) are balanced over the parameters' devices, not all
    placed on the first one."""
    net = nn.HybridSequential()
    net.add(nn.Dense(16, in_units=8), nn.Dense(16, in_units=16), nn.Dense(4, in_units=16))
    net.initialize(device=[cpu(1), cpu(2)])
    trainer = Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1},
                      update_on_kvstore=True)
    with autograd.record():
        losses = [net(np.ones((2, 8), device=cpu(i))).sum() for i in (1, 2)]
    for loss in losses:
        loss.backward()
    trainer.step(4)
    placed = [str(d) for d in trainer._kvstore._merge_device.values()]
    assert sorted(set(placed)) == ['cpu(1)', 'cpu(2)'], placed


def test_kvstore_push_keeps_its_own_copy():
    """A single pushed value already on the store's device is copied: writing the caller's
    array afterwards does not change what pull returns."""
    store = kvstore.create('local')
    store.init('k', np.zeros(2))
    value = np.array([1.0, 1.0])
    store.push('k', value)
    value[:] = 10
    out = np.zeros(2)
    store.pull('k', out=out)
    assert out.asnumpy().tolist() == [1.0, 1.0]


def test_kvstore_pushpull_and_balancing():
    store = kvstore.create('device')
    a = [np.array([1.0, 2.0], device=cpu(0)), np.array([3.0, 4.0], device=cpu(1))]
    store.pushpull('k', a)
    for arr in a:
        onp.testing.assert_allclose(arr.asnumpy(), [4.0, 6.0])
    big = [np.ones((100,), device=cpu(0)), np.ones((100,), device=cpu(1))]
    store.pushpull('big', big)
    store.pushpull('small', [np.ones((2,), device=cpu(0)), np.ones((2,), device=cpu(1))])
    assert store._merge_device['big'] != store._merge_device['small']
    out = [np.zeros((2,), device=cpu(0))]
    store.init(3, np.array([7.0, 8.0]))
    store.pull(3, out)
    onp.testing.assert_allclose(out[0].asnumpy(), [7.0, 8.0])
    with pytest.raises(ValueError, match="Unknown KVStore type 'bogus'"):
        kvstore.create('bogus')


def test_trainer_errors_and_learning_rate():
    with pytest.raises(ValueError, match="First argument must be a list or dict of Parameters, "
                                         "got <class 'str'>"):
        Trainer('params', 'sgd')
    a = Parameter('a', shape=(1,))
    a.initialize(device=cpu(0))
    b = Parameter('b', shape=(1,))
    b.initialize(device=[cpu(0), cpu(1)])
    with pytest.raises(ValueError, match=r"All Parameters must be initialized on the same set of "
                                         r"devices, but Parameter b is initialized on \[cpu\(0\), "
                                         r"cpu\(1\)\] while previous Parameters are initialized "
                                         r"on \[cpu\(0\)\]"):
        Trainer([a, b], 'sgd')
    with pytest.raises(ValueError, match='optimizer_params must be None'):
        Trainer([a], opt.SGD(), {'learning_rate': 0.1})
    trainer = Trainer({'a': a}, 'sgd', {'learning_rate': 0.3})
    assert trainer.learning_rate == 0.3
    trainer.set_learning_rate(0.1)
    assert trainer.learning_rate == 0.1


def test_trainer_on_a_net_with_deferred_params_and_state_round_trip(tmp_path):
    net = nn.Dense(2)
    net.initialize()
    trainer = Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1, 'momentum': 0.9})
    x = np.ones((4, 3))

    def train_step():  # the gradient of sum(W x + b) does not depend on W and b
        with autograd.record():
            loss = net(x).sum()
        loss.backward()
        trainer.step(4)

    for _ in range(2):
        train_step()
    path = str(tmp_path / 'trainer.states')
    trainer.save_states(path)
    saved_momentum = trainer._updaters[0].states[1].asnumpy()
    train_step()
    trainer.load_states(path)
    assert trainer.learning_rate == 0.1
    train_step()  # restored states move to the weight's device on use
    restored = trainer._updaters[0].states[1].asnumpy()
    grad = net.weight.grad().asnumpy()
    onp.testing.assert_allclose(restored, 0.9 * saved_momentum - 0.1 * grad / 4, rtol=1e-5)


def _stale_message(name, device):
    return (f"Gradient of Parameter `{name}` on device {device} has not been updated by backward "
            f"since last `step`. This could mean a bug in your model that made it only use a "
            f"subset of the Parameters (Blocks) for this iteration. If you are intentionally "
            f"only using a subset, call step with ignore_stale_grad=True to suppress this "
            f"warning and skip updating of Parameters with stale gradient")


@pytest.mark.parametrize('hybridize', [False, True])
def test_step_raises_on_stale_gradients_unless_ignored(hybridize):
    used, unused = nn.Dense(2, in_units=3), nn.Dense(2, in_units=3)
    for block in (used, unused):
        block.initialize()
        if hybridize:
            block.hybridize()
    params = list(used.collect_params().values()) + list(unused.collect_params().values())
    trainer = Trainer(params, 'sgd', {'learning_rate': 0.1})
    x = np.ones((4, 3))

    def forward_backward():
        with autograd.record():
            loss = used(x).sum()
        loss.backward()

    forward_backward()
    with pytest.raises(UserWarning) as raised:
        trainer.step(4)
    assert str(raised.value) == _stale_message(unused.weight.name, 'cpu(0)')
    # ignore_stale_grad: the fresh parameters are updated, the stale ones are left alone.
    forward_backward()
    used_before = used.weight.data().asnumpy()
    unused_before = unused.weight.data().asnumpy()
    trainer.step(4, ignore_stale_grad=True)
    assert not onp.allclose(used.weight.data().asnumpy(), used_before)
    onp.testing.assert_array_equal(unused.weight.data().asnumpy(), unused_before)
    # step consumed the gradients: a second step without backward finds them all stale.
    assert not used.weight.data()._fresh_grad
    with pytest.raises(UserWarning, match="has not been updated by backward since last `step`"):
        trainer.step(4)


@pytest.mark.parametrize('update_on_kvstore', [False, True])
def test_save_states_failing_halfway_leaves_the_old_file(tmp_path, monkeypatch, update_on_kvstore):
    """Trainer.save_states, and the kvstore's save_optimizer_states where the kvstore updates
    (two devices), write a temporary file and rename it."""
    devices = [cpu(0), cpu(1)]
    net = nn.Dense(2, in_units=3)
    net.initialize(device=devices)
    trainer = Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1, 'momentum': 0.9},
                      kvstore='device', update_on_kvstore=update_on_kvstore)
    with autograd.record():
        losses = [net(np.ones((2, 3), device=d)).sum() for d in devices]
    autograd.backward(losses)
    trainer.step(4)
    assert trainer._update_on_kvstore == update_on_kvstore
    path = tmp_path / 'trainer.states'
    trainer.save_states(str(path))
    before = path.read_bytes()

    def disk_full(fd):
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr('os.fsync', disk_full)
    with pytest.raises(OSError, match='No space left on device'):
        trainer.save_states(str(path))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ['trainer.states']
