"""Regression tests for divergences from MXNet found by running the same scripts under MXNet and
pymx (gluon losses and layers, Trainer, optimizers, autograd). Each expected value is a float64
NumPy reference or a rule stated in the test."""
import warnings

import numpy as onp
import pytest

from pymx import autograd, np, optimizer as opt


def _one_update(name, weight, grad, **kwargs):
    updater = opt.get_updater(opt.create(name, **kwargs))
    w = np.array(weight, dtype='float32')
    updater(0, np.array(grad, dtype='float32'), w)
    return w.asnumpy().astype('float64')


W0 = onp.array([1.0, -1.0, 0.5])
G0 = onp.array([0.5, -2.0, 3.0])


@pytest.mark.parametrize('clip', [0, 0.0, -1.0])
def test_clip_gradient_zero_or_negative_turns_clipping_off(clip):
    # MXNet's fused rules pass clip_gradient to their kernels only when it is truthy, and the
    # kernels clip only when it is >= 0: clip_gradient=0 trains like no clipping, where clipping
    # to [0, 0] would zero every gradient and never move the weights.
    got = _one_update('sgd', W0, G0, learning_rate=0.1, clip_gradient=clip)
    onp.testing.assert_allclose(got, W0 - 0.1 * G0, rtol=1e-6)
    got = _one_update('adagrad', W0, G0, learning_rate=0.1, clip_gradient=clip)
    onp.testing.assert_allclose(got, W0 - 0.1 * G0 / (onp.abs(G0) + 1e-6), rtol=1e-5)
    got = _one_update('adabelief', W0, G0, learning_rate=0.1, clip_gradient=clip)
    onp.testing.assert_allclose(got, _one_update('adabelief', W0, G0, learning_rate=0.1),
                                rtol=1e-6)


@pytest.mark.parametrize('centered', [False, True])
def test_rmsprop_clip_weights_zero_turns_weight_clipping_off(centered):
    got = _one_update('rmsprop', W0, G0, learning_rate=0.1, centered=centered, clip_weights=0)
    want = _one_update('rmsprop', W0, G0, learning_rate=0.1, centered=centered)
    onp.testing.assert_allclose(got, want, rtol=1e-6)
    assert onp.abs(got).max() > 0.5  # not clipped to [0, 0]
    # A positive bound still clips.
    clipped = _one_update('rmsprop', W0, G0, learning_rate=0.1, centered=centered,
                          clip_weights=0.3)
    onp.testing.assert_allclose(clipped, onp.clip(want, -0.3, 0.3), rtol=1e-6)


# ---- autograd ---------------------------------------------------------------------------------

def _marked(values):
    x = np.array(onp.asarray(values, dtype='float32'))
    x.attach_grad()
    return x


@pytest.mark.parametrize('write', ['iadd', 'imul_self', 'setitem', 'setitem_all', 'variable'])
def test_writing_into_a_recorded_array_raises_and_changes_nothing(write):
    # An earlier op's gradient would read the overwritten values (y * y reads y): MXNet refuses
    # such writes inside record(), and so does pymx, before the write happens.
    x = _marked([1.0, 2.0, 3.0])
    with autograd.record():
        y = x * 2
        z = y * y
        target = x if write == 'variable' else y
        before = target.asnumpy()
        with pytest.raises(ValueError, match=r"writes into output 0, an array already in the "
                                             r"recorded graph\. Assigning to NDArrays"):
            if write == 'iadd' or write == 'variable':
                target += x
            elif write == 'imul_self':
                target *= target
            elif write == 'setitem':
                target[1] = x[0]
            else:
                target[:] = x * 3
        onp.testing.assert_array_equal(target.asnumpy(), before)
        loss = (z + y).sum()
    loss.backward()  # the graph is intact: d/dx sum(4x^2 + 2x) = 8x + 2
    onp.testing.assert_allclose(x.grad.asnumpy(), 8 * onp.array([1.0, 2.0, 3.0]) + 2)


def test_writes_after_backward_are_allowed():
    x = _marked([1.0, 2.0, 3.0])
    with autograd.record():
        y = x * 2
        loss = (y * x).sum()
    loss.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), [4.0, 8.0, 12.0])
    with autograd.record():  # backward freed the graph that read `loss` and `y` (MXNet refuses)
        loss += x.sum()
        y[0] = x[1]  # y = [x1, 4, 6]
        total = loss + y.sum()
    total.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), [1.0, 2.0, 1.0])


def test_backward_of_an_integer_array_names_its_dtype():
    x = np.array([1, 2, 3], dtype='int32')
    x.attach_grad()
    with autograd.record():
        y = x * 2
    with pytest.raises(ValueError, match=r"Cannot differentiate an array of dtype int32: "
                                         r"gradients flow through floating-point values only"):
        y.backward()


def test_writes_into_arrays_outside_the_graph_are_recorded():
    # MXNet refuses these; pymx records them, and the gradients are exact.
    x = _marked([1.0, 2.0, 3.0])
    total = np.zeros((1,))
    buf = np.zeros((3,))
    with autograd.record():
        total += (x * x).sum()
        buf[1:] = x[:2] * 3
        loss = total + (buf * buf).sum()
    loss.backward()
    # d/dx [sum(x^2) + (3 x0)^2 + (3 x1)^2] = 2x + [18 x0, 18 x1, 0]
    onp.testing.assert_allclose(x.grad.asnumpy(), [2.0 + 18.0, 4.0 + 36.0, 6.0])


def test_an_array_whose_graph_backward_freed_is_a_constant():
    # MXNet: y = [2, 4, 6] once backward freed its graph, so d/dx sum(y * x) = y.
    x = _marked([1.0, 2.0, 3.0])
    with autograd.record():
        y = x * 2
        loss = y.sum()
    loss.backward()
    with autograd.record():
        again = (y * x).sum()
    again.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), [2.0, 4.0, 6.0])
    with pytest.raises(ValueError, match="not in a computational graph"):
        loss.backward()  # twice without retain_graph


# ---- gluon blocks -----------------------------------------------------------------------------

def test_initialize_with_shared_parameters_initializes_each_once_without_warning():
    from pymx.gluon import nn

    class Tied(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.encode = nn.Dense(3, in_units=3)
            self.decode = nn.Dense(3, in_units=3)
            self.decode.share_parameters(self.encode.collect_params())

        def forward(self, x):
            return self.decode(self.encode(x))

    net = Tied()
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # MXNet 1.x shared by name and did not warn either
        net.initialize(verbose=False)
    assert net.decode.weight is net.encode.weight
    assert list(net.collect_params()) == ['encode.weight', 'encode.bias', 'decode.weight',
                                          'decode.bias']
    x = onp.arange(6.0).reshape(2, 3)
    w = net.encode.weight.data().asnumpy()
    b = net.encode.bias.data().asnumpy()
    onp.testing.assert_allclose(net(np.array(x, dtype='float32')).asnumpy(),
                                (x @ w.T + b) @ w.T + b, rtol=1e-5, atol=1e-6)
    with pytest.warns(UserWarning, match="is already initialized") as record:
        net.initialize()  # a second initialize still warns, once per Parameter
    assert sorted(str(w.message).split("'")[1] for w in record) == ['bias', 'weight']
