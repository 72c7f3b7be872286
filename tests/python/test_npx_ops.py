"""npx elementwise and indexing operators against NumPy (float64), gradients against central
differences, dropout statistics."""
import numpy as onp
import pytest

from pymx import autograd, np, npx
from pymx.ndarray import from_numpy
from test_npx_nn import arr, check_grads, randn


def softplus(x):
    return onp.log1p(onp.exp(x))


ACTIVATIONS = {
    "relu": lambda x: onp.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + onp.exp(-x)),
    "tanh": onp.tanh,
    "softrelu": softplus,
    "softsign": lambda x: x / (1 + onp.abs(x)),
}


@pytest.mark.parametrize("act_type", sorted(ACTIVATIONS))
def test_activation(act_type):
    x = randn(3, 5)
    onp.testing.assert_allclose(npx.activation(arr(x), act_type=act_type).asnumpy(),
                                ACTIVATIONS[act_type](x), rtol=1e-12)
    check_grads(lambda x: npx.activation(x, act_type=act_type), [x], [0])


def test_relu_sigmoid_float32():
    x = randn(4, 4).astype("float32")
    onp.testing.assert_array_equal(npx.relu(arr(x, "float32")).asnumpy(), onp.maximum(x, 0))
    onp.testing.assert_allclose(npx.sigmoid(arr(x, "float32")).asnumpy(), 1 / (1 + onp.exp(-x)),
                                rtol=1e-6)
    check_grads(npx.sigmoid, [randn(2, 3)], [0])
    check_grads(npx.relu, [randn(2, 3)], [0])


def test_relu_keeps_nan():
    """MXNet's relu is `isnan(a) || a > 0 ? a : 0`: a NaN reaches the output instead of vanishing,
    and the convolution's fused relu (max(v, 0)) agrees."""
    x = onp.array([onp.nan, -1.0, 0.0, 2.0, -onp.inf, onp.inf])
    want = onp.array([onp.nan, 0.0, 0.0, 2.0, 0.0, onp.inf])
    onp.testing.assert_array_equal(npx.relu(arr(x)).asnumpy(), want)
    onp.testing.assert_array_equal(npx.activation(arr(x, "float32"), act_type="relu").asnumpy(),
                                   want.astype("float32"))


def test_activation_bad_type():
    with pytest.raises(ValueError, match="act_type 'swish'"):
        npx.activation(arr(randn(2)), act_type="swish")


@pytest.mark.parametrize("act_type", ["leaky", "elu"])
def test_leaky_relu(act_type):
    x = randn(3, 4)
    expected = onp.where(x > 0, x, 0.1 * (onp.expm1(x) if act_type == "elu" else x))
    onp.testing.assert_allclose(npx.leaky_relu(arr(x), act_type=act_type, slope=0.1).asnumpy(),
                                expected, rtol=1e-12)
    check_grads(lambda x: npx.leaky_relu(x, act_type=act_type, slope=0.1), [x], [0])


def ref_log_softmax(x, axis, t=1.0):
    z = x / t
    z = z - z.max(axis=axis, keepdims=True)
    return z - onp.log(onp.exp(z).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax(axis):
    x = randn(3, 4, 5) * 5
    onp.testing.assert_allclose(npx.log_softmax(arr(x), axis=axis).asnumpy(),
                                ref_log_softmax(x, axis), rtol=1e-10, atol=1e-12)
    onp.testing.assert_allclose(npx.softmax(arr(x), axis=axis, temperature=2.0).asnumpy(),
                                onp.exp(ref_log_softmax(x, axis, 2.0)), rtol=1e-10, atol=1e-15)
    small = randn(2, 3, 2)
    check_grads(lambda x: npx.softmax(x, axis=axis), [small], [0])
    check_grads(lambda x: npx.log_softmax(x, axis=axis, temperature=0.5), [small], [0])


def test_softmax_large_values_are_stable():
    x = onp.array([[1000.0, 1000.0, -1000.0]], dtype="float32")
    onp.testing.assert_allclose(npx.softmax(arr(x, "float32")).asnumpy(), [[0.5, 0.5, 0.0]])


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_pick(mode):
    x = randn(3, 4)
    index = onp.array([0, 3, 5, -1][:3], dtype="float64")
    fixed = onp.clip(index, 0, 3) if mode == "clip" else onp.mod(index, 4)
    expected = x[onp.arange(3), fixed.astype(int)]
    out = npx.pick(arr(x), arr(index), axis=1, mode=mode)
    onp.testing.assert_allclose(out.asnumpy(), expected)
    kept = npx.pick(arr(x), arr(index.astype("int32"), "int32"), axis=-1, mode=mode, keepdims=True)
    assert kept.shape == (3, 1)
    onp.testing.assert_allclose(kept.asnumpy()[:, 0], expected)
    check_grads(lambda x: npx.pick(x, arr(index), axis=1, mode=mode), [x], [0])


def test_pick_axis0_and_bad_index_shape():
    x = randn(3, 4)
    out = npx.pick(arr(x), arr([2, 0, 1, 1]), axis=0)
    onp.testing.assert_allclose(out.asnumpy(), x[[2, 0, 1, 1], onp.arange(4)])
    with pytest.raises(ValueError, match=r"index shape \(2,\)"):
        npx.pick(arr(x), arr([0, 1]), axis=1)


def test_one_hot():
    idx = onp.array([[0, 2], [1, 5]])
    out = npx.one_hot(arr(idx, "int64"), 3, on_value=2.0, off_value=-1.0, dtype="int32")
    expected = onp.full((2, 2, 3), -1)
    expected[0, 0, 0] = expected[0, 1, 2] = expected[1, 0, 1] = 2  # index 5 is out of range
    assert out.dtype == onp.int32
    onp.testing.assert_array_equal(out.asnumpy(), expected)


@pytest.mark.parametrize("is_ascend", [False, True])
def test_topk(is_ascend):
    x = randn(3, 6)
    order = onp.argsort(x if is_ascend else -x, axis=1, kind="stable")[:, :2]
    idx = npx.topk(arr(x), k=2, is_ascend=is_ascend)
    assert idx.dtype == onp.float32
    onp.testing.assert_array_equal(idx.asnumpy(), order)
    values, indices = npx.topk(arr(x), k=2, ret_typ="both", is_ascend=is_ascend, dtype="int64")
    onp.testing.assert_array_equal(indices.asnumpy(), order)
    onp.testing.assert_array_equal(values.asnumpy(), onp.take_along_axis(x, order, 1))
    mask = npx.topk(arr(x), k=2, ret_typ="mask", is_ascend=is_ascend).asnumpy()
    expected_mask = onp.zeros_like(x)
    onp.put_along_axis(expected_mask, order, 1, 1)
    onp.testing.assert_array_equal(mask, expected_mask)
    check_grads(lambda x: npx.topk(x, k=2, ret_typ="value", is_ascend=is_ascend), [x], [0])


@pytest.mark.parametrize("is_ascend", [False, True])
def test_topk_orders_nan_and_signed_zeros_as_sort(is_ascend):
    """Every NaN (either sign bit) above +inf, -0.0 tied with +0.0 (the lower index first), as
    np.sort orders them; k covers the whole row."""
    nan, inf = onp.float32(onp.nan), onp.float32(onp.inf)
    negative_nan = onp.copysign(nan, -1)
    row = onp.array([1.0, nan, -0.0, -inf, 0.0, negative_nan, inf, -2.0], dtype=onp.float32)
    x = onp.stack([row, row[::-1]])

    def key(v):  # NaN largest; -0.0 == 0.0 ties, and Python's sort is stable
        larger = (1, 0.0) if onp.isnan(v) else (0, float(v))
        return larger if is_ascend else (-larger[0], -larger[1])
    order = [sorted(range(8), key=lambda j: key(r[j])) for r in x]
    indices = npx.topk(arr(x), k=8, is_ascend=is_ascend, dtype="int64")
    onp.testing.assert_array_equal(indices.asnumpy(), order)


def test_topk_axis0_flat_and_errors():
    x = randn(4, 3)
    onp.testing.assert_array_equal(npx.topk(arr(x), axis=0, k=1, ret_typ="value").asnumpy(),
                                   x.max(axis=0, keepdims=True))
    onp.testing.assert_array_equal(npx.topk(arr(x), axis=None, k=3, ret_typ="value").asnumpy(),
                                   onp.sort(x.ravel())[::-1][:3])
    with pytest.raises(ValueError, match="k=5 is larger than the 3 elements"):
        npx.topk(arr(x), k=5)


def test_batch_flatten_and_grad():
    x = randn(2, 3, 4)
    onp.testing.assert_array_equal(npx.batch_flatten(arr(x)).asnumpy(), x.reshape(2, 12))
    check_grads(npx.batch_flatten, [x], [0])


def test_embedding_and_grad():
    w = randn(5, 3)
    idx = onp.array([[0, 4], [4, 7]])  # 7 is clipped to 4
    out = npx.embedding(arr(idx, "int32"), arr(w), input_dim=5, output_dim=3)
    onp.testing.assert_array_equal(out.asnumpy(), w[onp.clip(idx, 0, 4)])
    check_grads(lambda w: npx.embedding(arr(idx, "int32"), w), [w], [0])
    with pytest.raises(ValueError, match="input_dim=6"):
        npx.embedding(arr(idx, "int32"), arr(w), input_dim=6, output_dim=3)


def test_embedding_grad_of_repeated_indices_sums_in_the_weight_dtype():
    # 1 + 2^-30 summed 8 times: exact in float64, 8.0 in float32.
    idx = onp.zeros(8, dtype="int64")
    w = np.zeros((2, 1), dtype="float64")
    w.attach_grad()
    with autograd.record():
        out = npx.embedding(np.array(idx), w, input_dim=2, output_dim=1)
    out.backward(np.full((8, 1), 1 + 2.0 ** -30, dtype="float64"))
    onp.testing.assert_array_equal(w.grad.asnumpy(), [[8 * (1 + 2.0 ** -30)], [0.0]])


@pytest.mark.parametrize("axis", [0, 1])
def test_sequence_mask(axis):
    x = randn(4, 3, 2) if axis == 0 else randn(3, 4, 2)
    lengths = onp.array([1, 4, 2], dtype="float64")
    out = npx.sequence_mask(arr(x), arr(lengths), use_sequence_length=True, value=-7.0, axis=axis)
    expected = x.copy()
    for b, n in enumerate(lengths.astype(int)):
        if axis == 0:
            expected[n:, b] = -7
        else:
            expected[b, n:] = -7
    onp.testing.assert_array_equal(out.asnumpy(), expected)
    onp.testing.assert_array_equal(npx.sequence_mask(arr(x)).asnumpy(), x)
    check_grads(lambda x: npx.sequence_mask(x, arr(lengths), use_sequence_length=True, axis=axis),
                [x], [0])


# ---------------------------------------------------------------------------------------------
# dropout
# ---------------------------------------------------------------------------------------------
def test_dropout_inactive_at_inference():
    x = randn(50, 40)
    onp.testing.assert_array_equal(npx.dropout(arr(x), p=0.5).asnumpy(), x)
    with autograd.predict_mode():
        onp.testing.assert_array_equal(npx.dropout(arr(x), p=0.3).asnumpy(), x)


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_dropout_statistics_in_training(p):
    x = onp.ones((200, 250), dtype="float32")
    with autograd.train_mode():
        out = npx.dropout(arr(x, "float32"), p=p).asnumpy()
    kept = out != 0
    # 50,000 Bernoulli draws: the kept fraction is within 5 standard deviations of 1 - p.
    sd = onp.sqrt(p * (1 - p) / x.size)
    assert abs(kept.mean() - (1 - p)) < 5 * sd
    onp.testing.assert_allclose(out[kept], 1 / (1 - p), rtol=1e-6)
    with autograd.train_mode():
        again = npx.dropout(arr(x, "float32"), p=p).asnumpy()
    assert (again != out).any(), "two calls drew the same mask"


def test_dropout_always_axes_and_grad():
    x = randn(6, 5, 4)
    out = npx.dropout(arr(x), p=0.5, mode="always", axes=(1,)).asnumpy()
    mask = out / x
    # One draw shared along axis 1.
    onp.testing.assert_allclose(mask, onp.broadcast_to(mask[:, :1, :], mask.shape))
    assert set(onp.unique(onp.round(mask, 6))) <= {0.0, 2.0}
    xv = from_numpy(x)
    grad = from_numpy(onp.zeros_like(x))
    autograd.mark_variables([xv], [grad])
    with autograd.record():
        y = npx.dropout(xv, p=0.4)
    head = randn(6, 5, 4)
    autograd.backward([y], [arr(head)])
    y_np = y.asnumpy()
    onp.testing.assert_allclose(grad.asnumpy(), head * (y_np / x), rtol=1e-10)


def test_dropout_bad_p():
    with pytest.raises(ValueError, match="p must be in"):
        npx.dropout(arr(randn(3)), p=1.5)


def test_npx_flags_and_devices():
    assert npx.set_np() is None and npx.is_np_array() and npx.is_np_shape()
    assert npx.use_np(len) is len
    assert npx.cpu().device_type == "cpu"
    assert npx.num_gpus() >= 0
    npx.waitall()
