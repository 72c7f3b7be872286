"""ONNX translations of MXNet's layer operators: convolutions, dense, normalisations, pooling,
activations, softmax, dropout, flatten, embedding."""
import math

import numpy as _onp

from ._converter import translates, attr_ints, attr_int, attr_float, attr_bool

_SPATIAL_LAYOUTS = ('NCW', 'NCHW', 'NCDHW')


def _check_layout(node, kernel):
    layout = node.attrs.get('layout', 'None')
    if layout not in ('None', '') and layout not in _SPATIAL_LAYOUTS:
        raise NotImplementedError(f"export_model: node '{node.name}' ({node.op}) has layout "
                                  f"{layout}; ONNX convolutions and pooling take channels first "
                                  f"({', '.join(_SPATIAL_LAYOUTS)})")
    if not 1 <= len(kernel) <= 3:
        raise ValueError(f"export_model: node '{node.name}' ({node.op}) has kernel {kernel}; "
                         f"1 to 3 spatial dimensions are supported")


def _window_attrs(attrs, kernel):
    ones, zeros = (1,) * len(kernel), (0,) * len(kernel)
    pad = attr_ints(attrs, 'pad', zeros) or zeros
    return dict(kernel_shape=list(kernel), strides=list(attr_ints(attrs, 'stride', ones) or ones),
                pads=list(pad) * 2)


@translates('Convolution')
def _convolution(cv, node, inputs):
    kernel = attr_ints(node.attrs, 'kernel')
    _check_layout(node, kernel)
    window = _window_attrs(node.attrs, kernel)
    dilate = attr_ints(node.attrs, 'dilate', (1,) * len(kernel)) or (1,) * len(kernel)
    has_bias = not attr_bool(node.attrs, 'no_bias')
    return [cv.add('Conv', inputs[:3 if has_bias else 2], node.name, dilations=list(dilate),
                   group=attr_int(node.attrs, 'num_group', 1), **window)]


@translates('Deconvolution')
def _deconvolution(cv, node, inputs):
    kernel = attr_ints(node.attrs, 'kernel')
    _check_layout(node, kernel)
    window = _window_attrs(node.attrs, kernel)
    dilate = attr_ints(node.attrs, 'dilate', (1,) * len(kernel)) or (1,) * len(kernel)
    extra = {}
    adj = attr_ints(node.attrs, 'adj')
    if adj:
        extra['output_padding'] = list(adj)
    target = attr_ints(node.attrs, 'target_shape')
    if target and any(target):
        # MXNet then derives the padding from the requested output size, as ONNX does.
        extra['output_shape'] = list(target)
        del window['pads']
    has_bias = not attr_bool(node.attrs, 'no_bias', True)
    return [cv.add('ConvTranspose', inputs[:3 if has_bias else 2], node.name,
                   dilations=list(dilate), group=attr_int(node.attrs, 'num_group', 1),
                   **window, **extra)]


@translates('FullyConnected')
def _fully_connected(cv, node, inputs):
    has_bias = not attr_bool(node.attrs, 'no_bias')
    if attr_bool(node.attrs, 'flatten', True):
        flat = cv.add('Flatten', [inputs[0]], f'{node.name}_flat', axis=1)
        return [cv.add('Gemm', [flat] + inputs[1:3 if has_bias else 2], node.name,
                       transB=1)]
    # flatten=False applies the layer to the last axis of an input of any rank.
    weight_t = cv.add('Transpose', [inputs[1]], f'{node.name}_weight_t', perm=[1, 0])
    if not has_bias:
        return [cv.add('MatMul', [inputs[0], weight_t], node.name)]
    product = cv.add('MatMul', [inputs[0], weight_t], f'{node.name}_matmul')
    return [cv.add('Add', [product, inputs[2]], node.name)]


def _axis_to_channels(cv, data, axis, hint):
    """`data` with `axis` moved to position 1 and the permutation that moves it back (None
    when axis is already 1)."""
    rank = cv.rank(data)
    axis %= rank
    if axis == 1:
        return data, None
    perm = [0, axis] + [d for d in range(1, rank) if d != axis]
    inverse = [perm.index(d) for d in range(rank)]
    return cv.add('Transpose', [data], f'{hint}_to_nc', perm=perm), inverse


@translates('BatchNorm')
def _batch_norm(cv, node, inputs):
    data, gamma, beta, mean, var = inputs
    if attr_bool(node.attrs, 'fix_gamma', True):
        # fix_gamma: MXNet uses a scale of 1 whatever the stored gamma holds.
        gamma = cv.const(_onp.ones(cv.shape(gamma)), cv.dtype(gamma), f'{node.name}_fixed_gamma')
    eps = attr_float(node.attrs, 'eps', 1e-3)
    moved, inverse = _axis_to_channels(cv, data, attr_int(node.attrs, 'axis', 1), node.name)
    if inverse is None:
        return [cv.add('BatchNormalization', [data, gamma, beta, mean, var], node.name,
                       epsilon=eps)]
    normed = cv.add('BatchNormalization', [moved, gamma, beta, mean, var],
                    f'{node.name}_nc', epsilon=eps)
    return [cv.add('Transpose', [normed], node.name, perm=inverse)]


@translates('InstanceNorm')
def _instance_norm(cv, node, inputs):
    return [cv.add('InstanceNormalization', inputs[:3], node.name,
                   epsilon=attr_float(node.attrs, 'eps', 1e-3))]


@translates('LayerNorm')
def _layer_norm(cv, node, inputs):
    data, gamma, beta = inputs
    eps = attr_float(node.attrs, 'eps', 1e-5)
    rank = cv.rank(data)
    axis = attr_int(node.attrs, 'axis', -1) % rank
    if axis == rank - 1 and cv.opset >= 17:
        return [cv.add('LayerNormalization', [data, gamma, beta], node.name, axis=-1,
                       epsilon=eps)]
    # MXNet normalises over the one axis `axis`; ONNX's LayerNormalization over all axes from
    # `axis` on, so other axes (and opsets before 17) take the arithmetic.
    hint = node.name
    mean = cv.reduce('ReduceMean', data, [axis], True, f'{hint}_mean')
    centred = cv.add('Sub', [data, mean], f'{hint}_centred')
    var = cv.reduce('ReduceMean', cv.add('Mul', [centred, centred], f'{hint}_sq'), [axis],
                    True, f'{hint}_var')
    std = cv.add('Sqrt', [cv.add('Add', [var, cv.const_like(eps, data, f'{hint}_eps')],
                                 f'{hint}_var_eps')], f'{hint}_std')
    normed = cv.add('Div', [centred, std], f'{hint}_normed')
    trailing = [1] * (rank - 1 - axis)
    if trailing:
        gamma = cv.reshape(gamma, [-1] + trailing, f'{hint}_gamma_b')
        beta = cv.reshape(beta, [-1] + trailing, f'{hint}_beta_b')
    return [cv.add('Add', [cv.add('Mul', [normed, gamma], f'{hint}_scaled'), beta], hint)]


@translates('Embedding')
def _embedding(cv, node, inputs):
    indices = cv.add('Cast', [inputs[0]], f'{node.name}_indices', to=cv.onnx.TensorProto.INT64)
    return [cv.add('Gather', [inputs[1], indices], node.name, axis=0)]


@translates('Pooling')
def _pooling(cv, node, inputs):
    attrs, data = node.attrs, inputs[0]
    pool_type = attrs.get('pool_type', 'max')
    if pool_type not in ('max', 'avg', 'sum', 'lp'):
        raise ValueError(f"export_model: node '{node.name}' has pool_type {pool_type!r}; "
                         f"expected max, avg, sum or lp")
    p_value = attr_int(attrs, 'p_value', 2)
    if attr_bool(attrs, 'global_pool'):
        if pool_type == 'sum':
            spatial = list(range(2, cv.rank(data)))
            return [cv.reduce('ReduceSum', data, spatial, True, node.name)]
        op = {'max': 'GlobalMaxPool', 'avg': 'GlobalAveragePool', 'lp': 'GlobalLpPool'}[pool_type]
        return [cv.add(op, [data], node.name, **({'p': p_value} if pool_type == 'lp' else {}))]
    kernel = attr_ints(attrs, 'kernel')
    _check_layout(node, kernel)
    window = _window_attrs(attrs, kernel)
    convention = attrs.get('pooling_convention', 'valid')
    if convention not in ('valid', 'full', 'None'):
        raise NotImplementedError(f"export_model: node '{node.name}' has pooling_convention "
                                  f"{convention!r}; ONNX pooling has 'valid' and 'full' "
                                  f"(ceil_mode)")
    window['ceil_mode'] = int(convention == 'full')
    if pool_type == 'max':
        return [cv.add('MaxPool', [data], node.name, **window)]
    if pool_type == 'lp':
        return [cv.add('LpPool', [data], node.name, p=p_value, **window)]
    include_pad = attr_bool(attrs, 'count_include_pad', True) or pool_type == 'sum'
    avg = cv.add('AveragePool', [data], node.name if pool_type == 'avg' else f'{node.name}_avg',
                 count_include_pad=int(include_pad), **window)
    if pool_type == 'avg':
        return [avg]
    area = cv.const_like(float(_onp.prod(kernel)), data, f'{node.name}_area')
    return [cv.add('Mul', [avg, area], node.name)]


def _gelu_erf(cv, data, hint):
    """0.5 x (1 + erf(x / sqrt 2)), MXNet's gelu."""
    scaled = cv.add('Mul', [data, cv.const_like(1 / math.sqrt(2), data, f'{hint}_rsqrt2')],
                    f'{hint}_scaled')
    erf = cv.add('Erf', [scaled], f'{hint}_erf')
    one_plus = cv.add('Add', [erf, cv.const_like(1.0, data, f'{hint}_one')], f'{hint}_1p')
    half_x = cv.add('Mul', [data, cv.const_like(0.5, data, f'{hint}_half')], f'{hint}_half_x')
    return cv.add('Mul', [half_x, one_plus], hint)


def _log_sigmoid(cv, data, hint):
    """log(sigmoid(x)) = -softplus(-x), without the underflow of log(sigmoid(x))."""
    negated = cv.add('Neg', [data], f'{hint}_neg')
    return cv.add('Neg', [cv.add('Softplus', [negated], f'{hint}_softplus')], hint)


_SIMPLE_ACTIVATIONS = {'relu': 'Relu', 'sigmoid': 'Sigmoid', 'tanh': 'Tanh',
                       'softrelu': 'Softplus', 'softsign': 'Softsign'}


@translates('Activation')
def _activation(cv, node, inputs):
    act_type = node.attrs.get('act_type')
    if act_type in _SIMPLE_ACTIVATIONS:
        return [cv.add(_SIMPLE_ACTIVATIONS[act_type], inputs[:1], node.name)]
    if act_type == 'log_sigmoid':
        return [_log_sigmoid(cv, inputs[0], node.name)]
    if act_type == 'mish':
        softplus = cv.add('Softplus', inputs[:1], f'{node.name}_softplus')
        tanh = cv.add('Tanh', [softplus], f'{node.name}_tanh')
        return [cv.add('Mul', [inputs[0], tanh], node.name)]
    raise ValueError(f"export_model: node '{node.name}' has act_type {act_type!r}; expected "
                     f"one of {', '.join(sorted(_SIMPLE_ACTIVATIONS))}, log_sigmoid, mish")


# MXNet's selu constants (src/operator/leaky_relu-inl.h).
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_LAMBDA = 1.0507009873554804934193349852946


@translates('LeakyReLU')
def _leaky_relu(cv, node, inputs):
    act_type = node.attrs.get('act_type', 'leaky')
    slope = attr_float(node.attrs, 'slope', 0.25)
    data = inputs[0]
    if act_type == 'leaky':
        return [cv.add('LeakyRelu', [data], node.name, alpha=slope)]
    if act_type == 'rrelu':
        # At inference MXNet's rrelu uses the mean of its slope range.
        lower = attr_float(node.attrs, 'lower_bound', 0.125)
        upper = attr_float(node.attrs, 'upper_bound', 0.334)
        return [cv.add('LeakyRelu', [data], node.name, alpha=(lower + upper) / 2)]
    if act_type == 'elu':
        return [cv.add('Elu', [data], node.name, alpha=slope)]
    if act_type == 'selu':
        return [cv.add('Selu', [data], node.name, alpha=_SELU_ALPHA, gamma=_SELU_LAMBDA)]
    if act_type == 'gelu':
        return [_gelu_erf(cv, data, node.name)]
    if act_type == 'prelu':
        # MXNet's gamma holds one slope per channel (axis 1); ONNX broadcasts from the right.
        gamma, rank = inputs[1], cv.rank(data)
        if _onp.prod(cv.shape(gamma)) > 1 and rank > 2:
            gamma = cv.reshape(gamma, [-1] + [1] * (rank - 2), f'{node.name}_gamma_c')
        return [cv.add('PRelu', [data, gamma], node.name)]
    raise ValueError(f"export_model: node '{node.name}' has act_type {act_type!r}; expected "
                     f"leaky, prelu, rrelu, elu, selu or gelu")


def _softmax(cv, node, inputs, onnx_op):
    if attr_bool(node.attrs, 'use_length'):
        raise NotImplementedError(f"export_model: node '{node.name}' ({node.op}) has "
                                  f"use_length=True, which has no ONNX translation")
    data = inputs[0]
    temperature = attr_float(node.attrs, 'temperature')
    if temperature is not None and temperature != 1.0:
        data = cv.add('Div', [data, cv.const_like(temperature, data, f'{node.name}_t')],
                      f'{node.name}_tempered')
    dtype = node.attrs.get('dtype', 'None')
    out = cv.add(onnx_op, [data], node.name if dtype in ('None', '') else f'{node.name}_raw',
                 axis=attr_int(node.attrs, 'axis', -1))
    if dtype in ('None', ''):
        return [out]
    return [cv.add('Cast', [out], node.name,
                   to=cv.onnx.helper.np_dtype_to_tensor_dtype(_onp.dtype(dtype)))]


@translates('softmax')
def _softmax_op(cv, node, inputs):
    return _softmax(cv, node, inputs, 'Softmax')


@translates('log_softmax')
def _log_softmax(cv, node, inputs):
    return _softmax(cv, node, inputs, 'LogSoftmax')


@translates('Dropout', 'BlockGrad', 'stop_gradient', 'identity', '_copy', '_np_copy')
def _identity(cv, node, inputs):
    # Dropout is the identity at inference, which is what an exported model runs.
    return [cv.add('Identity', inputs[:1], node.name)]


@translates('Flatten', 'flatten')
def _flatten(cv, node, inputs):
    return [cv.add('Flatten', inputs[:1], node.name, axis=1)]

