"""Activation layers (LeakyReLU, PReLU, ELU, SELU, GELU, SiLU, Swish), Identity, Concatenate,
HybridConcatenate, InstanceNorm, GroupNorm and PixelShuffle1D/2D/3D: outputs and gradients
against float64 NumPy references, parameter names and shapes (MXNet's, so checkpoints load),
hybridized == imperative, GPU against CPU, and the errors."""
import math

import numpy as onp
import pytest

import pymx
from pymx import amp, autograd, initializer, np
from pymx.gluon import nn
from pymx.test_utils import assert_almost_equal
from conftest import requires_gpu

_erf = onp.vectorize(math.erf)
SELU_LAMBDA, SELU_ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717


def _rand(*shape, seed=0):
    return onp.random.default_rng(seed).uniform(-2, 2, size=shape)


def sigmoid(x):
    return 1 / (1 + onp.exp(-x))


def group_norm_ref(x, gamma, beta, groups, eps):
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    normalised = ((g - g.mean(axis=2, keepdims=True)) /
                  onp.sqrt(g.var(axis=2, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return normalised * gamma.reshape(shape) + beta.reshape(shape)


def pixel_shuffle_ref(x, factors):
    n, c = x.shape[:2]
    k = len(factors)
    block = int(onp.prod(factors))
    spatial = x.shape[2:]
    y = x.reshape((n, c // block) + tuple(factors) + spatial)
    axes = [0, 1] + [a for i in range(k) for a in (2 + k + i, 2 + i)]
    return y.transpose(axes).reshape((n, c // block) +
                                     tuple(d * f for d, f in zip(spatial, factors)))


# name, layer factory, input shape, reference of (x, params) in float64
LAYERS = [
    ('leakyrelu', lambda: nn.LeakyReLU(0.1), (3, 4),
     lambda x, p: onp.where(x > 0, x, 0.1 * x)),
    ('prelu', lambda: nn.PReLU(), (3, 4),
     lambda x, p: onp.where(x > 0, x, p['alpha'] * x)),
    ('prelu_channels', lambda: nn.PReLU(initializer.Uniform(0.5), in_channels=3), (2, 3, 4),
     lambda x, p: onp.where(x > 0, x, p['alpha'].reshape(1, 3, 1) * x)),
    ('elu', lambda: nn.ELU(), (3, 4), lambda x, p: onp.where(x > 0, x, onp.expm1(x))),
    ('elu_alpha', lambda: nn.ELU(0.5), (3, 4),
     lambda x, p: onp.where(x > 0, x, 0.5 * onp.expm1(x))),
    ('selu', lambda: nn.SELU(), (3, 4),
     lambda x, p: SELU_LAMBDA * onp.where(x > 0, x, SELU_ALPHA * onp.expm1(x))),
    ('gelu', lambda: nn.GELU(), (3, 4), lambda x, p: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    ('gelu_tanh', lambda: nn.GELU(approximation='tanh'), (3, 4),
     lambda x, p: 0.5 * x * (1 + onp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    ('silu', lambda: nn.SiLU(), (3, 4), lambda x, p: x * sigmoid(x)),
    ('swish', lambda: nn.Swish(beta=2.0), (3, 4), lambda x, p: x * sigmoid(2 * x)),
    ('identity', lambda: nn.Identity(), (3, 4), lambda x, p: x),
    ('groupnorm', lambda: nn.GroupNorm(num_groups=2, gamma_initializer=initializer.Uniform(1),
                                       beta_initializer=initializer.Uniform(1)), (2, 4, 3, 2),
     lambda x, p: group_norm_ref(x, p['gamma'], p['beta'], 2, 1e-5)),
    ('instancenorm', lambda: nn.InstanceNorm(scale=True, gamma_initializer=initializer.Uniform(1),
                                             beta_initializer=initializer.Uniform(1)), (2, 3, 5),
     lambda x, p: group_norm_ref(x, p['gamma'], p['beta'], 3, 1e-5)),
    ('instancenorm_axis', lambda: nn.InstanceNorm(axis=-1, center=False), (2, 5, 3),
     lambda x, p: group_norm_ref(x.swapaxes(1, 2), p['gamma'], p['beta'], 3,
                                 1e-5).swapaxes(1, 2)),
    ('pixelshuffle1d', lambda: nn.PixelShuffle1D(3), (2, 6, 4),
     lambda x, p: pixel_shuffle_ref(x, (3,))),
    ('pixelshuffle2d', lambda: nn.PixelShuffle2D((2, 3)), (1, 12, 2, 3),
     lambda x, p: pixel_shuffle_ref(x, (2, 3))),
    ('pixelshuffle3d', lambda: nn.PixelShuffle3D(2), (1, 16, 2, 1, 3),
     lambda x, p: pixel_shuffle_ref(x, (2, 2, 2))),
]
IDS = [case[0] for case in LAYERS]


def _run(net, x, head, dtype='float64', device=None):
    data = np.array(x, dtype=dtype, device=device)
    data.attach_grad()
    with autograd.record():
        out = net(data)
    out.backward(np.array(head, dtype=dtype, device=device))
    grads = {k: p.grad(device).asnumpy().copy() for k, p in net.collect_params().items()
             if p.grad_req != 'null'}
    return out.asnumpy(), data.grad.asnumpy(), grads


def _initialized(make, shape, dtype='float64', device=None):
    net = make()
    net.initialize(device=device)
    net.cast(dtype)
    net(np.array(_rand(*shape), dtype=dtype, device=device))  # finish deferred initialisation
    return net


@pytest.mark.parametrize('name,make,shape,reference', LAYERS, ids=IDS)
def test_layer_output_and_gradients(name, make, shape, reference):
    """Output against the float64 reference; input and parameter gradients against central
    differences of the reference."""
    net = _initialized(make, shape)
    params = {k: p.data().asnumpy() for k, p in net.collect_params().items()}
    x = _rand(*shape, seed=1)
    x[onp.abs(x) < 0.05] = 0.1  # keep central differences off the ReLU family's kink
    head = _rand(*reference(x, params).shape, seed=2)
    out, x_grad, grads = _run(net, x, head)
    assert_almost_equal(out, reference(x, params), rtol=1e-10, atol=1e-12)
    eps = 1e-6

    def loss(x_value, param_values):
        return (reference(x_value, param_values) * head).sum()

    numeric = onp.zeros_like(x)
    for i in onp.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += eps
        minus[i] -= eps
        numeric[i] = (loss(plus, params) - loss(minus, params)) / (2 * eps)
    assert_almost_equal(x_grad, numeric, rtol=1e-5, atol=1e-7)
    for key, grad in grads.items():
        numeric = onp.zeros_like(params[key])
        for i in onp.ndindex(params[key].shape):
            plus = dict(params, **{key: params[key].copy()})
            minus = dict(params, **{key: params[key].copy()})
            plus[key][i] += eps
            minus[key][i] -= eps
            numeric[i] = (loss(x, plus) - loss(x, minus)) / (2 * eps)
        assert_almost_equal(grad, numeric, rtol=1e-5, atol=1e-7, names=(key, 'numeric'))


@pytest.mark.parametrize('name,make,shape,reference', LAYERS, ids=IDS)
def test_hybridized_equals_imperative(name, make, shape, reference):
    net = _initialized(make, shape, dtype='float32')
    x = _rand(*shape, seed=3)
    head = _rand(*net(np.array(x, dtype='float32')).shape, seed=4)
    imperative = _run(net, x, head, dtype='float32')
    net.hybridize()
    for _ in range(2):  # traced, then replayed
        result = _run(net, x, head, dtype='float32')
        assert_almost_equal(result[0], imperative[0], rtol=0, atol=0)
        assert_almost_equal(result[1], imperative[1], rtol=0, atol=0)
        for key, grad in imperative[2].items():
            assert_almost_equal(result[2][key], grad, rtol=0, atol=0, names=(key, 'imperative'))


def test_parameter_names_and_shapes():
    """MXNet 2.x's parameter names and shapes, so that its checkpoints load."""
    expected = [
        (nn.PReLU(), (3, 4), {'alpha': (1,)}),
        (nn.PReLU(in_channels=4), (2, 4, 3), {'alpha': (4,)}),
        (nn.GroupNorm(num_groups=2), (2, 6, 3), {'gamma': (6,), 'beta': (6,)}),
        (nn.InstanceNorm(), (2, 5, 3), {'gamma': (5,), 'beta': (5,)}),
        (nn.InstanceNorm(axis=2), (2, 5, 3), {'gamma': (3,), 'beta': (3,)}),
    ]
    for layer, shape, params in expected:
        layer.initialize()
        layer(np.array(_rand(*shape), dtype='float32'))
        got = {k: p.shape for k, p in layer.collect_params().items()}
        assert got == params, layer
    prelu = nn.PReLU()
    prelu.initialize()
    assert prelu.collect_params()['alpha'].data().asnumpy().tolist() == [0.25]  # MXNet's default
    # InstanceNorm scales by a fixed gamma unless scale=True (MXNet's default scale=False).
    assert nn.InstanceNorm().gamma.grad_req == 'null'
    assert nn.InstanceNorm(scale=True).gamma.grad_req == 'write'
    assert nn.GroupNorm(center=False).beta.grad_req == 'null'


def test_prelu_and_groupnorm_save_load_round_trip(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3), nn.GroupNorm(num_groups=2), nn.PReLU(in_channels=4))
    net.initialize(initializer.Uniform(0.5))
    x = np.array(_rand(2, 3, 5, 5), dtype='float32')
    want = net(x).asnumpy()
    path = str(tmp_path / 'net.params')
    net.save_parameters(path)
    other = nn.HybridSequential()
    other.add(nn.Conv2D(4, 3), nn.GroupNorm(num_groups=2), nn.PReLU(in_channels=4))
    other.load_parameters(path)
    assert_almost_equal(other(x), want, rtol=0, atol=0)


def test_concatenate_and_hybrid_concatenate():
    x = np.array(_rand(2, 3), dtype='float32')
    for cls in (nn.Concatenate, nn.HybridConcatenate):
        net = cls(axis=1)
        net.add(nn.Dense(4, in_units=3), nn.Identity(), nn.Dense(2, in_units=3))
        net.initialize()
        parts = [block(x).asnumpy() for block in net._children.values()]
        want = onp.concatenate(parts, axis=1)
        assert_almost_equal(net(x), want, rtol=0, atol=0)
        assert len(net) == 3
        if cls is nn.HybridConcatenate:
            net.hybridize()
            assert_almost_equal(net(x), want, rtol=1e-6, atol=1e-7)
    default_axis = nn.HybridConcatenate()
    default_axis.add(nn.Identity(), nn.Identity())
    assert default_axis(x).shape == (2, 6)


@pytest.mark.parametrize('make,shape', [
    (lambda: nn.GELU(), (2, 3, 4)), (lambda: nn.SELU(), (2, 3, 4)),
    (lambda: nn.PReLU(in_channels=3), (2, 3, 4)), (lambda: nn.GroupNorm(3), (2, 6, 4, 4)),
    (lambda: nn.InstanceNorm(scale=True), (2, 3, 16)), (lambda: nn.PixelShuffle2D(2), (2, 8, 2, 3)),
])
@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_16bit_layers_match_float32(make, shape, dtype):
    """A 16-bit layer computes in float: its result is float32's on the same rounded values,
    rounded."""
    net = _initialized(make, shape, dtype='float32')
    x = np.array(_rand(*shape, seed=5), dtype=dtype)
    want = net(x.astype('float32')).asnumpy()
    net.cast(dtype)
    got = net(x)
    assert got.dtype == x.dtype
    assert_almost_equal(got, want)


@requires_gpu
@pytest.mark.parametrize('name,make,shape,reference', LAYERS, ids=IDS)
def test_gpu_matches_cpu(name, make, shape, reference):
    x = _rand(*shape, seed=6)
    results = []
    params = None
    for device in (pymx.cpu(0), pymx.gpu(0)):
        net = make()
        net.initialize(initializer.Constant(0.3), device=device)
        head = _rand(*net(np.array(x, dtype='float32', device=device)).shape, seed=7)
        # Layers with random initializers of their own (PReLU's alpha, the norms' gamma and
        # beta): the GPU net gets the CPU net's values.
        if params is None:
            params = {k: p.data().asnumpy() for k, p in net.collect_params().items()}
        else:
            for k, p in net.collect_params().items():
                p.set_data(np.array(params[k], dtype='float32', device=device))
        results.append(_run(net, x, head, dtype='float32', device=device))
    cpu, gpu = results
    for got, want in zip(gpu[:2], cpu[:2]):
        assert_almost_equal(got, want)
    for key, grad in cpu[2].items():
        assert_almost_equal(gpu[2][key], grad, names=(key, 'cpu'))


@pytest.mark.parametrize('target', ['float16', 'bfloat16'])
def test_amp_converted_block_matches_float32(target):
    """amp runs group_norm, instance_norm and prelu in float32 (their float32 parameters must
    match their data), the rest of the net in the low dtype."""
    amp._reset()
    try:
        net = nn.HybridSequential()
        net.add(nn.Conv2D(8, 3), nn.GroupNorm(num_groups=4), nn.PReLU(in_channels=8),
                nn.InstanceNorm(scale=True), nn.GELU(), nn.Conv2D(4, 1))
        net.initialize(initializer.Uniform(0.5))
        x = np.array(_rand(2, 3, 6, 6), dtype='float32')
        want = net(x).asnumpy()
        converted = amp.convert_hybrid_block(net, x, target_dtype=target)
        got = converted(x)
        assert got.dtype == np.ones(1, dtype=target).dtype
        assert_almost_equal(got.asnumpy(), want, rtol=0.05, atol=0.1)
    finally:
        amp._reset()


def test_errors():
    with pytest.raises(ValueError, match=r"alpha \(the negative slope\) must be >= 0, got -0.1"):
        nn.LeakyReLU(-0.1)
    with pytest.raises(ValueError, match="approximation must be 'erf' or 'tanh', got 'sigmoid'"):
        nn.GELU(approximation='sigmoid')
    with pytest.raises(ValueError, match="in_channels must be a positive int, got 0"):
        nn.PReLU(in_channels=0)
    with pytest.raises(ValueError, match="num_groups must be a positive int, got 0"):
        nn.GroupNorm(num_groups=0)
    with pytest.raises(ValueError, match="num_groups 4 does not divide in_channels 6"):
        nn.GroupNorm(num_groups=4, in_channels=6)
    with pytest.raises(ValueError, match="factors must be positive"):
        nn.PixelShuffle2D((2, 0))
    with pytest.raises(ValueError, match=r"factor must be an int or a tuple of 3 ints"):
        nn.PixelShuffle3D((2, 2))
    shuffle = nn.PixelShuffle2D(2)
    with pytest.raises(ValueError, match=r"6 channels are not divisible by the product 4"):
        shuffle(np.ones((1, 6, 2, 2)))
    with pytest.raises(ValueError, match=r"must have 4 dimensions.*\(1, 8, 2\)"):
        shuffle(np.ones((1, 8, 2)))
    # PReLU with 4 slopes on 3 channels: the operator names both shapes.
    prelu = nn.PReLU(in_channels=4)
    prelu.initialize()
    with pytest.raises(ValueError, match=r"gamma shape \(4,\) must be \(1,\) or \(3,\)"):
        prelu(np.ones((2, 3, 5)))
    # GroupNorm whose groups do not divide the channels found at the first call.
    norm = nn.GroupNorm(num_groups=4)
    norm.initialize()
    with pytest.raises(ValueError, match=r"num_groups 4 does not divide the 6 channels"):
        norm(np.ones((2, 6, 3)))
