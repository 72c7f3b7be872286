"""pymx operators against NumPy, side by side: sgemm 1024^3, elementwise add of 16M floats, and
tiny-op dispatch (x = x + 1 on 4 floats). Prints a table with ratios (>1: pymx is faster).

    python bench/ops_bench.py [--quick]
"""
import argparse
import time

import numpy as onp

import pymx
from pymx import np


def best_of(fn, repeats):
    fn()  # warm up: allocations, thread start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = parser.parse_args()
    n = 512 if args.quick else 1024
    elems = 1 << (20 if args.quick else 24)
    repeats = 3 if args.quick else 10
    tiny_ops = 1000 if args.quick else 10000

    rows = []
    a, b = onp.random.rand(n, n).astype(onp.float32), onp.random.rand(n, n).astype(onp.float32)
    pa, pb = np.array(a), np.array(b)
    # After a call NumPy's OpenBLAS threads keep spinning for a while and would take the core
    # that pymx's threads (which sleep when idle) need: pymx goes first, and the rows after wait
    # for those threads to go to sleep.
    t_mx = best_of(lambda: np.matmul(pa, pb).wait_to_read(), repeats)
    t_np = best_of(lambda: onp.matmul(a, b), repeats)
    time.sleep(1.0)
    rows.append((f"sgemm {n}^3 (GFLOP/s)", 2 * n ** 3 / t_np / 1e9, 2 * n ** 3 / t_mx / 1e9))

    x, y = onp.random.rand(elems).astype(onp.float32), onp.random.rand(elems).astype(onp.float32)
    px, py = np.array(x), np.array(y)
    out_np, out_mx = onp.empty_like(x), np.empty((elems,))
    t_np = best_of(lambda: onp.add(x, y, out=out_np), repeats)
    t_mx = best_of(lambda: np.add(px, py, out=out_mx).wait_to_read(), repeats)
    gbs = 3 * 4 * elems / 1e9
    rows.append((f"add {elems} floats (GB/s)", gbs / t_np, gbs / t_mx))

    def tiny_pymx():
        v = np.zeros((4,))
        for _ in range(tiny_ops):
            v = v + 1
        v.wait_to_read()

    def tiny_numpy():
        v = onp.zeros((4,), onp.float32)
        for _ in range(tiny_ops):
            v = v + 1

    rows.append(("x = x + 1, (4,) (us/op, lower is better)",
                 best_of(tiny_numpy, 3) / tiny_ops * 1e6, best_of(tiny_pymx, 3) / tiny_ops * 1e6))

    print(f"{'benchmark':45s} {'numpy':>10s} {'pymx':>10s} {'pymx/numpy':>11s}")
    for name, v_np, v_mx in rows:
        print(f"{name:45s} {v_np:10.2f} {v_mx:10.2f} {v_mx / v_np:11.2f}")
    pymx.waitall()


if __name__ == "__main__":
    main()
