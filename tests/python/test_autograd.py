"""pymx.autograd: gradients against finite differences and closed forms, grad_req, retain_graph,
the recording/training scopes, several heads, heads on two devices, and error cases.

Tolerances: float64 gradients vs central differences (step 1e-6) agree to rtol 1e-6; float64
gradients vs closed forms to rtol 1e-10; float32 ones to rtol 1e-5.
"""
import numpy as onp
import pytest

import pymx
from pymx import autograd, np


def _array(values, dtype="float64", device=None):
    return np.array(onp.asarray(values, dtype=dtype), device=device or pymx.cpu(0))


def _variable(values, dtype="float64", grad_req="write", device=None):
    x = _array(values, dtype, device)
    x.attach_grad(grad_req)
    return x


def _composite(x, y):
    """A scalar using exp, sin, log, division, broadcasting and x several times."""
    return (np.exp(x) * y + np.sin(x * y) / (y * y + 1.0) - np.log(x * x + 1.0)).sum()


def _composite_grads(x, y):
    """Closed-form gradients of _composite, in NumPy."""
    d = y * y + 1
    dx = onp.exp(x) * y + onp.cos(x * y) * y / d - 2 * x / (x * x + 1)
    dy = onp.exp(x) + onp.cos(x * y) * x / d - onp.sin(x * y) * 2 * y / d ** 2
    return dx, dy


def _central_differences(f, values, eps=1e-6):
    grad = onp.zeros_like(values)
    for i in onp.ndindex(values.shape):
        up, down = values.copy(), values.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (f(up) - f(down)) / (2 * eps)
    return grad


def test_composite_gradient_matches_finite_differences_and_closed_form(device):
    rng = onp.random.default_rng(0)
    xv, yv = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4))
    x, y = _variable(xv, device=device), _variable(yv, device=device)
    with autograd.record():
        z = _composite(x, y)
    assert z.device == device
    z.backward()
    assert x.grad.device == device

    def f(xs, ys):
        return _composite(_array(xs, device=device), _array(ys, device=device)).item()

    fd_x = _central_differences(lambda v: f(v, yv), xv)
    fd_y = _central_differences(lambda v: f(xv, v), yv)
    onp.testing.assert_allclose(x.grad.asnumpy(), fd_x, rtol=1e-6, atol=1e-8)
    onp.testing.assert_allclose(y.grad.asnumpy(), fd_y, rtol=1e-6, atol=1e-8)
    dx, dy = _composite_grads(xv, yv)
    onp.testing.assert_allclose(x.grad.asnumpy(), dx, rtol=1e-10)
    onp.testing.assert_allclose(y.grad.asnumpy(), dy, rtol=1e-10)


@pytest.mark.parametrize("f, df", [
    (lambda x: x * x * x + x, lambda x: 3 * x * x + 1),
    (lambda x: np.tanh(x), lambda x: 1 - onp.tanh(x) ** 2),
    (lambda x: x / (x * x + 1.0), lambda x: (1 - x * x) / (x * x + 1) ** 2),
    (lambda x: 2.0 - np.exp(-x) * 3.0, lambda x: 3 * onp.exp(-x)),
], ids=["cubic", "tanh", "rational", "scalar_ops"])
def test_elementwise_gradients_match_closed_form(f, df):
    values = onp.linspace(-2, 2, 7)
    x = _variable(values)
    with autograd.record():
        y = f(x)
    y.backward()  # head gradient of ones: the elementwise derivative
    onp.testing.assert_allclose(x.grad.asnumpy(), df(values), rtol=1e-10)


def test_broadcast_gradient_sums_over_broadcast_axes():
    a, b = _variable(onp.ones((3, 1)), "float32"), _variable(onp.arange(4.0).reshape(1, 4), "float32")
    with autograd.record():
        y = (a * b).sum()
    y.backward()
    onp.testing.assert_allclose(a.grad.asnumpy(), onp.full((3, 1), 6.0), rtol=1e-5)
    onp.testing.assert_allclose(b.grad.asnumpy(), onp.full((1, 4), 3.0), rtol=1e-5)


def test_grad_req_write_overwrites_add_accumulates_null_has_no_buffer():
    w, a, n = _variable([1.0, 2.0]), _variable([1.0, 2.0], grad_req="add"), _variable([1.0, 2.0], grad_req="null")
    for _ in range(2):
        with autograd.record():
            y = (w * 3.0 + a * 5.0 + n * 7.0).sum()
        y.backward()
    onp.testing.assert_array_equal(w.grad.asnumpy(), [3.0, 3.0])
    onp.testing.assert_array_equal(a.grad.asnumpy(), [10.0, 10.0])
    assert n.grad is None


def test_mark_variables_with_explicit_buffers():
    x, gx = _array([1.0, 2.0]), _array([100.0, 100.0])
    autograd.mark_variables([x], [gx], grad_reqs="add")
    with autograd.record():
        y = x * x
    autograd.backward(y)
    onp.testing.assert_array_equal(gx.asnumpy(), [102.0, 104.0])
    assert x.grad.asnumpy().tolist() == [102.0, 104.0]


def test_retain_graph_allows_a_second_backward():
    x = _variable([1.0, 2.0], grad_req="add")
    with autograd.record():
        y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [4.0, 8.0])
    with pytest.raises(ValueError, match="you need to pass retain_graph=True to backward"):
        y.backward()


def test_backward_through_an_already_freed_part_raises():
    x = _variable([1.0, 2.0])
    with autograd.record():
        y = x * 2.0
        z = (y * 3.0).sum()
    y.backward()  # frees y's part of the graph, which z depends on
    with pytest.raises(ValueError, match="you need to pass retain_graph=True to backward"):
        z.backward()


def test_backward_of_an_unrecorded_array_raises_mxnet_message():
    x = _variable([1.0])
    y = x * 2.0  # not recording
    with pytest.raises(ValueError, match="Cannot differentiate node because it is not in a computational graph"):
        y.backward()
    x.grad.asnumpy()  # the process stays usable


def test_pause_excludes_ops_from_the_graph():
    x = _variable([1.0, 2.0])
    with autograd.record():
        y = x * 2.0
        with autograd.pause():
            assert not autograd.is_recording()
            z = x * 3.0
        total = (y + z).sum()
    total.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 2.0])


def test_recording_and_training_scopes_restore_flags():
    assert not autograd.is_recording() and not autograd.is_training()
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        with autograd.predict_mode():
            assert autograd.is_recording() and not autograd.is_training()
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
            with autograd.train_mode():
                assert autograd.is_training()
            assert not autograd.is_training()
        assert autograd.is_recording() and autograd.is_training()
    with autograd.record(train_mode=False):
        assert autograd.is_recording() and not autograd.is_training()
    assert not autograd.is_recording() and not autograd.is_training()
    assert autograd.set_recording(True) is False
    assert autograd.set_recording(False) is True
    assert autograd.set_training(True) is False
    assert autograd.set_training(False) is True


def test_flags_restored_when_the_block_raises():
    with pytest.raises(KeyError):
        with autograd.record():
            raise KeyError("boom")
    assert not autograd.is_recording() and not autograd.is_training()


def test_multiple_heads_and_head_gradients():
    x = _variable([1.0, 2.0, 3.0])
    with autograd.record():
        y1 = x * 2.0
        y2 = x * x
    autograd.backward([y1, y2], head_grads=[_array([1.0, 1.0, 1.0]), _array([3.0, 3.0, 3.0])])
    onp.testing.assert_array_equal(x.grad.asnumpy(), 2.0 + 3.0 * 2.0 * onp.array([1.0, 2.0, 3.0]))
    with autograd.record():
        y1, y2 = x.sum(), (x * x).sum()
    autograd.backward([y1, y2])
    onp.testing.assert_array_equal(x.grad.asnumpy(), [3.0, 5.0, 7.0])


def test_heads_on_two_cpu_devices_backward_separately():
    values = onp.array([1.0, -2.0, 0.5])
    xs = [_variable(values, device=pymx.cpu(i)) for i in (0, 1)]
    with autograd.record():
        losses = [(x * x * float(i + 1)).sum() for i, x in enumerate(xs)]
    assert losses[1].device == pymx.cpu(1)
    for loss in losses:
        loss.backward()
    for i, x in enumerate(xs):
        assert x.grad.device == pymx.cpu(i)
        onp.testing.assert_array_equal(x.grad.asnumpy(), 2 * (i + 1) * values)


def test_grad_returns_gradients_and_leaves_buffers_alone():
    x, y = _variable([1.0, 2.0]), _variable([3.0, 4.0])
    with autograd.record():
        z = (x * y).sum()
    gx, gy = autograd.grad(z, [x, y], retain_graph=True)
    onp.testing.assert_array_equal(gx.asnumpy(), [3.0, 4.0])
    onp.testing.assert_array_equal(gy.asnumpy(), [1.0, 2.0])
    onp.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 0.0])
    single = autograd.grad(z, x)
    onp.testing.assert_array_equal(single.asnumpy(), [3.0, 4.0])


def test_grad_of_an_unused_variable_is_zero():
    x, unused = _variable([1.0, 2.0]), _variable([5.0])
    with autograd.record():
        z = (x * x).sum()
    gx, gu = autograd.grad(z, [x, unused])
    onp.testing.assert_array_equal(gx.asnumpy(), [2.0, 4.0])
    onp.testing.assert_array_equal(gu.asnumpy(), [0.0])


def test_second_order_gradient_with_create_graph():
    values = onp.array([1.0, 2.0, -1.5])
    x = _variable(values)
    with autograd.record():
        y = (x * x * x).sum()
        dy = autograd.grad(y, x, create_graph=True)  # 3 x^2, itself recorded
        dy.sum().backward()
    onp.testing.assert_allclose(dy.asnumpy(), 3 * values ** 2, rtol=1e-12)
    onp.testing.assert_allclose(x.grad.asnumpy(), 6 * values, rtol=1e-12)


def test_grad_with_respect_to_an_unmarked_array_raises():
    x = _variable([1.0])
    other = _array([2.0])
    with autograd.record():
        z = x * other
    with pytest.raises(ValueError, match="1-th variable because it does not require gradient"):
        autograd.grad(z, [other])


def test_detach_cuts_the_graph():
    x = _variable([1.0, 2.0])
    with autograd.record():
        y = (x * x + x.detach() * 3.0).sum()
    y.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 4.0])


def test_comparisons_end_the_gradient_path():
    x = _variable([-1.0, 2.0, 3.0])
    with autograd.record():
        y = ((x > 0.0) * x).sum()  # a ReLU through a mask
    y.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 1.0, 1.0])


def test_reattaching_replaces_the_variable():
    x = _variable([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = x * 4.0
    y.backward()
    onp.testing.assert_array_equal(x.grad.asnumpy(), [4.0, 4.0])


def test_bad_arguments_raise_clear_errors():
    x = _variable([1.0, 2.0])
    with pytest.raises(ValueError, match="grad_req must be one of .* got 'sometimes'"):
        x.attach_grad("sometimes")
    with autograd.record():
        y = x * 2.0
    with pytest.raises(ValueError, match=r"head gradient 0 has shape \(3,\) but head 0 has shape \(2,\)"):
        y.backward(_array([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="got 1 heads but 2 head gradients"):
        autograd.backward([y], [None, None])
    with pytest.raises(ValueError, match=r"variable 0 has shape \(2,\) but its gradient has shape \(3,\)"):
        autograd.mark_variables([x], [_array([0.0, 0.0, 0.0])])
    y.backward()  # still usable after the errors
    onp.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 2.0])


def test_training_flag_reaches_dropout():
    x = np.ones((1000,))
    with autograd.record(train_mode=True):
        train_out = pymx.npx.dropout(x, p=0.5)
    with autograd.record(train_mode=False):
        predict_out = pymx.npx.dropout(x, p=0.5)
    assert (train_out.asnumpy() == 0).sum() > 300
    onp.testing.assert_array_equal(predict_out.asnumpy(), onp.ones(1000))


def _batch_norm_data_gradient(record_train_mode, backward_train_mode):
    """d(sum(w * batch_norm(x)))/dx for a (4, 2) batch, and the batch_norm inputs."""
    x_values = onp.array([[1.0, -2.0], [3.0, 0.5], [-1.0, 4.0], [2.0, 1.0]])
    x = _variable(x_values)
    gamma, beta = _array([1.5, 0.5]), _array([0.0, 0.0])
    running_mean, running_var = _array([0.5, -0.5]), _array([4.0, 0.25])
    weights = onp.array([[1.0, 2.0], [-1.0, 0.5], [3.0, 1.0], [0.5, -2.0]])
    with autograd.record(train_mode=record_train_mode):
        y = pymx.npx.batch_norm(x, gamma, beta, running_mean, running_var, eps=1e-3,
                                fix_gamma=False)
        loss = (y * _array(weights)).sum()
    loss.backward(train_mode=backward_train_mode)
    return x.grad.asnumpy(), x_values, weights


def test_gradient_uses_the_train_mode_the_op_was_recorded_in():
    # Recorded in predict mode: y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta,
    # so dy/dx is constant, whatever mode backward is called in.
    expected = onp.array([1.5, 0.5]) / onp.sqrt(onp.array([4.0, 0.25]) + 1e-3)
    for backward_mode in (True, False):
        grad, _, weights = _batch_norm_data_gradient(False, backward_mode)
        onp.testing.assert_allclose(grad, weights * expected, rtol=1e-10)
    # Recorded in train mode: the batch statistics depend on x too (closed form of batch norm's
    # input gradient), again whatever mode backward is called in.
    for backward_mode in (True, False):
        grad, x_values, weights = _batch_norm_data_gradient(True, backward_mode)
        mean, var = x_values.mean(axis=0), x_values.var(axis=0)
        invstd = 1.0 / onp.sqrt(var + 1e-3)
        xhat = (x_values - mean) * invstd
        dy = weights * onp.array([1.5, 0.5])
        expected_train = invstd * (dy - dy.mean(axis=0) - xhat * (dy * xhat).mean(axis=0))
        onp.testing.assert_allclose(grad, expected_train, rtol=1e-8)


def test_dropout_recorded_in_predict_mode_passes_the_gradient_through():
    x = _variable(onp.ones(1000))
    with autograd.record(train_mode=False):
        y = pymx.npx.dropout(x, p=0.5)
    y.backward(train_mode=True)
    onp.testing.assert_array_equal(x.grad.asnumpy(), onp.ones(1000))


def test_fresh_grad_is_set_by_backward_and_cleared_by_the_caller():
    x = _variable([1.0, 2.0])
    assert x._fresh_grad is False  # marked, nothing computed yet
    with autograd.record():
        y = (x * x).sum()
    y.backward()
    assert x._fresh_grad is True
    x._fresh_grad = False  # what Trainer.step does after updating
    assert x._fresh_grad is False
    x.attach_grad()  # a new mark starts stale
    assert x._fresh_grad is False


def test_fresh_grad_with_grad_req_add_null_and_autograd_grad():
    a, b = _variable([1.0], grad_req="add"), _variable([2.0], grad_req="null")
    c = _variable([3.0])
    with autograd.record():
        y = a * b * c
    autograd.grad(y, [a], retain_graph=True)  # returns the gradient, writes no buffer
    assert not a._fresh_grad
    y.backward()
    assert a._fresh_grad and c._fresh_grad
    assert not b._fresh_grad  # grad_req null: no buffer written
    unused = _variable([5.0])
    with autograd.record():
        z = a * 2.0
    z.backward()
    assert a._fresh_grad and not unused._fresh_grad


def test_fresh_grad_of_an_unmarked_array():
    plain = _array([1.0])
    assert plain._fresh_grad is False
    with pytest.raises(ValueError, match="has not been marked as a variable"):
        plain._fresh_grad = True
