"""The packed weight cache of the convolution's direct kernels (Note [Packed weight cache],
packed_weight_cache.h): inference calls reuse the weights packed by an earlier call, keyed by
the weight's (and bias's) var identity and version. Checked here: a cached call gives the same
bits as an uncached one and matches a float64 NumPy reference; every kind of write to the weight
or the bias misses (w[:] =, +=, copyto, np.copyto, Parameter.set_data, load_parameters, a
Trainer step); a weight freed and a new one allocated (at the same address) misses; more weights
than the bound stay correct; hybridized equals imperative; the naive engine equals the threaded
one bitwise. Both packed layouts: the direct kernel (rows of at least 16 outputs) and the narrow
one (rows 7 to 15 wide). The fused inference block _conv_relu_max_pool, which packs for the
direct kernel through the same cache: cached calls give the uncached bits, a write to its weight,
bias or any batch-norm parameter misses, and a hybridized network running it fused gives the same
bits with the cache on and off."""
import os

import numpy as onp
import pytest

import pymx
from pymx import autograd, gluon, np, npx
from pymx._op import invoke
from pymx.ndarray import from_numpy
from conftest import assert_engines_agree, run_python
from test_conv_forward_paths import ref_conv2d
from test_conv_pool_fused import ref_conv_relu, ref_max_pool

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
from pymx._op import invoke
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
# The fused block, with batch norm
inputs = [from_numpy(rng.standard_normal(shape).astype(onp.float32))
          for shape in ((1, 3, 20, 40), (12, 3, 2, 2), (12,), (12,), (12,), (12,))]
inputs.append(from_numpy(rng.uniform(0.5, 2.0, 12).astype(onp.float32)))
for step in range(6):
    if step == 3:
        inputs[1] += 0.25
    y = invoke("_conv_relu_max_pool", inputs, {"kernel": (2, 2), "num_filter": 12,
                                               "pool_kernel": (4, 4), "pool_stride": (2, 2)})[0]
    results[f"fused{step}"] = y.asnumpy()
onp.savez(OUT, **results)
""", tmp_path)


# The fused inference block _conv_relu_max_pool (conv_pool_fused.cc) packs its convolution weights
# for the direct kernel through the same cache. Its batch-norm coefficients are computed on every
# call, so a write to any of the batch-norm parameters must show in the next result too.
FUSED_OP = "_conv_relu_max_pool"
FUSED_INPUTS = ("data", "weight", "bias", "gamma", "beta", "moving_mean", "moving_var")
# 12 filters: a partial channel block; rows of 39 outputs: the direct kernel.
FUSED_X, FUSED_FILTERS = (1, 3, 20, 40), 12
FUSED_ATTRS = {"kernel": (2, 2), "num_filter": FUSED_FILTERS, "pool_kernel": (4, 4),
               "pool_stride": (2, 2)}


def fused_arrays(batch_norm):
    """NumPy float32 inputs of the fused op, in FUSED_INPUTS' order (the first 3 without
    batch_norm)."""
    x = RNG.standard_normal(FUSED_X)
    w = RNG.standard_normal((FUSED_FILTERS, FUSED_X[1], 2, 2))
    values = [x, w, RNG.standard_normal(FUSED_FILTERS)]
    if batch_norm:
        values += [RNG.uniform(0.5, 2.0, FUSED_FILTERS), RNG.standard_normal(FUSED_FILTERS),
                   RNG.standard_normal(FUSED_FILTERS), RNG.uniform(0.5, 2.0, FUSED_FILTERS)]
    return [v.astype(onp.float32) for v in values]


def fused(inputs):
    attrs = dict(FUSED_ATTRS, bn_fix_gamma=False) if len(inputs) == 7 else FUSED_ATTRS
    return invoke(FUSED_OP, list(inputs), attrs)[0].asnumpy()


def fused_uncached(values):
    """The result with arrays never seen before: the op packs the weights for itself."""
    return fused([from_numpy(v) for v in values])


def check_fused_value(got, values):
    x, w, b = (v.astype(onp.float64) for v in values[:3])
    want = ref_max_pool(ref_conv_relu(x, w, b, 0), (4, 4), (2, 2))
    if len(values) == 7:
        gamma, beta, mean, var = (v.astype(onp.float64).reshape(1, -1, 1, 1) for v in values[3:])
        scale = gamma / onp.sqrt(var + 1e-3)
        want = want * scale + (beta - mean * scale)
    onp.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)  # sums of 12 products


@pytest.mark.parametrize("batch_norm", [False, True])
def test_fused_block_cached_calls_give_the_same_bits(batch_norm):
    values = fused_arrays(batch_norm)
    inputs = [from_numpy(v) for v in values]
    results = [fused(inputs) for _ in range(4)]  # seen, packed into the cache, hits
    for result in results[1:]:
        onp.testing.assert_array_equal(result, results[0])
    onp.testing.assert_array_equal(results[0], fused_uncached(values))
    check_fused_value(results[0], values)


@pytest.mark.parametrize("write", [_assign, _add_in_place, _copyto_method, _np_copyto],
                         ids=["setitem", "iadd", "copyto", "np.copyto"])
@pytest.mark.parametrize("target", FUSED_INPUTS[1:])
def test_fused_block_every_write_misses(target, write):
    values = fused_arrays(batch_norm=True)
    inputs = [from_numpy(v) for v in values]
    for _ in range(3):  # the third call hits
        fused(inputs)
    i = FUSED_INPUTS.index(target)
    new = RNG.uniform(0.5, 2.0, values[i].shape).astype(onp.float32)  # a valid variance too
    write(inputs[i], new)
    values = [a.asnumpy() for a in inputs]  # (+= rounds: the values the write left)
    for _ in range(3):  # after the write: first sight, packed, hit
        got = fused(inputs)
        onp.testing.assert_array_equal(got, fused_uncached(values))
    check_fused_value(got, values)


def test_fused_network_same_bits_with_and_without_the_cache(tmp_path):
    """A hybridized network whose blocks run fused (LeafNetwork's shape: convolution(relu) ->
    max pooling -> batch_norm, twice), with writes to each kind of parameter between inference
    passes: each pass gives the same bits with the cache on and off, and matches the op-by-op
    replay of the same parameters to float rounding."""
    script = """
import numpy as onp
import pymx
from pymx import np
from pymx.gluon import nn
from conftest import ops_ran
rng = onp.random.default_rng(4)

def network():
    net = nn.HybridSequential()
    for filters in (8, 12):
        net.add(nn.Conv2D(filters, kernel_size=2, activation="relu"),
                nn.MaxPool2D(pool_size=4, strides=2), nn.BatchNorm())
    net.add(nn.Flatten(), nn.Dense(3))
    net.initialize(pymx.initializer.Xavier())
    net(np.zeros((1, 3, 40, 40)))
    return net

fused, plain = network(), network()
for mine, theirs in zip(plain.collect_params().values(), fused.collect_params().values()):
    mine.set_data(np.array(theirs.data().asnumpy()))
fused.hybridize(static_alloc=True, static_shape=True)
plain.hybridize()
x = np.array(rng.standard_normal((1, 3, 40, 40)).astype("float32"))

def write(name, values):
    for net in (fused, plain):
        net.collect_params()[name].set_data(np.array(values))

# The convolutions' and batch norms' parameters (not the Dense layer's), by name
blocks = {str(i) for i, block in enumerate(fused) if not isinstance(block, nn.Dense)}
writes = [None] + [n for n in fused.collect_params() if n.split(".")[0] in blocks]
results = {}
for step, name in enumerate(writes):
    if name is not None:
        shape = fused.collect_params()[name].shape
        write(name, rng.uniform(0.5, 1.5, shape).astype("float32"))
    for _ in range(3):  # seen, packed, hit (the fused replays start on the third call)
        fused(x)
    ran = ops_ran(lambda: fused(x))
    assert ran.get("_conv_relu_max_pool") == 2, ran
    results[f"fused{step}"] = fused(x).asnumpy()
    results[f"plain{step}"] = plain(x).asnumpy()
onp.savez(OUT, **results)
"""
    outputs = {}
    for cache_mb in ("0", "64"):
        path = str(tmp_path / f"cache{cache_mb}.npz")
        done = run_python(f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
                          f"OUT = {path!r}\n" + script,
                          env=dict(os.environ, PYMX_PACKED_WEIGHT_CACHE_MB=cache_mb))
        assert done.returncode == 0, done.stderr
        outputs[cache_mb] = onp.load(path)
    steps = len(outputs["0"].files) // 2
    assert steps == 13  # the initial pass, then a write to each of the 12 parameters
    for step in range(steps):
        key = f"fused{step}"
        onp.testing.assert_array_equal(outputs["64"][key], outputs["0"][key], err_msg=key)
        onp.testing.assert_allclose(outputs["64"][key], outputs["64"][f"plain{step}"],
                                    rtol=1e-5, atol=1e-5, err_msg=key)
        if step:  # each write changed the result
            assert not onp.array_equal(outputs["64"][key], outputs["64"][f"fused{step - 1}"])
