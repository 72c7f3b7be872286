"""Regression tests for bugs found reviewing the native changes since 7988f67 (the packed
weight cache, content stamps, matmul transpose flags, layer_norm rows, dropout's vector path).

Each test failed before its fix:
- a hybridized graph replayed in bulk (Note [Bulk execution]) reuses a static buffer within
  the run, so one buffer held several convolution weights under one content stamp: the third
  convolution got the second one's packed weights (invoke.cc, BulkInvoke::push);
- float16 and bfloat16 convolutions run their float kernel on widened copies (through_float.h),
  whose address says nothing of where the weight lies in its chunk: two views of one chunk
  shared a cache key, and the first view's convolution got the second one's packed weights."""
import numpy as onp
import pytest

from pymx import gluon, np, npx
from pymx.ndarray import from_numpy

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


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_views_of_one_weight_chunk_never_share_a_packing(dtype):
    x64 = RNG.standard_normal((1, 4, 18, 18))
    w64 = RNG.standard_normal((16, 4, 3, 3))
    x = np.array(x64.astype(onp.float32)).astype(dtype)
    w = np.array(w64.astype(onp.float32)).astype(dtype)
    halves = [w._slice_view(0, 8), w._slice_view(8, 16)]  # one chunk, one var

    def conv(weight):
        return npx.convolution(x, weight, None, kernel=(3, 3), pad=(1, 1), num_filter=8,
                               no_bias=True).astype("float32").asnumpy()

    want = [conv(from_numpy(half.astype("float32").asnumpy()).astype(dtype)) for half in halves]
    for _ in range(3):  # seen, packed, hit
        for half, expected in zip(halves, want):
            onp.testing.assert_array_equal(conv(half), expected)
