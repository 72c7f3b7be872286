"""LeafNetwork (the crash course's model) on the CPU: training steps and inference in samples/s,
imperative and hybridized, on 128x128 images as in the tutorial.

    python bench/leafnet_bench.py [--quick] [--seconds 3] [--json out.json]

Each measurement runs warm-up steps, then repeats the step (waiting for each step's result) for
about `seconds`. Keys are stable ("leafnet/<mode>/<impl>/b<batch>") so that
bench/run.py can compare them with the peers (bench/peers/leafnet_*.py). Never asserts on speed.
"""
import argparse
import json
import time

import numpy as onp

from pymx import autograd, cpu, gluon, np, waitall
from pymx._train import LeafNetwork

IMAGE_SIZE = 128
TRAIN_BATCHES = (4, 64)
INFER_BATCHES = (1, 4, 64)


def _make_net(hybridize, device, dtype="float32"):
    net = LeafNetwork()
    net.initialize(device=device)
    net(np.zeros((1, 3, IMAGE_SIZE, IMAGE_SIZE), device=device))  # finish deferred init
    net.cast(dtype)
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    return net


def _time(step, batch, seconds, warmup=2):
    """Samples/s of `step`, which returns an array to wait on: each iteration waits for its
    result, so the engine's queue cannot run ahead of the clock."""
    for _ in range(warmup):
        step().wait_to_read()
    waitall()
    iters, start = 0, time.perf_counter()
    while True:
        step().wait_to_read()
        iters += 1
        if time.perf_counter() - start >= seconds:
            break
    waitall()
    return iters * batch / (time.perf_counter() - start)


def train_samples_per_s(batch, hybridize, seconds=3.0, device=None, dtype="float32"):
    """Samples/s of the tutorial's training step (forward, loss, backward, SGD step), in
    `dtype` (16-bit weights are updated through float32 master copies)."""
    device = device or cpu()
    net = _make_net(hybridize, device, dtype)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': 0.001, 'multi_precision': dtype != 'float32'})
    rng = onp.random.default_rng(0)
    x = np.array(rng.random((batch, 3, IMAGE_SIZE, IMAGE_SIZE), dtype=onp.float32),
                 device=device).astype(dtype)
    y = np.array(rng.integers(0, 2, batch).astype(onp.float32), device=device)

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)
        return net.dense3.weight.data()

    return _time(step, batch, seconds)


def infer_samples_per_s(batch, hybridize, seconds=3.0, device=None):
    """Samples/s of inference (predict mode)."""
    device = device or cpu()
    net = _make_net(hybridize, device)
    x = np.array(onp.random.default_rng(0).random((batch, 3, IMAGE_SIZE, IMAGE_SIZE),
                                                   dtype=onp.float32), device=device)
    return _time(lambda: net(x), batch, seconds)


def run(quick=False, seconds=3.0):
    """All measurements as {key: samples/s}; `quick` uses short runs and the small batches."""
    if quick:
        seconds = min(seconds, 0.5)
    results = {}
    for hybridize in (False, True):
        impl = 'hybridized' if hybridize else 'imperative'
        for batch in TRAIN_BATCHES if not quick else TRAIN_BATCHES[:1]:
            results[f'leafnet/train/{impl}/b{batch}'] = train_samples_per_s(batch, hybridize,
                                                                            seconds)
        for batch in INFER_BATCHES if not quick else INFER_BATCHES[:2]:
            results[f'leafnet/infer/{impl}/b{batch}'] = infer_samples_per_s(batch, hybridize,
                                                                            seconds)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='short runs, small batches only')
    parser.add_argument('--seconds', type=float, default=3.0, help='time per measurement')
    parser.add_argument('--json', help='also write the results to this file')
    args = parser.parse_args()
    results = run(args.quick, args.seconds)
    for key, value in results.items():
        print(f'{key:36s} {value:10.1f} samples/s')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=2, sort_keys=True)


if __name__ == '__main__':
    main()
