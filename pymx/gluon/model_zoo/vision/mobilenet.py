"""MobileNet ("MobileNets: Efficient Convolutional Neural Networks for Mobile Vision
Applications", Howard et al. 2017) and MobileNetV2 ("Inverted Residuals and Linear Bottlenecks",
Sandler et al. 2018) with width multipliers 1.0, 0.75, 0.5 and 0.25: mobilenet1_0 ...
mobilenet0_25, mobilenet_v2_1_0 ... mobilenet_v2_0_25.

Parameter names are MXNet's: every convolution, batch norm and activation of MobileNet is a
`features.<i>`; a MobileNetV2 bottleneck is `features.<i>` with its layers in `out`
(`features.<i>.out.0.weight`), the classifier a 1x1 convolution `output.0.weight`. Both end in
global average pooling, so any input of at least 32x32 works.
"""
from ... import nn
from .... import numpy as np
from ...block import HybridBlock
from ..model_store import DEFAULT_ROOT, load_pretrained, resolve_device

__all__ = ['MobileNet', 'MobileNetV2', 'RELU6', 'LinearBottleneck', 'mobilenet1_0',
           'mobilenet_v2_1_0', 'mobilenet0_75', 'mobilenet_v2_0_75', 'mobilenet0_5',
           'mobilenet_v2_0_5', 'mobilenet0_25', 'mobilenet_v2_0_25', 'get_mobilenet',
           'get_mobilenet_v2']


class RELU6(HybridBlock):
    """min(max(x, 0), 6), the activation of MobileNetV2."""

    def forward(self, x):
        return np.clip(x, 0, 6)

    def __repr__(self):
        return 'RELU6'


def _add_conv(out, channels=1, kernel=1, stride=1, pad=0, num_group=1, active=True,
              relu6=False):
    out.add(nn.Conv2D(channels, kernel, stride, pad, groups=num_group, use_bias=False),
            nn.BatchNorm(scale=True))
    if active:
        out.add(RELU6() if relu6 else nn.Activation('relu'))


def _add_conv_dw(out, dw_channels, channels, stride, relu6=False):
    """A depthwise 3x3 convolution followed by a pointwise 1x1 convolution."""
    _add_conv(out, channels=dw_channels, kernel=3, stride=stride, pad=1, num_group=dw_channels,
              relu6=relu6)
    _add_conv(out, channels=channels, relu6=relu6)


class LinearBottleneck(HybridBlock):
    """MobileNetV2's inverted residual: a 1x1 expansion to in_channels * t channels, a 3x3
    depthwise convolution (stride `stride`), both with ReLU6, and a linear 1x1 projection to
    `channels`; the input is added when the shapes allow (stride 1, in_channels == channels)."""

    def __init__(self, in_channels, channels, t, stride):
        super().__init__()
        self.use_shortcut = stride == 1 and in_channels == channels
        self.out = nn.HybridSequential()
        _add_conv(self.out, in_channels * t, relu6=True)
        _add_conv(self.out, in_channels * t, kernel=3, stride=stride, pad=1,
                  num_group=in_channels * t, relu6=True)
        _add_conv(self.out, channels, active=False)

    def forward(self, x):
        out = self.out(x)
        return out + x if self.use_shortcut else out


def _check_multiplier(multiplier, model):
    if not isinstance(multiplier, (int, float)) or isinstance(multiplier, bool) or \
            multiplier <= 0:
        raise ValueError(f"{model}: multiplier must be a positive number, got {multiplier!r}")


class MobileNet(HybridBlock):
    """MobileNet: a 3x3/2 convolution, 13 depthwise-separable convolutions, global average
    pooling and a Dense layer of `classes` outputs; every width is scaled by `multiplier`
    (rounded down)."""

    def __init__(self, multiplier=1.0, classes=1000):
        super().__init__()
        _check_multiplier(multiplier, 'MobileNet')
        self.features = nn.HybridSequential()
        _add_conv(self.features, channels=int(32 * multiplier), kernel=3, pad=1, stride=2)
        dw_channels = [int(c * multiplier)
                       for c in [32, 64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024]]
        channels = [int(c * multiplier)
                    for c in [64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024] * 2]
        strides = [1, 2] * 3 + [1] * 5 + [2, 1]
        for dwc, c, s in zip(dw_channels, channels, strides):
            _add_conv_dw(self.features, dw_channels=dwc, channels=c, stride=s)
        self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
        self.output = nn.Dense(classes)

    def forward(self, x):
        return self.output(self.features(x))


class MobileNetV2(HybridBlock):
    """MobileNetV2: a 3x3/2 convolution, 17 linear bottlenecks, a 1x1 convolution to 1280
    channels (1280 * multiplier when multiplier > 1), all with ReLU6, global average pooling and
    a 1x1 convolution to `classes` outputs; widths scaled by `multiplier` (rounded down)."""

    def __init__(self, multiplier=1.0, classes=1000):
        super().__init__()
        _check_multiplier(multiplier, 'MobileNetV2')
        self.features = nn.HybridSequential()
        _add_conv(self.features, int(32 * multiplier), kernel=3, stride=2, pad=1, relu6=True)
        in_channels_group = [int(c * multiplier) for c in
                             [32] + [16] + [24] * 2 + [32] * 3 + [64] * 4 + [96] * 3 + [160] * 3]
        channels_group = [int(c * multiplier) for c in
                          [16] + [24] * 2 + [32] * 3 + [64] * 4 + [96] * 3 + [160] * 3 + [320]]
        expansions = [1] + [6] * 16
        strides = [1, 2] * 2 + [1, 1, 2] + [1] * 6 + [2] + [1] * 3
        for in_c, c, t, s in zip(in_channels_group, channels_group, expansions, strides):
            self.features.add(LinearBottleneck(in_channels=in_c, channels=c, t=t, stride=s))
        last_channels = int(1280 * multiplier) if multiplier > 1.0 else 1280
        _add_conv(self.features, last_channels, relu6=True)
        self.features.add(nn.GlobalAvgPool2D())
        self.output = nn.HybridSequential()
        self.output.add(nn.Conv2D(classes, 1, use_bias=False), nn.Flatten())

    def forward(self, x):
        return self.output(self.features(x))


def _version_suffix(multiplier):
    # MXNet's file names: 1.0, 0.75, 0.5, 0.25
    suffix = f'{multiplier:.2f}'
    return suffix[:-1] if suffix in ('1.00', '0.50') else suffix


def get_mobilenet(multiplier, pretrained=False, device=None, root=DEFAULT_ROOT, ctx=None,
                  **kwargs):
    """MobileNet with width `multiplier`. pretrained: load `<root>/mobilenet<multiplier>.params`
    (mobilenet1.0, mobilenet0.75, ...; see model_store) onto `device` (default cpu(); `ctx` is an
    alias). Other keyword arguments (classes) go to MobileNet."""
    net = MobileNet(multiplier, **kwargs)
    if pretrained:
        load_pretrained(net, f'mobilenet{_version_suffix(multiplier)}', root,
                        resolve_device(device, ctx))
    return net


def get_mobilenet_v2(multiplier, pretrained=False, device=None, root=DEFAULT_ROOT, ctx=None,
                     **kwargs):
    """MobileNetV2 with width `multiplier`. pretrained: load
    `<root>/mobilenetv2_<multiplier>.params` (mobilenetv2_1.0, ...; see model_store) onto
    `device` (default cpu(); `ctx` is an alias). Other keyword arguments (classes) go to
    MobileNetV2."""
    net = MobileNetV2(multiplier, **kwargs)
    if pretrained:
        load_pretrained(net, f'mobilenetv2_{_version_suffix(multiplier)}', root,
                        resolve_device(device, ctx))
    return net


def mobilenet1_0(**kwargs):
    """MobileNet, width 1.0; keyword arguments as get_mobilenet."""
    return get_mobilenet(1.0, **kwargs)


def mobilenet0_75(**kwargs):
    """MobileNet, width 0.75; keyword arguments as get_mobilenet."""
    return get_mobilenet(0.75, **kwargs)


def mobilenet0_5(**kwargs):
    """MobileNet, width 0.5; keyword arguments as get_mobilenet."""
    return get_mobilenet(0.5, **kwargs)


def mobilenet0_25(**kwargs):
    """MobileNet, width 0.25; keyword arguments as get_mobilenet."""
    return get_mobilenet(0.25, **kwargs)


def mobilenet_v2_1_0(**kwargs):
    """MobileNetV2, width 1.0; keyword arguments as get_mobilenet_v2."""
    return get_mobilenet_v2(1.0, **kwargs)


def mobilenet_v2_0_75(**kwargs):
    """MobileNetV2, width 0.75; keyword arguments as get_mobilenet_v2."""
    return get_mobilenet_v2(0.75, **kwargs)


def mobilenet_v2_0_5(**kwargs):
    """MobileNetV2, width 0.5; keyword arguments as get_mobilenet_v2."""
    return get_mobilenet_v2(0.5, **kwargs)


def mobilenet_v2_0_25(**kwargs):
    """MobileNetV2, width 0.25; keyword arguments as get_mobilenet_v2."""
    return get_mobilenet_v2(0.25, **kwargs)
