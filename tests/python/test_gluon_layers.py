"""Layers against NumPy (float64) references, deferred shapes, and hybridized == imperative
(forward and gradients) for every layer."""
import itertools

import numpy as onp
import pytest

from pymx import autograd, cpu, np
from pymx.gluon import nn

RTOL, ATOL = 1e-4, 1e-5  # float32 layers vs float64 references


def _rand(*shape, seed=0):
    return onp.random.default_rng(seed).standard_normal(shape).astype('float32')


def _params(layer):
    return {k: p.data().asnumpy().astype('float64') for k, p in layer.collect_params().items()}


def conv_ref(x, w, b, stride, pad, dilate, groups):
    """N-d channel-first convolution in float64."""
    x, w = x.astype('float64'), w.astype('float64')
    nd = x.ndim - 2
    x = onp.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_sz = [(x.shape[2 + i] - dilate[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1
              for i in range(nd)]
    cin_g, cout_g = w.shape[1], w.shape[0] // groups
    out = onp.zeros((x.shape[0], w.shape[0], *out_sz))
    for k in itertools.product(*[range(s) for s in w.shape[2:]]):
        window = tuple(slice(k[i] * dilate[i], k[i] * dilate[i] + stride[i] * (out_sz[i] - 1) + 1,
                             stride[i]) for i in range(nd))
        xs = x[(slice(None), slice(None)) + window]
        for g in range(groups):
            wk = w[(slice(g * cout_g, (g + 1) * cout_g), slice(None)) + k]
            out[:, g * cout_g:(g + 1) * cout_g] += onp.einsum(
                'fc,nc...->nf...', wk, xs[:, g * cin_g:(g + 1) * cin_g])
    if b is not None:
        out += b.reshape((1, -1) + (1,) * nd)
    return out


def pool_ref(x, kernel, stride, pool_type):
    """2-D 'valid' pooling in float64."""
    n, c, h, w = x.shape
    oh, ow = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
    out = onp.zeros((n, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        win = x[:, :, i * stride[0]:i * stride[0] + kernel[0], j * stride[1]:j * stride[1] +
                kernel[1]].astype('float64')
        out[:, :, i, j] = win.max(axis=(2, 3)) if pool_type == 'max' else win.mean(axis=(2, 3))
    return out


def _forward(layer, x):
    return layer(np.array(x)).asnumpy()


def test_dense_forward_and_deferred_shape():
    layer = nn.Dense(5, activation='relu')
    layer.initialize()
    x = _rand(4, 2, 3)
    out = _forward(layer, x)
    p = _params(layer)
    assert layer.weight.shape == (5, 6)
    ref = onp.maximum(x.reshape(4, 6) @ p['weight'].T + p['bias'], 0)
    onp.testing.assert_allclose(out, ref, RTOL, ATOL)
    flat = nn.Dense(5, flatten=False, use_bias=False, in_units=3)
    flat.initialize()
    onp.testing.assert_allclose(_forward(flat, x), x @ _params(flat)['weight'].T, RTOL, ATOL)
    assert flat.bias is None and list(flat.collect_params()) == ['weight']


@pytest.mark.parametrize('kwargs', [dict(channels=4, kernel_size=3),
                                    dict(channels=6, kernel_size=(3, 2), strides=2, padding=1,
                                         dilation=(1, 2), groups=3),
                                    dict(channels=4, kernel_size=2, use_bias=False)])
def test_conv2d_matches_reference(kwargs):
    layer = nn.Conv2D(**kwargs)
    layer.initialize()
    x = _rand(2, 3 if kwargs.get('groups') else 2, 7, 8)
    out = _forward(layer, x)
    p = _params(layer)
    conv = layer._kwargs
    ref = conv_ref(x, p['weight'], p.get('bias'), conv['stride'], conv['pad'], conv['dilate'],
                   conv['num_group'])
    onp.testing.assert_allclose(out, ref, RTOL, ATOL)


def test_conv_nhwc_1d_3d():
    x = _rand(2, 6, 5, 3)  # NHWC
    nhwc = nn.Conv2D(4, 3, layout='NHWC', activation='tanh')
    nhwc.initialize()
    out = _forward(nhwc, x)
    p = _params(nhwc)
    assert nhwc.weight.shape == (4, 3, 3, 3)  # (out, kh, kw, in)
    ref = conv_ref(x.transpose(0, 3, 1, 2), p['weight'].transpose(0, 3, 1, 2), p['bias'],
                   (1, 1), (0, 0), (1, 1), 1)
    onp.testing.assert_allclose(out, onp.tanh(ref).transpose(0, 2, 3, 1), RTOL, ATOL)
    for layer, x in ((nn.Conv1D(3, 3, strides=2, padding=1), _rand(2, 2, 9)),
                     (nn.Conv3D(2, 2, padding=(1, 0, 1)), _rand(1, 2, 3, 4, 3))):
        layer.initialize()
        out = _forward(layer, x)
        p, conv = _params(layer), layer._kwargs
        ref = conv_ref(x, p['weight'], p['bias'], conv['stride'], conv['pad'], conv['dilate'], 1)
        onp.testing.assert_allclose(out, ref, RTOL, ATOL)


@pytest.mark.parametrize('groups,dilation,padding', [(1, 1, 1), (2, 2, 0), (2, 1, 3)])
def test_conv2d_transpose_is_conv_input_gradient(groups, dilation, padding):
    layer = nn.Conv2DTranspose(4, kernel_size=3, strides=2, padding=padding, output_padding=1,
                               dilation=dilation, groups=groups, in_channels=2)
    layer.initialize()
    x = _rand(2, 2, 4, 5)
    out = _forward(layer, x)
    extent = [(n - 1) * 2 - 2 * padding + dilation * 2 + 1 + 1 for n in (4, 5)]
    assert out.shape == (2, 4, *extent)
    # <deconv(x), y> == <x, conv(y)> with the same weight (transpose identity), bias aside.
    y = _rand(*out.shape, seed=1)
    p = _params(layer)
    conv_y = conv_ref(y, p['weight'], None, (2, 2), (padding,) * 2, (dilation,) * 2, groups)
    conv_y = conv_y[:, :, :4, :5]  # output_padding rows/cols reach no input
    lhs = ((out - p['bias'].reshape(1, 4, 1, 1)) * y).sum()
    onp.testing.assert_allclose(lhs, (x * conv_y).sum(), rtol=1e-4)


def test_pooling_layers():
    x = _rand(2, 3, 9, 8)
    cases = [(nn.MaxPool2D(pool_size=4, strides=2), (4, 4), (2, 2), 'max'),
             (nn.MaxPool2D(), (2, 2), (2, 2), 'max'),
             (nn.AvgPool2D(pool_size=3, strides=1), (3, 3), (1, 1), 'avg')]
    for layer, kernel, stride, kind in cases:
        onp.testing.assert_allclose(_forward(layer, x), pool_ref(x, kernel, stride, kind),
                                    RTOL, ATOL)
    onp.testing.assert_allclose(_forward(nn.GlobalAvgPool2D(), x),
                                x.mean(axis=(2, 3), keepdims=True), RTOL, ATOL)
    onp.testing.assert_allclose(_forward(nn.GlobalMaxPool2D(), x),
                                x.max(axis=(2, 3), keepdims=True), RTOL, ATOL)
    nhwc = _forward(nn.MaxPool2D(3, 2, layout='NHWC'), x.transpose(0, 2, 3, 1))
    onp.testing.assert_allclose(nhwc, pool_ref(x, (3, 3), (2, 2), 'max').transpose(0, 2, 3, 1))
    onp.testing.assert_allclose(_forward(nn.MaxPool1D(2), x[:, :, 0]),
                                x[:, :, 0].reshape(2, 3, 4, 2).max(-1))
    ceil = nn.MaxPool2D(pool_size=2, strides=2, ceil_mode=True)
    assert _forward(ceil, x).shape == (2, 3, 5, 4)


def test_batchnorm_train_and_predict():
    layer = nn.BatchNorm(momentum=0.8, epsilon=1e-3)
    layer.initialize()
    x = _rand(4, 3, 2, 2) * 2 + 1
    with autograd.record():
        out = layer(np.array(x)).asnumpy()
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    ref = (x - mean.reshape(1, 3, 1, 1)) / onp.sqrt(var.reshape(1, 3, 1, 1) + 1e-3)
    onp.testing.assert_allclose(out, ref, 1e-4, 1e-4)
    onp.testing.assert_allclose(layer.running_mean.data().asnumpy(), 0.2 * mean, 1e-4, 1e-6)
    onp.testing.assert_allclose(layer.running_var.data().asnumpy(), 0.8 + 0.2 * var, 1e-4)
    predicted = _forward(layer, x)  # predict mode: running statistics
    rm, rv = layer.running_mean.data().asnumpy(), layer.running_var.data().asnumpy()
    onp.testing.assert_allclose(predicted, (x - rm.reshape(1, 3, 1, 1)) /
                                onp.sqrt(rv.reshape(1, 3, 1, 1) + 1e-3), 1e-4, 1e-5)
    assert layer.running_mean.grad_req == 'null'
    layer.cast('float16')
    assert layer.gamma.dtype == 'float32'


def test_layernorm_embedding_flatten_activation_dropout():
    x = _rand(3, 5)
    ln = nn.LayerNorm()
    ln.initialize()
    ref = (x - x.mean(-1, keepdims=True)) / onp.sqrt(x.var(-1, keepdims=True) + 1e-5)
    onp.testing.assert_allclose(_forward(ln, x), ref, 1e-4, 1e-4)
    emb = nn.Embedding(10, 4)
    emb.initialize()
    idx = onp.array([[1, 9], [0, 1]], dtype='int32')
    onp.testing.assert_allclose(emb(np.array(idx, dtype='int32')).asnumpy(),
                                _params(emb)['weight'][idx], RTOL)
    onp.testing.assert_array_equal(_forward(nn.Flatten(), _rand(2, 3, 4)),
                                   _rand(2, 3, 4).reshape(2, 12))
    onp.testing.assert_allclose(_forward(nn.Activation('sigmoid'), x), 1 / (1 + onp.exp(-x)),
                                RTOL, ATOL)
    onp.testing.assert_array_equal(_forward(nn.Dropout(0.5), x), x)  # predict mode: identity
    with autograd.record():
        dropped = nn.Dropout(0.5)(np.array(x)).asnumpy()
    kept = dropped != 0
    onp.testing.assert_allclose(dropped[kept], 2 * x[kept], RTOL)
    assert 0 < kept.sum() < x.size
    with pytest.raises(ValueError, match=r'Dropout rate must be in \[0, 1\), got 1.5'):
        nn.Dropout(1.5)


def test_lambdas_and_sequential_indexing():
    x = _rand(2, 3)
    onp.testing.assert_allclose(_forward(nn.HybridLambda('tanh'), x), onp.tanh(x), RTOL)
    onp.testing.assert_allclose(_forward(nn.Lambda(lambda a: a * 2), x), 2 * x)
    with pytest.raises(ValueError, match="no function named 'nope'"):
        nn.Lambda('nope')
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3), nn.Activation('relu'), nn.Dense(2, in_units=4))
    assert len(net) == 3 and isinstance(net[1], nn.Activation)
    head = net[:2]
    assert isinstance(head, nn.HybridSequential) and len(head) == 2
    net.initialize()
    onp.testing.assert_allclose(_forward(head, x), onp.maximum(_forward(net[0], x), 0), RTOL)


def _layer_cases():
    return [
        ('dense', lambda: nn.Dense(4, activation='tanh'), (3, 5)),
        ('dense_noflat', lambda: nn.Dense(4, flatten=False), (2, 3, 5)),
        ('conv2d', lambda: nn.Conv2D(3, 3, padding=1, activation='relu'), (2, 2, 6, 6)),
        ('conv2d_nhwc', lambda: nn.Conv2D(3, 2, layout='NHWC'), (2, 5, 5, 2)),
        ('conv1d', lambda: nn.Conv1D(2, 3, strides=2), (2, 3, 9)),
        ('conv3d', lambda: nn.Conv3D(2, 2), (1, 2, 3, 3, 3)),
        ('conv2d_transpose', lambda: nn.Conv2DTranspose(2, 3, strides=2), (2, 3, 4, 4)),
        ('conv2d_transpose_nhwc', lambda: nn.Conv2DTranspose(4, 2, strides=(1, 2), padding=1,
                                                             groups=2, layout='NHWC'),
         (1, 3, 4, 2)),
        ('maxpool', lambda: nn.MaxPool2D(pool_size=3, strides=2), (2, 2, 7, 7)),
        ('avgpool', lambda: nn.AvgPool2D(), (2, 2, 6, 6)),
        ('globalavg', lambda: nn.GlobalAvgPool2D(), (2, 3, 4, 4)),
        ('globalmax', lambda: nn.GlobalMaxPool2D(), (2, 3, 4, 4)),
        ('batchnorm', lambda: nn.BatchNorm(), (4, 3, 2, 2)),
        ('layernorm', lambda: nn.LayerNorm(), (3, 6)),
        ('flatten', lambda: nn.Flatten(), (2, 3, 4)),
        ('activation', lambda: nn.Activation('softrelu'), (3, 4)),
        ('dropout0', lambda: nn.Dropout(0.0), (3, 4)),
        ('hybridlambda', lambda: nn.HybridLambda(lambda x: np.tanh(x) * 2), (3, 4)),
    ]


def _run(net, x, head_grad):
    xs = np.array(x)
    xs.attach_grad()
    with autograd.record():
        out = net(xs)
    out.backward(np.array(head_grad))
    grads = {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()
             if p.grad_req != 'null'}
    return out.asnumpy(), xs.grad.asnumpy(), grads


@pytest.mark.parametrize('name,make,shape', _layer_cases(), ids=[c[0] for c in _layer_cases()])
def test_hybridized_equals_imperative(name, make, shape):
    net = make()
    net.initialize()
    x = _rand(*shape)
    net(np.array(x))  # finish deferred initialisation
    out_shape = net(np.array(x)).shape
    head = _rand(*out_shape, seed=2)
    imperative = _run(net, x, head)
    net.hybridize()
    traced = _run(net, x, head)   # first call: traced while running
    replayed = _run(net, x, head)  # later calls: graph replay
    for result in (traced, replayed):
        onp.testing.assert_allclose(result[0], imperative[0], 1e-5, 1e-6)
        onp.testing.assert_allclose(result[1], imperative[1], 1e-5, 1e-6)
        for key, grad in imperative[2].items():
            onp.testing.assert_allclose(result[2][key], grad, 1e-5, 1e-6, err_msg=key)
    assert len(net._cached_graphs) == 1
    bigger = (shape[0] + 1,) + shape[1:]
    if name not in ('batchnorm',):  # a new signature traces a new graph
        net(np.array(_rand(*bigger)))
        assert len(net._cached_graphs) == 2


def test_conv_deferred_in_channels_and_errors():
    conv = nn.Conv2D(4, 3, groups=2)
    conv.initialize()
    with pytest.raises(ValueError, match=r'input channels \(3\) must be divisible by groups '
                                         r'\(2\)'):
        conv(np.ones((1, 3, 5, 5)))
    with pytest.raises(ValueError, match="layout must be one of"):
        nn.Conv2D(4, 3, layout='NCW')
    conv = nn.Conv2D(4, 3, groups=2)
    conv.initialize(device=cpu(1))
    conv(np.ones((1, 6, 5, 5), device=cpu(1)))
    assert conv.weight.shape == (4, 3, 3, 3)


def test_embedding_hybridized_equals_imperative():
    emb = nn.Embedding(6, 3)
    emb.initialize()
    idx = np.array([[0, 5, 2], [2, 2, 1]], dtype='int32')
    head = np.array(_rand(2, 3, 3))

    def run():
        with autograd.record():
            out = emb(idx)
        out.backward(head)
        return out.asnumpy(), emb.weight.grad().asnumpy().copy()

    expected = run()
    emb.hybridize()
    for _ in range(2):
        for got, want in zip(run(), expected):
            onp.testing.assert_allclose(got, want, 1e-6)
