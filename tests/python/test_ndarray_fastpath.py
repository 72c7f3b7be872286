"""The arithmetic fast path of + - * / (Note [Arithmetic fast path] in pymx/_c/core.pyx): each
operand kind it takes gives what pymx.np.<op> gives, and the operands it does not take still
reach pymx.np."""
import operator

import numpy as onp
import pytest

from pymx import autograd, np
from pymx.device import cpu
from pymx.test_utils import assert_almost_equal, same

OPS = [(operator.add, np.add), (operator.sub, np.subtract), (operator.mul, np.multiply),
       (operator.truediv, np.true_divide)]
IDS = ["add", "sub", "mul", "truediv"]


@pytest.mark.parametrize("op,np_op", OPS, ids=IDS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8"])
@pytest.mark.parametrize("scalar", [3, -2, 2.5, -0.0, 1e-30, 2**40])
def test_python_scalars_match_pymx_np(op, np_op, dtype, scalar):
    x = np.array(onp.array([1, 2, 7], dtype=dtype))
    for got, want in [(op(x, scalar), np_op(x, scalar)), (op(scalar, x), np_op(scalar, x))]:
        assert got.dtype == want.dtype and got.shape == want.shape
        assert same(got, want)


@pytest.mark.parametrize("op,np_op", OPS, ids=IDS)
def test_arrays_match_pymx_np_with_broadcasting(op, np_op):
    a = onp.random.uniform(1, 2, size=(2, 3)).astype("float32")
    b = onp.random.uniform(1, 2, size=(3,)).astype("float64")
    x, y = np.array(a), np.array(b)
    for got, want in [(op(x, y), np_op(x, y)), (op(y, x), np_op(y, x))]:
        assert got.dtype == want.dtype and got.shape == want.shape
        assert same(got, want)
    assert_almost_equal(op(x, y), op(a, b), rtol=1e-6, atol=1e-6)


def test_operands_outside_the_fast_path_reach_pymx_np():
    x = np.array([1.0, 2.0])
    assert same(x + True, np.add(x, True))  # bool: an int subclass, not an exact int
    assert same(x * onp.float32(2), onp.array([2.0, 4.0], dtype="float32"))
    assert same(onp.int64(3) - x, onp.array([2.0, 1.0], dtype="float32"))
    assert same(x / onp.array([2.0, 4.0]), onp.array([0.5, 0.5], dtype="float32"))
    with pytest.raises(TypeError):
        x - "text"
    with pytest.raises(TypeError):
        [1] * x


def test_errors_name_the_devices_and_leave_the_process_usable():
    x, y = np.ones((2,), device=cpu(0)), np.ones((2,), device=cpu(1))
    with pytest.raises(ValueError, match=r"cpu\(0\) and cpu\(1\)"):
        x + y
    with pytest.raises(ValueError, match="shape"):
        x * np.ones((3,))
    assert same(x + 1, onp.array([2.0, 2.0], dtype="float32"))


def test_gradients_flow_through_the_fast_path():
    x = np.array([1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = ((x + 1) * 3 - x / 2) * x
    y.backward()
    a = onp.array([1.0, 2.0, 3.0])
    # y = (3a + 3 - a/2) * a = 2.5 a^2 + 3 a  ->  dy/da = 5 a + 3
    assert_almost_equal(x.grad, 5 * a + 3)


def test_a_long_chain_of_tiny_ops_gives_the_right_value():
    x = np.zeros((4,))
    for _ in range(2000):
        x = x + 1
    x = x * 0.5 - 1
    assert same(x, onp.full((4,), 999.0, dtype="float32"))
