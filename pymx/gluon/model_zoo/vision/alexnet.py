"""AlexNet ("One weird trick for parallelizing convolutional neural networks", Krizhevsky 2014,
the single-tower variant).

Parameter names are MXNet's: the five convolutions and two 4096-unit Dense layers are
`features.<i>`, the classifier `output`. The network takes 224x224 inputs.
"""
from ... import nn
from ...block import HybridBlock
from ..model_store import DEFAULT_ROOT, load_pretrained, resolve_device

__all__ = ['AlexNet', 'alexnet']


class AlexNet(HybridBlock):
    """Five convolutions with ReLU (max pools after the first, second and fifth), two Dense 4096
    layers with ReLU and dropout 0.5, and a Dense layer of `classes` outputs."""

    def __init__(self, classes=1000):
        super().__init__()
        self.features = nn.HybridSequential()
        self.features.add(
            nn.Conv2D(64, kernel_size=11, strides=4, padding=2, activation='relu'),
            nn.MaxPool2D(pool_size=3, strides=2),
            nn.Conv2D(192, kernel_size=5, padding=2, activation='relu'),
            nn.MaxPool2D(pool_size=3, strides=2),
            nn.Conv2D(384, kernel_size=3, padding=1, activation='relu'),
            nn.Conv2D(256, kernel_size=3, padding=1, activation='relu'),
            nn.Conv2D(256, kernel_size=3, padding=1, activation='relu'),
            nn.MaxPool2D(pool_size=3, strides=2),
            nn.Flatten(),
            nn.Dense(4096, activation='relu'),
            nn.Dropout(0.5),
            nn.Dense(4096, activation='relu'),
            nn.Dropout(0.5))
        self.output = nn.Dense(classes)

    def forward(self, x):
        return self.output(self.features(x))


def alexnet(pretrained=False, device=None, root=DEFAULT_ROOT, ctx=None, **kwargs):
    """AlexNet. pretrained: load `<root>/alexnet.params` (see model_store) onto `device`
    (default cpu(); `ctx` is an alias). Other keyword arguments (classes) go to AlexNet."""
    net = AlexNet(**kwargs)
    if pretrained:
        load_pretrained(net, 'alexnet', root, resolve_device(device, ctx))
    return net
