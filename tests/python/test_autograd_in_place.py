"""Gradients written straight into .grad buffers (Note [Gradients written in place]): a dense or
convolution weight reached through one edge gets its gradient from the backward op itself, with
no copy; every case where that would be wrong (a weight used twice, grad_req 'add', the buffer
read by the backward as a head gradient or as a forward input, autograd.grad) still gives the
float64 NumPy gradients, and the buffers the user holds stay the same arrays.

Tolerances: rtol 1e-10 against NumPy for float64, 1e-4 for the float32 case that also runs on
the GPU.
"""
import numpy as onp

from pymx import autograd, npx
from pymx.ndarray import from_numpy

import pymx
from conftest import ops_ran, requires_gpu

RNG = onp.random.default_rng(7)


def _variable(values, grad_req="write", device=None, dtype="float64"):
    x = from_numpy(onp.asarray(values, dtype=dtype))
    if device is not None:
        x = x.to_device(device)
    x.attach_grad(grad_req)
    return x


def _dense(x, w, b):
    return npx.fully_connected(x, w, b, num_hidden=w.shape[0])


def test_single_use_weights_are_written_without_copies():
    x = from_numpy(RNG.standard_normal((5, 4)))
    w, b = _variable(RNG.standard_normal((3, 4))), _variable(RNG.standard_normal(3))
    conv_x = from_numpy(RNG.standard_normal((2, 2, 6, 6)))
    cw = _variable(RNG.standard_normal((3, 2, 2, 2)))

    def step():
        with autograd.record():
            loss = (_dense(x, w, b) ** 2).sum() + npx.convolution(
                conv_x, cw, kernel=(2, 2), num_filter=3, no_bias=True).sum()
        loss.backward()

    ran = ops_ran(step)
    assert ran.get("fully_connected_backward") == 1 and "copy_to" not in ran, ran
    y = x.asnumpy() @ w.asnumpy().T + b.asnumpy()
    onp.testing.assert_allclose(w.grad.asnumpy(), 2 * y.T @ x.asnumpy(), rtol=1e-10)
    onp.testing.assert_allclose(b.grad.asnumpy(), 2 * y.sum(axis=0), rtol=1e-10)
    windows = onp.lib.stride_tricks.sliding_window_view(conv_x.asnumpy(), (2, 2), axis=(2, 3))
    onp.testing.assert_allclose(cw.grad.asnumpy(),
                                onp.broadcast_to(windows.sum(axis=(0, 2, 3)), (3, 2, 2, 2)),
                                rtol=1e-10)


def _conv_dense_step_without_copies(device):
    """A float32 convolution feeding a dense layer on `device`: backward copies no gradient, and
    both weights' gradients match NumPy (float64, rtol 1e-4)."""
    xv = RNG.standard_normal((2, 2, 6, 6))
    x = from_numpy(xv.astype("float32")).to_device(device)
    cw = _variable(RNG.standard_normal((3, 2, 2, 2)), device=device, dtype="float32")
    w = _variable(RNG.standard_normal((4, 75)), device=device, dtype="float32")

    def step():
        with autograd.record():
            h = npx.convolution(x, cw, kernel=(2, 2), num_filter=3, no_bias=True)
            loss = npx.fully_connected(h.reshape((2, 75)), w, num_hidden=4, no_bias=True).sum()
        loss.backward()

    ran = ops_ran(step, device=str(device))
    assert ran.get("convolution_backward") == 1 and "copy_to" not in ran, ran
    windows = onp.lib.stride_tricks.sliding_window_view(xv, (2, 2), axis=(2, 3))
    h = onp.einsum("ncyxij,fcij->nfyx", windows, cw.asnumpy().astype("float64"))
    onp.testing.assert_allclose(w.grad.asnumpy(), onp.ones((2, 4)).T @ h.reshape(2, 75),
                                rtol=1e-4, atol=1e-4)
    dh = (onp.ones((2, 4)) @ w.asnumpy().astype("float64")).reshape(2, 3, 5, 5)
    onp.testing.assert_allclose(cw.grad.asnumpy(), onp.einsum("ncyxij,nfyx->fcij", windows, dh),
                                rtol=1e-4, atol=1e-4)


def test_float32_conv_and_dense_weights_without_copies_on_the_cpu():
    _conv_dense_step_without_copies(pymx.cpu(0))


@requires_gpu
def test_float32_conv_and_dense_weights_without_copies_on_the_gpu():
    # The GPU backward ops (cuDNN, or im2col + cuBLAS) overwrite the offered buffers too.
    _conv_dense_step_without_copies(pymx.gpu(0))


def test_buffers_held_by_the_user_see_every_step():
    x = from_numpy(RNG.standard_normal((5, 4)))
    w = _variable(RNG.standard_normal((3, 4)))
    held = w.grad
    for scale in (1.0, 3.0):
        with autograd.record():
            loss = (_dense(x, w, from_numpy(onp.zeros(3))) * scale).sum()
        loss.backward()
        expected = scale * onp.ones((5, 3)).T @ x.asnumpy()
        onp.testing.assert_allclose(held.asnumpy(), expected, rtol=1e-10)
        onp.testing.assert_allclose(w.grad.asnumpy(), expected, rtol=1e-10)


def test_a_weight_used_twice_gets_the_sum():
    x = from_numpy(RNG.standard_normal((5, 4)))
    w = _variable(RNG.standard_normal((4, 4)))
    zero = from_numpy(onp.zeros(4))
    with autograd.record():
        loss = _dense(_dense(x, w, zero), w, zero).sum()
    loss.backward()
    xv, wv = x.asnumpy(), w.asnumpy()
    h = xv @ wv.T
    # loss = sum(h W^T) = sum over rows of h W^T: d/dW = 1^T h (outer) + the path through h.
    expected = onp.ones((5, 4)).T @ h + (onp.ones((5, 4)) @ wv).T @ xv
    onp.testing.assert_allclose(w.grad.asnumpy(), expected, rtol=1e-10)


def test_grad_req_add_accumulates():
    x = from_numpy(RNG.standard_normal((5, 4)))
    w = _variable(RNG.standard_normal((3, 4)), grad_req="add")
    zero = from_numpy(onp.zeros(3))
    for _ in range(2):
        with autograd.record():
            loss = _dense(x, w, zero).sum()
        loss.backward()
    onp.testing.assert_allclose(w.grad.asnumpy(), 2 * onp.ones((5, 3)).T @ x.asnumpy(),
                                rtol=1e-10)


def test_buffer_used_as_the_head_gradient_is_read_before_it_is_written():
    x = from_numpy(RNG.standard_normal((4, 4)))
    w = _variable(RNG.standard_normal((4, 4)))
    w.grad[:] = from_numpy(RNG.standard_normal((4, 4)))
    head = w.grad.asnumpy()
    with autograd.record():
        y = _dense(x, w, from_numpy(onp.zeros(4)))  # (4, 4), the shape of w
    y.backward(w.grad)
    onp.testing.assert_allclose(w.grad.asnumpy(), head.T @ x.asnumpy(), rtol=1e-10)


def test_buffer_used_as_a_forward_input_is_read_before_it_is_written():
    w = _variable(RNG.standard_normal((4, 4)))
    w.grad[:] = from_numpy(RNG.standard_normal((4, 4)))
    data = w.grad.asnumpy()
    with autograd.record():
        loss = _dense(w.grad, w, from_numpy(onp.zeros(4))).sum()  # data = the grad buffer
    loss.backward()
    onp.testing.assert_allclose(w.grad.asnumpy(), onp.ones((4, 4)).T @ data, rtol=1e-10)


def test_autograd_grad_leaves_the_buffers_alone():
    x = from_numpy(RNG.standard_normal((5, 4)))
    w = _variable(RNG.standard_normal((3, 4)))
    w.grad[:] = 7.0
    with autograd.record():
        loss = _dense(x, w, from_numpy(onp.zeros(3))).sum()
    (dw,) = autograd.grad(loss, [w])
    onp.testing.assert_allclose(dw.asnumpy(), onp.ones((5, 3)).T @ x.asnumpy(), rtol=1e-10)
    assert (w.grad.asnumpy() == 7.0).all()
