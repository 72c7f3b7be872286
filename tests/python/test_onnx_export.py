"""pymx.onnx.export_model: blocks exported with HybridBlock.export, converted to ONNX, checked
with onnx.checker and run in onnxruntime against pymx's own output (float32: rtol 1e-4,
atol 1e-5) for the model zoo, LeafNetwork, MLPs and each translated layer and tensor op;
MXNet's legacy reshape codes; dynamic batch axes; external data (large_model); opsets;
the error cases, and that a failed export leaves an existing file intact."""
import json
import os
import sys
import warnings

import numpy as onp
import pytest

# The test extra installs both; a machine with only pymx's runtime (the GPU machine) skips.
onnx = pytest.importorskip("onnx", reason="onnx not installed (pip install 'pymx[onnx]')")
onnxruntime = pytest.importorskip("onnxruntime", reason="onnxruntime not installed")

import pymx
import pymx.onnx
from pymx import np, npx
from pymx._train import LeafNetwork
from pymx.gluon import nn
from pymx.gluon.model_zoo import vision
from pymx.test_utils import assert_almost_equal

RTOL, ATOL = 1e-4, 1e-5  # onnxruntime float32 vs pymx float32


def _randomize_norm_statistics(net):
    """Batch-norm statistics and affine parameters away from their 0/1 initial values, so that
    a translation mixing them up shows in the outputs."""
    rng = onp.random.default_rng(0)
    for name, param in net.collect_params().items():
        low, high = {'running_mean': (-0.2, 0.2), 'running_var': (0.5, 1.5),
                     'gamma': (0.5, 1.5), 'beta': (-0.2, 0.2)}.get(name.split('.')[-1], (0, 0))
        if high > low:
            param.set_data(np.array(rng.uniform(low, high, param.shape).astype(param.dtype)))


def _export(net, inputs, tmp_path, **kwargs):
    """Traces `net` on `inputs` (numpy arrays), exports it, converts it; returns (ONNX file,
    pymx outputs as numpy)."""
    net.hybridize()
    outputs = net(*[np.array(x) for x in inputs])
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    prefix = str(tmp_path / 'model')
    with warnings.catch_warnings():
        # A fused convolution makes HybridBlock.export fall back to pymx's format, and warn.
        warnings.simplefilter('ignore', UserWarning)
        net.export(prefix)
    path = pymx.onnx.export_model(f'{prefix}-symbol.json', f'{prefix}-0000.params',
                                  in_shapes=[x.shape for x in inputs],
                                  in_types=[x.dtype for x in inputs],
                                  onnx_file_path=str(tmp_path / 'model.onnx'), **kwargs)
    return path, [o.asnumpy() for o in outputs]


def _run_onnx(path, inputs):
    onnx.checker.check_model(onnx.load(path))
    session = onnxruntime.InferenceSession(path, providers=['CPUExecutionProvider'])
    feed = {spec.name: x for spec, x in zip(session.get_inputs(), inputs)}
    return session.run(None, feed)


def _check_block(net, inputs, tmp_path, rtol=RTOL, atol=ATOL, **kwargs):
    path, want = _export(net, inputs, tmp_path, **kwargs)
    got = _run_onnx(path, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_almost_equal(g, w, rtol=rtol, atol=atol, names=('onnxruntime', 'pymx'))
    return path


def _uniform(*shape, low=-1.0, high=1.0, seed=1):
    return onp.random.default_rng(seed).uniform(low, high, shape).astype(onp.float32)


def _initialized(net, inputs):
    net.initialize()
    net(*[np.array(x) for x in inputs])  # completes deferred shapes before randomizing
    _randomize_norm_statistics(net)
    return net


# -- whole models -------------------------------------------------------------------------

def test_mlp(device, tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation='relu'), nn.Dropout(0.5), nn.Dense(8, activation='tanh'),
            nn.Dense(3))
    x = _uniform(4, 2, 5)
    net.initialize(device=device)
    net.hybridize()
    want = net(np.array(x, device=device)).asnumpy()
    prefix = str(tmp_path / 'mlp')
    net.export(prefix)
    path = pymx.onnx.export_model(f'{prefix}-symbol.json', f'{prefix}-0000.params', [x.shape],
                                  onnx_file_path=str(tmp_path / 'mlp.onnx'))
    assert_almost_equal(_run_onnx(path, [x])[0], want, rtol=RTOL, atol=ATOL)


def test_float16_mlp(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation='relu'), nn.Dense(3))
    x = _uniform(2, 5).astype(onp.float16)
    net.initialize()
    net.cast('float16')
    path = _check_block(net, [x], tmp_path, rtol=1e-2, atol=1e-3)  # float16 tolerances
    assert onnx.load(path).graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


def test_leaf_network(tmp_path):
    x = _uniform(2, 3, 64, 64)
    net = _initialized(LeafNetwork(dropout=0.2), [x])
    _check_block(net, [x], tmp_path)


@pytest.mark.parametrize('name, size', [('resnet18_v1', 32), ('resnet18_v2', 32),
                                        ('mobilenet0.25', 32), ('mobilenetv2_0.25', 32),
                                        ('vgg11_bn', 32), ('squeezenet1.1', 224)])
def test_model_zoo(name, size, tmp_path):
    x = _uniform(1, 3, size, size)
    net = _initialized(vision.get_model(name, classes=10), [x])
    _check_block(net, [x], tmp_path)


def test_densenet(tmp_path):
    # DenseNet's layers at a small width: dense blocks, transitions, the final 7x7 pool.
    x = _uniform(1, 3, 56, 56)
    net = _initialized(vision.DenseNet(8, 4, [2, 2], bn_size=2, classes=5), [x])
    _check_block(net, [x], tmp_path)


# -- layers -------------------------------------------------------------------------------

_LAYERS = {
    'conv_groups_dilation': (lambda: nn.Conv2D(6, 3, strides=2, padding=2, dilation=2, groups=3,
                                               in_channels=3), (2, 3, 9, 9)),
    'conv_no_bias': (lambda: nn.Conv2D(4, (1, 3), use_bias=False), (1, 2, 5, 6)),
    'conv1d': (lambda: nn.Conv1D(4, 3, padding=1, activation='relu'), (2, 3, 7)),
    'conv3d': (lambda: nn.Conv3D(2, 2, strides=(1, 2, 1)), (1, 2, 4, 5, 4)),
    'deconv': (lambda: nn.Conv2DTranspose(4, 3, strides=2, padding=1, output_padding=1),
               (1, 3, 4, 5)),
    'deconv_groups': (lambda: nn.Conv2DTranspose(4, 2, groups=2, in_channels=2, use_bias=False),
                      (1, 2, 3, 3)),
    'maxpool_full': (lambda: nn.MaxPool2D(3, 2, ceil_mode=True), (1, 2, 8, 8)),
    'avgpool_pad': (lambda: nn.AvgPool2D(3, 1, padding=1), (1, 2, 5, 5)),
    'avgpool_pad_excluded': (lambda: nn.AvgPool2D(3, 2, padding=1, count_include_pad=False),
                             (1, 2, 6, 6)),
    'avgpool_full': (lambda: nn.AvgPool2D(3, 2, padding=1, ceil_mode=True), (1, 2, 8, 8)),
    'avgpool_full_pad_excluded': (lambda: nn.AvgPool2D(3, 2, padding=1, ceil_mode=True,
                                                       count_include_pad=False), (1, 2, 8, 8)),
    'maxpool1d': (lambda: nn.MaxPool1D(2), (2, 3, 8)),
    'global_avg': (lambda: nn.GlobalAvgPool2D(), (2, 3, 4, 5)),
    'global_max': (lambda: nn.GlobalMaxPool2D(), (2, 3, 4, 5)),
    'batch_norm': (lambda: nn.BatchNorm(), (2, 3, 4, 4)),
    'batch_norm_fix_gamma': (lambda: nn.BatchNorm(scale=False), (2, 3, 4, 4)),
    'batch_norm_last_axis': (lambda: nn.BatchNorm(axis=-1), (2, 4, 3)),
    'layer_norm': (lambda: nn.LayerNorm(), (2, 3, 6)),
    'layer_norm_axis1': (lambda: nn.LayerNorm(axis=1), (2, 3, 4)),
    'instance_norm': (lambda: nn.InstanceNorm(scale=True), (2, 3, 5)),
    'dense_no_flatten': (lambda: nn.Dense(5, flatten=False), (2, 3, 4)),
    'dense_no_bias': (lambda: nn.Dense(5, use_bias=False), (2, 3, 4)),
    'sigmoid': (lambda: nn.Activation('sigmoid'), (2, 5)),
    'softrelu': (lambda: nn.Activation('softrelu'), (2, 5)),
    'softsign': (lambda: nn.Activation('softsign'), (2, 5)),
    'leaky': (lambda: nn.LeakyReLU(0.1), (2, 5)),
    'prelu': (lambda: nn.PReLU(in_channels=3), (2, 3, 4)),
    'elu': (lambda: nn.ELU(0.7), (2, 5)),
    'selu': (lambda: nn.SELU(), (2, 5)),
    'gelu': (lambda: nn.GELU(), (2, 5)),
    'flatten': (lambda: nn.Flatten(), (2, 3, 4)),
}


@pytest.mark.parametrize('layer', sorted(_LAYERS))
def test_layer(layer, tmp_path):
    make, shape = _LAYERS[layer]
    x = _uniform(*shape, low=-2, high=2)
    _check_block(_initialized(make(), [x]), [x], tmp_path)


def test_embedding(tmp_path):
    indices = onp.array([[0, 3, 5], [2, 2, 1]], dtype=onp.float32)
    _check_block(_initialized(nn.Embedding(6, 4), [indices]), [indices], tmp_path)


def test_opset_17_layer_norm(tmp_path):
    x = _uniform(2, 3, 6)
    path = _check_block(_initialized(nn.LayerNorm(), [x]), [x], tmp_path, opset_version=17)
    assert [n.op_type for n in onnx.load(path).graph.node] == ['LayerNormalization']


# -- tensor operations --------------------------------------------------------------------

_OPS = {
    'reshape': (lambda a, b: np.reshape(a, (2, 12)) * 2, (2, 3, 4), (1,)),
    'transpose': (lambda a, b: np.transpose(a, (2, 0, 1)) + b, (2, 3, 4), (2, 3)),
    'swapaxes': (lambda a, b: np.swapaxes(a, 0, 2), (2, 3, 4), (1,)),
    'concat': (lambda a, b: np.concatenate([a, b], axis=1), (2, 3), (2, 4)),
    'stack': (lambda a, b: np.stack([a, b], axis=1), (2, 3), (2, 3)),
    'broadcast_arith': (lambda a, b: (a + b) * (a - b) / (np.abs(b) + 1), (2, 3, 4), (3, 1)),
    'max_min': (lambda a, b: np.maximum(a, b) - np.minimum(a, b), (2, 3), (3,)),
    'scalars': (lambda a, b: (3 - a) * 2 + a / 4 + 1 / (np.abs(a) + 2) - (a ** 2), (2, 3), (1,)),
    'scalar_compare': (lambda a, b: np.where(a > 0.25, a, b), (2, 3), (2, 3)),
    'clip': (lambda a, b: np.clip(a, -0.5, 0.3) + np.clip(b, 0, None), (2, 3), (2, 3)),
    'slice': (lambda a, b: a[:, 1:3, ::2], (2, 4, 5), (1,)),
    'slice_negative_step': (lambda a, b: a[:, 3:0:-2] + 0, (2, 4), (1,)),
    'squeeze_expand': (lambda a, b: np.expand_dims(np.squeeze(a, axis=1), 0), (2, 1, 3), (1,)),
    'reductions': (lambda a, b: np.mean(a, axis=(1, 2)) + np.sum(a, axis=2).max(axis=1)
                   + np.max(a, axis=1, keepdims=True).min(axis=(1, 2)), (2, 3, 4), (1,)),
    'sum_all': (lambda a, b: np.sum(a) + b, (2, 3), (1,)),
    'softmax': (lambda a, b: npx.softmax(a, axis=1) + npx.log_softmax(a), (2, 3, 4), (1,)),
    'unary': (lambda a, b: np.exp(a) + np.log(np.abs(a) + 1) + np.sqrt(np.abs(a)) + np.tanh(a)
              + np.floor(a) + np.sign(a), (2, 3), (1,)),
    'matmul': (lambda a, b: np.matmul(a, b), (2, 3, 4), (4, 5)),
    'split': (lambda a, b: np.split(a, [1, 3], axis=1)[2] * 2, (2, 5), (1,)),
    'relu_sigmoid': (lambda a, b: npx.relu(a) + npx.sigmoid(b), (2, 3), (2, 3)),
}


@pytest.mark.parametrize('op', sorted(_OPS))
def test_tensor_op(op, tmp_path):
    fn, shape_a, shape_b = _OPS[op]
    inputs = [_uniform(*shape_a, seed=2), _uniform(*shape_b, seed=3)]
    net = nn.HybridLambda(fn)
    _check_block(net, inputs, tmp_path)


# -- MXNet symbol files -------------------------------------------------------------------

def _mxnet_symbol(op, attrs, num_inputs=1):
    """An MXNet-dialect symbol document: inputs data0.. and one `op` node."""
    nodes = [{'op': 'null', 'name': f'data{i}', 'inputs': []} for i in range(num_inputs)]
    nodes.append({'op': op, 'name': 'node', 'attrs': attrs,
                  'inputs': [[i, 0, 0] for i in range(num_inputs)]})
    return {'nodes': nodes, 'arg_nodes': list(range(num_inputs)), 'heads': [[num_inputs, 0, 0]],
            'attrs': {'mxnet_version': ['int', 10901]}}


@pytest.mark.parametrize('codes, reverse, want', [
    ('(0, -1)', False, (2, 12)),
    ('(-3, -2)', False, (6, 4)),
    ('(0, -4, 3, -1, 4)', False, (2, 3, 1, 4)),
    ('(-1, 0)', True, (6, 4)),
    ('(3, -1, 0)', False, (3, 2, 4)),
])
def test_legacy_reshape_codes(codes, reverse, want, tmp_path):
    x = _uniform(2, 3, 4)
    symbol = _mxnet_symbol('Reshape', {'shape': codes, 'reverse': str(reverse)})
    path = pymx.onnx.export_model(symbol, {}, [x.shape], onnx_file_path=str(tmp_path / 'r.onnx'))
    got = _run_onnx(path, [x])[0]
    assert_almost_equal(got, x.reshape(want), rtol=0, atol=0)


def test_legacy_operators(tmp_path):
    # Names MXNet 1.x writes: broadcast arithmetic, slice_axis, Concat, scalar ops.
    a, b = _uniform(2, 3, seed=4), _uniform(1, 3, seed=5)
    nodes = [{'op': 'null', 'name': 'a', 'inputs': []}, {'op': 'null', 'name': 'b', 'inputs': []},
             {'op': 'broadcast_mul', 'name': 'mul', 'inputs': [[0, 0, 0], [1, 0, 0]]},
             {'op': 'slice_axis', 'name': 'sl', 'attrs': {'axis': '1', 'begin': '1',
                                                          'end': 'None'}, 'inputs': [[2, 0, 0]]},
             {'op': '_rminus_scalar', 'name': 'rm', 'attrs': {'scalar': '1.5'},
              'inputs': [[3, 0, 0]]},
             {'op': 'Concat', 'name': 'cat', 'attrs': {'num_args': '2', 'dim': '1'},
              'inputs': [[4, 0, 0], [0, 0, 0]]},
             {'op': 'mean', 'name': 'mean', 'attrs': {'axis': '1', 'exclude': 'True'},
              'inputs': [[5, 0, 0]]}]
    symbol = {'nodes': nodes, 'arg_nodes': [0, 1], 'heads': [[6, 0, 0]]}
    path = pymx.onnx.export_model(json.dumps(symbol), {}, [a.shape, b.shape],
                                  onnx_file_path=str(tmp_path / 'legacy.onnx'))
    want = onp.concatenate([1.5 - (a * b)[:, 1:], a], axis=1).mean(axis=0)
    assert_almost_equal(_run_onnx(path, [a, b])[0], want, rtol=RTOL, atol=ATOL)


def test_pymx_format_view_and_fused_convolution(tmp_path):
    # pymx's own graph format: a `_view` (a reshape or slice sharing memory) and a convolution
    # fused with its activation, which MXNet's operators express as two nodes.
    x, weight = _uniform(1, 2, 4, 4, seed=6), _uniform(3, 2, 3, 3, seed=7)
    conv_attrs = {'kernel': '(3, 3)', 'num_filter': '3', 'no_bias': 'True', 'act_type': 'relu',
                  'stride': '(1, 1)', 'dilate': '(1, 1)', 'pad': '(0, 0)', 'num_group': '1'}
    symbol = {'nodes': [{'op': 'null', 'name': 'data', 'inputs': []},
                        {'op': 'null', 'name': 'weight', 'inputs': []},
                        {'op': 'convolution', 'name': 'conv', 'attrs': conv_attrs,
                         'inputs': [[0, 0, 0], [1, 0, 0]]},
                        {'op': '_view', 'name': 'view', 'attrs': {'offset': '2', 'shape': '(3, 2)'},
                         'inputs': [[2, 0, 0]]}],
              'heads': [[3, 0, 0]], 'attrs': {'trace_device': 'cpu(0)'}}
    path = pymx.onnx.export_model(symbol, {'arg:weight': weight}, [x.shape],
                                  onnx_file_path=str(tmp_path / 'p.onnx'))
    conv = npx.convolution(np.array(x), np.array(weight), kernel=(3, 3), num_filter=3,
                           no_bias=True)
    want = onp.maximum(conv.asnumpy(), 0).ravel()[2:8].reshape(3, 2)
    assert_almost_equal(_run_onnx(path, [x])[0], want, rtol=RTOL, atol=ATOL)


# -- export options -----------------------------------------------------------------------

def _small_convnet():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, padding=1), nn.BatchNorm(), nn.Activation('relu'),
            nn.MaxPool2D(2), nn.Flatten(), nn.Dense(3))
    return net


@pytest.mark.parametrize('dynamic_input_shapes', [None, [(None, 3, 8, 8)]])
def test_dynamic_batch(dynamic_input_shapes, tmp_path):
    x = _uniform(2, 3, 8, 8)
    net = _initialized(_small_convnet(), [x])
    path, _ = _export(net, [x], tmp_path, dynamic=True,
                      dynamic_input_shapes=dynamic_input_shapes)
    for batch in (1, 5):
        y = _uniform(batch, 3, 8, 8, seed=batch)
        assert_almost_equal(_run_onnx(path, [y])[0], net(np.array(y)).asnumpy(), rtol=RTOL,
                            atol=ATOL)


def test_large_model_external_data(tmp_path):
    x = _uniform(2, 3, 16, 16)
    path = _check_block(_initialized(_small_convnet(), [x]), [x], tmp_path, large_model=True)
    assert os.path.isfile(path + '.data')
    weights = {t.name: t for t in onnx.load(path, load_external_data=False).graph.initializer}
    # Initializers of 1 KiB or more go out: the dense weight (3 x 256 float32), not its bias.
    assert weights['5.weight'].data_location == onnx.TensorProto.EXTERNAL
    assert weights['5.bias'].data_location == onnx.TensorProto.DEFAULT


def test_params_forms_and_shape_inference(tmp_path):
    x = _uniform(2, 5)
    net = _initialized(nn.Dense(3), [x])
    net.hybridize()
    want = net(np.array(x)).asnumpy()
    net.export(str(tmp_path / 'd'))
    symbol = json.load(open(tmp_path / 'd-symbol.json'))
    params = {'weight': net.weight.data(), 'bias': net.bias.data().asnumpy()}
    for form in (params, [{'arg:weight': params['weight']}, {'arg:bias': params['bias']}]):
        path = pymx.onnx.export_model(symbol, form, [x.shape], run_shape_inference=True,
                                      onnx_file_path=str(tmp_path / 'd.onnx'))
        assert_almost_equal(_run_onnx(path, [x])[0], want, rtol=RTOL, atol=ATOL)
    dims = [d.dim_value for d in onnx.load(path).graph.output[0].type.tensor_type.shape.dim]
    assert dims == [2, 3]


# -- errors -------------------------------------------------------------------------------

def test_unknown_operator_names_op_and_node(tmp_path):
    symbol = _mxnet_symbol('_contrib_box_nms', {})
    with pytest.raises(NotImplementedError, match=r"node 'node'.*'_contrib_box_nms'"):
        pymx.onnx.export_model(symbol, {}, [(2, 3)], onnx_file_path=str(tmp_path / 'x.onnx'))


def test_missing_weight_and_wrong_in_shapes(tmp_path):
    x = _uniform(2, 5)
    net = _initialized(nn.Dense(3), [x])
    net.hybridize()
    net(np.array(x))
    net.export(str(tmp_path / 'd'))
    symbol = str(tmp_path / 'd-symbol.json')
    out = str(tmp_path / 'd.onnx')
    with pytest.raises(ValueError, match=r"1 shape.*2 input\(s\) not in params: \['data', "
                                         r"'weight'\]"):
        pymx.onnx.export_model(symbol, {'arg:bias': net.bias.data()}, [x.shape],
                               onnx_file_path=out)
    params = str(tmp_path / 'd-0000.params')
    with pytest.raises(ValueError, match=r"in_shapes has 2 shape\(s\).*\['data'\]"):
        pymx.onnx.export_model(symbol, params, [x.shape, x.shape], onnx_file_path=out)
    with pytest.raises(ValueError, match="in_shapes is required"):
        pymx.onnx.export_model(symbol, params, onnx_file_path=out)
    with pytest.raises(ValueError, match=r"opset_version=12; .*opsets 13 to"):
        pymx.onnx.export_model(symbol, params, [x.shape], onnx_file_path=out, opset_version=12)
    with pytest.raises(TypeError, match="params must be .* got int"):
        pymx.onnx.export_model(symbol, 3, [x.shape], onnx_file_path=out)
    with pytest.raises(ValueError, match=r"dynamic_input_shapes \[\(None,\)\]"):
        pymx.onnx.export_model(symbol, params, [x.shape], onnx_file_path=out, dynamic=True,
                               dynamic_input_shapes=[(None,)])
    assert not os.path.exists(out)


def test_failed_export_leaves_existing_file(tmp_path):
    target = tmp_path / 'model.onnx'
    target.write_bytes(b'previous model')
    with pytest.raises(NotImplementedError):
        pymx.onnx.export_model(_mxnet_symbol('no_such_op', {}), {}, [(2,)],
                               onnx_file_path=str(target))
    assert target.read_bytes() == b'previous model'
    assert os.listdir(tmp_path) == ['model.onnx']


def test_missing_onnx_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, 'onnx', None)
    with pytest.raises(ImportError, match=r"pip install 'pymx\[onnx\]'"):
        pymx.onnx.export_model(_mxnet_symbol('relu', {}), {}, [(2,)],
                               onnx_file_path=str(tmp_path / 'x.onnx'))
