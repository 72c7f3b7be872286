"""softmax / log_softmax (forward and backward) and normal sampling on the CPU, pymx against
PyTorch, side by side. Prints a table of median milliseconds per call (lower is better).

    python bench/softmax_random_bench.py [--repeats 15] [--torch-python PATH] [--threads 2]
                                         [--json results.json]

pymx runs in this process; PyTorch runs the same cases in a child process of its own interpreter
(a missing interpreter leaves its column out), with torch.set_num_threads(--threads). Backward is
timed on the backward operator alone (pymx's softmax_backward / log_softmax_backward, PyTorch's
_softmax_backward_data / _log_softmax_backward_data), from the forward's output and a random
out_grad. Nothing here asserts on speed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# (label, shape, axis) of the softmax cases: a language model's output over a 30k vocabulary,
# attention scores (8 x 8 heads x 128 queries, 128 keys), a classifier head, and a softmax along
# the first axis (strided rows).
SOFTMAX_CASES = [("(32, 30000)", (32, 30000), -1),
                 ("(8*8*128, 128)", (8 * 8 * 128, 128), -1),
                 ("(64, 10)", (64, 10), -1),
                 ("(1000, 256) axis=0", (1000, 256), 0)]
NORMAL_SIZES = [1_000_000, 10_000_000]


def median_ms(fn, repeats):
    for _ in range(3):  # warm up: allocations, thread start
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def pymx_cases(repeats):
    import numpy as onp
    from pymx import np, npx
    from pymx._op import invoke

    rng = onp.random.default_rng(0)
    results = {}
    for label, shape, axis in SOFTMAX_CASES:
        x = np.array(rng.standard_normal(shape).astype(onp.float32))
        dy = np.array(rng.standard_normal(shape).astype(onp.float32))
        for name in ("softmax", "log_softmax"):
            forward = getattr(npx, name)
            y = forward(x, axis=axis)
            results[f"{name} {label} fwd"] = median_ms(
                lambda: forward(x, axis=axis).wait_to_read(), repeats)
            results[f"{name} {label} bwd"] = median_ms(
                lambda: invoke(f"{name}_backward", [dy, y], {"axis": axis})[0].wait_to_read(),
                repeats)
    for n in NORMAL_SIZES:
        results[f"normal {n:,} float32"] = median_ms(
            lambda: np.random.normal(size=(n,)).wait_to_read(), max(3, repeats // 3))
    return results


def torch_cases(repeats, threads):
    import torch

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    # PyTorch's first large softmax in a process took ~10 ms more than the next ones (its thread
    # pool starting): a few calls first, so that the first case is timed warm too.
    warm = torch.randn(SOFTMAX_CASES[0][1], generator=gen)
    for _ in range(20):
        torch.softmax(warm, -1)
    results = {}
    for label, shape, axis in SOFTMAX_CASES:
        x = torch.randn(shape, generator=gen)
        dy = torch.randn(shape, generator=gen)
        for name, forward, backward in (
                ("softmax", torch.softmax, torch._softmax_backward_data),
                ("log_softmax", torch.log_softmax, torch._log_softmax_backward_data)):
            y = forward(x, axis)
            results[f"{name} {label} fwd"] = median_ms(lambda: forward(x, axis), repeats)
            results[f"{name} {label} bwd"] = median_ms(
                lambda: backward(dy, y, axis, torch.float32), repeats)
    for n in NORMAL_SIZES:
        results[f"normal {n:,} float32"] = median_ms(lambda: torch.randn(n), max(3, repeats // 3))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2, help="PyTorch's intra-op threads")
    parser.add_argument("--torch-python", default="/work/venv-torch/bin/python")
    parser.add_argument("--json", help="also write {case: {impl: ms}} here")
    parser.add_argument("--impl", choices=["pymx", "torch"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.impl == "torch":  # the child process: one JSON line
        print(json.dumps(torch_cases(args.repeats, args.threads)))
        return

    mine = pymx_cases(args.repeats)
    theirs = {}
    if os.path.exists(args.torch_python):
        done = subprocess.run([args.torch_python, os.path.abspath(__file__), "--impl", "torch",
                               "--repeats", str(args.repeats), "--threads", str(args.threads)],
                              capture_output=True, text=True, check=True)
        theirs = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{'case':<42} {'pymx ms':>10} {'torch ms':>10}")
    for case, ms in mine.items():
        other = f"{theirs[case]:10.3f}" if case in theirs else f"{'-':>10}"
        print(f"{case:<42} {ms:10.3f} {other}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({case: {"pymx": ms, "torch": theirs.get(case)} for case, ms in mine.items()},
                      f, indent=1)


if __name__ == "__main__":
    main()
