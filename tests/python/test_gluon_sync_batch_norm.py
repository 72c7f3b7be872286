"""gluon.nn.SyncBatchNorm against float64 NumPy and against BatchNorm: one device in training,
inference and use_global_stats on several devices, hybridize == imperative, checkpoints shared
with BatchNorm, MXNet's `_contrib_SyncBatchNorm` symbol files, and the errors."""
import json

import numpy as onp
import pytest
from conftest import requires_gpu

from pymx import autograd, gluon, np
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
    deferred = nn.SyncBatchNorm(num_devices=1)
    deferred.initialize()
    deferred(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r'input has 2 channels .* in_channels=3'):
        deferred(np.zeros((2, 2)))
    several = nn.SyncBatchNorm(in_channels=3, num_devices=2)
    several.initialize(device=[cpu(0), cpu(1)])
    with autograd.record():
        with pytest.raises(NotImplementedError,
                           match=r'SyncBatchNorm\(num_devices=2\) in training mode on cpu\(1\)'):
            several(np.zeros((2, 3), device=cpu(1)))


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
