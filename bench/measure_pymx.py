"""One pymx measurement per call, printed as a JSON line (what bench/run.py compares with peers).

    python bench/measure_pymx.py tiny_op [--ops 10000] [--device gpu] [--record]
    python bench/measure_pymx.py leafnet --mode train|infer --batch 64 [--hybridize] [--device gpu]
                                 [--dtype bfloat16]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pymx  # noqa: E402
from pymx import autograd, np  # noqa: E402


def tiny_op(ops, device, record):
    """Best of 5: µs per `x = x + 1` on shape (4,), `ops` pushes then one sync. Recording, each
    round starts again from the variable and frees its tape of `ops` nodes inside the timed
    region, as a training step does (rather than growing one tape over all rounds)."""
    variable = np.zeros((4,), device=device)
    if record:
        variable.attach_grad()
    best = float("inf")
    for _ in range(5):
        pymx.waitall()
        start = time.perf_counter()
        x = variable
        with autograd.record() if record else autograd.pause():
            for _ in range(ops):
                x = x + 1
        x.wait_to_read()
        del x  # the tape goes with the last result
        best = min(best, (time.perf_counter() - start) / ops * 1e6)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["tiny_op", "leafnet"])
    parser.add_argument("--ops", type=int, default=10000)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hybridize", action="store_true")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", help="leafnet training: the net's dtype")
    args = parser.parse_args()
    device = pymx.gpu(0) if args.device in ("gpu", "cuda") else pymx.cpu(0)
    if args.what == "tiny_op":
        result = {"value": tiny_op(args.ops, device, args.record), "unit": "us/op"}
    else:
        import leafnet_bench
        if args.mode == "train":
            value = leafnet_bench.train_samples_per_s(args.batch, args.hybridize, args.seconds,
                                                      device, args.dtype)
        else:
            value = leafnet_bench.infer_samples_per_s(args.batch, args.hybridize, args.seconds,
                                                      device)
        result = {"value": value, "unit": "samples/s"}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
