"""gluon.nn.BatchNormReLU: relu(BatchNorm(x)) with BatchNorm's arguments and parameters, in
training (batch statistics, running statistics updated alike) and inference, hybridized, its
gradients (equal to those of relu after BatchNorm), its repr; and gluon.nn.SymbolBlock, which
is gluon.SymbolBlock."""
import numpy as onp
import pytest

from pymx import autograd, gluon, np, npx
from pymx.gluon import nn
from pymx.test_utils import assert_almost_equal


def pair(**kwargs):
    """A BatchNormReLU and a BatchNorm with the same random parameters."""
    rng = onp.random.default_rng(0)
    fused, plain = nn.BatchNormReLU(**kwargs), nn.BatchNorm(**kwargs)
    for layer in (fused, plain):
        layer.initialize()
    x = np.array(rng.uniform(-1, 1, (4, 3, 2, 3)), dtype='float32')  # 3 channels on axes 1, -1
    fused(x), plain(x)  # deferred initialisation
    for name in ('gamma', 'beta', 'running_mean', 'running_var'):
        value = rng.uniform(0.5, 1.5, 3) if name in ('gamma', 'running_var') else \
            rng.uniform(-0.5, 0.5, 3)
        for layer in (fused, plain):
            getattr(layer, name).set_data(np.array(value, dtype='float32'))
    return fused, plain, x


@pytest.mark.parametrize('hybridize', [False, True])
@pytest.mark.parametrize('kwargs', [{}, {'axis': -1, 'momentum': 0.5, 'epsilon': 1e-3},
                                    {'center': False, 'scale': False}])
def test_equals_relu_of_batch_norm(kwargs, hybridize):
    fused, plain, x = pair(**kwargs)
    fused.hybridize(hybridize)
    want = plain(x).asnumpy()
    got = fused(x)
    assert_almost_equal(got, onp.maximum(want, 0), rtol=1e-6, atol=1e-7)
    assert (got.asnumpy() >= 0).all() and (got.asnumpy() == 0).any()
    x.attach_grad()
    with autograd.record():
        got = fused(x)
        want = plain(x)
    assert_almost_equal(got, onp.maximum(want.asnumpy(), 0), rtol=1e-6, atol=1e-7)
    assert_almost_equal(fused.running_mean.data(), plain.running_mean.data(), rtol=1e-6,
                        atol=1e-7)
    assert_almost_equal(fused.running_var.data(), plain.running_var.data(), rtol=1e-6,
                        atol=1e-7)


def test_parameters_and_gradients_equal_relu_of_batch_norm():
    fused, plain, x = pair()
    assert sorted(fused.collect_params()) == ['beta', 'gamma', 'running_mean', 'running_var']
    head = np.array(onp.random.default_rng(1).uniform(-1, 1, x.shape), dtype='float32')
    grads = []
    for forward, layer in ((fused, fused), (lambda v: npx.relu(plain(v)), plain)):
        x.attach_grad()
        with autograd.record():
            y = forward(x)
        y.backward(head)
        grads.append([x.grad.asnumpy(), layer.gamma.grad().asnumpy(),
                      layer.beta.grad().asnumpy()])
    for got, want in zip(*grads):
        assert onp.abs(want).max() > 0
        assert_almost_equal(got, want, rtol=1e-5, atol=1e-6, names=('BatchNormReLU', 'relu(BN)'))


def test_repr_and_symbol_block():
    assert repr(nn.BatchNormReLU(in_channels=3)).startswith('BatchNormReLU(axis=1, eps=1e-05')
    assert repr(nn.BatchNorm()).startswith('BatchNorm(axis=1')
    assert nn.SymbolBlock is gluon.SymbolBlock
    assert 'BatchNormReLU' in nn.__all__ and 'SymbolBlock' in nn.__all__
