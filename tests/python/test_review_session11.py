"""Regression tests for bugs found reviewing the native changes since 7988f67 (the packed
weight cache, content stamps, matmul transpose flags, layer_norm rows, dropout's vector path).

Each test failed before its fix:
- a hybridized graph replayed in bulk (Note [Bulk execution]) reuses a static buffer within
  the run, so one buffer held several convolution weights under one content stamp: the third
  convolution got the second one's packed weights (invoke.cc, BulkInvoke::push)."""
import numpy as onp

from pymx import gluon, np, npx

RNG = onp.random.default_rng(1111)


class _ConvsOfComputedWeights(gluon.HybridBlock):
    """Three 3x3 convolutions whose weights are computed in the graph (w * 2): the computed
    weights have one size, so a static-alloc replay writes them all into one reused buffer."""

    def __init__(self, count):
        super().__init__()
        self._names = [f"w{i}" for i in range(count)]
        for name in self._names:
            setattr(self, name, gluon.Parameter(name, shape=(8, 4, 3, 3)))

    def forward(self, x):
        total = None
        for name in self._names:
            weight = getattr(self, name).data() * 2.0
            y = npx.convolution(x, weight, None, kernel=(3, 3), pad=(1, 1), num_filter=8,
                                no_bias=True)
            total = y if total is None else total + y
        return total


def test_bulk_replay_reusing_a_weight_buffer_never_hits_a_stale_packing():
    net = _ConvsOfComputedWeights(3)
    net.initialize()
    # Rows of 18 outputs: the direct kernel, which packs through the cache.
    x = np.array(RNG.standard_normal((1, 4, 18, 18)).astype(onp.float32))
    imperative = net(x).asnumpy()
    net.hybridize(static_alloc=True, static_shape=True)
    for _ in range(4):  # the bulk replays start at the second call; seen, packed, hit
        onp.testing.assert_allclose(net(x).asnumpy(), imperative, rtol=1e-6, atol=1e-5)
