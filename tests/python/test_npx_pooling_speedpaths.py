"""Float max pooling's vectorised kernels (engine/src/ops/max_pool_2d.cc: stride 2 and a kernel of
at most 4 along the width, LeafNetwork's 4x4 / stride 2 among them) against a NumPy float64
reference of the op's exact semantics: the max over each window clipped to the input, and each
output's gradient sent to the first (row-major) input of its window equal to the output. Covers
ties (all-zero windows, a maximum repeated in different rows and columns), 'full' windows clipped
by the edges, odd widths and the kernels' 4- and 16-output blocks, 1-D pooling, height padding
(backward only), and NaN. tests/cpp/test_max_pool_simd.cc checks each SIMD level on its own; these
reach the best one this CPU has through the op."""
import numpy as onp
import pytest

from pymx import autograd, npx
from pymx.ndarray import from_numpy

RNG = onp.random.default_rng(11)


def windows(size, kernel, stride, pad, full):
    """[lo, hi) of each output's window along one dimension, clipped to the input."""
    room = size + 2 * pad - kernel
    out = (-(-room // stride) if full else room // stride) + 1
    if full and (out - 1) * stride >= size + pad:
        out -= 1
    return [(max(o * stride - pad, 0), min(o * stride - pad + kernel, size)) for o in range(out)]


def ref_max_pool(x, dy, kernel, stride, pad, full):
    """Forward y and gradient dx in float64; dx adds each output's dy at the first input of its
    window equal to y (none when no input equals it)."""
    x = x.astype("float64")
    x4 = x if x.ndim == 4 else x[:, :, None, :]
    if x.ndim == 3:  # 1-D: one row
        kernel, stride, pad = (1,) + tuple(kernel), (1,) + tuple(stride), (0,) + tuple(pad)
    rows = windows(x4.shape[2], kernel[0], stride[0], pad[0], full)
    cols = windows(x4.shape[3], kernel[1], stride[1], pad[1], full)
    n, c = x4.shape[:2]
    y = onp.empty((n, c, len(rows), len(cols)))
    dx = onp.zeros_like(x4)
    dy4 = None if dy is None else dy.astype("float64").reshape(y.shape)
    batch, channel = onp.meshgrid(onp.arange(n), onp.arange(c), indexing="ij")
    for oy, (r0, r1) in enumerate(rows):
        for ox, (c0, c1) in enumerate(cols):
            window = x4[:, :, r0:r1, c0:c1].reshape(n, c, -1)
            m = window.max(axis=-1)
            y[:, :, oy, ox] = m
            if dy4 is None:
                continue
            equal = window == m[..., None]
            found = equal.any(axis=-1)
            first = equal.argmax(axis=-1)
            rr, cc = r0 + first // (c1 - c0), c0 + first % (c1 - c0)
            dx[batch[found], channel[found], rr[found], cc[found]] += dy4[:, :, oy, ox][found]
    return y.reshape(y.shape if x.ndim == 4 else y.shape[:2] + y.shape[3:]), dx.reshape(x.shape)


def pool_and_grad(x, dy, kernel, stride, pad, full):
    xa = from_numpy(x)
    xa.attach_grad()
    with autograd.record():
        y = npx.pooling(xa, kernel=kernel, stride=stride, pad=pad, pool_type="max",
                        pooling_convention="full" if full else "valid")
    y.backward(from_numpy(dy))
    return y.asnumpy(), xa.grad.asnumpy()


def post_relu_ties(shape):
    """Non-negative halves: most windows hold exact zeros and repeated maxima; some -0."""
    x = onp.maximum(onp.round(RNG.standard_normal(shape) * 2) / 2, 0).astype("float32")
    x[RNG.random(shape) < 0.05] = -0.0
    return x


CASES = [
    # x shape, kernel, stride, pad, full
    ((2, 3, 127, 127), (4, 4), (2, 2), (0, 0), False),  # LeafNetwork's three pools
    ((2, 4, 61, 61), (4, 4), (2, 2), (0, 0), False),
    ((2, 4, 28, 28), (4, 4), (2, 2), (0, 0), False),
    ((1, 3, 9, 10), (4, 4), (2, 2), (0, 0), True),      # last row and column windows clipped
    ((2, 2, 11, 12), (3, 3), (2, 2), (0, 0), False),
    ((1, 2, 12, 13), (3, 3), (2, 2), (0, 0), True),
    ((2, 2, 7, 9), (2, 2), (2, 2), (0, 0), False),
    ((1, 2, 8, 11), (3, 1), (1, 2), (0, 0), False),
    ((1, 3, 13, 15), (4, 4), (3, 2), (1, 0), True),     # height padding
    ((1, 2, 6, 17), (2, 3), (1, 2), (1, 0), False),
    ((1, 2, 14, 21), (5, 4), (1, 2), (0, 0), False),    # taller than 4 rows
    ((1, 2, 20, 19), (9, 2), (3, 2), (2, 0), True),
    ((1, 2, 5, 4), (4, 4), (2, 2), (0, 0), False),      # widths at the blocks' edges
    ((1, 2, 5, 33), (4, 4), (2, 2), (0, 0), False),
    ((1, 2, 5, 34), (4, 4), (2, 2), (0, 0), False),
    ((1, 2, 5, 35), (4, 4), (2, 2), (0, 0), True),
    ((1, 2, 5, 66), (4, 4), (2, 2), (0, 0), False),
    ((1, 2, 5, 67), (3, 3), (2, 2), (0, 0), True),
    ((2, 3, 37), (4,), (2,), (0,), False),              # 1-D (NCW)
    ((1, 2, 38), (3,), (2,), (0,), True),
]


@pytest.mark.parametrize("shape,kernel,stride,pad,full", CASES)
def test_max_pool_matches_reference_exactly(shape, kernel, stride, pad, full):
    x = post_relu_ties(shape)
    y_ref, _ = ref_max_pool(x, None, kernel, stride, pad, full)
    # Small integer gradients: the float64 reference's sums are exact, so dx must match bit for
    # bit whatever order the kernel adds in.
    dy = RNG.integers(-4, 5, y_ref.shape).astype("float32")
    _, dx_ref = ref_max_pool(x, dy, kernel, stride, pad, full)
    y, dx = pool_and_grad(x, dy, kernel, stride, pad, full)
    onp.testing.assert_array_equal(y, y_ref.astype("float32"))
    onp.testing.assert_array_equal(dx, dx_ref.astype("float32"))


@pytest.mark.parametrize("shape,kernel,stride,pad,full", [c for c in CASES if not any(c[3])])
def test_max_pool_forward_matches_generic_code_bitwise(shape, kernel, stride, pad, full):
    # float64 takes the generic code; the same data's float32 result must be its exact cast,
    # including which of -0 and +0 a tied window returns.
    x = post_relu_ties(shape)
    attrs = dict(kernel=kernel, stride=stride, pooling_convention="full" if full else "valid")
    y32 = npx.pooling(from_numpy(x), **attrs).asnumpy()
    y64 = npx.pooling(from_numpy(x.astype("float64")), **attrs).asnumpy()
    assert onp.array_equal(y32, y64.astype("float32"))
    assert onp.array_equal(onp.signbit(y32), onp.signbit(y64))


def test_max_pool_all_zero_windows_send_gradient_to_first_element():
    x = onp.zeros((2, 3, 11, 13), "float32")
    dy = RNG.integers(1, 9, (2, 3, 4, 5)).astype("float32")
    y, dx = pool_and_grad(x, dy, (4, 4), (2, 2), (0, 0), False)
    assert not y.any()
    expected = onp.zeros_like(x)
    expected[:, :, 0:8:2, 0:10:2] = dy  # window (oy, ox) starts at (2 oy, 2 ox)
    onp.testing.assert_array_equal(dx, expected)


def test_max_pool_repeated_maximum_goes_to_first_in_row_major_order():
    # One 4x4 window (a 4x4 input): the maximum 3 at (0, 3), (1, 0) and (3, 3). Row-major order
    # picks (0, 3); column-major order would pick (1, 0).
    x = onp.zeros((1, 1, 4, 4), "float32")
    x[0, 0, 0, 3] = x[0, 0, 1, 0] = x[0, 0, 3, 3] = 3
    x[0, 0, 2, 1] = 2
    dy = onp.full((1, 1, 1, 1), 5, "float32")
    y, dx = pool_and_grad(x, dy, (4, 4), (2, 2), (0, 0), False)
    assert y[0, 0, 0, 0] == 3
    expected = onp.zeros_like(x)
    expected[0, 0, 0, 3] = 5
    onp.testing.assert_array_equal(dx, expected)


def test_max_pool_overlapping_windows_sum_their_gradients():
    # Stride 2, kernel 4: neighbouring windows share two columns and rows; one maximum shared by
    # four windows collects all four gradients.
    x = onp.zeros((1, 1, 8, 8), "float32")
    x[0, 0, 3, 3] = 1
    dy = onp.arange(1, 10, dtype="float32").reshape(1, 1, 3, 3)
    _, dx = pool_and_grad(x, dy, (4, 4), (2, 2), (0, 0), False)
    _, dx_ref = ref_max_pool(x, dy, (4, 4), (2, 2), (0, 0), False)
    onp.testing.assert_array_equal(dx, dx_ref)
    assert dx[0, 0, 3, 3] == 1 + 2 + 4 + 5


def test_max_pool_random_gradients_leafnet_shape():
    x = onp.maximum(RNG.standard_normal((2, 3, 61, 61)), 0).astype("float32")
    dy = RNG.standard_normal((2, 3, 29, 29)).astype("float32")
    y_ref, dx_ref = ref_max_pool(x, dy, (4, 4), (2, 2), (0, 0), False)
    y, dx = pool_and_grad(x, dy, (4, 4), (2, 2), (0, 0), False)
    onp.testing.assert_array_equal(y, y_ref.astype("float32"))
    onp.testing.assert_allclose(dx, dx_ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,kernel,stride,full", [
    ((2, 3, 31, 33), (4, 4), (2, 2), False),
    ((1, 2, 12, 13), (3, 3), (2, 2), True),
])
def test_max_pool_nan_propagates_as_in_generic_code(shape, kernel, stride, full):
    # A NaN input must not crash either direction. The forward gives the generic code's result,
    # NaNs included; an output equal to no input (NaN) sends no gradient.
    x = post_relu_ties(shape)
    x[RNG.random(shape) < 0.03] = onp.nan
    conv = "full" if full else "valid"
    y64 = npx.pooling(from_numpy(x.astype("float64")), kernel=kernel, stride=stride,
                      pooling_convention=conv).asnumpy()
    dy = RNG.integers(-4, 5, y64.shape).astype("float32")
    y, dx = pool_and_grad(x, dy, kernel, stride, (0, 0), full)
    onp.testing.assert_array_equal(y, y64.astype("float32"))  # NaN positions equal too
    assert onp.isnan(y).any()
    # dx: the reference's first match against the op's own outputs.
    dx_ref = onp.zeros(shape)
    rows = windows(shape[2], kernel[0], stride[0], 0, full)
    cols = windows(shape[3], kernel[1], stride[1], 0, full)
    for n, ch, oy, ox in onp.ndindex(y.shape):
        (r0, r1), (c0, c1) = rows[oy], cols[ox]
        hits = onp.argwhere(x[n, ch, r0:r1, c0:c1] == y[n, ch, oy, ox])
        if len(hits):
            dx_ref[n, ch, r0 + hits[0][0], c0 + hits[0][1]] += dy[n, ch, oy, ox]
    onp.testing.assert_array_equal(dx, dx_ref.astype("float32"))
