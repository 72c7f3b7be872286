"""np.where's CPU kernel reads operands of the output's shape in place, single elements as values,
and spreads only the others (engine/src/ops/shape.cc): every combination against NumPy, with
promotion between x and y, conditions of other dtypes, empty and one-element outputs, and the
gradient masked_softmax takes through it."""
import itertools

import numpy as onp
import pytest

import pymx
from pymx import autograd, np
from pymx.test_utils import assert_almost_equal

from conftest import requires_gpu

OUT = (3, 4, 5)
# Operand shapes against an output of OUT: the output's own (read in place), broadcast along
# leading and middle axes (spread), and one element (a value), as an array and as a scalar shape.
SHAPES = {"full": OUT, "rows": (1, 1, 5), "middle": (3, 1, 5), "one": (1, 1, 1), "scalar": ()}


@pytest.mark.parametrize("cond_kind,x_kind,y_kind",
                         list(itertools.product(["full", "middle", "one"], SHAPES, SHAPES)))
def test_every_operand_layout_matches_numpy(cond_kind, x_kind, y_kind):
    rng = onp.random.default_rng(0)
    cond = rng.uniform(size=SHAPES[cond_kind]) < 0.5
    x = rng.standard_normal(SHAPES[x_kind]).astype(onp.float32)
    y = rng.standard_normal(SHAPES[y_kind]).astype(onp.float32)
    got = np.where(np.array(cond), np.array(x), np.array(y))
    want = onp.where(cond, x, y)
    assert got.shape == want.shape and got.dtype == want.dtype
    onp.testing.assert_array_equal(got.asnumpy(), want)


@pytest.mark.parametrize("cond_dtype", ["bool", "int32", "float32", "uint8"])
@pytest.mark.parametrize("x_dtype,y_dtype", [("float32", "float64"), ("int32", "float32"),
                                             ("float64", "float64"), ("int64", "int32"),
                                             ("bool", "bool")])
def test_conditions_and_operands_of_other_dtypes(cond_dtype, x_dtype, y_dtype):
    rng = onp.random.default_rng(1)
    cond = (rng.integers(0, 3, OUT) * (rng.uniform(size=OUT) < 0.5)).astype(cond_dtype)
    for x_shape, y_shape in [(OUT, OUT), (OUT, ()), ((1, 4, 1), OUT), ((), ())]:
        x = (rng.standard_normal(x_shape) * 10).astype(x_dtype)
        y = (rng.standard_normal(y_shape) * 10).astype(y_dtype)
        got = np.where(np.array(cond), np.array(x), np.array(y))
        want = onp.where(cond, x, y)
        # pymx promotes int32 with float32 to float32 (MXNet's rule), NumPy to float64.
        assert got.dtype == (onp.float32 if {x_dtype, y_dtype} == {"int32", "float32"}
                             else want.dtype), (x_shape, y_shape)
        onp.testing.assert_array_equal(got.asnumpy(), want.astype(got.dtype))


@pytest.mark.parametrize("shape", [(0,), (2, 0, 3), (1,), (1, 1)])
def test_empty_and_one_element_outputs(shape):
    cond = onp.ones(shape, bool)
    x = onp.full(shape, 2.0, onp.float32)
    for y in (onp.full(shape, -1.0, onp.float32), onp.float32(-1.0)):
        got = np.where(np.array(cond), np.array(x), np.array(y)).asnumpy()
        onp.testing.assert_array_equal(got, onp.where(cond, x, y))


def test_gradient_goes_to_the_chosen_operand_summed_over_its_broadcast():
    rng = onp.random.default_rng(2)
    cond = rng.uniform(size=(2, 1, 1, 6)) < 0.5  # masked_softmax's (batch, 1, 1, keys) mask
    x = np.array(rng.standard_normal((2, 3, 4, 6)).astype(onp.float32))
    y = np.array(rng.standard_normal((1, 3, 1, 6)).astype(onp.float32))
    dy = rng.standard_normal((2, 3, 4, 6)).astype(onp.float32)
    x.attach_grad()
    y.attach_grad()
    with autograd.record():
        out = np.where(np.array(cond), x, y)
    out.backward(np.array(dy))
    full = onp.broadcast_to(cond, dy.shape)
    assert_almost_equal(x.grad.asnumpy(), onp.where(full, dy, 0), rtol=0, atol=0)
    assert_almost_equal(y.grad.asnumpy(),
                        onp.where(full, 0, dy).sum(axis=(0, 2), keepdims=True), rtol=1e-6,
                        atol=1e-6)


@requires_gpu
def test_gpu_equals_cpu():
    rng = onp.random.default_rng(3)
    for cond_kind, x_kind, y_kind in [("full", "full", "scalar"), ("middle", "rows", "full"),
                                      ("one", "one", "middle")]:
        cond = rng.uniform(size=SHAPES[cond_kind]) < 0.5
        x = rng.standard_normal(SHAPES[x_kind]).astype(onp.float32)
        y = rng.standard_normal(SHAPES[y_kind]).astype(onp.float64)
        results = [np.where(np.array(cond, device=device), np.array(x, device=device),
                            np.array(y, device=device)).asnumpy()
                   for device in (pymx.cpu(), pymx.gpu(0))]
        onp.testing.assert_array_equal(results[1], results[0])
