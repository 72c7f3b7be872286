"""gluon.nn.SyncBatchNorm against float64 NumPy and against BatchNorm: 2 and 3 devices (cpu(k)
here, GPUs with the GPU tests) equal BatchNorm over the concatenated batch, forward and backward,
with identical running statistics on every device; data-parallel training with a Trainer equals
one-device BatchNorm training; one device, inference and use_global_stats equal BatchNorm;
hybridize == imperative; checkpoints shared with BatchNorm; MXNet's `_contrib_SyncBatchNorm`
symbol files; and the errors."""
import json
import os
import textwrap

import numpy as onp
import pytest
from conftest import requires_gpu, run_python

from pymx import autograd, gluon, np, npx
from pymx.device import cpu, gpu
from pymx.gluon import nn
from pymx.test_utils import assert_almost_equal

EPS = 1e-5


def _rand(*shape, seed=0):
    return onp.random.default_rng(seed).standard_normal(shape)


def _reference(x, gamma, beta, mean, var, eps=EPS):
    """Batch normalisation over axis 1 in float64 with the given statistics."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return ((x - mean.reshape(shape)) / onp.sqrt(var.reshape(shape) + eps) * gamma.reshape(shape)
            + beta.reshape(shape))


def _reference_grads(x, gamma, dy, eps=EPS):
    """d/dx, d/dgamma, d/dbeta of batch normalisation with batch statistics, in float64."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    count = x.size // x.shape[1]
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    inv_std = 1 / onp.sqrt(var + eps)
    x_hat = (x - mean.reshape(shape)) * inv_std.reshape(shape)
    dgamma, dbeta = (dy * x_hat).sum(axis=axes), dy.sum(axis=axes)
    dx = (gamma * inv_std).reshape(shape) / count * (
        count * dy - dbeta.reshape(shape) - x_hat * dgamma.reshape(shape))
    return dx, dgamma, dbeta


def _layer(cls, device, **kwargs):
    layer = cls(in_channels=3, **kwargs)
    layer.initialize(device=device)
    rng = onp.random.default_rng(1)
    layer.gamma.set_data(np.array(rng.uniform(0.5, 1.5, 3), dtype='float32'))
    layer.beta.set_data(np.array(rng.uniform(-0.5, 0.5, 3), dtype='float32'))
    return layer


def _train_step(layer, x, dy, device):
    data = np.array(x, dtype='float32', device=device)
    data.attach_grad()
    with autograd.record():
        out = layer(data)
    out.backward(np.array(dy, dtype='float32', device=device))
    return out.asnumpy(), data.grad.asnumpy()


@pytest.mark.parametrize('shape', [(4, 3), (2, 3, 5), (2, 3, 2, 2)])
def test_one_device_training_equals_batch_norm_and_numpy(device, shape):
    x, dy = _rand(*shape) * 2 + 1, _rand(*shape, seed=2)
    sync = _layer(nn.SyncBatchNorm, device, num_devices=1, momentum=0.8)
    plain = _layer(nn.BatchNorm, device, momentum=0.8)
    out, dx = _train_step(sync, x, dy, device)
    gamma, beta = (p.data().asnumpy().astype('float64') for p in (sync.gamma, sync.beta))
    axes = (0,) + tuple(range(2, x.ndim))
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    assert_almost_equal(out, _reference(x, gamma, beta, mean, var), rtol=1e-4, atol=1e-5)
    ref_dx, ref_dgamma, ref_dbeta = _reference_grads(x, gamma, dy)
    assert_almost_equal(dx, ref_dx, rtol=1e-4, atol=1e-5)
    assert_almost_equal(sync.gamma.grad(device), ref_dgamma, rtol=1e-4, atol=1e-5)
    assert_almost_equal(sync.beta.grad(device), ref_dbeta, rtol=1e-4, atol=1e-5)
    assert_almost_equal(sync.running_mean.data(device), 0.2 * mean, rtol=1e-4, atol=1e-6)
    assert_almost_equal(sync.running_var.data(device), 0.8 + 0.2 * var, rtol=1e-4, atol=1e-6)
    # The same computation as BatchNorm, so the same float32 results.
    plain_out, plain_dx = _train_step(plain, x, dy, device)
    onp.testing.assert_array_equal(out, plain_out)
    onp.testing.assert_array_equal(dx, plain_dx)
    for name in ('gamma', 'beta'):
        onp.testing.assert_array_equal(getattr(sync, name).grad(device).asnumpy(),
                                       getattr(plain, name).grad(device).asnumpy())
    for name in ('running_mean', 'running_var'):
        onp.testing.assert_array_equal(getattr(sync, name).data(device).asnumpy(),
                                       getattr(plain, name).data(device).asnumpy())


def _sync_step(layer, parts, dys, devices):
    """One training forward and backward of `layer` with parts[k] on devices[k], in the
    data-parallel loop's order; returns the outputs and input gradients as NumPy."""
    datas = [np.array(p, dtype='float32', device=d) for p, d in zip(parts, devices)]
    for data in datas:
        data.attach_grad()
    with autograd.record():
        outs = [layer(data) for data in datas]
    autograd.backward(outs, [np.array(g, dtype='float32', device=d) for g, d in zip(dys, devices)])
    return [o.asnumpy() for o in outs], [d.grad.asnumpy() for d in datas]


@pytest.mark.parametrize('hybridize', [False, True])
@pytest.mark.parametrize('sizes', [(2, 2), (3, 1, 2)], ids=['2dev', '3dev-uneven'])
def test_devices_equal_batch_norm_over_the_concatenated_batch(sizes, hybridize):
    devices = [cpu(k) for k in range(len(sizes))]
    total = sum(sizes)
    x, dy = _rand(total, 3, 2, 2) * 2 + 1, _rand(total, 3, 2, 2, seed=2)
    cuts = onp.cumsum(sizes)[:-1]
    layer = nn.SyncBatchNorm(in_channels=3, num_devices=len(devices), momentum=0.8)
    layer.initialize(device=devices)
    gamma, beta = onp.array([0.5, 1.0, 1.5]), onp.array([-0.5, 0.0, 0.5])
    layer.gamma.set_data(np.array(gamma, dtype='float32'))
    layer.beta.set_data(np.array(beta, dtype='float32'))
    layer.hybridize(hybridize)
    for step in range(2):  # the second step starts from the first one's running statistics
        outs, dxs = _sync_step(layer, onp.split(x, cuts), onp.split(dy, cuts), devices)
    axes = (0, 2, 3)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    assert_almost_equal(onp.concatenate(outs), _reference(x, gamma, beta, mean, var),
                        rtol=1e-4, atol=1e-5)
    ref_dx, ref_dgamma, ref_dbeta = _reference_grads(x, gamma, dy)
    assert_almost_equal(onp.concatenate(dxs), ref_dx, rtol=1e-4, atol=1e-5)
    # Each device holds its part of the parameter gradients; the Trainer adds them up.
    for name, ref in (('gamma', ref_dgamma), ('beta', ref_dbeta)):
        grads = [getattr(layer, name).grad(d).asnumpy().astype('float64') for d in devices]
        assert_almost_equal(sum(grads), ref, rtol=1e-4, atol=1e-5)
    running = {'running_mean': 0.64 * 0 + 0.36 * mean,
               'running_var': 0.64 * 1 + 0.36 * var}  # two updates with momentum 0.8
    for name, ref in running.items():
        copies = [getattr(layer, name).data(d).asnumpy() for d in devices]
        for copy in copies:
            onp.testing.assert_array_equal(copy, copies[0])  # identical on every device
        assert_almost_equal(copies[0], ref, rtol=1e-4, atol=1e-5)


def test_float64_over_two_devices():
    devices = [cpu(0), cpu(1)]
    x, dy = _rand(4, 2, 3) * 3 + 2, _rand(4, 2, 3, seed=2)
    layer = nn.SyncBatchNorm(in_channels=2, num_devices=2)
    layer.initialize(device=devices)
    layer.cast('float64')
    datas = [np.array(part, dtype='float64', device=d) for part, d in zip((x[:2], x[2:]), devices)]
    for data in datas:
        data.attach_grad()
    with autograd.record():
        outs = [layer(data) for data in datas]
    autograd.backward(outs, [np.array(g, dtype='float64', device=d)
                             for g, d in zip((dy[:2], dy[2:]), devices)])
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    assert outs[0].dtype == 'float64'
    assert_almost_equal(onp.concatenate([o.asnumpy() for o in outs]),
                        _reference(x, onp.ones(2), onp.zeros(2), mean, var), rtol=1e-12, atol=1e-12)
    assert_almost_equal(onp.concatenate([d.grad.asnumpy() for d in datas]),
                        _reference_grads(x, onp.ones(2), dy)[0], rtol=1e-10, atol=1e-12)


def test_several_devices_in_inference_mode_use_running_statistics():
    devices = [cpu(0), cpu(1)]
    layer = nn.SyncBatchNorm(in_channels=3, num_devices=2)
    layer.initialize(device=devices)
    layer.running_mean.set_data(np.array([0.5, -1.0, 2.0]))
    layer.running_var.set_data(np.array([1.5, 0.5, 4.0]))
    data = [np.array(_rand(2, 3, seed=k), dtype='float32', device=d)
            for k, d in enumerate(devices)]
    outs = [layer(d) for d in data]  # no rendezvous: each device completes on its own
    for k, out in enumerate(outs):
        assert_almost_equal(out, _reference(_rand(2, 3, seed=k), onp.ones(3), onp.zeros(3),
                                            onp.array([0.5, -1.0, 2.0]),
                                            onp.array([1.5, 0.5, 4.0])), rtol=1e-5, atol=1e-6)


def _net(norm):
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3), norm, nn.Activation('relu'), nn.Dense(2, in_units=4))
    return net


def test_data_parallel_training_equals_one_device_batch_norm():
    devices = [cpu(0), cpu(1)]
    x, y = _rand(8, 3), _rand(8, 2, seed=1)
    sync_net = _net(nn.SyncBatchNorm(in_channels=4, num_devices=2))
    plain_net = _net(nn.BatchNorm(in_channels=4))
    sync_net.initialize(device=devices)
    plain_net.initialize()
    for (name, sync_param), plain_param in zip(sync_net.collect_params().items(),
                                               plain_net.collect_params().values()):
        plain_param.set_data(np.array(_rand(*sync_param.shape, seed=len(name)), dtype='float32'))
        sync_param.set_data(plain_param.data())
    sync_net.hybridize()
    loss_fn = gluon.loss.L2Loss()
    sync_trainer = gluon.Trainer(sync_net.collect_params(), 'sgd', {'learning_rate': 0.5})
    plain_trainer = gluon.Trainer(plain_net.collect_params(), 'sgd', {'learning_rate': 0.5})
    for _ in range(3):
        xs = gluon.utils.split_and_load(np.array(x, dtype='float32'), devices)
        ys = gluon.utils.split_and_load(np.array(y, dtype='float32'), devices)
        with autograd.record():
            losses = [loss_fn(sync_net(a), b) for a, b in zip(xs, ys)]
        for loss in losses:
            loss.backward()
        sync_trainer.step(8)
        with autograd.record():
            loss = loss_fn(plain_net(np.array(x, dtype='float32')), np.array(y, dtype='float32'))
        loss.backward()
        plain_trainer.step(8)
    for name, param in sync_net.collect_params().items():
        copies = [param.data(d).asnumpy() for d in devices]
        onp.testing.assert_array_equal(copies[0], copies[1])  # the copies stay identical
        assert_almost_equal(copies[0], plain_net.collect_params()[name].data(), rtol=1e-4,
                            atol=1e-5)


def test_a_step_on_fewer_devices_fails_naming_the_values():
    layer = nn.SyncBatchNorm(in_channels=3, num_devices=2)
    layer.initialize(device=[cpu(0), cpu(1)])
    message = (r"has num_devices=2 but only 1 device\(s\) \[cpu\(0\)\] ran it before cpu\(0\) "
               r"came again")
    with autograd.record():
        first = layer(np.array(_rand(2, 3), dtype='float32', device=cpu(0)))
        with pytest.raises(ValueError, match=message):  # refused at the call
            layer(np.array(_rand(2, 3), dtype='float32', device=cpu(0)))
    with pytest.raises(ValueError, match=message):  # the step's pending op fails too
        first.asnumpy()
    npx.waitall()
    # The failed round is gone: the next step runs normally.
    outs, _ = _sync_step(layer, [_rand(2, 3), _rand(2, 3, seed=1)],
                         [_rand(2, 3, seed=2), _rand(2, 3, seed=3)], [cpu(0), cpu(1)])
    both = onp.concatenate([_rand(2, 3), _rand(2, 3, seed=1)])
    assert_almost_equal(onp.concatenate(outs), _reference(both, onp.ones(3), onp.zeros(3),
                                                          both.mean(0), both.var(0)),
                        rtol=1e-4, atol=1e-5)


def test_naive_engine_refuses_several_devices_in_training():
    result = run_python(
        "from pymx import autograd, np\n"
        "from pymx.device import cpu\n"
        "from pymx.gluon import nn\n"
        "layer = nn.SyncBatchNorm(in_channels=2, num_devices=2)\n"
        "layer.initialize(device=[cpu(0), cpu(1)])\n"
        "print(layer(np.ones((2, 2), device=cpu(0))).asnumpy().shape)\n"  # inference: fine
        "with autograd.record():\n"
        "    out = layer(np.ones((2, 2), device=cpu(0)))\n"
        "try:\n"
        "    out.asnumpy()\n"
        "except ValueError as error:\n"
        "    print(error)\n",
        env=dict(__import__('os').environ, PYMX_ENGINE='naive'), timeout=60)
    assert result.returncode == 0, result.stderr
    assert '(2, 2)' in result.stdout
    assert 'ndev=2 needs the threaded engine' in result.stdout


def test_inference_on_each_device_uses_running_statistics():
    devices = [cpu(0), cpu(1)]
    layer = nn.SyncBatchNorm(num_devices=2, epsilon=1e-3)
    layer.initialize(device=devices)
    x = _rand(4, 3, 2)
    assert layer(np.array(x, dtype='float32', device=devices[0])).shape == (4, 3, 2)  # deferred
    rng = onp.random.default_rng(3)
    stats = {'running_mean': rng.uniform(-1, 1, 3), 'running_var': rng.uniform(0.5, 2, 3),
             'gamma': rng.uniform(0.5, 1.5, 3), 'beta': rng.uniform(-1, 1, 3)}
    for name, value in stats.items():
        getattr(layer, name).set_data(np.array(value, dtype='float32'))
    stored = {k: v.astype('float32').astype('float64') for k, v in stats.items()}
    expected = _reference(x, stored['gamma'], stored['beta'], stored['running_mean'],
                          stored['running_var'], eps=1e-3)
    for dev, seed in zip(devices, (0, 4)):
        part = _rand(4, 3, 2, seed=seed)
        out = layer(np.array(part, dtype='float32', device=dev))
        assert out.device == dev
        assert_almost_equal(out, _reference(part, stored['gamma'], stored['beta'],
                                            stored['running_mean'], stored['running_var'],
                                            eps=1e-3), rtol=1e-5, atol=1e-6)
    assert_almost_equal(layer(np.array(x, dtype='float32', device=devices[1])), expected,
                        rtol=1e-5, atol=1e-6)


def test_use_global_stats_in_training_on_several_devices():
    devices = [cpu(0), cpu(1)]
    layer = nn.SyncBatchNorm(in_channels=3, num_devices=2, use_global_stats=True)
    layer.initialize(device=devices)
    layer.running_mean.set_data(np.array([0.5, -1.0, 2.0]))
    layer.running_var.set_data(np.array([1.5, 0.5, 4.0]))
    for dev, seed in zip(devices, (0, 1)):
        x = _rand(2, 3, 3, seed=seed)
        data = np.array(x, dtype='float32', device=dev)
        with autograd.record():
            out = layer(data)
        expected = _reference(x, onp.ones(3), onp.zeros(3), onp.array([0.5, -1.0, 2.0]),
                              onp.array([1.5, 0.5, 4.0]))
        assert_almost_equal(out, expected, rtol=1e-5, atol=1e-6)
    for name, value in (('running_mean', [0.5, -1.0, 2.0]), ('running_var', [1.5, 0.5, 4.0])):
        for dev in devices:  # use_global_stats leaves the running statistics alone
            assert_almost_equal(getattr(layer, name).data(dev), onp.array(value))


@pytest.mark.parametrize('train', [False, True])
def test_hybridize_equals_imperative(train):
    x, dy = _rand(2, 3, 4) * 3 - 1, _rand(2, 3, 4, seed=5)
    results = []
    for hybridize in (False, True):
        layer = _layer(nn.SyncBatchNorm, cpu(0), num_devices=1)
        layer.hybridize(hybridize)
        data = np.array(x, dtype='float32')
        data.attach_grad()
        with autograd.record(train_mode=train):
            out = layer(data)
        out.backward(np.array(dy, dtype='float32'))
        results.append([out.asnumpy(), data.grad.asnumpy(), layer.gamma.grad().asnumpy(),
                        layer.beta.grad().asnumpy(), layer.running_mean.data().asnumpy(),
                        layer.running_var.data().asnumpy()])
    for imperative, hybridized in zip(*results):
        onp.testing.assert_allclose(hybridized, imperative, rtol=1e-6, atol=1e-7)


def test_checkpoints_interchange_with_batch_norm(tmp_path):
    sync = _layer(nn.SyncBatchNorm, cpu(0), num_devices=1)
    sync.running_mean.set_data(np.array([0.1, 0.2, 0.3]))
    sync.running_var.set_data(np.array([1.1, 1.2, 1.3]))
    assert sorted(sync.collect_params()) == ['beta', 'gamma', 'running_mean', 'running_var']
    sync.save_parameters(str(tmp_path / 'sync.params'))
    plain = nn.BatchNorm()
    plain.load_parameters(str(tmp_path / 'sync.params'))
    back = nn.SyncBatchNorm(num_devices=1)
    plain.save_parameters(str(tmp_path / 'plain.params'))
    back.load_parameters(str(tmp_path / 'plain.params'))
    for name, param in sync.collect_params().items():
        onp.testing.assert_array_equal(plain.collect_params()[name].data().asnumpy(),
                                       param.data().asnumpy())
        onp.testing.assert_array_equal(back.collect_params()[name].data().asnumpy(),
                                       param.data().asnumpy())
    x = _rand(2, 3, 2)
    onp.testing.assert_array_equal(sync(np.array(x, dtype='float32')).asnumpy(),
                                   plain(np.array(x, dtype='float32')).asnumpy())


def test_constructor_defaults_and_options():
    layer = nn.SyncBatchNorm(num_devices=1, center=False, scale=False)
    assert layer.gamma.grad_req == layer.beta.grad_req == 'null'
    assert layer.running_mean.grad_req == layer.running_var.grad_req == 'null'
    assert layer.num_devices == 1
    assert repr(layer) == ('SyncBatchNorm(eps=1e-05, momentum=0.9, fix_gamma=True, '
                           'use_global_stats=False, num_devices=1, in_channels=None)')
    layer.cast('float16')  # statistics and affine parameters stay float32 (BatchNorm's rule)
    assert layer.gamma.dtype == 'float32'
    assert nn.SyncBatchNorm().num_devices == max(__import__('pymx').device.num_gpus(), 1)


def test_errors_name_the_values():
    with pytest.raises(ValueError, match=r'num_devices must be an int >= 1, got 0'):
        nn.SyncBatchNorm(num_devices=0)
    with pytest.raises(ValueError, match=r"in_channels must be an int >= 0 .*got -2"):
        nn.SyncBatchNorm(in_channels=-2)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['axis'\]"):
        nn.SyncBatchNorm(axis=2)
    layer = nn.SyncBatchNorm(in_channels=3, num_devices=1)
    layer.initialize()
    with pytest.raises(ValueError, match=r'input has 4 channels \(axis 1 of shape \(2, 4, 5\)\), '
                                         r'the layer has in_channels=3'):
        layer(np.zeros((2, 4, 5)))
    with pytest.raises(ValueError, match=r'needs a channel axis \(axis 1\), got shape \(5,\)'):
        layer(np.zeros((5,)))
    several = nn.SyncBatchNorm(in_channels=3, num_devices=2)
    several.initialize(device=[cpu(0), cpu(1)])
    several.cast('float16')  # statistics and affine parameters stay float32
    with autograd.record():
        with pytest.raises(TypeError, match=r'data must be float32 or float64, got float16'):
            several(np.zeros((2, 3), dtype='float16'))
    deferred = nn.SyncBatchNorm(num_devices=1)
    deferred.initialize()
    deferred(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r'input has 2 channels .* in_channels=3'):
        deferred(np.zeros((2, 2)))


def _sync_bn_symbol():
    """MXNet's JSON for data -> _contrib_SyncBatchNorm, as a model trained with it exports."""
    nodes = [{'op': 'null', 'name': 'data', 'inputs': []}]
    for name in ('gamma', 'beta', 'running_mean', 'running_var'):
        nodes.append({'op': 'null', 'name': f'bn_{name}', 'inputs': []})
    nodes.append({'op': '_contrib_SyncBatchNorm', 'name': 'bn',
                  'attrs': {'eps': '1e-05', 'fix_gamma': 'False', 'momentum': '0.9',
                            'ndev': '4', 'key': 'syncbatchnorm0_'},
                  'inputs': [[i, 0, 0] for i in range(5)]})
    return json.dumps({'nodes': nodes, 'arg_nodes': [0, 1, 2, 3, 4], 'heads': [[5, 0, 0]],
                       'attrs': {'mxnet_version': ['int', 10901]}})


@pytest.mark.parametrize('hybridize', [False, True])
def test_mxnet_symbol_file_with_sync_batch_norm_loads_for_inference(tmp_path, hybridize):
    symbol_file = tmp_path / 'net-symbol.json'
    symbol_file.write_text(_sync_bn_symbol())
    rng = onp.random.default_rng(6)
    params = {'bn_gamma': rng.uniform(0.5, 1.5, 3), 'bn_beta': rng.uniform(-1, 1, 3),
              'bn_running_mean': rng.uniform(-1, 1, 3), 'bn_running_var': rng.uniform(0.5, 2, 3)}
    param_file = tmp_path / 'net-0000.params'
    with open(param_file, 'wb') as f:
        onp.savez(f, **{('aux:' if 'running' in k else 'arg:') + k: v.astype('float32')
                        for k, v in params.items()})
    net = gluon.SymbolBlock.imports(str(symbol_file), ['data'], str(param_file))
    net.hybridize(hybridize)
    x = _rand(2, 3, 2, 2)
    stored = {k: v.astype('float32').astype('float64') for k, v in params.items()}
    expected = _reference(x, stored['bn_gamma'], stored['bn_beta'], stored['bn_running_mean'],
                          stored['bn_running_var'])
    assert_almost_equal(net(np.array(x, dtype='float32')), expected, rtol=1e-5, atol=1e-6)
    assert net.collect_params()['bn_running_mean'].grad_req == 'null'


@requires_gpu
@pytest.mark.parametrize('train', [False, True])
def test_gpu_equals_cpu(train):
    x, dy = _rand(4, 3, 2, 2) * 2 + 1, _rand(4, 3, 2, 2, seed=7)
    results = []
    for dev in (cpu(0), gpu(0)):
        layer = _layer(nn.SyncBatchNorm, dev, num_devices=1)
        data = np.array(x, dtype='float32', device=dev)
        data.attach_grad()
        with autograd.record(train_mode=train):
            out = layer(data)
        out.backward(np.array(dy, dtype='float32', device=dev))
        results.append([out.asnumpy(), data.grad.asnumpy(), layer.gamma.grad(dev).asnumpy(),
                        layer.beta.grad(dev).asnumpy(), layer.running_mean.data(dev).asnumpy(),
                        layer.running_var.data(dev).asnumpy()])
    for on_cpu, on_gpu in zip(*results):
        assert_almost_equal(on_gpu, on_cpu, rtol=1e-4, atol=1e-5)


@requires_gpu
@pytest.mark.parametrize('hybridize', [False, True])
def test_gpu_and_cpu_devices_of_one_step_equal_batch_norm(hybridize):
    """A step over gpu(0) and cpu(0): the GPU kernels, and a round whose last arrival finishes
    another device's op (from a CPU worker, for the GPU's part, or the other way round)."""
    devices = [gpu(0), cpu(0)]
    x, dy = _rand(6, 3, 4) * 2 - 1, _rand(6, 3, 4, seed=3)
    layer = nn.SyncBatchNorm(in_channels=3, num_devices=2, momentum=0.5)
    layer.initialize(device=devices)
    layer.hybridize(hybridize)
    outs, dxs = _sync_step(layer, [x[:4], x[4:]], [dy[:4], dy[4:]], devices)
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    assert_almost_equal(onp.concatenate(outs), _reference(x, onp.ones(3), onp.zeros(3), mean, var),
                        rtol=1e-4, atol=1e-5)
    ref_dx, ref_dgamma, ref_dbeta = _reference_grads(x, onp.ones(3), dy)
    assert_almost_equal(onp.concatenate(dxs), ref_dx, rtol=1e-4, atol=1e-5)
    for name, ref in (('gamma', ref_dgamma), ('beta', ref_dbeta)):
        grads = [getattr(layer, name).grad(d).asnumpy().astype('float64') for d in devices]
        assert_almost_equal(sum(grads), ref, rtol=1e-4, atol=1e-5)
    for name, ref in (('running_mean', 0.5 * mean), ('running_var', 0.5 + 0.5 * var)):
        copies = [getattr(layer, name).data(d).asnumpy() for d in devices]
        assert_almost_equal(copies[0], copies[1], rtol=1e-6, atol=1e-7)
        assert_almost_equal(copies[0], ref, rtol=1e-4, atol=1e-5)
    infer = [layer(np.array(x[:2], dtype='float32', device=d)).asnumpy() for d in devices]
    assert_almost_equal(infer[0], infer[1], rtol=1e-5, atol=1e-6)


@requires_gpu
def test_gpu_step_that_fails_completes_its_ops_and_the_next_step_runs():
    """A refused step on gpu(0)+cpu(0): the GPU op already in the rendezvous fails (its stats
    buffer freed, its op completed from the calling thread), and the devices stay usable."""
    devices = [gpu(0), cpu(0)]
    layer = nn.SyncBatchNorm(in_channels=3, num_devices=2)
    layer.initialize(device=devices)
    message = (r"has num_devices=2 but only 1 device\(s\) \[gpu\(0\)\] ran it before gpu\(0\) "
               r"came again")
    with autograd.record():
        first = layer(np.array(_rand(2, 3), dtype='float32', device=gpu(0)))
        with pytest.raises(ValueError, match=message):
            layer(np.array(_rand(2, 3), dtype='float32', device=gpu(0)))
    with pytest.raises(ValueError, match=message):
        first.asnumpy()
    npx.waitall()
    parts = [_rand(2, 3), _rand(3, 3, seed=1)]
    outs, _ = _sync_step(layer, parts, [_rand(2, 3, seed=2), _rand(3, 3, seed=3)], devices)
    both = onp.concatenate(parts)
    assert_almost_equal(onp.concatenate(outs), _reference(both, onp.ones(3), onp.zeros(3),
                                                          both.mean(0), both.var(0)),
                        rtol=1e-4, atol=1e-5)


@requires_gpu
def test_logical_gpus_of_one_physical_gpu_equal_batch_norm():
    """With PYMX_LOGICAL_GPUS_PER_GPU=2, gpu(1) is CUDA device 0 (or 1 past the first physical
    GPU): a round's last arrival finishes the other logical GPU's op from its own worker, so the
    finish must select the physical device. Several steps, so that either device finishes the
    round; afterwards each device's worker still runs its own kernels."""
    script = textwrap.dedent(f"""
        import numpy as onp
        from pymx import autograd, np, npx
        from pymx.device import gpu, num_gpus
        from pymx.gluon import nn
        devices = [gpu(k) for k in range(min(num_gpus(), 4))]
        assert len(devices) >= 2, num_gpus()
        rng = onp.random.default_rng(0)
        layer = nn.SyncBatchNorm(in_channels=3, num_devices=len(devices), momentum=0.5)
        layer.initialize(device=devices)
        eps = {EPS!r}
        for step in range(3):
            parts = [rng.standard_normal((k + 2, 3, 5)) * 2 + 1 for k in range(len(devices))]
            dys = [rng.standard_normal(p.shape) for p in parts]
            datas = [np.array(p, dtype='float32', device=d) for p, d in zip(parts, devices)]
            for data in datas:
                data.attach_grad()
            with autograd.record():
                outs = [layer(data) for data in datas]
            autograd.backward(outs, [np.array(g, dtype='float32', device=d)
                                     for g, d in zip(dys, devices)])
            x, dy = onp.concatenate(parts), onp.concatenate(dys)
            mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
            x_hat = (x - mean[:, None]) / onp.sqrt(var[:, None] + eps)
            n = x.size // 3
            dx = (n * dy - dy.sum(axis=(0, 2))[:, None]
                  - x_hat * (dy * x_hat).sum(axis=(0, 2))[:, None]) / (n * onp.sqrt(var[:, None] + eps))
            got = onp.concatenate([o.asnumpy() for o in outs])
            onp.testing.assert_allclose(got, x_hat, rtol=1e-4, atol=1e-4)
            got_dx = onp.concatenate([d.grad.asnumpy() for d in datas])
            onp.testing.assert_allclose(got_dx, dx, rtol=1e-4, atol=1e-4)
            means = [layer.running_mean.data(d).asnumpy() for d in devices]
            for m in means[1:]:
                onp.testing.assert_array_equal(m, means[0])
        for d in devices:  # each worker's current device survived finishing others' ops
            a = np.array(onp.arange(6.0).reshape(2, 3), dtype='float32', device=d)
            onp.testing.assert_array_equal((a * 2 + 1).asnumpy(), onp.arange(6.0).reshape(2, 3) * 2 + 1)
        npx.waitall()
        print("ok")
    """)
    env = {**os.environ, "PYMX_LOGICAL_GPUS_PER_GPU": "2"}
    done = run_python(script, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split()[-1] == "ok"


def test_export_writes_mxnet_sync_batch_norm_and_imports_back(tmp_path):
    devices = [cpu(0), cpu(1)]
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3), nn.SyncBatchNorm(in_channels=4, num_devices=2))
    net.initialize(device=devices)
    net[1].running_mean.set_data(np.array([0.1, -0.2, 0.3, 0.0]))
    net[1].running_var.set_data(np.array([1.5, 0.5, 2.0, 1.0]))
    net.hybridize()
    x = np.array(_rand(2, 3), dtype='float32')
    expected = net(x).asnumpy()
    net.export(str(tmp_path / 'net'))
    nodes = json.loads((tmp_path / 'net-symbol.json').read_text())['nodes']
    sync_nodes = [n for n in nodes if n['op'] == '_contrib_SyncBatchNorm']
    assert len(sync_nodes) == 1 and sync_nodes[0]['attrs']['ndev'] == '2'
    back = gluon.SymbolBlock.imports(str(tmp_path / 'net-symbol.json'), ['data'],
                                     str(tmp_path / 'net-0000.params'))
    assert_almost_equal(back(x), expected, rtol=1e-6, atol=1e-7)
