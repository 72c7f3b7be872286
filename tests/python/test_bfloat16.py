"""bfloat16 on the CPU, against NumPy.

The reference rounds float32 to bfloat16 on the bit pattern (round to nearest, ties to even; NaN
stays NaN) and computes every op in float64 on the rounded inputs. bfloat16 keeps 8 significant
bits, so one rounding of a result is off by at most 2^-8 of it (ROUNDING). Kernels compute and
accumulate in float and round once at the end, so elementwise ops, reductions and products are
held to ROUNDING plus float32 error on the magnitudes summed (FLOAT_ERROR times the sum of
|terms|); where a result goes through more than one bfloat16 rounding the test says so.
"""
import pickle
import struct
import zipfile

import numpy as onp
import pytest

from pymx import autograd, gluon, np, npx
from pymx.gluon import nn
from pymx.gluon._params_file import load_params_file
from test_npx_nn import ref_conv, ref_pool

ROUNDING = 2.0 ** -8      # one bfloat16 rounding, relative
FLOAT_ERROR = 1e-6        # float32 accumulation, relative to the sum of |terms|
RNG = onp.random.default_rng(16)


def round_to_bfloat16(values):
    """The float64 values of `values` (as float32) rounded to bfloat16, computed on the bits."""
    f32 = onp.asarray(values, dtype=onp.float32)
    bits = f32.view(onp.uint32).astype(onp.uint64)
    lsb = (bits >> 16) & 1
    rounded = (((bits + 0x7FFF + lsb) >> 16) << 16).astype(onp.uint32).view(onp.float32)
    return onp.where(onp.isnan(f32), onp.nan, rounded).astype(onp.float64)


def bf16(values):
    """A bfloat16 pymx array of `values` and the float64 reference of its contents."""
    return np.array(values, dtype="bfloat16"), round_to_bfloat16(values)


def randn(*shape):
    return RNG.standard_normal(shape).astype(onp.float32)


def assert_bf16_close(got, want, rtol=ROUNDING, atol=0.0):
    """Asserts |got - want| <= atol + rtol * |want| elementwise (atol may be an array; equal
    infinities and NaNs match). got: a bfloat16 pymx array; want: float64 NumPy values."""
    assert got.dtype == np.bfloat16, f"dtype {got.dtype}"
    values = got.asnumpy().astype(onp.float64)
    want = onp.broadcast_to(onp.asarray(want, dtype=onp.float64), values.shape)
    bound = onp.broadcast_to(atol + rtol * onp.abs(want), values.shape)
    with onp.errstate(invalid="ignore"):
        ok = (values == want) | (onp.abs(values - want) <= bound)
    ok |= onp.isnan(values) & onp.isnan(want)
    if not ok.all():
        i = tuple(int(v) for v in onp.argwhere(~ok)[0])
        raise AssertionError(f"{int((~ok).sum())} of {ok.size} elements differ; at {i}: got "
                             f"{values[i]!r}, want {want[i]!r}, bound {bound[i]!r}")


# ---------------------------------------------------------------------------------------------
# The dtype and conversions
# ---------------------------------------------------------------------------------------------
def test_dtype_object_and_names():
    x = np.zeros((2, 3), dtype="bfloat16")
    assert x.dtype == np.bfloat16 and np.bfloat16.itemsize == 2
    assert np.ones(3, dtype=np.bfloat16).dtype == np.bfloat16
    assert x.nbytes == 12
    assert repr(np.array([1.5, -2.0], dtype="bfloat16")) == "array([ 1.5, -2. ], dtype=bfloat16)"
    value = np.array([2.5], dtype="bfloat16").item()
    assert type(value) is float and value == 2.5
    assert x.asnumpy().dtype == onp.float32


def test_conversion_matches_round_to_nearest_even():
    f32_max = onp.finfo(onp.float32).max
    specials = onp.array([0.0, -0.0, 1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20,
                          -(1 + 2 ** -8), 257.0, f32_max, -f32_max, 3.3895e38, onp.inf, -onp.inf,
                          onp.nan, 1e-45, 1.2e-38, 9.2e-41, 2 ** -133, 3 * 2 ** -134],
                         dtype=onp.float32)
    # Random bit patterns cover every exponent, subnormals and NaNs; patterns with low halves
    # near 0x8000 are the ties.
    patterns = RNG.integers(0, 2 ** 32, size=200000, dtype=onp.uint64).astype(onp.uint32)
    ties = (patterns & onp.uint32(0xFFFF0000)) | onp.uint32(0x8000)
    for values in (specials, patterns.view(onp.float32), ties.view(onp.float32)):
        got = np.array(values, dtype="bfloat16").asnumpy()
        want = round_to_bfloat16(values)
        onp.testing.assert_array_equal(got.astype(onp.float64), want)
    got = np.array(specials, dtype="bfloat16").asnumpy()
    assert got[3] == 1.0 and got[4] == 1 + 2 ** -6, "ties go to the even neighbour"
    assert got[8] == onp.inf and got[9] == -onp.inf, "past the largest bfloat16: inf"
    assert onp.isnan(got[13])


def test_casts_to_and_from_every_dtype():
    # 65504 (float16's largest) is 65536 in bfloat16, which overflows float16 to inf.
    values = onp.array([0.0, 1.0, 2.5, -2.5, 3.75, 100.3, 257.0, -0.4, 65504.0], onp.float32)
    x, ref = bf16(values)
    for name in ("float32", "float64", "float16"):
        got = x.astype(name)
        assert got.dtype == onp.dtype(name)
        with onp.errstate(over="ignore"):
            want = ref.astype(onp.float32).astype(name)
        onp.testing.assert_array_equal(got.asnumpy(), want)
    for name in ("int8", "int32", "int64"):
        small = x[:8] if name == "int8" else x
        onp.testing.assert_array_equal(small.astype(name).asnumpy(),
                                       onp.trunc(ref[:small.size]).astype(name))
    nonneg = np.array([0.0, 1.5, 200.0, 255.0], dtype="bfloat16")
    onp.testing.assert_array_equal(nonneg.astype("uint8").asnumpy(), [0, 1, 200, 255])
    onp.testing.assert_array_equal(x.astype("bool").asnumpy(), ref != 0)
    # Into bfloat16: integers and float64 through float32, then rounded.
    ints = onp.array([0, 1, -7, 255, 257, 1000001], onp.int64)
    for name in ("int32", "int64", "float64", "float16"):
        source = np.array(ints[:4] if name == "float16" else ints, dtype=name)
        assert_bf16_close(source.astype("bfloat16"),
                          round_to_bfloat16(source.asnumpy().astype(onp.float32)), rtol=0)
    flags = np.array([True, False]).astype(np.bfloat16)
    assert_bf16_close(flags, onp.array([1.0, 0.0]), rtol=0)
    assert np.array(x, dtype="float32").dtype == onp.float32


# ---------------------------------------------------------------------------------------------
# Promotion
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("other, result", [
    ("bfloat16", "bfloat16"), ("float16", "float32"), ("float32", "float32"),
    ("float64", "float64"), ("int8", "bfloat16"), ("uint8", "bfloat16"), ("int32", "bfloat16"),
    ("int64", "bfloat16"), ("bool", "bfloat16")])
def test_promotion_table(other, result):
    a = np.ones((2, 3), dtype="bfloat16")
    b = np.ones((3,), dtype=other)
    for got in (a + b, b + a, a * b, np.maximum(b, a)):
        assert got.dtype == (np.bfloat16 if result == "bfloat16" else onp.dtype(result)), \
            f"bfloat16 with {other}: {got.dtype}"
    for scalar in (2, 2.5, True):
        assert (a * scalar).dtype == np.bfloat16 and (scalar - a).dtype == np.bfloat16


# ---------------------------------------------------------------------------------------------
# Op families
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, low, high", [
    ("exp", -3, 3), ("log", 0.1, 5), ("sqrt", 0, 9), ("tanh", -3, 3), ("sin", -3, 3),
    ("abs", -3, 3), ("negative", -3, 3), ("square", -3, 3), ("reciprocal", 0.5, 4)])
def test_unary(name, low, high):
    x, ref = bf16(RNG.uniform(low, high, size=(7, 9)))
    assert_bf16_close(getattr(np, name)(x), getattr(onp, name)(ref), atol=1e-30)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum", "minimum",
                                  "power"])
def test_binary_broadcast(name):
    (a, ra), (b, rb) = bf16(RNG.uniform(0.5, 2, size=(4, 1, 5))), bf16(RNG.uniform(0.5, 2, (3, 1)))
    want = getattr(onp, name)(ra, rb)
    # A difference of two values rounds once, but cancels: absolute error of one rounding of
    # the operands' magnitude.
    assert_bf16_close(getattr(np, name)(a, b), want, atol=ROUNDING * 2 if name == "subtract" else 0)
    compare = np.greater(a, b)
    assert compare.dtype == onp.bool_
    onp.testing.assert_array_equal(compare.asnumpy(), ra > rb)


def test_scalar_arithmetic():
    x, ref = bf16(RNG.uniform(-2, 2, size=(10,)))
    # x * 3 is rounded to bfloat16 before 0.5 is added, and the sum once more.
    assert_bf16_close(x * 3 + 0.5, round_to_bfloat16(ref * 3) + 0.5, atol=ROUNDING * 0.5)
    assert_bf16_close(1 / x, 1 / ref)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod"])
def test_reductions(name):
    values = RNG.uniform(0.9, 1.1, size=(6, 50)) if name == "prod" else randn(6, 50)
    x, ref = bf16(values)
    for axis in (None, 1, 0):
        got = getattr(np, name)(x, axis=axis)
        want = getattr(onp, name)(ref, axis=axis)
        scale = onp.abs(ref).sum(axis=axis) / (ref.size / onp.size(want))
        exact = name in ("max", "min")  # a max is one of the inputs
        assert_bf16_close(got, want, rtol=0 if exact else ROUNDING,
                          atol=0 if exact else FLOAT_ERROR * ref.shape[-1] * scale)


def test_argmax_and_var():
    x, ref = bf16(randn(5, 40))
    onp.testing.assert_array_equal(np.argmax(x, axis=1).asnumpy(), onp.argmax(ref, axis=1))
    assert_bf16_close(np.var(x, axis=1), onp.var(ref, axis=1))
    assert_bf16_close(np.std(x, axis=1), onp.std(ref, axis=1))


@pytest.mark.parametrize("m, k, n", [(3, 4, 5), (17, 64, 9), (1, 300, 2)])
def test_matmul_and_dense(m, k, n):
    (a, ra), (b, rb) = bf16(randn(m, k)), bf16(randn(k, n))
    terms = onp.abs(ra) @ onp.abs(rb)
    assert_bf16_close(np.matmul(a, b), ra @ rb, atol=FLOAT_ERROR * terms + 1e-30)
    assert_bf16_close(np.dot(a, b), ra @ rb, atol=FLOAT_ERROR * terms + 1e-30)
    (w, rw), (bias, rbias) = bf16(randn(n, k)), bf16(randn(n))
    got = npx.fully_connected(a, w, bias, num_hidden=n)
    # The product is rounded to bfloat16 before the bias is added: two roundings.
    assert_bf16_close(got, ra @ rw.T + rbias, rtol=2 * ROUNDING,
                      atol=ROUNDING * (onp.abs(ra) @ onp.abs(rw.T)) + 1e-30)


def test_convolution_and_pooling():
    (x, rx), (w, rw), (b, rb) = bf16(randn(2, 3, 7, 8)), bf16(randn(4, 3, 3, 2)), bf16(randn(4))
    got = npx.convolution(x, w, b, kernel=(3, 2), stride=(2, 1), pad=(1, 0))
    want = ref_conv(rx, rw, rb, (2, 1), (1, 0), (1, 1), 1)
    terms = ref_conv(onp.abs(rx), onp.abs(rw), onp.abs(rb), (2, 1), (1, 0), (1, 1), 1)
    # Product and bias: up to two roundings, of the magnitudes summed.
    assert_bf16_close(got, want, rtol=0, atol=2 * ROUNDING * terms)
    for pool_type in ("max", "avg", "sum"):
        got = npx.pooling(x, kernel=(2, 3), stride=(2, 2), pad=(1, 1), pool_type=pool_type)
        want = ref_pool(rx, (2, 3), (2, 2), (1, 1), pool_type)
        terms = ref_pool(onp.abs(rx), (2, 3), (2, 2), (1, 1), "sum")
        assert_bf16_close(got, want, rtol=0 if pool_type == "max" else ROUNDING,
                          atol=0 if pool_type == "max" else FLOAT_ERROR * terms)


def test_batch_norm_with_float32_parameters():
    x, rx = bf16(randn(4, 3, 5, 5) * 2 + 1)
    gamma, beta = RNG.uniform(0.5, 2, 3), RNG.uniform(-1, 1, 3)
    params = [np.array(v, dtype="float32") for v in (gamma, beta, onp.zeros(3), onp.ones(3))]
    with autograd.train_mode():
        out = npx.batch_norm(x, *params, eps=1e-5, fix_gamma=False)
    mean = rx.mean(axis=(0, 2, 3), keepdims=True)
    var = rx.var(axis=(0, 2, 3), keepdims=True)
    g32, b32 = (onp.float32(v).astype(onp.float64).reshape(1, 3, 1, 1) for v in (gamma, beta))
    want = (rx - mean) / onp.sqrt(var + 1e-5) * g32 + b32
    assert_bf16_close(out, want, atol=1e-5)
    assert params[2].dtype == onp.float32  # the moving statistics stay float32
    onp.testing.assert_allclose(params[2].asnumpy(), 0.1 * mean.ravel(), rtol=1e-5)


def test_softmax_and_activations():
    x, rx = bf16(randn(4, 10) * 3)
    e = onp.exp(rx - rx.max(axis=-1, keepdims=True))
    assert_bf16_close(npx.softmax(x), e / e.sum(axis=-1, keepdims=True), atol=1e-30)
    log_softmax = rx - rx.max(axis=-1, keepdims=True) - onp.log(e.sum(axis=-1, keepdims=True))
    assert_bf16_close(npx.log_softmax(x), log_softmax, atol=1e-30)
    assert_bf16_close(npx.relu(x), onp.maximum(rx, 0), rtol=0)
    assert_bf16_close(npx.sigmoid(x), 1 / (1 + onp.exp(-rx)))
    assert_bf16_close(npx.activation(x, act_type="tanh"), onp.tanh(rx))
    assert_bf16_close(npx.activation(x, act_type="softrelu"), onp.log1p(onp.exp(rx)))
    # slope * x rounds once (the slope itself is exact in float).
    assert_bf16_close(npx.leaky_relu(x, slope=0.25), onp.where(rx > 0, rx, 0.25 * rx), rtol=0)


def test_indexing_and_layout():
    x, rx = bf16(randn(4, 5, 6))
    onp.testing.assert_array_equal(x[1:, ::2, -1].asnumpy(), rx[1:, ::2, -1])
    onp.testing.assert_array_equal(x[[0, 3], :, [1, 2]].asnumpy(), rx[[0, 3], :, [1, 2]])
    onp.testing.assert_array_equal(x[x > 0].asnumpy(), rx[rx > 0])
    onp.testing.assert_array_equal(np.take(x, np.array([2, 0]), axis=1).asnumpy(),
                                   onp.take(rx, [2, 0], axis=1))
    onp.testing.assert_array_equal(np.transpose(x, (2, 0, 1)).asnumpy(), rx.transpose(2, 0, 1))
    onp.testing.assert_array_equal(np.concatenate([x, x], axis=1).asnumpy(),
                                   onp.concatenate([rx, rx], axis=1))
    onp.testing.assert_array_equal(np.where(x > 0, x, 0).asnumpy(), onp.where(rx > 0, rx, 0))
    y = np.zeros((3, 4), dtype="bfloat16")
    y[1] = onp.array([1.0, 1 + 2 ** -8, 1 / 3, -7.0])
    y[2, 1:3] = 2.5
    want = onp.zeros((3, 4))
    want[1] = round_to_bfloat16([1.0, 1 + 2 ** -8, 1 / 3, -7.0])
    want[2, 1:3] = 2.5
    assert_bf16_close(y, want, rtol=0)
    assert y.dtype == np.bfloat16


def test_random():
    u = np.random.uniform(-2, 3, size=(20000,), dtype="bfloat16")
    assert u.dtype == np.bfloat16
    values = u.asnumpy().astype(onp.float64)
    assert values.min() >= -2 and values.max() < 3
    assert abs(values.mean() - 0.5) < 0.05 and abs(values.std() - 5 / 12 ** 0.5) < 0.05
    onp.testing.assert_array_equal(values, round_to_bfloat16(values))  # representable
    n = np.random.normal(1.0, 2.0, size=(20000,), dtype=np.bfloat16).asnumpy()
    assert abs(n.mean() - 1.0) < 0.1 and abs(n.std() - 2.0) < 0.1


@pytest.mark.parametrize("dtype,want", [("bfloat16", 4992.0), ("float16", 5000.0)])
def test_embedding_gradient_of_a_repeated_row_is_rounded_once(dtype, want):
    # 5000 additions of 1: a 16-bit running sum stops at 256 (bfloat16) or 2048 (float16);
    # summed in float and rounded once, 5000 becomes the nearest value the dtype holds.
    weight = np.zeros((3, 2), dtype=dtype)
    weight.attach_grad()
    with autograd.record():
        out = npx.embedding(np.zeros(5000, dtype="int64"), weight, input_dim=3, output_dim=2)
    out.backward(np.ones((5000, 2), dtype=dtype))
    onp.testing.assert_array_equal(weight.grad.asnumpy(), [[want, want], [0, 0], [0, 0]])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("high", [1.0, 1.003])  # 1.003 lies between two bfloat16 values
def test_uniform_draws_stay_below_high(dtype, high):
    # A draw within half a unit of high would round to it: 1 in 512 of U[0, 1) in bfloat16, 1
    # in 4096 in float16. They are clamped to the largest value below high.
    values = np.random.uniform(0, high, size=(200000,), dtype=dtype).asnumpy().astype("float64")
    below = values[values < high].max()
    assert values.max() < high
    assert (values == below).sum() > 10  # the clamped draws (and the unclamped ones there)
    assert abs(values.mean() - high / 2) < 0.01


def test_creation_functions():
    assert_bf16_close(np.full((2, 2), 1 / 3, dtype="bfloat16"), round_to_bfloat16(
        onp.full((2, 2), 1 / 3)), rtol=0)
    assert_bf16_close(np.arange(0, 300, 7, dtype="bfloat16"),
                      round_to_bfloat16(onp.arange(0, 300, 7)), rtol=0)
    assert_bf16_close(np.linspace(0, 1, 11, dtype="bfloat16"),
                      round_to_bfloat16(onp.linspace(0, 1, 11)), rtol=0)
    assert_bf16_close(np.eye(3, dtype="bfloat16"), onp.eye(3), rtol=0)
    assert np.zeros_like(np.ones(2, dtype="bfloat16")).dtype == np.bfloat16
    x, _ = bf16([1.0, 2.0])
    assert np.array(x).dtype == np.bfloat16 and np.array(x, dtype="float16").dtype == onp.float16


def test_host_computed_functions_keep_bfloat16():
    x, rx = bf16([3.5, -1.0, 2.0, 3.5, 0.1])
    assert_bf16_close(np.sort(x), onp.sort(rx), rtol=0)
    assert_bf16_close(np.unique(x), onp.unique(rx), rtol=0)
    assert np.argsort(x).dtype == onp.int64
    onp.testing.assert_array_equal(np.argsort(x).asnumpy(), onp.argsort(rx, kind="stable"))
    # A prefix sum rounds each partial sum in float32, then once to bfloat16.
    assert_bf16_close(np.cumsum(x), onp.cumsum(rx))


# ---------------------------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------------------------
def numeric_grad(fn, x, head, eps=1e-6):
    grad = onp.zeros_like(x)
    for i in onp.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += eps
        minus[i] -= eps
        grad[i] = ((fn(plus) - fn(minus)) * head).sum() / (2 * eps)
    return grad


@pytest.mark.parametrize("name", ["tanh", "matmul", "softmax", "mul_broadcast", "sum_square"])
def test_gradients_match_finite_differences(name):
    (x, rx), (w, rw) = bf16(randn(3, 4)), bf16(randn(4, 4) * 0.5)
    pymx_fn, numpy_fn = {
        "tanh": (np.tanh, onp.tanh),
        "matmul": (lambda v: np.matmul(v, w), lambda v: v @ rw),
        "softmax": (npx.softmax, lambda v: onp.exp(v) / onp.exp(v).sum(-1, keepdims=True)),
        "mul_broadcast": (lambda v: v * w[0], lambda v: v * rw[0]),
        "sum_square": (lambda v: np.sum(v * v, axis=1), lambda v: (v * v).sum(axis=1)),
    }[name]
    head64 = round_to_bfloat16(randn(*numpy_fn(rx).shape))
    x.attach_grad()
    with autograd.record():
        y = pymx_fn(x)
    y.backward(np.array(head64, dtype="bfloat16"))
    assert x.grad.dtype == np.bfloat16
    want = numeric_grad(numpy_fn, rx, head64)
    # The backward rounds its intermediates (e.g. 1 - y^2) and its result: a few roundings of
    # the terms' magnitude.
    scale = onp.abs(want).max()
    assert_bf16_close(x.grad, want, rtol=2 * ROUNDING, atol=4 * ROUNDING * scale)


# ---------------------------------------------------------------------------------------------
# Gluon: training with float32 master weights, files
# ---------------------------------------------------------------------------------------------
def _net():
    net = nn.Sequential()
    net.add(nn.Dense(16, activation="relu", in_units=4), nn.Dense(1, in_units=16))
    net.initialize()
    return net


def test_gluon_training_with_float32_master_copies():
    net = _net()
    net.cast("bfloat16")
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.05, "momentum": 0.9, "multi_precision": True})
    x = np.array(randn(64, 4), dtype="bfloat16")
    y = np.array(x.asnumpy() @ onp.array([[1.0], [-2.0], [0.5], [3.0]]), dtype="bfloat16")
    loss_fn = gluon.loss.L2Loss()
    losses = []
    for _ in range(30):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(64)
        losses.append(float(loss.astype("float32").mean().item()))
    assert loss.dtype == np.bfloat16
    assert losses[-1] < 0.2 * losses[0], losses
    for param in net.collect_params().values():
        assert param.data().dtype == np.bfloat16 and param.grad().dtype == np.bfloat16
    states = trainer._updaters[0].states
    assert states, "the updater keeps a state per parameter"
    for index, (master, _momentum) in states.items():
        weight = trainer._params[index].data()
        assert master.dtype == onp.float32
        # The bfloat16 weight is the master copy rounded.
        assert_bf16_close(weight, round_to_bfloat16(master.asnumpy()), rtol=0)


def test_hybridized_conv_net_with_batch_norm():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=2), nn.BatchNorm(in_channels=4), nn.Activation("relu"),
            nn.MaxPool2D(2), nn.Flatten(), nn.Dense(3, in_units=36))
    net.initialize()
    net.cast("bfloat16")
    assert net[1].gamma.data().dtype == onp.float32  # statistics stay float32 (MXNet's rule)
    x = np.array(randn(2, 2, 8, 8), dtype="bfloat16")
    grads = []
    for hybridize in (False, True):
        net.hybridize(hybridize)
        with autograd.record():
            y = net(x)
        y.backward()
        assert y.dtype == np.bfloat16 and net[0].weight.grad().dtype == np.bfloat16
        grads.append(net[0].weight.grad().asnumpy())
    # The same kernels either way: the same bits.
    onp.testing.assert_array_equal(grads[0], grads[1])


def test_optimizer_states_and_constants_keep_bfloat16(tmp_path):
    net = _net()
    net.cast("bfloat16")
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    x = np.array(randn(8, 4), dtype="bfloat16")
    path = str(tmp_path / "states")
    for _ in range(2):  # the loaded states come back on the devices at the next update
        with autograd.record():
            loss = (net(x) ** 2).sum()
        loss.backward()
        trainer.step(8)
        trainer.save_states(path)
        trainer.load_states(path)
    for momentum in trainer._updaters[0].states.values():
        assert momentum.dtype == np.bfloat16
    value, ref = bf16([[0.1, -2.7]])
    constant = gluon.Constant(value)
    constant.initialize()
    assert constant.data().dtype == np.bfloat16
    assert_bf16_close(constant.data(), ref, rtol=0)


def test_save_load_npz_round_trip_is_bitwise(tmp_path):
    net = _net()
    net.cast("bfloat16")
    path = tmp_path / "net.params"
    net.save_parameters(str(path))
    with zipfile.ZipFile(path) as archive:
        header = archive.read("0.weight.npy")[:128]
    assert b"'descr': '<b2'" in header, header  # MXNet's cnpy spelling
    loaded = load_params_file(str(path))
    assert loaded["0.weight"].dtype == np.bfloat16
    other = _net()
    other.cast("bfloat16")
    other.load_parameters(str(path))
    for name, param in net.collect_params().items():
        got = other.collect_params()[name].data()
        assert got.dtype == np.bfloat16
        onp.testing.assert_array_equal(got.asnumpy().view(onp.uint32),
                                       param.data().asnumpy().view(onp.uint32))
    # Into float32 parameters: refused without cast_dtype, widened exactly with it.
    plain = _net()
    with pytest.raises(ValueError, match="expected float32 vs saved bfloat16"):
        plain.load_parameters(str(path))
    plain.load_parameters(str(path), cast_dtype=True)
    onp.testing.assert_array_equal(plain[0].weight.data().asnumpy(),
                                   net[0].weight.data().asnumpy())
    assert plain[0].weight.data().dtype == onp.float32
    plain.load_parameters(str(path), cast_dtype=True, dtype_source="saved")
    assert plain[0].weight.data().dtype == np.bfloat16


def test_npz_member_written_by_mxnet_cnpy(tmp_path):
    """A '<b2' member as MXNet's cnpy writes it, here in Fortran order: read as bfloat16 bits."""
    bits = onp.arange(0x3F80, 0x3F86, dtype="<u2").reshape(2, 3)
    header = "{'descr': '<b2', 'fortran_order': True, 'shape': (2, 3), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"  # pad to 64 bytes, NPY v1.0
    member = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
    member += bits.T.tobytes()  # column-major data
    path = tmp_path / "mxnet.params"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("w.npy", member)
    loaded = load_params_file(str(path))["w"]
    assert loaded.dtype == np.bfloat16
    onp.testing.assert_array_equal(loaded.view(onp.uint16), bits)


def _legacy_file(path, arrays):
    """MXNet's legacy list format (V2 records, dense, cpu(0)) with raw bytes and type flags."""
    blob = struct.pack("<QQQ", 0x112, 0, len(arrays))
    for shape, flag, raw in arrays.values():
        blob += struct.pack("<Iii", 0xF993FAC9, 0, len(shape))
        blob += struct.pack("<" + "q" * len(shape), *shape)
        blob += struct.pack("<iii", 1, 0, flag) + raw
    blob += struct.pack("<Q", len(arrays))
    for name in arrays:
        blob += struct.pack("<Q", len(name)) + name.encode()
    path.write_bytes(blob)


def test_legacy_file_flag_12_loads_as_bfloat16(tmp_path):
    bits = onp.array([0x3F80, 0x3FC0, 0xC000, 0x7F80, 0x0001, 0x7FC0], dtype="<u2")
    path = tmp_path / "legacy.params"
    _legacy_file(path, {"w": ((2, 3), 12, bits.tobytes())})
    loaded = load_params_file(str(path))["w"]
    assert loaded.dtype == np.bfloat16 and loaded.shape == (2, 3)
    x = np.array(loaded)
    assert x.dtype == np.bfloat16
    want = (bits.astype(onp.uint32) << 16).view(onp.float32).reshape(2, 3)
    onp.testing.assert_array_equal(x.asnumpy().view(onp.uint32), want.view(onp.uint32))
    # Saved again: the same bits under '<b2'.
    param = gluon.Parameter("w", shape=(2, 3), dtype="bfloat16")
    param.initialize()
    param.set_data(x)
    net_path = tmp_path / "again.params"
    from pymx.gluon._params_file import save_npz
    save_npz(net_path, {"w": param.data()._host_values()})
    again = load_params_file(str(net_path))["w"]
    onp.testing.assert_array_equal(again.view(onp.uint16).ravel(), bits)


def test_pickle_and_dlpack_keep_the_bits():
    x, _ = bf16([1.0, 1 + 2 ** -7, -3.5, onp.inf])
    back = pickle.loads(pickle.dumps(x))
    assert back.dtype == np.bfloat16
    onp.testing.assert_array_equal(back.asnumpy(), x.asnumpy())
    shared = np.from_dlpack(x.__dlpack__())
    assert shared.dtype == np.bfloat16
    onp.testing.assert_array_equal(shared.asnumpy(), x.asnumpy())
    assert x.__dlpack_device__() == (1, 0)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
def test_errors_name_the_values():
    x = np.ones(3, dtype="bfloat16")
    with pytest.raises(TypeError, match="bfloat17"):
        np.zeros(3, dtype="bfloat17")
    with pytest.raises(TypeError, match="complex64"):
        x.astype("complex64")
    with pytest.raises(TypeError, match=r"mean: dtype int32 is not supported.*bfloat16"):
        np.mean(x, dtype="int32")
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        x + np.ones(4, dtype="bfloat16")
    with pytest.raises(TypeError, match=r"does not support arrays of dtype \[\(.a."):
        np.array(onp.zeros(2, dtype=[("a", "<u2"), ("b", "<u2")]))
    assert x.sum().dtype == np.bfloat16  # float reductions keep the dtype
    assert np.sum(np.ones(3, dtype="int32"), dtype="bfloat16").dtype == np.bfloat16
