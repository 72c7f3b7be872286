"""Parameter shapes from a layer's data input: what a SymbolBlock with no parameter file (or
with parameters missing from it) needs to initialise its parameters at the first forward pass.

`PARAM_SHAPES[op](data_shape, attrs)` gives {input position: shape} for the parameter inputs
of the layer operators, under MXNet's names and pymx's (the attributes they read have the same
names and syntax in both). Rules follow MXNet's shape inference of each operator.
"""
import numpy as _onp

from ._mxnet_resize import bilinear_kernel_size
from .rnn.rnn_layer import flat_parameter_size

__all__ = ['PARAM_SHAPES']

PARAM_SHAPES = {}
_CHANNEL_LAST = ('NWC', 'NHWC', 'NDHWC')


def _rule(*names):
    def register(fn):
        for name in names:
            PARAM_SHAPES[name] = fn
        return fn
    return register


@_rule('Convolution', '_npx_convolution', 'convolution')
def _convolution(data_shape, attrs):
    num_filter = attrs.int('num_filter')
    kernel = attrs.tuple('kernel')
    groups = attrs.int('num_group', 1)
    if attrs.str('layout', None) in _CHANNEL_LAST:
        weight = (num_filter,) + kernel + (data_shape[-1] // groups,)
    else:
        weight = (num_filter, data_shape[1] // groups) + kernel
    return {1: weight, 2: (num_filter,)}


@_rule('Deconvolution', '_npx_deconvolution', 'deconvolution')
def _deconvolution(data_shape, attrs):
    num_filter = attrs.int('num_filter')
    groups = attrs.int('num_group', 1)
    return {1: (data_shape[1], num_filter // groups) + attrs.tuple('kernel'), 2: (num_filter,)}


@_rule('FullyConnected', '_npx_fully_connected', 'fully_connected')
def _fully_connected(data_shape, attrs):
    num_hidden = attrs.int('num_hidden')
    if attrs.bool('flatten', True):
        in_units = int(_onp.prod(data_shape[1:], dtype=_onp.int64))
    else:
        in_units = data_shape[-1]
    return {1: (num_hidden, in_units), 2: (num_hidden,)}


@_rule('BatchNorm', '_npx_batch_norm', 'BatchNorm_v1', '_contrib_SyncBatchNorm', 'batch_norm')
def _batch_norm(data_shape, attrs):
    channels = (data_shape[attrs.int('axis', 1)],)
    return {1: channels, 2: channels, 3: channels, 4: channels}


@_rule('LayerNorm', '_npx_layer_norm', 'layer_norm')
def _layer_norm(data_shape, attrs):
    channels = (data_shape[attrs.int('axis', -1)],)
    return {1: channels, 2: channels}


@_rule('Embedding', '_npx_embedding', 'embedding')
def _embedding(data_shape, attrs):
    return {1: (attrs.int('input_dim'), attrs.int('output_dim'))}


@_rule('LeakyReLU', '_npx_leaky_relu')
def _leaky_relu(data_shape, attrs):
    # PReLU's slope: one per channel (axis 1).
    return {1: (data_shape[1] if len(data_shape) > 1 else 1,)}


@_rule('RNN', '_npx_rnn')
def _rnn(data_shape, attrs):
    # The flat parameter vector of the layers the data (T, N, C) feeds.
    return {1: (flat_parameter_size(attrs.str('mode'), attrs.int('num_layers'), data_shape[-1],
                                    attrs.int('state_size'), attrs.bool('bidirectional', False),
                                    attrs.int('projection_size', None)),)}


@_rule('UpSampling')
def _upsampling(data_shape, attrs):
    # Bilinear upsampling's depthwise deconvolution weight.
    if attrs.str('sample_type') != 'bilinear':
        return {}
    scale = attrs.tuple('scale')[-1]
    kernel = bilinear_kernel_size(scale)
    return {1: (attrs.int('num_filter'), 1, kernel, kernel)}
