"""The lstm case in MXNet 1.9.1 Gluon (the peer for bench/run.py): gluon.rnn.LSTM (the fused RNN
operator; oneDNN's LSTM on the CPU), 2 layers, hidden 256, input 128, 35 steps (layout TNC), zero
begin states, float32. Prints one JSON line.

    python lstm_mxnet.py --mode train|infer [--batch 32] [--hybridize none|plain|static]
                         [--seconds 3]

The training step is the pymx one (bench/measure_pymx.py): forward, L2Loss on the outputs,
backward, SGD update.
"""
import mxnet as mx
from mxnet import gluon

import mxnet_gluon

LAYERS, HIDDEN, INPUT, STEPS = 2, 256, 128, 35


def measure(args):
    mx.random.seed(0)
    net = gluon.rnn.LSTM(HIDDEN, num_layers=LAYERS, input_size=INPUT)
    net.initialize()
    mxnet_gluon.hybridize(net, args.hybridize)
    x = mx.nd.random.normal(shape=(STEPS, args.batch, INPUT))
    y = mx.nd.random.normal(shape=(STEPS, args.batch, HIDDEN))
    loss_fn = gluon.loss.L2Loss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    return mxnet_gluon.samples_per_second(net, x, y, loss_fn, trainer, args)


def main():
    parser = mxnet_gluon.parser(default_batch=32)
    args = parser.parse_args()
    mxnet_gluon.report(args, measure(args))


if __name__ == "__main__":
    main()
