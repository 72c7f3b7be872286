"""Runs pymx and its peers side by side, alternating rounds, and reports medians and ratios.

    python bench/run.py [--quick] [--rounds 3] [--cases tiny_op,leafnet]
                        [--torch-python PATH] [--mxnet-python PATH] [--device cpu|gpu]
                        [--json results.json] [--markdown results.md]

Each measurement is a fresh process (bench/measure_pymx.py, bench/peers/*.py) printing one JSON
line {"value", "unit"}. Peers live in their own virtual environments (MXNet 1.9.1 needs
numpy<1.24), hence the interpreter paths. A peer whose interpreter is missing is left out of the
table rather than failing the run. Nothing here asserts on speed.
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
        shapes = [("train", 4), ("train", 64), ("infer", 1), ("infer", 64)]
        if args.quick:
            shapes = [("train", 64), ("infer", 1)]
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
            out.append((f"leafnet {mode} batch {batch} ({dev})", "higher", impls))
    return out


def measure(argv):
    if not argv[0] or not os.path.exists(argv[0]):
        return None
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(f"failed: {' '.join(argv)}\n{proc.stderr[-2000:]}\n")
        return None
    return json.loads(lines[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default="tiny_op,leafnet")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--torch-python", default="/work/venv-torch/bin/python")
    parser.add_argument("--mxnet-python", default="/work/venv-mxnet/bin/python")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    args.cases = args.cases.split(",")

    results, lines = {}, []
    for key, better, impls in cases(args):
        samples = {name: [] for name, _ in impls}
        unit = ""
        for round_index in range(args.rounds):
            # Alternate the order so that drift in machine load hits every impl alike.
            order = impls if round_index % 2 == 0 else impls[::-1]
            for name, argv in order:
                result = measure(argv)
                if result:
                    samples[name].append(result["value"])
                    unit = result["unit"]
        medians = {n: statistics.median(v) for n, v in samples.items() if v}
        results[key] = {"unit": unit, "better": better, "median": medians}
        base = medians.get(impls[0][0])
        lines.append(f"\n**{key}** ({unit}, {better} is better; ratio = pymx advantage)\n")
        lines.append("| impl | median | pymx ratio |")
        lines.append("|---|---|---|")
        for name, value in medians.items():
            ratio = ""
            if base and not name.startswith("pymx"):
                ratio = f"{(value / base if better == 'lower' else base / value):.2f}×"
            lines.append(f"| {name} | {value:.2f} | {ratio} |")
        print("\n".join(lines[-len(medians) - 3:]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, sort_keys=True)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
