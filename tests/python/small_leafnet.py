"""The GPU tests' training case: a small LeafNetwork (two conv blocks on 32x32 images), its
starting parameters saved once so every device starts alike, and three fixed batches. Used by
test_gpu_system.py and, in a fresh process, test_gpu_logical_devices.py."""
import numpy as onp

from pymx import np
from pymx.device import cpu
from pymx.gluon import nn


def leaf_network(filters=(32, 64), hidden=100):
    net = nn.HybridSequential()
    for channels in filters:
        net.add(nn.Conv2D(channels, kernel_size=2, activation="relu"),
                nn.MaxPool2D(pool_size=4, strides=2), nn.BatchNorm())
    net.add(nn.Flatten(), nn.Dense(hidden, activation="relu"), nn.Dense(2))
    return net


def save_starting_parameters(path, **sizes):
    """Initialises leaf_network(**sizes) on the CPU and saves its parameters to `path`."""
    reference = leaf_network(**sizes)
    reference.initialize(device=cpu(0))
    reference(np.zeros((2, 3, 32, 32)))
    reference.save_parameters(path)


def batches():
    """Three (images, labels) NumPy batches of 8."""
    rng = onp.random.default_rng(0)
    return [(rng.standard_normal((8, 3, 32, 32)).astype("float32"),
             rng.integers(0, 2, 8).astype("float32")) for _ in range(3)]
