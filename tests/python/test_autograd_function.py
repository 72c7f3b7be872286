"""autograd.Function: user-defined forward/backward recorded as one node of the tape."""
import gc
import weakref

import numpy as onp
import pytest

import pymx
from pymx import autograd, gluon, np, npx
from pymx.test_utils import assert_almost_equal
from conftest import requires_gpu


class Sigmoid(autograd.Function):
    def forward(self, x):
        y = 1 / (1 + np.exp(-x))
        self.save_for_backward(y)
        return y

    def backward(self, dy):
        (y,) = self.saved_tensors
        return dy * y * (1 - y)


class MulAndSum(autograd.Function):
    """(x * y, x + y): two inputs, two outputs."""

    def forward(self, x, y):
        self.save_for_backward(x, y)
        return x * y, x + y

    def backward(self, d_product, d_sum):
        x, y = self.saved_tensors
        return d_product * y + d_sum, d_product * x + d_sum


def _variable(values, device=None):
    x = np.array(onp.asarray(values, dtype=onp.float64), device=device or pymx.cpu())
    x.attach_grad()
    return x


def test_custom_sigmoid_matches_builtin_values_and_gradients(device):
    data = onp.random.uniform(-3, 3, size=(3, 4))
    x = _variable(data, device)
    weights = np.array(onp.random.uniform(-1, 1, size=(3, 4)), device=device)
    with autograd.record():
        y = Sigmoid()(x)
    y.backward(weights)
    expected = 1 / (1 + onp.exp(-data))
    assert_almost_equal(y, expected, rtol=1e-12, atol=1e-14)
    assert_almost_equal(x.grad, weights.asnumpy() * expected * (1 - expected), rtol=1e-12,
                        atol=1e-14)
    assert y.device == device and x.grad.device == device

    builtin = _variable(data, device)
    with autograd.record():
        reference = npx.sigmoid(builtin)
    reference.backward(weights)
    assert_almost_equal(y, reference, rtol=1e-12, atol=1e-14)
    assert_almost_equal(x.grad, builtin.grad, rtol=1e-12, atol=1e-14)


def test_function_composes_with_recorded_ops():
    data = onp.array([0.3, -1.2, 2.0])
    x = _variable(data)
    with autograd.record():
        z = (Sigmoid()(x * 2) ** 2).sum()
    z.backward()
    s = 1 / (1 + onp.exp(-2 * data))
    assert_almost_equal(x.grad, 2 * s * s * (1 - s) * 2, rtol=1e-12, atol=1e-14)


def test_several_inputs_and_outputs():
    xv, yv = onp.array([1.0, 2.0, 3.0]), onp.array([-1.0, 0.5, 4.0])
    x, y = _variable(xv), _variable(yv)
    with autograd.record():
        product, total = MulAndSum()(x, y)
        loss = (product * 3 + total * total).sum()
    loss.backward()
    assert_almost_equal(product, xv * yv, rtol=0, atol=0)
    assert_almost_equal(total, xv + yv, rtol=0, atol=0)
    assert_almost_equal(x.grad, 3 * yv + 2 * (xv + yv), rtol=1e-12, atol=0)
    assert_almost_equal(y.grad, 3 * xv + 2 * (xv + yv), rtol=1e-12, atol=0)


def test_output_without_gradient_gets_zeros_in_backward():
    received = []

    class Pair(MulAndSum):
        def backward(self, d_product, d_sum):
            received.append((d_product.asnumpy(), d_sum.asnumpy()))
            return super().backward(d_product, d_sum)

    x, y = _variable([1.0, 2.0]), _variable([3.0, 4.0])
    with autograd.record():
        product, _ = Pair()(x, y)
    product.backward()
    onp.testing.assert_array_equal(received[0][0], [1.0, 1.0])
    onp.testing.assert_array_equal(received[0][1], [0.0, 0.0])
    assert_almost_equal(x.grad, [3.0, 4.0], rtol=0, atol=0)


def test_non_differentiable_output_and_input():
    class ArgmaxAndScale(autograd.Function):
        def forward(self, x, index):
            self.save_for_backward(index)
            return x * 2, np.argmax(x, axis=0)

        def backward(self, dy, d_argmax):
            assert d_argmax.dtype == onp.int64 or not onp.any(d_argmax.asnumpy())
            return dy * 2, None

    x = _variable([1.0, 5.0, 2.0])
    index = np.array([0, 1], dtype="int32")
    with autograd.record():
        scaled, position = ArgmaxAndScale()(x, index)
    scaled.backward()
    assert int(position.asnumpy()) == 1
    assert_almost_equal(x.grad, [2.0, 2.0, 2.0], rtol=0, atol=0)


def test_saved_tensors_and_single_instance():
    function = Sigmoid()
    x = _variable([0.0])
    with autograd.record():
        function(x)
    assert len(function.saved_tensors) == 1
    assert_almost_equal(function.saved_tensors[0], [0.5], rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="called only once"):
        function(x)


def test_outside_record_runs_forward_only():
    x = _variable([0.0, 1.0])
    y = Sigmoid()(x)
    assert_almost_equal(y, 1 / (1 + onp.exp(-onp.array([0.0, 1.0]))), rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="not in a computational graph"):
        y.backward()


def test_retain_graph_and_second_backward():
    x = _variable([0.5, -0.5])
    with autograd.record():
        y = Sigmoid()(x)
    y.backward(retain_graph=True)
    first = x.grad.asnumpy().copy()
    y.backward()
    assert_almost_equal(x.grad, first, rtol=0, atol=0)
    with pytest.raises(ValueError, match="not in a computational graph"):
        y.backward()


def test_gradients_add_up_with_grad_req_add():
    x = np.array([0.5, -0.5], dtype="float64")
    x.attach_grad(grad_req="add")
    with autograd.record():
        y = Sigmoid()(x)
    y.backward(retain_graph=True)
    y.backward()
    s = 1 / (1 + onp.exp(-onp.array([0.5, -0.5])))
    assert_almost_equal(x.grad, 2 * s * (1 - s), rtol=1e-12, atol=0)


def test_autograd_grad_leaves_buffers_alone():
    x = _variable([1.0, -2.0])
    with autograd.record():
        y = Sigmoid()(x)
    (gx,) = autograd.grad([y], [x])
    s = 1 / (1 + onp.exp(-onp.array([1.0, -2.0])))
    assert_almost_equal(gx, s * (1 - s), rtol=1e-12, atol=0)
    onp.testing.assert_array_equal(x.grad.asnumpy(), [0.0, 0.0])


def test_create_graph_differentiates_the_backward():
    class Cube(autograd.Function):
        def forward(self, x):
            self.save_for_backward(x)
            return x * x * x

        def backward(self, dy):
            (x,) = self.saved_tensors
            return dy * 3 * x * x

    x = _variable([1.0, 2.0])
    with autograd.record():
        y = Cube()(x)
        (dx,) = autograd.grad([y], [x], create_graph=True)
        dx.sum().backward()
    assert_almost_equal(dx, [3.0, 12.0], rtol=0, atol=0)
    assert_almost_equal(x.grad, [6.0, 12.0], rtol=0, atol=0)


class Failing(autograd.Function):
    def forward(self, x):
        return x * 2

    def backward(self, dy):
        raise KeyError("no gradient today")


def test_exception_in_backward_reaches_caller_and_tape_stays_usable():
    x = _variable([1.0, 2.0])
    with autograd.record():
        y = Failing()(x)
        z = Sigmoid()(x)
    with pytest.raises(KeyError, match="no gradient today"):
        y.backward()
    with pytest.raises(KeyError, match="no gradient today"):
        autograd.grad([y], [x])
    z.backward()
    s = 1 / (1 + onp.exp(-onp.array([1.0, 2.0])))
    assert_almost_equal(x.grad, s * (1 - s), rtol=1e-12, atol=0)


@pytest.mark.parametrize("bad_backward, error, message", [
    (lambda self, dy: (dy, dy), ValueError, "returned 2 gradients for 1 inputs"),
    (lambda self, dy: dy.reshape(1, 2), ValueError, r"shape \(1, 2\) for input 0 of shape \(2,\)"),
    (lambda self, dy: "gradient", TypeError, "must return an ndarray, None or a tuple"),
    (lambda self, dy: [3.0], TypeError, "gradient 0 must be a pymx ndarray or None"),
])
def test_bad_backward_results_name_the_problem(bad_backward, error, message):
    cls = type("BadBackward", (autograd.Function,),
               {"forward": lambda self, x: x * 1, "backward": bad_backward})
    x = _variable([1.0, 2.0])
    with autograd.record():
        y = cls()(x)
    with pytest.raises(error, match=message):
        y.backward()


def test_bad_forward_and_inputs_raise():
    returns_number = type("ReturnsNumber", (autograd.Function,),
                          {"forward": lambda self, x: 3.0, "backward": lambda self, dy: dy})
    with pytest.raises(TypeError, match="must return an ndarray"):
        returns_number()(np.ones(2))
    with pytest.raises(TypeError, match="input 1 must be a pymx ndarray, got list"):
        MulAndSum()(np.ones(2), [1.0, 2.0])
    with pytest.raises(NotImplementedError, match="must define forward"):
        autograd.Function()(np.ones(2))


def test_function_is_released_with_its_graph():
    x = _variable([1.0])
    function = Sigmoid()
    alive = weakref.ref(function)
    with autograd.record():
        y = function(x)
    del function
    gc.collect()
    assert alive() is not None  # the tape holds it until backward frees the graph
    y.backward()
    gc.collect()
    assert alive() is None
    function = Sigmoid()
    alive = weakref.ref(function)
    with autograd.record():
        y = function(x)
    del function, y
    gc.collect()
    assert alive() is None  # dropping the outputs frees the node


class SigmoidBlock(gluon.Block):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=4)

    def forward(self, x):
        return Sigmoid()(self.dense(x))


def test_inside_a_block_matches_builtin():
    net = SigmoidBlock()
    net.initialize()
    x = np.array(onp.random.uniform(-1, 1, size=(2, 4)).astype("float32"))
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    weight = net.dense.weight
    custom_grad = weight.grad().asnumpy().copy()
    with autograd.record():
        reference = npx.sigmoid(net.dense(x)).sum()
    reference.backward()
    assert_almost_equal(custom_grad, weight.grad(), rtol=1e-5, atol=1e-7)


def test_hybridized_block_refuses_function():
    class Hybrid(gluon.HybridBlock):
        def forward(self, x):
            return Sigmoid()(x)

    net = Hybrid()
    net.hybridize()
    with pytest.raises(RuntimeError, match="hybridized"):
        net(np.ones((2, 2)))


def test_on_another_cpu_device():
    device = pymx.cpu(1)
    x = _variable([0.25, -1.5], device)
    with autograd.record():
        y = Sigmoid()(x)
    y.backward()
    s = 1 / (1 + onp.exp(-onp.array([0.25, -1.5])))
    assert y.device == device and x.grad.device == device
    assert_almost_equal(x.grad, s * (1 - s), rtol=1e-12, atol=0)


@requires_gpu
def test_gpu_matches_cpu():
    data = onp.random.uniform(-2, 2, size=(5,))
    results = []
    for device in (pymx.cpu(), pymx.gpu(0)):
        x = _variable(data, device)
        with autograd.record():
            y = Sigmoid()(x)
        y.backward()
        results.append((y.asnumpy(), x.grad.asnumpy()))
    assert_almost_equal(results[1][0], results[0][0], rtol=1e-12, atol=1e-14)
    assert_almost_equal(results[1][1], results[0][1], rtol=1e-12, atol=1e-14)
