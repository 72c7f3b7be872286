"""einsum on the CPU: pymx vs NumPy (optimize=True) vs torch.einsum, milliseconds per call.

    python bench/measure_einsum.py --impl pymx|numpy|torch [--budget 0.3]
    python bench/measure_einsum.py --impl pymx --profile CALLS

Runs under whichever interpreter has the implementation; bench/run.py puts the three side by
side. Prints one JSON line per contraction, {"key": subscripts and shapes, "value": ms, "unit":
"ms/call"}, float32, the time of a call including waiting for its result. --profile CALLS prints
instead the operators pymx composes each contraction of (pymx.profiler, µs per call). Never
asserts on speed.
"""
import argparse
import json
import sys

import numpy as onp

from measure_linalg import median_ms

# (subscripts, operand shapes): a batched matrix product, a chain of three products whose
# order matters, attention scores (queries against keys per batch and head), a diagonal.
CONTRACTIONS = [("bij,bjk->bik", [(64, 128, 128), (64, 128, 128)]),
                ("ij,jk,kl->il", [(256, 256)] * 3),
                ("bhqd,bhkd->bhqk", [(8, 8, 128, 64), (8, 8, 128, 64)]),
                ("ii->i", [(1024, 1024)])]


def backend(impl):
    """(to_native(NumPy array), einsum(subscripts, *operands), sync) of an implementation."""
    if impl == "pymx":
        import pymx
        return pymx.np.array, pymx.np.einsum, pymx.npx.waitall
    if impl == "torch":
        import torch
        return torch.from_numpy, torch.einsum, lambda: None
    return onp.asarray, lambda s, *ops: onp.einsum(s, *ops, optimize=True), lambda: None


def profile_line(subscripts, operands, calls):
    """'subscripts: name xN µs; ...' of the pymx operators one einsum call runs (mean of `calls`
    calls after a warm-up; engine bookkeeping left out)."""
    from pymx import np, npx, profiler
    np.einsum(subscripts, *operands)
    npx.waitall()
    profiler.dumps(reset=True)
    profiler.set_state("run")
    for _ in range(calls):
        np.einsum(subscripts, *operands)
        npx.waitall()
    profiler.set_state("stop")
    entries = json.loads(profiler.dumps(format="json", reset=True))
    return f"{subscripts}: " + "; ".join(
        f"{e['name']} x{e['count'] // calls} {e['total_ms'] / calls * 1e3:.0f} us"
        for e in entries if e["name"] != "delete_var")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["pymx", "numpy", "torch"], required=True)
    parser.add_argument("--budget", type=float, default=0.3, help="seconds per measurement")
    parser.add_argument("--profile", type=int, default=0, metavar="CALLS",
                        help="pymx only: print each contraction's operators instead of timing")
    args = parser.parse_args()
    if args.profile and args.impl != "pymx":
        sys.exit("--profile is for --impl pymx (pymx.profiler)")
    to_native, einsum, sync = backend(args.impl)
    rng = onp.random.default_rng(0)
    for subscripts, shapes in CONTRACTIONS:
        operands = [to_native(rng.standard_normal(shape, dtype=onp.float32)) for shape in shapes]
        sync()
        if args.profile:
            print(profile_line(subscripts, operands, args.profile))
            continue
        key = f"{subscripts} {', '.join('x'.join(map(str, s)) for s in shapes)}"
        print(json.dumps({"key": key, "value": median_ms(lambda: einsum(subscripts, *operands),
                                                         sync, args.budget),
                          "unit": "ms/call"}), flush=True)


if __name__ == "__main__":
    main()
