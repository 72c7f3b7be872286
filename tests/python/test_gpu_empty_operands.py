"""Empty operands that need a dtype conversion (an integer input of a float op): the kernels take
the converted dtype even though there is nothing to convert. On every device (the `device`
fixture: cpu(0), and gpu(0) when one is visible)."""
import numpy as onp
import pytest

import pymx.numpy as np
from pymx import npx
from pymx.ndarray import from_numpy


@pytest.mark.parametrize("name", ["exp", "sin", "sqrt", "log1p", "tanh"])
@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
def test_float_unary_of_empty_integer_array(device, name, dtype):
    x = from_numpy(onp.zeros((0, 3), dtype=dtype), device=device)
    y = getattr(np, name)(x).asnumpy()
    assert y.shape == (0, 3) and y.dtype == onp.float32


@pytest.mark.parametrize("name", ["erf", "erfinv"])
def test_erf_of_empty_integer_array(device, name):
    y = getattr(npx, name)(from_numpy(onp.zeros((2, 0), dtype="int64"), device=device)).asnumpy()
    assert y.shape == (2, 0) and y.dtype == onp.float32
