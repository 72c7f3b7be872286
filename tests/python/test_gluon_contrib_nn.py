"""gluon.contrib.nn: MXNet's contrib layer names over gluon.nn's layers."""
import numpy as onp
import pytest

from pymx import gluon, np
from pymx.gluon import nn
from pymx.gluon.contrib import nn as contrib_nn
from pymx.test_utils import assert_almost_equal


def _branches(net):
    net.add(nn.Dense(3, in_units=4), nn.Dense(2, in_units=4), contrib_nn.Identity())
    net.initialize()
    return net


def _reference(net, x):
    """NumPy float64: each Dense branch x W^T + b, and x itself, side by side."""
    dense = [child for child in net._children.values() if isinstance(child, nn.Dense)]
    outs = [x @ d.weight.data().asnumpy().astype(onp.float64).T +
            d.bias.data().asnumpy().astype(onp.float64) for d in dense]
    return onp.concatenate(outs + [x], axis=-1)


@pytest.mark.parametrize("cls", [contrib_nn.Concurrent, contrib_nn.HybridConcurrent])
def test_concurrent_concatenates_its_children(device, cls):
    net = _branches(cls())
    net.reset_device(device)
    x = onp.random.uniform(-1, 1, (5, 4))
    out = net(np.array(x, dtype="float32", device=device))
    assert out.shape == (5, 9) and net.axis == -1
    assert_almost_equal(out, _reference(net, x), rtol=1e-5, atol=1e-6)
    assert sorted(net.collect_params()) == ["0.bias", "0.weight", "1.bias", "1.weight"]


def test_hybrid_concurrent_hybridized_equals_imperative(device):
    net = _branches(contrib_nn.HybridConcurrent(axis=1))
    net.reset_device(device)
    x = np.array(onp.random.uniform(-1, 1, (5, 4)), dtype="float32", device=device)
    want = net(x)
    net.hybridize()
    for _ in range(2):
        assert_almost_equal(net(x), want)


def test_concurrent_on_another_axis():
    net = contrib_nn.Concurrent(axis=0)
    net.add(contrib_nn.Identity(), contrib_nn.Identity())
    x = np.arange(6.0).reshape(2, 3)
    assert net.axis == 0
    onp.testing.assert_array_equal(net(x).asnumpy(), onp.concatenate([x.asnumpy()] * 2))


def test_concurrent_children_must_agree_off_the_axis():
    net = contrib_nn.HybridConcurrent(axis=-1)
    net.add(nn.Dense(3, in_units=4, flatten=False), nn.Dense(3, in_units=4))
    net.initialize()
    with pytest.raises(ValueError):
        net(np.ones((2, 5, 4)))  # outputs (2, 5, 3) and (2, 3) do not concatenate


def test_contrib_names_are_gluon_nn_layers():
    assert contrib_nn.Identity is nn.Identity
    assert contrib_nn.SyncBatchNorm is nn.SyncBatchNorm
    for k in (1, 2, 3):
        assert getattr(contrib_nn, f"PixelShuffle{k}D") is getattr(nn, f"PixelShuffle{k}D")
    assert issubclass(contrib_nn.Concurrent, nn.Concatenate)
    assert issubclass(contrib_nn.HybridConcurrent, gluon.HybridBlock)
    assert set(contrib_nn.__all__) == {"Concurrent", "HybridConcurrent", "Identity",
                                       "SyncBatchNorm", "PixelShuffle1D", "PixelShuffle2D",
                                       "PixelShuffle3D"}
    assert gluon.contrib.nn is contrib_nn


def test_pixel_shuffle_2d_through_contrib(device):
    x = onp.random.uniform(-1, 1, (1, 12, 3, 5)).astype(onp.float32)
    out = contrib_nn.PixelShuffle2D((2, 3))(np.array(x, device=device))
    # (N, C*f1*f2, H, W) -> (N, C, H*f1, W*f2), channel c*f1*f2 + i*f2 + j to offset (i, j).
    want = x.reshape(1, 2, 2, 3, 3, 5).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 6, 15)
    onp.testing.assert_array_equal(out.asnumpy(), want)
