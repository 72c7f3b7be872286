"""gluon.SymbolBlock.imports: models exported by pymx and by MXNet.

MXNet's symbol files are written here as MXNet writes them (nnvm JSON, in its `attrs` layout and
in the older `param`/`attr` layout), with parameter files saved through NumPy; outputs are
checked against float64 NumPy. pymx's own exports are checked by round trip."""
import json
import math
import warnings

import numpy as onp
import pytest
from conftest import requires_gpu

from pymx import autograd, gluon, np, npx
from pymx.device import cpu, gpu
from pymx.test_utils import assert_almost_equal, check_numeric_gradient

SymbolBlock = gluon.SymbolBlock


# ---- writing MXNet files ---------------------------------------------------------------------

def _mxnet_symbol(nodes, heads, legacy=False):
    """MXNet symbol JSON. nodes: (op, name, attrs, inputs); an input is a node name or (name,
    output index); heads likewise. legacy=True writes MXNet 0.x's layout: op attributes under
    'param', annotations under 'attr', two-element entries, no version."""
    index = {name: i for i, (_, name, _, _) in enumerate(nodes)}

    def entry(ref):
        name, output = (ref, 0) if isinstance(ref, str) else ref
        return [index[name], output] if legacy else [index[name], output, 0]

    items = []
    for op, name, attrs, inputs in nodes:
        item = {'op': op, 'name': name, 'inputs': [entry(r) for r in inputs]}
        strings = {k: str(v) for k, v in attrs.items()}
        if legacy:
            item['param'] = {k: v for k, v in strings.items() if not k.startswith('__')}
            item['attr'] = {k: v for k, v in strings.items() if k.startswith('__')}
        elif strings:
            item['attrs'] = strings
        items.append(item)
    document = {'nodes': items, 'arg_nodes': [i for i, n in enumerate(nodes) if n[0] == 'null'],
                'heads': [entry(h) for h in heads]}
    if not legacy:
        document['attrs'] = {'mxnet_version': ['int', 10901]}
    return json.dumps(document)


def _write(tmp_path, symbol, params=None, aux=()):
    """Writes net-symbol.json and (with params) net-0000.params, keys prefixed arg:/aux:."""
    symbol_file = tmp_path / 'net-symbol.json'
    symbol_file.write_text(symbol)
    if params is None:
        return str(symbol_file), None
    param_file = tmp_path / 'net-0000.params'
    with open(param_file, 'wb') as f:
        onp.savez(f, **{('aux:' if k in aux else 'arg:') + k: v.astype(onp.float32)
                        for k, v in params.items()})
    return str(symbol_file), str(param_file)


def _var(name, **annotations):
    return ('null', name, annotations, [])


def _rand(*shape):
    return onp.random.uniform(-1, 1, shape)


# ---- float64 references ----------------------------------------------------------------------

def _conv2d(x, w, b, pad):
    x = onp.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = onp.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return onp.einsum('nchwij,ocij->nohw', windows, w) + b[None, :, None, None]


def _softmax(x, axis):
    e = onp.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _conv_net(legacy):
    """Convolution -> BatchNorm -> relu -> max pool -> FullyConnected -> SoftmaxOutput, the
    layer pattern of MXNet's model zoo, with its parameters and a float64 reference."""
    nodes = [_var('data'), _var('c_weight', __shape__='(4, 0, 3, 3)'), _var('c_bias'),
             ('Convolution', 'c', {'kernel': '(3, 3)', 'pad': '(1, 1)', 'num_filter': 4,
                                   'stride': '(1, 1)', 'no_bias': 'False'},
              ['data', 'c_weight', 'c_bias']),
             _var('bn_gamma'), _var('bn_beta'), _var('bn_running_mean'), _var('bn_running_var'),
             ('BatchNorm', 'bn', {'eps': '1e-05', 'fix_gamma': 'False'},
              ['c', 'bn_gamma', 'bn_beta', 'bn_running_mean', 'bn_running_var']),
             ('Activation', 'relu', {'act_type': 'relu'}, ['bn']),
             ('Pooling', 'pool', {'kernel': '(2, 2)', 'stride': '(2, 2)', 'pool_type': 'max'},
              ['relu']),
             _var('fc_weight'), _var('fc_bias'),
             ('FullyConnected', 'fc', {'num_hidden': 3}, ['pool', 'fc_weight', 'fc_bias']),
             _var('softmax_label'),
             ('SoftmaxOutput', 'softmax', {}, ['fc', 'softmax_label'])]
    params = {'c_weight': _rand(4, 2, 3, 3), 'c_bias': _rand(4), 'bn_gamma': _rand(4),
              'bn_beta': _rand(4), 'bn_running_mean': _rand(4) * 0.2,
              'bn_running_var': onp.random.uniform(0.5, 1.5, 4), 'fc_weight': _rand(3, 16),
              'fc_bias': _rand(3)}

    def reference(x, p):
        y = _conv2d(x, p['c_weight'], p['c_bias'], pad=1)
        y = (y - p['bn_running_mean'][None, :, None, None]) / \
            onp.sqrt(p['bn_running_var'][None, :, None, None] + 1e-5)
        y = onp.maximum(y * p['bn_gamma'][None, :, None, None] +
                        p['bn_beta'][None, :, None, None], 0)
        y = y.reshape(2, 4, 2, 2, 2, 2).max(axis=(3, 5))
        return _softmax(y.reshape(2, -1) @ p['fc_weight'].T + p['fc_bias'], axis=1)

    return _mxnet_symbol(nodes, ['softmax'], legacy), params, reference


@pytest.mark.parametrize('legacy', [False, True], ids=['attrs', 'param_attr'])
@pytest.mark.parametrize('hybridize', [False, True])
def test_mxnet_conv_net(tmp_path, device, legacy, hybridize):
    symbol, params, reference = _conv_net(legacy)
    symbol_file, param_file = _write(tmp_path, symbol, params,
                                     aux=('bn_running_mean', 'bn_running_var'))
    net = SymbolBlock.imports(symbol_file, ['data'], param_file, device=device)
    assert sorted(net.collect_params()) == sorted(params)  # the label is not a parameter
    x = _rand(2, 2, 4, 4)
    net.hybridize(hybridize)
    out = net(np.array(x, dtype='float32', device=device))
    stored = {k: v.astype(onp.float32).astype(onp.float64) for k, v in params.items()}
    assert_almost_equal(out, reference(x.astype(onp.float32), stored), rtol=1e-5, atol=1e-6)
    grad_reqs = {k: p.grad_req for k, p in net.collect_params().items()}
    assert grad_reqs['bn_running_mean'] == grad_reqs['bn_running_var'] == 'null'
    assert grad_reqs['c_weight'] == grad_reqs['bn_gamma'] == 'write'


# ---- one MXNet operator at a time ------------------------------------------------------------

def _leaky(x, slope):
    return onp.where(x > 0, x, slope * x)


def _elu(x, alpha):
    return onp.where(x > 0, x, alpha * (onp.exp(x) - 1))


def _deconv1d(x, w, stride):
    n, _, length = x.shape
    out = onp.zeros((n, w.shape[1], (length - 1) * stride + w.shape[2]))
    for i in range(length):
        out[:, :, i * stride:i * stride + w.shape[2]] += onp.einsum('nc,cok->nok', x[:, :, i], w)
    return out


_erf = onp.vectorize(math.erf)


def _erfinv(y):
    """Inverts math.erf by bisection (to float64 resolution)."""
    low, high = -6.0, 6.0
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if math.erf(middle) < y else (low, middle)
    return (low + high) / 2


def _layer_norm(x, g, b):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / onp.sqrt(var + 1e-5) * g + b


def _group_norm(x, g, b, groups, eps):
    """x (N, C, ...) normalised per sample over each group of channels; g, b per channel."""
    grouped = x.reshape(x.shape[0], groups, -1)
    mean, var = grouped.mean(-1, keepdims=True), grouped.var(-1, keepdims=True)
    normed = ((grouped - mean) / onp.sqrt(var + eps)).reshape(x.shape)
    per_channel = (1, -1) + (1,) * (x.ndim - 2)
    return normed * g.reshape(per_channel) + b.reshape(per_channel)


def _masked_softmax(x, lengths):
    """Softmax over the last axis of each row's first lengths[i] entries, zeros after."""
    valid = onp.arange(x.shape[-1])[None, :] < lengths[:, None]
    e = onp.where(valid, onp.exp(x - x.max(-1, keepdims=True)), 0)
    return e / e.sum(-1, keepdims=True)


def _upsample(x, scale):
    return x.repeat(scale, axis=2).repeat(scale, axis=3)


def _bilinear_upsampling(x, w, scale):
    """Depthwise transposed convolution, stride scale, padding ceil((scale - 1) / 2)."""
    n, c, h, width = x.shape
    k, pad = w.shape[-1], -(-(scale - 1) // 2)
    full = onp.zeros((n, c, (h - 1) * scale + k, (width - 1) * scale + k))
    for i in range(h):
        for j in range(width):
            full[:, :, i * scale:i * scale + k, j * scale:j * scale + k] += \
                x[:, :, i, j, None, None] * w[None, :, 0]
    return full[:, :, pad:full.shape[2] - pad, pad:full.shape[3] - pad]


def _bilinear_resize(x, height, width, align_corners=True):
    """Each output pixel from its source position (MXNet's mapping), one at a time."""
    def source(i, size_in, size_out):
        if align_corners:
            return i * (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
        return max((i + 0.5) * size_in / size_out - 0.5, 0.0)

    out = onp.zeros(x.shape[:2] + (height, width))
    for i in range(height):
        for j in range(width):
            y, z = source(i, x.shape[2], height), source(j, x.shape[3], width)
            y0, z0 = int(y), int(z)
            y1, z1 = min(y0 + 1, x.shape[2] - 1), min(z0 + 1, x.shape[3] - 1)
            dy, dz = y - y0, z - z0
            out[:, :, i, j] = ((1 - dy) * (1 - dz) * x[:, :, y0, z0] +
                               (1 - dy) * dz * x[:, :, y0, z1] +
                               dy * (1 - dz) * x[:, :, y1, z0] + dy * dz * x[:, :, y1, z1])
    return out


def _adaptive_avg_pool(x, height, width):
    out = onp.zeros(x.shape[:2] + (height, width))
    for i in range(height):
        for j in range(width):
            rows = slice(i * x.shape[2] // height, -(-(i + 1) * x.shape[2] // height))
            columns = slice(j * x.shape[3] // width, -(-(j + 1) * x.shape[3] // width))
            out[:, :, i, j] = x[:, :, rows, columns].mean(axis=(2, 3))
    return out


def _l2_normalize(x, axes, eps=1e-10):
    return x / onp.sqrt((x * x).sum(axis=axes, keepdims=True) + eps)


def _sequence_reverse(x, lengths):
    out = x.copy()
    for b, n in enumerate(lengths.astype(int)):
        out[:n, b] = x[:n, b][::-1]
    return out


_HALVES = onp.array([-2.5, -0.5, 0.5, 1.5, 0.3, -1.7])


# (op, attrs, data shapes, parameter shapes, float64 reference(*data, *params)); data are named
# d0, d1, ... and parameters p0, p1, ... in the node's input order: data first.
_OP_CASES = [
    ('Activation', {'act_type': 'tanh'}, [(2, 3)], [], onp.tanh),
    ('Activation', {'act_type': 'softrelu'}, [(2, 3)], [], lambda x: onp.log1p(onp.exp(x))),
    ('LeakyReLU', {'slope': '0.1'}, [(2, 3)], [], lambda x: _leaky(x, 0.1)),
    ('LeakyReLU', {'act_type': 'elu', 'slope': '0.5'}, [(2, 3)], [], lambda x: _elu(x, 0.5)),
    ('LeakyReLU', {'act_type': 'selu'}, [(2, 3)], [],
     lambda x: 1.0507009873554805 * _elu(x, 1.6732632423543772)),
    ('LeakyReLU', {'act_type': 'prelu'}, [(2, 3, 2)], [(3,)],
     lambda x, g: _leaky(x, g[None, :, None])),
    ('LeakyReLU', {'act_type': 'rrelu', 'lower_bound': '0.1', 'upper_bound': '0.3'}, [(4,)], [],
     lambda x: _leaky(x, 0.2)),
    ('broadcast_add', {}, [(2, 3), (1, 3)], [], onp.add),
    ('_Plus', {}, [(2, 3), (2, 3)], [], onp.add),
    ('elemwise_sub', {}, [(2, 3), (2, 3)], [], onp.subtract),
    ('_npi_multiply', {}, [(2, 3), (3,)], [], onp.multiply),
    ('broadcast_div', {}, [(2, 3), (2, 1)], [], onp.divide),
    ('broadcast_maximum', {}, [(2, 3), (2, 3)], [], onp.maximum),
    ('ElementWiseSum', {'num_args': 3}, [(2, 3)] * 3, [], lambda a, b, c: a + b + c),
    ('_plus_scalar', {'scalar': '0.5'}, [(2, 3)], [], lambda x: x + 0.5),
    ('_rminus_scalar', {'scalar': '2'}, [(2, 3)], [], lambda x: 2 - x),
    ('_MulScalar', {'scalar': '-3.0'}, [(2, 3)], [], lambda x: -3 * x),
    ('_rdiv_scalar', {'scalar': '1.5'}, [(2, 3)], [], lambda x: 1.5 / x),
    ('_npi_true_divide_scalar', {'scalar': '4.0', 'is_int': 'False'}, [(2, 3)], [],
     lambda x: x / 4),
    ('_npi_power_scalar', {'scalar': '2.0', 'is_int': 'False'}, [(2, 3)], [], onp.square),
    ('_maximum_scalar', {'scalar': '0.1'}, [(2, 3)], [], lambda x: onp.maximum(x, 0.1)),
    ('clip', {'a_min': '-0.5', 'a_max': '0.5'}, [(2, 3)], [], lambda x: onp.clip(x, -.5, .5)),
    ('_copy', {}, [(2, 3)], [], lambda x: x),
    ('identity', {}, [(2, 3)], [], lambda x: x),
    ('Flatten', {}, [(2, 3, 2)], [], lambda x: x.reshape(2, 6)),
    ('Dropout', {'p': '0.5'}, [(2, 3)], [], lambda x: x),  # predict mode: the identity
    ('Cast', {'dtype': 'float16'}, [(2, 3)], [], lambda x: x.astype(onp.float16)),
    ('Reshape', {'shape': '(0, -1)'}, [(2, 3, 4)], [], lambda x: x.reshape(2, 12)),
    ('Reshape', {'shape': '(-3, -2)'}, [(2, 3, 4)], [], lambda x: x.reshape(6, 4)),
    ('Reshape', {'shape': '(0, -4, -1, 2, 0)'}, [(2, 4, 3)], [], lambda x: x.reshape(2, 2, 2, 3)),
    ('Reshape', {'shape': '(-1, 0)', 'reverse': 'True'}, [(2, 3, 4)], [],
     lambda x: x.reshape(6, 4)),
    ('reshape', {'target_shape': '(0, 6)'}, [(2, 3, 2)], [], lambda x: x.reshape(2, 6)),
    ('_npx_reshape', {'newshape': '(-2, -5)'}, [(2, 3, 4)], [], lambda x: x.reshape(2, 12)),
    ('_npx_reshape', {'newshape': '(-2, -3, -6, 2, -1)'}, [(2, 1, 4)], [],
     lambda x: x.reshape(2, 2, 2)),
    ('_np_reshape', {'newshape': '(3, -1)'}, [(2, 3)], [], lambda x: x.reshape(3, 2)),
    ('transpose', {}, [(2, 3, 4)], [], onp.transpose),
    ('_npi_transpose', {'axes': '(1, 0, 2)'}, [(2, 3, 4)], [],
     lambda x: x.transpose(1, 0, 2)),
    ('expand_dims', {'axis': '1'}, [(2, 3)], [], lambda x: x[:, None]),
    ('squeeze', {'axis': '(1,)'}, [(2, 1, 3)], [], lambda x: x[:, 0]),
    ('Concat', {'dim': '1', 'num_args': '2'}, [(2, 3), (2, 2)], [],
     lambda a, b: onp.concatenate([a, b], 1)),
    ('_npi_concatenate', {'axis': '0', 'num_args': '2'}, [(2, 3), (1, 3)], [],
     lambda a, b: onp.concatenate([a, b], 0)),
    ('slice', {'begin': '(None, 1)', 'end': '(None, 3)', 'step': '()'}, [(2, 4)], [],
     lambda x: x[:, 1:3]),
    ('slice', {'begin': '[None, 0, None]', 'end': '[None, 1, None]', 'step': '[None, 1, None]'},
     [(2, 3, 4)], [], lambda x: x[:, 0:1]),
    ('slice_axis', {'axis': '-1', 'begin': '1', 'end': 'None'}, [(2, 4)], [],
     lambda x: x[:, 1:]),
    ('mean', {'axis': '(1,)', 'keepdims': 'True'}, [(2, 3, 4)], [],
     lambda x: x.mean(1, keepdims=True)),
    ('sum', {'axis': '(1,)', 'exclude': 'True'}, [(2, 3, 4)], [], lambda x: x.sum((0, 2))),
    ('sum', {'axis': '()'}, [(2, 3)], [], onp.sum),
    ('_npi_mean', {'axis': '(0, 2)'}, [(2, 3, 4)], [], lambda x: x.mean((0, 2))),
    ('_np_sum', {'axis': 'None'}, [(2, 3)], [], onp.sum),
    ('softmax', {'axis': '1'}, [(2, 3, 2)], [], lambda x: _softmax(x, 1)),
    ('log_softmax', {}, [(2, 3)], [], lambda x: onp.log(_softmax(x, -1))),
    ('SoftmaxActivation', {'mode': 'channel'}, [(2, 3, 2)], [], lambda x: _softmax(x, 1)),
    ('SoftmaxActivation', {}, [(2, 3, 2)], [],
     lambda x: _softmax(x.reshape(2, 6), 1).reshape(2, 3, 2)),
    ('SoftmaxOutput', {'multi_output': 'True'}, [(2, 3, 2)], [], lambda x: _softmax(x, 1)),
    ('FullyConnected', {'num_hidden': '4', 'no_bias': 'True', 'flatten': 'False'},
     [(2, 3, 5)], [(4, 5)], lambda x, w: x @ w.T),
    ('LayerNorm', {'eps': '1e-5'}, [(2, 5)], [(5,), (5,)], _layer_norm),
    ('Deconvolution', {'kernel': '(3,)', 'stride': '(2,)', 'num_filter': '2'}, [(2, 3, 4)],
     [(3, 2, 3)], lambda x, w: _deconv1d(x, w, 2)),
    ('Pooling', {'kernel': '(1, 1)', 'global_pool': 'True', 'pool_type': 'avg'},
     [(2, 3, 4, 5)], [], lambda x: x.mean((2, 3), keepdims=True)),
    ('Pooling', {'kernel': '(2, 2)', 'stride': '(2, 2)', 'pooling_convention': 'full'},
     [(1, 1, 3, 3)], [],
     lambda x: onp.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=-onp.inf)
     .reshape(1, 1, 2, 2, 2, 2).max(axis=(3, 5))),
    ('batch_dot', {'transpose_b': 'True'}, [(2, 3, 4), (2, 5, 4)], [],
     lambda a, b: a @ b.transpose(0, 2, 1)),
    ('erf', {}, [(3, 4)], [], _erf),
    ('erfinv', {}, [onp.array([-0.9, -0.2, 0.3, 0.99])], [],
     lambda y: onp.array([_erfinv(v) for v in y])),
    ('Activation', {'act_type': 'log_sigmoid'}, [(2, 3)], [], lambda x: -onp.log1p(onp.exp(-x))),
    ('Activation', {'act_type': 'mish'}, [(2, 3)], [],
     lambda x: x * onp.tanh(onp.log1p(onp.exp(x)))),
    ('BlockGrad', {}, [(2, 3)], [], lambda x: x),
    ('InstanceNorm', {'eps': '0.001'}, [(2, 3, 4)], [(3,), (3,)],
     lambda x, g, b: _group_norm(x, g, b, 3, 1e-3)),
    ('GroupNorm', {'num_groups': '2'}, [(2, 4, 3)], [(4,), (4,)],
     lambda x, g, b: _group_norm(x, g, b, 2, 1e-5)),
    # MXNet 1.x's GroupNorm: one gamma and beta per group.
    ('GroupNorm', {'num_groups': '2', 'eps': '1e-3'}, [(2, 4, 3)], [(2,), (2,)],
     lambda x, g, b: _group_norm(x, onp.repeat(g, 2), onp.repeat(b, 2), 2, 1e-3)),
    ('LeakyReLU', {'act_type': 'gelu'}, [(3, 4)], [],
     lambda x: 0.5 * x * (1 + _erf(x / onp.sqrt(2)))),
    ('_contrib_div_sqrt_dim', {}, [(2, 4)], [], lambda x: x / 2),
    ('broadcast_to', {'shape': '(2, 0)'}, [(1, 3)], [], lambda x: onp.broadcast_to(x, (2, 3))),
    ('broadcast_like', {}, [(1, 3), (2, 3)], [], lambda a, b: onp.broadcast_to(a, b.shape)),
    ('zeros_like', {}, [(2, 3)], [], onp.zeros_like),
    ('take', {'axis': '1'}, [(2, 4), onp.array([[0, 5], [3, -1]])], [],
     lambda a, i: onp.take(a, i.astype(int), axis=1, mode='clip')),
    ('one_hot', {'depth': '4'}, [onp.array([0, 3, 1])], [], lambda i: onp.eye(4)[i.astype(int)]),
    ('SequenceMask', {'use_sequence_length': 'True', 'value': '-1'},
     [(3, 2, 2), onp.array([1, 3])], [],
     lambda x, n: onp.where(onp.arange(3)[:, None, None] < n[None, :, None], x, -1)),
    # resampling and padding
    ('UpSampling', {'scale': '2', 'sample_type': 'nearest', 'num_args': '1'}, [(1, 2, 2, 3)], [],
     lambda x: _upsample(x, 2)),
    ('UpSampling', {'scale': '2', 'sample_type': 'nearest', 'num_args': '2'},
     [(1, 2, 2, 2), (1, 1, 4, 4)], [], lambda a, b: onp.concatenate([_upsample(a, 2), b], 1)),
    ('UpSampling', {'scale': '(2, 2)', 'sample_type': 'nearest', 'num_args': '2',
                    'multi_input_mode': 'sum'}, [(1, 2, 2, 2), (1, 2, 1, 1)], [],
     lambda a, b: _upsample(a, 2) + _upsample(b, 4)),
    ('UpSampling', {'scale': '2', 'sample_type': 'bilinear', 'num_filter': '2', 'num_args': '2'},
     [(1, 2, 3, 3)], [(2, 1, 4, 4)], lambda x, w: _bilinear_upsampling(x, w, 2)),
    ('UpSampling', {'scale': '3', 'sample_type': 'bilinear', 'num_filter': '1', 'num_args': '2'},
     [(2, 1, 2, 2)], [(1, 1, 5, 5)], lambda x, w: _bilinear_upsampling(x, w, 3)),
    ('Pad', {'mode': 'constant', 'pad_width': '(0, 0, 0, 0, 1, 2, 2, 1)',
             'constant_value': '0.5'}, [(1, 2, 3, 3)], [],
     lambda x: onp.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)), constant_values=0.5)),
    ('Pad', {'mode': 'edge', 'pad_width': '(0, 0, 0, 0, 2, 1, 0, 3)'}, [(1, 2, 3, 3)], [],
     lambda x: onp.pad(x, ((0, 0), (0, 0), (2, 1), (0, 3)), mode='edge')),
    ('pad', {'mode': 'reflect', 'pad_width': '(0, 0, 0, 0, 0, 0, 2, 1, 1, 2)'},
     [(1, 1, 2, 3, 4)], [], lambda x: onp.pad(x, ((0, 0),) * 3 + ((2, 1), (1, 2)), 'reflect')),
    ('_npi_pad', {'mode': 'reflect', 'pad_width': '((0, 0), (1, 2))'}, [(2, 4)], [],
     lambda x: onp.pad(x, ((0, 0), (1, 2)), 'reflect')),
    ('_contrib_BilinearResize2D', {'height': '5', 'width': '3'}, [(1, 2, 3, 4)], [],
     lambda x: _bilinear_resize(x, 5, 3)),
    ('_contrib_BilinearResize2D', {'height': '2', 'width': '7', 'align_corners': 'False'},
     [(1, 2, 3, 4)], [], lambda x: _bilinear_resize(x, 2, 7, align_corners=False)),
    ('_contrib_BilinearResize2D', {'scale_height': '2', 'scale_width': '1.5'}, [(1, 1, 3, 4)],
     [], lambda x: _bilinear_resize(x, 6, 6)),
    ('_contrib_BilinearResize2D', {'mode': 'like'}, [(1, 2, 3, 4), (1, 1, 4, 2)], [],
     lambda x, like: _bilinear_resize(x, 4, 2)),
    ('_contrib_BilinearResize2D', {'mode': 'odd_scale', 'scale_height': '2',
                                   'scale_width': '0.5'}, [(1, 1, 3, 4)], [],
     lambda x: _bilinear_resize(x, 5, 2)),
    ('_contrib_BilinearResize2D', {'mode': 'to_odd_up'}, [(1, 1, 3, 4)], [],
     lambda x: _bilinear_resize(x, 3, 5)),
    ('_contrib_AdaptiveAvgPooling2D', {'output_size': '(2, 3)'}, [(1, 2, 5, 7)], [],
     lambda x: _adaptive_avg_pool(x, 2, 3)),
    ('_contrib_AdaptiveAvgPooling2D', {}, [(2, 2, 3, 3)], [],
     lambda x: x.mean(axis=(2, 3), keepdims=True)),
    ('L2Normalization', {}, [(2, 3, 2)], [], lambda x: _l2_normalize(x, (1, 2))),
    ('L2Normalization', {'mode': 'channel', 'eps': '1e-3'}, [(2, 3, 2)], [],
     lambda x: _l2_normalize(x, 1, 1e-3)),
    # softmax with lengths, N-D dot, broadcast_like with axes
    ('softmax', {'use_length': 'True'}, [(2, 4), onp.array([2, 3])], [],
     lambda x, n: _masked_softmax(x, n.astype(int))),
    ('log_softmax', {'use_length': 'True', 'axis': '-1'}, [(2, 4), onp.array([4, 1])], [],
     lambda x, n: onp.where(_masked_softmax(x, n.astype(int)) > 0,
                            onp.log(onp.maximum(_masked_softmax(x, n.astype(int)), 1e-30)), 0)),
    ('softmin', {'axis': '0'}, [(3, 2)], [], lambda x: _softmax(-x, 0)),
    ('dot', {}, [(2, 3, 4), (4, 5)], [], lambda a, b: onp.tensordot(a, b, ([2], [0]))),
    ('dot', {'transpose_a': 'True'}, [(3, 2), (3, 5, 2)], [],
     lambda a, b: onp.tensordot(a, b, ([0], [0]))),
    ('dot', {'transpose_b': 'True'}, [(2, 2, 4), (5, 3, 4)], [],
     lambda a, b: onp.tensordot(a, b, ([2], [2]))),
    ('dot', {}, [(3,), (3,)], [], lambda a, b: onp.dot(a, b).reshape(1)),
    ('broadcast_like', {'lhs_axes': '(0,)', 'rhs_axes': '(1,)'}, [(1, 3), (2, 4)], [],
     lambda a, b: onp.broadcast_to(a, (4, 3))),
    # legacy comparisons and logic (results in the data's dtype), where
    ('broadcast_greater', {}, [(2, 3), (1, 3)], [], lambda a, b: (a > b).astype(float)),
    ('_lesser_equal', {}, [(2, 3), (2, 3)], [], lambda a, b: (a <= b).astype(float)),
    ('_NotEqualScalar', {'scalar': '0.5'}, [onp.array([0.5, 1.0, -2.0])], [],
     lambda x: (x != 0.5).astype(float)),
    ('_greater_equal_scalar', {'scalar': '0'}, [(2, 3)], [], lambda x: (x >= 0).astype(float)),
    ('broadcast_logical_and', {}, [onp.array([0.0, 1.0, 2.0]), onp.array([[3.0], [0.0]])], [],
     lambda a, b: onp.logical_and(a, b).astype(float)),
    ('_logical_xor_scalar', {'scalar': '1'}, [onp.array([0.0, 1.0, -2.0])], [],
     lambda x: onp.logical_xor(x, 1).astype(float)),
    ('logical_not', {}, [onp.array([0.0, 1.0, -2.0])], [], lambda x: (x == 0).astype(float)),
    ('where', {}, [onp.array([1.0, 0.0]), (2, 3), (2, 3)], [],
     lambda c, x, y: onp.where(c[:, None] != 0, x, y)),
    ('where', {}, [onp.array([[1.0, 0.0, 2.0]]), (1, 3), (1, 3)], [],
     lambda c, x, y: onp.where(c != 0, x, y)),
    # elementwise
    ('round', {}, [_HALVES], [], lambda x: onp.sign(x) * onp.floor(onp.abs(x) + 0.5)),
    ('_npi_around', {}, [_HALVES], [], onp.round),
    ('fix', {}, [_HALVES], [], onp.trunc),
    ('degrees', {}, [(2, 3)], [], onp.degrees),
    ('_npi_radians', {}, [(2, 3)], [], onp.radians),
    ('rcbrt', {}, [(2, 3)], [], lambda x: 1 / onp.cbrt(x)),
    ('softsign', {}, [(2, 3)], [], lambda x: x / (1 + onp.abs(x))),
    ('hard_sigmoid', {'alpha': '0.5', 'beta': '0.25'}, [(2, 5)], [],
     lambda x: onp.clip(0.5 * x + 0.25, 0, 1)),
    ('smooth_l1', {'scalar': '2'}, [(2, 5)], [],
     lambda x: onp.where(onp.abs(x) < 0.25, 2 * x * x, onp.abs(x) - 0.125)),
    # searching, sorting, indexing
    ('argmax', {'axis': '1'}, [(2, 3)], [], lambda x: x.argmax(1).astype(float)),
    ('argmin', {'axis': '0', 'keepdims': 'True'}, [(2, 3)], [],
     lambda x: x.argmin(0)[None].astype(float)),
    ('argmax', {}, [(2, 3)], [], lambda x: onp.array([x.argmax()], dtype=float)),
    ('topk', {'k': '2', 'ret_typ': 'value'}, [(2, 4)], [], lambda x: -onp.sort(-x, 1)[:, :2]),
    ('topk', {'k': '2', 'axis': '0', 'is_ascend': 'True'}, [(3, 2)], [],
     lambda x: onp.argsort(x, 0)[:2].astype(float)),
    ('sort', {'is_ascend': 'False'}, [(2, 4)], [], lambda x: -onp.sort(-x, -1)),
    ('argsort', {'axis': '0'}, [(3, 2)], [], lambda x: onp.argsort(x, 0).astype(float)),
    ('pick', {'axis': '1'}, [(2, 3), onp.array([0, 2])], [],
     lambda x, i: x[onp.arange(2), i.astype(int)]),
    ('gather_nd', {}, [(3, 4), onp.array([[0, 2], [1, 3]])], [],
     lambda x, i: x[i[0].astype(int), i[1].astype(int)]),
    ('SequenceLast', {'use_sequence_length': 'True'}, [(3, 2, 2), onp.array([2, 3])], [],
     lambda x, n: x[n.astype(int) - 1, onp.arange(2)]),
    ('SequenceReverse', {'use_sequence_length': 'True'}, [(3, 2, 2), onp.array([2, 3])], [],
     _sequence_reverse),
    ('cumsum', {'axis': '1'}, [(2, 3)], [], lambda x: onp.cumsum(x, 1)),
    # shape and layout
    ('tile', {'reps': '(2, 1, 2)'}, [(2, 3)], [], lambda x: onp.tile(x, (2, 1, 2))),
    ('repeat', {'repeats': '2', 'axis': '1'}, [(2, 3)], [], lambda x: x.repeat(2, 1)),
    ('repeat', {'repeats': '2'}, [(2, 2)], [], lambda x: x.repeat(2)),
    ('reverse', {'axis': '(1,)'}, [(2, 3)], [], lambda x: x[:, ::-1]),
    ('broadcast_axis', {'axis': '(0, 2)', 'size': '(3, 2)'}, [(1, 2, 1)], [],
     lambda x: onp.broadcast_to(x, (3, 2, 2))),
    ('reshape_like', {}, [(2, 3), (3, 2)], [], lambda x, like: x.reshape(3, 2)),
    ('reshape_like', {'lhs_begin': '1', 'lhs_end': 'None', 'rhs_begin': '0', 'rhs_end': '2'},
     [(2, 6), (3, 2, 5)], [], lambda x, like: x.reshape(2, 3, 2)),
    ('slice_like', {'axes': '(1,)'}, [(2, 4), (1, 2)], [], lambda x, like: x[:, :2]),
    ('depth_to_space', {'block_size': '2'}, [(1, 8, 2, 3)], [],
     lambda x: x.reshape(1, 2, 2, 2, 2, 3).transpose(0, 3, 4, 1, 5, 2).reshape(1, 2, 4, 6)),
    ('space_to_depth', {'block_size': '2'}, [(1, 2, 4, 6)], [],
     lambda x: x.reshape(1, 2, 2, 2, 3, 2).transpose(0, 3, 5, 1, 2, 4).reshape(1, 8, 2, 3)),
    ('_split_v2', {'indices': '(0, 1)', 'axis': '1'}, [(2, 3)], [], lambda x: x[:, :1]),
    ('stack', {'axis': '1', 'num_args': '2'}, [(2, 3), (2, 3)], [],
     lambda a, b: onp.stack([a, b], 1)),
    # creation and norms
    ('_arange', {'start': '1', 'stop': '7', 'step': '2', 'repeat': '2'}, [], [],
     lambda: onp.arange(1, 7, 2).repeat(2)),
    ('_linspace', {'start': '-1', 'stop': '1', 'num': '5', 'endpoint': 'False'}, [], [],
     lambda: onp.linspace(-1, 1, 5, endpoint=False)),
    ('norm', {}, [(2, 3)], [], lambda x: onp.array([onp.sqrt((x * x).sum())])),
    ('norm', {'ord': '1', 'axis': '(1,)', 'keepdims': 'True'}, [(2, 3)], [],
     lambda x: onp.abs(x).sum(1, keepdims=True)),
]


def _case_id(case):
    op, attrs = case[0], case[1]
    return op + ''.join(f'-{k}={v}' for k, v in attrs.items())


@pytest.mark.parametrize('case', _OP_CASES, ids=[_case_id(c) for c in _OP_CASES])
def test_mxnet_op(tmp_path, device, case):
    op, attrs, data_shapes, param_shapes, reference = case
    # A shape gives random data; an array is used as it is (indices, lengths).
    data = [s.astype(onp.float64) if isinstance(s, onp.ndarray) else
            onp.random.uniform(0.5, 2, s) if op == '_rdiv_scalar' else _rand(*s)
            for s in data_shapes]
    params = {f'p{i}': _rand(*s) for i, s in enumerate(param_shapes)}
    names = [f'd{i}' for i in range(len(data))] + list(params)
    symbol = _mxnet_symbol([_var(n) for n in names] + [(op, 'node', attrs, names)], ['node'])
    symbol_file, param_file = _write(tmp_path, symbol, params if params else None)
    net = SymbolBlock.imports(symbol_file, names[:len(data)], param_file, device=device)
    data32 = [d.astype(onp.float32) for d in data]
    out = net(*[np.array(d, device=device) for d in data32])
    expected = reference(*data32, *[p.astype(onp.float32) for p in params.values()])
    assert out.dtype == (onp.float16 if op == 'Cast' else onp.float32)
    assert_almost_equal(out, expected, rtol=1e-3 if op == 'Cast' else 1e-5, atol=1e-6)


def test_mxnet_multi_output_op_and_aux_outputs(tmp_path):
    """SliceChannel's outputs are read by index; heads may name several outputs."""
    symbol = _mxnet_symbol(
        [_var('x'), ('SliceChannel', 'split', {'num_outputs': '2', 'axis': '1'}, ['x']),
         ('elemwise_mul', 'mul', {}, [('split', 1), ('split', 0)])],
        [('split', 0), 'mul'])
    net = SymbolBlock(symbol, 'x')
    x = _rand(2, 4)
    first, product = net(np.array(x))
    assert_almost_equal(first, x[:, :2].astype(onp.float32))
    assert_almost_equal(product, (x[:, 2:] * x[:, :2]).astype(onp.float32), rtol=1e-6)


def test_mxnet_embedding_network_trains_like_numpy(tmp_path):
    """Embedding -> mean -> FullyConnected; one SGD step matches the float64 NumPy gradient."""
    symbol = _mxnet_symbol(
        [_var('tokens'), _var('emb_weight'),
         ('Embedding', 'emb', {'input_dim': '5', 'output_dim': '3'}, ['tokens', 'emb_weight']),
         ('mean', 'pool', {'axis': '1'}, ['emb']), _var('fc_weight'), _var('fc_bias'),
         ('FullyConnected', 'fc', {'num_hidden': '2'}, ['pool', 'fc_weight', 'fc_bias'])],
        ['fc'])
    params = {'emb_weight': _rand(5, 3), 'fc_weight': _rand(2, 3), 'fc_bias': _rand(2)}
    symbol_file, param_file = _write(tmp_path, symbol, params)
    net = SymbolBlock.imports(symbol_file, ['tokens'], param_file)
    tokens = onp.array([[0, 4, 4], [1, 2, 3]])
    p = {k: v.astype(onp.float32).astype(onp.float64) for k, v in params.items()}
    pooled = p['emb_weight'][tokens].mean(1)
    # d(sum(out))/d(params)
    grad_fc_weight = onp.ones((2, 2)).T @ pooled
    grad_emb = onp.zeros_like(p['emb_weight'])
    onp.add.at(grad_emb, tokens, (onp.ones((2, 2)) @ p['fc_weight'])[:, None, :] / 3)
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.5})
    with autograd.record():
        out = net(np.array(tokens, dtype='float32'))
    out.backward()
    trainer.step(1)
    assert_almost_equal(out, pooled @ p['fc_weight'].T + p['fc_bias'], rtol=1e-5, atol=1e-6)
    weights = {k: v.data().asnumpy() for k, v in net.collect_params().items()}
    assert_almost_equal(weights['fc_weight'], p['fc_weight'] - 0.5 * grad_fc_weight, rtol=1e-5)
    assert_almost_equal(weights['emb_weight'], p['emb_weight'] - 0.5 * grad_emb, rtol=1e-5)
    assert_almost_equal(weights['fc_bias'], p['fc_bias'] - 0.5 * 2, rtol=1e-5)


def test_prelu_gradient_matches_numpy(tmp_path):
    symbol = _mxnet_symbol([_var('x'), _var('gamma'),
                            ('LeakyReLU', 'act', {'act_type': 'prelu'}, ['x', 'gamma'])],
                           ['act'])
    net = SymbolBlock(symbol, ['x'])
    net.initialize()
    x = onp.array([[[-1.0, 2.0], [0.5, -3.0]]], dtype=onp.float32)  # (1, 2, 2)
    net(np.array(x))  # finishes the deferred initialisation: gamma's shape is (2,)
    gamma = net.collect_params()['gamma']
    assert gamma.shape == (2,)
    gamma.set_data(np.array([0.25, -0.5]))
    with autograd.record():
        out = net(np.array(x))
    out.backward()
    assert_almost_equal(gamma.grad(), onp.minimum(x, 0).sum(axis=(0, 2)))


def test_deferred_shapes_from_the_layer_inputs(tmp_path):
    """Without a parameter file, initialize() gives the parameters the shapes MXNet infers;
    a partial __shape__ annotation is completed from the input."""
    symbol, params, _ = _conv_net(legacy=False)
    net = SymbolBlock.imports(_write(tmp_path, symbol)[0], 'data')
    assert net.collect_params()['c_weight'].shape == (4, -1, 3, 3)
    net.initialize()
    assert net(np.ones((2, 2, 4, 4))).shape == (2, 3)
    shapes = {k: p.shape for k, p in net.collect_params().items()}
    assert shapes == {k: v.shape for k, v in params.items()}
    assert_almost_equal(net.collect_params()['bn_running_var'].data(), onp.ones(4))


# ---- pymx's own exports ----------------------------------------------------------------------

class _TwoHeads(gluon.HybridBlock):
    """Two inputs, two outputs."""

    def __init__(self):
        super().__init__()
        self.left = gluon.nn.Dense(4, activation='tanh')
        self.right = gluon.nn.Dense(4, in_units=2)
        self.norm = gluon.nn.LayerNorm()

    def forward(self, a, b):
        mixed = self.left(a) * self.right(b)
        return self.norm(mixed), np.transpose(mixed.reshape(2, 2, 2), (0, 2, 1)) + 1.0


def _conv_bn_net():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, padding=1), gluon.nn.BatchNorm(), gluon.nn.Activation('relu'),
            gluon.nn.MaxPool2D(), gluon.nn.Flatten(), gluon.nn.Dense(3))
    return net, [(2, 3, 6, 6)]


def _dense_net():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation='relu'), gluon.nn.Dropout(0.5), gluon.nn.Dense(3))
    return net, [(4, 5)]


def _two_heads_net():
    return _TwoHeads(), [(2, 3), (2, 2)]


def _exported(tmp_path, make, device):
    """(original net, imported block, inputs) for a freshly initialised, exported net."""
    net, shapes = make()
    net.initialize(device=device)
    inputs = [np.array(_rand(*s), dtype='float32', device=device) for s in shapes]
    with autograd.record():  # BatchNorm's running statistics move away from 0 and 1
        net(*inputs)
    net.hybridize()
    net(*inputs)
    net.export(str(tmp_path / 'model'))
    names = ['data'] if len(shapes) == 1 else [f'data{i}' for i in range(len(shapes))]
    block = SymbolBlock.imports(str(tmp_path / 'model-symbol.json'), names,
                                str(tmp_path / 'model-0000.params'), device=device)
    return net, block, inputs


def _outputs(value):
    return [o.asnumpy() for o in value] if isinstance(value, list) else [value.asnumpy()]


@pytest.mark.parametrize('make', [_conv_bn_net, _dense_net, _two_heads_net],
                         ids=['conv_bn', 'dense', 'two_inputs_two_outputs'])
@pytest.mark.parametrize('hybridize', [False, True])
def test_pymx_export_round_trip(tmp_path, device, make, hybridize):
    net, block, inputs = _exported(tmp_path, make, device)
    assert sorted(block.collect_params()) == sorted(net.collect_params())
    block.hybridize(hybridize)
    for got, expected in zip(_outputs(block(*inputs)), _outputs(net(*inputs))):
        assert_almost_equal(got, expected, rtol=0, atol=0)


def test_fine_tuning_follows_the_original_net(tmp_path, device):
    """Training the imported block moves its parameters exactly as training the original net;
    the running statistics change only through BatchNorm itself (grad_req 'null')."""
    net, block, (x,) = _exported(tmp_path, _conv_bn_net, device)
    block.hybridize()
    start = {k: p.data().asnumpy() for k, p in block.collect_params().items()}
    for model in (net, block):
        trainer = gluon.Trainer(model.collect_params(), 'sgd',
                                {'learning_rate': 0.1, 'momentum': 0.9})
        for _ in range(3):
            with autograd.record():
                loss = (model(x) ** 2).sum()
            loss.backward()
            trainer.step(2)
    params = net.collect_params()
    for name, param in block.collect_params().items():
        assert_almost_equal(param.data(), params[name].data(), rtol=1e-5, atol=1e-6)
        if name.endswith(('running_mean', 'running_var')):
            assert param.grad_req == 'null'
        else:
            assert param.grad_req == 'write'
            assert not onp.array_equal(param.data().asnumpy(), start[name]), name


def test_save_load_and_export_again(tmp_path):
    net, block, (x,) = _exported(tmp_path, _conv_bn_net, cpu())
    expected = net(x).asnumpy()
    block.save_parameters(str(tmp_path / 'block.params'))
    again = SymbolBlock.imports(str(tmp_path / 'model-symbol.json'), ['data'])
    again.load_parameters(str(tmp_path / 'block.params'))
    assert_almost_equal(again(x), expected, rtol=0, atol=0)
    again.hybridize()
    again(x)
    again.export(str(tmp_path / 'again'), epoch=3)
    third = SymbolBlock.imports(str(tmp_path / 'again-symbol.json'), ['data'],
                                str(tmp_path / 'again-0003.params'), ctx=cpu())
    assert_almost_equal(third(x), expected, rtol=0, atol=0)


class _ManyOps(gluon.HybridBlock):
    """Operations beyond the layers: scalar arithmetic on either side, comparisons, creation,
    split, where, reductions, layout, slices running backwards through index 0."""

    def forward(self, x):
        first, rest = np.split(x, [1], axis=1)
        filled = np.zeros((2, 3)) + np.full((2, 3), 2.5) * np.ones((2, 3))
        y = np.where(x > 0.1, x, filled) + (0.2 < x).astype('float32')
        y = y - 2.0 / (np.abs(x) + 1.0)
        y = np.clip(np.maximum(y, -0.5), None, 1.5) ** 2
        z = np.concatenate([np.swapaxes(np.expand_dims(y, 0), 1, 2).reshape(2, 3), rest.T], 1)
        return (np.stack([y, np.exp(-y)]).mean(axis=0, keepdims=True),
                npx.leaky_relu(np.matmul(y, x.T), slope=0.2).sum(axis=1),
                npx.softmax(z, axis=0), first[:, 0].astype('float16'), np.tanh(rest) - 1.0,
                x[:, ::-1], x[::-1, 2::-2])


def test_export_writes_mxnet_symbol_json(tmp_path):
    _, block, (x,) = _exported(tmp_path, _conv_bn_net, cpu())
    symbol = json.loads((tmp_path / 'model-symbol.json').read_text())
    assert symbol['attrs'] == {'mxnet_version': ['int', 10901]}
    ops = [node['op'] for node in symbol['nodes'] if node['op'] != 'null']
    assert ops == ['Convolution', 'BatchNorm', 'Activation', 'Pooling', 'Flatten',
                   'FullyConnected']
    weight = next(n for n in symbol['nodes'] if n['name'] == '0.weight')
    assert weight['attrs'] == {'__shape__': '(4, 3, 3, 3)', '__dtype__': '0'}


@pytest.mark.parametrize('hybridize', [False, True])
def test_export_of_many_operations_round_trips(tmp_path, device, hybridize):
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # every operation has an MXNet equivalent
        net, block, (x,) = _exported(tmp_path, lambda: (_ManyOps(), [(2, 3)]), device)
    block.hybridize(hybridize)
    for got, expected in zip(_outputs(block(x)), _outputs(net(x))):
        assert got.dtype == expected.dtype
        assert_almost_equal(got, expected, rtol=0, atol=0)


class _NormalisedNet(gluon.HybridBlock):
    """InstanceNorm, GELU, erf and a stopped gradient: operators MXNet 1.9.1 has under other
    names (InstanceNorm, LeakyReLU, erf, BlockGrad)."""

    def __init__(self):
        super().__init__()
        self.norm = gluon.nn.InstanceNorm(in_channels=3)
        self.gelu = gluon.nn.GELU()

    def forward(self, x):
        y = self.gelu(self.norm(x))
        return npx.erf(y) + npx.stop_gradient(y)


def test_export_of_norm_and_activation_layers_names_mxnet_operators(tmp_path, device):
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        net, block, (x,) = _exported(tmp_path, lambda: (_NormalisedNet(), [(2, 3, 4)]), device)
    symbol = json.loads((tmp_path / 'model-symbol.json').read_text())
    ops = {node['op'] for node in symbol['nodes']}
    assert {'InstanceNorm', 'LeakyReLU', 'erf', 'BlockGrad'} <= ops
    assert_almost_equal(block(x), net(x), rtol=0, atol=0)


class _LogSigmoid(gluon.HybridBlock):
    def forward(self, x):
        return npx.activation(x, act_type='log_sigmoid')


def test_export_of_an_activation_mxnet_lacks_keeps_pymx_format(tmp_path):
    with pytest.warns(UserWarning, match="act_type=log_sigmoid \\(MXNet 1.9.1 has relu, "):
        net, block, (x,) = _exported(tmp_path, lambda: (_LogSigmoid(), [(2, 3)]), cpu())
    assert_almost_equal(block(x), net(x), rtol=0, atol=0)


class _FusedConv(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.weight = gluon.Parameter('weight', shape=(2, 1, 3, 3))

    def forward(self, x):
        return npx.convolution(x, self.weight.data(x.device), no_bias=True, act_type='relu')


def test_export_without_mxnet_equivalent_keeps_pymx_format(tmp_path):
    with pytest.warns(UserWarning, match="node 'convolution0' is a convolution fused with "
                                         "act_type=relu; .* in pymx's own graph format"):
        net, block, (x,) = _exported(tmp_path, lambda: (_FusedConv(), [(1, 1, 5, 5)]), cpu())
    symbol = json.loads((tmp_path / 'model-symbol.json').read_text())
    assert 'trace_device' in symbol['attrs']
    assert_almost_equal(block(x), net(x), rtol=0, atol=0)


class _Views(gluon.HybridBlock):
    """Reads part of a layer's output through views, which the graph records as such."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(6, in_units=3)

    def forward(self, x):
        y = self.dense(x)
        window = y._reshape_view((y.size,))._slice_view(2, 8)
        return np.tanh(window).reshape(2, 3) * 2.0


def test_views_of_a_pymx_export_run_and_train(tmp_path):
    """The imported graph re-creates views with differentiable operations."""
    with pytest.warns(UserWarning, match="runs pymx operator '_view'"):
        net, block, (x,) = _exported(tmp_path, lambda: (_Views(), [(2, 3)]), cpu())
    for hybridize in (False, True):
        block.hybridize(hybridize)
        assert_almost_equal(block(x), net(x), rtol=0, atol=0)
    with autograd.record():  # the same computation through operations
        expected = np.tanh(net.dense(x).reshape(-1)[2:8]).reshape(2, 3) * 2.0
    expected.backward()
    with autograd.record():
        out = block(x)
    out.backward()
    for name, param in block.collect_params().items():
        assert_almost_equal(param.grad(), net.collect_params()[name].grad(), rtol=1e-6)


def test_shared_parameters(tmp_path):
    symbol, params, _ = _conv_net(legacy=False)
    symbol_file, param_file = _write(tmp_path, symbol, params)
    first = SymbolBlock.imports(symbol_file, ['data'], param_file)
    second = SymbolBlock(symbol, ['data'], params=first.collect_params())
    assert all(second.collect_params()[k] is p for k, p in first.collect_params().items())
    x = np.array(_rand(2, 2, 4, 4), dtype='float32')
    assert_almost_equal(second(x), first(x), rtol=0, atol=0)


class _WithState(gluon.HybridBlock):
    """A frozen layer and a captured (non-parameter) array."""

    def __init__(self):
        super().__init__()
        self.frozen = gluon.nn.Dense(3, in_units=2)
        self.trained = gluon.nn.Dense(3, in_units=3)
        self.offset = np.array([1.0, -2.0, 0.5])

    def forward(self, x):
        return self.trained(self.frozen(x) + self.offset)


def test_frozen_parameters_and_captured_constants(tmp_path):
    def make():
        net = _WithState()
        net.frozen.collect_params().setattr('grad_req', 'null')
        return net, [(4, 2)]

    net, block, (x,) = _exported(tmp_path, make, cpu())
    assert_almost_equal(block(x), net(x), rtol=0, atol=0)
    grad_reqs = {k: p.grad_req for k, p in block.collect_params().items()}
    assert grad_reqs == {'const0': 'null', 'frozen.weight': 'null', 'frozen.bias': 'null',
                         'trained.weight': 'write', 'trained.bias': 'write'}
    assert_almost_equal(block.collect_params()['const0'].data(), net.offset)


# ---- errors ----------------------------------------------------------------------------------

def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match='nowhere-symbol.json'):
        SymbolBlock.imports(str(tmp_path / 'nowhere-symbol.json'), ['data'])
    symbol, _, _ = _conv_net(legacy=False)
    symbol_file, _ = _write(tmp_path, symbol)
    with pytest.raises(FileNotFoundError, match='nowhere.params'):
        SymbolBlock.imports(symbol_file, ['data'], str(tmp_path / 'nowhere.params'))


@pytest.mark.parametrize('text, message', [
    ('{"nodes": [', 'is not valid JSON'),
    ('[1, 2]', "needs 'nodes' and 'heads'"),
    ('{"nodes": [{"op": "null", "name": "x", "inputs": []}], "heads": []}', 'has no outputs'),
    ('{"nodes": [{"op": "relu", "name": "r", "inputs": [[0, 0, 0]]}], "heads": [[0, 0, 0]]}',
     "node 0 \\('r'\\) refers to output 0 of node 0"),
    ('{"nodes": [{"op": "null", "name": "x"}], "heads": [["x", 0]]}', 'malformed entry'),
    ('{"nodes": [{"name": "x"}], "heads": [[0, 0]]}', "node 0 needs string 'op' and 'name'"),
])
def test_corrupt_symbol_file(tmp_path, text, message):
    path = tmp_path / 'bad-symbol.json'
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        SymbolBlock.imports(str(path), ['x'])
    assert 'bad-symbol.json' in str(info.value)


def test_unknown_operator_names_op_node_and_file(tmp_path):
    symbol = _mxnet_symbol([_var('x'), ('FancyOp', 'fancy0', {}, ['x'])], ['fancy0'])
    symbol_file, _ = _write(tmp_path, symbol)
    with pytest.raises(ValueError, match=r"Operator 'FancyOp' of node 'fancy0' in symbol file "
                                         r"'.*net-symbol.json' is not supported"):
        SymbolBlock.imports(symbol_file, ['x'])
    pymx_symbol = json.dumps({'nodes': [{'op': 'null', 'name': 'x', 'inputs': []},
                                        {'op': 'fancy_op', 'name': 'f', 'inputs': [[0, 0, 0]]}],
                              'heads': [[1, 0, 0]], 'attrs': {'trace_device': 'cpu(0)'}})
    with pytest.raises(ValueError, match="Operator 'fancy_op' of node 'f' .* not a pymx"):
        SymbolBlock(pymx_symbol, ['x'])


def test_unsupported_attribute_values_are_named(tmp_path):
    symbol = _mxnet_symbol([_var('x'), ('Activation', 'act', {'act_type': 'swish'}, ['x'])],
                           ['act'])
    with pytest.raises(ValueError, match="act_type='swish' of node 'act' \\(op Activation\\)"):
        SymbolBlock(symbol, ['x'])(np.ones((2,)))
    symbol = _mxnet_symbol([_var('x'), ('_plus_scalar', 'add', {'scalar': 'lots'}, ['x'])],
                           ['add'])
    with pytest.raises(ValueError, match="scalar='lots' of node 'add' .* is not a number"):
        SymbolBlock(symbol, ['x'])(np.ones((2,)))
    symbol = _mxnet_symbol([_var('x'), ('Reshape', 'r', {}, ['x'])], ['r'])
    with pytest.raises(ValueError, match="neither 'shape' nor 'target_shape'"):
        SymbolBlock(symbol, ['x'])(np.ones((2,)))
    symbol = _mxnet_symbol([_var('x'), ('Reshape', 'r', {'shape': '(-4, 5, -1, 0)'}, ['x'])],
                           ['r'])
    with pytest.raises(ValueError, match=r"cannot split input dimension 2 into \(5, -1\) "
                                         r"\(reshaping \(2, 3\), node 'r' \(op Reshape\)"):
        SymbolBlock(symbol, ['x'])(np.ones((2, 3)))


def test_wrong_input_names_and_counts(tmp_path):
    symbol, params, _ = _conv_net(legacy=False)
    symbol_file, param_file = _write(tmp_path, symbol, params)
    with pytest.raises(ValueError, match=r"input_names \['image'\] are not variables .* "
                                         r"whose variables are \['bn_beta'"):
        SymbolBlock.imports(symbol_file, ['image'], param_file)
    with pytest.raises(ValueError, match=r"repeat \['data'\]"):
        SymbolBlock.imports(symbol_file, ['data', 'data'], param_file)
    net = SymbolBlock.imports(symbol_file, ['data'], param_file)
    with pytest.raises(ValueError, match=r"expects 1 input arrays \['data'\], got 2"):
        net(np.ones((2, 2, 4, 4)), np.ones((2, 2, 4, 4)))


def test_missing_and_extra_parameters(tmp_path):
    symbol, params, _ = _conv_net(legacy=False)
    partial = {k: v for k, v in params.items() if k != 'fc_bias'}
    symbol_file, param_file = _write(tmp_path, symbol, partial)
    with pytest.raises(ValueError, match="Parameter 'fc_bias' is missing in 'file: .*net-0000"):
        SymbolBlock.imports(symbol_file, ['data'], param_file)
    net = SymbolBlock.imports(symbol_file, ['data'], param_file, allow_missing=True)
    with pytest.raises(ValueError, match="Parameter 'fc_bias' has not been initialized"):
        net(np.ones((2, 2, 4, 4)))
    symbol_file, param_file = _write(tmp_path, symbol, dict(params, extra=onp.ones(2)))
    with pytest.raises(ValueError, match="Parameter 'extra' loaded from 'file: .*is not present"):
        SymbolBlock.imports(symbol_file, ['data'], param_file)
    net = SymbolBlock.imports(symbol_file, ['data'], param_file, ignore_extra=True)
    assert net(np.ones((2, 2, 4, 4))).shape == (2, 3)


def test_uninferable_parameter_shape_is_named():
    symbol = _mxnet_symbol([_var('x'), _var('offset'), ('broadcast_add', 'add', {},
                                                        ['x', 'offset'])], ['add'])
    net = SymbolBlock(symbol, ['x'])
    net.initialize()
    with pytest.raises(ValueError, match="shape of parameter 'offset' \\(input 1 of node 'add', "
                                         "op broadcast_add\\) is not in the symbol file"):
        net(np.ones((2, 3)))


def test_device_and_ctx_are_exclusive(tmp_path):
    symbol_file, _ = _write(tmp_path, _conv_net(legacy=False)[0])
    with pytest.raises(ValueError, match='either device or its alias ctx'):
        SymbolBlock.imports(symbol_file, ['data'], device=cpu(), ctx=cpu())


# ---- GPU -------------------------------------------------------------------------------------

@requires_gpu
def test_gpu_matches_cpu(tmp_path):
    """The same MXNet file on both devices: equal outputs and gradients."""
    symbol, params, _ = _conv_net(legacy=False)
    symbol_file, param_file = _write(tmp_path, symbol, params,
                                     aux=('bn_running_mean', 'bn_running_var'))
    x = _rand(2, 2, 4, 4).astype(onp.float32)
    results = []
    for device in (cpu(0), gpu(0)):
        net = SymbolBlock.imports(symbol_file, ['data'], param_file, device=device)
        net.hybridize()
        with autograd.record():
            out = net(np.array(x, device=device))
        (out * out).sum().backward()
        results.append([out.asnumpy()] + [p.grad().asnumpy() for p in
                                          net.collect_params().values() if p.grad_req != 'null'])
    for on_gpu, on_cpu in zip(results[1], results[0]):
        assert_almost_equal(on_gpu, on_cpu, rtol=1e-4, atol=1e-5)
    npx.waitall()


# ---- resampling, padding and lengths: gradients, errors, GPU ----------------------------------

def _single_op_block(op, attrs, num_inputs=1):
    names = [f'd{i}' for i in range(num_inputs)]
    return SymbolBlock(_mxnet_symbol([_var(n) for n in names] + [(op, 'node', attrs, names)],
                                     ['node']), names)


@pytest.mark.parametrize('op, attrs, shape', [
    ('_contrib_BilinearResize2D', {'height': '4', 'width': '3', 'align_corners': 'False'},
     (1, 2, 3, 2)),
    ('_contrib_AdaptiveAvgPooling2D', {'output_size': '(2, 2)'}, (1, 1, 3, 5)),
    ('UpSampling', {'scale': '2', 'sample_type': 'nearest', 'num_args': '1'}, (1, 2, 2, 2)),
    ('Pad', {'mode': 'reflect', 'pad_width': '(0, 0, 0, 0, 1, 2, 2, 1)'}, (1, 1, 3, 3)),
    ('Pad', {'mode': 'edge', 'pad_width': '(0, 0, 0, 0, 1, 0, 0, 2)'}, (1, 1, 2, 3)),
], ids=lambda v: v if isinstance(v, str) else None)
def test_resampling_and_padding_gradients(device, op, attrs, shape):
    block = _single_op_block(op, attrs)
    check_numeric_gradient(block, [_rand(*shape)], device=device)


def test_softmax_use_length_gradient(device):
    block = _single_op_block('softmax', {'use_length': 'True'}, num_inputs=2)
    lengths = np.array([2, 4], dtype='int32', device=device)
    check_numeric_gradient(lambda x: block(x, lengths), [_rand(2, 4)], device=device)


def test_nd_dot_gradient(device):
    block = _single_op_block('dot', {'transpose_a': 'True'}, num_inputs=2)
    check_numeric_gradient(block, [_rand(3, 2), _rand(3, 2, 2)], device=device)


@pytest.mark.parametrize('op, attrs, shapes, message', [
    ('UpSampling', {'scale': '(2, 3)', 'sample_type': 'bilinear', 'num_filter': '1'},
     [(1, 1, 2, 2), (1, 1, 4, 4)], r"sample_type=bilinear .* needs one scale for both axes and "
                                   r"2 inputs \(data, weight\), got scale \(2, 3\)"),
    ('UpSampling', {'scale': '2', 'sample_type': 'nearest', 'num_args': '2'},
     [(1, 1, 2, 2), (1, 1, 3, 3)], r"cannot scale an input of shape \(1, 1, 3, 3\) to the "
                                   r"output size \(4, 4\)"),
    ('UpSampling', {'scale': '(1, 2, 3)', 'sample_type': 'nearest'}, [(1, 1, 2, 2)],
     r"scale=\(1, 2, 3\) of node 'node' .* needs 1, 2 or 4 values"),
    ('Pad', {'mode': 'reflect', 'pad_width': '(0, 0, 0, 0, 3, 0, 0, 0)'}, [(1, 1, 3, 3)],
     r"reflect padding \(3, 0\) of axis 2 of node 'node' .* must be smaller than its size 3"),
    ('Pad', {'mode': 'wrap', 'pad_width': '(0, 0, 1, 1)'}, [(2, 2)],
     r"pad mode='wrap' of node 'node' .* is not constant, edge or reflect"),
    ('Pad', {'pad_width': '(0, 0, 1, 1)'}, [(2, 2, 2)],
     r"pad_width=\(0, 0, 1, 1\) of node 'node' .* needs 2 values per axis of the 3-D data"),
    ('_npi_pad', {'pad_width': '(1, 2'}, [(2, 2)],
     r"pad_width='\(1, 2' of node 'node' .* is not a tuple of \(before, after\) pairs"),
    ('_contrib_BilinearResize2D', {'height': '2', 'width': '2'}, [(2, 3, 4)],
     r"BilinearResize2D of node 'node' .* needs 4-D NCHW data, got shape \(2, 3, 4\)"),
    ('_contrib_BilinearResize2D', {'mode': 'stretch'}, [(1, 1, 2, 2)],
     r"mode='stretch' of node 'node' .* is not one of size"),
    ('_contrib_BilinearResize2D', {'scale_height': '2'}, [(1, 1, 2, 2)],
     r"needs both scale_height and scale_width or neither, got 2.0 and None"),
    ('_contrib_BilinearResize2D', {'height': '0', 'width': '2'}, [(1, 1, 2, 2)],
     r"the output size \(0, 2\) of data \(1, 1, 2, 2\) must be positive"),
    ('_contrib_AdaptiveAvgPooling2D', {'output_size': '(1, 2, 3)'}, [(1, 1, 4, 4)],
     r"output_size=\(1, 2, 3\) of node 'node' .* needs 1 or 2 values"),
    ('softmax', {'use_length': 'True'}, [(2, 3)],
     r"use_length=True of node 'node' .* needs 2 inputs \(data, length\), got 1"),
    ('dot', {}, [(2, 3), (2, 3)],
     r"dot of node 'node' .* contracts axis 1 of shape \(2, 3\) with axis 0 of shape \(2, 3\)"),
    ('norm', {'ord': '3'}, [(2, 3)], r"norm ord=3 of node 'node' .* is not 1 or 2"),
    ('_arange', {'start': '0', 'infer_range': 'True'}, [],
     r"_arange infer_range=True of node 'node' .* is not supported"),
    ('depth_to_space', {'block_size': '2'}, [(1, 6, 2, 2)],
     r"6 channels do not divide by block_size 2 squared"),
    ('space_to_depth', {'block_size': '2'}, [(1, 1, 3, 4)],
     r"height 3 and width 4 must divide by block_size 2"),
])
def test_bad_operator_arguments_are_named(op, attrs, shapes, message):
    block = _single_op_block(op, attrs, num_inputs=len(shapes))
    with pytest.raises(ValueError, match=message):
        block(*[np.array(_rand(*s)) for s in shapes])


@requires_gpu
def test_gpu_resampling_matches_cpu():
    """Bilinear resize, adaptive pooling, bilinear UpSampling and padding: equal outputs and
    data gradients on both devices."""
    cases = [('_contrib_BilinearResize2D', {'height': '5', 'width': '7'}, [(2, 3, 4, 4)]),
             ('_contrib_AdaptiveAvgPooling2D', {'output_size': '3'}, [(2, 3, 7, 5)]),
             ('UpSampling', {'scale': '2', 'sample_type': 'bilinear', 'num_filter': '3',
                             'num_args': '2'}, [(2, 3, 4, 4), (3, 1, 4, 4)]),
             ('Pad', {'mode': 'reflect', 'pad_width': '(0, 0, 0, 0, 2, 1, 1, 2)'},
              [(2, 3, 4, 4)]),
             ('softmax', {'use_length': 'True'}, [(3, 5), onp.array([1, 5, 3])])]
    for op, attrs, shapes in cases:
        inputs = [s.astype(onp.float32) if isinstance(s, onp.ndarray) else
                  _rand(*s).astype(onp.float32) for s in shapes]
        results = []
        for device in (cpu(0), gpu(0)):
            block = _single_op_block(op, attrs, num_inputs=len(inputs))
            arrays = [np.array(a, device=device) for a in inputs]
            arrays[0].attach_grad()
            with autograd.record():
                out = block(*arrays)
            (out * out).sum().backward()
            results.append((out.asnumpy(), arrays[0].grad.asnumpy()))
        for on_gpu, on_cpu in zip(results[1], results[0]):
            assert_almost_equal(on_gpu, on_cpu, rtol=1e-4, atol=1e-5)
