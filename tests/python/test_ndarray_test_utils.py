"""pymx.test_utils: tolerances, comparisons, random inputs, gradient and op checks."""
import numpy as onp
import pytest

from pymx import np
from pymx.device import cpu, current_device
from pymx.test_utils import (assert_almost_equal, check_numeric_gradient, check_op,
                             default_atol, default_device, default_rtol, rand_ndarray,
                             rand_shape_nd, same, set_default_device)


def test_default_tolerances_follow_the_least_precise_dtype():
    assert (default_rtol("float32"), default_atol("float32")) == (1e-4, 1e-3)
    assert default_rtol("float16", "float64") == 1e-2 and default_atol("float16") == 1e-1
    assert default_rtol("float64") == 1e-5 and default_rtol("int32", "int64") == 0.0
    assert default_rtol("bfloat16", "float16") == 2.0 ** -6 and default_atol(np.bfloat16) == 1e-1


def test_assert_almost_equal_takes_bfloat16_tolerances_from_the_array():
    x = np.array([100.0, 200.0], dtype="bfloat16")  # asnumpy gives float32
    assert_almost_equal(x, onp.array([101.0, 198.0]), atol=0)  # within 2^-6 relative
    with pytest.raises(AssertionError, match="rtol=0.015625"):
        assert_almost_equal(x, onp.array([104.0, 200.0]), atol=0)


def test_assert_almost_equal_passes_and_reports_the_worst_element():
    a = onp.array([1.0, 2.0, 3.0], dtype="float32")
    assert_almost_equal(np.array(a), a + 1e-5)
    with pytest.raises(AssertionError, match=r"1 of 3 elements differ.*index \(1,\).*x=2\.0.*y=2\.5"):
        assert_almost_equal(a, onp.array([1.0, 2.5, 3.0]), names=("x", "y"))
    with pytest.raises(AssertionError, match=r"shape mismatch: a \(3,\) vs b \(1, 3\)"):
        assert_almost_equal(a, a[None])
    with pytest.raises(AssertionError):
        assert_almost_equal(onp.array([onp.nan]), onp.array([onp.nan]))
    assert_almost_equal(onp.array([onp.nan]), onp.array([onp.nan]), equal_nan=True)
    with pytest.raises(AssertionError):
        assert_almost_equal(onp.array([1], dtype="int32"), onp.array([2], dtype="int32"))


def test_same():
    assert same(np.array([1, 2], dtype="int32"), onp.array([1, 2]))
    assert not same(np.array([1.0, 2.0]), onp.array([1.0, 2.0000001]))


def test_random_shapes_and_arrays():
    shape = rand_shape_nd(3, dim=4)
    assert len(shape) == 3 and all(1 <= d <= 4 for d in shape)
    x = rand_ndarray((5, 6), dtype="float64", device=cpu(1))
    assert x.shape == (5, 6) and x.dtype == onp.float64 and x.device == cpu(1)
    assert (onp.abs(x.asnumpy()) <= 1).all()
    assert rand_ndarray((3,), dtype="bfloat16").dtype == np.bfloat16


def test_default_device_follows_the_current_device():
    assert default_device() == current_device() == cpu(0)
    with cpu(1):
        set_default_device(cpu(2))
        assert default_device() == cpu(2)
    assert default_device() == cpu(0)


def test_check_numeric_gradient_agrees_with_autograd():
    check_numeric_gradient(lambda x, y: x * y + np.exp(x), [onp.random.uniform(-1, 1, (2, 3)),
                                                            onp.random.uniform(-1, 1, (3,))])


def test_check_numeric_gradient_catches_a_wrong_gradient():
    # detach() hides a path from autograd, so its gradient misses the x*x term.
    with pytest.raises(AssertionError, match="autograd d/dx0"):
        check_numeric_gradient(lambda x: x.detach() * x, [onp.random.uniform(0.5, 1, (3,))])


def test_check_op_one_liners():
    check_op(onp.tanh, np.tanh, shapes=[(3, 4), (0,), ()], grad=True)
    check_op(onp.add, np.add, shapes=[((2, 3), (3,))], dtype="float64", grad=True)
    check_op(onp.exp, np.exp, shapes=[(16,)], dtype="float16")
    check_op(onp.multiply, np.multiply, shapes=[((2, 3), (3,))], dtype="bfloat16")
    check_op(onp.sum, np.sum, shapes=[(40,)], dtype="bfloat16", low=0.0)
    check_op(onp.argmax, np.argmax, shapes=[(5,)], dtype="bfloat16")
    with pytest.raises(AssertionError, match="dtype float32 != expected bfloat16"):
        check_op(onp.exp, lambda x: np.exp(x).astype("float32"), shapes=[(3,)], dtype="bfloat16")
    with pytest.raises(AssertionError, match="pymx"):
        check_op(onp.sin, np.cos, shapes=[(4,)])
