"""sort, argsort, topk, cumsum and cumsum_backward on the GPU against the CPU, bit for bit, where
the kernels' paths branch beyond what test_np_sort_cumsum.py and test_gpu_ops.py reach: scans across the 256-element
tiles of a block (forward and reversed, strided and flattened rows), integer sums that wrap
around, rows long enough for the large-segment passes of CUB's segmented sort, thousands of
short rows, full-range integer keys, every index dtype of argsort, and topk (which takes its
order from the same sort) on all of these. Float data are small
integers and halves, whose sums are exact in float32, so the block scans' order of additions
cannot change a bit (float16 and bfloat16 round the exact sum once on both devices)."""
import numpy as onp
import pytest

from pymx import np
from pymx._c import core as _core
from pymx.device import gpu
from conftest import requires_gpu

pytestmark = requires_gpu

FLOATS = ["float32", "float64", "float16", "bfloat16"]
RNG = onp.random.default_rng(7)


def halves(shape, low=-8, high=9):
    return (RNG.integers(low, high, size=shape) / 2).astype(onp.float32)


def both(values, dtype):
    """The same bits on cpu(0) and gpu(0)."""
    x = np.array(values, dtype=dtype)
    return x, x.to_device(gpu(0))


def assert_gpu_equals_cpu(op, x_cpu, x_gpu, attrs):
    """Every output of `op`, bit for bit."""
    wants = _core.invoke(op, [x_cpu], attrs)
    gots = _core.invoke(op, [x_gpu], attrs)
    assert len(gots) == len(wants), (op, attrs)
    for k, (want, got) in enumerate(zip(wants, gots)):
        want, got = want._host_values(), got._host_values()
        assert (got.dtype, got.shape) == (want.dtype, want.shape), (op, attrs, k)
        assert got.tobytes() == want.tobytes(), f"{op} {attrs} output {k}:\ngot  {got}\nwant {want}"


@pytest.mark.parametrize("n", [1, 255, 256, 257, 1000])
@pytest.mark.parametrize("dtype", FLOATS)
def test_scans_across_tiles(dtype, n):
    x_cpu, x_gpu = both(halves((3, n, 2)), dtype)
    for op in ("cumsum", "cumsum_backward"):  # the latter scans from the row's end
        assert_gpu_equals_cpu(op, x_cpu, x_gpu, {"axis": 1})  # rows 2 apart in memory
        flat_cpu, flat_gpu = x_cpu.reshape(-1), x_gpu.reshape(-1)
        assert_gpu_equals_cpu(op, flat_cpu, flat_gpu, {"axis": None})  # one row, 6 n long


def test_integer_scans_wrap_around():
    big = onp.full((2, 300), 2 ** 62, dtype=onp.int64)
    big[1] = -big[1] - 7
    assert_gpu_equals_cpu("cumsum", *both(big, "int64"), {"axis": 1})
    small = onp.full((3, 600), 100, dtype=onp.int8)
    for dtype in ("int8", "uint8", "int32", "bool"):
        assert_gpu_equals_cpu("cumsum", *both(small, "int8"), {"axis": 1, "dtype": dtype})
    assert_gpu_equals_cpu("cumsum", *both(small > 0, "bool"), {"axis": None})


def sort_values(dtype, shape):
    """Values with ties; floats with NaNs of both signs, infinities and zeros of both signs;
    integers over their whole range."""
    if dtype in FLOATS:
        values = onp.round(RNG.standard_normal(shape), 2).astype(onp.float32)
        flat = values.reshape(-1)
        specials = [onp.nan, -onp.float32("nan"), onp.inf, -onp.inf, 0.0, -0.0]
        for k, special in enumerate(specials):
            flat[k::97] = special
        return values
    info = onp.iinfo(dtype)
    values = RNG.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    values.reshape(-1)[::89] = info.min
    values.reshape(-1)[1::89] = info.max
    return values


# (3, 20000): segments past the segmented sort's in-block sizes; (5000, 3): thousands of short
# segments; (20000, 3) along axis 0: long rows 3 apart; (1, 50000): one row (device radix sort).
@pytest.mark.parametrize("shape, axis", [((3, 20000), -1), ((5000, 3), -1), ((20000, 3), 0),
                                         ((1, 50000), -1)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "int8", "uint8"])
def test_long_and_many_rows_sort(dtype, shape, axis):
    x_cpu, x_gpu = both(sort_values(dtype if dtype != "bfloat16" else "float32", shape), dtype)
    for op in ("sort", "argsort"):
        for ascend in (True, False):
            assert_gpu_equals_cpu(op, x_cpu, x_gpu, {"axis": axis, "is_ascend": ascend})


@pytest.mark.parametrize("index_dtype", ["int32", "int64", "int8", "uint8", "float16",
                                         "bfloat16", "float32", "float64"])
def test_argsort_index_dtypes(index_dtype):
    x_cpu, x_gpu = both(halves((5, 120), -3, 4), "float32")  # many ties
    for axis in (0, -1, None):
        for ascend in (True, False):
            assert_gpu_equals_cpu("argsort", x_cpu, x_gpu,
                                  {"axis": axis, "is_ascend": ascend, "dtype": index_dtype})


# topk keeps the first k positions of argsort's GPU sort (Note [GPU topk by the rows' sort]):
# ties, NaNs of both signs and zeros of both signs must come out in the CPU's order on every path
# of that sort, the single row (device-wide radix sort) included.
@pytest.mark.parametrize("shape, axis", [((3, 20000), -1), ((5000, 3), -1), ((20000, 3), 0),
                                         ((1, 50000), -1), ((40, 50), None)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "int8"])
def test_topk_takes_the_rows_sort(dtype, shape, axis):
    x_cpu, x_gpu = both(sort_values(dtype if dtype != "bfloat16" else "float32", shape), dtype)
    for ret_typ in ("both", "mask"):
        for k in (2, 0):  # k 0: the whole row
            for ascend in (True, False):
                assert_gpu_equals_cpu("topk", x_cpu, x_gpu,
                                      {"axis": "None" if axis is None else axis, "k": k,
                                       "ret_typ": ret_typ, "is_ascend": ascend, "dtype": "int64"})
