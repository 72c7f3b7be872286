"""Where the time of a LeafNetwork step goes: pymx.profiler over a few steps, per operator.

    python bench/profile_leafnet.py [--device gpu] [--batch 64] [--infer] [--hybridize]
                                    [--steps 10] [--top 15] [--trace profile.json]

Prints the wall time per step and the operators with the most total time, on the device's
timeline (for a GPU, the GPU time of each kernel sequence and, separately, the worker's time
launching it). A step's GPU time well below its wall time means the GPU waits for the host.
"""
import argparse
import json
import time

import numpy as onp

import pymx
from pymx import autograd, gluon, np, npx, profiler
from pymx._train import LeafNetwork


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="gpu" if pymx.num_gpus() else "cpu",
                        help="cpu or gpu (device 0); default: gpu when one is visible")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--infer", action="store_true", help="forward only (default: training)")
    parser.add_argument("--hybridize", action="store_true")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=15, help="operators listed per timeline")
    parser.add_argument("--trace", help="also write a Chrome trace of the profiled steps here")
    args = parser.parse_args()

    device = pymx.Device(args.device, 0)
    net = LeafNetwork(dropout=0.2)
    net.initialize(device=device)
    if args.hybridize:
        net.hybridize(static_alloc=True, static_shape=True)  # as bench/leafnet_bench.py
    data = np.random.uniform(size=(args.batch, 3, 128, 128), device=device)
    label = np.array(onp.random.default_rng(0).integers(0, 2, args.batch).astype("float32"),
                     device=device)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.001})

    # Each step waits for its result, as bench/leafnet_bench.py does: a Python thread that ran
    # ahead would take a core from the operators (on the CPU) and time queueing, not steps.
    def step():
        if args.infer:
            return net(data)
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(args.batch)
        return loss

    for _ in range(3):  # warm-up: kernels, allocator, the hybridized graph
        step().wait_to_read()
    npx.waitall()

    profiler.dumps(reset=True)
    if args.trace:
        profiler.set_config(filename=args.trace)
    profiler.set_state("run")
    start = time.perf_counter()
    for _ in range(args.steps):
        step().wait_to_read()
    npx.waitall()
    wall = time.perf_counter() - start
    profiler.set_state("stop")
    if args.trace:
        profiler.dump()

    entries = json.loads(profiler.dumps(format="json", reset=True))
    mode = ("inference" if args.infer else "training") + (", hybridized" if args.hybridize else "")
    print(f"LeafNetwork {mode}, batch {args.batch} on {device}: {wall / args.steps * 1e3:.3f} ms "
          f"per step ({args.batch * args.steps / wall:,.0f} samples/s), {args.steps} steps")
    timelines = sorted({(e["device"], e["timeline"]) for e in entries}, key=lambda k: k[1] != "gpu")
    for device_name, timeline in timelines:
        rows = [e for e in entries if (e["device"], e["timeline"]) == (device_name, timeline)]
        # A hybridized replay is one engine op, "graph", whose kernels are profiled one by one as
        # well (Note [Bulk execution]): its span contains theirs, so it is left out of the sums.
        kernels = [e for e in rows if e["name"] != "graph"]
        total = sum(e["total_ms"] for e in kernels)
        label = "GPU time" if timeline == "gpu" else "worker time"
        print(f"\n{device_name} {label}: {total / args.steps:.3f} ms per step in "
              f"{sum(e['count'] for e in kernels) // args.steps} ops"
              + (" (\"graph\": the hybridized replays that contain them)"
                 if len(kernels) < len(rows) else ""))
        print(f"  {'operator':<32}{'calls/step':>11}{'ms/step':>10}{'share':>8}{'us/call':>10}")
        for e in rows[:args.top]:
            share = e["total_ms"] / total if total > 0 else float("nan")
            print(f"  {e['name']:<32}{e['count'] / args.steps:>11.1f}"
                  f"{e['total_ms'] / args.steps:>10.3f}{share:>8.1%}"
                  f"{e['avg_ms'] * 1e3:>10.1f}")


if __name__ == "__main__":
    main()
