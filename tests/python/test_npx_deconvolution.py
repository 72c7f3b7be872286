"""npx.deconvolution (transposed convolution) against a direct NumPy float64 scatter
implementation, its gradients against central differences, and its error messages."""
import itertools

import numpy as onp
import pytest

from pymx import npx
from pymx.ndarray import from_numpy
from pymx.test_utils import check_numeric_gradient

RNG = onp.random.default_rng(0)


def arr(values, dtype="float64"):
    return from_numpy(onp.asarray(values, dtype=dtype))


def randn(*shape):
    return RNG.standard_normal(shape)


def ref_deconv(x, w, b, stride, pad, dilate, adj, groups):
    """Every input element scatters x * w into the output window it reaches: output position
    i*stride - pad + k*dilate along each spatial dim; positions outside [0, out) are dropped."""
    nsp = x.ndim - 2
    n, c = x.shape[:2]
    kernel, fg = w.shape[2:], w.shape[1]
    cg = c // groups
    ins = x.shape[2:]
    outs = [(ins[i] - 1) * stride[i] - 2 * pad[i] + dilate[i] * (kernel[i] - 1) + 1 + adj[i]
            for i in range(nsp)]
    # Unpadded canvas: position i*stride + k*dilate; long enough for the window [pad, pad+out).
    canvas = [max((ins[i] - 1) * stride[i] + dilate[i] * (kernel[i] - 1) + 1, pad[i] + outs[i])
              for i in range(nsp)]
    full = onp.zeros((n, fg * groups, *canvas))
    for kpos in itertools.product(*[range(k) for k in kernel]):
        window = tuple(slice(kpos[i] * dilate[i],
                             kpos[i] * dilate[i] + stride[i] * (ins[i] - 1) + 1, stride[i])
                       for i in range(nsp))
        for g in range(groups):
            wk = w[(slice(g * cg, (g + 1) * cg), slice(None)) + kpos]
            full[(slice(None), slice(g * fg, (g + 1) * fg)) + window] += onp.einsum(
                "nc...,cf->nf...", x[:, g * cg:(g + 1) * cg], wk)
    out = full[(slice(None), slice(None)) +
               tuple(slice(pad[i], pad[i] + outs[i]) for i in range(nsp))]
    if b is not None:
        out = out + b.reshape((1, -1) + (1,) * nsp)
    return out


CASES = [
    # x shape, num_filter, kernel, stride, pad, dilate, adj, groups
    ((2, 3, 5), 4, (3,), (2,), (1,), (1,), (1,), 1),
    ((2, 2, 4, 5), 3, (3, 3), (1, 1), (0, 0), (1, 1), (0, 0), 1),
    ((2, 4, 4, 3), 6, (3, 2), (2, 3), (1, 0), (1, 1), (1, 2), 2),
    ((1, 4, 3, 4), 4, (2, 3), (2, 2), (2, 1), (2, 1), (0, 1), 4),
    ((1, 2, 5, 5), 2, (4, 4), (3, 2), (3, 0), (1, 2), (2, 1), 1),  # pad > adj and adj > pad
    ((2, 2, 3, 2, 3), 2, (2, 3, 2), (2, 1, 2), (1, 1, 0), (1, 1, 2), (1, 0, 1), 2),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_deconvolution_matches_numpy(case, with_bias):
    shape, f, kernel, stride, pad, dilate, adj, groups = case
    x = randn(*shape)
    w = randn(shape[1], f // groups, *kernel)
    b = randn(f) if with_bias else None
    y = npx.deconvolution(arr(x), arr(w), None if b is None else arr(b), kernel=kernel,
                          stride=stride, pad=pad, dilate=dilate, adj=adj, num_filter=f,
                          num_group=groups)
    want = ref_deconv(x, w, b, stride, pad, dilate, adj, groups)
    assert y.shape == want.shape
    onp.testing.assert_allclose(y.asnumpy(), want, rtol=1e-10, atol=1e-12)


def test_deconvolution_float32_and_float16():
    shape, f, kernel, stride, pad, dilate, adj, groups = CASES[2]
    x, w, b = randn(*shape), randn(shape[1], f // groups, *kernel), randn(f)
    want = ref_deconv(x, w, b, stride, pad, dilate, adj, groups)
    for dtype, tol in (("float32", 1e-5), ("float16", 2e-2)):
        y = npx.deconvolution(arr(x, dtype), arr(w, dtype), arr(b, dtype), kernel=kernel,
                              stride=stride, pad=pad, dilate=dilate, adj=adj, num_filter=f,
                              num_group=groups)
        assert y.dtype == onp.dtype(dtype)
        onp.testing.assert_allclose(y.asnumpy().astype(onp.float64), want, rtol=tol, atol=tol)


def test_target_shape_sets_pad_and_adj():
    x, w = randn(1, 2, 4, 3), randn(2, 3, 3, 3)
    for target in ((9, 7), (8, 6), (7, 5)):
        y = npx.deconvolution(arr(x), arr(w), kernel=(3, 3), stride=(2, 2), target_shape=target,
                              pad=(5, 5), num_filter=3)  # pad is ignored with a target_shape
        assert y.shape == (1, 3) + target
        # MXNet: total = stride*(in-1) + kernel - target; adj = total % 2, pad = (total+1) // 2.
        totals = [2 * (n - 1) + 3 - t for n, t in zip((4, 3), target)]
        want = ref_deconv(x, w, None, (2, 2), [(t + 1) // 2 for t in totals], (1, 1),
                          [t % 2 for t in totals], 1)
        onp.testing.assert_allclose(y.asnumpy(), want, rtol=1e-10, atol=1e-12)


def test_defaults_from_weight_shape():
    x, w = randn(2, 4, 3, 3), randn(4, 5, 2, 2)
    y = npx.deconvolution(arr(x), arr(w))
    onp.testing.assert_allclose(y.asnumpy(), ref_deconv(x, w, None, (1, 1), (0, 0), (1, 1),
                                                        (0, 0), 1), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[3]])
def test_deconvolution_gradients(case):
    shape, f, kernel, stride, pad, dilate, adj, groups = case
    x = randn(1, *shape[1:])
    w = randn(shape[1], f // groups, *kernel)
    b = randn(f)

    def fn(data, weight, bias):
        return npx.deconvolution(data, weight, bias, kernel=kernel, stride=stride, pad=pad,
                                 dilate=dilate, adj=adj, num_filter=f, num_group=groups)

    check_numeric_gradient(fn, [x, w, b], eps=1e-4, rtol=1e-6, atol=1e-8)


def test_gradient_without_bias_and_batch():
    x, w = randn(3, 2, 3), randn(2, 2, 3)

    def fn(data, weight):
        return npx.deconvolution(data, weight, kernel=(3,), stride=(2,), pad=(1,), adj=(1,))

    check_numeric_gradient(fn, [x, w], eps=1e-4, rtol=1e-6, atol=1e-8)


def test_bad_arguments_raise_value_error():
    x, w = arr(randn(1, 4, 3, 3)), arr(randn(4, 2, 3, 3))
    with pytest.raises(ValueError, match="adj"):
        npx.deconvolution(x, w, stride=(2, 2), adj=(2, 0))
    with pytest.raises(ValueError, match="weight shape"):
        npx.deconvolution(x, w, kernel=(3, 3), num_filter=6)
    with pytest.raises(ValueError, match="divisible by num_group 3"):
        npx.deconvolution(x, w, num_group=3)
    with pytest.raises(ValueError, match="layout 'NHWC'"):
        npx.deconvolution(x, w, layout="NHWC")
    with pytest.raises(ValueError, match="target_shape"):
        npx.deconvolution(x, w, target_shape=(9, 9))
    with pytest.raises(ValueError, match="bias"):
        npx.deconvolution(x, w, no_bias=False)
    from pymx._op import invoke
    with pytest.raises(ValueError, match="out_grad shape"):
        invoke("deconvolution_backward", [arr(randn(1, 2, 4, 4)), x, w], {"kernel": (3, 3)})
    with pytest.raises(ValueError, match="input 0 has dtype float32"):
        invoke("deconvolution_backward", [arr(randn(1, 2, 5, 5), "float32"), x, w],
               {"kernel": (3, 3)})
    # the process stays usable
    assert npx.deconvolution(x, w).shape == (1, 2, 5, 5)


@pytest.mark.parametrize("ndim,layout", [(1, "NCW"), (1, "NWC"), (3, "NCDHW"), (3, "NDHWC")])
def test_conv_transpose_layers(ndim, layout):
    from pymx.gluon import nn
    cls = {1: nn.Conv1DTranspose, 3: nn.Conv3DTranspose}[ndim]
    stride, pad, adj = (2,) * ndim, (1,) * ndim, (1,) * ndim
    layer = cls(4, kernel_size=3, strides=stride, padding=pad, output_padding=adj, groups=2,
                layout=layout, in_channels=2)
    layer.initialize()
    x = randn(2, 2, *(3,) * ndim)
    channel_last = layout.endswith("C")
    to_last = (0,) + tuple(range(2, ndim + 2)) + (1,)
    to_first = (0, ndim + 1) + tuple(range(1, ndim + 1))
    y = layer(arr(x.transpose(to_last) if channel_last else x, "float32")).asnumpy()
    w = layer.weight.data().asnumpy().astype(onp.float64)
    if channel_last:
        w, y = w.transpose(to_first), y.transpose(to_first)
    b = layer.bias.data().asnumpy().astype(onp.float64)
    want = ref_deconv(x, w, b, stride, pad, (1,) * ndim, adj, 2)
    assert y.shape == want.shape == (2, 4) + (6,) * ndim
    onp.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
