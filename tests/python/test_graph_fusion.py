"""Fused inference blocks (Note [Fused inference blocks]): an inference replay on the CPU runs
convolution(relu) -> max pooling [-> batch norm] as one _conv_relu_max_pool call where the block's
intermediate values are not needed, and gives what the op-by-op replay gives (bit for bit without
batch norm, to float rounding with it). Anything else (train mode, recording, values read
elsewhere, geometries the fused kernel does not handle) replays op by op."""
import numpy as onp
import pytest

import pymx
from pymx import autograd, np
from pymx.gluon import nn
from conftest import ops_ran

RNG = onp.random.default_rng(11)


def _blocks(batch_norm=True, conv_stride=1, pool_pad=0):
    net = nn.HybridSequential()
    for filters in (8, 16):
        net.add(nn.Conv2D(filters, kernel_size=2, strides=conv_stride, activation="relu"),
                nn.MaxPool2D(pool_size=4, strides=2, padding=pool_pad))
        if batch_norm:
            net.add(nn.BatchNorm())
    net.add(nn.Flatten(), nn.Dense(3))
    net.initialize(pymx.initializer.Xavier())
    net(np.zeros((1, 3, 40, 40)))
    if batch_norm:  # running statistics that are not the identity transform
        for block in net:
            if isinstance(block, nn.BatchNorm):
                c = block.gamma.shape[0]
                block.gamma.set_data(np.array(RNG.uniform(0.5, 2.0, c).astype("float32")))
                block.beta.set_data(np.array(RNG.standard_normal(c).astype("float32")))
                block.running_mean.set_data(np.array(RNG.standard_normal(c).astype("float32")))
                block.running_var.set_data(np.array(RNG.uniform(0.5, 2.0, c).astype("float32")))
    return net


def _twins(**kwargs):
    """The same network twice: static buffers (bulk replays, fusable) and without."""
    static = _blocks(**kwargs)
    plain = _blocks(**kwargs)
    for mine, theirs in zip(plain.collect_params().values(), static.collect_params().values()):
        mine.set_data(theirs.data())
    static.hybridize(static_alloc=True, static_shape=True)
    plain.hybridize()
    return static, plain


def _warm(net, x):
    """The first call traces the graph, the second replays it op by op and infers its buffers;
    replays are bulked (and may fuse) from the third on."""
    net(x)
    net(x)


def _images(batch=2):
    return np.array(RNG.standard_normal((batch, 3, 40, 40)).astype("float32"))


@pytest.mark.parametrize("batch_norm", [True, False])
@pytest.mark.parametrize("batch", [1, 3])
def test_blocks_fuse_and_match_the_op_by_op_replay(batch_norm, batch):
    static, plain = _twins(batch_norm=batch_norm)
    x = _images(batch)
    _warm(static, x)
    ran = ops_ran(lambda: static(x))
    assert ran.get("_conv_relu_max_pool") == 2, ran
    assert "convolution" not in ran and "pooling" not in ran and "batch_norm" not in ran, ran
    got, want = static(x).asnumpy(), plain(x).asnumpy()
    if batch_norm:
        onp.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        onp.testing.assert_array_equal(got, want)


def test_train_mode_and_recording_do_not_fuse():
    static, plain = _twins()
    x = _images()
    _warm(static, x)
    with autograd.train_mode():  # batch norm uses the batch's statistics and updates its own
        ran = ops_ran(lambda: static(x))
    assert "_conv_relu_max_pool" not in ran and ran["batch_norm"] == 2, ran
    x.attach_grad()
    with autograd.record():
        ran = ops_ran(lambda: static(x))
    assert "_conv_relu_max_pool" not in ran and ran["convolution"] == 2, ran


def test_geometries_the_kernel_does_not_handle_run_op_by_op():
    # With stride-2 convolutions the first block (20 outputs wide) fuses, the second (4 wide,
    # narrower than the direct kernel's vector) runs op by op.
    for kwargs, fused in (({"conv_stride": 2}, 1), ({"pool_pad": 1}, 0)):
        static, plain = _twins(**kwargs)
        x = _images()
        _warm(static, x)
        ran = ops_ran(lambda: static(x))
        assert ran.get("_conv_relu_max_pool", 0) == fused, (kwargs, ran)
        assert ran["convolution"] == 2 - fused, (kwargs, ran)
        onp.testing.assert_allclose(static(x).asnumpy(), plain(x).asnumpy(), rtol=1e-6)


def test_intermediate_values_read_elsewhere_are_not_fused():
    class Taps(nn.HybridBlock):
        """Returns the first block's convolution output too: that block cannot fuse."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2D(8, kernel_size=2, activation="relu")
            self.pool1 = nn.MaxPool2D(pool_size=4, strides=2)
            self.conv2 = nn.Conv2D(8, kernel_size=2, activation="relu")
            self.pool2 = nn.MaxPool2D(pool_size=4, strides=2)

        def forward(self, x):
            tap = self.conv1(x)
            return self.pool2(self.conv2(self.pool1(tap))), tap

    nets = [Taps(), Taps()]
    for net in nets:
        net.initialize(pymx.initializer.Xavier())
        net(np.zeros((1, 3, 40, 40)))
    for mine, theirs in zip(nets[1].collect_params().values(), nets[0].collect_params().values()):
        mine.set_data(theirs.data())
    nets[0].hybridize(static_alloc=True, static_shape=True)
    nets[1].hybridize()
    x = _images()
    _warm(nets[0], x)
    ran = ops_ran(lambda: nets[0](x))
    assert ran.get("_conv_relu_max_pool") == 1 and ran["convolution"] == 1, ran
    for got, want in zip(nets[0](x), nets[1](x)):
        onp.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
