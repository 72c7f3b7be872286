"""Runs pymx and its peers side by side, alternating rounds, and reports medians and ratios.

    python bench/run.py [--quick] [--rounds 3]
                        [--cases tiny_op,leafnet,leafnet16,memory,conv,ops,pipeline,engine,
                                 lstm,resnet,transformer,resnet_convs,linalg,einsum]
                        [--leafnet-shapes train:1,infer:4] [--resnet-image-size 224]
                        [--torch-python PATH] [--mxnet-python PATH] [--device cpu|gpu]
                        [--json results.json] [--markdown results.md]

Each measurement is a fresh process (bench/measure_pymx.py, bench/peers/*.py) printing one JSON
line {"value", "unit"} (conv, resnet_convs, linalg, einsum: one line per layer or operation); the
`memory` case instead reads the peak resident set size the kernel recorded for the training
process (wait4's rusage). `ops`, `pipeline` and `engine` are suites that already compare with
their peer inside one process (NumPy; Pillow + NumPy; the naive engine): their tables are copied
through. Peers live in their own virtual environments (MXNet 1.9.1 needs numpy<1.24), hence the
interpreter paths. A peer whose interpreter is missing is left out of the table rather than
failing the run. Nothing here asserts on speed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "peers")


def pymx_cmd(*args):
    return [sys.executable, os.path.join(HERE, "measure_pymx.py"), *args]


def cases(args):
    """(case key, unit direction, [(impl, argv)]) for every comparison requested."""
    torch, mxnet, dev = args.torch_python, args.mxnet_python, args.device
    seconds = "1" if args.quick else "3"
    out = []
    if "tiny_op" in args.cases:
        impls = [("pymx", pymx_cmd("tiny_op", "--device", dev)),
                 ("pymx (recording)", pymx_cmd("tiny_op", "--device", dev, "--record")),
                 ("torch", [torch, os.path.join(PEERS, "tiny_op.py"), "torch", "--device",
                            "cuda" if dev == "gpu" else "cpu"])]
        if dev == "cpu":
            impls += [("numpy", [sys.executable, os.path.join(PEERS, "tiny_op.py"), "numpy"]),
                      ("mxnet-1.9.1", [mxnet, os.path.join(PEERS, "tiny_op.py"), "mxnet"])]
        out.append(("tiny_op x=x+1 (4,) 10k ops", "lower", impls))
    if "leafnet" in args.cases:
        shapes = [("train", 1), ("train", 4), ("train", 64), ("infer", 1), ("infer", 4), ("infer", 64)]
        if args.quick:
            shapes = [("train", 64), ("infer", 1)]
        if args.leafnet_shapes:
            shapes = [(mode, int(batch)) for mode, batch in
                      (item.split(":") for item in args.leafnet_shapes.split(","))]
        if dev == "gpu":
            shapes += [("train", 256)] if not args.quick else []
        for mode, batch in shapes:
            common = ["--mode", mode, "--batch", str(batch), "--seconds", seconds]
            impls = [("pymx imperative", pymx_cmd("leafnet", *common, "--device", dev)),
                     ("pymx hybridized", pymx_cmd("leafnet", *common, "--hybridize",
                                                  "--device", dev)),
                     ("torch eager", [torch, os.path.join(PEERS, "leafnet_torch.py"), *common,
                                      "--device", "cuda" if dev == "gpu" else "cpu"])]
            if dev == "cpu":
                impls += [("torch eager channels_last",
                           [torch, os.path.join(PEERS, "leafnet_torch.py"), *common,
                            "--channels-last"]),
                          ("mxnet-1.9.1 imperative",
                           [mxnet, os.path.join(PEERS, "leafnet_mxnet.py"), *common]),
                          ("mxnet-1.9.1 hybridize(static)",
                           [mxnet, os.path.join(PEERS, "leafnet_mxnet.py"), *common,
                            "--hybridize", "static"])]
                if mode == "infer":  # the best CPU inference peer (reference/anchors.md)
                    impls.append(("torch.compile channels_last",
                                  [torch, os.path.join(PEERS, "leafnet_torch.py"), *common,
                                   "--channels-last", "--compile"]))
            out.append((f"leafnet {mode} batch {batch} ({dev})", "higher", impls))
    if "leafnet16" in args.cases:
        # Training with 16-bit weights: pymx with float32 master copies, torch without.
        for dtype in ("bfloat16", "float16"):
            common = ["--mode", "train", "--batch", "64", "--seconds", seconds, "--dtype", dtype]
            out.append((f"leafnet train batch 64 {dtype} (cpu)", "higher", [
                ("pymx imperative", pymx_cmd("leafnet", *common)),
                ("pymx hybridized", pymx_cmd("leafnet", *common, "--hybridize")),
                ("torch eager", [torch, os.path.join(PEERS, "leafnet_torch.py"), *common])]))
    if "memory" in args.cases:
        # The training step of the leafnet case at batch 64, for long enough to reach its steady
        # state; the table compares whole processes (interpreter and libraries included).
        common = ["--mode", "train", "--batch", "64", "--seconds", "1" if args.quick else "3"]
        impls = [("pymx imperative", pymx_cmd("leafnet", *common)),
                 ("pymx hybridized", pymx_cmd("leafnet", *common, "--hybridize")),
                 ("torch eager", [torch, os.path.join(PEERS, "leafnet_torch.py"), *common]),
                 ("mxnet-1.9.1 hybridize(static)",
                  [mxnet, os.path.join(PEERS, "leafnet_mxnet.py"), *common, "--hybridize",
                   "static"])]
        out.append(("peak memory, leafnet train batch 64 (cpu)", "lower",
                    [(name, [PEAK_RSS, *argv]) for name, argv in impls]))
    if "lstm" in args.cases:
        # A 2-layer LSTM language-model shape (bench/measure_pymx.py): hidden 256, input 128,
        # 35 steps, batch 32.
        for mode in ("train", "infer"):
            common = ["--mode", mode, "--batch", "32", "--seconds", seconds]
            impls = [("pymx imperative", pymx_cmd("lstm", *common, "--device", dev)),
                     ("pymx hybridized", pymx_cmd("lstm", *common, "--hybridize",
                                                  "--device", dev)),
                     ("torch eager", [torch, os.path.join(PEERS, "lstm_torch.py"), *common,
                                      "--device", "cuda" if dev == "gpu" else "cpu"])]
            if dev == "cpu":
                impls += [("mxnet-1.9.1 imperative",
                           [mxnet, os.path.join(PEERS, "lstm_mxnet.py"), *common]),
                          ("mxnet-1.9.1 hybridize(static)",
                           [mxnet, os.path.join(PEERS, "lstm_mxnet.py"), *common,
                            "--hybridize", "static"])]
            out.append((f"lstm 2x256 {mode} T=35 batch 32 ({dev})", "higher", impls))
    if "transformer" in args.cases:
        # A small BERT-like encoder (bench/transformer_model.py): 2 layers, 256 units, 4 heads,
        # feed-forward 1024, sequence 128, batch 8; Adam in training. "torch eager" is the same
        # arithmetic as a plain nn.Module; nn.TransformerEncoderLayer is torch's own layer (its
        # fused fast path in inference), a reference point.
        for mode in ("train", "infer"):
            common = ["--mode", mode, "--batch", "8", "--seconds", seconds]
            peer = os.path.join(PEERS, "transformer_torch.py")
            torch_dev = ["--device", "cuda" if dev == "gpu" else "cpu"]
            impls = [("pymx imperative", pymx_cmd("transformer", *common, "--device", dev)),
                     ("pymx hybridized", pymx_cmd("transformer", *common, "--hybridize",
                                                  "--device", dev)),
                     ("torch eager", [torch, peer, *common, *torch_dev]),
                     ("torch nn.TransformerEncoderLayer", [torch, peer, *common, *torch_dev,
                                                           "--builtin"])]
            out.append((f"transformer encoder 2x256 {mode} T=128 batch 8 ({dev})", "higher",
                        impls))
    if "resnet" in args.cases:
        size = str(args.resnet_image_size)
        shapes = [("train", 8), ("infer", 1), ("infer", 8)]
        if args.quick:
            shapes = [("train", 8), ("infer", 1)]
        for mode, batch in shapes:
            common = ["--mode", mode, "--batch", str(batch), "--image-size", size,
                      "--seconds", seconds]
            impls = [("pymx imperative", pymx_cmd("resnet", *common, "--device", dev)),
                     ("pymx hybridized", pymx_cmd("resnet", *common, "--hybridize",
                                                  "--device", dev)),
                     ("torch eager", [torch, os.path.join(PEERS, "resnet_torch.py"), *common,
                                      "--device", "cuda" if dev == "gpu" else "cpu"])]
            if dev == "cpu":
                impls.append(("mxnet-1.9.1 hybridize(static)",
                              [mxnet, os.path.join(PEERS, "resnet_mxnet.py"), *common,
                               "--hybridize", "static"]))
            out.append((f"resnet18_v1 {mode} batch {batch} 3x{size}x{size} ({dev})", "higher",
                        impls))
    for case, script, title, peers in (
            ("linalg", "measure_linalg.py", "np.linalg (cpu)", ("numpy", "torch")),
            ("einsum", "measure_einsum.py", "einsum float32 (cpu)", ("numpy", "torch")),
            ("resnet_convs", "measure_resnet_convs.py",
             "resnet18_v1's convolutions, batch 8, 3x224x224 (cpu)", ("torch",))):
        if case in args.cases:
            argv = [os.path.join(HERE, script)]
            if case != "resnet_convs":
                argv += ["--budget", "0.1" if args.quick else "0.3"]
            interpreters = {"numpy": sys.executable, "torch": torch}
            out.append((title, "lower", [("pymx", [sys.executable, *argv, "--impl", "pymx"])] +
                        [(peer, [interpreters[peer], *argv, "--impl", peer]) for peer in peers]))
    if "conv" in args.cases:
        batch = "8" if args.quick else "64"
        conv = os.path.join(HERE, "conv_bench.py")
        out.append((f"conv2d / max-pool, LeafNetwork shapes, batch {batch} (cpu)", "lower", [
            ("pymx", [sys.executable, conv, "--impl", "pymx", "--batch", batch, "--jsonl"]),
            ("torch", [torch, conv, "--impl", "torch", "--batch", batch, "--jsonl"])]))
    return out


def copied_suites(args):
    """(title, argv) of the suites that run their own side-by-side comparison."""
    suites = []
    quick = ["--quick"] if args.quick else []
    if "ops" in args.cases:
        suites.append(("matmul and elementwise vs NumPy (same process)",
                       [sys.executable, os.path.join(HERE, "ops_bench.py"), *quick]))
    if "pipeline" in args.cases:
        suites.append(("input pipeline vs Pillow + NumPy (decode, transforms, batching)",
                       [sys.executable, os.path.join(HERE, "pipeline_bench.py"),
                        "--images", "64" if args.quick else "320"]))
    if "engine" in args.cases and args.engine_micro and os.path.exists(args.engine_micro):
        suites.append(("native engine, empty ops (bench/cpp/engine_micro.cc)",
                       [args.engine_micro]))
    return suites


# Marks an argv whose result is the process's peak resident set size, not what it prints.
PEAK_RSS = "<peak-rss>"


def peak_rss_mb(argv):
    """Runs argv to completion; its peak resident set size in MB, or None when it failed."""
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as proc:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            sys.stderr.write(f"failed: {' '.join(argv)}\n{proc.stderr.read()[-2000:]}\n")
            return None
    return {"value": usage.ru_maxrss / 1024, "unit": "MB peak RSS"}


def measure(argv):
    if argv[0] == PEAK_RSS:
        return peak_rss_mb(argv[1:]) if os.path.exists(argv[1]) else None
    if not argv[0] or not os.path.exists(argv[0]):
        return None
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(f"failed: {' '.join(argv)}\n{proc.stderr[-2000:]}\n")
        return None
    results = [json.loads(l) for l in lines]
    return results if "key" in results[-1] else results[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default="tiny_op,leafnet")
    parser.add_argument("--leafnet-shapes", help="only these LeafNetwork runs, e.g. train:1,infer:4")
    parser.add_argument("--resnet-image-size", type=int, default=224,
                        help="height and width of the resnet case's images (all impls)")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--torch-python", default="/work/venv-torch/bin/python")
    parser.add_argument("--mxnet-python", default="/work/venv-mxnet/bin/python")
    parser.add_argument("--engine-micro", default=os.path.join(
        os.path.dirname(HERE), "build-bench", "bench", "cpp", "engine_micro"),
        help="the engine_micro binary (cmake -DPYMX_BUILD_BENCH=ON)")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    args.cases = args.cases.split(",")

    # OpenBLAS reads these when it loads (pymx's, NumPy's and MXNet's copies alike); they change
    # its kernels and so every GEMM-bound number, hence they head every report.
    blas_env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS_")}
    results = {"environment": blas_env}
    lines = [f"Environment: {', '.join(f'{k}={v}' for k, v in blas_env.items()) or 'no OPENBLAS_* variables'}"]
    print(lines[0], flush=True)
    for key, better, impls in cases(args):
        # samples[row][impl] -> values; a row is the case itself or one key of a multi-line impl.
        samples, unit = {}, ""
        for round_index in range(args.rounds):
            # Alternate the order so that drift in machine load hits every impl alike.
            order = impls if round_index % 2 == 0 else impls[::-1]
            for name, argv in order:
                result = measure(argv)
                for row in (result if isinstance(result, list) else [result] if result else []):
                    samples.setdefault(row.get("key", key), {}).setdefault(name, []).append(
                        row["value"])
                    unit = row["unit"]
        names = [name for name, _ in impls]
        medians = {row: {n: statistics.median(v[n]) for n in names if v.get(n)}
                   for row, v in samples.items()}
        results[key] = {"unit": unit, "better": better, "median": medians}
        lines.append(f"\n**{key}** ({unit}, {better} is better; ratio = how many times the best "
                     "pymx mode is better)\n")
        lines.append("| | " + " | ".join(names) + " | " +
                     " | ".join(f"ratio vs {n}" for n in names if not n.startswith("pymx")) + " |")
        lines.append("|---" * (1 + len(names) + sum(not n.startswith("pymx") for n in names)) + "|")
        for row, values in medians.items():
            # The best of pymx's modes (imperative or hybridized: the user's choice); recording a
            # tiny op is a cost on top of one, not a mode.
            modes = [values[n] for n in names if n.startswith("pymx") and "recording" not in n
                     and n in values]
            base = (min if better == "lower" else max)(modes) if modes else None
            cells = [f"{values[n]:.2f}" if n in values else "–" for n in names]
            for n in names:
                if n.startswith("pymx"):
                    continue
                if base and n in values:
                    cells.append(f"{(values[n] / base if better == 'lower' else base / values[n]):.2f}×")
                else:
                    cells.append("–")
            lines.append(f"| {row if row != key else ''} | " + " | ".join(cells) + " |")
        print("\n".join(lines[-len(medians) - 3:]), flush=True)
    for title, argv in copied_suites(args):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        body = proc.stdout.strip() if proc.returncode == 0 else f"failed:\n{proc.stderr[-1500:]}"
        lines.append(f"\n**{title}** (`{' '.join(os.path.relpath(a) if os.path.exists(a) else a for a in argv)}`)\n")
        lines.append(body if body.lstrip().startswith("|") else "```\n" + body + "\n```")
        print("\n".join(lines[-2:]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, sort_keys=True)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
