"""The lstm case in MXNet 1.9.1 Gluon (the peer for bench/run.py): gluon.rnn.LSTM (the fused RNN
operator; oneDNN's LSTM on the CPU), 2 layers, hidden 256, input 128, 35 steps (layout TNC), zero
begin states, float32. Prints one JSON line.

    python lstm_mxnet.py --mode train|infer [--batch 32] [--hybridize none|plain|static]
                         [--seconds 3]

The training step is the pymx one (bench/measure_pymx.py): forward, L2Loss on the outputs,
backward, SGD update.
"""
import argparse
import json
import time

import mxnet as mx
from mxnet import autograd, gluon

LAYERS, HIDDEN, INPUT, STEPS = 2, 256, 128, 35


def measure(args):
    mx.random.seed(0)
    net = gluon.rnn.LSTM(HIDDEN, num_layers=LAYERS, input_size=INPUT)
    net.initialize()
    if args.hybridize == "plain":
        net.hybridize()
    elif args.hybridize == "static":
        net.hybridize(static_alloc=True, static_shape=True)
    x = mx.nd.random.normal(shape=(STEPS, args.batch, INPUT))
    y = mx.nd.random.normal(shape=(STEPS, args.batch, HIDDEN))
    loss_fn = gluon.loss.L2Loss()
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
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--hybridize", choices=["none", "plain", "static"], default="none")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    print(json.dumps({"impl": f"mxnet-1.9.1 hybridize={args.hybridize}", "mode": args.mode,
                      "batch": args.batch, "value": measure(args), "unit": "samples/s"}))


if __name__ == "__main__":
    main()
