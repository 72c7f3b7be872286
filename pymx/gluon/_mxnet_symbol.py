"""MXNet's operators, as its symbol files name them, run with pymx's np / npx operations.

`OPS[name](inputs, attrs)` runs one node: `inputs` are pymx ndarrays in the node's input order,
`attrs` an `Attrs` over the node's attribute strings; it returns the node's outputs (a list).
The table covers the operators MXNet's model zoo and common Gluon models export, under their
MXNet 1.x names, their old aliases (`_Plus`, `_PlusScalar`, ...) and the `_npi_` / `_np_` /
`_npx_` names MXNet 2.x's numpy mode uses. Attribute defaults are MXNet's. The fused RNN
operator runs in _mxnet_rnn, the resampling operators (UpSampling, BilinearResize2D,
AdaptiveAvgPooling2D) in _mxnet_resize.

`AUX_INPUTS[name]` lists the inputs an operator updates as state (BatchNorm's running mean and
variance): their variables become parameters with grad_req 'null'. `LABEL_INPUTS[name]` lists
the label inputs of MXNet's training heads (SoftmaxOutput, ...): a forward pass never reads
them, so they become neither inputs nor parameters.

Deliberate differences from MXNet:
- the training heads (SoftmaxOutput, LinearRegressionOutput, LogisticRegressionOutput,
  MAERegressionOutput) compute their forward output only; their gradient is that output's own
  gradient, not MXNet's built-in `output - label` loss gradient;
- LeakyReLU act_type='rrelu' uses the mean slope (lower_bound + upper_bound) / 2 in training
  too (MXNet samples a slope per element while training);
- elemwise_* ops broadcast like their broadcast_* twins instead of requiring equal shapes;
- GroupNorm's gamma and beta of MXNet 1.x (one value per group) are repeated over each group's
  channels (MXNet 2.x has one per channel, as pymx);
- legacy comparison and logical operators (_greater, broadcast_equal, ...) return the inputs'
  dtype, as MXNet 1.x; the `_npi_` ones return booleans, as MXNet 2.x;
- RNN's dropout `p` between layers is pymx's dropout (MXNet's CPU and cuDNN kernels draw their
  own masks); `_contrib_BilinearResize2D` with scale_height but no scale_width is an error
  (MXNet reads an unset scale_width);
- `_arange` with infer_range=True is not supported (an error naming the node).
"""
import ast

import numpy as _onp

from .. import numpy as np
from .. import numpy_extension as npx
from ._mxnet_resize import adaptive_avg_pool, bilinear_resize, upsample_bilinear, \
    upsample_nearest
from ._mxnet_rnn import fused_rnn
from .rnn.rnn_layer import GATES as _RNN_MODES

__all__ = ['OPS', 'AUX_INPUTS', 'LABEL_INPUTS', 'Attrs']

OPS = {}
AUX_INPUTS = {}
LABEL_INPUTS = {}
_REQUIRED = object()


class Attrs:
    """A node's attribute strings, read with MXNet's syntax ("(3, 3)", "True", "None", "relu");
    errors name the node, its op and the file."""

    def __init__(self, strings, node_name, op, filename):
        self.strings = strings
        self.where = f"node '{node_name}' (op {op}) of symbol file '{filename}'"

    def _raw(self, key, default):
        if key not in self.strings:
            if default is _REQUIRED:
                raise ValueError(f"Attribute '{key}' is required by {self.where}")
            return None, default
        return self.strings[key].strip(), None

    def _fail(self, key, text, kind):
        raise ValueError(f"Attribute {key}={text!r} of {self.where} is not {kind}")

    def str(self, key, default=_REQUIRED):
        text, value = self._raw(key, default)
        return value if text is None else (None if text == 'None' else text)

    def bool(self, key, default=_REQUIRED):
        text, value = self._raw(key, default)
        if text is None:
            return value
        lowered = text.lower()
        if lowered in ('true', '1'):
            return True
        if lowered in ('false', '0'):
            return False
        return self._fail(key, text, 'a boolean')

    def float(self, key, default=_REQUIRED):
        text, value = self._raw(key, default)
        if text is None:
            return value
        if text == 'None':
            return None
        try:
            return float(text)
        except ValueError:
            return self._fail(key, text, 'a number')

    def int(self, key, default=_REQUIRED):
        value = self.float(key, default)
        if value is None or isinstance(value, int):
            return value
        if not float(value).is_integer():
            self._fail(key, self.strings[key], 'an integer')
        return int(value)

    def tuple(self, key, default=_REQUIRED, allow_none=False):
        """A tuple of ints ("(3, 3)", "[3, 3]", "3"); with allow_none, items may be None
        (slice bounds). "None" gives None."""
        text, value = self._raw(key, default)
        if text is None:
            return value
        if text == 'None':
            return None
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return self._fail(key, text, 'a tuple of integers')
        items = parsed if isinstance(parsed, (tuple, list)) else (parsed,)
        if not all((item is None and allow_none) or
                   (isinstance(item, (int, float)) and not isinstance(item, bool) and
                    float(item).is_integer()) for item in items):
            return self._fail(key, text, 'a tuple of integers')
        return tuple(None if item is None else int(item) for item in items)


def _op(*names, aux=None, labels=None):
    def register(fn):
        for name in names:
            OPS[name] = fn
            if aux:
                AUX_INPUTS[name] = aux
            if labels:
                LABEL_INPUTS[name] = labels
        return fn
    return register


def _spatial(attrs, key):
    """A spatial attribute (stride, pad, ...); an empty tuple means the operator's default."""
    value = attrs.tuple(key, None)
    return value if value else None


# ---- layers -----------------------------------------------------------------------------------

def _weights(op, inputs, attrs, no_bias_default):
    no_bias = attrs.bool('no_bias', no_bias_default)
    expected = 2 if no_bias else 3
    if len(inputs) != expected:
        raise ValueError(f"{op} with no_bias={no_bias} needs {expected} inputs, {attrs.where} "
                         f"has {len(inputs)}")
    return inputs[0], inputs[1], (None if no_bias else inputs[2]), no_bias


def _cudnn(attrs):
    # Hints for cuDNN's algorithm choice; MXNet writes 'None' when they were not given.
    return dict(cudnn_off=attrs.bool('cudnn_off', None), cudnn_tune=attrs.str('cudnn_tune', None))


@_op('Convolution', '_npx_convolution')
def _convolution(inputs, attrs):
    data, weight, bias, no_bias = _weights('Convolution', inputs, attrs, False)
    return [npx.convolution(data, weight, bias, kernel=attrs.tuple('kernel'),
                            stride=_spatial(attrs, 'stride'), dilate=_spatial(attrs, 'dilate'),
                            pad=_spatial(attrs, 'pad'), num_filter=attrs.int('num_filter'),
                            num_group=attrs.int('num_group', 1), no_bias=no_bias,
                            layout=attrs.str('layout', None), **_cudnn(attrs))]


@_op('Deconvolution', '_npx_deconvolution')
def _deconvolution(inputs, attrs):
    data, weight, bias, no_bias = _weights('Deconvolution', inputs, attrs, True)
    return [npx.deconvolution(data, weight, bias, kernel=attrs.tuple('kernel'),
                              stride=_spatial(attrs, 'stride'), dilate=_spatial(attrs, 'dilate'),
                              pad=_spatial(attrs, 'pad'), adj=_spatial(attrs, 'adj'),
                              target_shape=_spatial(attrs, 'target_shape'),
                              num_filter=attrs.int('num_filter'),
                              num_group=attrs.int('num_group', 1), no_bias=no_bias,
                              layout=attrs.str('layout', None))]


@_op('FullyConnected', '_npx_fully_connected')
def _fully_connected(inputs, attrs):
    data, weight, bias, no_bias = _weights('FullyConnected', inputs, attrs, False)
    return [npx.fully_connected(data, weight, bias, num_hidden=attrs.int('num_hidden'),
                                no_bias=no_bias, flatten=attrs.bool('flatten', True))]


@_op('BatchNorm', '_npx_batch_norm', 'BatchNorm_v1', '_contrib_SyncBatchNorm', aux=(3, 4))
def _batch_norm(inputs, attrs):
    return npx.batch_norm(*inputs, eps=attrs.float('eps', 1e-3),
                          momentum=attrs.float('momentum', 0.9),
                          fix_gamma=attrs.bool('fix_gamma', True),
                          use_global_stats=attrs.bool('use_global_stats', False),
                          output_mean_var=True, axis=attrs.int('axis', 1),
                          cudnn_off=bool(attrs.bool('cudnn_off', False)))


@_op('LayerNorm', '_npx_layer_norm')
def _layer_norm(inputs, attrs):
    return npx.layer_norm(*inputs, axis=attrs.int('axis', -1), eps=attrs.float('eps', 1e-5),
                          output_mean_var=True)


@_op('Embedding', '_npx_embedding')
def _embedding(inputs, attrs):
    data, weight = inputs
    return [npx.embedding(data, weight, input_dim=attrs.int('input_dim', None),
                          output_dim=attrs.int('output_dim', None),
                          dtype=attrs.str('dtype', 'float32'))]


@_op('Pooling', '_npx_pooling', 'Pooling_v1')
def _pooling(inputs, attrs):
    global_pool = attrs.bool('global_pool', False)
    kernel = attrs.tuple('kernel', None)
    return [npx.pooling(inputs[0], kernel=kernel if kernel else None,
                        stride=_spatial(attrs, 'stride'), pad=_spatial(attrs, 'pad'),
                        pool_type=attrs.str('pool_type', 'max'),
                        pooling_convention=attrs.str('pooling_convention', 'valid'),
                        global_pool=global_pool, cudnn_off=attrs.bool('cudnn_off', None),
                        p_value=attrs.int('p_value', None),
                        count_include_pad=attrs.bool('count_include_pad', None),
                        layout=attrs.str('layout', None))]


@_op('Dropout', '_npx_dropout')
def _dropout(inputs, attrs):
    axes = attrs.tuple('axes', None)
    return [npx.dropout(inputs[0], p=attrs.float('p', 0.5), mode=attrs.str('mode', 'training'),
                        axes=axes if axes else None)]


@_op('Flatten', 'flatten', '_npx_batch_flatten')
def _flatten(inputs, attrs):
    return [npx.batch_flatten(inputs[0])]


@_op('RNN', '_npx_rnn')
def _rnn(inputs, attrs):
    """Inputs: data (T, N, C), the flat parameter vector, state, state_cell (LSTM), then
    sequence_length with use_sequence_length. Outputs: out, then with state_outputs the final
    state and (LSTM) state_cell."""
    mode = attrs.str('mode')
    if mode not in _RNN_MODES:
        raise ValueError(f"RNN mode={mode!r} of {attrs.where} is not one of "
                         f"{', '.join(_RNN_MODES)}")
    use_sequence_length = attrs.bool('use_sequence_length', False)
    num_states = 2 if mode == 'lstm' else 1
    expected = 2 + num_states + use_sequence_length
    if len(inputs) != expected:
        raise ValueError(f"RNN mode={mode} with use_sequence_length={use_sequence_length} needs "
                         f"{expected} inputs, {attrs.where} has {len(inputs)}")
    projection_size = attrs.int('projection_size', None)
    if projection_size is not None and mode != 'lstm':
        raise ValueError(f"RNN projection_size={projection_size} of {attrs.where} needs mode "
                         f"lstm, not {mode}")
    clip_min = attrs.float('lstm_state_clip_min', None)
    clip_max = attrs.float('lstm_state_clip_max', None)
    if (clip_min is None) != (clip_max is None):
        raise ValueError(f"RNN lstm_state_clip_min={clip_min} and lstm_state_clip_max={clip_max} "
                         f"of {attrs.where} must be given together")
    clip = None if clip_min is None or mode != 'lstm' else \
        (clip_min, clip_max, attrs.bool('lstm_state_clip_nan', False))
    out, states = fused_rnn(inputs[0], inputs[1], inputs[2:2 + num_states],
                            inputs[-1] if use_sequence_length else None, mode=mode,
                            state_size=attrs.int('state_size'),
                            num_layers=attrs.int('num_layers'),
                            bidirectional=attrs.bool('bidirectional', False),
                            projection_size=projection_size, dropout=attrs.float('p', 0.0),
                            clip=clip, where=attrs.where)
    return [out] + states if attrs.bool('state_outputs', False) else [out]


# MXNet 1.x's layers concatenate their reshaped weights into the flat vector in the graph.
_op('_rnn_param_concat', '_npi_rnn_param_concat')(
    lambda inputs, attrs: [np.concatenate(inputs, axis=attrs.int('dim', 1))])


# ---- activations ------------------------------------------------------------------------------

_ACTIVATIONS = ('relu', 'sigmoid', 'tanh', 'softrelu', 'softsign', 'log_sigmoid', 'mish')


@_op('Activation', '_npx_activation')
def _activation(inputs, attrs):
    act_type = attrs.str('act_type')
    if act_type not in _ACTIVATIONS:
        raise ValueError(f"Activation act_type={act_type!r} of {attrs.where} is not supported; "
                         f"supported: {', '.join(_ACTIVATIONS)}")
    return [npx.activation(inputs[0], act_type=act_type)]


@_op('LeakyReLU', '_npx_leaky_relu')
def _leaky_relu(inputs, attrs):
    act_type = attrs.str('act_type', 'leaky')
    slope = attrs.float('slope', 0.25)
    if act_type == 'rrelu':
        slope = (attrs.float('lower_bound', 0.125) + attrs.float('upper_bound', 0.334)) / 2
        act_type = 'leaky'
    if act_type not in ('leaky', 'elu', 'selu', 'gelu', 'gelu_erf', 'gelu_tanh', 'prelu'):
        raise ValueError(f"LeakyReLU act_type={act_type!r} of {attrs.where} is not supported; "
                         f"supported: leaky, elu, selu, gelu, gelu_erf, gelu_tanh, prelu, rrelu")
    gamma = inputs[1] if act_type == 'prelu' else None
    return [npx.leaky_relu(inputs[0], gamma, act_type=act_type, slope=slope)]


_op('erf', '_npi_erf', '_npx_erf')(lambda inputs, attrs: [npx.erf(inputs[0])])
_op('erfinv', '_npi_erfinv', '_npx_erfinv')(lambda inputs, attrs: [npx.erfinv(inputs[0])])
_op('BlockGrad', 'stop_gradient', '_npx_stop_gradient')(
    lambda inputs, attrs: [npx.stop_gradient(inputs[0])])


@_op('InstanceNorm', '_npx_instance_norm')
def _instance_norm(inputs, attrs):
    return [npx.instance_norm(*inputs, eps=attrs.float('eps', 1e-3))]


@_op('GroupNorm', '_npx_group_norm')
def _group_norm(inputs, attrs):
    data, gamma, beta = inputs
    num_groups = attrs.int('num_groups', 1)
    channels = data.shape[1] if data.ndim > 1 else 0
    if gamma.size == num_groups != channels and channels % num_groups == 0:
        gamma = np.repeat(gamma, channels // num_groups)
        beta = np.repeat(beta, channels // num_groups)
    outs = npx.group_norm(data, gamma, beta, num_groups=num_groups,
                          eps=attrs.float('eps', 1e-5), output_mean_var=True)
    return outs if attrs.bool('output_mean_var', False) else outs[:1]


_op('relu', '_npx_relu')(lambda inputs, attrs: [npx.relu(inputs[0])])
_op('sigmoid', '_npx_sigmoid')(lambda inputs, attrs: [npx.sigmoid(inputs[0])])


def _softmax_axis(inputs, attrs, log=False):
    """softmax / log_softmax; with use_length, the second input holds each row's length along
    the axis and the outputs past it are 0."""
    fn = npx.log_softmax if log else npx.softmax
    use_length = attrs.bool('use_length', False)
    if use_length and len(inputs) != 2:
        raise ValueError(f"softmax use_length=True of {attrs.where} needs 2 inputs (data, "
                         f"length), got {len(inputs)}")
    return [fn(inputs[0], inputs[1] if use_length else None, axis=attrs.int('axis', -1),
               temperature=attrs.float('temperature', None), use_length=use_length)]


_op('softmax', '_npx_softmax')(lambda inputs, attrs: _softmax_axis(inputs, attrs))
_op('log_softmax', '_npx_log_softmax')(lambda inputs, attrs: _softmax_axis(inputs, attrs, True))


@_op('softmin')
def _softmin(inputs, attrs):
    return [npx.softmax(-inputs[0], axis=attrs.int('axis', -1),
                        temperature=attrs.float('temperature', None))]


def _softmax_rows(data):
    """Softmax over everything but the first axis (MXNet's per-instance softmax)."""
    flat = np.reshape(data, (data.shape[0], -1))
    return np.reshape(npx.softmax(flat, axis=-1), data.shape)


@_op('SoftmaxActivation')
def _softmax_activation(inputs, attrs):
    if attrs.str('mode', 'instance') == 'channel':
        return [npx.softmax(inputs[0], axis=1)]
    return [_softmax_rows(inputs[0])]


@_op('SoftmaxOutput', 'Softmax', labels=(1,))
def _softmax_output(inputs, attrs):
    data = inputs[0]
    if attrs.bool('preserve_shape', False):
        return [npx.softmax(data, axis=-1)]
    if attrs.bool('multi_output', False):
        return [npx.softmax(data, axis=1)]
    return [_softmax_rows(data)]


_op('LinearRegressionOutput', 'MAERegressionOutput', labels=(1,))(
    lambda inputs, attrs: [inputs[0].copy()])
_op('LogisticRegressionOutput', labels=(1,))(lambda inputs, attrs: [npx.sigmoid(inputs[0])])


# ---- elementwise ------------------------------------------------------------------------------

_BINARY = {
    np.add: ('elemwise_add', '_plus', '_Plus', '_add', 'broadcast_add', 'broadcast_plus',
             '_npi_add'),
    np.subtract: ('elemwise_sub', '_minus', '_Minus', '_sub', 'broadcast_sub', 'broadcast_minus',
                  '_npi_subtract'),
    np.multiply: ('elemwise_mul', '_mul', '_Mul', 'broadcast_mul', '_npi_multiply'),
    np.divide: ('elemwise_div', '_div', '_Div', 'broadcast_div', '_npi_true_divide'),
    np.maximum: ('_maximum', '_Maximum', 'broadcast_maximum', '_npi_maximum'),
    np.minimum: ('_minimum', '_Minimum', 'broadcast_minimum', '_npi_minimum'),
    np.power: ('_power', '_Power', 'broadcast_power', '_npi_power'),
}
for _fn, _names in _BINARY.items():
    _op(*_names)(lambda inputs, attrs, fn=_fn: [fn(inputs[0], inputs[1])])


def _scalar(data, attrs):
    value = attrs.float('scalar')
    is_int = attrs.bool('is_int', None)
    # MXNet 2.x's is_int says the scalar was a Python int; in older files an integral scalar
    # keeps an integer array's dtype.
    if is_int or (is_int is None and value.is_integer() and
                  _onp.issubdtype(data.dtype, _onp.integer)):
        return int(value)
    return value


_SCALAR = {
    lambda x, s: x + s: ('_plus_scalar', '_PlusScalar', '_npi_add_scalar'),
    lambda x, s: x - s: ('_minus_scalar', '_MinusScalar', '_npi_subtract_scalar'),
    lambda x, s: s - x: ('_rminus_scalar', '_RMinusScalar', '_npi_rsubtract_scalar'),
    lambda x, s: x * s: ('_mul_scalar', '_MulScalar', '_npi_multiply_scalar'),
    lambda x, s: x / s: ('_div_scalar', '_DivScalar', '_npi_true_divide_scalar'),
    lambda x, s: s / x: ('_rdiv_scalar', '_RDivScalar', '_npi_rtrue_divide_scalar'),
    lambda x, s: x ** s: ('_power_scalar', '_PowerScalar', '_npi_power_scalar'),
    lambda x, s: s ** x: ('_rpower_scalar', '_RPowerScalar', '_npi_rpower_scalar'),
    np.maximum: ('_maximum_scalar', '_MaximumScalar', '_npi_maximum_scalar'),
    np.minimum: ('_minimum_scalar', '_MinimumScalar', '_npi_minimum_scalar'),
}
for _fn, _names in _SCALAR.items():
    _op(*_names)(lambda inputs, attrs, fn=_fn: [fn(inputs[0], _scalar(inputs[0], attrs))])

# Elementwise functions MXNet names as NumPy does; MXNet 2.x prefixes them with _npi_.
_NUMPY_UNARY = ('exp', 'log', 'log1p', 'expm1', 'log2', 'log10', 'sqrt', 'cbrt', 'sin', 'cos',
                'tan', 'arcsin', 'arccos', 'arctan', 'sinh', 'cosh', 'tanh', 'arcsinh',
                'arccosh', 'arctanh', 'negative', 'square', 'reciprocal', 'sign', 'floor', 'ceil',
                'rint', 'trunc')
for _name in _NUMPY_UNARY:
    _op(_name, '_npi_' + _name)(lambda inputs, attrs, fn=getattr(np, _name): [fn(inputs[0])])
# Comparisons as MXNet's numpy mode writes them: boolean results, as pymx's.
_COMPARISONS = {'equal': lambda a, b: a == b, 'not_equal': lambda a, b: a != b,
                'greater': lambda a, b: a > b, 'greater_equal': lambda a, b: a >= b,
                'less': lambda a, b: a < b, 'less_equal': lambda a, b: a <= b}
for _name, _fn in _COMPARISONS.items():
    _op('_npi_' + _name)(lambda inputs, attrs, fn=_fn: [fn(inputs[0], inputs[1])])
    _op('_npi_' + _name + '_scalar')(
        lambda inputs, attrs, fn=_fn: [fn(inputs[0], _scalar(inputs[0], attrs))])
_UNARY = {
    np.abs: ('abs', '_npi_absolute'),
    (lambda x: 1 / np.sqrt(x)): ('rsqrt',),
    (lambda x: x.copy()): ('_copy', 'identity', '_np_copy', '_npi_copy'),
}
for _fn, _names in _UNARY.items():
    _op(*_names)(lambda inputs, attrs, fn=_fn: [fn(inputs[0])])


@_op('add_n', 'ElementWiseSum', '_npi_add_n')
def _add_n(inputs, attrs):
    total = inputs[0]
    for item in inputs[1:]:
        total = total + item
    return [total]


@_op('clip', '_npi_clip')
def _clip(inputs, attrs):
    return [np.clip(inputs[0], attrs.float('a_min', None), attrs.float('a_max', None))]


@_op('Cast', 'cast', 'amp_cast', '_npi_cast')
def _cast(inputs, attrs):
    return [inputs[0].astype(attrs.str('dtype'))]


# ---- shape ------------------------------------------------------------------------------------

# Reshape's special codes as npx.reshape's: 0 copies one dimension, -1 infers, -2 copies the
# rest, -3 merges two, -4 splits one into the two sizes that follow (taken as they are).
_LEGACY_RESHAPE_CODES = {0: -2, -1: -1, -2: -4, -3: -5, -4: -6}


def _npx_codes(spec):
    codes, i = [], 0
    while i < len(spec):
        code = spec[i]
        codes.append(_LEGACY_RESHAPE_CODES.get(code, code))
        if code == -4:
            codes.extend(spec[i + 1:i + 3])
            i += 2
        i += 1
    return tuple(codes)


def _npx_reshape_of(data, codes, reverse, attrs):
    try:
        return npx.reshape(data, codes, reverse=reverse)
    except ValueError as err:
        raise ValueError(f"{err} (reshaping {data.shape}, {attrs.where})") from err


@_op('Reshape', 'reshape')
def _reshape(inputs, attrs):
    data = inputs[0]
    spec = attrs.tuple('shape', None)
    if not spec:  # the deprecated form
        target = attrs.tuple('target_shape', None)
        if not target:
            raise ValueError(f"Reshape of {attrs.where} has neither 'shape' nor 'target_shape'")
        if attrs.bool('keep_highest', False):
            target = (data.shape[0],) + tuple(target[1:])
        spec = tuple(-1 if d == 0 else d for d in target)
    return [_npx_reshape_of(data, _npx_codes(spec), attrs.bool('reverse', False), attrs)]


@_op('_npx_reshape')
def _npx_reshape(inputs, attrs):
    return [_npx_reshape_of(inputs[0], attrs.tuple('newshape'), attrs.bool('reverse', False),
                            attrs)]


@_op('_np_reshape', '_npi_reshape')
def _np_reshape(inputs, attrs):
    return [np.reshape(inputs[0], attrs.tuple('newshape'))]


@_op('transpose', '_npi_transpose', '_np_transpose')
def _transpose(inputs, attrs):
    axes = attrs.tuple('axes', None)
    return [np.transpose(inputs[0], axes if axes else None)]


@_op('expand_dims', '_npi_expand_dims', '_np_expand_dims')
def _expand_dims(inputs, attrs):
    return [np.expand_dims(inputs[0], attrs.int('axis'))]


@_op('squeeze', '_np_squeeze', '_npi_squeeze')
def _squeeze(inputs, attrs):
    axis = attrs.tuple('axis', None)
    return [np.squeeze(inputs[0], axis=axis if axis else None)]


@_op('Concat', 'concat')
def _concat(inputs, attrs):
    return [np.concatenate(inputs, axis=attrs.int('dim', 1))]


@_op('_npi_concatenate', '_np_concatenate')
def _np_concatenate(inputs, attrs):
    return [np.concatenate(inputs, axis=attrs.int('axis', 0))]


@_op('stack', '_npi_stack')
def _stack(inputs, attrs):
    return [np.stack(inputs, axis=attrs.int('axis', 0))]


@_op('SliceChannel', 'split')
def _slice_channel(inputs, attrs):
    data = inputs[0]
    axis = attrs.int('axis', 1)
    parts = np.split(data, attrs.int('num_outputs'), axis=axis)
    if attrs.bool('squeeze_axis', False):
        parts = [np.squeeze(part, axis=axis) for part in parts]
    return list(parts)


@_op('slice', '_npi_slice')
def _slice(inputs, attrs):
    begin = attrs.tuple('begin', allow_none=True)
    end = attrs.tuple('end', allow_none=True)
    step = attrs.tuple('step', (), allow_none=True) or (None,) * len(begin)
    if not len(begin) == len(end) == len(step):
        raise ValueError(f"slice of {attrs.where} has begin {begin}, end {end} and step {step} "
                         f"of different lengths")
    return [inputs[0][tuple(slice(b, e, s) for b, e, s in zip(begin, end, step))]]


@_op('slice_axis')
def _slice_axis(inputs, attrs):
    data = inputs[0]
    axis = attrs.int('axis') % data.ndim
    index = (slice(None),) * axis + (slice(attrs.int('begin'), attrs.int('end', None)),)
    return [data[index]]


@_op('_npi_split')
def _np_split(inputs, attrs):
    data = inputs[0]
    axis = attrs.int('axis', 0)
    sections = attrs.int('sections', 0)
    # 'indices' lists the start of every part, the first (0) included.
    parts = np.split(data, sections if sections > 0 else list(attrs.tuple('indices'))[1:],
                     axis=axis)
    if attrs.bool('squeeze_axis', False):
        parts = [np.squeeze(part, axis=axis) for part in parts]
    return list(parts)


@_op('SwapAxis', 'swapaxes', '_npi_swapaxes')
def _swap_axis(inputs, attrs):
    if 'axis1' in attrs.strings:
        return [np.swapaxes(inputs[0], attrs.int('axis1'), attrs.int('axis2'))]
    return [np.swapaxes(inputs[0], attrs.int('dim1', 0), attrs.int('dim2', 0))]


_op('_npi_where')(lambda inputs, attrs: [np.where(*inputs)])


# ---- creation ---------------------------------------------------------------------------------

def _filled(fill):
    def run(inputs, attrs):
        # Runs on the current device, which SymbolBlock sets to its inputs' device.
        return [fill(attrs.tuple('shape'), attrs.str('dtype', 'float32') or 'float32', attrs)]
    return run


_op('_zeros', '_npi_zeros')(_filled(lambda shape, dtype, attrs: np.zeros(shape, dtype=dtype)))
_op('_ones', '_npi_ones')(_filled(lambda shape, dtype, attrs: np.ones(shape, dtype=dtype)))
_op('_full', '_npi_full')(_filled(
    lambda shape, dtype, attrs: np.full(shape, attrs.float('value'), dtype=dtype)))


@_op('broadcast_to')
def _broadcast_to(inputs, attrs):
    data = inputs[0]
    shape = attrs.tuple('shape')
    # A 0 keeps the input's extent (MXNet's convention).
    offset = len(shape) - data.ndim
    shape = tuple(data.shape[i - offset] if d == 0 and i >= offset else d
                  for i, d in enumerate(shape))
    return [np.broadcast_to(data, shape)]


@_op('broadcast_like')
def _broadcast_like(inputs, attrs):
    lhs_axes = attrs.tuple('lhs_axes', None)
    rhs_axes = attrs.tuple('rhs_axes', None)
    return [npx.broadcast_like(inputs[0], inputs[1], lhs_axes=lhs_axes or None,
                               rhs_axes=rhs_axes or None)]


_op('zeros_like', '_npi_zeros_like')(lambda inputs, attrs: [np.zeros_like(inputs[0])])
_op('ones_like', '_npi_ones_like')(lambda inputs, attrs: [np.ones_like(inputs[0])])


@_op('take', '_npi_take')
def _take(inputs, attrs):
    data, indices = inputs
    mode = attrs.str('mode', 'clip')
    return [np.take(data, indices.astype('int64'), axis=attrs.int('axis', 0), mode=mode)]


@_op('one_hot', '_npx_one_hot')
def _one_hot(inputs, attrs):
    return [npx.one_hot(inputs[0], attrs.int('depth'), on_value=attrs.float('on_value', 1.0),
                        off_value=attrs.float('off_value', 0.0),
                        dtype=attrs.str('dtype', 'float32'))]


@_op('SequenceMask', '_npx_sequence_mask')
def _sequence_mask(inputs, attrs):
    use_length = attrs.bool('use_sequence_length', False)
    return [npx.sequence_mask(inputs[0], inputs[1] if use_length else None,
                              use_sequence_length=use_length,
                              value=attrs.float('value', 0.0), axis=attrs.int('axis', 0))]


@_op('_contrib_div_sqrt_dim')
def _div_sqrt_dim(inputs, attrs):
    data = inputs[0]
    return [data / float(_onp.sqrt(data.shape[-1]))]


# ---- reductions -------------------------------------------------------------------------------

def _reduce(fn, numpy_mode):
    def run(inputs, attrs):
        data = inputs[0]
        axis = attrs.tuple('axis', None)
        if axis is not None and not axis and not numpy_mode:
            axis = None  # MXNet 1.x: an empty axis tuple reduces over every axis
        if attrs.bool('exclude', False) and axis is not None:
            kept = {a % data.ndim for a in axis}
            axis = tuple(a for a in range(data.ndim) if a not in kept)
        out = fn(data, axis=axis, keepdims=attrs.bool('keepdims', False))
        dtype = attrs.str('dtype', None)
        return [out.astype(dtype) if dtype else out]
    return run


for _fn, _legacy, _numpy in ((np.mean, ('mean',), ('_npi_mean', '_np_mean')),
                             (np.sum, ('sum', 'sum_axis'), ('_np_sum', '_npi_sum')),
                             (np.max, ('max', 'max_axis'), ('_np_max', '_npi_max')),
                             (np.min, ('min', 'min_axis'), ('_np_min', '_npi_min')),
                             (np.prod, ('prod',), ('_np_prod', '_npi_prod'))):
    _op(*_legacy)(_reduce(_fn, numpy_mode=False))
    _op(*_numpy)(_reduce(_fn, numpy_mode=True))


# ---- products ---------------------------------------------------------------------------------

@_op('batch_dot')
def _batch_dot(inputs, attrs):
    return [npx.batch_dot(inputs[0], inputs[1], transpose_a=attrs.bool('transpose_a', False),
                          transpose_b=attrs.bool('transpose_b', False))]


@_op('dot')
def _dot(inputs, attrs):
    """MXNet's dot: contracts a's last axis (its first with transpose_a) with b's first (its
    last with transpose_b); two 1-D inputs give shape (1,)."""
    lhs, rhs = inputs
    lhs_axis = 0 if attrs.bool('transpose_a', False) else lhs.ndim - 1
    rhs_axis = rhs.ndim - 1 if attrs.bool('transpose_b', False) else 0
    if lhs.shape[lhs_axis] != rhs.shape[rhs_axis]:
        raise ValueError(f"dot of {attrs.where} contracts axis {lhs_axis} of shape {lhs.shape} "
                         f"with axis {rhs_axis} of shape {rhs.shape}, of different sizes")
    out = np.tensordot(lhs, rhs, axes=([lhs_axis], [rhs_axis]))
    return [out.reshape(1) if out.ndim == 0 else out]


_op('_npi_matmul', '_np_matmul')(lambda inputs, attrs: [np.matmul(inputs[0], inputs[1])])
_op('_np_dot', '_npi_dot')(lambda inputs, attrs: [np.dot(inputs[0], inputs[1])])


# ---- resampling and padding -------------------------------------------------------------------

def _upsampling_scale(attrs):
    """(scale_h, scale_w) from UpSampling's scale: one value, (h, w) or a 4-D (n, c, h, w)."""
    scale = attrs.tuple('scale')
    if len(scale) == 1:
        return scale[0], scale[0]
    if len(scale) in (2, 4):
        return scale[-2], scale[-1]
    raise ValueError(f"UpSampling scale={scale} of {attrs.where} needs 1, 2 or 4 values")


@_op('UpSampling')
def _upsampling(inputs, attrs):
    """nearest: every input is repeated to the first one's size times `scale`, then they are
    concatenated on the channels or summed; bilinear: a deconvolution with the weight input."""
    scale_h, scale_w = _upsampling_scale(attrs)
    if attrs.str('sample_type') == 'bilinear':
        if scale_h != scale_w or len(inputs) != 2:
            raise ValueError(f"UpSampling sample_type=bilinear of {attrs.where} needs one scale "
                             f"for both axes and 2 inputs (data, weight), got scale "
                             f"({scale_h}, {scale_w}) and {len(inputs)} inputs")
        return [upsample_bilinear(inputs[0], inputs[1], scale_h, attrs.int('num_filter'))]
    if attrs.str('sample_type') != 'nearest':
        raise ValueError(f"UpSampling sample_type={attrs.str('sample_type')!r} of {attrs.where} "
                         f"is not 'nearest' or 'bilinear'")
    height, width = inputs[0].shape[2] * scale_h, inputs[0].shape[3] * scale_w
    outputs = []
    for x in inputs:
        if height % x.shape[2] or width % x.shape[3]:
            raise ValueError(f"UpSampling of {attrs.where} cannot scale an input of shape "
                             f"{x.shape} to the output size ({height}, {width})")
        outputs.append(upsample_nearest(x, height // x.shape[2], width // x.shape[3]))
    if len(outputs) == 1:
        return outputs
    if attrs.str('multi_input_mode', 'concat') == 'sum':
        return _add_n(outputs, attrs)
    return [np.concatenate(outputs, axis=1)]


@_op('_contrib_BilinearResize2D')
def _bilinear_resize(inputs, attrs):
    data = inputs[0]
    if data.ndim != 4:
        raise ValueError(f"BilinearResize2D of {attrs.where} needs 4-D NCHW data, got shape "
                         f"{data.shape}")
    mode = attrs.str('mode', 'size')
    height, width = data.shape[2:]
    if mode == 'size':
        scale_h, scale_w = attrs.float('scale_height', None), attrs.float('scale_width', None)
        if (scale_h is None) != (scale_w is None):
            raise ValueError(f"BilinearResize2D of {attrs.where} needs both scale_height and "
                             f"scale_width or neither, got {scale_h} and {scale_w}")
        if scale_h is None:
            size = (attrs.int('height', 1), attrs.int('width', 1))
        else:
            size = (int(scale_h * height), int(scale_w * width))
    elif mode == 'odd_scale':
        scales = (attrs.float('scale_height'), attrs.float('scale_width'))
        size = tuple(int(d * s) if d % 2 == 0 else int((d - 1) * s) + 1
                     for d, s in zip((height, width), scales))
    elif mode == 'like':
        size = inputs[1].shape[2:4]
    elif mode in ('to_even_down', 'to_even_up', 'to_odd_down', 'to_odd_up'):
        parity = 0 if 'even' in mode else 1
        step = -1 if mode.endswith('down') else 1
        size = tuple(d if d % 2 == parity else d + step for d in (height, width))
    else:
        raise ValueError(f"BilinearResize2D mode={mode!r} of {attrs.where} is not one of size, "
                         f"odd_scale, like, to_even_down, to_even_up, to_odd_down, to_odd_up")
    return [bilinear_resize(data, size[0], size[1], attrs.bool('align_corners', True))]


@_op('_contrib_AdaptiveAvgPooling2D')
def _adaptive_avg_pooling(inputs, attrs):
    size = attrs.tuple('output_size', ()) or (1,)
    if len(size) not in (1, 2):
        raise ValueError(f"AdaptiveAvgPooling2D output_size={size} of {attrs.where} needs 1 or "
                         f"2 values")
    return [adaptive_avg_pool(inputs[0], size[0], size[-1])]


def _pad_pairs(flat, ndim, where):
    if len(flat) != 2 * ndim:
        raise ValueError(f"pad_width={flat} of {where} needs 2 values per axis of the "
                         f"{ndim}-D data")
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(ndim)]


def _pad(data, pairs, mode, constant, where):
    if mode not in ('constant', 'edge', 'reflect'):
        raise ValueError(f"pad mode={mode!r} of {where} is not constant, edge or reflect")
    if mode == 'reflect':
        for axis, (before, after) in enumerate(pairs):
            if max(before, after) >= data.shape[axis] > 0:
                raise ValueError(f"reflect padding {(before, after)} of axis {axis} of {where} "
                                 f"must be smaller than its size {data.shape[axis]}")
    if mode == 'constant':
        return np.pad(data, pairs, mode='constant', constant_values=constant)
    return np.pad(data, pairs, mode=mode)


@_op('Pad', 'pad')
def _mxnet_pad(inputs, attrs):
    """pad_width lists (before, after) for every axis, flattened: (0, 0, 0, 0, 1, 1, 2, 2)."""
    data = inputs[0]
    pairs = _pad_pairs(attrs.tuple('pad_width'), data.ndim, attrs.where)
    return [_pad(data, pairs, attrs.str('mode', 'constant'), attrs.float('constant_value', 0.0),
                 attrs.where)]


@_op('_npi_pad')
def _np_pad(inputs, attrs):
    """NumPy's pad_width, one (before, after) per axis: "((0, 0), (1, 2))"."""
    data = inputs[0]
    text = attrs.str('pad_width')
    try:
        flat = [int(v) for pair in ast.literal_eval(text) for v in pair]
    except (ValueError, SyntaxError, TypeError):
        raise ValueError(f"Attribute pad_width={text!r} of {attrs.where} is not a tuple of "
                         f"(before, after) pairs") from None
    pairs = _pad_pairs(tuple(flat), data.ndim, attrs.where)
    return [_pad(data, pairs, attrs.str('mode', 'constant'),
                 attrs.float('constant_values', 0.0), attrs.where)]


_op('L2Normalization')(
    lambda inputs, attrs: [npx.l2_normalization(inputs[0], eps=attrs.float('eps', 1e-10),
                                                mode=attrs.str('mode', 'instance'))])


# ---- legacy comparisons and logic: results in the inputs' dtype -------------------------------

_LEGACY_COMPARISONS = {
    ('_equal', '_Equal', 'broadcast_equal'): lambda a, b: a == b,
    ('_not_equal', '_Not_Equal', 'broadcast_not_equal'): lambda a, b: a != b,
    ('_greater', '_Greater', 'broadcast_greater'): lambda a, b: a > b,
    ('_greater_equal', '_Greater_Equal', 'broadcast_greater_equal'): lambda a, b: a >= b,
    ('_lesser', '_Lesser', 'broadcast_lesser'): lambda a, b: a < b,
    ('_lesser_equal', '_Lesser_Equal', 'broadcast_lesser_equal'): lambda a, b: a <= b,
    ('_logical_and', '_Logical_And', 'broadcast_logical_and'):
        lambda a, b: np.logical_and(a != 0, b != 0),
    ('_logical_or', '_Logical_Or', 'broadcast_logical_or'):
        lambda a, b: np.logical_or(a != 0, b != 0),
    ('_logical_xor', '_Logical_Xor', 'broadcast_logical_xor'):
        lambda a, b: np.logical_xor(a != 0, b != 0),
}
for _names, _fn in _LEGACY_COMPARISONS.items():
    _op(*_names)(lambda inputs, attrs, fn=_fn:
                 [fn(inputs[0], inputs[1]).astype(inputs[0].dtype)])
    # Scalar forms: _greater_scalar, _GreaterScalar, ...
    _scalar_names = (_names[0] + '_scalar', '_' + _names[1].replace('_', '') + 'Scalar')
    _op(*_scalar_names)(lambda inputs, attrs, fn=_fn:
                        [fn(inputs[0], _scalar(inputs[0], attrs)).astype(inputs[0].dtype)])
_op('logical_not')(lambda inputs, attrs: [(inputs[0] == 0).astype(inputs[0].dtype)])
_op('_npi_logical_not')(lambda inputs, attrs: [np.logical_not(inputs[0])])


@_op('where')
def _legacy_where(inputs, attrs):
    """condition of x's shape, or 1-D selecting whole rows of x."""
    condition, x, y = inputs
    if condition.ndim == 1 and x.ndim > 1:
        condition = condition.reshape((-1,) + (1,) * (x.ndim - 1))
    return [np.where(condition != 0, x, y)]


# ---- more elementwise -------------------------------------------------------------------------

_MORE_UNARY = {
    # MXNet's round takes halves away from zero (NumPy's to even).
    (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)): ('round',),
    np.rint: ('_npi_around',),
    np.trunc: ('fix', '_npi_fix'),
    (lambda x: x * (180 / _onp.pi)): ('degrees', '_npi_degrees'),
    (lambda x: x * (_onp.pi / 180)): ('radians', '_npi_radians'),
    (lambda x: 1 / np.cbrt(x)): ('rcbrt',),
    (lambda x: x / (1 + np.abs(x))): ('softsign',),
    np.isnan: ('_npi_isnan',),
    np.isinf: ('_npi_isinf',),
    np.isfinite: ('_npi_isfinite',),
}
for _fn, _names in _MORE_UNARY.items():
    _op(*_names)(lambda inputs, attrs, fn=_fn: [fn(inputs[0])])


@_op('hard_sigmoid')
def _hard_sigmoid(inputs, attrs):
    return [np.clip(inputs[0] * attrs.float('alpha', 0.2) + attrs.float('beta', 0.5), 0, 1)]


@_op('smooth_l1', '_npx_smooth_l1')
def _smooth_l1(inputs, attrs):
    return [npx.smooth_l1(inputs[0], scalar=attrs.float('scalar', 1.0))]


# ---- indexing, searching, sorting -------------------------------------------------------------

def _arg_reduce(fn, legacy):
    def run(inputs, attrs):
        out = fn(inputs[0], axis=attrs.int('axis', None), keepdims=attrs.bool('keepdims', False))
        if legacy:  # MXNet 1.x returns float32 indices, shape (1,) over the whole array
            out = out.astype('float32')
            return [out.reshape(1) if out.ndim == 0 else out]
        return [out]
    return run


_op('argmax')(_arg_reduce(np.argmax, legacy=True))
_op('argmin')(_arg_reduce(np.argmin, legacy=True))
_op('_npi_argmax')(_arg_reduce(np.argmax, legacy=False))
_op('_npi_argmin')(_arg_reduce(np.argmin, legacy=False))


@_op('topk', '_npx_topk')
def _topk(inputs, attrs):
    out = npx.topk(inputs[0], axis=attrs.int('axis', -1), k=attrs.int('k', 1),
                   ret_typ=attrs.str('ret_typ', 'indices'),
                   is_ascend=attrs.bool('is_ascend', False), dtype=attrs.str('dtype', 'float32'))
    return list(out) if isinstance(out, (list, tuple)) else [out]


@_op('sort', '_npi_sort')
def _sort(inputs, attrs):
    out = np.sort(inputs[0], axis=attrs.int('axis', -1))
    return [out if attrs.bool('is_ascend', True) else np.flip(out, axis=attrs.int('axis', -1))]


@_op('argsort', '_npi_argsort')
def _argsort(inputs, attrs):
    data, axis = inputs[0], attrs.int('axis', -1)
    # Descending order: the ascending order of the negated values keeps ties in index order.
    out = np.argsort(data if attrs.bool('is_ascend', True) else -data, axis=axis)
    return [out.astype(attrs.str('dtype', 'float32'))]


@_op('pick', '_npx_pick')
def _pick(inputs, attrs):
    return [npx.pick(inputs[0], inputs[1], axis=attrs.int('axis', -1),
                     mode=attrs.str('mode', 'clip'), keepdims=attrs.bool('keepdims', False))]


_op('gather_nd', '_npx_gather_nd', '_npi_gather_nd')(
    lambda inputs, attrs: [npx.gather_nd(inputs[0], inputs[1].astype('int64'))])


@_op('SequenceLast')
def _sequence_last(inputs, attrs):
    use_length = attrs.bool('use_sequence_length', False)
    return [npx.sequence_last(inputs[0], inputs[1] if use_length else None,
                              use_sequence_length=use_length, axis=attrs.int('axis', 0))]


@_op('SequenceReverse')
def _sequence_reverse(inputs, attrs):
    use_length = attrs.bool('use_sequence_length', False)
    return [npx.sequence_reverse(inputs[0], inputs[1] if use_length else None,
                                 use_sequence_length=use_length, axis=attrs.int('axis', 0))]


@_op('cumsum', '_np_cumsum')
def _cumsum(inputs, attrs):
    return [np.cumsum(inputs[0], axis=attrs.int('axis', None), dtype=attrs.str('dtype', None))]


# ---- shape and layout -------------------------------------------------------------------------

@_op('tile', '_npi_tile')
def _tile(inputs, attrs):
    return [np.tile(inputs[0], attrs.tuple('reps'))]


@_op('repeat', '_np_repeat')
def _repeat(inputs, attrs):
    return [np.repeat(inputs[0], attrs.int('repeats'), axis=attrs.int('axis', None))]


@_op('reverse', 'flip', '_npi_flip')
def _flip(inputs, attrs):
    return [np.flip(inputs[0], axis=attrs.tuple('axis'))]


@_op('broadcast_axis', 'broadcast_axes')
def _broadcast_axis(inputs, attrs):
    data = inputs[0]
    shape = list(data.shape)
    for axis, size in zip(attrs.tuple('axis', ()), attrs.tuple('size', ())):
        shape[axis % data.ndim] = size
    return [np.broadcast_to(data, tuple(shape))]


_op('_npi_broadcast_to')(lambda inputs, attrs: [np.broadcast_to(inputs[0], attrs.tuple('shape'))])


@_op('reshape_like', '_npx_reshape_like')
def _reshape_like(inputs, attrs):
    """data's [lhs_begin, lhs_end) axes replaced by like's [rhs_begin, rhs_end) axes."""
    data, like = inputs

    def bounds(begin, end, ndim):
        begin = 0 if begin is None else begin % ndim
        end = ndim if end is None else (end % ndim if end < 0 else end)
        return begin, end
    lhs = bounds(attrs.int('lhs_begin', None), attrs.int('lhs_end', None), data.ndim)
    rhs = bounds(attrs.int('rhs_begin', None), attrs.int('rhs_end', None), like.ndim)
    shape = data.shape[:lhs[0]] + like.shape[rhs[0]:rhs[1]] + data.shape[lhs[1]:]
    return [np.reshape(data, shape)]


@_op('slice_like')
def _slice_like(inputs, attrs):
    axes = attrs.tuple('axes', ())
    return [npx.slice_like(inputs[0], inputs[1], axes=axes or None)]


def _shape_array(inputs, attrs):
    return [np.array(inputs[0].shape, dtype='int64')]


_op('shape_array', '_npx_shape_array')(_shape_array)
_op('size_array')(lambda inputs, attrs: [np.array([inputs[0].size], dtype='int64')])


@_op('depth_to_space')
def _depth_to_space(inputs, attrs):
    data, block = inputs[0], attrs.int('block_size')
    n, c, h, w = data.shape
    if c % (block * block):
        raise ValueError(f"depth_to_space of {attrs.where}: {c} channels do not divide by "
                         f"block_size {block} squared")
    x = np.reshape(data, (n, block, block, c // (block * block), h, w))
    x = np.transpose(x, (0, 3, 4, 1, 5, 2))
    return [np.reshape(x, (n, c // (block * block), h * block, w * block))]


@_op('space_to_depth')
def _space_to_depth(inputs, attrs):
    data, block = inputs[0], attrs.int('block_size')
    n, c, h, w = data.shape
    if h % block or w % block:
        raise ValueError(f"space_to_depth of {attrs.where}: height {h} and width {w} must "
                         f"divide by block_size {block}")
    x = np.reshape(data, (n, c, h // block, block, w // block, block))
    x = np.transpose(x, (0, 3, 5, 1, 2, 4))
    return [np.reshape(x, (n, c * block * block, h // block, w // block))]


@_op('_split_v2')
def _split_v2(inputs, attrs):
    """split by `sections` or at `indices` (the start of every part, the first 0 included)."""
    return _np_split(inputs, attrs)


# ---- creation ---------------------------------------------------------------------------------

@_op('_arange', '_npi_arange')
def _arange(inputs, attrs):
    if attrs.bool('infer_range', False):
        raise ValueError(f"_arange infer_range=True of {attrs.where} is not supported")
    out = np.arange(attrs.float('start'), attrs.float('stop', None), attrs.float('step', 1.0),
                    dtype=attrs.str('dtype', 'float32') or 'float32')
    repeat = attrs.int('repeat', 1)
    return [np.repeat(out, repeat) if repeat > 1 else out]


@_op('_linspace', '_npi_linspace')
def _linspace(inputs, attrs):
    return [np.linspace(attrs.float('start'), attrs.float('stop'), attrs.int('num'),
                        endpoint=attrs.bool('endpoint', True),
                        dtype=attrs.str('dtype', 'float32') or 'float32')]


# ---- norms ------------------------------------------------------------------------------------

@_op('norm')
def _norm(inputs, attrs):
    """MXNet 1.x's norm: ord 1 or 2 over `axis` (all axes: shape (1,))."""
    data = inputs[0]
    order = attrs.int('ord', 2)
    if order not in (1, 2):
        raise ValueError(f"norm ord={order} of {attrs.where} is not 1 or 2")
    axis = attrs.tuple('axis', None) or None
    keepdims = attrs.bool('keepdims', False)
    if order == 1:
        out = np.sum(np.abs(data), axis=axis, keepdims=keepdims)
    else:
        out = np.sqrt(np.sum(data * data, axis=axis, keepdims=keepdims))
    dtype = attrs.str('out_dtype', None)
    out = out.astype(dtype) if dtype else out
    return [out.reshape(1) if out.ndim == 0 else out]
