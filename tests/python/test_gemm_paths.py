"""The CPU's routes for matrix products, against NumPy float64: the few-row kernels that nn::gemm
sends products to (Note [Small GEMM], Note [Small-row products]), reached through
fully_connected's forward (X . W^T, beta = 1 with a bias), its data gradient (dY . W) and
np.matmul (A . B), and the batch split of np.matmul (Note [Batched products]) with broadcast
batch axes, npx.batch_dot's transposes and matmul's gradients. Row counts sit on both sides of
each range boundary (for X . W^T on an AVX-512 CPU, 2-3 rows: small_rows_product; 4-8 rows: the
small GEMM while W stays in cache, small_rows_product once W has 2^20 elements; 9 and more: the
small GEMM, in row blocks of 64; one row: gemv), and column and inner sizes are not multiples of
a vector, a panel (16 or 32 columns), a column block (256) or a packed depth (256). float16 and bfloat16 go through the float kernels.
Results must not depend on the thread count or the engine. The C++ test
tests/cpp/test_small_gemm.cc checks the kernel itself at both vector widths, with alpha and
padded strides."""

import numpy as onp
import pytest

from conftest import assert_engines_agree, assert_thread_count_independent
from pymx import autograd, gluon, np, npx

RNG = onp.random.default_rng(11)

# Unit roundoff of the accumulation (float64 products accumulate in float64, the rest in float32)
# and of the result's own rounding.
ACCUMULATION_EPS = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -24,
                    "bfloat16": 2.0 ** -24}
ROUNDING_EPS = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11,
                "bfloat16": 2.0 ** -8}
FLOAT_DTYPES = ["float32", "float64", "float16", "bfloat16"]


def operand(shape, dtype, device):
    """A pymx array of N(0, 1) values in `dtype` and the float64 values it holds."""
    array = np.array(RNG.standard_normal(shape).astype("float32"), device=device).astype(dtype)
    return array, array.astype("float32").asnumpy().astype("float64")


def assert_product_close(got, want, magnitude, inner, dtype, what):
    """|got - want| within the worst-case error of `inner`-term sums in the accumulation type
    (relative to `magnitude`, the sums of the terms' absolute values) plus one rounding of the
    result; a product that dropped or repeated a single term would miss by ~magnitude / inner."""
    got = got.astype("float32").asnumpy().astype("float64") if got.dtype != onp.float64 \
        else got.asnumpy()
    bound = (2 * inner * ACCUMULATION_EPS[dtype] * magnitude
             + 2 * ROUNDING_EPS[dtype] * onp.abs(want) + 1e-300)
    error = onp.abs(got - want)
    worst = onp.unravel_index(onp.argmax(error / bound), error.shape)
    assert onp.all(error <= bound), (f"{what}: at {worst} got {got[worst]}, expected "
                                     f"{want[worst]} (bound {bound[worst]})")


def check_dense(rows, in_units, hidden, dtype, device, use_bias=True):
    """fully_connected's forward, data gradient and weight gradient against float64."""
    x, xd = operand((rows, in_units), dtype, device)
    w, wd = operand((hidden, in_units), dtype, device)
    b, bd = operand((hidden,), dtype, device)
    dy, dyd = operand((rows, hidden), dtype, device)
    for array in (x, w, b):
        array.attach_grad()
    with autograd.record():
        y = npx.fully_connected(x, w, b if use_bias else None, num_hidden=hidden,
                                no_bias=not use_bias)
    y.backward(dy)
    what = f"{rows}x{in_units} . ({hidden}x{in_units})^T {dtype} {device}"
    assert_product_close(y, xd @ wd.T + (bd if use_bias else 0), abs(xd) @ abs(wd.T) + abs(bd),
                         in_units, dtype, what + " forward")
    assert_product_close(x.grad, dyd @ wd, abs(dyd) @ abs(wd), hidden, dtype,
                         what + " data gradient")
    assert_product_close(w.grad, dyd.T @ xd, abs(dyd.T) @ abs(xd), rows, dtype,
                         what + " weight gradient")


# 520 inputs: two packed depths of 256 and 8 more; 257 units: a column block and one column.
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 8, 9, 16, 17, 63, 64, 65, 130])
def test_dense_few_rows_match_numpy(rows, device):
    check_dense(rows, 520, 257, "float32", device)


@pytest.mark.parametrize("rows", [8, 9])
def test_dense_few_rows_large_weight_match_numpy(rows, device):
    # 260 x 4100 weights (2^20 elements and more): 8 rows are small_rows_product's, 9 the GEMM's.
    check_dense(rows, 4100, 260, "float32", device, use_bias=False)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("rows", [5, 32])
def test_dense_few_rows_every_float_dtype(rows, dtype, device):
    check_dense(rows, 300, 70 if rows == 32 else 130, dtype, device)


def test_lstm_recurrence_shapes_match_numpy(device):
    # LSTM(256) at batch 32: (32 x 256) . (1024 x 256)^T and its gradients.
    check_dense(32, 256, 1024, "float32", device)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + ["int32"])
@pytest.mark.parametrize("rows", [2, 9, 64])
def test_matmul_few_rows_match_numpy(rows, dtype, device):
    # A . B with B stored k x n: 2-64 rows take the small GEMM; 300 x 70 leaves partial panels.
    if dtype == "int32":
        a_np = RNG.integers(-5, 6, (rows, 300)).astype("int32")
        b_np = RNG.integers(-5, 6, (300, 70)).astype("int32")
        got = np.matmul(np.array(a_np, device=device), np.array(b_np, device=device))
        onp.testing.assert_array_equal(got.asnumpy(), a_np.astype("int64") @ b_np)
        return
    a, ad = operand((rows, 300), dtype, device)
    b, bd = operand((300, 70), dtype, device)
    assert_product_close(np.matmul(a, b), ad @ bd, abs(ad) @ abs(bd), 300, dtype,
                         f"matmul {rows}x300 . 300x70 {dtype}")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 1, 9, 100), (1, 4, 100, 300)),  # 12 products from broadcast batch axes
    ((6, 20, 33), (33, 17)),             # one b for every a
    ((1, 40, 70), (1, 70, 50)),          # one product: fewer than the threads
])
def test_batched_matmul_matches_numpy(a_shape, b_shape, dtype, device):
    a, ad = operand(a_shape, dtype, device)
    b, bd = operand(b_shape, dtype, device)
    assert_product_close(np.matmul(a, b), ad @ bd, abs(ad) @ abs(bd), a_shape[-1], dtype,
                         f"matmul {a_shape} . {b_shape} {dtype}")


def test_batched_matmul_integers_and_empty(device):
    a_np = RNG.integers(-9, 10, (5, 7, 6)).astype("int64")
    b_np = RNG.integers(-9, 10, (5, 6, 4)).astype("int64")
    got = np.matmul(np.array(a_np, device=device), np.array(b_np, device=device))
    onp.testing.assert_array_equal(got.asnumpy(), a_np @ b_np)
    # k = 0: every product is zeros; no rows: nothing to compute.
    zeros = np.matmul(np.ones((4, 3, 0), device=device), np.ones((4, 0, 2), device=device))
    onp.testing.assert_array_equal(zeros.asnumpy(), onp.zeros((4, 3, 2)))
    assert np.matmul(np.ones((4, 0, 3), device=device), np.ones((4, 3, 2), device=device)).shape \
        == (4, 0, 2)


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_batch_dot_matches_numpy(transpose_a, transpose_b, device):
    a, ad = operand((8, 40, 24) if transpose_a else (8, 24, 40), "float32", device)
    b, bd = operand((8, 33, 40) if transpose_b else (8, 40, 33), "float32", device)
    want_a = ad.swapaxes(-1, -2) if transpose_a else ad
    want_b = bd.swapaxes(-1, -2) if transpose_b else bd
    got = npx.batch_dot(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    assert_product_close(got, want_a @ want_b, abs(want_a) @ abs(want_b), 40, "float32",
                         f"batch_dot transpose_a={transpose_a} transpose_b={transpose_b}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batched_matmul_gradients_match_numpy(dtype, device):
    # Broadcast batch axes: each operand's gradient sums over the axes it was broadcast along.
    a, ad = operand((3, 1, 9, 40), dtype, device)
    b, bd = operand((4, 40, 21), dtype, device)
    dy, dyd = operand((3, 4, 9, 21), dtype, device)
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        y = np.matmul(a, b)
    y.backward(dy)
    want_a = (dyd @ bd.swapaxes(-1, -2)).sum(axis=1, keepdims=True)
    want_b = (ad.swapaxes(-1, -2) @ dyd).sum(axis=0)
    assert_product_close(a.grad, want_a, (abs(dyd) @ abs(bd.swapaxes(-1, -2))).sum(
        axis=1, keepdims=True), 21 * 4, dtype, "matmul gradient of a")
    assert_product_close(b.grad, want_b, (abs(ad.swapaxes(-1, -2)) @ abs(dyd)).sum(axis=0),
                         9 * 3, dtype, "matmul gradient of b")


def test_dense_hybridized_equals_imperative():
    x = np.array(RNG.standard_normal((24, 300)).astype("float32"))
    net = gluon.nn.Dense(130, in_units=300)
    net.initialize()
    imperative = net(x).asnumpy()
    net.hybridize()
    onp.testing.assert_array_equal(net(x).asnumpy(), imperative)


def test_matmul_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"mismatch.*\(4, 9, 5\).*\(4, 6, 3\)"):
        np.matmul(np.ones((4, 9, 5)), np.ones((4, 6, 3)))
    with pytest.raises(ValueError, match=r"batch axes.*\(3, 9, 5\).*\(4, 5, 3\)"):
        np.matmul(np.ones((3, 9, 5)), np.ones((4, 5, 3)))
    with pytest.raises(ValueError, match=r"batch axes.*\(2, 3, 4\).*\(3, 4, 5\)"):
        npx.batch_dot(np.ones((2, 3, 4)), np.ones((3, 4, 5)))


# Products through each route, saved to OUT (an .npz path) by a child process.
PRODUCTS_SCRIPT = """
import numpy as onp
from pymx import np, npx
rng = onp.random.default_rng(5)
def arr(*shape):
    return np.array(rng.standard_normal(shape).astype("float32"))
x, w = arr(32, 256), arr(1024, 256)
out = {"dense": npx.fully_connected(x, w, None, num_hidden=1024, no_bias=True),
       "dense_b9": npx.fully_connected(arr(9, 700), arr(300, 700), None, num_hidden=300,
                                       no_bias=True),
       "matmul": np.matmul(arr(13, 500), arr(500, 300)),
       "batched": np.matmul(arr(3, 1, 9, 100), arr(1, 4, 100, 300)),
       "batched_big": np.matmul(arr(6, 128, 64), arr(6, 64, 96)),
       # OpenBLAS's routes (Note [Parallel GEMM], Note [Vector products]): tall and wide
       # products split over the threads, and matrix-vector products both ways round.
       "tall": np.matmul(arr(148, 140), arr(140, 280)),
       "tall_float64": np.matmul(arr(148, 140).astype("float64"), arr(140, 280).astype("float64")),
       "wide": np.matmul(arr(32, 147), arr(147, 3136)),
       "row_times_matrix": np.matmul(arr(1, 1100), arr(1100, 1000)),
       "matrix_times_column": np.matmul(arr(1000, 1100), arr(1100, 1))}
onp.savez(OUT, **{key: value.asnumpy() for key, value in out.items()})
"""


def test_products_do_not_depend_on_the_engine(tmp_path):
    assert_engines_agree(PRODUCTS_SCRIPT, tmp_path)


def test_products_do_not_depend_on_the_thread_count(tmp_path):
    assert_thread_count_independent(PRODUCTS_SCRIPT, tmp_path)
