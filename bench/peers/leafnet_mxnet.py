"""LeafNetwork in MXNet 1.9.1 Gluon (the peer for bench/run.py), the tutorial's own code.

    python leafnet_mxnet.py --mode train --batch 64 --hybridize none|plain|static [--seconds 3]
"""
import argparse
import json
import time

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon import nn


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
    if args.hybridize == "plain":
        net.hybridize()
    elif args.hybridize == "static":
        net.hybridize(static_alloc=True, static_shape=True)
    x = mx.nd.random.uniform(shape=(args.batch, 3, 128, 128))
    y = mx.nd.array(list(range(args.batch))) % 2
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.001})

    def step():
        if args.mode == "train":
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(args.batch)
            loss.wait_to_read()
        else:
            net(x).wait_to_read()

    for _ in range(3):
        step()
    mx.nd.waitall()
    iters, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        step()
        iters += 1
    mx.nd.waitall()
    return iters * args.batch / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hybridize", choices=["none", "plain", "static"], default="none")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    print(json.dumps({"impl": f"mxnet-1.9.1 hybridize={args.hybridize}", "mode": args.mode,
                      "batch": args.batch, "value": measure(args), "unit": "samples/s"}))


if __name__ == "__main__":
    main()
