"""Convolution and pooling layers (1-D/2-D/3-D), channel-first or channel-last layouts, the
PixelShuffle1D/2D/3D sub-pixel upsampling layers (a reshape, a transpose and a reshape) and
ReflectionPad2D.

Differences from MXNet 2.x: PixelShuffle checks the input's rank and that its channels divide by
the product of the factors, naming the values, where MXNet fails in a reshape; ReflectionPad2D
also takes a 4-tuple (top, bottom, left, right) besides an int and MXNet's 8-value pad_width,
and raises ValueError naming the values where MXNet asserts."""
from ... import numpy as np
from ... import numpy_extension as npx
from ..block import HybridBlock
from ..parameter import Parameter
from .basic_layers import _activation

__all__ = ['Conv1D', 'Conv2D', 'Conv3D', 'Conv1DTranspose', 'Conv2DTranspose',
           'Conv3DTranspose', 'MaxPool1D', 'MaxPool2D',
           'MaxPool3D', 'AvgPool1D', 'AvgPool2D', 'AvgPool3D', 'GlobalMaxPool1D',
           'GlobalMaxPool2D', 'GlobalMaxPool3D', 'GlobalAvgPool1D', 'GlobalAvgPool2D',
           'GlobalAvgPool3D', 'PixelShuffle1D', 'PixelShuffle2D', 'PixelShuffle3D',
           'ReflectionPad2D']

_LAYOUTS = {1: ('NCW', 'NWC'), 2: ('NCHW', 'NHWC'), 3: ('NCDHW', 'NDHWC')}


def _tuple(value, ndim, what):
    if isinstance(value, int):
        return (value,) * ndim
    value = tuple(int(v) for v in value)
    if len(value) != ndim:
        raise ValueError(f"{what} must be an int or a tuple of {ndim} ints, got {value}")
    return value


def _check_layout(layout, ndim, cls):
    if layout not in _LAYOUTS[ndim]:
        raise ValueError(f"{cls}: layout must be one of {_LAYOUTS[ndim]}, got {layout!r}")
    return layout.find('C')


class _Conv(HybridBlock):
    """Shared by Conv1D/2D/3D and Conv1D/2D/3DTranspose. The weight's in-channel dim is deferred
    when in_channels=0 and filled in from the first input."""

    _ndim = 2
    _transpose = False

    def __init__(self, channels, kernel_size, strides, padding, dilation, groups, layout,
                 in_channels, activation, use_bias, weight_initializer, bias_initializer,
                 output_padding=0):
        super().__init__()
        ndim, cls = self._ndim, self.__class__.__name__
        if not isinstance(channels, int) or channels <= 0:  # else deferred init fails later
            raise ValueError(f"{cls}: channels must be a positive int, got {channels!r}")
        self._channels = channels
        self._in_channels = in_channels
        self._groups = groups
        self._layout = layout
        self._channel_axis = _check_layout(layout, ndim, cls)
        if channels % groups:
            raise ValueError(f"{cls}: channels ({channels}) must be divisible by groups "
                             f"({groups})")
        self._kernel = _tuple(kernel_size, ndim, f'{cls} kernel_size')
        self._kwargs = dict(kernel=self._kernel, stride=_tuple(strides, ndim, f'{cls} strides'),
                            dilate=_tuple(dilation, ndim, f'{cls} dilation'),
                            pad=_tuple(padding, ndim, f'{cls} padding'), num_filter=channels,
                            num_group=groups, no_bias=not use_bias, layout=layout)
        self._output_padding = _tuple(output_padding, ndim, f'{cls} output_padding')
        self._activation = activation
        self.weight = Parameter('weight', shape=self._weight_shape(in_channels),
                                init=weight_initializer, allow_deferred_init=True)
        self.bias = Parameter('bias', shape=(channels,), init=bias_initializer,
                              allow_deferred_init=True) if use_bias else None

    def _weight_shape(self, in_channels):
        # Channel-first weights are (out, in/groups, k...); channel-last (out, k..., in/groups).
        # A transposed convolution swaps the roles: (in, out/groups, k...).
        if self._transpose:
            first, second = in_channels, self._channels // self._groups
        else:
            first, second = self._channels, in_channels // self._groups if in_channels else 0
        if self._channel_axis == 1:
            return (first, second) + self._kernel
        return (first,) + self._kernel + (second,)

    def infer_shape(self, x, *args):
        in_channels = x.shape[self._channel_axis]
        if in_channels % self._groups:
            raise ValueError(f"{self.__class__.__name__}: input channels ({in_channels}) must be "
                             f"divisible by groups ({self._groups})")
        self.weight.shape = self._weight_shape(in_channels)

    def forward(self, x):
        device = x.device
        bias = self.bias.data(device) if self.bias is not None else None
        if self._activation == 'relu':  # fused into the convolution kernel: one pass, one node
            return npx.convolution(x, self.weight.data(device), bias, act_type='relu',
                                   **self._kwargs)
        out = npx.convolution(x, self.weight.data(device), bias, **self._kwargs)
        return _activation(out, self._activation)

    def __repr__(self):
        shape = self.weight.shape
        in_channels = shape[1 if self._channel_axis == 1 else -1] * self._groups
        return (f'{self.__class__.__name__}({in_channels if in_channels > 0 else None} -> '
                f'{self._channels}, kernel_size={self._kernel}, '
                f'stride={self._kwargs["stride"]}, padding={self._kwargs["pad"]})')


class Conv1D(_Conv):
    """1-D convolution over (N, C, W) ('NCW') or (N, W, C) ('NWC') inputs."""

    _ndim = 1

    def __init__(self, channels, kernel_size, strides=1, padding=0, dilation=1, groups=1,
                 layout='NCW', activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer='zeros', in_channels=0):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer, bias_initializer)


class Conv2D(_Conv):
    """2-D convolution over (N, C, H, W) ('NCHW') or (N, H, W, C) ('NHWC') inputs.

    Output size per spatial dim: (in + 2*pad - dilation*(kernel-1) - 1) // stride + 1.
    """

    _ndim = 2

    def __init__(self, channels, kernel_size, strides=(1, 1), padding=(0, 0), dilation=(1, 1),
                 groups=1, layout='NCHW', activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer='zeros', in_channels=0):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer, bias_initializer)


class Conv3D(_Conv):
    """3-D convolution over (N, C, D, H, W) ('NCDHW') or (N, D, H, W, C) ('NDHWC') inputs."""

    _ndim = 3

    def __init__(self, channels, kernel_size, strides=(1, 1, 1), padding=(0, 0, 0),
                 dilation=(1, 1, 1), groups=1, layout='NCDHW', activation=None, use_bias=True,
                 weight_initializer=None, bias_initializer='zeros', in_channels=0):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer, bias_initializer)


class _ConvTranspose(_Conv):
    """Shared by Conv1DTranspose/2D/3D: the transposed convolution (the gradient of a
    convolution with respect to its input) through the native `deconvolution` operator.

    Output size per spatial dim: (in-1)*stride - 2*pad + dilation*(kernel-1) + output_padding + 1.
    The weight is (in_channels, channels/groups, k...) channel-first and (in_channels, k...,
    channels/groups) channel-last. The operator works channel-first; channel-last inputs and
    weights are transposed around it.
    """

    _transpose = True

    def forward(self, x):
        device = x.device
        weight = self.weight.data(device)
        bias = self.bias.data(device) if self.bias is not None else None
        k = self._kwargs
        kwargs = dict(kernel=k['kernel'], stride=k['stride'], dilate=k['dilate'], pad=k['pad'],
                      adj=self._output_padding, num_filter=self._channels,
                      num_group=self._groups, no_bias=bias is None)
        if self._channel_axis == 1:
            out = npx.deconvolution(x, weight, bias, **kwargs)
        else:
            to_first, to_last = _layout_perms(x.ndim)
            out = npx.deconvolution(np.transpose(x, to_first), np.transpose(weight, to_first),
                                    bias, **kwargs)
            out = np.transpose(out, to_last)
        return _activation(out, self._activation)


class Conv1DTranspose(_ConvTranspose):
    """Transposed 1-D convolution over (N, C, W) ('NCW') or (N, W, C) ('NWC') inputs."""

    _ndim = 1

    def __init__(self, channels, kernel_size, strides=1, padding=0, output_padding=0,
                 dilation=1, groups=1, layout='NCW', activation=None, use_bias=True,
                 weight_initializer=None, bias_initializer='zeros', in_channels=0):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer, bias_initializer,
                         output_padding)


class Conv2DTranspose(_ConvTranspose):
    """Transposed 2-D convolution over (N, C, H, W) ('NCHW') or (N, H, W, C) ('NHWC') inputs."""

    _ndim = 2

    def __init__(self, channels, kernel_size, strides=(1, 1), padding=(0, 0),
                 output_padding=(0, 0), dilation=(1, 1), groups=1, layout='NCHW',
                 activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer='zeros', in_channels=0):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer, bias_initializer,
                         output_padding)


class Conv3DTranspose(_ConvTranspose):
    """Transposed 3-D convolution over (N, C, D, H, W) ('NCDHW') or (N, D, H, W, C) ('NDHWC')
    inputs."""

    _ndim = 3

    def __init__(self, channels, kernel_size, strides=(1, 1, 1), padding=(0, 0, 0),
                 output_padding=(0, 0, 0), dilation=(1, 1, 1), groups=1, layout='NCDHW',
                 activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer='zeros', in_channels=0):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer, bias_initializer,
                         output_padding)


def _layout_perms(ndim):
    """Axis permutations channel-last -> channel-first and back."""
    to_first = (0, ndim - 1) + tuple(range(1, ndim - 1))
    to_last = (0,) + tuple(range(2, ndim)) + (1,)
    return to_first, to_last


class _Pooling(HybridBlock):
    """Shared by the pooling layers. The pooling op works channel-first; channel-last inputs are
    transposed around it."""

    _ndim = 2

    def __init__(self, pool_size, strides, padding, ceil_mode, global_pool, pool_type, layout,
                 count_include_pad=None):
        super().__init__()
        ndim, cls = self._ndim, self.__class__.__name__
        self._channel_axis = _check_layout(layout, ndim, cls)
        self._layout = layout
        pool_size = _tuple(pool_size, ndim, f'{cls} pool_size')
        strides = pool_size if strides is None else _tuple(strides, ndim, f'{cls} strides')
        self._kwargs = dict(kernel=pool_size, stride=strides,
                            pad=_tuple(padding, ndim, f'{cls} padding'),
                            global_pool=global_pool, pool_type=pool_type,
                            pooling_convention='full' if ceil_mode else 'valid')
        if count_include_pad is not None:
            self._kwargs['count_include_pad'] = count_include_pad

    def forward(self, x):
        if self._channel_axis == 1:
            return npx.pooling(x, **self._kwargs)
        to_first, to_last = _layout_perms(x.ndim)
        return np.transpose(npx.pooling(np.transpose(x, to_first), **self._kwargs), to_last)

    def __repr__(self):
        k = self._kwargs
        return (f'{self.__class__.__name__}(size={k["kernel"]}, stride={k["stride"]}, '
                f'padding={k["pad"]}, ceil_mode={k["pooling_convention"] == "full"}, '
                f'global_pool={k["global_pool"]}, pool_type={k["pool_type"]}, '
                f'layout={self._layout})')


def _pool_class(name, ndim, pool_type, default_layout, is_global):
    """Builds MaxPool2D, AvgPool1D, GlobalAvgPool2D, ... with MXNet's signatures."""
    default_size = (2,) * ndim if ndim > 1 else 2

    if is_global:
        def __init__(self, layout=default_layout):
            _Pooling.__init__(self, (1,) * ndim, None, 0, False, True, pool_type, layout)
        doc = f"Global {pool_type} pooling over all spatial dims: output is 1 per spatial dim."
    elif pool_type == 'avg':
        def __init__(self, pool_size=default_size, strides=None, padding=0, layout=default_layout,
                     ceil_mode=False, count_include_pad=True):
            _Pooling.__init__(self, pool_size, strides, padding, ceil_mode, False, pool_type,
                              layout, count_include_pad)
        doc = ("Average pooling; strides default to pool_size. count_include_pad counts padded "
               "cells in the divisor.")
    else:
        def __init__(self, pool_size=default_size, strides=None, padding=0, layout=default_layout,
                     ceil_mode=False):
            _Pooling.__init__(self, pool_size, strides, padding, ceil_mode, False, pool_type,
                              layout)
        doc = "Max pooling; strides default to pool_size; ceil_mode rounds the output size up."
    return type(name, (_Pooling,), {'__init__': __init__, '__doc__': doc, '_ndim': ndim})


MaxPool1D = _pool_class('MaxPool1D', 1, 'max', 'NCW', False)
MaxPool2D = _pool_class('MaxPool2D', 2, 'max', 'NCHW', False)
MaxPool3D = _pool_class('MaxPool3D', 3, 'max', 'NCDHW', False)
AvgPool1D = _pool_class('AvgPool1D', 1, 'avg', 'NCW', False)
AvgPool2D = _pool_class('AvgPool2D', 2, 'avg', 'NCHW', False)
AvgPool3D = _pool_class('AvgPool3D', 3, 'avg', 'NCDHW', False)
GlobalMaxPool1D = _pool_class('GlobalMaxPool1D', 1, 'max', 'NCW', True)
GlobalMaxPool2D = _pool_class('GlobalMaxPool2D', 2, 'max', 'NCHW', True)
GlobalMaxPool3D = _pool_class('GlobalMaxPool3D', 3, 'max', 'NCDHW', True)
GlobalAvgPool1D = _pool_class('GlobalAvgPool1D', 1, 'avg', 'NCW', True)
GlobalAvgPool2D = _pool_class('GlobalAvgPool2D', 2, 'avg', 'NCHW', True)
GlobalAvgPool3D = _pool_class('GlobalAvgPool3D', 3, 'avg', 'NCDHW', True)


class _PixelShuffle(HybridBlock):
    """Shared by PixelShuffle1D/2D/3D: (N, C * f1 * ... * fk, d1, ..., dk) ->
    (N, C, d1 * f1, ..., dk * fk), channel c * (f1 * ... * fk) + offset going to position
    offset (row-major over f1..fk) within each output block (MXNet's and PyTorch's order)."""

    _ndim = 2

    def __init__(self, factor):
        super().__init__()
        cls = self.__class__.__name__
        self._factors = _tuple(factor, self._ndim, f'{cls} factor')
        if any(f < 1 for f in self._factors):
            raise ValueError(f"{cls}: factors must be positive, got {self._factors}")

    def forward(self, x):
        k, cls = self._ndim, self.__class__.__name__
        if x.ndim != k + 2:
            raise ValueError(f"{cls}: input must have {k + 2} dimensions (N, C, {k} spatial), "
                             f"got shape {x.shape}")
        n, channels, spatial = x.shape[0], x.shape[1], x.shape[2:]
        block = 1
        for f in self._factors:
            block *= f
        if channels % block:
            raise ValueError(f"{cls}: the input's {channels} channels are not divisible by the "
                             f"product {block} of the factors {self._factors}")
        # (N, C, f1..fk, d1..dk) -> (N, C, d1, f1, ..., dk, fk) -> (N, C, d1*f1, ..., dk*fk)
        x = np.reshape(x, (n, channels // block) + self._factors + spatial)
        axes = [0, 1]
        for i in range(k):
            axes += [2 + k + i, 2 + i]
        x = np.transpose(x, axes)
        return np.reshape(x, (n, channels // block) +
                          tuple(d * f for d, f in zip(spatial, self._factors)))

    def __repr__(self):
        factors = self._factors[0] if self._ndim == 1 else self._factors
        return f'{self.__class__.__name__}({factors})'


class PixelShuffle1D(_PixelShuffle):
    """(N, C * f, W) -> (N, C, W * f): sub-pixel upsampling of width by `factor` f."""

    _ndim = 1


class PixelShuffle2D(_PixelShuffle):
    """(N, C * f1 * f2, H, W) -> (N, C, H * f1, W * f2); `factor` is an int or (f1, f2)."""

    _ndim = 2


class PixelShuffle3D(_PixelShuffle):
    """(N, C * f1 * f2 * f3, D, H, W) -> (N, C, D * f1, H * f2, W * f3); `factor` is an int or
    (f1, f2, f3)."""

    _ndim = 3


class ReflectionPad2D(HybridBlock):
    """Pads the height and width of NCHW data with the reflection of its border (the border
    itself not repeated): (N, C, H, W) -> (N, C, H + top + bottom, W + left + right).

    padding: an int (the same on all four sides) or MXNet's pad_width for the four axes,
    (0, 0, 0, 0, top, bottom, left, right). Each must be smaller than the axis it pads. (A
    4-tuple is refused: MXNet has none, and other frameworks order theirs differently.)
    """

    def __init__(self, padding=0):
        super().__init__()
        if isinstance(padding, int) and not isinstance(padding, bool):
            padding = (0,) * 4 + (padding,) * 4
        if not (isinstance(padding, (tuple, list)) and len(padding) == 8 and
                all(p == 0 for p in padding[:4]) and
                all(isinstance(p, int) and not isinstance(p, bool) and p >= 0
                    for p in padding[4:])):
            raise ValueError(f"ReflectionPad2D: padding must be a non-negative int or "
                             f"(0, 0, 0, 0, top, bottom, left, right), got {padding!r}")
        padding = padding[4:]
        self._padding = tuple(padding)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"ReflectionPad2D: input must be 4-D (N, C, H, W), got shape "
                             f"{x.shape}")
        top, bottom, left, right = self._padding
        if max(top, bottom) >= x.shape[2] or max(left, right) >= x.shape[3]:
            raise ValueError(f"ReflectionPad2D: padding {self._padding} must be smaller than the "
                             f"height and width it pads, input shape {x.shape}")
        return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), mode='reflect')

    def __repr__(self):
        return f'{self.__class__.__name__}(padding={self._padding})'
