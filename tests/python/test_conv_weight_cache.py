"""The packed weight cache of the convolution's direct kernels (Note [Packed weight cache],
packed_weight_cache.h): inference calls reuse the weights packed by an earlier call, keyed by
the weight's (and bias's) var identity and version. Checked here: a cached call gives the same
bits as an uncached one and matches a float64 NumPy reference; every kind of write to the weight
or the bias misses (w[:] =, +=, copyto, np.copyto, Parameter.set_data, load_parameters, a
Trainer step); a weight freed and a new one allocated (at the same address) misses; more weights
than the bound stay correct; hybridized equals imperative; the naive engine equals the threaded
one bitwise. Both packed layouts: the direct kernel (rows of at least 16 outputs) and the narrow
one (rows 7 to 15 wide)."""
import os

import numpy as onp
import pytest

import pymx
from pymx import autograd, gluon, np, npx
from pymx.ndarray import from_numpy
from conftest import assert_engines_agree, run_python
from test_conv_forward_paths import ref_conv2d

RNG = onp.random.default_rng(11)

# (input shape, filters): the direct kernel (18 outputs per row) and the narrow one (9 per row,
# 40 filters: a partial channel block)
LAYOUTS = {"direct": ((1, 4, 18, 18), 8), "narrow": ((1, 8, 9, 9), 40)}
RTOL, ATOL = 1e-5, 1e-4  # float32 sums of <= 72 products of standard normals


def conv(x, w, b=None):
    return npx.convolution(x, w, b, kernel=(3, 3), pad=(1, 1), num_filter=w.shape[0],
                           no_bias=b is None)


def arrays(layout, use_bias=True):
    x_shape, filters = LAYOUTS[layout]
    x = RNG.standard_normal(x_shape).astype(onp.float32)
    w = RNG.standard_normal((filters, x_shape[1], 3, 3)).astype(onp.float32)
    b = RNG.standard_normal(filters).astype(onp.float32) if use_bias else None
    return x, w, b


def uncached(x, w, b):
    """The result with arrays never seen before: the kernel packs into its scratch."""
    return conv(from_numpy(x), from_numpy(w), None if b is None else from_numpy(b)).asnumpy()


def check_value(got, x, w, b):
    onp.testing.assert_allclose(got, ref_conv2d(x, w, b, (1, 1), (1, 1)), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("use_bias", [True, False])
def test_cached_calls_give_the_same_bits(layout, use_bias):
    x, w, b = arrays(layout, use_bias)
    xs, ws = from_numpy(x), from_numpy(w)
    bs = None if b is None else from_numpy(b)
    results = [conv(xs, ws, bs).asnumpy() for _ in range(4)]  # seen, packed into the cache, hits
    for result in results[1:]:
        onp.testing.assert_array_equal(result, results[0])
    onp.testing.assert_array_equal(results[0], uncached(x, w, b))
    check_value(results[0], x, w, b)


def _assign(w, new):
    w[:] = np.array(new)


def _add_in_place(w, new):
    w += np.array(new) - w


def _copyto_method(w, new):
    np.array(new).copyto(w)


def _np_copyto(w, new):
    np.copyto(w, np.array(new))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("write", [_assign, _add_in_place, _copyto_method, _np_copyto],
                         ids=["setitem", "iadd", "copyto", "np.copyto"])
@pytest.mark.parametrize("target", ["weight", "bias"])
def test_every_write_misses(layout, write, target):
    x, w, b = arrays(layout)
    xs, ws, bs = from_numpy(x), from_numpy(w), from_numpy(b)
    for _ in range(3):  # the third call hits
        conv(xs, ws, bs).wait_to_read()
    if target == "weight":
        write(ws, RNG.standard_normal(w.shape).astype(onp.float32))
    else:
        write(bs, RNG.standard_normal(b.shape).astype(onp.float32))
    w, b = ws.asnumpy(), bs.asnumpy()  # (+= rounds: the values the write left)
    for _ in range(3):  # after the write: first sight, packed, hit
        got = conv(xs, ws, bs).asnumpy()
        onp.testing.assert_array_equal(got, uncached(x, w, b))
    check_value(got, x, w, b)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_new_weight_at_a_freed_weights_address_misses(layout):
    x, w, b = arrays(layout, use_bias=False)
    xs = from_numpy(x)
    for _ in range(8):  # each round frees a cached weight and allocates one of the same size
        ws = from_numpy(w)
        for _ in range(3):
            got = conv(xs, ws).asnumpy()
        check_value(got, x, w, None)
        del ws
        npx.waitall()
        w = RNG.standard_normal(w.shape).astype(onp.float32)


def _conv_block(layout):
    x_shape, filters = LAYOUTS[layout]
    block = gluon.nn.Conv2D(filters, 3, padding=1, in_channels=x_shape[1])
    block.initialize()
    return block


def _block_params(block):
    return block.weight.data().asnumpy(), block.bias.data().asnumpy()


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("hybridize", [False, True])
def test_gluon_writes_miss(layout, hybridize, tmp_path):
    """set_data, load_parameters and a Trainer step change what the next inference computes."""
    x, _, _ = arrays(layout)
    xs = from_numpy(x)
    block = _conv_block(layout)
    if hybridize:
        block.hybridize()

    def infer_and_check():
        for _ in range(3):
            got = block(xs).asnumpy()
        w, b = _block_params(block)
        onp.testing.assert_array_equal(got, uncached(x, w, b))
        check_value(got, x, w, b)

    infer_and_check()
    block.weight.set_data(np.array(RNG.standard_normal(block.weight.shape).astype(onp.float32)))
    infer_and_check()
    other = _conv_block(layout)
    path = str(tmp_path / "conv.params")
    other.save_parameters(path)
    block.load_parameters(path)
    onp.testing.assert_array_equal(block.weight.data().asnumpy(), other.weight.data().asnumpy())
    infer_and_check()
    trainer = gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 0.5})
    with autograd.record():
        loss = (block(xs) ** 2).mean()
    loss.backward()
    trainer.step(1)
    infer_and_check()


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_hybridized_equals_imperative(layout):
    x, _, _ = arrays(layout)
    xs = from_numpy(x)
    block = _conv_block(layout)
    imperative = [block(xs).asnumpy() for _ in range(3)]
    block.hybridize()
    hybridized = [block(xs).asnumpy() for _ in range(3)]
    for result in imperative + hybridized:
        onp.testing.assert_array_equal(result, imperative[0])


def test_more_weights_than_the_bound_stay_correct():
    """With a 1 MiB bound, 12 narrow weights of 147 KiB packed (1.7 MiB) evict each other;
    each call still matches its weight's reference, round after round."""
    done = run_python("""
import numpy as onp
from pymx import npx
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(3)
x = rng.standard_normal((1, 64, 7, 7)).astype(onp.float32)
weights = [rng.standard_normal((64, 64, 3, 3)).astype(onp.float32) for _ in range(12)]
xs, ws = from_numpy(x), [from_numpy(w) for w in weights]
first = {}
for round in range(3):
    for i, w in enumerate(ws):
        for _ in range(2):
            y = npx.convolution(xs, w, None, kernel=(3, 3), pad=(1, 1), num_filter=64,
                                no_bias=True).asnumpy()
            if i in first:
                assert (y == first[i]).all(), (round, i)
            first.setdefault(i, y)
x64 = onp.pad(x.astype(onp.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
for i, w in enumerate(weights):
    ref = sum(onp.einsum("nchw,fc->nfhw", x64[:, :, ky:ky + 7, kx:kx + 7],
                         w[:, :, ky, kx].astype(onp.float64))
              for ky in range(3) for kx in range(3))
    onp.testing.assert_allclose(first[i], ref, rtol=1e-5, atol=1e-3)
print("ok")
""", env=dict(os.environ, PYMX_PACKED_WEIGHT_CACHE_MB="1"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_naive_engine_equals_threaded(tmp_path):
    assert_engines_agree("""
import numpy as onp
from pymx import np, npx
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(5)
results = {}
for name, x_shape, filters in (("direct", (1, 4, 18, 18), 8), ("narrow", (2, 8, 9, 9), 40)):
    xs = from_numpy(rng.standard_normal(x_shape).astype(onp.float32))
    ws = from_numpy(rng.standard_normal((filters, x_shape[1], 3, 3)).astype(onp.float32))
    bs = from_numpy(rng.standard_normal(filters).astype(onp.float32))
    for step in range(6):
        if step == 3:
            ws += 0.25
        y = npx.convolution(xs, ws, bs, kernel=(3, 3), pad=(1, 1), num_filter=filters)
        results[f"{name}{step}"] = y.asnumpy()
onp.savez(OUT, **results)
""", tmp_path)
