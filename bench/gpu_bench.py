"""GPU benchmarks, pymx side by side with PyTorch on the same GPU, as ratios.

    python bench/gpu_bench.py [--out results.json] [--quick]

Rows (every time is the median of several repeats, synchronised at the end of each repeat):
  tiny_op_us          `x = x + 1` on a (4,) array, 10k ops, then one sync: microseconds per op
                      (pymx also reports tiny_op_push_us: the Python loop alone, before the sync;
                      the gap to tiny_op_us is what the GPU worker and the GPU add)
  h2d_pageable_gbs    host -> GPU copy of 256 MiB from pageable memory: GB/s
  h2d_pinned_gbs      the same from page-locked memory
  d2h_pageable_gbs    GPU -> host into pageable memory
  d2h_pinned_gbs      GPU -> host into page-locked memory
  leafnet_train_b{4,64,256}_sps  LeafNetwork training step (forward, backward, SGD) on
                      3x128x128 images at batch 4, 64 and 256: samples/s; pymx imperative and
                      hybridized (..._hybrid_sps), torch eager
  leafnet_infer_b{1,64}_sps      LeafNetwork inference at batch 1 and 64: samples/s
                      (hybridized: one engine op per forward, replayed as a CUDA graph)
  leafnet_train_b64_peak_mib     peak GPU memory in use while first training at batch 64: MiB
                      (pymx: hybridized, measured first, as its allocator's peak is not reset;
                      torch: max_memory_allocated after reset_peak_memory_stats, its first
                      network row; both include the first steps' cuDNN algorithm searches)
A row whose side fails prints the error instead of a number; the script never asserts on speed.
With --budget-s, pymx gets the first 60 % of the budget and torch the rest; a row that would start
past its side's share prints "skipped" instead, and a SIGTERM (tests/gpu/run.sh's timeout) still
prints the table of the rows measured so far, so the table always comes out.
"""
import argparse
import json
import signal
import statistics
import time
import traceback

import numpy as onp

MiB = 1 << 20
COPY_ROWS = ("h2d_pageable_gbs", "h2d_pinned_gbs", "d2h_pageable_gbs", "d2h_pinned_gbs")


class Deadline:
    """The end of one side's share of --budget-s (time.monotonic(); None: no limit)."""

    def __init__(self, seconds):
        self.end = None if seconds is None else time.monotonic() + seconds

    def passed(self):
        return self.end is not None and time.monotonic() > self.end


SKIPPED = "skipped: --budget-s spent"


class Terminated(BaseException):
    """Raised by the SIGTERM handler, so that main() still prints the rows measured so far (a
    BaseException: the per-row `except Exception` handlers must not swallow it)."""


def median_time(fn, repeats, sync):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------------
# pymx
# ---------------------------------------------------------------------------------------------
def pymx_side(quick, deadline, results):
    import pymx
    from pymx import autograd, gluon, np, npx
    from pymx.gluon import nn
    from pymx.ndarray import from_numpy

    dev = pymx.gpu(0)

    def tiny_ops():
        x = np.zeros((4,), device=dev)
        x.wait_to_read()
        n = 10000
        push_times = []

        def run():
            nonlocal x
            start = time.perf_counter()
            for _ in range(n):
                x = x + 1
            push_times.append(time.perf_counter() - start)
            x.wait_to_read()

        run()  # warm-up: kernels loaded, allocator primed
        total = median_time(run, 3, npx.waitall) / n * 1e6
        results["tiny_op_push_us"] = statistics.median(push_times[1:]) / n * 1e6
        return total

    def copies():
        host = onp.ones(256 * MiB // 4, dtype="float32")
        on_gpu = from_numpy(host, device=dev)
        pinned = from_numpy(host, device=pymx.cpu_pinned(0))
        pinned_target = np.zeros(host.shape, device=pymx.cpu_pinned(0))
        target = np.zeros(host.shape, device=dev)
        npx.waitall()
        gb = host.nbytes / 1e9
        times = [
            median_time(lambda: from_numpy(host, device=dev).wait_to_read(), 5, npx.waitall),
            median_time(lambda: pinned.copyto(target).wait_to_read(), 5, npx.waitall),
            median_time(lambda: on_gpu.asnumpy(), 5, npx.waitall),
            median_time(lambda: on_gpu.copyto(pinned_target).wait_to_read(), 5, npx.waitall)]
        return {key: gb / t for key, t in zip(COPY_ROWS, times)}

    def leafnet(hybridize, batch, train, steps, dtype="float32"):
        net = leaf_network_pymx(nn)
        net.initialize(device=dev)
        net.cast(dtype)
        if hybridize:
            net.hybridize(static_alloc=True, static_shape=True)  # as bench/leafnet_bench.py
        data = np.random.uniform(size=(batch, 3, 128, 128), device=dev).astype(dtype)
        label = from_numpy(onp.random.default_rng(0).integers(0, 2, batch).astype("float32"),
                           device=dev)
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        # 16-bit weights are updated through float32 master copies.
        trainer = gluon.Trainer(net.collect_params(), "sgd",
                                {"learning_rate": 0.001, "multi_precision": dtype != "float32"})

        def step():
            if train:
                with autograd.record():
                    loss = loss_fn(net(data), label)
                loss.backward()
                trainer.step(batch)
            else:
                net(data)

        def run():
            for _ in range(steps):
                step()
            npx.waitall()

        run()  # warm-up (and the hybridize trace)
        return batch * steps / median_time(run, 3, npx.waitall)

    def training_peak_mib():
        leafnet(True, 64, True, 3)
        return dev.memory_stats()["peak_in_use"] / MiB

    # The memory row first: nothing else has used the device's allocator yet.
    measurements = [("leafnet_train_b64_peak_mib", training_peak_mib), ("tiny_op_us", tiny_ops),
                    ("copies", copies)]
    for mode, batch, steps in leafnet_shapes(quick):
        for hybridize in (False, True):
            key = f"leafnet_{mode}_b{batch}{'_hybrid' if hybridize else ''}_sps"
            measurements.append((key, lambda h=hybridize, m=mode, b=batch, n=steps:
                                 leafnet(h, b, m == "train", n)))
    bf16_steps = leafnet_shapes(quick)[1][2]
    measurements.append(("leafnet_train_b64_bf16_hybrid_sps",
                         lambda: leafnet(True, 64, True, bf16_steps, "bfloat16")))
    for key, fn in measurements:
        try:
            value = SKIPPED if deadline.passed() else fn()
        except Exception as error:  # report and go on with the other rows
            traceback.print_exc()
            value = f"error: {type(error).__name__}: {error}"[:200]
        if key == "copies":
            results.update(value if isinstance(value, dict) else dict.fromkeys(COPY_ROWS, value))
        else:
            results[key] = value
        print(f"pymx {key}: {value}", flush=True)  # kept in the log should a later row hang
    try:
        from pymx._c import core
        results["cuda_graph_stats"] = core.cuda_graph_stats()
    except Exception as error:
        results["cuda_graph_stats"] = f"error: {type(error).__name__}: {error}"[:200]
    return results


def leafnet_shapes(quick):
    """(mode, batch, steps per timed repeat) of the LeafNetwork rows, for both sides."""
    steps = 5 if quick else 20
    return [("train", 4, steps), ("train", 64, steps), ("train", 256, max(steps // 4, 2)),
            ("infer", 1, steps * 10), ("infer", 64, steps)]


def leaf_network_pymx(nn):
    def conv_block(filters):
        block = nn.HybridSequential()
        block.add(nn.Conv2D(channels=filters, kernel_size=2, activation="relu"),
                  nn.MaxPool2D(pool_size=4, strides=2), nn.BatchNorm())
        return block

    def dense_block(neurons):
        block = nn.HybridSequential()
        block.add(nn.Dense(neurons, activation="relu"), nn.Dropout(0.2))
        return block

    net = nn.HybridSequential()
    net.add(conv_block(32), conv_block(64), conv_block(128), nn.Flatten(), dense_block(100),
            dense_block(10), nn.Dense(2))
    return net


# ---------------------------------------------------------------------------------------------
# torch (the same network and measurements)
# ---------------------------------------------------------------------------------------------
def torch_side(quick, deadline, results):
    import torch
    from torch import nn

    # float32 as pymx computes it (Note [No TF32 in float32 convolutions]): torch's cuDNN
    # convolutions default to TF32. cuDNN algorithms measured per shape, as pymx's cudnn_tune.
    try:  # the legacy flags only: mixing them with fp32_precision makes torch raise
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    except Exception:
        traceback.print_exc()
    dev = torch.device("cuda:0")
    sync = torch.cuda.synchronize

    def measure(keys, fn):  # one failing row reports its error; the others still run
        try:
            values = [SKIPPED] * len(keys) if deadline.passed() else fn()
        except Exception as error:
            traceback.print_exc()
            values = [f"error: {type(error).__name__}: {error}"[:200]] * len(keys)
            try:
                sync()
            except Exception:
                pass
        for key, value in zip(keys, values):
            results[key] = value
            print(f"torch {key}: {value}", flush=True)

    def tiny_ops():
        x = torch.zeros(4, device=dev)
        n = 10000

        def tiny():
            nonlocal x
            for _ in range(n):
                x = x + 1

        tiny()
        sync()
        return [median_time(tiny, 3, sync) / n * 1e6]

    def copies():
        host = torch.ones(256 * MiB // 4)
        pinned = host.pin_memory()
        pinned_target = torch.empty_like(host).pin_memory()
        on_gpu = host.to(dev)
        sync()
        gb = host.numel() * 4 / 1e9
        return [gb / median_time(lambda: host.to(dev), 5, sync),
                gb / median_time(lambda: pinned.to(dev, non_blocking=True), 5, sync),
                gb / median_time(lambda: on_gpu.cpu(), 5, sync),
                gb / median_time(lambda: pinned_target.copy_(on_gpu, non_blocking=True), 5, sync)]

    measure(["tiny_op_us"], tiny_ops)
    measure(COPY_ROWS, copies)

    def conv_block(cin, cout):
        return [nn.Conv2d(cin, cout, 2), nn.ReLU(), nn.MaxPool2d(4, 2), nn.BatchNorm2d(cout)]

    def network():
        return nn.Sequential(*conv_block(3, 32), *conv_block(32, 64), *conv_block(64, 128),
                             nn.Flatten(), nn.Linear(128 * 13 * 13, 100), nn.ReLU(),
                             nn.Dropout(0.2), nn.Linear(100, 10), nn.ReLU(), nn.Dropout(0.2),
                             nn.Linear(10, 2)).to(dev)

    net = network()
    opt = torch.optim.SGD(net.parameters(), lr=0.001)
    loss_fn = nn.CrossEntropyLoss()

    def leafnet(mode, batch, steps, net=net, opt=opt, dtype=torch.float32):
        data = torch.rand(batch, 3, 128, 128, device=dev, dtype=dtype)
        label = torch.randint(0, 2, (batch,), device=dev)

        def run():
            for _ in range(steps):
                if mode == "train":
                    opt.zero_grad()
                    loss_fn(net(data), label).backward()
                    opt.step()
                else:
                    with torch.no_grad():
                        net(data)

        net.train(mode == "train")
        run()  # warm-up (and cuDNN's algorithm search)
        sync()
        return [batch * steps / median_time(run, 3, sync)]

    def training_peak_mib():
        sync()
        torch.cuda.reset_peak_memory_stats(dev)
        leafnet("train", 64, 3)
        return [torch.cuda.max_memory_allocated(dev) / MiB]

    # First of the network rows, as on the pymx side: the peak includes the first training
    # steps' algorithm searches on both sides.
    measure(["leafnet_train_b64_peak_mib"], training_peak_mib)
    for mode, batch, steps in leafnet_shapes(quick):
        measure([f"leafnet_{mode}_b{batch}_sps"], lambda m=mode, b=batch, n=steps: leafnet(m, b, n))

    def bf16_training():  # the weights in bfloat16 too (pymx keeps float32 master copies)
        bf16_net = network().to(torch.bfloat16)
        bf16_opt = torch.optim.SGD(bf16_net.parameters(), lr=0.001)
        return leafnet("train", 64, leafnet_shapes(quick)[1][2], bf16_net, bf16_opt,
                       torch.bfloat16)

    measure(["leafnet_train_b64_bf16_sps"], bf16_training)
    return results


ROWS = [("tiny_op_us", "tiny-op dispatch, us/op (lower is better)", True),
        ("h2d_pageable_gbs", "H2D pageable, GB/s", False),
        ("h2d_pinned_gbs", "H2D pinned, GB/s", False),
        ("d2h_pageable_gbs", "D2H pageable, GB/s", False),
        ("d2h_pinned_gbs", "D2H pinned, GB/s", False)]
for _mode, _batch, _ in leafnet_shapes(False):
    ROWS += [(f"leafnet_{_mode}_b{_batch}_sps", f"LeafNetwork {_mode} b{_batch}, samples/s", False),
             (f"leafnet_{_mode}_b{_batch}_hybrid_sps", "  hybridized", False)]
ROWS += [("leafnet_train_b64_bf16_hybrid_sps", "LeafNetwork train b64 bfloat16, samples/s", False),
         ("leafnet_train_b64_peak_mib", "LeafNetwork train b64 peak GPU memory, MiB", True)]


def table(pymx_results, torch_results):
    lines = [f"{'measurement':44s} {'pymx':>12s} {'torch':>12s} {'pymx/torch':>11s}"]
    for key, label, lower_is_better in ROWS:
        mine = pymx_results.get(key, "-")
        peer = torch_results.get(key.replace("_hybrid", ""), "-")
        ratio = "-"
        if isinstance(mine, float) and isinstance(peer, float) and mine > 0:
            ratio = f"{(peer / mine if lower_is_better else mine / peer):.2f}x"
        fmt = lambda v: f"{v:12.2f}" if isinstance(v, float) else f"{str(v)[:12]:>12s}"
        lines.append(f"{label:44s} {fmt(mine)} {fmt(peer)} {ratio:>11s}")
    lines.append("ratio: > 1 means pymx is faster (for us/op: torch time / pymx time)")
    push = pymx_results.get("tiny_op_push_us")
    if isinstance(push, float):
        lines.append(f"pymx tiny op: the Python loop alone takes {push:.2f} us/op (the rest of "
                     f"tiny_op_us is the GPU worker and the GPU)")
    if "cuda_graph_stats" in pymx_results:
        lines.append(f"pymx CUDA graphs of hybridized replays: {pymx_results['cuda_graph_stats']}")
    errors = [f"{side} {k}: {v}" for side, res in (("pymx", pymx_results), ("torch", torch_results))
              for k, v in res.items() if isinstance(v, str)]
    return "\n".join(lines + errors)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    parser.add_argument("--budget-s", type=float,
                        help="seconds for the whole run: rows that would start later are skipped")
    args = parser.parse_args()

    def terminate(signum, frame):
        raise Terminated(f"signal {signum}: the rows after this one were not measured")

    signal.signal(signal.SIGTERM, terminate)
    end = None if args.budget_s is None else time.monotonic() + args.budget_s
    mine, peer = {}, {}
    try:
        for side, results, share in ((pymx_side, mine, 0.6), (torch_side, peer, 1.0)):
            # pymx's share is 60 % of the budget; torch gets whatever is left after it.
            seconds = None if end is None else share * (end - time.monotonic())
            try:
                side(args.quick, Deadline(seconds), results)
            except Exception as error:  # torch missing or failing: report the other side alone
                traceback.print_exc()
                results["error"] = f"{type(error).__name__}: {error}"[:200]
    except Terminated as error:
        print(error, flush=True)
        mine["terminated"] = str(error)
    print(table(mine, peer), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"pymx": mine, "torch": peer}, f, indent=2)


if __name__ == "__main__":
    main()
