"""npx.shape_array, npx.reshape_like, npx.nonzero and npx.constraint_check against NumPy and
MXNet's semantics, under autograd and hybridize."""
import warnings

import numpy as onp
import pytest

from pymx import autograd, gluon, np, npx
from pymx.test_utils import assert_almost_equal, check_numeric_gradient


def _rand(shape, device):
    return np.array(onp.random.uniform(-1, 1, size=shape), dtype="float32", device=device)


# -- shape_array -------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), (), (0, 3)])
def test_shape_array(device, shape):
    out = npx.shape_array(np.zeros(shape, device=device))
    assert out.dtype == onp.int64 and out.device == device and out.shape == (len(shape),)
    onp.testing.assert_array_equal(out.asnumpy(), onp.array(shape, dtype=onp.int64))


def test_shape_array_rejects_non_arrays():
    with pytest.raises(TypeError, match="shape_array: data must be a pymx ndarray, got list"):
        npx.shape_array([1, 2])


# -- reshape_like ------------------------------------------------------------------------------

@pytest.mark.parametrize("lhs_shape, rhs_shape, bounds, want", [
    ((2, 3, 4), (4, 6), {}, (4, 6)),
    ((30, 7), (15, 2, 4), dict(lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=2), (15, 2, 7)),
    ((30, 12), (4, 2, 2, 3), dict(lhs_begin=-1, lhs_end=None, rhs_begin=1, rhs_end=None),
     (30, 2, 2, 3)),
    ((2, 3, 4), (6,), dict(lhs_begin=0, lhs_end=2), (6, 4)),
    ((6, 4), (9, 2, 3), dict(lhs_begin=0, lhs_end=1, rhs_begin=-2), (2, 3, 4)),
    ((3, 4), (7,), dict(lhs_begin=1, lhs_end=1, rhs_begin=0, rhs_end=0), (3, 4)),
])
def test_reshape_like(device, lhs_shape, rhs_shape, bounds, want):
    lhs = _rand(lhs_shape, device)
    out = npx.reshape_like(lhs, np.zeros(rhs_shape, device=device), **bounds)
    assert out.shape == want and out.device == device
    onp.testing.assert_array_equal(out.asnumpy(), lhs.asnumpy().reshape(want))


def test_reshape_like_gradient(device):
    rhs = np.zeros((3, 2), device=device)
    check_numeric_gradient(lambda x: npx.reshape_like(x, rhs) * x.reshape(3, 2),
                           [onp.random.uniform(-1, 1, (2, 3))], device=device)


@pytest.mark.parametrize("bounds, error, message", [
    ({}, ValueError, r"cannot reshape lhs \(2, 3\) into \(4,\): its axes \[0, 2\) hold 6 "
                     r"elements, rhs's axes \[0, 1\) of \(4,\) hold 4"),
    (dict(lhs_begin=3), ValueError, r"lhs_begin=3 is out of range for shape \(2, 3\)"),
    (dict(rhs_end=-2), ValueError, r"rhs_end=-2 is out of range for shape \(4,\)"),
    (dict(lhs_begin=2, lhs_end=1), ValueError, "must not end before they begin"),
    (dict(lhs_begin=1.0), TypeError, "lhs_begin must be an int or None, got 1.0"),
])
def test_reshape_like_errors(bounds, error, message):
    with pytest.raises(error, match=message):
        npx.reshape_like(np.zeros((2, 3)), np.zeros((4,)), **bounds)
    with pytest.raises(TypeError, match="rhs must be a pymx ndarray, got tuple"):
        npx.reshape_like(np.zeros((2, 3)), (6,))


class _ShapeBlock(gluon.HybridBlock):
    def forward(self, x, y):
        flat = npx.reshape_like(x, y, lhs_begin=0, lhs_end=2, rhs_begin=0, rhs_end=1)
        return flat * 2, npx.shape_array(y)


def test_shape_ops_hybridize_equal_imperative(device):
    y = _rand((6, 5), device)
    block = _ShapeBlock()
    block.hybridize()
    for _ in range(2):  # the trace, then a replay
        x = _rand((2, 3, 4), device)
        want = [x.asnumpy().reshape(6, 4) * 2, onp.array([6, 5])]
        got = block(x, y)
        for g, w in zip(got, want):
            onp.testing.assert_array_equal(g.asnumpy(), w)


# -- nonzero -----------------------------------------------------------------------------------

@pytest.mark.parametrize("values", [
    onp.array([[1.0, 0.0, 2.0], [0.0, 0.0, -3.0]]),
    onp.array([0, 5, 0, 7], dtype=onp.int32),
    onp.array([[True, False], [False, True]]),
    onp.zeros((2, 2, 2)),
    onp.array(4.0),
])
def test_nonzero(device, values):
    out = npx.nonzero(np.array(values, dtype=values.dtype, device=device))
    want = onp.argwhere(values)
    assert out.dtype == onp.int64 and out.device == device and out.shape == want.shape
    onp.testing.assert_array_equal(out.asnumpy(), want)


class _NonzeroBlock(gluon.HybridBlock):
    def forward(self, x):
        return npx.nonzero(x) + 1


def test_nonzero_in_a_hybridized_block_follows_the_values(device):
    # Its shape depends on the values: the block runs imperatively instead of replaying a trace.
    block = _NonzeroBlock()
    block.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for values in ([[1.0, 0.0], [0.0, 2.0]], [[1.0, 1.0], [0.0, 2.0]],
                       [[0.0, 0.0], [0.0, 3.0]]):
            got = block(np.array(values, device=device))
            onp.testing.assert_array_equal(got.asnumpy(), onp.argwhere(onp.array(values)) + 1)
    assert any("npx.nonzero" in str(w.message) for w in caught)


def test_nonzero_rejects_non_arrays():
    with pytest.raises(TypeError, match="nonzero: x must be a pymx ndarray, got list"):
        npx.nonzero([1, 0])


# -- constraint_check --------------------------------------------------------------------------

def test_constraint_check_passes(device):
    x = _rand((4,), device)
    out = npx.constraint_check(x > -2)
    assert out.shape == () and out.dtype == onp.bool_ and out.device == device and out.item()
    # Its result multiplies a value through, as MXNet's distributions use it.
    assert_almost_equal(out * x, x)


def test_constraint_check_raises_the_message(device):
    with pytest.raises(ValueError, match="^scale must be positive$"):
        npx.constraint_check(np.array([True, False, True], device=device),
                             "scale must be positive")
    with pytest.raises(ValueError, match=r"^Constraint violated\.$"):
        npx.constraint_check(np.zeros((2, 2), dtype="bool", device=device))


def test_constraint_check_empty_input_is_satisfied():
    assert npx.constraint_check(np.zeros((0,), dtype="bool")).item()


def test_constraint_check_argument_errors():
    with pytest.raises(TypeError, match="input must be a boolean array, got dtype float32"):
        npx.constraint_check(np.ones((2,)))
    with pytest.raises(TypeError, match="msg must be a str, got 3"):
        npx.constraint_check(np.ones((2,), dtype="bool"), 3)


class _CheckedBlock(gluon.HybridBlock):
    def forward(self, x):
        return npx.constraint_check(x > 0, "x must be positive") * np.log(x)


def test_constraint_check_in_a_hybridized_block_checks_every_call(device):
    block = _CheckedBlock()
    block.hybridize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = np.array([1.0, 2.0], device=device)
        assert_almost_equal(block(x), onp.log([1.0, 2.0]))
        with pytest.raises(ValueError, match="x must be positive"):
            block(np.array([1.0, -2.0], device=device))


def test_constraint_check_under_autograd(device):
    x = np.array([0.5, 2.0], device=device)
    x.attach_grad()
    with autograd.record():
        y = (npx.constraint_check(x > 0) * np.log(x)).sum()
    y.backward()
    assert_almost_equal(x.grad, onp.array([2.0, 0.5]))
