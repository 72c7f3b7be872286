"""Block / HybridBlock: registration, structural names, hooks, hybridize details, export."""
import json

import numpy as onp
import pytest

from pymx import autograd, cpu, np
from pymx.gluon import Block, HybridBlock, Parameter, nn
from pymx.gluon._params_file import load_params_file


class TwoBranch(HybridBlock):
    def __init__(self):
        super().__init__()
        self.encoder = nn.HybridSequential()
        self.encoder.add(nn.Dense(4, activation='relu'), nn.Dense(3))
        self.scale = Parameter('scale', shape=(1,), init='ones')
        self.head = nn.Dense(2, in_units=3)

    def forward(self, x, y):
        h = self.encoder(x) * self.scale.data(x.device)
        return self.head(h), h + y


def test_structural_names_and_select():
    net = TwoBranch()
    assert list(net.collect_params()) == [
        'scale', 'encoder.0.weight', 'encoder.0.bias', 'encoder.1.weight', 'encoder.1.bias',
        'head.weight', 'head.bias']
    assert list(net.collect_params('.*weight')) == ['encoder.0.weight', 'encoder.1.weight',
                                                    'head.weight']
    assert list(net.collect_params('encoder.1')) == ['encoder.1.weight', 'encoder.1.bias']
    assert list(net.params) == ['scale']
    # A shared layer appears under each of its names.
    shared = nn.HybridSequential()
    dense = nn.Dense(2, in_units=2)
    shared.add(dense, dense)
    assert list(shared.collect_params()) == ['0.weight', '0.bias', '1.weight', '1.bias']


def test_registration_errors_and_warnings():
    class Holder(Block):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Dense(2)]
            self.dense = nn.Dense(2)

    holder = Holder()
    with pytest.warns(UserWarning, match='"layers" is an unregistered container with Blocks'):
        holder.collect_params()
    with pytest.raises(TypeError, match="Changing attribute type for dense"):
        holder.dense = Parameter('w')
    with pytest.raises(ValueError, match="Children of HybridBlock must also be HybridBlock"):
        nn.HybridSequential().add(nn.Lambda(lambda x: x))

    class OldStyle(HybridBlock):
        def hybrid_forward(self, F, x):
            return x

    with pytest.raises(ValueError, match="'forward' instead of 'hybrid_forward' interface needs "
                                         "to be used starting from Gluon2.0."):
        OldStyle()


def test_hooks_and_repr():
    net = nn.Dense(3, in_units=2)
    net.initialize()
    seen = []
    pre = net.register_forward_pre_hook(lambda block, inputs: seen.append(('pre', len(inputs))))
    post = net.register_forward_hook(lambda block, inputs, out: seen.append(('post', out.shape)))
    net(np.ones((4, 2)))
    assert seen == [('pre', 1), ('post', (4, 3))]
    pre.detach()
    post.detach()
    net(np.ones((4, 2)))
    assert len(seen) == 2
    seq = nn.HybridSequential()
    seq.add(net, nn.Activation('relu'))
    assert repr(seq) == ('HybridSequential(\n  (0): Dense(2 -> 3, linear)\n'
                         '  (1): Activation(relu)\n)')


def test_multi_input_output_hybridized_with_gradients():
    net = TwoBranch()
    net.initialize()
    x, y = np.array(onp.random.default_rng(0).random((5, 6), dtype='float32')), np.ones((5, 3))

    def run():
        x.attach_grad()
        with autograd.record():
            a, b = net(x, y)
            total = a.sum() + (b * b).sum()
        total.backward()
        return a.asnumpy(), b.asnumpy(), x.grad.asnumpy(), net.scale.grad().asnumpy()

    expected = run()
    net.hybridize()
    for _ in range(2):
        for got, want in zip(run(), expected):
            onp.testing.assert_allclose(got, want, 1e-5, 1e-6)
    with pytest.raises(ValueError, match="Find multiple devices in the input"):
        net(x, np.ones((5, 3), device=cpu(1)))


def test_hybridized_child_in_plain_parent_and_train_mode():
    class Parent(Block):
        def __init__(self):
            super().__init__()
            self.body = nn.HybridSequential()
            self.body.add(nn.Dense(8, in_units=4), nn.Dropout(0.5), nn.BatchNorm(in_channels=8))

        def forward(self, x):
            return self.body(x) * 2

    net = Parent()
    net.initialize()
    net.hybridize()
    x = np.ones((6, 4))
    predicted = net(x).asnumpy()
    onp.testing.assert_allclose(net(x).asnumpy(), predicted)  # replay in predict mode
    with autograd.record():  # same graph, train mode: dropout and batch statistics apply
        trained = net(x).asnumpy()
    assert len(net.body._cached_graphs) == 1
    assert not onp.allclose(trained, predicted)
    # Train mode updated the running statistics (a unit that dropout zeroed in every row keeps a
    # zero mean, so "some", not "every").
    assert (net.body[2].running_mean.data().asnumpy() != 0).any()


def test_hybridize_sees_new_parameter_values(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.hybridize()
    x = np.ones((1, 3))
    net(x)
    net.weight.set_data(np.zeros((2, 3)))
    net.bias.set_data(np.array([1.0, 2.0]))
    onp.testing.assert_allclose(net(x).asnumpy(), [[1.0, 2.0]])
    net.reset_device(cpu(1))
    onp.testing.assert_allclose(net(x.to_device(cpu(1))).asnumpy(), [[1.0, 2.0]])


def test_export(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=2, activation='relu'), nn.BatchNorm(in_channels=3))
    net.initialize()
    with pytest.raises(RuntimeError, match="Please first call block.hybridize"):
        net.export(str(tmp_path / 'model'))
    net.hybridize()
    net(np.ones((2, 2)))
    net.export(str(tmp_path / 'model'), epoch=3)
    symbol = json.loads((tmp_path / 'model-symbol.json').read_text())
    names = {node['name'] for node in symbol['nodes'] if node['op'] == 'null'}
    assert {'data', '0.weight', '0.bias', '1.gamma', '1.running_mean'} <= names
    params = load_params_file(tmp_path / 'model-0003.params')
    assert 'arg:0.weight' in params and 'aux:1.running_var' in params


class ReadsValues(HybridBlock):
    """A forward whose result depends on values read on the host: np.unique computes there, and
    the branch is data-dependent control flow."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(2, in_units=3)

    def forward(self, x):
        h = self.dense(x)
        if float(x.sum()) > 0:
            h = h * 2
        return h, np.unique(np.round(x))


def test_hybridized_forward_reading_values_runs_imperatively():
    net = ReadsValues()
    net.initialize()
    reference = ReadsValues()
    reference.initialize()
    reference.load_dict({k: v.data() for k, v in net.collect_params().items()})
    net.hybridize()
    inputs = [np.array([[1.0, 2.0, 2.0]]), np.array([[-1.0, -5.0, 0.0]]),
              np.array([[7.0, 7.0, 3.0]])]
    with pytest.warns(UserWarning, match="ReadsValues runs imperatively although hybridized.*"
                                         "values on the host"):
        net(inputs[0])
    for x in inputs:  # each call follows its own values, never the first call's
        for got, expected in zip(net(x), reference(x)):
            onp.testing.assert_array_equal(got.asnumpy(), expected.asnumpy())


def test_printing_inside_a_traced_forward_keeps_the_graph(capsys):
    class Prints(HybridBlock):
        def forward(self, x):
            y = x * 3
            print(y, f"{y.sum():.1f}")
            return y + 1

    net = Prints()
    net.hybridize()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a stopped trace would warn
        out = net(np.array([1.0, 2.0]))
        assert net._cached_graphs  # traced into a graph
        onp.testing.assert_array_equal(net(np.array([5.0, 6.0])).asnumpy(), [16.0, 19.0])
    onp.testing.assert_array_equal(out.asnumpy(), [4.0, 7.0])
    assert "[3. 6.] 9.0" in capsys.readouterr().out


def test_summary_rejects_hybridized_and_counts(capsys):
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=2), nn.BatchNorm(in_channels=3))
    net.initialize()
    net.summary(np.ones((4, 2)))
    out = capsys.readouterr().out
    assert 'Dense-1' in out and 'BatchNorm-2' in out
    assert 'Total params: 21' in out and 'Trainable params: 15' in out
    assert 'Non-trainable params: 6' in out
    net.hybridize()
    with pytest.raises(RuntimeError, match='must not be hybridized to print summary'):
        net.summary(np.ones((4, 2)))
    spread = nn.Dense(3, in_units=2)  # on two devices, neither of them the current one
    spread.initialize(device=[cpu(1), cpu(2)])
    spread.summary(np.ones((4, 2), device=cpu(2)))
    assert 'Total params: 9' in capsys.readouterr().out


def test_zero_grad_cast_and_initialize_devices():
    net = nn.Dense(2, in_units=2)
    net.initialize(device=[cpu(0), cpu(1)])
    for device in (cpu(0), cpu(1)):
        with autograd.record():
            out = net(np.ones((1, 2), device=device)).sum()
        out.backward()
    assert net.weight.grad(cpu(1)).asnumpy().sum() != 0
    net.zero_grad()
    for grad in net.weight.list_grad():
        onp.testing.assert_array_equal(grad.asnumpy(), onp.zeros((2, 2)))
    net.cast('float64')
    assert net(np.ones((1, 2), dtype='float64')).dtype == onp.float64
