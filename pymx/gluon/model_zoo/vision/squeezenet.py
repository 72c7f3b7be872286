"""SqueezeNet 1.0 ("SqueezeNet: AlexNet-level accuracy with 50x fewer parameters and <0.5MB
model size", Iandola et al. 2016) and 1.1 (the SqueezeNet repository's revision, 2.4x less
computation): squeezenet1_0, squeezenet1_1.

Parameter names are MXNet's: a fire module `features.<i>` is a HybridSequential whose child 0 is
the 1x1 squeeze convolution (`features.<i>.0.0.weight`) and child 1 concatenates the 1x1 and 3x3
expand convolutions (`features.<i>.1.0.0.weight`, `features.<i>.1.1.0.weight`). The classifier
ends in a 13x13 average pool, so the network takes 224x224 inputs.
"""
from ... import nn
from ...block import HybridBlock
from ...nn import HybridConcatenate
from ..model_store import DEFAULT_ROOT, load_pretrained, resolve_device

__all__ = ['SqueezeNet', 'squeezenet1_0', 'squeezenet1_1', 'get_squeezenet']


def _make_fire(squeeze_channels, expand1x1_channels, expand3x3_channels):
    fire = nn.HybridSequential()
    fire.add(_make_fire_conv(squeeze_channels, 1))
    expand = HybridConcatenate(axis=1)
    expand.add(_make_fire_conv(expand1x1_channels, 1), _make_fire_conv(expand3x3_channels, 3, 1))
    fire.add(expand)
    return fire


def _make_fire_conv(channels, kernel_size, padding=0):
    conv = nn.HybridSequential()
    conv.add(nn.Conv2D(channels, kernel_size, padding=padding), nn.Activation('relu'))
    return conv


class SqueezeNet(HybridBlock):
    """SqueezeNet `version` '1.0' or '1.1': a strided convolution, fire modules between 3x3/2 max
    pools (ceil mode), dropout 0.5, and a 1x1 convolution to `classes` channels with ReLU, 13x13
    average pooling and Flatten."""

    def __init__(self, version, classes=1000):
        super().__init__()
        if version not in ('1.0', '1.1'):
            raise ValueError(f"Unsupported SqueezeNet version {version!r}: '1.0' or '1.1' "
                             f"expected")
        self.features = nn.HybridSequential()
        if version == '1.0':
            self.features.add(nn.Conv2D(96, kernel_size=7, strides=2), nn.Activation('relu'),
                              _pool(),
                              _make_fire(16, 64, 64), _make_fire(16, 64, 64),
                              _make_fire(32, 128, 128),
                              _pool(),
                              _make_fire(32, 128, 128), _make_fire(48, 192, 192),
                              _make_fire(48, 192, 192), _make_fire(64, 256, 256),
                              _pool(),
                              _make_fire(64, 256, 256))
        else:
            self.features.add(nn.Conv2D(64, kernel_size=3, strides=2), nn.Activation('relu'),
                              _pool(),
                              _make_fire(16, 64, 64), _make_fire(16, 64, 64),
                              _pool(),
                              _make_fire(32, 128, 128), _make_fire(32, 128, 128),
                              _pool(),
                              _make_fire(48, 192, 192), _make_fire(48, 192, 192),
                              _make_fire(64, 256, 256), _make_fire(64, 256, 256))
        self.features.add(nn.Dropout(0.5))
        self.output = nn.HybridSequential()
        self.output.add(nn.Conv2D(classes, kernel_size=1), nn.Activation('relu'),
                        nn.AvgPool2D(13), nn.Flatten())

    def forward(self, x):
        return self.output(self.features(x))


def _pool():
    return nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True)


def get_squeezenet(version, pretrained=False, device=None, root=DEFAULT_ROOT, ctx=None,
                   **kwargs):
    """SqueezeNet `version` '1.0' or '1.1'. pretrained: load `<root>/squeezenet<version>.params`
    (see model_store) onto `device` (default cpu(); `ctx` is an alias). Other keyword arguments
    (classes) go to SqueezeNet."""
    net = SqueezeNet(version, **kwargs)
    if pretrained:
        load_pretrained(net, f'squeezenet{version}', root, resolve_device(device, ctx))
    return net


def squeezenet1_0(**kwargs):
    """SqueezeNet 1.0; keyword arguments as get_squeezenet (pretrained, device, root, classes)."""
    return get_squeezenet('1.0', **kwargs)


def squeezenet1_1(**kwargs):
    """SqueezeNet 1.1; keyword arguments as get_squeezenet (pretrained, device, root, classes)."""
    return get_squeezenet('1.1', **kwargs)
