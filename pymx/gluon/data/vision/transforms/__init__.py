"""Vision transforms (MXNet python/mxnet/gluon/data/vision/transforms/__init__.py)."""
import numpy as onp

from ..... import numpy as _np
from ....block import Block, HybridBlock
from ....nn import HybridSequential, Sequential
from .image import *          # noqa: F401,F403  (the image transforms, listed in image.__all__)
from .image import __all__ as _image_all
from .rotate import *         # noqa: F401,F403  (Rotate, RandomRotation)
from .rotate import __all__ as _rotate_all

__all__ = ["Compose", "HybridCompose", "Cast", "RandomApply", "HybridRandomApply"] + \
    _image_all + _rotate_all


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


def _check_probability(p, what):
    if not 0.0 <= p <= 1.0:
        raise ValueError("%s: p must be a probability in [0, 1], got %r" % (what, p))


class RandomApply(Sequential):
    """Applies ``transforms`` (a Block, or a list of Blocks applied in order) with probability
    ``p``, else returns the input unchanged. The draw is made on the host; see Note [Random
    draws in transforms] in image.py."""

    def __init__(self, transforms, p=0.5):
        super().__init__()
        _check_probability(p, "RandomApply")
        if isinstance(transforms, (list, tuple)):
            transforms = Compose(list(transforms))
        if not isinstance(transforms, Block):
            raise TypeError("RandomApply: transforms must be a Block or a list of Blocks, got "
                            "%s" % type(transforms).__name__)
        self.transforms = transforms
        self.p = p

    def forward(self, x):
        if onp.random.uniform() < self.p:
            return self.transforms(x)
        return x


class HybridRandomApply(HybridSequential):
    """RandomApply for a HybridBlock that keeps the input's shape and dtype, and can itself be
    hybridized: the coin is tossed on the input's device by ``np.random.uniform`` (seeded by
    ``pymx.np.random.seed``, not NumPy's generator), and ``np.where`` picks the transformed or
    the original input. The transform therefore runs on every call, applied or not."""

    def __init__(self, transforms, p=0.5):
        super().__init__()
        _check_probability(p, "HybridRandomApply")
        if not isinstance(transforms, HybridBlock):
            raise TypeError("HybridRandomApply: transforms must be a HybridBlock (use "
                            "HybridCompose for several), got %s" % type(transforms).__name__)
        self.transforms = transforms
        self.p = p

    def forward(self, x):
        out = self.transforms(x)
        if out.shape != x.shape or out.dtype != x.dtype:
            raise ValueError("HybridRandomApply: the transform must keep the input's shape and "
                             "dtype, but turned %s %s into %s %s; use RandomApply"
                             % (x.shape, onp.dtype(x.dtype).name, out.shape,
                                onp.dtype(out.dtype).name))
        coin = _np.random.uniform(0.0, 1.0, size=(1,), device=x.device)
        return _np.where(coin < self.p, out, x)
