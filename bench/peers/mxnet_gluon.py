"""What the MXNet 1.9.1 Gluon peers (leafnet_mxnet.py, lstm_mxnet.py, resnet_mxnet.py) share:
their command line, hybridization, the timed training or inference step, and the JSON line."""
import argparse
import json

import mxnet as mx
from mxnet import autograd

import peer_timing


def parser(default_batch):
    """The peers' common arguments; a peer adds its own."""
    arguments = argparse.ArgumentParser()
    arguments.add_argument("--mode", choices=["train", "infer"], default="train")
    arguments.add_argument("--batch", type=int, default=default_batch)
    arguments.add_argument("--hybridize", choices=["none", "plain", "static"], default="none")
    arguments.add_argument("--seconds", type=float, default=3.0)
    return arguments


def hybridize(net, how):
    if how == "plain":
        net.hybridize()
    elif how == "static":
        net.hybridize(static_alloc=True, static_shape=True)


def samples_per_second(net, x, y, loss_fn, trainer, args, warmup=3):
    """Samples per second of training steps (forward, loss, backward, trainer.step) or forward
    passes, each waited for, after `warmup` untimed ones; at least one timed step."""
    def step():
        if args.mode == "train":
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(args.batch)
            loss.wait_to_read()
        else:
            net(x).wait_to_read()

    return peer_timing.samples_per_second(step, args.batch, args.seconds, warmup,
                                          finish=mx.nd.waitall)


def report(args, value):
    print(json.dumps({"impl": f"mxnet-1.9.1 hybridize={args.hybridize}", "mode": args.mode,
                      "batch": args.batch, "value": value, "unit": "samples/s"}))
