"""Input-pipeline throughput: the crash course's training pipeline (decode, Resize(224,
keep_ratio), CenterCrop(128), RandomFlipLeftRight, RandomColorJitter(contrast), ToTensor,
Normalize, batching) in images/s, built with pymx's gluon.data and, side by side, with Pillow +
NumPy alone, for 0, 1 and 2 worker processes.

    python bench/pipeline_bench.py [--images 320] [--batch-size 32] [--json out.json]

Images come from pymx's generated leaf set (160x160 JPEG). Each configuration runs one warm-up
epoch, then the best of --repeat timed epochs is reported. Never asserts on speed.
"""
import argparse
import json
import multiprocessing
import time

import numpy as onp
from PIL import Image

MEAN = onp.array([0.485, 0.456, 0.406], onp.float32)[:, None, None]
STD = onp.array([0.229, 0.224, 0.225], onp.float32)[:, None, None]
GRAY = onp.array([0.299, 0.587, 0.114], onp.float32)


def _reference_sample(path, jitter=0.05):
    """The same pipeline with Pillow + NumPy: the baseline."""
    with Image.open(path) as img:
        img = img.convert("RGB")
        w, h = img.size
        if h > w:
            size = (224, int(h * 224 / w))
        else:
            size = (int(w * 224 / h), 224)
        img = img.resize(size, Image.BILINEAR)
        x0, y0 = int(0.5 * (size[0] - 128)), int(0.5 * (size[1] - 128))
        x = onp.asarray(img.crop((x0, y0, x0 + 128, y0 + 128)), dtype=onp.float32)
    if onp.random.uniform() < 0.5:
        x = x[:, ::-1]
    alpha = 1.0 + onp.random.uniform(-jitter, jitter)
    x = onp.clip(x * alpha + (1 - alpha) * (x @ GRAY).mean(), 0, 255).round()
    return (x.transpose(2, 0, 1) / 255.0 - MEAN) / STD


def _reference_batch(paths):
    return onp.stack([_reference_sample(p) for p in paths]).astype(onp.float32)


def _reference_epoch(paths, batch_size, workers, pool):
    batches = [paths[i:i + batch_size] for i in range(0, len(paths), batch_size)]
    if workers == 0:
        for b in batches:
            _reference_batch(b)
    else:
        for _ in pool.imap(_reference_batch, batches):
            pass


def _pymx_epoch(loader):
    for data, label in loader:
        data.wait_to_read()


def _best_rate(run_epoch, images, repeat):
    run_epoch()                                   # warm-up: pool start, caches
    best = float("inf")
    for _ in range(repeat):
        tic = time.perf_counter()
        run_epoch()
        best = min(best, time.perf_counter() - tic)
    return images / best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=320)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", default="0,1,2")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)

    from pymx import _leafdata, _train, gluon
    counts = {"train": args.images, "validation": max(2, args.images // 4),
              "test": max(2, args.images // 4)}
    root = _leafdata.ensure_dataset(args.data_dir, counts=counts)
    dataset = gluon.data.vision.ImageFolderDataset(root + "/train")
    paths = [path for path, _ in dataset.items]
    pipeline = dataset.transform_first(_train.training_transformer())

    results = {}
    for workers in (int(w) for w in args.workers.split(",")):
        loader = gluon.data.DataLoader(pipeline, batch_size=args.batch_size, num_workers=workers)
        pymx_rate = _best_rate(lambda: _pymx_epoch(loader), len(paths), args.repeat)
        loader.close()
        pool = multiprocessing.get_context("fork").Pool(workers) if workers else None
        ref_rate = _best_rate(lambda: _reference_epoch(paths, args.batch_size, workers, pool),
                              len(paths), args.repeat)
        if pool is not None:
            pool.terminate()
        results[f"pipeline_images_per_s_workers{workers}"] = {
            "pymx": round(pymx_rate, 1), "pillow_numpy": round(ref_rate, 1),
            "ratio": round(pymx_rate / ref_rate, 3)}

    print(f"| workers | pymx images/s | Pillow+NumPy images/s | ratio |  "
          f"({len(paths)} images, batch {args.batch_size})")
    print("|---|---|---|---|")
    for key, row in results.items():
        print(f"| {key[-1]} | {row['pymx']} | {row['pillow_numpy']} | {row['ratio']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, sort_keys=True)
    return results


if __name__ == "__main__":
    main()
