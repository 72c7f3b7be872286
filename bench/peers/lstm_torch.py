"""The lstm case in PyTorch (the peer for bench/run.py): nn.LSTM, 2 layers, hidden 256, input 128,
35 steps (seq-first), zero begin states, float32. Prints one JSON line.

    python lstm_torch.py --mode train|infer [--batch 32] [--seconds 3] [--device cuda]

The training step is the pymx one (bench/measure_pymx.py): forward, L2 loss on the outputs
(0.5 * mean squared error, gluon's L2Loss), backward, SGD update.
"""
import argparse
import json

import torch
from torch import nn

import peer_timing

LAYERS, HIDDEN, INPUT, STEPS = 2, 256, 128, 35


def measure(args):
    device = torch.device(args.device)
    torch.manual_seed(0)
    net = nn.LSTM(INPUT, HIDDEN, num_layers=LAYERS).to(device)
    x = torch.randn(STEPS, args.batch, INPUT, device=device)
    y = torch.randn(STEPS, args.batch, HIDDEN, device=device)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)

    def l2_loss(output):  # nn.LSTM returns (outputs, states)
        return 0.5 * (output[0] - y).square().mean()

    step = peer_timing.torch_step(net, x, l2_loss, opt, args.mode, device)
    return peer_timing.samples_per_second(step, args.batch, args.seconds, warmup=3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    print(json.dumps({"impl": "torch eager", "mode": args.mode, "batch": args.batch,
                      "value": measure(args), "unit": "samples/s"}))


if __name__ == "__main__":
    main()
