"""VGG ("Very Deep Convolutional Networks for Large-Scale Image Recognition", Simonyan and
Zisserman 2014): vgg11, vgg13, vgg16, vgg19 and their batch-normalised variants vgg11_bn ...

Parameter names are MXNet's: the convolutions, the two 4096-unit Dense layers and their dropouts
are `features.<i>`, the classifier `output`. The Dense layers flatten their input, so the network
takes 224x224 inputs (the first Dense layer's weight is (4096, 512*7*7) once initialised);
other sizes work when trained from scratch, since that shape is inferred from the first input.
"""
from ... import nn
from ....initializer import Xavier
from ...block import HybridBlock
from ..model_store import DEFAULT_ROOT, load_pretrained, resolve_device

__all__ = ['VGG', 'vgg11', 'vgg13', 'vgg16', 'vgg19', 'vgg11_bn', 'vgg13_bn', 'vgg16_bn',
           'vgg19_bn', 'get_vgg']


class VGG(HybridBlock):
    """Stages of 3x3 convolutions (stage i: layers[i] convolutions of filters[i] channels, each
    followed by batch norm when `batch_norm`, and ReLU; then a 2x2 max pool), two Dense 4096
    layers with ReLU and dropout 0.5, and a Dense layer of `classes` outputs."""

    def __init__(self, layers, filters, classes=1000, batch_norm=False):
        super().__init__()
        if len(layers) != len(filters):
            raise ValueError(f"VGG: layers and filters must have one entry per stage, got "
                             f"layers={list(layers)}, filters={list(filters)}")
        self.features = self._make_features(layers, filters, batch_norm)
        self.features.add(nn.Dense(4096, activation='relu', weight_initializer='normal',
                                   bias_initializer='zeros'),
                          nn.Dropout(rate=0.5),
                          nn.Dense(4096, activation='relu', weight_initializer='normal',
                                   bias_initializer='zeros'),
                          nn.Dropout(rate=0.5))
        self.output = nn.Dense(classes, weight_initializer='normal', bias_initializer='zeros')

    @staticmethod
    def _make_features(layers, filters, batch_norm):
        features = nn.HybridSequential()
        for num_convs, channels in zip(layers, filters):
            for _ in range(num_convs):
                features.add(nn.Conv2D(channels, kernel_size=3, padding=1,
                                       weight_initializer=Xavier(rnd_type='gaussian',
                                                                 factor_type='out', magnitude=2),
                                       bias_initializer='zeros'))
                if batch_norm:
                    features.add(nn.BatchNorm())
                features.add(nn.Activation('relu'))
            features.add(nn.MaxPool2D(strides=2))
        return features

    def forward(self, x):
        return self.output(self.features(x))


# depth: (convolutions per stage, channels per stage)
vgg_spec = {11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]),
            13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
            16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]),
            19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512])}


def get_vgg(num_layers, pretrained=False, device=None, root=DEFAULT_ROOT, ctx=None, **kwargs):
    """VGG of depth `num_layers` (11, 13, 16 or 19); `batch_norm=True` gives the _bn variant.

    pretrained: load `<root>/vgg<num_layers>[_bn].params` (see model_store) onto `device`
    (default cpu(); `ctx` is an alias). Other keyword arguments (classes, batch_norm) go to VGG.
    """
    if num_layers not in vgg_spec:
        raise ValueError(f"Invalid number of layers: {num_layers}. Options are "
                         f"{sorted(vgg_spec)}")
    layers, filters = vgg_spec[num_layers]
    net = VGG(layers, filters, **kwargs)
    if pretrained:
        suffix = '_bn' if kwargs.get('batch_norm') else ''
        load_pretrained(net, f'vgg{num_layers}{suffix}', root, resolve_device(device, ctx))
    return net


def _constructor(num_layers, batch_norm):
    name = f'vgg{num_layers}' + ('_bn' if batch_norm else '')

    def constructor(**kwargs):
        if 'batch_norm' in kwargs:
            raise TypeError(f"{name}() got an unexpected keyword argument 'batch_norm' (it is "
                            f"fixed by the model's name; use get_vgg to choose it)")
        return get_vgg(num_layers, batch_norm=batch_norm, **kwargs)
    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = (f"VGG-{num_layers}{' with batch normalisation' if batch_norm else ''}"
                           f"; keyword arguments as get_vgg (pretrained, device, root, classes).")
    return constructor


vgg11 = _constructor(11, False)
vgg13 = _constructor(13, False)
vgg16 = _constructor(16, False)
vgg19 = _constructor(19, False)
vgg11_bn = _constructor(11, True)
vgg13_bn = _constructor(13, True)
vgg16_bn = _constructor(16, True)
vgg19_bn = _constructor(19, True)
