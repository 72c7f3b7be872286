"""What the autograd tape keeps alive: only the arrays an op's gradient reads (OpDef::grad_uses_*).
Checked through the host memory pool's in_use bytes, and by backward after the user has dropped
every intermediate array."""
import numpy as onp
import pytest

import pymx
from pymx import autograd, np, npx
from pymx.ndarray import from_numpy

MIB_FLOATS = 1 << 18  # one MiB of float32: exactly one bucket of the host pool


def _host_in_use():
    pymx.waitall()
    return pymx.cpu(0).memory_stats()["in_use"]


# op applied to an intermediate `a`, and whether the op's node must keep `a` until backward.
OPS = {
    "add_scalar": (lambda a: a + 1, False),
    "subtract": (lambda a: a - a, False),
    "exp": (np.exp, False),            # keeps its output instead
    "sum": (lambda a: a.sum(), False),
    "reshape": (lambda a: a.reshape(512, 512), False),
    "transpose": (lambda a: a.reshape(512, 512).T, False),
    "relu": (npx.relu, False),
    "activation": (lambda a: npx.activation(a, act_type="softrelu"), False),
    "multiply": (lambda a: a * a, True),
    "log": (np.log, True),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_recorded_op_frees_the_inputs_its_gradient_does_not_read(name):
    f, keeps_input = OPS[name]
    x = from_numpy(onp.full(MIB_FLOATS, 0.5, dtype="float32"))
    x.attach_grad()
    with autograd.record():
        a = x * 2  # an intermediate that only the tape can still hold after `del a`
        before = _host_in_use()  # x, x.grad and a
        y = f(a)
        out_bytes = y.size * 4
        del a
        after = _host_in_use()
        # A (512, 512).T view of a reshape: the reshape's output is dropped with it.
        expected_growth = out_bytes - (0 if keeps_input else MIB_FLOATS * 4)
        assert after - before == pytest.approx(expected_growth, abs=64), name
        y.backward()
    assert onp.isfinite(x.grad.asnumpy()).all()


def test_backward_after_the_user_dropped_every_intermediate():
    rng = onp.random.default_rng(0)
    xv = rng.uniform(0.5, 1.5, size=(3, 4))
    wv = rng.uniform(-1, 1, size=(4, 3))
    x = from_numpy(xv)
    w = from_numpy(wv)
    x.attach_grad()
    w.attach_grad()
    with autograd.record():
        h = x * 2 + 1
        h = np.exp(h) / 3
        h = np.log(h) - x
        h = npx.relu(h).reshape(4, 3)
        h = np.tanh(h * w).T
        loss = np.square(h).mean() + h.sum()
        del h
    loss.backward()

    # The same chain rule by hand, in float64. h1 = log(exp(2x + 1) / 3) - x = x + 1 - log 3.
    h1 = onp.log(onp.exp(2 * xv + 1) / 3) - xv
    r = onp.maximum(h1, 0).reshape(4, 3)
    t = onp.tanh(r * wv)
    dt = 2 * t / t.size + 1  # d loss / d t (the transpose does not change the sums)
    dpre = dt * (1 - t * t)
    dw = dpre * r
    dx = (dpre * wv).reshape(3, 4) * (h1 > 0)  # d h1 / d x = 1
    onp.testing.assert_allclose(w.grad.asnumpy(), dw, rtol=1e-10)
    onp.testing.assert_allclose(x.grad.asnumpy(), dx, rtol=1e-10)


def test_gradients_of_shape_only_ops_keep_broadcasting_and_dtype():
    # add/subtract reduce the gradient to each input's shape from the recorded shape alone.
    a = from_numpy(onp.ones((2, 1, 3), dtype="float32"))
    b = from_numpy(onp.ones((4, 1), dtype="float32"))
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        loss = ((a + b) - b).sum()
    loss.backward()
    assert a.grad.dtype == onp.float32 and b.grad.dtype == onp.float32
    onp.testing.assert_array_equal(a.grad.asnumpy(), onp.full((2, 1, 3), 4.0))
    onp.testing.assert_array_equal(b.grad.asnumpy(), onp.zeros((4, 1)))


def test_second_order_through_ops_that_keep_only_outputs():
    x = from_numpy(onp.array([0.3, -0.7, 1.2]))
    x.attach_grad()
    with autograd.record():
        y = np.exp(x * x)  # multiply keeps x, exp keeps only its output
        (gx,) = autograd.grad([y.sum()], [x], create_graph=True)
        z = gx.sum()
    z.backward()
    xv = onp.array([0.3, -0.7, 1.2])
    onp.testing.assert_allclose(gx.asnumpy(), 2 * xv * onp.exp(xv * xv), rtol=1e-12)
    # d/dx (2x exp(x^2)) differentiates through exp's saved output y too.
    onp.testing.assert_allclose(x.grad.asnumpy(), (2 + 4 * xv * xv) * onp.exp(xv * xv), rtol=1e-12)
