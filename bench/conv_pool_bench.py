"""LeafNetwork's three inference blocks on the CPU (float32): the fused _conv_relu_max_pool op
against convolution(relu) -> pooling(max) -> batch_norm run as separate ops.

    python bench/conv_pool_bench.py [--batch 1 4] [--repeat 300]

Each time is per call of one block: the median over `repeat` rounds of 20 calls pushed back to
back and waited for together (as a hybridized graph replays them; the separate ops also pay
their launch costs). Never asserts on speed.
"""
import argparse
import statistics
import time

import numpy as onp

from pymx import npx
from pymx._op import invoke, waitall
from pymx.ndarray import from_numpy

# (in_channels, height/width of the conv input, filters): Conv2D(2, relu) -> MaxPool2D(4, 2)
# -> BatchNorm, as bench/conv_bench.py.
BLOCKS = [(3, 128, 32), (32, 62, 64), (64, 29, 128)]


CALLS_PER_ROUND = 20


def median_ms(fn, repeat):
    for _ in range(5):  # warm-up: allocations, workspace growth
        fn()
    waitall()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(CALLS_PER_ROUND):
            fn()
        waitall()
        times.append((time.perf_counter() - start) * 1e3 / CALLS_PER_ROUND)
    return statistics.median(times)


def block_timings(batch, cin, size, filters, repeat):
    rng = onp.random.default_rng(0)

    def arr(shape, scale=1.0):
        return from_numpy((rng.standard_normal(shape) * scale).astype("float32"))

    x, w, b = arr((batch, cin, size, size)), arr((filters, cin, 2, 2), 0.3), arr((filters,), 0.1)
    gamma, beta, mean = arr((filters,)), arr((filters,)), arr((filters,), 0.1)
    var = from_numpy(rng.uniform(0.5, 2.0, filters).astype("float32"))
    attrs = {"kernel": (2, 2), "num_filter": filters, "pool_kernel": (4, 4), "pool_stride": (2, 2)}
    bn_attrs = dict(attrs, bn_eps=1e-5, bn_fix_gamma=False)

    def conv_pool():
        conv = npx.convolution(x, w, b, kernel=(2, 2), num_filter=filters, act_type="relu")
        return npx.pooling(conv, kernel=(4, 4), stride=(2, 2))

    def separate():
        return npx.batch_norm(conv_pool(), gamma, beta, mean, var, eps=1e-5, fix_gamma=False)

    def fused():
        return invoke("_conv_relu_max_pool", [x, w, b], attrs)[0]

    def fused_bn():
        return invoke("_conv_relu_max_pool", [x, w, b, gamma, beta, mean, var], bn_attrs)[0]

    return {"conv+pool": median_ms(conv_pool, repeat), "fused": median_ms(fused, repeat),
            "conv+pool+bn": median_ms(separate, repeat), "fused+bn": median_ms(fused_bn, repeat)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    for batch in args.batch:
        totals = {}
        for i, block in enumerate(BLOCKS, 1):
            times = block_timings(batch, *block, args.repeat)
            for key, ms in times.items():
                totals[key] = totals.get(key, 0.0) + ms
            print(f"b{batch} block{i}  " + "  ".join(f"{k} {v:.3f}" for k, v in times.items()))
        print(f"b{batch} total   " + "  ".join(f"{k} {v:.3f}" for k, v in totals.items())
              + "  (ms)")


if __name__ == "__main__":
    main()
