"""npx layer operators (convolution, pooling, batch_norm, layer_norm, fully_connected) against
direct NumPy implementations in float64, and their gradients against central differences."""
import itertools

import numpy as onp
import pytest

from pymx import autograd, npx
from pymx.ndarray import from_numpy

RNG = onp.random.default_rng(0)


def arr(values, dtype="float64"):
    return from_numpy(onp.asarray(values, dtype=dtype))


def randn(*shape):
    return RNG.standard_normal(shape)


def check_grads(fn, inputs, wrt, train=True, eps=1e-6, rtol=1e-5, atol=1e-7):
    """Compares autograd's gradient of sum(fn(*inputs) * head) with central differences, for
    each input index in `wrt`. Inputs are float64 NumPy arrays (never modified)."""
    arrays = [arr(a) for a in inputs]
    grads = [arr(onp.zeros_like(inputs[i])) for i in wrt]
    autograd.mark_variables([arrays[i] for i in wrt], grads)
    with autograd.record(train_mode=train):
        out = fn(*arrays)
    head = RNG.standard_normal(out.shape)
    autograd.backward([out], [arr(head)], train_mode=train)

    def loss(values):
        scope = autograd.train_mode() if train else autograd.predict_mode()
        with scope:
            return float((fn(*[arr(v) for v in values]).asnumpy() * head).sum())

    for k, i in enumerate(wrt):
        numeric = onp.zeros_like(inputs[i])
        for j in onp.ndindex(inputs[i].shape):
            plus = [v.copy() for v in inputs]
            minus = [v.copy() for v in inputs]
            plus[i][j] += eps
            minus[i][j] -= eps
            numeric[j] = (loss(plus) - loss(minus)) / (2 * eps)
        onp.testing.assert_allclose(grads[k].asnumpy(), numeric, rtol=rtol, atol=atol,
                                    err_msg=f"gradient of input {i}")


# ---------------------------------------------------------------------------------------------
# fully_connected
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flatten", [True, False])
def test_fully_connected(flatten):
    x, w, b = randn(2, 3, 4), randn(5, 12 if flatten else 4), randn(5)
    y = npx.fully_connected(arr(x), arr(w), arr(b), num_hidden=5, flatten=flatten).asnumpy()
    expected = (x.reshape(2, 12) if flatten else x) @ w.T + b
    onp.testing.assert_allclose(y, expected, rtol=1e-12)
    nobias = npx.fully_connected(arr(x), arr(w), flatten=flatten).asnumpy()
    onp.testing.assert_allclose(nobias, expected - b, rtol=1e-12, atol=1e-12)


def test_fully_connected_float32_and_grad():
    x, w, b = randn(3, 4), randn(2, 4), randn(2)
    y = npx.fully_connected(arr(x, "float32"), arr(w, "float32"), arr(b, "float32"))
    assert y.dtype == onp.float32
    onp.testing.assert_allclose(y.asnumpy(), x @ w.T + b, rtol=1e-5, atol=1e-5)
    check_grads(lambda x, w, b: npx.fully_connected(x, w, b), [x, w, b], [0, 1, 2])


def test_fully_connected_errors():
    with pytest.raises(ValueError, match=r"weight shape \(5, 3\)"):
        npx.fully_connected(arr(randn(2, 4)), arr(randn(5, 3)))
    with pytest.raises(ValueError, match="num_hidden=7"):
        npx.fully_connected(arr(randn(2, 4)), arr(randn(5, 4)), num_hidden=7)


# ---------------------------------------------------------------------------------------------
# convolution
# ---------------------------------------------------------------------------------------------
def ref_conv(x, w, b, stride, pad, dilate, groups):
    nsp = x.ndim - 2
    kernel = w.shape[2:]
    xp = onp.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_sp = [(x.shape[2 + i] + 2 * pad[i] - dilate[i] * (kernel[i] - 1) - 1) // stride[i] + 1
              for i in range(nsp)]
    n, c = x.shape[:2]
    f = w.shape[0]
    cg, fg = c // groups, f // groups
    out = onp.zeros((n, f, *out_sp))
    for kpos in itertools.product(*[range(k) for k in kernel]):
        window = tuple(slice(kpos[i] * dilate[i], kpos[i] * dilate[i] + stride[i] * (out_sp[i] - 1) + 1,
                             stride[i]) for i in range(nsp))
        patch = xp[(slice(None), slice(None)) + window]
        for g in range(groups):
            wk = w[(slice(g * fg, (g + 1) * fg), slice(None)) + kpos]
            out[:, g * fg:(g + 1) * fg] += onp.einsum("nc...,fc->nf...", patch[:, g * cg:(g + 1) * cg], wk)
    if b is not None:
        out += b.reshape((1, f) + (1,) * nsp)
    return out


CONV_CASES = [
    # x shape, num_filter, kernel, stride, pad, dilate, groups
    ((2, 3, 9), 4, (3,), (2,), (1,), (1,), 1),
    ((2, 3, 7, 8), 4, (2, 2), (1, 1), (0, 0), (1, 1), 1),   # LeafNetwork's conv
    ((1, 4, 7, 6), 6, (3, 2), (2, 1), (1, 0), (1, 2), 2),
    ((2, 2, 5, 5), 3, (1, 1), (1, 1), (0, 0), (1, 1), 1),   # pointwise: no im2col
    ((1, 2, 4, 5, 5), 2, (2, 3, 2), (1, 2, 1), (1, 1, 0), (1, 1, 1), 1),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_convolution(case):
    shape, f, kernel, stride, pad, dilate, groups = case
    x = randn(*shape)
    w = randn(f, shape[1] // groups, *kernel)
    b = randn(f)
    y = npx.convolution(arr(x), arr(w), arr(b), kernel=kernel, stride=stride, pad=pad,
                        dilate=dilate, num_filter=f, num_group=groups)
    onp.testing.assert_allclose(y.asnumpy(), ref_conv(x, w, b, stride, pad, dilate, groups),
                                rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", CONV_CASES[1:4])
def test_convolution_grad(case):
    shape, f, kernel, stride, pad, dilate, groups = case
    x = randn(*shape)[:1, :, :5, :5] if len(shape) == 4 else randn(*shape)
    w = randn(f, shape[1] // groups, *kernel)
    b = randn(f)
    check_grads(lambda x, w, b: npx.convolution(x, w, b, kernel=kernel, stride=stride, pad=pad,
                                                dilate=dilate, num_group=groups),
                [x, w, b], [0, 1, 2])


def test_convolution_float32_no_bias():
    x, w = randn(2, 3, 10, 10), randn(5, 3, 3, 3)
    y = npx.convolution(arr(x, "float32"), arr(w, "float32"), kernel=(3, 3), num_filter=5,
                        no_bias=True, pad=(1, 1))
    assert y.dtype == onp.float32 and y.shape == (2, 5, 10, 10)
    onp.testing.assert_allclose(y.asnumpy(), ref_conv(x, w, None, (1, 1), (1, 1), (1, 1), 1),
                                rtol=1e-4, atol=1e-4)


def test_convolution_nhwc():
    x, w, b = randn(2, 6, 7, 3), randn(4, 2, 3, 3), randn(4)  # NHWC data, (F, kh, kw, C) weight
    y = npx.convolution(arr(x), arr(w), arr(b), kernel=(2, 3), num_filter=4, layout="NHWC",
                        stride=(2, 1))
    expected = ref_conv(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), b, (2, 1), (0, 0),
                        (1, 1), 1).transpose(0, 2, 3, 1)
    onp.testing.assert_allclose(y.asnumpy(), expected, rtol=1e-10, atol=1e-12)
    check_grads(lambda x, w: npx.convolution(x, w, kernel=(2, 3), layout="NHWC", no_bias=True),
                [x[:1, :4, :4], w], [0, 1])


def test_convolution_errors():
    x = arr(randn(1, 3, 5, 5))
    with pytest.raises(ValueError, match=r"weight shape \(4, 2, 3, 3\).*expected \(4, 3, 3, 3\)"):
        npx.convolution(x, arr(randn(4, 2, 3, 3)), kernel=(3, 3), no_bias=True)
    with pytest.raises(ValueError, match="larger than the padded input"):
        npx.convolution(x, arr(randn(4, 3, 7, 7)), kernel=(7, 7), no_bias=True)
    with pytest.raises(ValueError, match="divisible by num_group 2"):
        npx.convolution(x, arr(randn(4, 1, 3, 3)), kernel=(3, 3), num_group=2, no_bias=True)
    with pytest.raises(ValueError, match="layout 'NCW'"):
        npx.convolution(x, arr(randn(4, 3, 3, 3)), kernel=(3, 3), layout="NCW", no_bias=True)
    # The process stays usable after the errors.
    assert npx.convolution(x, arr(randn(4, 3, 3, 3)), no_bias=True).shape == (1, 4, 3, 3)


# ---------------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------------
def ref_pool(x, kernel, stride, pad, pool_type, full=False, count_include_pad=True):
    nsp = x.ndim - 2
    ins = x.shape[2:]
    outs = []
    for i in range(nsp):
        room = ins[i] + 2 * pad[i] - kernel[i]
        o = (-(-room // stride[i]) if full else room // stride[i]) + 1
        if full and (o - 1) * stride[i] >= ins[i] + pad[i]:
            o -= 1
        outs.append(o)
    out = onp.zeros(x.shape[:2] + tuple(outs))
    for opos in itertools.product(*[range(o) for o in outs]):
        lo = [opos[i] * stride[i] - pad[i] for i in range(nsp)]
        hi_pad = [min(lo[i] + kernel[i], ins[i] + pad[i]) for i in range(nsp)]
        clo = [max(v, 0) for v in lo]
        chi = [min(hi_pad[i], ins[i]) for i in range(nsp)]
        window = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in zip(clo, chi))]
        axes = tuple(range(2, 2 + nsp))
        if pool_type == "max":
            val = window.max(axis=axes)
        elif pool_type == "sum":
            val = window.sum(axis=axes)
        else:
            size = (onp.prod([h - l for l, h in zip(lo, hi_pad)]) if count_include_pad
                    else onp.prod([h - l for l, h in zip(clo, chi)]))
            val = window.sum(axis=axes) / size
        out[(slice(None), slice(None)) + opos] = val
    return out


POOL_CASES = [
    # x shape, kernel, stride, pad, convention
    ((2, 3, 11, 11), (4, 4), (2, 2), (0, 0), "valid"),  # LeafNetwork's max-pool
    ((1, 2, 7, 6), (3, 2), (2, 2), (1, 1), "valid"),
    ((1, 2, 8, 7), (3, 3), (2, 2), (0, 1), "full"),
    ((2, 2, 9), (3,), (2,), (1,), "valid"),
    ((1, 1, 5, 4, 6), (2, 2, 3), (2, 1, 2), (0, 0, 1), "full"),
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
def test_pooling(case, pool_type):
    shape, kernel, stride, pad, conv = case
    x = randn(*shape)
    y = npx.pooling(arr(x), kernel=kernel, stride=stride, pad=pad, pool_type=pool_type,
                    pooling_convention=conv)
    onp.testing.assert_allclose(y.asnumpy(), ref_pool(x, kernel, stride, pad, pool_type, conv == "full"),
                                rtol=1e-12)


def test_pooling_avg_exclude_pad_and_global():
    x = randn(2, 3, 5, 6)
    y = npx.pooling(arr(x), kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                    count_include_pad=False)
    onp.testing.assert_allclose(y.asnumpy(), ref_pool(x, (3, 3), (2, 2), (1, 1), "avg",
                                                      count_include_pad=False), rtol=1e-12)
    g = npx.pooling(arr(x), pool_type="avg", global_pool=True)
    onp.testing.assert_allclose(g.asnumpy(), x.mean(axis=(2, 3), keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
def test_pooling_grad(pool_type):
    x = randn(1, 2, 6, 5)
    check_grads(lambda x: npx.pooling(x, kernel=(3, 2), stride=(2, 1), pad=(1, 0),
                                      pool_type=pool_type), [x], [0])


def test_pooling_float32_leafnet_shape():
    x = randn(2, 4, 63, 63).astype("float32")
    y = npx.pooling(arr(x, "float32"), kernel=(4, 4), stride=(2, 2))
    assert y.shape == (2, 4, 30, 30) and y.dtype == onp.float32
    onp.testing.assert_array_equal(y.asnumpy(), ref_pool(x, (4, 4), (2, 2), (0, 0), "max").astype("float32"))


def test_pooling_errors():
    x = arr(randn(1, 2, 3, 3))
    with pytest.raises(ValueError, match="larger than the padded input"):
        npx.pooling(x, kernel=(5, 5))
    with pytest.raises(ValueError, match="pool_type 'median'"):
        npx.pooling(x, kernel=(2, 2), pool_type="median")
    with pytest.raises(ValueError, match="kernel is required"):
        npx.pooling(x)


# ---------------------------------------------------------------------------------------------
# batch_norm / layer_norm
# ---------------------------------------------------------------------------------------------
def test_batch_norm_training_updates_running_stats():
    x, gamma, beta = randn(4, 3, 2, 5), randn(3), randn(3)
    mean0, var0 = randn(3), onp.abs(randn(3)) + 0.5
    running_mean, running_var = arr(mean0), arr(var0)
    with autograd.record():
        out, mean, var = npx.batch_norm(arr(x), arr(gamma), arr(beta), running_mean, running_var,
                                        eps=1e-5, momentum=0.8, fix_gamma=False,
                                        output_mean_var=True)
    bmean = x.mean(axis=(0, 2, 3))
    bvar = x.var(axis=(0, 2, 3))
    expected = ((x - bmean.reshape(1, 3, 1, 1)) / onp.sqrt(bvar.reshape(1, 3, 1, 1) + 1e-5)
                * gamma.reshape(1, 3, 1, 1) + beta.reshape(1, 3, 1, 1))
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-10, atol=1e-12)
    onp.testing.assert_allclose(mean.asnumpy(), bmean, rtol=1e-12)
    onp.testing.assert_allclose(var.asnumpy(), bvar, rtol=1e-12)
    onp.testing.assert_allclose(running_mean.asnumpy(), 0.8 * mean0 + 0.2 * bmean, rtol=1e-12)
    onp.testing.assert_allclose(running_var.asnumpy(), 0.8 * var0 + 0.2 * bvar, rtol=1e-12)


def test_batch_norm_inference_uses_running_stats():
    x, gamma, beta = randn(3, 4), randn(4), randn(4)
    rm, rv = randn(4), onp.abs(randn(4)) + 0.5
    running_mean, running_var = arr(rm), arr(rv)
    out = npx.batch_norm(arr(x), arr(gamma), arr(beta), running_mean, running_var, eps=1e-3)
    # fix_gamma defaults to True (MXNet): gamma is taken as 1.
    onp.testing.assert_allclose(out.asnumpy(), (x - rm) / onp.sqrt(rv + 1e-3) + beta, rtol=1e-10)
    onp.testing.assert_array_equal(running_mean.asnumpy(), rm)
    onp.testing.assert_array_equal(running_var.asnumpy(), rv)


@pytest.mark.parametrize("axis", [1, -1])
def test_batch_norm_grad(axis):
    x = randn(3, 2, 4)
    c = x.shape[axis]
    gamma, beta, rm, rv = randn(c), randn(c), randn(c), onp.abs(randn(c)) + 0.5

    def fn(x, gamma, beta):
        return npx.batch_norm(x, gamma, beta, arr(rm), arr(rv), fix_gamma=False, axis=axis)

    check_grads(fn, [x, gamma, beta], [0, 1, 2], rtol=1e-4, atol=1e-6)
    check_grads(fn, [x, gamma, beta], [0, 1, 2], train=False)


def test_batch_norm_float16_data_float32_params():
    x = randn(4, 2, 3)
    params = [arr(v, "float32") for v in (onp.ones(2), onp.zeros(2), onp.zeros(2), onp.ones(2))]
    out = npx.batch_norm(arr(x, "float16"), *params, eps=1e-5)
    assert out.dtype == onp.float16
    onp.testing.assert_allclose(out.asnumpy(), x / onp.sqrt(1 + 1e-5), rtol=2e-3, atol=2e-3)


def test_batch_norm_errors():
    with pytest.raises(ValueError, match=r"gamma shape \(4,\) does not match the 3 channels"):
        npx.batch_norm(arr(randn(2, 3)), *[arr(randn(4))] * 4)


def test_layer_norm_and_grad():
    x, gamma, beta = randn(2, 3, 5), randn(5), randn(5)
    out, mean, std = npx.layer_norm(arr(x), arr(gamma), arr(beta), eps=1e-5, output_mean_var=True)
    m = x.mean(-1, keepdims=True)
    s = onp.sqrt(x.var(-1, keepdims=True) + 1e-5)
    onp.testing.assert_allclose(out.asnumpy(), (x - m) / s * gamma + beta, rtol=1e-10)
    onp.testing.assert_allclose(mean.asnumpy(), m, rtol=1e-12)
    onp.testing.assert_allclose(std.asnumpy(), s, rtol=1e-12)
    check_grads(lambda x, g, b: npx.layer_norm(x, g, b, axis=1), [randn(2, 3, 2), randn(3), randn(3)],
                [0, 1, 2])


# 16-bit floats run their products through float32 BLAS (nn_common.h) and convolutions and
# pooling through their float kernels (through_float.h): every forward and backward against
# float64 on the same (rounded) inputs. Each result is rounded once from float32 sums of many
# terms: within a few roundings of the largest term magnitude.
@pytest.mark.parametrize("dtype, unit_roundoff", [("float16", 2.0 ** -11), ("bfloat16", 2.0 ** -8)])
def test_dense_convolution_and_pooling_gradients_in_16_bit_floats(dtype, unit_roundoff):
    def as_dtype(values, dtype):
        return from_numpy(onp.asarray(values, dtype="float64")).astype(dtype)

    def run(op, values, want_dtype):
        arrays = [as_dtype(v, want_dtype) for v in values]
        for a in arrays:
            a.attach_grad()
        with autograd.record():
            y = op(*arrays)
        # The same head in both runs: one the 16-bit dtype holds exactly.
        head = as_dtype(onp.linspace(-1, 1, y.size).reshape(y.shape), dtype).astype(want_dtype)
        y.backward(head)
        return [t.asnumpy().astype(onp.float64) for t in [y] + [a.grad for a in arrays]]

    cases = {
        "dense": (lambda x, w, b: npx.fully_connected(x, w, b, num_hidden=40),
                  [randn(70, 90), randn(40, 90), randn(40)]),
        "convolution": (lambda x, w, b: npx.convolution(x, w, b, kernel=(3, 3), pad=(1, 1),
                                                        num_filter=8),
                        [randn(4, 6, 12, 12), randn(8, 6, 3, 3), randn(8)]),
        "deconvolution": (lambda x, w, b: npx.deconvolution(x, w, b, kernel=(3, 3), stride=(2, 2),
                                                            num_filter=5),
                          [randn(3, 4, 6, 6), randn(4, 5, 3, 3), randn(5)]),
        "max_pooling": (lambda x: npx.pooling(x, kernel=(3, 3), stride=(2, 2), pool_type="max"),
                        [randn(2, 3, 9, 9)]),
        "avg_pooling": (lambda x: npx.pooling(x, kernel=(3, 3), stride=(2, 2), pool_type="avg"),
                        [randn(2, 3, 9, 9)]),
        "layer_norm": (lambda x, g, b: npx.layer_norm(x, g, b, axis=-1),
                       [randn(6, 40), randn(40), randn(40)]),
        "batch_norm": (lambda x, g, b: npx.batch_norm(x, g, b, as_dtype(onp.zeros(3), x.dtype),
                                                      as_dtype(onp.ones(3), x.dtype),
                                                      fix_gamma=False),
                       [randn(4, 3, 5, 5) * 2 + 1, randn(3), randn(3)]),
    }
    for name, (op, values) in cases.items():
        rounded = [as_dtype(v, dtype).asnumpy().astype(onp.float64) for v in values]
        got = run(op, rounded, dtype)
        want = run(op, rounded, "float64")
        assert len(got) == len(values) + 1
        for label, g, w in zip(["out", "d0", "d1", "d2"], got, want):
            bound = 8 * unit_roundoff * onp.abs(w).max()
            assert onp.abs(g - w).max() <= bound, (name, label, dtype, onp.abs(g - w).max(), bound)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_batch_norm_updates_16_bit_running_statistics(dtype):
    # The kernel updates them in place in float copies (through_float.h): they must come back.
    x = randn(8, 3, 4, 4) * 2 + 1
    data = from_numpy(x).astype(dtype)
    rounded = data.asnumpy().astype(onp.float64)
    mean, var = from_numpy(onp.zeros(3)).astype(dtype), from_numpy(onp.ones(3)).astype(dtype)
    gamma, beta = from_numpy(onp.ones(3)).astype(dtype), from_numpy(onp.zeros(3)).astype(dtype)
    with autograd.train_mode():
        npx.batch_norm(data, gamma, beta, mean, var, momentum=0.9, fix_gamma=False)
    batch_mean = rounded.mean(axis=(0, 2, 3))
    batch_var = rounded.var(axis=(0, 2, 3))
    unit = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    onp.testing.assert_allclose(mean.asnumpy(), 0.1 * batch_mean, rtol=2 * unit, atol=1e-6)
    # MXNet updates the running variance with the biased batch variance.
    onp.testing.assert_allclose(var.asnumpy(), 0.9 + 0.1 * batch_var, rtol=2 * unit)


def test_convolution_float16_and_empty_batch():
    x, w = randn(2, 3, 6, 6), randn(4, 3, 2, 2)
    y = npx.convolution(arr(x, "float16"), arr(w, "float16"), no_bias=True)
    assert y.dtype == onp.float16
    onp.testing.assert_allclose(y.asnumpy(), ref_conv(x, w, None, (1, 1), (0, 0), (1, 1), 1),
                                rtol=1e-2, atol=2e-2)
    empty = npx.convolution(arr(onp.zeros((0, 3, 6, 6))), arr(w), no_bias=True)
    assert empty.asnumpy().shape == (0, 4, 5, 5)
