"""Inception v3 ("Rethinking the Inception Architecture for Computer Vision", Szegedy et al.
2015): inception_v3, without the auxiliary classifier.

Parameter names are MXNet's: the stem's basic convolutions (convolution, batch norm with
epsilon 1e-3, ReLU) are `features.0` ... `features.5`, the Inception modules A1-A3, B, C1-C4, D,
E1-E2 are `features.7` ... `features.17`, each a HybridConcatenate of branches, the classifier
`output`. The network ends in an 8x8 average pool, so it takes 299x299 inputs.
"""
from ... import nn
from ...block import HybridBlock
from ...nn import HybridConcatenate
from ..model_store import DEFAULT_ROOT, load_pretrained, resolve_device

__all__ = ['Inception3', 'inception_v3']


def _make_basic_conv(**kwargs):
    conv = nn.HybridSequential()
    conv.add(nn.Conv2D(use_bias=False, **kwargs), nn.BatchNorm(epsilon=0.001),
             nn.Activation('relu'))
    return conv


def _make_branch(use_pool, *conv_settings):
    """A branch: an optional pool ('avg': 3x3/1 padded, 'max': 3x3/2) then basic convolutions,
    each given as (channels, kernel_size, strides, padding) with None for the default."""
    branch = nn.HybridSequential()
    if use_pool == 'avg':
        branch.add(nn.AvgPool2D(pool_size=3, strides=1, padding=1))
    elif use_pool == 'max':
        branch.add(nn.MaxPool2D(pool_size=3, strides=2))
    setting_names = ('channels', 'kernel_size', 'strides', 'padding')
    for setting in conv_settings:
        kwargs = {name: value for name, value in zip(setting_names, setting) if value is not None}
        branch.add(_make_basic_conv(**kwargs))
    return branch


def _concatenate(*branches):
    module = HybridConcatenate(axis=1)
    module.add(*branches)
    return module


def _make_A(pool_features):
    return _concatenate(
        _make_branch(None, (64, 1, None, None)),
        _make_branch(None, (48, 1, None, None), (64, 5, None, 2)),
        _make_branch(None, (64, 1, None, None), (96, 3, None, 1), (96, 3, None, 1)),
        _make_branch('avg', (pool_features, 1, None, None)))


def _make_B():
    return _concatenate(
        _make_branch(None, (384, 3, 2, None)),
        _make_branch(None, (64, 1, None, None), (96, 3, None, 1), (96, 3, 2, None)),
        _make_branch('max'))


def _make_C(channels_7x7):
    return _concatenate(
        _make_branch(None, (192, 1, None, None)),
        _make_branch(None, (channels_7x7, 1, None, None),
                     (channels_7x7, (1, 7), None, (0, 3)),
                     (192, (7, 1), None, (3, 0))),
        _make_branch(None, (channels_7x7, 1, None, None),
                     (channels_7x7, (7, 1), None, (3, 0)),
                     (channels_7x7, (1, 7), None, (0, 3)),
                     (channels_7x7, (7, 1), None, (3, 0)),
                     (192, (1, 7), None, (0, 3))),
        _make_branch('avg', (192, 1, None, None)))


def _make_D():
    return _concatenate(
        _make_branch(None, (192, 1, None, None), (320, 3, 2, None)),
        _make_branch(None, (192, 1, None, None),
                     (192, (1, 7), None, (0, 3)),
                     (192, (7, 1), None, (3, 0)),
                     (192, 3, 2, None)),
        _make_branch('max'))


def _make_E():
    # The 3x3 branches split into parallel 1x3 and 3x1 convolutions.
    branch_3x3 = nn.HybridSequential()
    branch_3x3.add(_make_branch(None, (384, 1, None, None)),
                   _concatenate(_make_branch(None, (384, (1, 3), None, (0, 1))),
                                _make_branch(None, (384, (3, 1), None, (1, 0)))))
    branch_3x3dbl = nn.HybridSequential()
    branch_3x3dbl.add(_make_branch(None, (448, 1, None, None), (384, 3, None, 1)),
                      _concatenate(_make_branch(None, (384, (1, 3), None, (0, 1))),
                                   _make_branch(None, (384, (3, 1), None, (1, 0)))))
    return _concatenate(
        _make_branch(None, (320, 1, None, None)),
        branch_3x3,
        branch_3x3dbl,
        _make_branch('avg', (192, 1, None, None)))


class Inception3(HybridBlock):
    """Inception v3: the convolutional stem, Inception modules A (x3), B, C (x4), D, E (x2),
    8x8 average pooling, dropout 0.5 and a Dense layer of `classes` outputs."""

    def __init__(self, classes=1000):
        super().__init__()
        self.features = nn.HybridSequential()
        self.features.add(_make_basic_conv(channels=32, kernel_size=3, strides=2),
                          _make_basic_conv(channels=32, kernel_size=3),
                          _make_basic_conv(channels=64, kernel_size=3, padding=1),
                          nn.MaxPool2D(pool_size=3, strides=2),
                          _make_basic_conv(channels=80, kernel_size=1),
                          _make_basic_conv(channels=192, kernel_size=3),
                          nn.MaxPool2D(pool_size=3, strides=2),
                          _make_A(32), _make_A(64), _make_A(64),
                          _make_B(),
                          _make_C(128), _make_C(160), _make_C(160), _make_C(192),
                          _make_D(),
                          _make_E(), _make_E(),
                          nn.AvgPool2D(pool_size=8),
                          nn.Dropout(0.5))
        self.output = nn.Dense(classes)

    def forward(self, x):
        return self.output(self.features(x))


def inception_v3(pretrained=False, device=None, root=DEFAULT_ROOT, ctx=None, **kwargs):
    """Inception v3. pretrained: load `<root>/inceptionv3.params` (see model_store) onto
    `device` (default cpu(); `ctx` is an alias). Other keyword arguments (classes) go to
    Inception3."""
    net = Inception3(**kwargs)
    if pretrained:
        load_pretrained(net, 'inceptionv3', root, resolve_device(device, ctx))
    return net
