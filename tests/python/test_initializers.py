"""Orthogonal, Bilinear, LSTMBias, Mixed and Load initializers: shapes, statistics and defining
properties (orthogonality, the bilinear kernel values, the forget-gate slice), their use through
Parameters and Blocks, create() by name and from dumps(), and the errors for bad arguments."""
import math

import numpy as onp
import pytest

from pymx import initializer as init
from pymx import np
from pymx.gluon import Parameter, nn
from pymx.gluon._params_file import save_npz


def _filled(initializer, shape, device=None, dtype='float32', name='weight'):
    arr = np.zeros(shape, dtype=dtype, device=device)
    initializer(name, arr, explicit=True)
    return arr


@pytest.mark.parametrize('shape', [(3, 5), (5, 3), (4, 4), (4, 2, 3, 3), (6,)])
@pytest.mark.parametrize('rand_type', ['uniform', 'normal'])
def test_orthogonal_rows_or_columns_are_orthonormal(shape, rand_type, device):
    scale = 1.5
    arr = _filled(init.Orthogonal(scale=scale, rand_type=rand_type), shape, device)
    assert arr.shape == shape and arr.device == device
    flat = arr.asnumpy().astype('float64').reshape(shape[0], -1)
    gram = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
    onp.testing.assert_allclose(gram, scale ** 2 * onp.eye(len(gram)), atol=1e-5)


def test_orthogonal_default_scale_float16_and_fresh_draws():
    first = _filled(init.Orthogonal(), (4, 6)).asnumpy()
    second = _filled(init.Orthogonal(), (4, 6)).asnumpy()
    onp.testing.assert_allclose(first @ first.T, 1.414 ** 2 * onp.eye(4), atol=1e-5)
    assert not onp.allclose(first, second)  # random: two draws differ
    half = _filled(init.Orthogonal(scale=1.0), (8, 8), dtype='float16').asnumpy()
    assert half.dtype == onp.float16
    onp.testing.assert_allclose(half.astype('float64') @ half.T.astype('float64'), onp.eye(8),
                                atol=5e-3)


def _bilinear_reference(shape):
    """The kernel element by element, as the formula reads."""
    weight = onp.zeros(shape)
    f = math.ceil(shape[3] / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    for index in onp.ndindex(shape):
        y, x = index[2], index[3]
        weight[index] = (1 - abs(x / f - c)) * (1 - abs(y / f - c))
    return weight


@pytest.mark.parametrize('shape', [(2, 3, 4, 4), (1, 1, 3, 3), (1, 2, 5, 5)])
def test_bilinear_kernel_values(shape, device):
    arr = _filled(init.Bilinear(), shape, device)
    onp.testing.assert_allclose(arr.asnumpy(), _bilinear_reference(shape), rtol=1e-6)


def test_bilinear_4x4_kernel_is_the_2x_upsampling_kernel():
    kernel = _filled(init.Bilinear(), (1, 1, 4, 4)).asnumpy()[0, 0]
    taps = onp.array([0.25, 0.75, 0.75, 0.25])
    onp.testing.assert_allclose(kernel, onp.outer(taps, taps), rtol=1e-6)


def test_lstm_bias_sets_the_forget_gate_only():
    param = Parameter('bias', shape=(12,), init=init.LSTMBias(forget_bias=2.0))
    param.initialize()
    onp.testing.assert_array_equal(param.data().asnumpy(), [0] * 3 + [2] * 3 + [0] * 6)
    onp.testing.assert_array_equal(_filled(init.LSTMBias(), (8,)).asnumpy(),
                                   [0, 0, 1, 1, 0, 0, 0, 0])


def test_mixed_picks_the_first_matching_pattern():
    net = nn.Dense(3, in_units=4)
    net.initialize(init.Mixed(['bias', '.*'], [init.Constant(5.0), init.One()]))
    onp.testing.assert_array_equal(net.weight.data().asnumpy(), onp.ones((3, 4)))
    # A global initializer keeps the name rule for biases: zero, as in MXNet.
    onp.testing.assert_array_equal(net.bias.data().asnumpy(), onp.zeros(3))
    # A Parameter's own initializer applies its weight rule whatever the name.
    own = Parameter('bias', shape=(3,), init=init.Mixed(['b.*'], ['ones']))
    own.initialize()
    onp.testing.assert_array_equal(own.data().asnumpy(), onp.ones(3))
    with pytest.raises(ValueError, match=r"Parameter name weight did not match any pattern "
                                         r"\['bias'\]"):
        init.Mixed(['bias'], [init.Zero()])('weight', np.zeros(2))
    with pytest.raises(ValueError, match="Mixed: 2 patterns for 1 initializers"):
        init.Mixed(['a', 'b'], [init.Zero()])


def test_load_from_a_dict_and_a_file(tmp_path):
    weight = onp.arange(12, dtype='float32').reshape(3, 4)
    loader = init.Load({'arg:weight': weight}, default_init=init.Constant(7.0))
    net = nn.Dense(3, in_units=4)
    net.initialize(loader)
    onp.testing.assert_array_equal(net.weight.data().asnumpy(), weight)
    onp.testing.assert_array_equal(net.bias.data().asnumpy(), onp.zeros(3))  # name rule
    path = str(tmp_path / 'saved.npz')
    save_npz(path, {'weight': weight * 2, 'bias': onp.ones(3, 'float32')})
    own = Parameter('bias', shape=(3,), init=init.Load(path))
    own.initialize()
    onp.testing.assert_array_equal(own.data().asnumpy(), onp.ones(3))
    with pytest.raises(ValueError, match=r"Shape mismatch, target \(2, 2\) vs loaded \(3, 4\)"):
        init.Load({'weight': weight})('weight', np.zeros((2, 2)))
    with pytest.raises(ValueError, match="Cannot initialize gamma: not found"):
        init.Load({'weight': weight})('gamma', np.zeros(3), explicit=True)
    with pytest.raises(TypeError, match="param must be a dict of arrays or a file name, got list"):
        init.Load([weight])


@pytest.mark.parametrize('name,klass', [('orthogonal', init.Orthogonal),
                                        ('bilinear', init.Bilinear),
                                        ('lstmbias', init.LSTMBias)])
def test_create_by_name_and_from_dumps(name, klass):
    assert type(init.create(name)) is klass
    assert type(init.create(klass().dumps())) is klass
    restored = init.create(init.Orthogonal(scale=0.5, rand_type='normal').dumps())
    assert (restored.scale, restored.rand_type) == (0.5, 'normal')


def test_bad_arguments():
    with pytest.raises(ValueError, match="rand_type must be 'uniform' or 'normal', got 'gauss'"):
        init.Orthogonal(rand_type='gauss')
    with pytest.raises(ValueError, match=r"Bilinear initializer needs a 4-D weight .* weight has "
                                         r"shape \(3, 3\)"):
        _filled(init.Bilinear(), (3, 3))
    with pytest.raises(ValueError, match=r"multiple of 4\); bias has shape \(6,\)"):
        _filled(init.LSTMBias(), (6,), name='bias')
    with pytest.raises(ValueError, match="Unknown initializer 'nope'"):
        init.create('["nope", {}]')
