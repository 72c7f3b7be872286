"""LeafNetwork in MXNet 1.9.1 Gluon (the peer for bench/run.py), the tutorial's own code.

    python leafnet_mxnet.py --mode train --batch 64 --hybridize none|plain|static [--seconds 3]
"""
import mxnet as mx
from mxnet import gluon
from mxnet.gluon import nn

import mxnet_gluon


def conv_block(filters):
    block = nn.HybridSequential()
    block.add(nn.Conv2D(channels=filters, kernel_size=2, activation="relu"),
              nn.MaxPool2D(pool_size=4, strides=2), nn.BatchNorm())
    return block


def dense_block(neurons, activation="relu", dropout=0.2):
    block = nn.HybridSequential()
    block.add(nn.Dense(neurons, activation=activation))
    if dropout:
        block.add(nn.Dropout(dropout))
    return block


class LeafNetwork(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.conv1 = conv_block(32)
            self.conv2 = conv_block(64)
            self.conv3 = conv_block(128)
            self.flatten = nn.Flatten()
            self.dense1 = dense_block(100)
            self.dense2 = dense_block(10)
            self.dense3 = nn.Dense(2)

    def hybrid_forward(self, F, batch):
        for layer in (self.conv1, self.conv2, self.conv3, self.flatten,
                      self.dense1, self.dense2, self.dense3):
            batch = layer(batch)
        return batch


def measure(args):
    net = LeafNetwork()
    net.initialize(mx.init.Xavier())
    mxnet_gluon.hybridize(net, args.hybridize)
    x = mx.nd.random.uniform(shape=(args.batch, 3, 128, 128))
    y = mx.nd.array(list(range(args.batch))) % 2
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.001})
    return mxnet_gluon.samples_per_second(net, x, y, loss_fn, trainer, args)


def main():
    parser = mxnet_gluon.parser(default_batch=64)
    args = parser.parse_args()
    mxnet_gluon.report(args, measure(args))


if __name__ == "__main__":
    main()
