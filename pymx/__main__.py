"""``python -m pymx`` (also ``pymx-train``): trains the crash course's LeafNetwork.

With no arguments it generates (once, then caches) a small leaf data set (pymx/_leafdata.py),
trains data-parallel on every GPU or, without GPUs, on cpu(0) and cpu(1), prints per-epoch
metrics, evaluates the test set, and writes leaf_models.params and a plot of the curves.

Defaults differ from the tutorial's step 6 on purpose: the tutorial's SGD at lr 0.001 with
batch 4 needs many epochs, so the default run uses Adam at lr 0.001 with batch 32 and Xavier
initialisation for 8 epochs: on the generated set validation accuracy passes 90 % after about 4
epochs (BatchNorm's running statistics need the first epochs to settle), and the whole run takes
about 12 s on a 2-core CPU, generating the data included. examples/gpu_crash_course.py keeps the
tutorial's own values.
"""
import argparse
import os
import re
import sys
import time

__all__ = ["main", "parse_devices"]


def parse_devices(text):
    """'cpu(0),cpu(1)' or 'gpu(0)' (also 'gpu:0' or 'gpu0') -> list of Devices."""
    from . import device as _device
    devices = []
    for item in text.split(","):
        match = re.fullmatch(r"\s*(cpu|gpu)\s*[(:]?\s*(\d+)\s*\)?\s*", item)
        if not match:
            raise ValueError(f"--devices: cannot parse {item!r}; expected e.g. 'cpu(0),cpu(1)' "
                             f"or 'gpu(0)'")
        device = _device.Device(match.group(1), int(match.group(2)))
        if device in devices:
            raise ValueError(f"--devices: {device} is listed twice in {text!r}")
        devices.append(device)
    return devices


def _default_num_workers(devices):
    """No worker processes when training on CPUs, whose cores the engine's threads already use;
    with GPUs, half the cores (up to 4) decode and transform while the GPUs compute."""
    if all(d.device_type == "cpu" for d in devices):
        return 0
    return min(4, max(1, (os.cpu_count() or 2) // 2))


def _default_devices():
    from . import npx
    gpus = [npx.gpu(i) for i in range(npx.num_gpus())]
    return gpus or [npx.cpu(0), npx.cpu(1)]


def _parser():
    p = argparse.ArgumentParser(prog="python -m pymx",
                                description="Train the MXNet crash course's LeafNetwork with "
                                            "pymx on a generated leaf data set.")
    p.add_argument("--epochs", type=int, default=8, help="passes over the training set "
                   "(default 8)")
    p.add_argument("--batch-size", type=int, default=32,
                   help="images per step, split across the devices (default 32)")
    p.add_argument("--devices", default=None,
                   help="e.g. 'cpu(0),cpu(1)' or 'gpu(0),gpu(1)'; default: every GPU, or "
                        "cpu(0),cpu(1) without GPUs")
    p.add_argument("--data-dir", default=None,
                   help="where the generated data set is cached (default ~/.cache/pymx/leafdata)")
    p.add_argument("--train-images", type=int, default=320,
                   help="training images to generate; validation and test get a quarter each "
                        "(default 320)")
    p.add_argument("--output-dir", default="pymx-leaf-output",
                   help="where leaf_models.params and the training curves go (default "
                        "pymx-leaf-output)")
    p.add_argument("--num-workers", type=int, default=None,
                   help="DataLoader worker processes (default 0 when training on CPUs, whose "
                        "cores the engine's threads already use; with GPUs half the cores, up "
                        "to 4)")
    p.add_argument("--optimizer", default="adam",
                   help="any of gluon.Trainer's optimizers, e.g. sgd (default adam)")
    p.add_argument("--lr", type=float, default=0.001, help="learning rate (default 0.001)")
    p.add_argument("--seed", type=int, default=0,
                   help="seeds the data set, the initial weights and the sampling (default 0)")
    p.add_argument("--hybridize", action="store_true",
                   help="trace the network once and replay the graph (faster steps)")
    p.add_argument("--amp", choices=("float16", "bfloat16"), default=None,
                   help="automatic mixed precision (pymx.amp): convolutions and dense layers "
                        "compute in this dtype, with dynamic loss scaling for float16")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def _plot(history, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    epochs = range(1, len(history["loss"]) + 1)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(epochs, history["loss"], marker="o")
    ax_loss.set(title="training loss", xlabel="epoch", ylabel="mean cross-entropy")
    ax_acc.plot(epochs, history["train_acc"], marker="o", label="training")
    ax_acc.plot(epochs, history["val_acc"], marker="o", label="validation")
    ax_acc.set(title="accuracy", xlabel="epoch", ylabel="accuracy", ylim=(0, 1.02))
    ax_acc.legend()
    for ax in (ax_loss, ax_acc):
        ax.set_xticks(list(epochs))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _checked(parser, args):
    """(devices, optimizer) for `args`, or exits through parser.error naming the bad value,
    before any data is generated."""
    from . import npx, optimizer
    if args.epochs < 1:
        parser.error(f"--epochs {args.epochs} must be at least 1")
    if not 0 < args.batch_size <= args.train_images:
        parser.error(f"--batch-size {args.batch_size} must be between 1 and the number of "
                     f"training images ({args.train_images})")
    if args.num_workers is not None and args.num_workers < 0:
        parser.error(f"--num-workers {args.num_workers} must be 0 or more")
    if not args.lr > 0:
        parser.error(f"--lr {args.lr} must be positive")
    try:
        devices = parse_devices(args.devices) if args.devices else _default_devices()
        trainer_optimizer = optimizer.create(args.optimizer, learning_rate=args.lr)
    except ValueError as error:
        parser.error(str(error))
    missing = [str(d) for d in devices if d.device_type == "gpu" and d.device_id >= npx.num_gpus()]
    if missing:
        parser.error(f"--devices: {', '.join(missing)} not found ({npx.num_gpus()} GPU(s) visible)")
    if args.num_workers is None:
        args.num_workers = _default_num_workers(devices)
    return devices, trainer_optimizer


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    devices, trainer_optimizer = _checked(parser, args)
    import numpy as onp
    from . import _leafdata, _train, amp, gluon, initializer, npx

    onp.random.seed(args.seed)         # samplers and random transforms draw on the host
    npx.random.seed(args.seed)         # initializers and dropout draw in the engine
    print("Using devices:", ", ".join(str(d) for d in devices))

    counts = {"train": args.train_images, "validation": max(2, args.train_images // 4),
              "test": max(2, args.train_images // 4)}
    tic = time.time()
    root = _leafdata.ensure_dataset(args.data_dir, seed=args.seed, counts=counts)
    print(f"Data set: {root} ({counts['train']} train, {counts['validation']} validation, "
          f"{counts['test']} test images; ready in {time.time() - tic:.1f} s)")
    on_gpus = any(d.device_type == "gpu" for d in devices)
    train_loader, val_loader, test_loader = _train.make_loaders(root, args.batch_size,
                                                                args.num_workers, on_gpus)

    if args.amp:
        amp.init(args.amp)
        print(f"Automatic mixed precision: {args.amp}")
    net = _train.LeafNetwork()
    net.initialize(initializer.Xavier(), device=devices)
    if args.hybridize:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), trainer_optimizer)
    if args.amp:
        amp.init_trainer(trainer)

    progress = None
    if not args.no_progress:
        from tqdm import tqdm

        def progress(iterable, desc):
            return tqdm(iterable, desc=desc, unit="batch", leave=False, file=sys.stderr)

    history = _train.fit(net, trainer, train_loader, val_loader, devices, args.epochs,
                         progress=progress, use_amp=bool(args.amp))
    test_acc = _train.evaluate(net, test_loader, devices)
    print(f"Test accuracy: {test_acc:.4f}")
    if args.amp:
        print(f"Loss scale: {trainer.amp_loss_scale:g}")

    os.makedirs(args.output_dir, exist_ok=True)
    params_path = os.path.join(args.output_dir, "leaf_models.params")
    net.save_parameters(params_path)
    plot_path = os.path.join(args.output_dir, "training_curves.png")
    _plot(history, plot_path)
    print(f"Saved parameters to {params_path}")
    print(f"Saved training curves to {plot_path}")
    npx.waitall()
    return 0


if __name__ == "__main__":
    sys.exit(main())
