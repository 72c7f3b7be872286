"""np.linalg on the CPU: pymx vs NumPy vs torch.linalg, milliseconds per call.

    python bench/measure_linalg.py --impl pymx|numpy|torch [--budget 0.3]

Runs under whichever interpreter has the implementation (`--impl torch` with
/work/venv-torch/bin/python); bench/run.py puts the three side by side. Prints one JSON line per
measurement, {"key": "<op> <shape> <dtype>", "value": ms, "unit": "ms/call"}, for inv, solve,
cholesky, eigh, svd and det on a batch of 64 matrices 64x64 and on one 512x512, float32 and
float64. A call's time includes waiting for its result (pymx runs asynchronously) and every
output (svd: u, s, vh; eigh: w, v; solve: one right-hand side per matrix). The inputs are
well-conditioned (determinants far from overflow): a general matrix I + X / (4 sqrt(n)) with X
standard normal, and the symmetric positive-definite G G^T of such a G for cholesky and eigh.
Never asserts on speed.
"""
import argparse
import json
import statistics
import time

import numpy as onp

SHAPES = [(64, 64, 64), (512, 512)]
DTYPES = ["float32", "float64"]
OPS = ["inv", "solve", "cholesky", "eigh", "svd", "det"]


def median_ms(call, sync, budget):
    """Median milliseconds of `call(); sync()` over as many calls as fit in about `budget`
    seconds (at least 5), after one warm-up call."""
    call()
    sync()
    times, spent = [], 0.0
    while len(times) < 5 or spent < budget:
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return statistics.median(times) * 1e3


def backend(impl):
    """(to_native(NumPy array), linalg namespace, sync) of an implementation."""
    if impl == "pymx":
        import pymx
        return pymx.np.array, pymx.np.linalg, pymx.npx.waitall
    if impl == "torch":
        import torch
        return torch.from_numpy, torch.linalg, lambda: None
    return onp.asarray, onp.linalg, lambda: None


def inputs(shape, dtype):
    """(general, symmetric positive-definite, right-hand sides) NumPy arrays of `shape`."""
    rng = onp.random.default_rng(0)
    n = shape[-1]
    general = onp.eye(n) + rng.standard_normal(shape) / (4 * onp.sqrt(n))
    spd = general @ onp.swapaxes(general, -1, -2)
    rhs = rng.standard_normal(shape[:-1] + (1,))
    return general.astype(dtype), spd.astype(dtype), rhs.astype(dtype)


def calls(linalg, general, spd, rhs):
    """{op: a call}; the three libraries spell these alike."""
    return {"inv": lambda: linalg.inv(general),
            "solve": lambda: linalg.solve(general, rhs),
            "cholesky": lambda: linalg.cholesky(spd),
            "eigh": lambda: linalg.eigh(spd),
            "svd": lambda: linalg.svd(general, full_matrices=False),
            "det": lambda: linalg.det(general)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["pymx", "numpy", "torch"], required=True)
    parser.add_argument("--budget", type=float, default=0.3, help="seconds per measurement")
    args = parser.parse_args()
    to_native, linalg, sync = backend(args.impl)
    for shape in SHAPES:
        for dtype in DTYPES:
            arrays = [to_native(a) for a in inputs(shape, dtype)]
            sync()
            per_op = calls(linalg, *arrays)
            for op in OPS:
                key = f"{op} {'x'.join(map(str, shape))} {dtype}"
                print(json.dumps({"key": key, "value": median_ms(per_op[op], sync, args.budget),
                                  "unit": "ms/call"}), flush=True)


if __name__ == "__main__":
    main()
