"""Parameter, Constant, initializers and the collect_params() dict."""
import math
import warnings

import numpy as onp
import pytest

from pymx import autograd, cpu, initializer as init, np
from pymx.gluon import Constant, DeferredInitializationError, Parameter, nn


def test_initialize_on_several_devices_gives_identical_copies():
    p = Parameter('weight', shape=(3, 4))
    p.initialize(init=init.Uniform(0.5), device=[cpu(0), cpu(1)])
    assert p.list_device() == [cpu(0), cpu(1)]
    a, b = (d.asnumpy() for d in p.list_data())
    onp.testing.assert_array_equal(a, b)
    assert onp.abs(a).max() <= 0.5 and a.std() > 0
    assert p.data(cpu(1)).device == cpu(1)
    assert p.grad(cpu(1)).shape == (3, 4)
    onp.testing.assert_array_equal(p.grad(cpu(0)).asnumpy(), onp.zeros((3, 4)))


def test_data_errors_name_the_parameter():
    p = Parameter('weight', shape=(2,))
    with pytest.raises(RuntimeError, match="Parameter 'weight' has not been initialized. Note "
                                           "that you should initialize parameters"):
        p.data()
    p.initialize(device=[cpu(0), cpu(1)])
    with pytest.raises(RuntimeError, match=r"Parameter 'weight' was not initialized on device "
                                           r"cpu\(2\). It was only initialized on \[cpu\(0\), "
                                           r"cpu\(1\)\]"):
        p.data(cpu(2))
    with cpu(1):
        assert p.data().device == cpu(1)  # several copies: the current device's
    q = Parameter('bias', shape=(2,), grad_req='null')
    q.initialize()
    with pytest.raises(RuntimeError, match="Cannot get gradient array for Parameter 'bias' "
                                           "because grad_req='null'"):
        q.grad()


def test_deferred_initialization():
    p = Parameter('weight', shape=(4, 0), allow_deferred_init=True)
    assert p.shape == (4, -1)
    p.initialize(device=cpu(1))
    assert p.list_device() == [cpu(1)]
    with pytest.raises(DeferredInitializationError, match="initialization was deferred"):
        p.data()
    p.shape = (4, 7)
    p._finish_deferred_init()
    assert p.data().shape == (4, 7) and p.data().device == cpu(1)
    with pytest.raises(ValueError, match=r"Expected shape \(5, 7\) is incompatible with given "
                                         r"shape \(4, 7\) for Parameter 'weight'"):
        p.shape = (5, 7)
    no_defer = Parameter('weight', shape=(4, 0))
    with pytest.raises(ValueError, match=r"Cannot initialize Parameter 'weight' because it has "
                                         r"invalid shape: \(4, -1\)"):
        no_defer.initialize()


def test_reinitialize_warns_unless_forced():
    p = Parameter('weight', shape=(2, 2), init=init.Constant(1.0))
    p.initialize()
    with pytest.warns(UserWarning, match="Parameter 'weight' is already initialized, ignoring"):
        p.initialize()
    p.init = init.Constant(3.0)
    p.initialize(force_reinit=True, device=[cpu(0), cpu(1)])
    onp.testing.assert_array_equal(p.data(cpu(1)).asnumpy(), onp.full((2, 2), 3.0))


def test_grad_req_validation_and_switching():
    with pytest.raises(ValueError, match="grad_req must be one of 'write', 'add', or 'null', "
                                         "but got 'sometimes'"):
        Parameter('w', grad_req='sometimes')
    p = Parameter('w', shape=(3,))
    p.initialize()
    p.grad_req = 'null'
    with pytest.raises(RuntimeError, match="grad_req='null'"):
        p.list_grad()
    p.grad_req = 'write'
    x = np.ones((3,))
    with autograd.record():
        y = (p.data() * x * 2).sum()
    y.backward()
    onp.testing.assert_allclose(p.grad().asnumpy(), [2.0, 2.0, 2.0])
    assert Parameter('w', grad_req='write', differentiable=False).grad_req == 'null'


def test_grad_req_add_accumulates_and_zero_grad():
    p = Parameter('w', shape=(2,), grad_req='add')
    p.initialize(init=init.One())
    for _ in range(3):
        with autograd.record():
            y = (p.data() * 3).sum()
        y.backward()
    onp.testing.assert_allclose(p.grad().asnumpy(), [9.0, 9.0])
    p.zero_grad()
    onp.testing.assert_array_equal(p.grad().asnumpy(), [0.0, 0.0])


def test_set_data_reset_device_cast():
    p = Parameter('w', shape=(2,))
    p.initialize(device=[cpu(0), cpu(1)])
    p.set_data(np.array([1.0, 2.0]))
    for d in p.list_data():
        onp.testing.assert_array_equal(d.asnumpy(), [1.0, 2.0])
    p.data(cpu(1))[:] = np.array([3.0, 4.0], device=cpu(1))
    p.reset_device(cpu(0))  # copies are averaged first
    assert p.list_device() == [cpu(0)]
    onp.testing.assert_array_equal(p.data().asnumpy(), [2.0, 3.0])
    p.cast('float64')
    assert p.data().dtype == onp.float64 and p.grad().dtype == onp.float64
    with pytest.raises(ValueError, match="Cannot reset device for Parameter 'x' because it has "
                                         "not been initialized"):
        Parameter('x', shape=(1,)).reset_device(cpu())


def test_constant():
    c = Constant(onp.array([[1.0, 2.0]]))
    c.initialize()
    assert c.grad_req == 'null' and c.dtype == 'float32'
    onp.testing.assert_array_equal(c.data().asnumpy(), [[1.0, 2.0]])


def test_default_init_rules_by_name():
    names = {'bias': 0.0, 'beta': 0.0, 'gamma': 1.0, 'running_mean': 0.0, 'running_var': 1.0}
    for name, value in names.items():
        p = Parameter(name, shape=(5,))
        p.initialize(default_init=init.Xavier())  # Xavier would reject a vector
        onp.testing.assert_array_equal(p.data().asnumpy(), onp.full(5, value))
    # A parameter's own initializer applies whatever its name.
    p = Parameter('bias', shape=(5,), init=init.Constant(2.5))
    p.initialize()
    onp.testing.assert_array_equal(p.data().asnumpy(), onp.full(5, 2.5))


def test_initializer_statistics():
    np.random.seed(0)
    shape = (64, 32, 3, 3)
    fan_in, fan_out = 32 * 9, 64 * 9
    cases = [(init.Uniform(0.2), 'uniform', 0.2),
             (init.Normal(0.05), 'normal', 0.05),
             (init.Xavier(), 'uniform', math.sqrt(3.0 / ((fan_in + fan_out) / 2))),
             (init.Xavier('gaussian', 'in', 2), 'normal', math.sqrt(2.0 / fan_in)),
             (init.MSRAPrelu(slope=0.0), 'normal', math.sqrt(2.0 / ((fan_in + fan_out) / 2)))]
    for initializer, kind, scale in cases:
        p = Parameter('weight', shape=shape, init=initializer)
        p.initialize()
        values = p.data().asnumpy()
        assert abs(values.mean()) < 0.05 * scale
        if kind == 'uniform':
            assert values.max() <= scale and values.min() >= -scale
            assert abs(values.std() - scale / math.sqrt(3)) < 0.05 * scale
        else:
            assert abs(values.std() - scale) < 0.05 * scale
    with pytest.raises(ValueError, match='Xavier initializer cannot be applied to vector weight'):
        p = Parameter('weight', shape=(4,), init=init.Xavier())
        p.initialize()
    with pytest.raises(ValueError, match="Unknown initializer 'nope'"):
        init.create('nope')
    assert isinstance(init.create('zeros'), init.Zero)


def test_collect_params_dict_helpers():
    net = nn.HybridSequential()
    net.add(nn.Dense(2, in_units=3), nn.Dense(1, in_units=2))
    params = net.collect_params()
    assert list(params) == ['0.weight', '0.bias', '1.weight', '1.bias']
    params.initialize(device=[cpu(0), cpu(1)])
    params.setattr('lr_mult', 0.5)
    assert all(p.lr_mult == 0.5 for p in params.values())
    params.reset_device(cpu(1))
    assert params.list_device() == [cpu(1)]
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        params.zero_grad()


def test_collect_params_save_and_load(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    path = str(tmp_path / 'dense.params')
    net.collect_params().save(path)
    other = nn.Dense(2, in_units=3)
    other.collect_params().load(path, device=cpu(1))
    assert other.weight.list_device() == [cpu(1)]
    onp.testing.assert_array_equal(other.weight.data().asnumpy(), net.weight.data().asnumpy())


def test_top_level_aliases_follow_mxnet():
    import pymx
    assert pymx.init is pymx.initializer
    net = pymx.gluon.nn.Dense(3, in_units=2)
    net.initialize(pymx.init.Constant(0.5))
    assert (net.weight.data().asnumpy() == 0.5).all()
    assert isinstance(pymx.optimizer.create('sgd', learning_rate=0.1), pymx.optimizer.SGD)
