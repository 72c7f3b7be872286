"""Tiny-op dispatch peers: `x = x + 1` on shape (4,), N ops then one sync; prints µs per op.

    python tiny_op.py numpy|torch|mxnet [--ops 10000] [--device cuda]
"""
import argparse
import json
import time


def run(framework, ops, device):
    if framework == "numpy":
        import numpy as onp
        x = onp.zeros(4, dtype=onp.float32)
        sync = lambda: None
    elif framework == "torch":
        import torch
        x = torch.zeros(4, device=device)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    else:
        import mxnet as mx
        x = mx.nd.zeros((4,), ctx=mx.gpu() if device == "cuda" else mx.cpu())
        sync = mx.nd.waitall
    best = float("inf")
    for _ in range(5):
        sync()
        start = time.perf_counter()
        for _ in range(ops):
            x = x + 1
        sync()
        best = min(best, (time.perf_counter() - start) / ops * 1e6)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("framework", choices=["numpy", "torch", "mxnet"])
    parser.add_argument("--ops", type=int, default=10000)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(json.dumps({"impl": args.framework, "device": args.device,
                      "value": run(args.framework, args.ops, args.device), "unit": "us/op"}))


if __name__ == "__main__":
    main()
