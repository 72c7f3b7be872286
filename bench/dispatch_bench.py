"""Tiny-op dispatch: `x = x + 1` on a (4,) array, n_ops times, then one sync; µs per op.

pymx (CPU; GPU when visible; also with autograd recording) side by side with NumPy and, when
importable, PyTorch. The per-op cost is the whole path: Python operator, pymx.np function,
Cython, C API, operator registry, engine push, allocation and release of the result.

    python bench/dispatch_bench.py [--ops 10000] [--repeats 5]

bench/run.py calls run(); the keys of its result are stable. Timings are the best of `repeats`.
"""
import argparse
import time


def _best_us_per_op(step, sync, start, n_ops, repeats):
    best = float("inf")
    for _ in range(repeats):
        x = start()
        sync(x)
        begin = time.perf_counter()
        for _ in range(n_ops):
            x = step(x)
        sync(x)
        best = min(best, (time.perf_counter() - begin) / n_ops * 1e6)
    return best


def _pymx(device, n_ops, repeats, record=False):
    from pymx import autograd, np

    def start():
        x = np.zeros((4,), device=device)
        if record:
            x.attach_grad()
        return x

    if not record:
        return _best_us_per_op(lambda x: x + 1, lambda x: x.wait_to_read(), start, n_ops, repeats)
    with autograd.record():
        return _best_us_per_op(lambda x: x + 1, lambda x: x.wait_to_read(), start, n_ops, repeats)


def _numpy(n_ops, repeats):
    import numpy

    return _best_us_per_op(lambda x: x + 1, lambda x: None,
                           lambda: numpy.zeros((4,), dtype=numpy.float32), n_ops, repeats)


def _torch(device, n_ops, repeats):
    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return _best_us_per_op(lambda x: x + 1, lambda x: sync(),
                           lambda: torch.zeros(4, device=device), n_ops, repeats)


def run(n_ops=10000, repeats=5):
    """Returns {key: µs per op}; a peer that is not installed (or no GPU) gives None."""
    import pymx

    has_gpu = pymx.num_gpus() > 0
    results = {
        "dispatch_pymx_cpu_us": _pymx(pymx.cpu(0), n_ops, repeats),
        "dispatch_pymx_cpu_autograd_us": _pymx(pymx.cpu(0), n_ops, repeats, record=True),
        "dispatch_pymx_gpu_us": _pymx(pymx.gpu(0), n_ops, repeats) if has_gpu else None,
        "dispatch_numpy_cpu_us": _numpy(n_ops, repeats),
        "dispatch_torch_cpu_us": None,
        "dispatch_torch_gpu_us": None,
    }
    try:
        import torch
    except ImportError:
        return results
    results["dispatch_torch_cpu_us"] = _torch("cpu", n_ops, repeats)
    if torch.cuda.is_available():
        results["dispatch_torch_gpu_us"] = _torch("cuda", n_ops, repeats)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    results = run(args.ops, args.repeats)
    print(f"x = x + 1 on (4,), {args.ops} ops + 1 sync, best of {args.repeats} (µs/op)")
    for key, value in results.items():
        print(f"  {key:32s} {'n/a' if value is None else f'{value:8.2f}'}")


if __name__ == "__main__":
    main()
