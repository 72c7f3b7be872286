"""gluon.nn.ReflectionPad2D: outputs against NumPy's reflect padding, gradients against finite
differences, hybridized equal to imperative, errors naming the values."""
import numpy as onp
import pytest

from pymx import autograd, np
from pymx.gluon import nn
from pymx.test_utils import assert_almost_equal, check_numeric_gradient


@pytest.mark.parametrize('padding, widths', [
    (2, ((2, 2), (2, 2))),
    ((0, 0, 0, 0, 1, 0, 3, 2), ((1, 0), (3, 2))),
    ((0, 0, 0, 0, 2, 1, 0, 1), ((2, 1), (0, 1))),
])
@pytest.mark.parametrize('hybridize', [False, True])
def test_matches_numpy_reflect(device, padding, widths, hybridize):
    layer = nn.ReflectionPad2D(padding)
    layer.hybridize(hybridize)
    x = onp.random.uniform(-1, 1, (2, 3, 4, 5))
    out = layer(np.array(x, dtype='float32', device=device))
    expected = onp.pad(x, ((0, 0), (0, 0)) + widths, mode='reflect')
    assert out.shape == expected.shape
    assert_almost_equal(out, expected.astype(onp.float32), rtol=0, atol=0)


def test_gradient_against_finite_differences(device):
    layer = nn.ReflectionPad2D((0, 0, 0, 0, 2, 1, 1, 2))
    check_numeric_gradient(layer, [onp.random.uniform(-1, 1, (1, 2, 3, 4))], device=device)


def test_hybridized_gradient_equals_imperative():
    x = np.array(onp.random.uniform(-1, 1, (2, 2, 3, 3)), dtype='float32')
    head = np.array(onp.random.uniform(-1, 1, (2, 2, 7, 7)), dtype='float32')
    grads = []
    for hybridize in (False, True):
        layer = nn.ReflectionPad2D(2)
        layer.hybridize(hybridize)
        x.attach_grad()
        with autograd.record():
            out = layer(x)
        out.backward(head)
        grads.append(x.grad.asnumpy())
    assert_almost_equal(grads[1], grads[0], rtol=0, atol=0)
    assert repr(nn.ReflectionPad2D(1)) == 'ReflectionPad2D(padding=(1, 1, 1, 1))'


@pytest.mark.parametrize('padding', [-1, (1, 2), (1, 1, 1, 1, 1, 1, 1, 1), 1.5, (1, 1, 1, 1),
                                     (0, 0, 0, 0, 1, 1, -1, 0)])
def test_bad_padding_is_named(padding):
    with pytest.raises(ValueError, match=r"ReflectionPad2D: padding must be .* got "):
        nn.ReflectionPad2D(padding)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"input must be 4-D \(N, C, H, W\), got shape \(2, 3\)"):
        nn.ReflectionPad2D(1)(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"padding \(3, 3, 3, 3\) must be smaller than the height "
                                         r"and width it pads, input shape \(1, 1, 3, 5\)"):
        nn.ReflectionPad2D(3)(np.ones((1, 1, 3, 5)))
