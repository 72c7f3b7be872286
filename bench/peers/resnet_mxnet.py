"""The resnet case in MXNet 1.9.1 Gluon (the peer for bench/run.py): the model zoo's
resnet18_v1 (1000 classes), float32. Prints one JSON line.

    python resnet_mxnet.py --mode train|infer --batch 8 [--image-size 224]
                           [--hybridize none|plain|static] [--seconds 3]

The training step is the pymx one (bench/measure_pymx.py): forward, softmax cross-entropy,
backward, SGD update.
"""
import argparse
import json
import time

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon.model_zoo import vision


def measure(args):
    mx.random.seed(0)
    net = vision.resnet18_v1()
    net.initialize(mx.init.Xavier())
    if args.hybridize == "plain":
        net.hybridize()
    elif args.hybridize == "static":
        net.hybridize(static_alloc=True, static_shape=True)
    x = mx.nd.random.uniform(shape=(args.batch, 3, args.image_size, args.image_size))
    y = mx.nd.array(list(range(args.batch)))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})

    def step():
        if args.mode == "train":
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(args.batch)
            loss.wait_to_read()
        else:
            net(x).wait_to_read()

    for _ in range(2):
        step()
    mx.nd.waitall()
    iters, start = 0, time.perf_counter()
    while True:
        step()
        iters += 1
        if time.perf_counter() - start >= args.seconds:
            break
    mx.nd.waitall()
    return iters * args.batch / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--hybridize", choices=["none", "plain", "static"], default="none")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    print(json.dumps({"impl": f"mxnet-1.9.1 hybridize={args.hybridize}", "mode": args.mode,
                      "batch": args.batch, "value": measure(args), "unit": "samples/s"}))


if __name__ == "__main__":
    main()
