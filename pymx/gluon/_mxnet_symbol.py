"""MXNet's operators, as its symbol files name them, run with pymx's np / npx operations.

`OPS[name](inputs, attrs)` runs one node: `inputs` are pymx ndarrays in the node's input order,
`attrs` an `Attrs` over the node's attribute strings; it returns the node's outputs (a list).
The table covers the operators MXNet's model zoo and common Gluon models export, under their
MXNet 1.x names, their old aliases (`_Plus`, `_PlusScalar`, ...) and the `_npi_` / `_np_` /
`_npx_` names MXNet 2.x's numpy mode uses. Attribute defaults are MXNet's.

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
- not supported, with an error naming the node: softmax's use_length, dot of inputs other than
  2-D, broadcast_like with axes.
"""
import ast

import numpy as _onp

from .. import numpy as np
from .. import numpy_extension as npx
from ._mxnet_rnn import MODES as _RNN_MODES
from ._mxnet_rnn import fused_rnn

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


def _softmax_axis(data, axis, temperature=None, log=False):
    fn = npx.log_softmax if log else npx.softmax
    return fn(data, axis=axis, temperature=temperature)


@_op('softmax', '_npx_softmax')
def _softmax(inputs, attrs):
    if attrs.bool('use_length', False):
        raise ValueError(f"softmax use_length=True of {attrs.where} is not supported")
    return [_softmax_axis(inputs[0], attrs.int('axis', -1), attrs.float('temperature', None))]


@_op('log_softmax', '_npx_log_softmax')
def _log_softmax(inputs, attrs):
    return [_softmax_axis(inputs[0], attrs.int('axis', -1), attrs.float('temperature', None),
                          log=True)]


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

def _mxnet_reshape(source, spec, reverse, where):
    """The shape Reshape's special codes give (0 copy, -1 infer, -2 copy the rest, -3 merge two,
    -4 split one into the next two codes); `reverse` reads both right to left."""
    source, spec = list(source), list(spec)
    if reverse:
        source.reverse()
        spec.reverse()
    out, infer_at, src, i = [], None, 0, 0
    while i < len(spec):
        code = spec[i]
        if code == 0:
            out.append(source[src])
            src += 1
        elif code == -1:
            if infer_at is not None:
                raise ValueError(f"Reshape shape={tuple(spec)} of {where} has more than one -1")
            infer_at = len(out)
            out.append(1)
            src += 1
        elif code == -2:
            out.extend(source[src:])
            src = len(source)
        elif code == -3:
            out.append(source[src] * source[src + 1])
            src += 2
        elif code == -4:
            first, second = spec[i + 1], spec[i + 2]
            if first == -1:
                first = source[src] // second
            if second == -1:
                second = source[src] // first
            if first * second != source[src]:
                raise ValueError(f"Reshape of {where} cannot split dimension {source[src]} into "
                                 f"({spec[i + 1]}, {spec[i + 2]})")
            out.extend([first, second])
            src += 1
            i += 2
        else:
            out.append(code)
            src += 1
        i += 1
    if infer_at is not None:
        known = int(_onp.prod(out)) // out[infer_at] if out else 1
        out[infer_at] = int(_onp.prod(source)) // max(known, 1)
    if reverse:
        out.reverse()
    return tuple(out)


def _npx_reshape_shape(source, spec, reverse, where):
    """The shape npx.reshape's codes give (-1 infer, -2 copy one, -3 drop a 1, -4 copy the
    rest, -5 merge two, -6 split one into the next two codes)."""
    source, spec = list(source), list(spec)
    if reverse:
        source.reverse()
        spec.reverse()
    out, infer_at, src, i = [], None, 0, 0
    while i < len(spec):
        code = spec[i]
        if code == -1:
            if infer_at is not None:
                raise ValueError(f"reshape newshape={tuple(spec)} of {where} has more than one -1")
            infer_at = len(out)
            out.append(1)
            src += 1
        elif code == -2:
            out.append(source[src])
            src += 1
        elif code == -3:
            if source[src] != 1:
                raise ValueError(f"reshape code -3 of {where} drops dimension {src} of size "
                                 f"{source[src]}, which is not 1")
            src += 1
        elif code == -4:
            out.extend(source[src:])
            src = len(source)
        elif code == -5:
            out.append(source[src] * source[src + 1])
            src += 2
        elif code == -6:
            first, second = spec[i + 1], spec[i + 2]
            if first == -1:
                first = source[src] // second
            if second == -1:
                second = source[src] // first
            if first * second != source[src]:
                raise ValueError(f"reshape of {where} cannot split dimension {source[src]} into "
                                 f"({spec[i + 1]}, {spec[i + 2]})")
            out.extend([first, second])
            src += 1
            i += 2
        else:
            out.append(code)
            src += 1
        i += 1
    if infer_at is not None:
        known = int(_onp.prod(out)) // out[infer_at] if out else 1
        out[infer_at] = int(_onp.prod(source)) // max(known, 1)
    if reverse:
        out.reverse()
    return tuple(out)


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
    shape = _mxnet_reshape(data.shape, spec, attrs.bool('reverse', False), attrs.where)
    return [np.reshape(data, shape)]


@_op('_npx_reshape')
def _npx_reshape(inputs, attrs):
    data = inputs[0]
    shape = _npx_reshape_shape(data.shape, attrs.tuple('newshape'),
                               attrs.bool('reverse', False), attrs.where)
    return [np.reshape(data, shape)]


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
    if attrs.tuple('lhs_axes', None) or attrs.tuple('rhs_axes', None):
        raise ValueError(f"broadcast_like with lhs_axes/rhs_axes of {attrs.where} is not "
                         f"supported")
    return [np.broadcast_to(inputs[0], inputs[1].shape)]


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

def _swap_last(x):
    return np.swapaxes(x, -1, -2)


@_op('batch_dot')
def _batch_dot(inputs, attrs):
    lhs, rhs = inputs
    if attrs.bool('transpose_a', False):
        lhs = _swap_last(lhs)
    if attrs.bool('transpose_b', False):
        rhs = _swap_last(rhs)
    return [np.matmul(lhs, rhs)]


@_op('dot')
def _dot(inputs, attrs):
    lhs, rhs = inputs
    if lhs.ndim != 2 or rhs.ndim != 2:
        raise ValueError(f"dot of {attrs.where} is supported for 2-D inputs only, got shapes "
                         f"{lhs.shape} and {rhs.shape}")
    if attrs.bool('transpose_a', False):
        lhs = lhs.T
    if attrs.bool('transpose_b', False):
        rhs = rhs.T
    return [np.matmul(lhs, rhs)]


_op('_npi_matmul', '_np_matmul')(lambda inputs, attrs: [np.matmul(inputs[0], inputs[1])])
_op('_np_dot', '_npi_dot')(lambda inputs, attrs: [np.dot(inputs[0], inputs[1])])
