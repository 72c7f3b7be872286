"""Convolution and max-pooling on LeafNetwork's shapes (CPU, float32): pymx vs PyTorch.

    python bench/conv_bench.py [--impl pymx|torch] [--batch 64] [--repeat 5] [--json out.json]
                               [--jsonl]

PyTorch lives in its own virtual environment, so each implementation runs under the interpreter
that has it (`--impl torch` with /work/venv-torch/bin/python); bench/run.py puts the two side by
side. `timings(impl, batch, repeat)` returns {key: median milliseconds} with stable keys
"conv<i>/fwd", "conv<i>/fwd_bwd", "pool<i>/fwd", "pool<i>/fwd_bwd". Never asserts on speed.
"""
import argparse
import json
import statistics
import time

import numpy as onp

# (in_channels, height/width of the conv input, filters) of LeafNetwork's three conv blocks:
# Conv2D(kernel 2, stride 1, no pad) -> MaxPool2D(pool 4, stride 2).
BLOCKS = [(3, 128, 32), (32, 62, 64), (64, 29, 128)]


def _median_ms(fn, sync, repeat):
    fn()
    sync()  # warm-up: allocations, workspace growth
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _pymx_timings(batch, repeat):
    from pymx import autograd, npx
    from pymx._op import waitall
    from pymx.ndarray import from_numpy

    rng = onp.random.default_rng(0)
    out = {}
    for i, (cin, size, filters) in enumerate(BLOCKS, 1):
        x = from_numpy(rng.standard_normal((batch, cin, size, size), dtype="float32"))
        w = from_numpy(rng.standard_normal((filters, cin, 2, 2), dtype="float32"))
        b = from_numpy(onp.zeros(filters, "float32"))
        grads = [from_numpy(onp.zeros(a.shape, "float32")) for a in (x, w, b)]
        autograd.mark_variables([x, w, b], grads)

        def conv():
            return npx.convolution(x, w, b, kernel=(2, 2), num_filter=filters)

        def conv_fwd_bwd():
            with autograd.record():
                y = conv()
            y.backward()

        y = conv()
        y.wait_to_read()
        y_grads = [from_numpy(onp.zeros(y.shape, "float32"))]
        autograd.mark_variables([y], y_grads)

        def pool():
            return npx.pooling(y, kernel=(4, 4), stride=(2, 2))

        def pool_fwd_bwd():
            with autograd.record():
                p = pool()
            p.backward()

        out[f"conv{i}/fwd"] = _median_ms(conv, waitall, repeat)
        out[f"conv{i}/fwd_bwd"] = _median_ms(conv_fwd_bwd, waitall, repeat)
        out[f"pool{i}/fwd"] = _median_ms(pool, waitall, repeat)
        out[f"pool{i}/fwd_bwd"] = _median_ms(pool_fwd_bwd, waitall, repeat)
    return out


def _torch_timings(batch, repeat):
    import torch

    torch.manual_seed(0)
    out = {}
    nothing = lambda: None  # noqa: E731  (PyTorch's CPU ops are synchronous)
    for i, (cin, size, filters) in enumerate(BLOCKS, 1):
        x = torch.randn(batch, cin, size, size, requires_grad=True)
        conv = torch.nn.Conv2d(cin, filters, 2)

        def fwd_bwd():
            conv(x).sum().backward()

        with torch.no_grad():
            y0 = conv(x)
        y = y0.clone().requires_grad_(True)
        pool = torch.nn.MaxPool2d(4, 2)

        def pool_fwd_bwd():
            pool(y).sum().backward()

        with torch.no_grad():
            out[f"conv{i}/fwd"] = _median_ms(lambda: conv(x), nothing, repeat)
            out[f"pool{i}/fwd"] = _median_ms(lambda: pool(y), nothing, repeat)
        out[f"conv{i}/fwd_bwd"] = _median_ms(fwd_bwd, nothing, repeat)
        out[f"pool{i}/fwd_bwd"] = _median_ms(pool_fwd_bwd, nothing, repeat)
    return out


def timings(impl="pymx", batch=64, repeat=5):
    """Median milliseconds per operation for `impl` ("pymx" or "torch")."""
    if impl == "pymx":
        return _pymx_timings(batch, repeat)
    if impl == "torch":
        return _torch_timings(batch, repeat)
    raise ValueError(f"impl must be 'pymx' or 'torch', got {impl!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="pymx", choices=["pymx", "torch"])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="also write the timings to this file")
    parser.add_argument("--jsonl", action="store_true",
                        help="print one JSON line per operation instead (bench/run.py reads it)")
    args = parser.parse_args()
    measured = timings(args.impl, args.batch, args.repeat)
    if args.jsonl:
        for key, ms in measured.items():
            print(json.dumps({"key": key, "value": ms, "unit": "ms"}))
        return
    result = {f"{args.impl}/b{args.batch}/{k}": v for k, v in measured.items()}
    for key, ms in result.items():
        print(f"{key:32s} {ms:9.2f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
