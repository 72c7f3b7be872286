"""DenseNet-BC ("Densely Connected Convolutional Networks", Huang et al. 2016): densenet121,
densenet161, densenet169, densenet201.

Parameter names are MXNet's: dense block i is `features.<j>`, a HybridSequential of dense layers,
each a HybridConcatenate of the identity (child 0) and the new features (child 1:
`features.<j>.<k>.1.0.gamma`, ...); transitions sit between the blocks. The network ends in a
7x7 average pool, so it takes 224x224 inputs.
"""
from ... import nn
from ...block import HybridBlock
from ...nn import HybridConcatenate, Identity
from ..model_store import DEFAULT_ROOT, load_pretrained, resolve_device

__all__ = ['DenseNet', 'densenet121', 'densenet161', 'densenet169', 'densenet201',
           'get_densenet']


def _make_dense_block(num_layers, bn_size, growth_rate, dropout):
    block = nn.HybridSequential()
    for _ in range(num_layers):
        block.add(_make_dense_layer(growth_rate, bn_size, dropout))
    return block


def _make_dense_layer(growth_rate, bn_size, dropout):
    new_features = nn.HybridSequential()
    new_features.add(nn.BatchNorm(), nn.Activation('relu'),
                     nn.Conv2D(bn_size * growth_rate, kernel_size=1, use_bias=False),
                     nn.BatchNorm(), nn.Activation('relu'),
                     nn.Conv2D(growth_rate, kernel_size=3, padding=1, use_bias=False))
    if dropout:
        new_features.add(nn.Dropout(dropout))
    layer = HybridConcatenate(axis=1)
    layer.add(Identity(), new_features)
    return layer


def _make_transition(num_output_features):
    transition = nn.HybridSequential()
    transition.add(nn.BatchNorm(), nn.Activation('relu'),
                   nn.Conv2D(num_output_features, kernel_size=1, use_bias=False),
                   nn.AvgPool2D(pool_size=2, strides=2))
    return transition


class DenseNet(HybridBlock):
    """DenseNet-BC: a 7x7/2 convolution (`num_init_features` channels) and 3x3/2 max pool, dense
    blocks of block_config[i] layers (each adds `growth_rate` channels through a 1x1 bottleneck
    of bn_size * growth_rate channels and a 3x3 convolution, with dropout `dropout` when > 0)
    separated by transitions that halve the channels and the resolution, a final batch norm and
    ReLU, 7x7 average pooling and a Dense layer of `classes` outputs."""

    def __init__(self, num_init_features, growth_rate, block_config, bn_size=4, dropout=0,
                 classes=1000):
        super().__init__()
        self.features = nn.HybridSequential()
        self.features.add(nn.Conv2D(num_init_features, kernel_size=7, strides=2, padding=3,
                                    use_bias=False),
                          nn.BatchNorm(), nn.Activation('relu'),
                          nn.MaxPool2D(pool_size=3, strides=2, padding=1))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add(_make_dense_block(num_layers, bn_size, growth_rate, dropout))
            num_features += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add(_make_transition(num_features // 2))
                num_features //= 2
        self.features.add(nn.BatchNorm(), nn.Activation('relu'), nn.AvgPool2D(pool_size=7),
                          nn.Flatten())
        self.output = nn.Dense(classes)

    def forward(self, x):
        return self.output(self.features(x))


# depth: (num_init_features, growth_rate, layers per dense block)
densenet_spec = {121: (64, 32, [6, 12, 24, 16]),
                 161: (96, 48, [6, 12, 36, 24]),
                 169: (64, 32, [6, 12, 32, 32]),
                 201: (64, 32, [6, 12, 48, 32])}


def get_densenet(num_layers, pretrained=False, device=None, root=DEFAULT_ROOT, ctx=None,
                 **kwargs):
    """DenseNet-BC of depth `num_layers` (121, 161, 169 or 201). pretrained: load
    `<root>/densenet<num_layers>.params` (see model_store) onto `device` (default cpu(); `ctx` is
    an alias). Other keyword arguments (bn_size, dropout, classes) go to DenseNet."""
    if num_layers not in densenet_spec:
        raise ValueError(f"Invalid number of layers: {num_layers}. Options are "
                         f"{sorted(densenet_spec)}")
    num_init_features, growth_rate, block_config = densenet_spec[num_layers]
    net = DenseNet(num_init_features, growth_rate, block_config, **kwargs)
    if pretrained:
        load_pretrained(net, f'densenet{num_layers}', root, resolve_device(device, ctx))
    return net


def densenet121(**kwargs):
    """DenseNet-BC 121; keyword arguments as get_densenet."""
    return get_densenet(121, **kwargs)


def densenet161(**kwargs):
    """DenseNet-BC 161; keyword arguments as get_densenet."""
    return get_densenet(161, **kwargs)


def densenet169(**kwargs):
    """DenseNet-BC 169; keyword arguments as get_densenet."""
    return get_densenet(169, **kwargs)


def densenet201(**kwargs):
    """DenseNet-BC 201; keyword arguments as get_densenet."""
    return get_densenet(201, **kwargs)
