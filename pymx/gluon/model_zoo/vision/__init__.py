"""Vision models with MXNet's names, constructors and parameter names (MXNet's
`gluon.model_zoo.vision`): ResNet V1/V2, VGG, AlexNet, DenseNet, SqueezeNet, Inception v3,
MobileNet and MobileNetV2.

    net = vision.get_model('resnet18_v1', classes=10)     # or vision.resnet18_v1(classes=10)
    net = vision.get_model('resnet50_v2', pretrained=True, root='~/models')

Every constructor takes `pretrained` (load `<root>/<name>.params`, see model_store; pymx never
downloads), `device` (where pretrained parameters go, default cpu(); `ctx` is an alias), `root`
(default ~/.mxnet/models) and the network's own arguments (`classes`, ...).

Deliberate differences from MXNet 2.x:
- pretrained=True never downloads; a missing file raises FileNotFoundError naming the file and
  how to obtain it. The file may be named `<name>.params` or `<name>-<sha1 prefix>.params`
  (MXNet's naming); its checksum is not verified.
- The default root is ~/.mxnet/models, MXNet's default; $MXNET_HOME is not read.
- `ctx` is accepted as an alias of `device`.
- vgg11() ... vgg19_bn() reject a batch_norm argument, which their names fix (MXNet lets it
  override the name); get_vgg takes it.
"""
from .alexnet import *  # noqa: F401,F403
from .alexnet import __all__ as _alexnet_all
from .densenet import *  # noqa: F401,F403
from .densenet import __all__ as _densenet_all
from .inception import *  # noqa: F401,F403
from .inception import __all__ as _inception_all
from .mobilenet import *  # noqa: F401,F403
from .mobilenet import __all__ as _mobilenet_all
from .resnet import *  # noqa: F401,F403
from .resnet import __all__ as _resnet_all
from .squeezenet import *  # noqa: F401,F403
from .squeezenet import __all__ as _squeezenet_all
from .vgg import *  # noqa: F401,F403
from .vgg import __all__ as _vgg_all

__all__ = (_alexnet_all + _densenet_all + _inception_all + _mobilenet_all + _resnet_all +
           _squeezenet_all + _vgg_all + ['get_model'])

_models = {'resnet18_v1': resnet18_v1, 'resnet34_v1': resnet34_v1,
           'resnet50_v1': resnet50_v1, 'resnet101_v1': resnet101_v1,
           'resnet152_v1': resnet152_v1, 'resnet18_v2': resnet18_v2,
           'resnet34_v2': resnet34_v2, 'resnet50_v2': resnet50_v2,
           'resnet101_v2': resnet101_v2, 'resnet152_v2': resnet152_v2,
           'vgg11': vgg11, 'vgg13': vgg13, 'vgg16': vgg16, 'vgg19': vgg19,
           'vgg11_bn': vgg11_bn, 'vgg13_bn': vgg13_bn, 'vgg16_bn': vgg16_bn,
           'vgg19_bn': vgg19_bn,
           'alexnet': alexnet,
           'densenet121': densenet121, 'densenet161': densenet161,
           'densenet169': densenet169, 'densenet201': densenet201,
           'squeezenet1.0': squeezenet1_0, 'squeezenet1.1': squeezenet1_1,
           'inceptionv3': inception_v3,
           'mobilenet1.0': mobilenet1_0, 'mobilenet0.75': mobilenet0_75,
           'mobilenet0.5': mobilenet0_5, 'mobilenet0.25': mobilenet0_25,
           'mobilenetv2_1.0': mobilenet_v2_1_0, 'mobilenetv2_0.75': mobilenet_v2_0_75,
           'mobilenetv2_0.5': mobilenet_v2_0_5, 'mobilenetv2_0.25': mobilenet_v2_0_25}


def get_model(name, **kwargs):
    """The model called `name` (case-insensitive; 'resnet18_v1', 'vgg16_bn', 'squeezenet1.1',
    'inceptionv3', 'mobilenetv2_0.5', ...), built with `kwargs` (pretrained, device, root,
    classes, ...). Raises ValueError listing the names when `name` is unknown."""
    model = _models.get(name.lower())
    if model is None:
        raise ValueError('Model %s is not supported. Available options are\n\t%s'
                         % (name, '\n\t'.join(sorted(_models))))
    return model(**kwargs)
