"""The internal inference op _conv_relu_max_pool (engine/src/ops/conv_pool_fused.cc):
maxpool(relu(conv + bias)), optionally followed by batch_norm's transform with the running
statistics, against NumPy in float64, against the separate convolution -> pooling -> batch_norm
ops, and its errors."""
import numpy as onp
import pytest

from pymx import autograd, npx
from pymx._op import invoke
from pymx.ndarray import from_numpy

OP = "_conv_relu_max_pool"


def arr(values, dtype="float32"):
    return from_numpy(onp.asarray(values, dtype=dtype))


def ref_conv_relu(x, w, b, pad):
    """float64 stride-1 NCHW convolution + bias, then relu."""
    f, _, kh, kw = w.shape
    xp = onp.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = onp.zeros((x.shape[0], f, oh, ow)) + b.reshape(1, -1, 1, 1)
    for i in range(kh):
        for j in range(kw):
            out += onp.einsum("nchw,fc->nfhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return onp.maximum(out, 0)


def ref_max_pool(y, kernel, stride):
    """'valid' max pooling of NCHW y."""
    (kh, kw), (sh, sw) = kernel, stride
    oh, ow = (y.shape[2] - kh) // sh + 1, (y.shape[3] - kw) // sw + 1
    out = onp.full(y.shape[:2] + (oh, ow), -onp.inf)
    for i in range(kh):
        for j in range(kw):
            out = onp.maximum(out, y[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw])
    return out


def attrs_for(w, pad, pool_kernel, pool_stride):
    kh, kw = w.shape[2:]
    return {"kernel": (kh, kw), "pad": (pad, pad), "num_filter": w.shape[0],
            "pool_kernel": pool_kernel, "pool_stride": pool_stride}


CASES = [  # (x shape, filters, kernel, pad, pool kernel, pool stride)
    ((1, 3, 128, 128), 32, 2, 0, (4, 4), (2, 2)),   # LeafNetwork's three blocks
    ((1, 32, 62, 62), 64, 2, 0, (4, 4), (2, 2)),
    ((2, 64, 29, 29), 128, 2, 0, (4, 4), (2, 2)),
    ((2, 5, 37, 41), 13, 3, 1, (3, 3), (1, 2)),     # odd sizes, 13 filters, padding
]


def make_case(rng, case):
    shape, filters, k, pad, pool_kernel, pool_stride = case
    x = rng.standard_normal(shape)
    w = rng.standard_normal((filters, shape[1], k, k)) / onp.sqrt(shape[1] * k * k)
    b = rng.standard_normal(filters) * 0.1
    return x, w, b, pad, pool_kernel, pool_stride


@pytest.mark.parametrize("case", CASES)
def test_matches_numpy_and_the_separate_ops(seed, case):
    rng = onp.random.default_rng(seed)
    x, w, b, pad, pool_kernel, pool_stride = make_case(rng, case)
    xs, ws, bs = arr(x), arr(w), arr(b)
    fused = invoke(OP, [xs, ws, bs], attrs_for(w, pad, pool_kernel, pool_stride))[0]
    expected = ref_max_pool(ref_conv_relu(x, w, b, pad), pool_kernel, pool_stride)
    assert fused.shape == expected.shape and fused.dtype == onp.float32
    # float32 convolution of at most 256 taps of O(1) terms
    onp.testing.assert_allclose(fused.asnumpy(), expected, rtol=1e-5, atol=1e-5)
    # The same floats as the ops it replaces.
    conv = npx.convolution(xs, ws, bs, kernel=w.shape[2:], pad=(pad, pad), act_type="relu")
    apart = npx.pooling(conv, kernel=pool_kernel, stride=pool_stride)
    onp.testing.assert_array_equal(fused.asnumpy(), apart.asnumpy())


@pytest.mark.parametrize("nans", [0, 5])
def test_ties_and_nans_give_the_separate_ops_bits(seed, nans):
    """A 1x1 convolution of weight 1 and bias -0 passes its input through (relu makes negatives
    +0), so the pooling sees windows of zeros and repeated maxima, and NaNs with their own
    payloads: the fused op must give the separate ops' bits."""
    rng = onp.random.default_rng(seed)
    values = onp.array([0.0, -0.0, -1.0, 1.0, 2.0], "float32")
    x = rng.choice(values, size=(2, 1, 20, 70), p=[0.35, 0.35, 0.1, 0.1, 0.1])
    payloads = onp.array([0x7FC00001, 0x7FC00002, 0xFFC00003], "uint32").view("float32")
    x.flat[rng.choice(x.size, nans, replace=False)] = rng.choice(payloads, nans)
    w = onp.ones((1, 1, 1, 1), "float32")
    inputs = [arr(x), arr(w), arr([-0.0])]
    fused = invoke(OP, inputs, attrs_for(w, 0, (4, 4), (2, 2)))[0].asnumpy()
    conv = npx.convolution(*inputs, kernel=(1, 1), act_type="relu")
    apart = npx.pooling(conv, kernel=(4, 4), stride=(2, 2)).asnumpy()
    onp.testing.assert_array_equal(fused.view("uint32"), apart.view("uint32"))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("eps,fix_gamma", [(1e-3, True), (1e-5, False)])
def test_batch_norm_part_matches_numpy_and_batch_norm(seed, case, eps, fix_gamma):
    rng = onp.random.default_rng(seed)
    x, w, b, pad, pool_kernel, pool_stride = make_case(rng, case)
    filters = w.shape[0]
    gamma, beta = rng.standard_normal(filters), rng.standard_normal(filters)
    mean, var = rng.standard_normal(filters) * 0.3, rng.uniform(0.2, 2.0, filters)
    params = [arr(v) for v in (x, w, b, gamma, beta, mean, var)]
    attrs = dict(attrs_for(w, pad, pool_kernel, pool_stride), bn_eps=eps, bn_fix_gamma=fix_gamma)
    fused = invoke(OP, params, attrs)[0].asnumpy()

    pooled = ref_max_pool(ref_conv_relu(x, w, b, pad), pool_kernel, pool_stride)
    scale = (1.0 if fix_gamma else gamma) / onp.sqrt(var + eps)
    shift = beta - mean * scale
    expected = pooled * scale.reshape(1, -1, 1, 1) + shift.reshape(1, -1, 1, 1)
    onp.testing.assert_allclose(fused, expected, rtol=1e-5, atol=1e-5)

    # batch_norm (inference, running statistics) after the separate ops: equal up to the float
    # rounding of its y * scale + shift, 2 ulps of the terms' magnitudes.
    conv = npx.convolution(params[0], params[1], params[2], kernel=w.shape[2:], pad=(pad, pad),
                           act_type="relu")
    apart = npx.batch_norm(npx.pooling(conv, kernel=pool_kernel, stride=pool_stride),
                           *params[3:], eps=eps, fix_gamma=fix_gamma).asnumpy()
    terms = onp.abs(pooled * scale.reshape(1, -1, 1, 1)) + onp.abs(shift.reshape(1, -1, 1, 1))
    assert (onp.abs(fused.astype(onp.float64) - apart) <= 2 * 2.0**-23 * terms).all()


def leaf_block():
    rng = onp.random.default_rng(1)
    x, w, b = rng.standard_normal((1, 3, 20, 40)), rng.standard_normal((8, 3, 2, 2)), onp.zeros(8)
    return [arr(x), arr(w), arr(b)], attrs_for(w, 0, (4, 4), (2, 2))


def test_errors_name_the_problem():
    inputs, attrs = leaf_block()
    stats = [arr(onp.ones(8)) for _ in range(4)]
    with pytest.raises(ValueError, match="expected 3 inputs .* or 7 .* got 4"):
        invoke(OP, inputs + stats[:1], attrs)
    with pytest.raises(ValueError, match="no_bias must be False"):
        invoke(OP, inputs, dict(attrs, no_bias=True))
    with pytest.raises(ValueError, match="bn_eps and bn_fix_gamma need the 7-input form"):
        invoke(OP, inputs, dict(attrs, bn_eps=1e-5))
    with pytest.raises(TypeError, match="weight has dtype float64; .* float32 only"):
        invoke(OP, [inputs[0], arr(inputs[1].asnumpy(), "float64"), inputs[2]], attrs)
    with pytest.raises(ValueError, match="pool_convention 'full' is not supported"):
        invoke(OP, inputs, dict(attrs, pool_convention="full"))
    with pytest.raises(ValueError, match="missing required attribute 'pool_kernel'"):
        invoke(OP, inputs, {k: v for k, v in attrs.items() if k != "pool_kernel"})
    with pytest.raises(ValueError, match="bias shape \\(7,\\) does not match num_filter 8"):
        invoke(OP, [inputs[0], inputs[1], arr(onp.zeros(7))], attrs)
    with pytest.raises(ValueError, match="moving_var shape \\(3,\\) does not match num_filter 8"):
        invoke(OP, inputs + stats[:3] + [arr(onp.ones(3))], attrs)


@pytest.mark.parametrize("change", [
    {"stride": (3, 3)},                      # convolution of stride 3 across
    {"pool_stride": (1, 1)},                 # pooling of stride 1 along the width
    {"pool_kernel": (5, 5)},                 # pooling window wider than 4
    {"layout": "NHWC"},                      # channel-last
])
def test_geometries_outside_the_kernel_are_refused(change):
    inputs, attrs = leaf_block()
    if change.get("layout") == "NHWC":
        inputs = [arr(inputs[0].asnumpy().transpose(0, 2, 3, 1)),
                  arr(inputs[1].asnumpy().transpose(0, 2, 3, 1)), inputs[2]]
    with pytest.raises(ValueError, match="the fused kernel does not handle convolution kernel"):
        invoke(OP, inputs, dict(attrs, **change))


def test_no_gradient_through_it():
    inputs, attrs = leaf_block()
    grads = [from_numpy(onp.zeros(a.shape, "float32")) for a in inputs]
    autograd.mark_variables(inputs, grads)
    with autograd.record():
        y = invoke(OP, inputs, attrs)[0]
    with pytest.raises(ValueError, match="'_conv_relu_max_pool' is not differentiable"):
        y.backward()
