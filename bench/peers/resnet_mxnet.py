"""The resnet case in MXNet 1.9.1 Gluon (the peer for bench/run.py): the model zoo's
resnet18_v1 (1000 classes), float32. Prints one JSON line.

    python resnet_mxnet.py --mode train|infer --batch 8 [--image-size 224]
                           [--hybridize none|plain|static] [--seconds 3]

The training step is the pymx one (bench/measure_pymx.py): forward, softmax cross-entropy,
backward, SGD update.
"""
import mxnet as mx
from mxnet import gluon
from mxnet.gluon.model_zoo import vision

import mxnet_gluon


def measure(args):
    mx.random.seed(0)
    net = vision.resnet18_v1()
    net.initialize(mx.init.Xavier())
    mxnet_gluon.hybridize(net, args.hybridize)
    x = mx.nd.random.uniform(shape=(args.batch, 3, args.image_size, args.image_size))
    y = mx.nd.array(list(range(args.batch)))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    return mxnet_gluon.samples_per_second(net, x, y, loss_fn, trainer, args, warmup=2)


def main():
    parser = mxnet_gluon.parser(default_batch=8)
    parser.add_argument("--image-size", type=int, default=224)
    args = parser.parse_args()
    mxnet_gluon.report(args, measure(args))


if __name__ == "__main__":
    main()
