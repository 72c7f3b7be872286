"""The CPU kernels' fast paths (PERF-CPU): vectorised max-pool forward/backward (including windows
clipped by the right edge and ties), the batch split of convolution across intra-op threads,
the row or column split of large GEMMs, ReLU's select-based backward, the fused convolution +
relu backward's one-pass mask and bias sum, and batch_norm's two routes (channel runs, channel
rows) with their lane sums. Each is compared with a NumPy float64 reference written
independently of the kernel's shortcut."""
import itertools

import numpy as onp
import pytest

from pymx import autograd, npx
from pymx.ndarray import from_numpy

RNG = onp.random.default_rng(7)


def ref_max_pool(x, kernel, stride, pad, full):
    """Forward and the gradient for head `dy`: each output's gradient goes to the first
    (row-major) maximum of its window, as MXNet does."""
    n, c, h, w = x.shape

    def extent(size, k, s, p):
        room = size + 2 * p - k
        out = (-(-room // s) if full else room // s) + 1
        return out - 1 if full and (out - 1) * s >= size + p else out

    oh, ow = extent(h, kernel[0], stride[0], pad[0]), extent(w, kernel[1], stride[1], pad[1])
    y = onp.zeros((n, c, oh, ow))
    dy = RNG.standard_normal(y.shape)
    dx = onp.zeros(x.shape)
    for i, j, oy, ox in itertools.product(range(n), range(c), range(oh), range(ow)):
        y0, x0 = oy * stride[0] - pad[0], ox * stride[1] - pad[1]
        ylo, xlo = max(y0, 0), max(x0, 0)
        win = x[i, j, ylo:min(y0 + kernel[0], h), xlo:min(x0 + kernel[1], w)]
        y[i, j, oy, ox] = win.max()
        r, q = onp.unravel_index(onp.argmax(win), win.shape)
        dx[i, j, ylo + r, xlo + q] += dy[i, j, oy, ox]
    return y, dy, dx


@pytest.mark.parametrize("shape,kernel,stride,pad,full,ties", [
    ((2, 3, 9, 8), (4, 4), (2, 2), (0, 0), False, False),   # LeafNetwork's pooling
    ((2, 2, 31, 31), (4, 4), (2, 2), (0, 0), False, True),  # many equal values
    ((1, 3, 9, 9), (4, 4), (2, 2), (0, 0), True, True),     # 'full': last window clipped
    ((2, 2, 10, 11), (3, 2), (2, 3), (1, 1), True, False),  # padding: the generic path
    ((1, 2, 7, 13), (2, 5), (1, 2), (0, 0), True, False),   # wider than the 4-wide compare
    ((1, 1, 6, 6), (6, 6), (1, 1), (0, 0), False, True),
])
def test_max_pool_fast_paths_match_numpy(shape, kernel, stride, pad, full, ties):
    x = RNG.standard_normal(shape).astype("float32")
    if ties:
        x = onp.round(x)
    y_ref, dy, dx_ref = ref_max_pool(x.astype("float64"), kernel, stride, pad, full)
    xa = from_numpy(x)
    xa.attach_grad()
    with autograd.record():
        y = npx.pooling(xa, kernel=kernel, stride=stride, pad=pad,
                        pooling_convention="full" if full else "valid")
    y.backward(from_numpy(dy.astype("float32")))
    onp.testing.assert_array_equal(y.asnumpy(), y_ref.astype("float32"))
    onp.testing.assert_allclose(xa.grad.asnumpy(), dx_ref, rtol=1e-6, atol=1e-6)


def test_convolution_batch_split_matches_numpy():
    # 7 images: the batch splits unevenly across the threads; weight and bias gradients sum the
    # parts' partial results.
    x = RNG.standard_normal((7, 3, 12, 11)).astype("float32")
    w = RNG.standard_normal((5, 3, 2, 2)).astype("float32")
    b = RNG.standard_normal(5).astype("float32")
    dy = RNG.standard_normal((7, 5, 11, 10)).astype("float32")
    xd, wd = x.astype("float64"), w.astype("float64")
    windows = onp.lib.stride_tricks.sliding_window_view(xd, (2, 2), axis=(2, 3))  # n c oy ox ky kx
    y_ref = onp.einsum("ncyxij,fcij->nfyx", windows, wd) + b[None, :, None, None]
    dw_ref = onp.einsum("ncyxij,nfyx->fcij", windows, dy)
    dx_ref = onp.zeros_like(xd)
    for ky, kx in itertools.product(range(2), range(2)):
        dx_ref[:, :, ky:ky + 11, kx:kx + 10] += onp.einsum("nfyx,fc->ncyx", dy, wd[:, :, ky, kx])
    arrays = [from_numpy(a) for a in (x, w, b)]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        y = npx.convolution(*arrays, kernel=(2, 2), num_filter=5)
    y.backward(from_numpy(dy))
    onp.testing.assert_allclose(y.asnumpy(), y_ref, rtol=1e-4, atol=1e-4)
    onp.testing.assert_allclose(arrays[0].grad.asnumpy(), dx_ref, rtol=1e-4, atol=1e-4)
    onp.testing.assert_allclose(arrays[1].grad.asnumpy(), dw_ref, rtol=1e-4, atol=1e-3)
    onp.testing.assert_allclose(arrays[2].grad.asnumpy(), dy.sum(axis=(0, 2, 3)), rtol=1e-4,
                                atol=1e-3)


def test_relu_large_array_forward_and_backward():
    # Larger than one parallel chunk, with exact zeros: relu'(0) is 0, as in MXNet and PyTorch.
    x = onp.round(RNG.standard_normal(100003) * 2).astype("float32")
    dy = RNG.standard_normal(x.shape).astype("float32")
    xa = from_numpy(x)
    xa.attach_grad()
    with autograd.record():
        y = npx.activation(xa, act_type="relu")
    y.backward(from_numpy(dy))
    onp.testing.assert_array_equal(y.asnumpy(), onp.maximum(x, 0))
    onp.testing.assert_array_equal(xa.grad.asnumpy(), onp.where(x > 0, dy, 0))


def test_batch_norm_lane_sums_match_numpy():
    # inner extent 37 is not a multiple of the 8 lanes; values far from 0 test the two-pass
    # variance.
    x = (RNG.standard_normal((4, 3, 37)) * 3 + 100).astype("float32")
    dy = RNG.standard_normal(x.shape).astype("float32")
    gamma = RNG.standard_normal(3).astype("float32")
    beta = RNG.standard_normal(3).astype("float32")
    arrays = [from_numpy(a) for a in (x, gamma, beta)]
    for a in arrays:
        a.attach_grad()
    mean_in, var_in = from_numpy(onp.zeros(3, "float32")), from_numpy(onp.ones(3, "float32"))
    with autograd.record():
        y = npx.batch_norm(*arrays, mean_in, var_in, fix_gamma=False, eps=1e-5)
    y.backward(from_numpy(dy))
    xd, dyd, g = x.astype("float64"), dy.astype("float64"), gamma[None, :, None].astype("float64")
    mean = xd.mean(axis=(0, 2), keepdims=True)
    invstd = 1 / onp.sqrt(xd.var(axis=(0, 2), keepdims=True) + 1e-5)
    xhat = (xd - mean) * invstd
    dx_ref = g * invstd * (dyd - dyd.mean(axis=(0, 2), keepdims=True)
                           - xhat * (dyd * xhat).mean(axis=(0, 2), keepdims=True))
    onp.testing.assert_allclose(y.asnumpy(), g * xhat + beta[None, :, None], rtol=1e-4, atol=1e-4)
    onp.testing.assert_allclose(arrays[0].grad.asnumpy(), dx_ref, rtol=1e-3, atol=1e-3)
    onp.testing.assert_allclose(arrays[1].grad.asnumpy(), (dyd * xhat).sum(axis=(0, 2)),
                                rtol=1e-4, atol=1e-3)
    onp.testing.assert_allclose(arrays[2].grad.asnumpy(), dyd.sum(axis=(0, 2)), rtol=1e-4,
                                atol=1e-4)


def test_convolution_single_image_column_split_matches_numpy():
    # One image (fewer than the intra-op threads): the GEMM is split by output columns; two groups
    # and a bias check that each column block gets its group's filters and bias.
    x = RNG.standard_normal((1, 4, 40, 37)).astype("float32")
    w = RNG.standard_normal((6, 2, 2, 3)).astype("float32")
    b = RNG.standard_normal(6).astype("float32")
    y = npx.convolution(from_numpy(x), from_numpy(w), from_numpy(b), kernel=(2, 3), num_filter=6,
                        num_group=2).asnumpy()
    windows = onp.lib.stride_tricks.sliding_window_view(x.astype("float64"), (2, 3), axis=(2, 3))
    ref = onp.concatenate([
        onp.einsum("ncyxij,fcij->nfyx", windows[:, 2 * grp:2 * grp + 2], w[3 * grp:3 * grp + 3])
        for grp in range(2)], axis=1) + b[None, :, None, None]
    onp.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def check_fully_connected(rows, in_units, hidden, dtype, tol):
    """fully_connected's forward (X . W^T), data gradient (dY . W), weight gradient (dY^T . X) and
    bias gradient against NumPy float64: between them they take every operand both ways round."""
    x = RNG.standard_normal((rows, in_units)).astype(dtype)
    w = RNG.standard_normal((hidden, in_units)).astype(dtype)
    b = RNG.standard_normal(hidden).astype(dtype)
    dy = RNG.standard_normal((rows, hidden)).astype(dtype)
    arrays = [from_numpy(a) for a in (x, w, b)]
    for array in arrays:
        array.attach_grad()
    with autograd.record():
        y = npx.fully_connected(*arrays, num_hidden=hidden)
    y.backward(from_numpy(dy))
    xd, wd, dyd = x.astype("float64"), w.astype("float64"), dy.astype("float64")
    onp.testing.assert_allclose(y.asnumpy(), xd @ wd.T + b, **tol)
    onp.testing.assert_allclose(arrays[0].grad.asnumpy(), dyd @ wd, **tol)
    onp.testing.assert_allclose(arrays[1].grad.asnumpy(), dyd.T @ xd, **tol)
    onp.testing.assert_allclose(arrays[2].grad.asnumpy(), dyd.sum(axis=0), **tol)


@pytest.mark.parametrize("rows,in_units,hidden", [
    (300, 200, 70),  # C taller than wide: the GEMMs split rows across the intra-op threads
    (40, 300, 500),  # C wider than tall: they split columns
])
def test_parallel_gemm_splits_match_numpy(rows, in_units, hidden):
    # Every product is above the size where the GEMM is split.
    check_fully_connected(rows, in_units, hidden, "float32", dict(rtol=1e-4, atol=1e-3))


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-4), ("float16", 2e-2)])
@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("batch,height,width", [(7, 11, 10), (7, 9, 30), (1, 9, 30)])
def test_fused_relu_backward_mask_and_bias_sum_match_numpy(dtype, tol, use_bias, batch, height,
                                                           width):
    # One pass per image masks out_grad with relu's mask and sums the bias gradient: 7 images
    # split unevenly across the parts, 10x9 outputs per filter (not a multiple of the 8 lanes);
    # 8x29 outputs take float32's direct weight gradient (Note [Direct weight gradient]) on
    # AVX-512 machines, and one image is split across the threads instead (Note [Fewer images
    # than threads]); 13 filters leave the last 6-filter tile short.
    x = RNG.standard_normal((batch, 3, height, width)).astype(dtype)
    w = RNG.standard_normal((13, 3, 2, 2)).astype(dtype)
    b = RNG.standard_normal(13).astype(dtype)
    dy = RNG.standard_normal((batch, 13, height - 1, width - 1)).astype(dtype)
    arrays = [from_numpy(a) for a in ((x, w, b) if use_bias else (x, w))]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        y = npx.convolution(*arrays, kernel=(2, 2), num_filter=13, no_bias=not use_bias,
                            act_type="relu")
    y.backward(from_numpy(dy))
    # relu's gradient passes where the kernel's own output is positive.
    g = onp.where(y.asnumpy() > 0, dy.astype("float64"), 0.0)
    xd, wd = x.astype("float64"), w.astype("float64")
    windows = onp.lib.stride_tricks.sliding_window_view(xd, (2, 2), axis=(2, 3))  # n c oy ox ky kx
    dx_ref = onp.zeros_like(xd)
    for ky, kx in itertools.product(range(2), range(2)):
        dx_ref[:, :, ky:ky + height - 1, kx:kx + width - 1] += onp.einsum(
            "nfyx,fc->ncyx", g, wd[:, :, ky, kx])
    refs = [dx_ref, onp.einsum("ncyxij,nfyx->fcij", windows, g)] + ([g.sum(axis=(0, 2, 3))]
                                                                    if use_bias else [])
    for a, ref in zip(arrays, refs):
        assert a.grad.dtype == onp.dtype(dtype)
        onp.testing.assert_allclose(a.grad.asnumpy(), ref, rtol=tol, atol=tol * abs(ref).max())


def ref_batch_norm(x, gamma, beta, dy, axis, eps, batch_stats, fix_gamma, moving):
    """batch_norm's (out, mean, var) and (data, gamma, beta) gradients in float64."""
    axes = tuple(i for i in range(x.ndim) if i != axis % x.ndim)
    shape = [1] * x.ndim
    shape[axis] = -1
    mean, var = (x.mean(axis=axes), x.var(axis=axes)) if batch_stats else moving
    g = onp.ones_like(gamma) if fix_gamma else gamma
    invstd = 1 / onp.sqrt(var + eps)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    dx = dy
    if batch_stats:
        dx = dy - dy.mean(axis=axes, keepdims=True) - xhat * (dy * xhat).mean(axis=axes,
                                                                          keepdims=True)
    dx = dx * (g * invstd).reshape(shape)
    dgamma = onp.zeros_like(gamma) if fix_gamma else (dy * xhat).sum(axis=axes)
    return (g.reshape(shape) * xhat + beta.reshape(shape), mean, var), (dx, dgamma,
                                                                        dy.sum(axis=axes))


@pytest.mark.parametrize("shape,axis", [
    ((3, 4, 37, 41), 1),   # channel runs longer than a summing group, not a multiple of 8 lanes
    ((5, 3, 33), 1),       # channel runs just long enough to be read as runs
    ((9, 6, 5, 3), 1),     # runs of 15: read as rows, several positions per channel
    ((8, 64, 33, 7), -1),  # channel-last: rows, split into several parts
    ((300, 257), 1),       # (N, C) after a dense layer: rows, split into several parts
])
@pytest.mark.parametrize("dtype,param_dtype,tol", [
    ("float64", "float64", 1e-10), ("float32", "float32", 1e-4), ("float16", "float32", 2e-2)])
@pytest.mark.parametrize("batch_stats", [True, False])
def test_batch_norm_routes_match_numpy(shape, axis, dtype, param_dtype, tol, batch_stats):
    # Data far from 0 (mean 500, std 3) needs the variance from deviations (a sum of squares
    # cancels); the moving statistics are used with fix_gamma (the MXNet default), the batch's
    # without.
    c, eps, momentum = shape[axis], 1e-3, 0.9
    x = (RNG.standard_normal(shape) * 3 + 500).astype(dtype)
    dy = RNG.standard_normal(shape).astype(dtype)
    gamma, beta = (RNG.standard_normal(c).astype(param_dtype) for _ in range(2))
    moving = (RNG.standard_normal(c) + 500, RNG.random(c) * 9 + 1)

    def run():
        arrays = [from_numpy(a) for a in (x, gamma, beta)]
        for a in arrays:
            a.attach_grad()
        running = [from_numpy(m.astype(param_dtype)) for m in moving]
        with autograd.record():
            outs = npx.batch_norm(*arrays, *running, eps=eps, momentum=momentum,
                                  fix_gamma=not batch_stats, use_global_stats=not batch_stats,
                                  axis=axis, output_mean_var=True)
        outs[0].backward(from_numpy(dy))
        return [o.asnumpy() for o in outs], [a.grad.asnumpy() for a in arrays], running

    outs, grads, running = run()
    wide = [a.astype("float64") for a in (x, gamma, beta, dy)]
    moving_used = tuple(m.astype(param_dtype).astype("float64") for m in moving)
    ref_outs, ref_grads = ref_batch_norm(*wide, axis, eps, batch_stats, not batch_stats,
                                         moving_used)
    for got, ref in zip(outs + grads, ref_outs + ref_grads):
        onp.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(abs(ref).max(), 1))
    expected_running = moving_used
    if batch_stats:
        expected_running = tuple(momentum * m + (1 - momentum) * s
                                 for m, s in zip(moving_used, ref_outs[1:]))
    for got, ref in zip(running, expected_running):
        onp.testing.assert_allclose(got.asnumpy(), ref, rtol=tol)
    # Sums are taken in a fixed order: a second run gives the same bits.
    again_outs, again_grads, _ = run()
    for got, again in zip(outs + grads, again_outs + again_grads):
        onp.testing.assert_array_equal(got, again)


@pytest.mark.parametrize("kernel", [(2, 2), (1, 1)])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_grouped_convolution_backward_matches_numpy(kernel, layout):
    # Two groups over 5 images (parts of the batch): the weight gradient is accumulated
    # transposed per group and part. col2im zeroes each channel just before adding into it and a
    # pointwise kernel's GEMM writes data_grad directly: neither may see what a buffer held
    # before (the channel-last path computes in a reused workspace, so the second backward runs
    # on the first one's leftovers).
    kh, kw = kernel
    x = RNG.standard_normal((5, 4, 8, 7)).astype("float32")
    w = RNG.standard_normal((6, 2, kh, kw)).astype("float32")  # 2 groups of 2 channels
    dy = RNG.standard_normal((5, 6, 9 - kh, 8 - kw)).astype("float32")
    xd, wd, dyd = x.astype("float64"), w.astype("float64"), dy.astype("float64")
    dx_ref, dw_ref = onp.zeros(x.shape), onp.zeros(w.shape)
    for grp, ky, kx in itertools.product(range(2), range(kh), range(kw)):
        chans, filters = slice(2 * grp, 2 * grp + 2), slice(3 * grp, 3 * grp + 3)
        window = (slice(None), chans, slice(ky, ky + 9 - kh), slice(kx, kx + 8 - kw))
        dx_ref[window] += onp.einsum("nfyx,fc->ncyx", dyd[:, filters], wd[filters, :, ky, kx])
        dw_ref[filters, :, ky, kx] = onp.einsum("nfyx,ncyx->fc", dyd[:, filters], xd[window])
    nhwc = layout == "NHWC"
    to_layout = (lambda a: a.transpose(0, 2, 3, 1)) if nhwc else (lambda a: a)
    xa = from_numpy(onp.ascontiguousarray(to_layout(x)))
    wa = from_numpy(onp.ascontiguousarray(to_layout(w)))
    for _ in range(2):
        xa.attach_grad()
        wa.attach_grad()
        with autograd.record():
            y = npx.convolution(xa, wa, kernel=kernel, num_filter=6, num_group=2, no_bias=True,
                                layout=layout)
        y.backward(from_numpy(onp.ascontiguousarray(to_layout(dy))))
        onp.testing.assert_allclose(xa.grad.asnumpy(), to_layout(dx_ref), rtol=1e-4, atol=1e-4)
        onp.testing.assert_allclose(wa.grad.asnumpy(), to_layout(dw_ref), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows,in_units,hidden", [
    (1, 300, 70),  # batch 1: the forward and the data gradient have one row (gemv)
    (40, 300, 1),  # one unit: the forward has one column, the weight gradient one row
    (1, 20000, 64),  # as the first case, large enough to split across the intra-op threads
    (20000, 64, 1),  # as the second case, split
    (2000, 1, 600),  # one input: the weight gradient has one column, from a transposed operand
])
def test_vector_products_match_numpy(dtype, rows, in_units, hidden):
    # Products with one row or one column of C go to gemv (Note [Vector products]).
    tol = dict(rtol=1e-4, atol=1e-3) if dtype == "float32" else dict(rtol=1e-10, atol=1e-10)
    check_fully_connected(rows, in_units, hidden, dtype, tol)


@pytest.mark.parametrize("rows", [2, 5, 8])
def test_small_row_products_match_numpy(rows):
    # A Dense layer at batch 2-8 with a large weight takes the few-row kernel for its forward
    # (Note [Small-row products]); 3001 inputs leave a tail shorter than a vector.
    check_fully_connected(rows, 3001, 40, "float32", dict(rtol=1e-4, atol=1e-3))


@pytest.mark.parametrize("sa,sb", [((300,), (300, 7)), ((7, 300), (300,)), ((1, 300), (300, 1))])
def test_matmul_with_vectors_matches_numpy(sa, sb):
    from pymx import np
    a = RNG.standard_normal(sa).astype("float32")
    b = RNG.standard_normal(sb).astype("float32")
    onp.testing.assert_allclose(np.matmul(np.array(a), np.array(b)).asnumpy(),
                                a.astype("float64") @ b.astype("float64"), rtol=1e-4, atol=1e-3)
