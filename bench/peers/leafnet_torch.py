"""LeafNetwork in PyTorch (the peer for bench/run.py). Prints one JSON line per measurement.

    python leafnet_torch.py --mode train --batch 64 [--channels-last] [--compile] [--device cuda]
                            [--seconds 3] [--dtype bfloat16]

--compile measures torch.compile(net) (inductor); its compilation happens in the warm-up steps.
"""
import argparse
import json
import time

import torch
from torch import nn


def conv_block(in_channels, filters):
    return [nn.Conv2d(in_channels, filters, kernel_size=2), nn.ReLU(),
            nn.MaxPool2d(kernel_size=4, stride=2), nn.BatchNorm2d(filters)]


def leaf_network():
    return nn.Sequential(
        *conv_block(3, 32), *conv_block(32, 64), *conv_block(64, 128), nn.Flatten(),
        nn.Linear(21632, 100), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(100, 10), nn.ReLU(), nn.Dropout(0.2), nn.Linear(10, 2))


def measure(args):
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    net = leaf_network().to(device, dtype)
    x = torch.rand(args.batch, 3, 128, 128, device=device, dtype=dtype)
    y = torch.randint(0, 2, (args.batch,), device=device)
    if args.channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.001)
    model = torch.compile(net) if args.compile else net

    def step():
        if args.mode == "train":
            net.train()
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
        else:
            net.eval()
            with torch.no_grad():
                model(x)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(3):
        step()
    sync()
    iters, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        step()
        iters += 1
        if device.type == "cuda" and iters % 10:
            continue
        sync()
    sync()
    elapsed = time.perf_counter() - start
    return iters * args.batch / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--dtype", default="float32", help="the net's and the data's dtype")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    name = ("torch.compile" if args.compile else "torch eager") + (
        " channels_last" if args.channels_last else "")
    print(json.dumps({"impl": name, "mode": args.mode, "batch": args.batch,
                      "value": measure(args), "unit": "samples/s"}))


if __name__ == "__main__":
    main()
