"""Vision transforms (MXNet python/mxnet/gluon/data/vision/transforms/__init__.py)."""
from ....block import HybridBlock
from ....nn import HybridSequential, Sequential
from .image import *          # noqa: F401,F403  (the image transforms, listed in image.__all__)
from .image import __all__ as _image_all

__all__ = ["Compose", "HybridCompose", "Cast"] + _image_all


class Compose(Sequential):
    """Applies the transforms in order. Unlike MXNet, runs of HybridBlocks are not hybridized
    together: see Note [Random draws in transforms] in image.py."""

    def __init__(self, transforms):
        super().__init__()
        self.add(*transforms)


class HybridCompose(HybridSequential):
    """Compose for HybridBlocks only (deterministic transforms), so it can be hybridized."""

    def __init__(self, transforms):
        super().__init__()
        for i, transform in enumerate(transforms):
            if not isinstance(transform, HybridBlock):
                raise ValueError("HybridCompose accepts HybridBlocks only, but transform %d is "
                                 "%s; use Compose" % (i, type(transform).__name__))
        self.add(*transforms)


class Cast(HybridBlock):
    """Casts the input to ``dtype`` (default float32)."""

    def __init__(self, dtype="float32"):
        super().__init__()
        self._dtype = dtype

    def forward(self, x):
        return x.astype(self._dtype)
