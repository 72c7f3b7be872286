"""Recurrent layers read the parameter layouts MXNet saves them in: MXNet 2.x's one flat
`rnn_param` vector (packed in cuDNN's order) and MXNet 1.x's names of an internal stack of cells.
The files are written here with NumPy in those layouts, from the weights of a reference layer."""
import numpy as onp
import pytest

from pymx import gluon, np
from pymx.gluon import rnn
from pymx.gluon.utils import split_rnn_params
from pymx.test_utils import assert_almost_equal


def _reference(layer_type, **kwargs):
    layer = layer_type(4, num_layers=2, bidirectional=True, input_size=3, **kwargs)
    layer.initialize()
    for param in layer.collect_params().values():  # nonzero biases, so misplaced ones show
        param.set_data(np.random.uniform(-0.5, 0.5, size=param.shape))
    return layer


def _mxnet2_flat(layer, num_layers=2, directions='lr'):
    """The weights of `layer` packed as MXNet 2.x packs rnn_param: every weight (layer by layer,
    direction by direction, i2h then h2h then h2r), then every bias likewise."""
    params = {name: param.data().asnumpy() for name, param in layer.collect_params().items()}
    order = []
    for kind in ('weight', 'bias'):
        for i in range(num_layers):
            for d in directions:
                for gate in ('i2h', 'h2h', 'h2r'):
                    order.append(f'{d}{i}_{gate}_{kind}')
    return onp.concatenate([params[name].ravel() for name in order if name in params])


class _Encoder(gluon.HybridBlock):
    def __init__(self, layer):
        super().__init__()
        self.rnn = layer

    def forward(self, x):
        return self.rnn(x)


@pytest.mark.parametrize('layer_type, kwargs', [(rnn.LSTM, {}), (rnn.GRU, {}),
                                                (rnn.RNN, {'activation': 'tanh'}),
                                                (rnn.LSTM, {'projection_size': 2})])
def test_mxnet2_flat_rnn_param_loads(tmp_path, layer_type, kwargs):
    reference = _reference(layer_type, **kwargs)
    path = tmp_path / 'mxnet2.params'
    onp.savez(path, **{'rnn.rnn_param': _mxnet2_flat(reference)})
    loaded = _Encoder(layer_type(4, num_layers=2, bidirectional=True, **kwargs))  # input deferred
    loaded.load_parameters(str(path) + '.npz')
    x = np.random.uniform(size=(5, 2, 3))
    assert_almost_equal(loaded(x), reference(x), rtol=0, atol=0)


def test_mxnet1_unfused_names_load(tmp_path):
    # dropout between the layers: MXNet 1.x's stack is [pair 0, dropout, pair 1].
    reference = _reference(rnn.LSTM, dropout=0.5)
    names = {}
    for name, param in reference.collect_params().items():
        direction, layer, rest = name[0], int(name[1]), name[3:]
        names[f'_unfused.{2 * layer}.{direction}_cell.{rest}'] = param.data().asnumpy()
    onp.savez(tmp_path / 'mxnet1.npz', **names)
    loaded = rnn.LSTM(4, num_layers=2, bidirectional=True, dropout=0.5)
    loaded.load_parameters(str(tmp_path / 'mxnet1.npz'))
    x = np.random.uniform(size=(5, 2, 3))
    assert_almost_equal(loaded(x), reference(x), rtol=0, atol=0)


def test_mxnet1_unidirectional_names_load(tmp_path):
    reference = rnn.GRU(4, num_layers=2, input_size=3)
    reference.initialize()
    names = {f'_unfused.{name[1]}.{name[3:]}': param.data().asnumpy()
             for name, param in reference.collect_params().items()}
    onp.savez(tmp_path / 'mxnet1.npz', **names)
    loaded = rnn.GRU(4, num_layers=2)
    loaded.load_parameters(str(tmp_path / 'mxnet1.npz'))
    x = np.random.uniform(size=(5, 2, 3))
    assert_almost_equal(loaded(x), reference(x), rtol=0, atol=0)


def test_flat_vector_of_the_wrong_size_names_the_sizes(tmp_path):
    flat = _mxnet2_flat(_reference(rnn.LSTM))
    onp.savez(tmp_path / 'short.npz', rnn_param=flat[:-1])
    with pytest.raises(ValueError, match=f"has {flat.size - 1} values"):
        rnn.LSTM(4, num_layers=2, bidirectional=True).load_parameters(str(tmp_path / 'short.npz'))
    onp.savez(tmp_path / 'full.npz', rnn_param=flat)
    with pytest.raises(ValueError, match="with input_size 5"):  # fits only input size 3
        rnn.LSTM(4, num_layers=2, bidirectional=True, input_size=5).load_parameters(
            str(tmp_path / 'full.npz'))


def test_split_rnn_params():
    reference = _reference(rnn.GRU)
    flat = np.array(_mxnet2_flat(reference))
    parts = split_rnn_params(flat, 'gru', 2, 3, 4, bidirectional=True)
    params = reference.collect_params()
    assert sorted(parts) == sorted(params)
    for name, value in parts.items():
        assert_almost_equal(value, params[name].data(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="does not match the layer, which has"):
        split_rnn_params(flat[:-2], 'gru', 2, 3, 4, bidirectional=True)
    with pytest.raises(ValueError, match="unknown recurrent mode 'rnn'"):
        split_rnn_params(flat, 'rnn', 2, 3, 4)
