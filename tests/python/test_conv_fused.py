"""convolution with act_type='relu' (the fused conv + bias + relu kernel) against NumPy in float64,
its gradients against central differences, and the backward path that skips the data gradient
when the data needs none (weight and bias gradients must be identical to the full path)."""
import numpy as onp
import pytest

from pymx import autograd, gluon, npx
from pymx._op import invoke
from pymx.ndarray import from_numpy

RNG = onp.random.default_rng(0)


def arr(values, dtype="float64"):
    return from_numpy(onp.asarray(values, dtype=dtype))


def ref_conv2d(x, w, b, stride, pad, groups):
    """Direct float64 NCHW convolution: out[n, f] = sum over its group's channels and the kernel."""
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    xp = onp.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = onp.zeros((n, f, oh, ow))
    fg = f // groups
    for o in range(f):
        channels = slice((o // fg) * cg, (o // fg + 1) * cg)
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, channels, i * stride:i * stride + kh, j * stride:j * stride + kw]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return out + (0 if b is None else b.reshape(1, -1, 1, 1))


CASES = [  # (x shape, filters, kernel, stride, pad, groups)
    ((2, 3, 6, 6), 4, 3, 1, 1, 1),
    ((3, 4, 7, 5), 6, 2, 2, 0, 2),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5)])
@pytest.mark.parametrize("use_bias", [True, False])
def test_fused_relu_forward_matches_numpy(case, dtype, tol, use_bias):
    shape, filters, k, stride, pad, groups = case
    x = RNG.standard_normal(shape)
    w = RNG.standard_normal((filters, shape[1] // groups, k, k))
    b = RNG.standard_normal(filters) if use_bias else None
    inputs = [arr(x, dtype), arr(w, dtype)] + ([arr(b, dtype)] if use_bias else [])
    y = npx.convolution(*inputs, kernel=(k, k), stride=(stride, stride), pad=(pad, pad),
                        num_filter=filters, num_group=groups, no_bias=not use_bias,
                        act_type="relu")
    expected = onp.maximum(ref_conv2d(x, w, b, stride, pad, groups), 0)
    assert y.dtype == onp.dtype(dtype)
    onp.testing.assert_allclose(y.asnumpy(), expected, rtol=tol, atol=tol * 10)


# Float32 stride-1 shapes with rows at least one vector wide take the direct kernel (Note [Direct
# convolution]) and, with AVX-512, the direct weight gradient (Note [Direct weight gradient]);
# float64 of the same shapes goes through im2col + GEMM.
DIRECT_CASES = [  # (x shape, filters, kernel, pad)
    ((1, 3, 24, 128), 32, 2, 0),   # LeafNetwork's conv1, fewer rows
    ((2, 3, 13, 40), 13, 3, 1),    # RGB 3x3, filters not a multiple of 8
    ((1, 1, 9, 17), 5, 5, 2),      # width 17: the last vector overlaps the one before
    ((2, 64, 11, 29), 12, 2, 0),   # LeafNetwork's conv3: 256 taps, odd row count
]


@pytest.mark.parametrize("case", DIRECT_CASES)
@pytest.mark.parametrize("act_type", [None, "relu"])
@pytest.mark.parametrize("use_bias", [True, False])
def test_direct_convolution_matches_numpy_and_the_gemm_path(case, act_type, use_bias):
    shape, filters, k, pad = case
    x = RNG.standard_normal(shape)
    w = RNG.standard_normal((filters, shape[1], k, k))
    b = RNG.standard_normal(filters) if use_bias else None
    expected = ref_conv2d(x, w, b, 1, pad, 1)
    if act_type:
        expected = onp.maximum(expected, 0)
    outputs = {}
    for dtype in ("float32", "float64"):
        inputs = [arr(x, dtype), arr(w, dtype)] + ([arr(b, dtype)] if use_bias else [])
        for a in inputs:
            a.attach_grad()
        with autograd.record():
            y = npx.convolution(*inputs, kernel=(k, k), pad=(pad, pad), num_filter=filters,
                                no_bias=not use_bias, act_type=act_type)
            loss = (y * arr(onp.cos(expected), dtype)).sum()
        loss.backward()
        outputs[dtype] = [y.asnumpy()] + [a.grad.asnumpy() for a in inputs]
    onp.testing.assert_allclose(outputs["float32"][0], expected, rtol=1e-5, atol=1e-4)
    if act_type:  # relu's mask could differ between the dtypes where an output is ~0
        return
    for got, want in zip(outputs["float32"][1:], outputs["float64"][1:]):
        onp.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_fused_relu_channel_last_and_1d():
    x = RNG.standard_normal((2, 5, 5, 3))  # NHWC
    w = RNG.standard_normal((4, 2, 2, 3))  # (F, kh, kw, C)
    b = RNG.standard_normal(4)
    kwargs = dict(kernel=(2, 2), num_filter=4, layout="NHWC")
    fused = npx.convolution(arr(x), arr(w), arr(b), act_type="relu", **kwargs).asnumpy()
    plain = npx.convolution(arr(x), arr(w), arr(b), **kwargs).asnumpy()
    expected = ref_conv2d(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), b, 1, 0, 1)
    onp.testing.assert_allclose(plain, expected.transpose(0, 2, 3, 1), rtol=1e-12)
    onp.testing.assert_array_equal(fused, onp.maximum(plain, 0))
    x1, w1 = RNG.standard_normal((2, 3, 9)), RNG.standard_normal((5, 3, 3))
    fused1 = npx.convolution(arr(x1), arr(w1), kernel=(3,), act_type="relu", no_bias=True)
    plain1 = npx.convolution(arr(x1), arr(w1), kernel=(3,), no_bias=True)
    onp.testing.assert_array_equal(fused1.asnumpy(), onp.maximum(plain1.asnumpy(), 0))


def grads_of(fn, inputs, wrt, head):
    """Autograd gradients of sum(fn(*inputs) * head) with respect to inputs[i] for i in wrt;
    the other inputs are plain arrays (no autograd node)."""
    arrays = [arr(a, head.dtype) for a in inputs]
    grads = [arr(onp.zeros_like(inputs[i]), head.dtype) for i in wrt]
    autograd.mark_variables([arrays[i] for i in wrt], grads)
    with autograd.record():
        out = fn(*arrays)
    autograd.backward([out], [arr(head, head.dtype)])
    return [g.asnumpy() for g in grads]


def numeric_grad(fn, inputs, i, head, eps=1e-6):
    numeric = onp.zeros_like(inputs[i])
    for j in onp.ndindex(inputs[i].shape):
        values = []
        for sign in (1, -1):
            moved = [v.copy() for v in inputs]
            moved[i][j] += sign * eps
            values.append(float((fn(*[arr(v) for v in moved]).asnumpy() * head).sum()))
        numeric[j] = (values[0] - values[1]) / (2 * eps)
    return numeric


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_fused_relu_gradients_match_finite_differences(layout):
    nhwc = layout == "NHWC"
    x = RNG.standard_normal((2, 5, 5, 3) if nhwc else (2, 3, 5, 5))
    w = RNG.standard_normal((4, 2, 2, 3) if nhwc else (4, 3, 2, 2))
    b = RNG.standard_normal(4)

    def fn(x, w, b):
        return npx.convolution(x, w, b, kernel=(2, 2), num_filter=4, layout=layout,
                               act_type="relu")

    head = RNG.standard_normal((2, 4, 4, 4))
    analytic = grads_of(fn, [x, w, b], [0, 1, 2], head)
    for i in range(3):
        onp.testing.assert_allclose(analytic[i], numeric_grad(fn, [x, w, b], i, head),
                                    rtol=1e-5, atol=1e-7, err_msg=f"gradient of input {i}")


def test_fused_relu_gradients_equal_conv_then_relu_float32():
    x = RNG.standard_normal((4, 3, 9, 9)).astype("float32")
    w = RNG.standard_normal((8, 3, 3, 3)).astype("float32")
    b = RNG.standard_normal(8).astype("float32")
    head = RNG.standard_normal((4, 8, 4, 4)).astype("float32")
    kwargs = dict(kernel=(3, 3), stride=(2, 2), num_filter=8)
    fused = grads_of(lambda x, w, b: npx.convolution(x, w, b, act_type="relu", **kwargs),
                     [x, w, b], [0, 1, 2], head)
    separate = grads_of(lambda x, w, b: npx.relu(npx.convolution(x, w, b, **kwargs)),
                        [x, w, b], [0, 1, 2], head)
    for got, want in zip(fused, separate):
        onp.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act_type", [None, "relu"])
def test_weight_grads_without_data_grad_are_identical(act_type):
    """The data is a plain array (no autograd node): its gradient is skipped, and the weight and
    bias gradients are those of the full backward pass. Not always to the bit: without a data
    gradient to compute, the weight gradient may take another path (Note [Strided direct weight
    gradient], or one part over all images when fewer images than threads), which adds the
    images' terms in another order."""
    x = RNG.standard_normal((5, 3, 8, 8)).astype("float32")
    w = RNG.standard_normal((6, 3, 3, 3)).astype("float32")
    b = RNG.standard_normal(6).astype("float32")
    head = RNG.standard_normal((5, 6, 6, 6)).astype("float32")

    def fn(x, w, b):
        return npx.convolution(x, w, b, kernel=(3, 3), num_filter=6, act_type=act_type)

    with_data = grads_of(fn, [x, w, b], [0, 1, 2], head)
    without_data = grads_of(fn, [x, w, b], [1, 2], head)
    onp.testing.assert_allclose(without_data[0], with_data[1], rtol=1e-5, atol=1e-5)
    onp.testing.assert_allclose(without_data[1], with_data[2], rtol=1e-5, atol=1e-5)


def test_deconvolution_weight_grads_without_data_grad_are_identical():
    x = RNG.standard_normal((3, 4, 5, 5))
    w = RNG.standard_normal((4, 2, 3, 3))
    b = RNG.standard_normal(2)
    head = RNG.standard_normal((3, 2, 11, 11))

    def fn(x, w, b):
        return npx.deconvolution(x, w, b, kernel=(3, 3), stride=(2, 2), num_filter=2)

    with_data = grads_of(fn, [x, w, b], [0, 1, 2], head)
    without_data = grads_of(fn, [x, w, b], [1, 2], head)
    onp.testing.assert_allclose(without_data[0], with_data[1], rtol=1e-5, atol=1e-5)
    onp.testing.assert_allclose(without_data[1], with_data[2], rtol=1e-5, atol=1e-5)
    onp.testing.assert_allclose(with_data[1], numeric_grad(fn, [x, w, b], 1, head), rtol=1e-5,
                                atol=1e-7)


def test_data_grad_flows_through_a_recorded_input():
    """A convolution whose data is the result of another recorded op still computes the data
    gradient (the first op's input gets its gradient through it)."""
    x = RNG.standard_normal((2, 2, 6, 6))
    w1 = RNG.standard_normal((3, 2, 2, 2))
    w2 = RNG.standard_normal((2, 3, 2, 2))

    def fn(x, w1, w2):
        h = npx.convolution(x, w1, kernel=(2, 2), num_filter=3, no_bias=True, act_type="relu")
        return npx.convolution(h * 2.0, w2, kernel=(2, 2), num_filter=2, no_bias=True)

    head = RNG.standard_normal((2, 2, 4, 4))
    analytic = grads_of(fn, [x, w1, w2], [0, 1], head)
    for k, i in enumerate([0, 1]):
        onp.testing.assert_allclose(analytic[k], numeric_grad(fn, [x, w1, w2], i, head),
                                    rtol=1e-5, atol=1e-7)


def test_backward_op_without_data_grad_has_no_data_output():
    x, w = arr(RNG.standard_normal((2, 3, 5, 5))), arr(RNG.standard_normal((4, 3, 2, 2)))
    dy = arr(RNG.standard_normal((2, 4, 4, 4)))
    attrs = dict(kernel=(2, 2), num_filter=4)
    full = invoke("convolution_backward", [dy, x, w], attrs)
    partial = invoke("convolution_backward", [dy, x, w], dict(attrs, need_data_grad=False))
    assert [g.shape for g in full] == [(2, 3, 5, 5), (4, 3, 2, 2), (4,)]
    assert [g.shape for g in partial] == [(4, 3, 2, 2), (4,)]
    onp.testing.assert_array_equal(partial[0].asnumpy(), full[1].asnumpy())
    onp.testing.assert_array_equal(partial[1].asnumpy(), full[2].asnumpy())


def test_bad_act_type_and_missing_output_raise():
    x, w = arr(RNG.standard_normal((1, 3, 5, 5))), arr(RNG.standard_normal((4, 3, 2, 2)))
    with pytest.raises(ValueError, match="act_type 'tanh'"):
        npx.convolution(x, w, kernel=(2, 2), no_bias=True, act_type="tanh")
    dy = arr(RNG.standard_normal((1, 4, 4, 4)))
    with pytest.raises(ValueError, match="expected 4 inputs"):
        invoke("convolution_backward", [dy, x, w], dict(kernel=(2, 2), act_type="relu",
                                                        no_bias=True))
    assert npx.convolution(x, w, kernel=(2, 2), no_bias=True).shape == (1, 4, 4, 4)  # usable


def make_conv_net(activation):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, activation=activation),
            gluon.nn.Conv2D(2, 2, strides=2, activation=activation))
    net.initialize()
    return net


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_gluon_conv_activation_hybridized_equals_imperative(activation):
    x = from_numpy(RNG.standard_normal((3, 2, 9, 9)).astype("float32"))
    net = make_conv_net(activation)
    runs = []
    for hybridize in (False, True):
        if hybridize:
            net.hybridize()
        with autograd.record():
            out = net(x)
        out.backward()
        runs.append([out.asnumpy()] + [p.grad().asnumpy()
                                       for p in net.collect_params().values()])
    for imperative, hybrid in zip(*runs):
        onp.testing.assert_allclose(hybrid, imperative, rtol=1e-6, atol=1e-6)
    # The layer's activation equals the separate operator applied to the plain convolution.
    conv = net[0]
    plain = npx.convolution(x, conv.weight.data(), conv.bias.data(), kernel=(3, 3), num_filter=4)
    expected = npx.activation(plain, act_type=activation).asnumpy()
    onp.testing.assert_allclose(conv(x).asnumpy(), expected, rtol=1e-6, atol=1e-6)
