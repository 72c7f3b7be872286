"""ResNet V1 ("Deep Residual Learning for Image Recognition", He et al. 2015) and V2
("Identity Mappings in Deep Residual Networks", He et al. 2016): resnet18_v1 ... resnet152_v2.

Blocks and parameter names are MXNet's (features.0.weight, features.5.0.body.0.weight, ...,
output.weight), so MXNet's parameter files load. As in MXNet, the 1x1 convolutions of
BottleneckV1's body carry a bias and V1 bottlenecks stride in their first 1x1 convolution.
"""
from ... import nn
from .... import numpy_extension as npx
from ...block import HybridBlock
from ..model_store import DEFAULT_ROOT, load_pretrained, resolve_device

__all__ = ['ResNetV1', 'ResNetV2', 'BasicBlockV1', 'BasicBlockV2', 'BottleneckV1',
           'BottleneckV2', 'resnet18_v1', 'resnet34_v1', 'resnet50_v1', 'resnet101_v1',
           'resnet152_v1', 'resnet18_v2', 'resnet34_v2', 'resnet50_v2', 'resnet101_v2',
           'resnet152_v2', 'get_resnet']


def _conv3x3(channels, stride, in_channels):
    return nn.Conv2D(channels, kernel_size=3, strides=stride, padding=1, use_bias=False,
                     in_channels=in_channels)


class BasicBlockV1(HybridBlock):
    """Two 3x3 convolutions with batch norm, added to the (projected) input, then ReLU. ResNet
    V1 18 and 34. `downsample` projects the shortcut with a strided 1x1 convolution."""

    def __init__(self, channels, stride, downsample=False, in_channels=0):
        super().__init__()
        self.body = nn.HybridSequential()
        self.body.add(_conv3x3(channels, stride, in_channels), nn.BatchNorm(),
                      nn.Activation('relu'), _conv3x3(channels, 1, channels), nn.BatchNorm())
        self.downsample = _projection_v1(channels, stride, in_channels) if downsample else None

    def forward(self, x):
        residual = self.downsample(x) if self.downsample is not None else x
        return npx.activation(self.body(x) + residual, act_type='relu')


class BottleneckV1(HybridBlock):
    """1x1 (reduce to channels/4), 3x3, 1x1 (expand to channels) convolutions with batch norm,
    added to the (projected) input, then ReLU. ResNet V1 50, 101 and 152."""

    def __init__(self, channels, stride, downsample=False, in_channels=0):
        super().__init__()
        self.body = nn.HybridSequential()
        self.body.add(nn.Conv2D(channels // 4, kernel_size=1, strides=stride), nn.BatchNorm(),
                      nn.Activation('relu'), _conv3x3(channels // 4, 1, channels // 4),
                      nn.BatchNorm(), nn.Activation('relu'),
                      nn.Conv2D(channels, kernel_size=1, strides=1), nn.BatchNorm())
        self.downsample = _projection_v1(channels, stride, in_channels) if downsample else None

    def forward(self, x):
        residual = self.downsample(x) if self.downsample is not None else x
        return npx.activation(self.body(x) + residual, act_type='relu')


def _projection_v1(channels, stride, in_channels):
    projection = nn.HybridSequential()
    projection.add(nn.Conv2D(channels, kernel_size=1, strides=stride, use_bias=False,
                             in_channels=in_channels), nn.BatchNorm())
    return projection


class BasicBlockV2(HybridBlock):
    """Pre-activation basic block: (batch norm, ReLU, 3x3 convolution) twice, added to the input
    (projected from the first activation when `downsample`). ResNet V2 18 and 34."""

    def __init__(self, channels, stride, downsample=False, in_channels=0):
        super().__init__()
        self.bn1 = nn.BatchNorm()
        self.conv1 = _conv3x3(channels, stride, in_channels)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels, 1, channels)
        self.downsample = nn.Conv2D(channels, 1, stride, use_bias=False,
                                    in_channels=in_channels) if downsample else None

    def forward(self, x):
        residual = x
        x = npx.activation(self.bn1(x), act_type='relu')
        if self.downsample is not None:
            residual = self.downsample(x)
        x = self.conv1(x)
        x = self.conv2(npx.activation(self.bn2(x), act_type='relu'))
        return x + residual


class BottleneckV2(HybridBlock):
    """Pre-activation bottleneck: batch norm and ReLU before each of the 1x1, 3x3 (strided) and
    1x1 convolutions, added to the input (projected when `downsample`). ResNet V2 50-152."""

    def __init__(self, channels, stride, downsample=False, in_channels=0):
        super().__init__()
        self.bn1 = nn.BatchNorm()
        self.conv1 = nn.Conv2D(channels // 4, kernel_size=1, strides=1, use_bias=False)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels // 4, stride, channels // 4)
        self.bn3 = nn.BatchNorm()
        self.conv3 = nn.Conv2D(channels, kernel_size=1, strides=1, use_bias=False)
        self.downsample = nn.Conv2D(channels, 1, stride, use_bias=False,
                                    in_channels=in_channels) if downsample else None

    def forward(self, x):
        residual = x
        x = npx.activation(self.bn1(x), act_type='relu')
        if self.downsample is not None:
            residual = self.downsample(x)
        x = self.conv1(x)
        x = self.conv2(npx.activation(self.bn2(x), act_type='relu'))
        x = self.conv3(npx.activation(self.bn3(x), act_type='relu'))
        return x + residual


def _check_spec(layers, channels):
    if len(layers) != len(channels) - 1:
        raise ValueError(f"ResNet: channels must have one entry more than layers (the stem's "
                         f"width first), got layers={list(layers)}, channels={list(channels)}")


def _make_stage(block, num_blocks, channels, stride, in_channels):
    stage = nn.HybridSequential()
    stage.add(block(channels, stride, channels != in_channels, in_channels=in_channels))
    for _ in range(num_blocks - 1):
        stage.add(block(channels, 1, False, in_channels=channels))
    return stage


class ResNetV1(HybridBlock):
    """ResNet V1: a 7x7/2 convolution and 3x3/2 max pool stem (a 3x3/1 convolution when
    `thumbnail`, for 32x32 inputs), `len(layers)` stages of `block` (stage i has layers[i] blocks
    of channels[i+1] channels, stride 2 from the second stage), global average pooling and a
    Dense layer of `classes` outputs."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False):
        super().__init__()
        _check_spec(layers, channels)
        self.features = nn.HybridSequential()
        if thumbnail:
            self.features.add(_conv3x3(channels[0], 1, 0))
        else:
            self.features.add(nn.Conv2D(channels[0], 7, 2, 3, use_bias=False), nn.BatchNorm(),
                              nn.Activation('relu'), nn.MaxPool2D(3, 2, 1))
        for i, num_blocks in enumerate(layers):
            self.features.add(_make_stage(block, num_blocks, channels[i + 1],
                                          1 if i == 0 else 2, channels[i]))
        self.features.add(nn.GlobalAvgPool2D())
        self.output = nn.Dense(classes, in_units=channels[-1])

    def forward(self, x):
        return self.output(self.features(x))


class ResNetV2(HybridBlock):
    """ResNet V2: an input batch norm without scale and shift, the V1 stem, pre-activation stages
    (see ResNetV1 for `layers`, `channels`, `thumbnail`), a final batch norm and ReLU, global
    average pooling and a Dense layer of `classes` outputs."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False):
        super().__init__()
        _check_spec(layers, channels)
        self.features = nn.HybridSequential()
        self.features.add(nn.BatchNorm(scale=False, center=False))
        if thumbnail:
            self.features.add(_conv3x3(channels[0], 1, 0))
        else:
            self.features.add(nn.Conv2D(channels[0], 7, 2, 3, use_bias=False), nn.BatchNorm(),
                              nn.Activation('relu'), nn.MaxPool2D(3, 2, 1))
        for i, num_blocks in enumerate(layers):
            self.features.add(_make_stage(block, num_blocks, channels[i + 1],
                                          1 if i == 0 else 2, channels[i]))
        self.features.add(nn.BatchNorm(), nn.Activation('relu'), nn.GlobalAvgPool2D(),
                          nn.Flatten())
        self.output = nn.Dense(classes, in_units=channels[-1])

    def forward(self, x):
        return self.output(self.features(x))


# depth: (block type, blocks per stage, stem width followed by each stage's width)
resnet_spec = {18: ('basic_block', [2, 2, 2, 2], [64, 64, 128, 256, 512]),
               34: ('basic_block', [3, 4, 6, 3], [64, 64, 128, 256, 512]),
               50: ('bottle_neck', [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
               101: ('bottle_neck', [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
               152: ('bottle_neck', [3, 8, 36, 3], [64, 256, 512, 1024, 2048])}

resnet_net_versions = [ResNetV1, ResNetV2]
resnet_block_versions = [{'basic_block': BasicBlockV1, 'bottle_neck': BottleneckV1},
                         {'basic_block': BasicBlockV2, 'bottle_neck': BottleneckV2}]


def get_resnet(version, num_layers, pretrained=False, device=None, root=DEFAULT_ROOT, ctx=None,
               **kwargs):
    """ResNet V`version` (1 or 2) of depth `num_layers` (18, 34, 50, 101 or 152).

    pretrained: load `<root>/resnet<num_layers>_v<version>.params` (see model_store) onto
    `device` (default cpu(); `ctx` is an alias). Other keyword arguments (classes, thumbnail) go
    to ResNetV1 / ResNetV2.
    """
    if num_layers not in resnet_spec:
        raise ValueError(f"Invalid number of layers: {num_layers}. Options are "
                         f"{sorted(resnet_spec)}")
    if version not in (1, 2):
        raise ValueError(f"Invalid resnet version: {version}. Options are 1 and 2.")
    block_type, layers, channels = resnet_spec[num_layers]
    block = resnet_block_versions[version - 1][block_type]
    net = resnet_net_versions[version - 1](block, layers, channels, **kwargs)
    if pretrained:
        load_pretrained(net, f'resnet{num_layers}_v{version}', root,
                        resolve_device(device, ctx))
    return net


def _constructor(version, num_layers):
    def constructor(**kwargs):
        return get_resnet(version, num_layers, **kwargs)
    constructor.__name__ = f'resnet{num_layers}_v{version}'
    constructor.__qualname__ = constructor.__name__
    constructor.__doc__ = (f"ResNet-{num_layers} V{version}; keyword arguments as get_resnet "
                           f"(pretrained, device, root, classes, thumbnail).")
    return constructor


resnet18_v1 = _constructor(1, 18)
resnet34_v1 = _constructor(1, 34)
resnet50_v1 = _constructor(1, 50)
resnet101_v1 = _constructor(1, 101)
resnet152_v1 = _constructor(1, 152)
resnet18_v2 = _constructor(2, 18)
resnet34_v2 = _constructor(2, 34)
resnet50_v2 = _constructor(2, 50)
resnet101_v2 = _constructor(2, 101)
resnet152_v2 = _constructor(2, 152)
