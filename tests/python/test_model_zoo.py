"""gluon.model_zoo.vision: every model builds with MXNet's parameter names, shapes and counts;
the residual, fire, dense and inverted-residual blocks against float64 NumPy references and
finite differences; forward shapes, hybridized == imperative, a training step, GPU == CPU;
save/load and pretrained files; argument errors."""
import os

import numpy as onp
import pytest
from conftest import requires_gpu
from test_gluon_layers import conv_ref

import pymx
from pymx import autograd, initializer, np
from pymx.gluon import Trainer, loss, nn
from pymx.gluon.model_zoo import model_store, vision
from pymx.gluon.nn import HybridConcatenate, Identity
from pymx.test_utils import assert_almost_equal, check_numeric_gradient

RTOL, ATOL = 1e-4, 1e-5  # float32 blocks vs float64 references

# get_model name: (trainable parameters, all parameters including batch-norm running statistics)
# at the network's native input size. Trainable counts are the published ones (torchvision for
# ResNet V1-18/34, VGG, AlexNet, DenseNet, SqueezeNet and Inception v3 without its auxiliary
# classifier; Keras for MobileNet). Three architectures differ from their published form in
# MXNet, which these models follow so that MXNet's parameter files load:
# - ResNet V1-50/101/152: the two 1x1 convolutions of each bottleneck carry a bias (see
#   _bottleneck_v1_biases); published 25,557,032 / 44,549,160 / 60,192,808.
# - MobileNetV2: the first bottleneck expands 32 -> 32 channels with a 1x1 convolution and batch
#   norm (+1,088) and the classifier is a 1x1 convolution without bias (-1,000): Keras'
#   3,504,872 becomes 3,504,960.
# - ResNet V2 has no published reference; its counts are MXNet's.
# The second number is what MXNet 1.9.1's collect_params holds for the same model.
_BOTTLENECK_LAYERS = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3], 152: [3, 8, 36, 3]}


def _bottleneck_v1_biases(depth):
    widths = [256, 512, 1024, 2048]  # a block's 1x1 convolutions: width / 4 and width outputs
    return sum(n * (w // 4 + w) for n, w in zip(_BOTTLENECK_LAYERS[depth], widths))


PARAMETER_COUNTS = {
    'resnet18_v1': (11689512, 11699112), 'resnet34_v1': (21797672, 21814696),
    'resnet50_v1': (25557032 + _bottleneck_v1_biases(50), 25629032),
    'resnet101_v1': (44549160 + _bottleneck_v1_biases(101), 44695144),
    'resnet152_v1': (60192808 + _bottleneck_v1_biases(152), 60404072),
    'resnet18_v2': (11687848, 11695796), 'resnet34_v2': (21796008, 21811380),
    'resnet50_v2': (25549480, 25595060), 'resnet101_v2': (44541608, 44639412),
    'resnet152_v2': (60185256, 60329140),
    'vgg11': (132863336, 132863336), 'vgg13': (133047848, 133047848),
    'vgg16': (138357544, 138357544), 'vgg19': (143667240, 143667240),
    'vgg11_bn': (132868840, 132874344), 'vgg13_bn': (133053736, 133059624),
    'vgg16_bn': (138365992, 138374440), 'vgg19_bn': (143678248, 143689256),
    'alexnet': (61100840, 61100840),
    'densenet121': (7978856, 8062504), 'densenet161': (28681000, 28900936),
    'densenet169': (14149480, 14307880), 'densenet201': (20013928, 20242984),
    'squeezenet1.0': (1248424, 1248424), 'squeezenet1.1': (1235496, 1235496),
    'inceptionv3': (23834568, 23869000),
    'mobilenet1.0': (4231976, 4253864), 'mobilenet0.75': (2585560, 2601976),
    'mobilenet0.5': (1331592, 1342536), 'mobilenet0.25': (470072, 475544),
    'mobilenetv2_1.0': (3504872 + 1088 - 1000, 3539136),
    'mobilenetv2_0.75': (2627592, 2653864), 'mobilenetv2_0.5': (1964736, 1983104),
    'mobilenetv2_0.25': (1516392, 1526856),
}

# Parameter names and shapes of MXNet 1.9.1's models (structural names, as save_parameters
# writes them), a sample per family.
MXNET_PARAMETERS = {
    'resnet18_v1': [('features.0.weight', (64, 3, 7, 7)),
                    ('features.5.0.body.3.weight', (128, 128, 3, 3)),
                    ('features.5.0.downsample.0.weight', (128, 64, 1, 1)),
                    ('features.7.1.body.4.running_var', (512,)), ('output.weight', (1000, 512))],
    'resnet50_v1': [('features.5.0.body.0.bias', (128,)),
                    ('features.5.0.downsample.0.weight', (512, 256, 1, 1)),
                    ('features.7.2.body.6.weight', (2048, 512, 1, 1))],
    'resnet18_v2': [('features.0.running_mean', (3,)), ('features.1.weight', (64, 3, 7, 7)),
                    ('features.6.0.conv2.weight', (128, 128, 3, 3)),
                    ('features.6.0.downsample.weight', (128, 64, 1, 1)),
                    ('output.weight', (1000, 512))],
    'resnet50_v2': [('features.6.1.conv3.weight', (512, 128, 1, 1)),
                    ('features.9.running_var', (2048,))],
    'vgg11_bn': [('features.8.weight', (256, 128, 3, 3)), ('features.16.beta', (512,)),
                 ('features.31.bias', (4096,)), ('output.weight', (1000, 4096))],
    'alexnet': [('features.0.weight', (64, 3, 11, 11)), ('features.9.weight', (4096, 9216)),
                ('output.weight', (1000, 4096))],
    'densenet121': [('features.8.10.1.3.running_var', (128,)),
                    ('features.8.10.1.5.weight', (32, 128, 3, 3)),
                    ('features.11.running_var', (1024,)), ('output.weight', (1000, 1024))],
    'squeezenet1.0': [('features.0.weight', (96, 3, 7, 7)),
                      ('features.5.1.0.0.weight', (128, 32, 1, 1)),
                      ('features.8.0.0.weight', (48, 256, 1, 1)),
                      ('output.0.weight', (1000, 512, 1, 1))],
    'inceptionv3': [('features.0.0.weight', (32, 3, 3, 3)),
                    ('features.12.2.3.0.weight', (160, 160, 7, 1)),
                    ('features.16.2.1.1.0.0.weight', (384, 384, 3, 1)),
                    ('features.17.3.1.0.weight', (192, 2048, 1, 1)),
                    ('output.weight', (1000, 2048))],
    'mobilenet0.25': [('features.27.weight', (64, 1, 3, 3)),
                      ('features.78.weight', (256, 256, 1, 1)), ('output.weight', (1000, 256))],
    'mobilenetv2_0.25': [('features.8.out.6.weight', (8, 48, 1, 1)),
                         ('features.11.out.4.running_mean', (96,)),
                         ('output.0.weight', (1000, 1280, 1, 1))],
}


def _small_size(name):
    """The network's native input size, except for VGG: its classifier's first Dense layer sizes
    itself from the input, and at 32x32 sees 512 features instead of 7*7*512, which spares
    allocating 100M parameters."""
    if name.startswith('vgg'):
        return 32
    return 299 if name.startswith('inception') else 224


def _infer_shapes(net, size):
    """Fills in every deferred shape with a zero-sized batch, cheaply: parameters are zeros
    without gradient buffers. Returns {name: (shape, trainable)}."""
    params = net.collect_params()
    trainable = {name: p.grad_req != 'null' for name, p in params.items()}
    for param in params.values():
        param.grad_req = 'null'
        param.initialize(init=initializer.Zero())
    out = net(np.zeros((0, 3, size, size)))
    assert out.shape == (0, 1000)
    return {name: (p.shape, trainable[name]) for name, p in params.items()}


@pytest.mark.parametrize('name', sorted(PARAMETER_COUNTS))
def test_parameter_counts(name):
    shapes = _infer_shapes(vision.get_model(name), _small_size(name))
    trainable = sum(int(onp.prod(shape)) for shape, is_trainable in shapes.values()
                    if is_trainable)
    total = sum(int(onp.prod(shape)) for shape, _ in shapes.values())
    missing = 4096 * 512 * (7 * 7 - 1) if name.startswith('vgg') else 0
    assert (trainable + missing, total + missing) == PARAMETER_COUNTS[name]


@pytest.mark.parametrize('name', sorted(MXNET_PARAMETERS))
def test_parameter_names_and_shapes_match_mxnet(name):
    shapes = _infer_shapes(vision.get_model(name), _small_size(name))
    for param_name, shape in MXNET_PARAMETERS[name]:
        assert param_name in shapes, f"{name}: no parameter {param_name}"
        assert shapes[param_name][0] == shape, param_name


def test_get_model_names_and_constructors():
    assert sorted(PARAMETER_COUNTS) == sorted(vision._models)
    for name, constructor in vision._models.items():
        assert getattr(vision, constructor.__name__) is constructor
    assert isinstance(vision.get_model('ResNet18_V1'), vision.ResNetV1)
    assert isinstance(vision.get_model('resnet50_v2'), vision.ResNetV2)
    assert isinstance(vision.get_model('vgg13_bn'), vision.VGG)
    assert isinstance(vision.get_model('squeezenet1.1'), vision.SqueezeNet)
    assert isinstance(vision.get_model('inceptionv3'), vision.Inception3)
    assert isinstance(vision.get_model('mobilenetv2_0.5'), vision.MobileNetV2)
    assert isinstance(vision.get_model('densenet169'), vision.DenseNet)
    assert isinstance(vision.get_model('alexnet'), vision.AlexNet)
    assert isinstance(vision.get_model('mobilenet0.75'), vision.MobileNet)
    assert isinstance(pymx.gluon.model_zoo.vision.vgg11(), vision.VGG)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match=r"(?s)resnet19_v1 is not supported.*\n\tresnet18_v1"):
        vision.get_model('resnet19_v1')
    with pytest.raises(ValueError, match=r"Invalid number of layers: 20\. Options are "
                                         r"\[18, 34, 50, 101, 152\]"):
        vision.get_resnet(1, 20)
    with pytest.raises(ValueError, match="Invalid resnet version: 3"):
        vision.get_resnet(3, 18)
    with pytest.raises(ValueError, match=r"Invalid number of layers: 12\. Options are "
                                         r"\[11, 13, 16, 19\]"):
        vision.get_vgg(12)
    with pytest.raises(ValueError, match=r"Invalid number of layers: 100\. Options are "
                                         r"\[121, 161, 169, 201\]"):
        vision.get_densenet(100)
    with pytest.raises(ValueError, match="Unsupported SqueezeNet version '1.2'"):
        vision.get_squeezenet('1.2')
    with pytest.raises(ValueError, match="MobileNet: multiplier must be a positive number, got 0"):
        vision.get_mobilenet(0)
    with pytest.raises(ValueError, match="MobileNetV2: multiplier must be a positive number, "
                                         "got '1.0'"):
        vision.MobileNetV2('1.0')
    with pytest.raises(ValueError, match=r"channels must have one entry more than layers.*"
                                         r"layers=\[2, 2\], channels=\[16, 32\]"):
        vision.ResNetV1(vision.BasicBlockV1, [2, 2], [16, 32])
    with pytest.raises(ValueError, match=r"layers=\[1\], filters=\[8, 16\]"):
        vision.VGG([1], [8, 16])
    with pytest.raises(ValueError, match="Dense: units must be a positive int, got 0"):
        vision.resnet18_v1(classes=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'batch_norm'"):
        vision.vgg11(batch_norm=True)
    with pytest.raises(TypeError, match="classess"):
        vision.get_model('alexnet', classess=10)


# ---- blocks against float64 NumPy ------------------------------------------------------------

def _rand(*shape, seed=0):
    return onp.random.default_rng(seed).standard_normal(shape).astype('float32')


def _initialize_with_statistics(block, x, device=None, seed=1):
    """Initialises `block` on `device` (default cpu) from `x` and gives every batch norm random
    statistics and affine parameters, so that inference-mode batch norm is not the identity.
    Returns the float64 values of all parameters by name."""
    device = device or pymx.cpu()
    block.initialize(device=device)
    block(np.array(x, device=device))
    rng = onp.random.default_rng(seed)
    for name, param in block.collect_params().items():
        if name.endswith(('running_mean', 'beta')):
            param.set_data(np.array(rng.uniform(-0.5, 0.5, param.shape).astype('float32'),
                                    device=device))
        elif name.endswith(('running_var', 'gamma')):
            param.set_data(np.array(rng.uniform(0.5, 1.5, param.shape).astype('float32'),
                                    device=device))
    return {k: p.data().asnumpy().astype('float64') for k, p in block.collect_params().items()}


def _bn(x, p, prefix, eps=1e-5):
    shape = (1, -1, 1, 1)
    scale = p[prefix + 'gamma'] / onp.sqrt(p[prefix + 'running_var'] + eps)
    return (x - p[prefix + 'running_mean'].reshape(shape)) * scale.reshape(shape) + \
        p[prefix + 'beta'].reshape(shape)


def _conv(x, p, prefix, stride=1, pad=0, groups=1):
    return conv_ref(x, p[prefix + 'weight'], p.get(prefix + 'bias'), (stride,) * 2, (pad,) * 2,
                    (1, 1), groups)


def _relu(x):
    return onp.maximum(x, 0)


def _basic_v1_ref(x, p):
    body = _relu(_bn(_conv(x, p, 'body.0.', stride=2, pad=1), p, 'body.1.'))
    body = _bn(_conv(body, p, 'body.3.', pad=1), p, 'body.4.')
    return _relu(body + _bn(_conv(x, p, 'downsample.0.', stride=2), p, 'downsample.1.'))


def _bottleneck_v1_ref(x, p):
    body = _relu(_bn(_conv(x, p, 'body.0.', stride=2), p, 'body.1.'))
    body = _relu(_bn(_conv(body, p, 'body.3.', pad=1), p, 'body.4.'))
    body = _bn(_conv(body, p, 'body.6.'), p, 'body.7.')
    return _relu(body + _bn(_conv(x, p, 'downsample.0.', stride=2), p, 'downsample.1.'))


def _basic_v2_ref(x, p):
    pre = _relu(_bn(x, p, 'bn1.'))
    out = _conv(pre, p, 'conv1.', stride=2, pad=1)
    out = _conv(_relu(_bn(out, p, 'bn2.')), p, 'conv2.', pad=1)
    return out + _conv(pre, p, 'downsample.', stride=2)


def _bottleneck_v2_ref(x, p):
    pre = _relu(_bn(x, p, 'bn1.'))
    out = _conv(pre, p, 'conv1.')
    out = _conv(_relu(_bn(out, p, 'bn2.')), p, 'conv2.', stride=2, pad=1)
    out = _conv(_relu(_bn(out, p, 'bn3.')), p, 'conv3.')
    return out + _conv(pre, p, 'downsample.', stride=2)


def _linear_bottleneck_ref(x, p):
    relu6 = lambda v: onp.clip(v, 0, 6)  # noqa: E731
    out = relu6(_bn(_conv(x, p, 'out.0.'), p, 'out.1.'))
    out = relu6(_bn(_conv(out, p, 'out.3.', pad=1, groups=out.shape[1]), p, 'out.4.'))
    return _bn(_conv(out, p, 'out.6.'), p, 'out.7.') + x


def _fire_ref(x, p):
    squeeze = _relu(_conv(x, p, '0.0.'))
    return onp.concatenate([_relu(_conv(squeeze, p, '1.0.0.')),
                            _relu(_conv(squeeze, p, '1.1.0.', pad=1))], axis=1)


def _dense_layer_ref(x, p):
    out = _conv(_relu(_bn(x, p, '1.0.')), p, '1.2.')
    return onp.concatenate([x, _conv(_relu(_bn(out, p, '1.3.')), p, '1.5.', pad=1)], axis=1)


BLOCK_CASES = {
    'BasicBlockV1': (lambda: vision.BasicBlockV1(8, 2, downsample=True, in_channels=4),
                     _basic_v1_ref, (2, 4, 6, 6)),
    'BottleneckV1': (lambda: vision.BottleneckV1(16, 2, downsample=True, in_channels=4),
                     _bottleneck_v1_ref, (2, 4, 6, 6)),
    'BasicBlockV2': (lambda: vision.BasicBlockV2(8, 2, downsample=True, in_channels=4),
                     _basic_v2_ref, (2, 4, 6, 6)),
    'BottleneckV2': (lambda: vision.BottleneckV2(16, 2, downsample=True, in_channels=4),
                     _bottleneck_v2_ref, (2, 4, 6, 6)),
    'LinearBottleneck': (lambda: vision.LinearBottleneck(4, 4, t=3, stride=1),
                         _linear_bottleneck_ref, (2, 4, 5, 5)),
    'fire': (lambda: vision.squeezenet._make_fire(3, 4, 5), _fire_ref, (2, 4, 5, 5)),
    'dense_layer': (lambda: vision.densenet._make_dense_layer(growth_rate=3, bn_size=2,
                                                              dropout=0),
                    _dense_layer_ref, (2, 4, 5, 5)),
}


@pytest.mark.parametrize('case', sorted(BLOCK_CASES))
def test_block_matches_numpy(case, device):
    make, reference, shape = BLOCK_CASES[case]
    block = make()
    x = _rand(*shape)
    params = _initialize_with_statistics(block, x, device)
    ref = reference(x.astype('float64'), params)
    assert_almost_equal(block(np.array(x, device=device)), ref, rtol=RTOL, atol=ATOL)
    block.hybridize()
    assert_almost_equal(block(np.array(x, device=device)), ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize('case', ['BasicBlockV1', 'BottleneckV2', 'LinearBottleneck', 'fire',
                                  'dense_layer'])
def test_block_input_gradient_matches_finite_differences(case):
    make, _, shape = BLOCK_CASES[case]
    block = make()
    x = _rand(1, *shape[1:])
    _initialize_with_statistics(block, x)
    block.cast('float64')

    def forward(data):
        with autograd.predict_mode():  # running statistics: a fixed function of the input
            return block(data)
    check_numeric_gradient(forward, [x])


def test_relu6_and_concatenate():
    x = onp.array([-2.0, 0.0, 3.0, 6.0, 7.5], dtype='float32')
    assert_almost_equal(vision.RELU6()(np.array(x)), onp.clip(x, 0, 6))
    concat = HybridConcatenate(axis=1)
    concat.add(Identity(), nn.HybridLambda(lambda v: v * 2))
    y = _rand(2, 3)
    assert_almost_equal(concat(np.array(y)), onp.concatenate([y, 2 * y], axis=1))
    assert list(concat._children) == ['0', '1']


# ---- whole networks --------------------------------------------------------------------------

# name: (constructor, input shape) for inputs the architecture accepts, kept small.
SMALL_NETWORKS = {
    'resnet18_v1': (lambda: vision.resnet18_v1(classes=10, thumbnail=True), (2, 3, 32, 32)),
    'resnet18_v2': (lambda: vision.resnet18_v2(classes=10, thumbnail=True), (2, 3, 32, 32)),
    'resnet50_v1': (lambda: vision.ResNetV1(vision.BottleneckV1, [1, 1], [8, 16, 32],
                                            classes=10, thumbnail=True), (2, 3, 16, 16)),
    'resnet50_v2': (lambda: vision.ResNetV2(vision.BottleneckV2, [1, 1], [8, 16, 32],
                                            classes=10), (2, 3, 40, 40)),
    'vgg11_bn': (lambda: vision.VGG([1, 1, 1], [4, 8, 8], classes=10, batch_norm=True),
                 (2, 3, 16, 16)),
    'alexnet': (lambda: vision.alexnet(classes=10), (1, 3, 67, 67)),
    'densenet': (lambda: vision.DenseNet(8, 4, [2, 2], classes=10), (2, 3, 56, 56)),
    'squeezenet1.0': (lambda: vision.squeezenet1_0(classes=10), (1, 3, 224, 224)),
    'squeezenet1.1': (lambda: vision.squeezenet1_1(classes=10), (1, 3, 224, 224)),
    'mobilenet0.25': (lambda: vision.mobilenet0_25(classes=10), (2, 3, 32, 32)),
    'mobilenetv2_0.25': (lambda: vision.mobilenet_v2_0_25(classes=10), (2, 3, 32, 32)),
}


@pytest.mark.parametrize('name', sorted(SMALL_NETWORKS))
def test_forward_shape_and_hybridized_equals_imperative(name):
    make, shape = SMALL_NETWORKS[name]
    net = make()
    net.initialize(initializer.Xavier(magnitude=2))
    x = np.array(_rand(*shape))
    out = net(x)
    assert out.shape == (shape[0], 10)
    assert onp.isfinite(out.asnumpy()).all()
    net.hybridize()
    assert_almost_equal(net(x), out, rtol=1e-5, atol=1e-6)


def test_inception_v3_forward_at_native_size():
    net = vision.inception_v3(classes=7)
    net.initialize(initializer.Xavier(magnitude=2))
    x = np.array(_rand(1, 3, 299, 299))
    out = net(x)
    assert out.shape == (1, 7)
    net.hybridize()
    assert_almost_equal(net(x), out, rtol=1e-5, atol=1e-6)


def test_training_step_reduces_loss_and_hybridized_step_matches():
    x = np.array(_rand(8, 3, 16, 16))
    y = np.array(onp.arange(8) % 10)
    nets = []
    for hybrid in (False, True):
        net = vision.ResNetV1(vision.BasicBlockV1, [1, 1], [8, 16, 32], classes=10,
                              thumbnail=True)
        net.initialize(initializer.Xavier(magnitude=2))
        net(x)
        if nets:
            for param, source in zip(net.collect_params().values(),
                                     nets[0].collect_params().values()):
                param.set_data(source.data())
        if hybrid:
            net.hybridize()
        nets.append(net)
    softmax_ce = loss.SoftmaxCrossEntropyLoss()
    losses = []
    for net in nets:
        trainer = Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
        with autograd.record():
            before = softmax_ce(net(x), y).mean()
        before.backward()
        trainer.step(1)
        with autograd.train_mode():  # batch statistics, as in the step
            after = softmax_ce(net(x), y).mean()
        losses.append((float(before), float(after)))
    imperative, hybridized = nets
    for name, param in imperative.collect_params().items():
        assert_almost_equal(hybridized.collect_params()[name].data(), param.data(), rtol=1e-4,
                            atol=1e-5, names=(f"hybridized {name}", f"imperative {name}"))
    assert losses[0][1] < 0.95 * losses[0][0], losses
    assert_almost_equal(onp.array(losses[1]), onp.array(losses[0]), rtol=1e-4)


@requires_gpu
@pytest.mark.parametrize('name', ['resnet18_v2', 'resnet50_v1', 'mobilenet0.25', 'densenet',
                                  'squeezenet1.1'])
def test_gpu_matches_cpu(name):
    make, shape = SMALL_NETWORKS[name]
    x = _rand(*shape)
    cpu_net, gpu_net = make(), make()
    cpu_net.initialize(initializer.Xavier(magnitude=2))
    cpu_net(np.array(x))
    gpu_net.initialize(device=pymx.gpu(0))
    gpu_net(np.array(x, device=pymx.gpu(0)))
    for cpu_param, gpu_param in zip(cpu_net.collect_params().values(),
                                    gpu_net.collect_params().values()):
        gpu_param.set_data(cpu_param.data().copyto(pymx.gpu(0)))
    outputs, grads = [], []
    for net, device in ((cpu_net, pymx.cpu()), (gpu_net, pymx.gpu(0))):
        net.hybridize()
        # Inference-mode batch norm: with batch statistics over 1x1 feature maps the gradients
        # are too ill-conditioned to compare two devices' float32 rounding.
        with autograd.record(train_mode=False):
            out = net(np.array(x, device=device))
        out.backward()
        outputs.append(out.asnumpy())
        grads.append({k: p.grad().asnumpy() for k, p in net.collect_params().items()
                      if p.grad_req != 'null'})
    assert_almost_equal(outputs[1], outputs[0], rtol=1e-4, atol=1e-4)
    for name in grads[0]:
        assert_almost_equal(grads[1][name], grads[0][name], rtol=1e-3, atol=1e-4,
                            names=(f"gpu {name}", f"cpu {name}"))


# ---- parameter files ---------------------------------------------------------------------------

def _small_trained_net():
    net = vision.mobilenet_v2_0_25(classes=10)
    x = np.array(_rand(2, 3, 32, 32))
    _initialize_with_statistics(net, x.asnumpy())
    return net, x


def test_save_load_round_trip_and_pretrained(tmp_path):
    net, x = _small_trained_net()
    expected = net(x).asnumpy()
    net.save_parameters(str(tmp_path / 'mobilenetv2_0.25.params'))

    loaded = vision.mobilenet_v2_0_25(classes=10)
    loaded.load_parameters(str(tmp_path / 'mobilenetv2_0.25.params'))
    assert_almost_equal(loaded(x), expected, rtol=0, atol=0)

    pretrained = vision.get_model('mobilenetv2_0.25', pretrained=True, root=str(tmp_path),
                                  classes=10)
    assert_almost_equal(pretrained(x), expected, rtol=0, atol=0)
    assert pretrained.collect_params()['output.0.weight'].list_device() == [pymx.cpu()]

    # MXNet's naming: <name>-<first 8 hex digits of the SHA-1>.params
    os.rename(tmp_path / 'mobilenetv2_0.25.params', tmp_path / 'mobilenetv2_0.25-a81db45f.params')
    hashed = vision.mobilenet_v2_0_25(pretrained=True, root=str(tmp_path), classes=10,
                                      ctx=pymx.cpu())
    assert_almost_equal(hashed(x), expected, rtol=0, atol=0)


@requires_gpu
def test_pretrained_loads_onto_device(tmp_path):
    net, x = _small_trained_net()
    net.save_parameters(str(tmp_path / 'mobilenetv2_0.25.params'))
    on_gpu = vision.mobilenet_v2_0_25(pretrained=True, root=str(tmp_path), classes=10,
                                      device=pymx.gpu(0))
    assert on_gpu.collect_params()['output.0.weight'].list_device() == [pymx.gpu(0)]
    assert_almost_equal(on_gpu(x.copyto(pymx.gpu(0))), net(x), rtol=1e-4, atol=1e-5)


def test_pretrained_file_errors(tmp_path):
    missing = os.path.join(str(tmp_path), 'squeezenet1.1.params')
    with pytest.raises(FileNotFoundError, match=r"no parameter file .*squeezenet1\.1\.params.*"
                                                r"does not download.*save_parameters"):
        vision.squeezenet1_1(pretrained=True, root=str(tmp_path))
    # a hash-like suffix that is not 8 hex digits is not MXNet's naming
    open(os.path.join(str(tmp_path), 'squeezenet1.1-xyz.params'), 'wb').close()
    with pytest.raises(FileNotFoundError, match=r"squeezenet1\.1\.params"):
        model_store.get_model_file('squeezenet1.1', root=str(tmp_path))
    for digest in ('0123abcd', '4567ef01'):
        open(os.path.join(str(tmp_path), f'squeezenet1.1-{digest}.params'), 'wb').close()
    with pytest.raises(ValueError, match=r"several parameter files.*squeezenet1\.1-0123abcd"
                                         r"\.params, squeezenet1\.1-4567ef01\.params"):
        model_store.get_model_file('squeezenet1.1', root=str(tmp_path))
    # a file of another architecture names the first parameter it lacks
    net, _ = _small_trained_net()
    net.save_parameters(missing)
    with pytest.raises(ValueError, match="Parameter 'features.0.bias' is missing"):
        vision.squeezenet1_1(pretrained=True, root=str(tmp_path))
    with pytest.raises(ValueError, match="either device or its alias ctx, not both"):
        vision.squeezenet1_1(pretrained=True, root=str(tmp_path), device=pymx.cpu(),
                             ctx=pymx.cpu())
    assert model_store.get_model_file('squeezenet1.1', root=str(tmp_path)) == missing
