"""pymx.np.linalg against numpy.linalg (float64 references): values for batched, unbatched and
empty shapes in float64 (and float32 with its own tolerance), gradients against central
differences, LinAlgError for singular / non-positive-definite input (naming the matrix of the
batch and LAPACK's info), bad shapes, hybridized against imperative results, and the threaded
engine against the naive one."""

import numpy as onp
import pytest
from conftest import assert_engines_agree

from pymx import autograd, gluon, np
from pymx._op import invoke
from pymx.test_utils import assert_almost_equal, check_numeric_gradient

RTOL = {"float32": 1e-4, "float64": 1e-10}
ATOL = {"float32": 1e-4, "float64": 1e-10}
SHAPES = [(3, 3), (2, 4, 4), (2, 1, 3, 3), (0, 3, 3), (2, 0, 0)]


def well_conditioned(shape, dtype="float64"):
    """Random matrices with a dominant diagonal (condition numbers of a few units)."""
    a = onp.random.uniform(-1, 1, shape)
    if shape[-1]:
        a += 2 * shape[-1] ** 0.5 * onp.eye(shape[-1])
    return a.astype(dtype)


def spd(shape, dtype="float64"):
    """Random symmetric positive-definite matrices."""
    x = onp.random.uniform(-1, 1, shape)
    return (x @ onp.swapaxes(x, -1, -2) + shape[-1] * onp.eye(shape[-1])).astype(dtype)


def check(got, want, dtype="float64", scale=1.0):
    assert got.shape == want.shape, f"shape {got.shape} != NumPy's {want.shape}"
    assert got.dtype == onp.dtype(dtype), f"dtype {got.dtype} != {dtype}"
    assert_almost_equal(got, want, rtol=RTOL[dtype] * scale, atol=ATOL[dtype] * scale,
                        names=("pymx", "numpy"))


def sign_aligned(vectors, reference, axis):
    """`vectors` with each column (axis=-2 sums over rows) or row flipped to agree in sign with
    `reference`: eigen- and singular vectors are defined up to sign."""
    dots = onp.sum(vectors * reference, axis=axis, keepdims=True)
    return vectors * onp.where(dots < 0, -1.0, 1.0)


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", SHAPES)
def test_inv_det_slogdet(shape, dtype):
    a = well_conditioned(shape, dtype)
    ref = a.astype("float64")
    check(np.linalg.inv(np.array(a)).asnumpy(), onp.linalg.inv(ref), dtype)
    check(np.linalg.det(np.array(a)).asnumpy(), onp.linalg.det(ref), dtype, scale=10)
    sign, logabs = np.linalg.slogdet(np.array(a))
    want_sign, want_logabs = onp.linalg.slogdet(ref)
    check(sign.asnumpy(), want_sign, dtype)
    check(logabs.asnumpy(), want_logabs, dtype)


def test_det_of_singular_and_negative_matrices():
    a = onp.array([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]], [[2.0, 0.0], [0.0, -3.0]]])
    check(np.linalg.det(np.array(a, dtype="float64")).asnumpy(), onp.linalg.det(a))
    sign, logabs = np.linalg.slogdet(np.array(a, dtype="float64"))
    want_sign, want_logabs = onp.linalg.slogdet(a)
    onp.testing.assert_array_equal(sign.asnumpy(), want_sign)
    assert logabs.asnumpy()[0] == -onp.inf
    check(logabs.asnumpy()[1:], want_logabs[1:])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 4, 4), (2, 4)), ((2, 4, 4), (2, 4, 3)),
    ((2, 3, 3), (3,)), ((2, 3, 3), (1, 3, 2)), ((1, 3, 3), (4, 3, 2)), ((0, 3, 3), (0, 3)),
    ((3, 3), (3, 0))])
def test_solve(a_shape, b_shape, dtype):
    a = well_conditioned(a_shape, dtype)
    b = onp.random.uniform(-1, 1, b_shape).astype(dtype)
    a64, b64 = a.astype("float64"), b.astype("float64")
    if len(b_shape) in (1, len(a_shape) - 1):  # stacked vectors: NumPy 2's rule and NumPy 1's
        want = onp.linalg.solve(a64, b64[..., None])[..., 0]
    else:
        want = onp.linalg.solve(a64, b64)
    check(np.linalg.solve(np.array(a), np.array(b)).asnumpy(), want, dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", SHAPES)
def test_cholesky(shape, dtype):
    a = spd(shape, dtype)
    want = onp.linalg.cholesky(a.astype("float64"))
    check(np.linalg.cholesky(np.array(a)).asnumpy(), want, dtype)
    check(np.linalg.cholesky(np.array(a), upper=True).asnumpy(), onp.swapaxes(want, -1, -2), dtype)


def test_cholesky_reads_the_lower_triangle_only():
    a = spd((3, 3))
    garbage = a + onp.triu(onp.full((3, 3), 100.0), 1)
    check(np.linalg.cholesky(np.array(garbage)).asnumpy(), onp.linalg.cholesky(a))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(shape, dtype, uplo):
    a = onp.random.uniform(-1, 1, shape)
    a = (a + onp.swapaxes(a, -1, -2)).astype(dtype)
    # The triangle not read holds garbage: eigh must not look at it.
    mask = onp.tril(onp.ones(shape[-2:]), -1) if uplo == "U" else onp.triu(onp.ones(shape[-2:]), 1)
    garbage = (a + 50 * mask).astype(dtype)
    want_w, want_v = onp.linalg.eigh(a.astype("float64"), UPLO=uplo)
    w, v = np.linalg.eigh(np.array(garbage), UPLO=uplo)
    check(w.asnumpy(), want_w, dtype)
    check(sign_aligned(v.asnumpy().astype("float64"), want_v, axis=-2).astype(dtype), want_v, dtype,
          scale=10)
    check(np.linalg.eigvalsh(np.array(garbage), UPLO=uplo).asnumpy(), want_w, dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 5), (2, 3, 4), (2, 1, 4, 3), (0, 2, 3),
                                   (2, 0, 3), (3, 0)])
def test_svd(shape, dtype):
    a = onp.random.uniform(-1, 1, shape).astype(dtype)
    want_u, want_s, want_vh = onp.linalg.svd(a.astype("float64"), full_matrices=False)
    u, s, vh = np.linalg.svd(np.array(a))
    check(s.asnumpy(), want_s, dtype)
    check(sign_aligned(u.asnumpy().astype("float64"), want_u, axis=-2).astype(dtype), want_u,
          dtype, scale=10)
    check(sign_aligned(vh.asnumpy().astype("float64"), want_vh, axis=-1).astype(dtype), want_vh,
          dtype, scale=10)
    check(np.linalg.svd(np.array(a), compute_uv=False).asnumpy(), want_s, dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (3, 5), (2, 4, 3), (2, 1, 3, 4), (0, 3, 3),
                                   (2, 0, 3)])
def test_qr(shape, dtype):
    a = onp.random.uniform(-1, 1, shape).astype(dtype)
    want_q, want_r = onp.linalg.qr(a.astype("float64"))
    q, r = np.linalg.qr(np.array(a))
    # Householder QR is unique up to the signs of R's rows (and Q's columns).
    signs = onp.sign(onp.diagonal(want_r, axis1=-2, axis2=-1))[..., :, None] * \
        onp.where(onp.diagonal(r.asnumpy(), axis1=-2, axis2=-1) < 0, -1.0, 1.0)[..., :, None]
    check(r.asnumpy(), (want_r * signs).astype(dtype).astype("float64"), dtype, scale=10)
    check(q.asnumpy(), want_q * onp.swapaxes(signs, -1, -2), dtype, scale=10)
    check(np.linalg.qr(np.array(a), mode="r").asnumpy(), r.asnumpy().astype("float64"), dtype)


def test_pinv_matrix_rank_lstsq():
    a = onp.random.uniform(-1, 1, (2, 5, 3))
    a[1, :, 2] = a[1, :, 0] + a[1, :, 1]  # rank 2
    check(np.linalg.pinv(np.array(a)).asnumpy(), onp.linalg.pinv(a), scale=1e3)
    onp.testing.assert_array_equal(np.linalg.matrix_rank(np.array(a)).asnumpy(),
                                   onp.linalg.matrix_rank(a))
    assert int(np.linalg.matrix_rank(np.ones(4)).asnumpy()) == 1
    assert int(np.linalg.matrix_rank(np.zeros(4)).asnumpy()) == 0
    check(np.linalg.pinv(np.zeros((2, 0, 3), dtype="float64")).asnumpy(), onp.zeros((2, 3, 0)))
    for a2, b in [(a[0], onp.random.uniform(-1, 1, 5)), (a[1], onp.random.uniform(-1, 1, (5, 2))),
                  (a[0].T, onp.random.uniform(-1, 1, (3, 2)))]:
        x, residuals, rank, s = np.linalg.lstsq(np.array(a2), np.array(b))
        want = onp.linalg.lstsq(a2, b, rcond=None)
        check(x.asnumpy(), want[0], scale=1e3)
        check(residuals.asnumpy(), want[1], scale=1e3)
        assert rank == want[2]
        check(s.asnumpy(), want[3])


def test_matrix_power_multi_dot_tensorinv_tensorsolve():
    a = well_conditioned((2, 3, 3))
    for n in (0, 1, 2, 5, -1, -3):
        check(np.linalg.matrix_power(np.array(a), n).asnumpy(), onp.linalg.matrix_power(a, n),
              scale=1e3)
    ints = onp.arange(9).reshape(3, 3)
    got = np.linalg.matrix_power(np.array(ints, dtype="int64"), 3)
    onp.testing.assert_array_equal(got.asnumpy(), onp.linalg.matrix_power(ints, 3))

    chain = [onp.random.uniform(-1, 1, s) for s in [(4,), (4, 6), (6, 2), (2, 5), (5,)]]
    check(np.linalg.multi_dot([np.array(x) for x in chain]).asnumpy(), onp.linalg.multi_dot(chain))
    check(np.linalg.multi_dot([np.array(x) for x in chain[1:4]]).asnumpy(),
          onp.linalg.multi_dot(chain[1:4]))

    t = well_conditioned((6, 6)).reshape(2, 3, 6)
    check(np.linalg.tensorinv(np.array(t), ind=2).asnumpy(), onp.linalg.tensorinv(t, ind=2))
    t = well_conditioned((6, 6)).reshape(6, 2, 3)
    b = onp.random.uniform(-1, 1, 6)
    check(np.linalg.tensorsolve(np.array(t), np.array(b)).asnumpy(), onp.linalg.tensorsolve(t, b))
    t4 = well_conditioned((6, 6)).reshape(2, 3, 3, 2)
    b2 = onp.random.uniform(-1, 1, (2, 3))
    check(np.linalg.tensorsolve(np.array(t4), np.array(b2), axes=(1,)).asnumpy(),
          onp.linalg.tensorsolve(t4, b2, axes=(1,)))


@pytest.mark.parametrize("ord,axis,shape", [
    (None, None, (2, 3, 4)), (None, None, (5,)), (2, None, (5,)), (1, None, (5,)), (0, None, (5,)),
    (3, -1, (2, 5)), (0.5, 0, (4, 3)), (onp.inf, 1, (2, 5)), (-onp.inf, None, (5,)),
    (None, (1, 2), (2, 3, 4)), ("fro", None, (3, 4)), ("nuc", (0, 2), (3, 2, 4)), (2, None, (3, 4)),
    (-2, (2, 0), (3, 2, 4)), (1, None, (3, 4)), (-1, (0, 1), (3, 4)), (onp.inf, None, (3, 4)),
    (-onp.inf, (-1, -2), (2, 3, 4))])
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm(ord, axis, shape, keepdims):
    x = onp.random.uniform(-1, 1, shape)
    x[0] = 0  # for ord 0
    want = onp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    check(np.linalg.norm(np.array(x), ord=ord, axis=axis, keepdims=keepdims).asnumpy(), want)


def test_norm_gradients_and_errors():
    x = onp.random.uniform(-1, 1, (3, 4))
    for ord, axis in [(None, None), (3, 1), ("nuc", None), (2, None), (onp.inf, (0, 1))]:
        check_numeric_gradient(lambda v: np.linalg.norm(v, ord=ord, axis=axis), [x])
    with pytest.raises(ValueError, match="invalid norm order 'fro' for vectors"):
        np.linalg.norm(np.ones(3), ord="fro")
    with pytest.raises(ValueError, match="invalid norm order 3 for matrices"):
        np.linalg.norm(np.ones((3, 3)), ord=3)
    with pytest.raises(ValueError, match="ord 2 without axis needs a 1-D or 2-D array, got 3"):
        np.linalg.norm(np.ones((2, 3, 3)), ord=2)
    with pytest.raises(onp.exceptions.AxisError,
                       match=r"norm: axis 3 is out of bounds for array of dimension 2"):
        np.linalg.norm(np.ones((3, 3)), axis=(0, 3))


def test_integer_input_is_computed_in_float32():
    got = np.linalg.inv(np.array([[2, 0], [0, 4]], dtype="int32"))
    assert got.dtype == onp.float32
    onp.testing.assert_array_equal(got.asnumpy(), [[0.5, 0], [0, 0.25]])


# ---------------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------------

GRAD_SHAPES = [(3, 3), (2, 2, 2)]


@pytest.mark.parametrize("shape", GRAD_SHAPES)
def test_inv_det_slogdet_gradients(shape):
    a = well_conditioned(shape)
    check_numeric_gradient(np.linalg.inv, [a])
    check_numeric_gradient(np.linalg.det, [a])
    check_numeric_gradient(lambda x: np.linalg.slogdet(x)[1], [a])
    flipped = -a  # a negative determinant for odd sizes
    check_numeric_gradient(lambda x: np.linalg.slogdet(x)[1], [flipped])


@pytest.mark.parametrize("a_shape,b_shape", [((3, 3), (3,)), ((2, 3, 3), (2, 3, 2)),
                                             ((1, 3, 3), (2, 3, 1))])
def test_solve_gradient(a_shape, b_shape):
    check_numeric_gradient(np.linalg.solve, [well_conditioned(a_shape),
                                             onp.random.uniform(-1, 1, b_shape)])


@pytest.mark.parametrize("shape", GRAD_SHAPES)
def test_cholesky_gradient(shape):
    check_numeric_gradient(np.linalg.cholesky, [spd(shape)])
    check_numeric_gradient(lambda x: np.linalg.cholesky(x, upper=True), [spd(shape)])


def test_cholesky_gradient_through_a_symmetric_product():
    """A = X X^T + I: the folded gradient reaches X as the symmetric one would."""
    x = onp.random.uniform(-1, 1, (3, 3))
    check_numeric_gradient(
        lambda v: np.linalg.cholesky(np.matmul(v, np.swapaxes(v, -1, -2)) +
                                     np.eye(3, dtype="float64")),
        [x])


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", GRAD_SHAPES)
def test_eigh_gradient(shape, uplo):
    a = onp.random.uniform(-1, 1, shape)
    a = a + onp.swapaxes(a, -1, -2) + onp.diag(onp.arange(shape[-1]) * 2.0)  # distinct eigenvalues

    def eigen_product(x):
        w, v = np.linalg.eigh(x, UPLO=uplo)
        return np.expand_dims(w, -2) * v * v  # v * v: independent of the eigenvectors' signs

    check_numeric_gradient(eigen_product, [a])
    check_numeric_gradient(lambda x: np.linalg.eigvalsh(x, UPLO=uplo), [a])


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4), (2, 3, 2)])
def test_svd_gradient(shape):
    a = onp.random.uniform(-1, 1, shape)

    def left(x):
        u, s, vh = np.linalg.svd(x)
        return np.expand_dims(s, -2) * u * u

    def right(x):
        u, s, vh = np.linalg.svd(x)
        return np.expand_dims(s, -1) * vh * vh

    check_numeric_gradient(left, [a])
    check_numeric_gradient(right, [a])
    check_numeric_gradient(lambda x: np.linalg.svd(x, compute_uv=False), [a])


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4), (2, 3, 2)])
def test_qr_gradient(shape):
    a = onp.random.uniform(-1, 1, shape)
    check_numeric_gradient(lambda x: np.linalg.qr(x)[0], [a])
    check_numeric_gradient(lambda x: np.linalg.qr(x)[1], [a])


def test_composition_gradients():
    a = onp.random.uniform(-1, 1, (4, 3))
    check_numeric_gradient(np.linalg.pinv, [a])
    check_numeric_gradient(lambda x: np.linalg.matrix_power(x, -2), [well_conditioned((3, 3))])
    check_numeric_gradient(lambda x, y, z: np.linalg.multi_dot([x, y, z]),
                           [onp.random.uniform(-1, 1, s) for s in [(2, 3), (3, 4), (4,)]])
    check_numeric_gradient(lambda x: np.linalg.tensorinv(x, ind=1),
                           [well_conditioned((4, 4)).reshape(4, 2, 2)])


def test_hybridized_equals_imperative():
    class LinalgBlock(gluon.HybridBlock):
        def forward(self, a, b):
            x = np.linalg.solve(a, b)
            l_factor = np.linalg.cholesky(np.matmul(a, np.swapaxes(a, -1, -2)))
            w, _ = np.linalg.eigh(a + np.swapaxes(a, -1, -2))
            return (x + np.linalg.inv(a) + l_factor + np.reshape(np.linalg.det(a), (-1, 1, 1)) +
                    np.expand_dims(w, -2))

    a = np.array(well_conditioned((2, 3, 3)))
    b = np.array(onp.random.uniform(-1, 1, (2, 3, 3)))
    block = LinalgBlock()

    def run():
        a.attach_grad()
        with autograd.record():
            out = block(a, b)
        out.backward()
        return out.asnumpy(), a.grad.asnumpy()

    out, grad = run()
    block.hybridize()
    for _ in range(2):  # the trace, then a replay
        hybrid_out, hybrid_grad = run()
        assert_almost_equal(hybrid_out, out, rtol=1e-12, atol=1e-12)
        assert_almost_equal(hybrid_grad, grad, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

def test_singular_matrix_raises_linalg_error_naming_the_matrix():
    a = onp.stack([onp.eye(3), onp.ones((3, 3)), onp.eye(3)])
    for fn in (np.linalg.inv, lambda x: np.linalg.solve(x, np.ones((3, 3, 1)))):
        out = fn(np.array(a))
        with pytest.raises(np.linalg.LinAlgError, match=r"singular matrix \(matrix 1 of the batch; "
                                                        r"getrf info 2\)"):
            out.asnumpy()
    with pytest.raises(onp.linalg.LinAlgError):  # also NumPy's class, and a ValueError
        np.linalg.inv(np.zeros((2, 2))).asnumpy()
    assert issubclass(np.linalg.LinAlgError, ValueError)
    # The process stays usable.
    check(np.linalg.inv(np.array(onp.eye(3) * 2)).asnumpy(), onp.eye(3) / 2)


def test_not_positive_definite_raises_linalg_error():
    a = onp.stack([spd((3, 3)), spd((3, 3)), onp.diag([1.0, -1.0, 1.0])])
    with pytest.raises(np.linalg.LinAlgError,
                       match=r"cholesky: matrix is not positive definite \(its leading minor of "
                             r"order 2 is not positive\) \(matrix 2 of the batch; potrf info 2\)"):
        np.linalg.cholesky(np.array(a)).asnumpy()
    check(np.linalg.cholesky(np.array(a[:2])).asnumpy(), onp.linalg.cholesky(a[:2]))


@pytest.mark.parametrize("fn", [np.linalg.inv, np.linalg.det, np.linalg.slogdet,
                                np.linalg.cholesky, np.linalg.eigh, np.linalg.eigvalsh,
                                lambda a: np.linalg.matrix_power(a, 2)])
def test_non_square_input_is_rejected_naming_the_shape(fn):
    with pytest.raises(np.linalg.LinAlgError, match=r"must be square, got shape \(2, 2, 3\)"):
        fn(np.ones((2, 2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match="1-dimensional array given"):
        fn(np.ones(3))


@pytest.mark.parametrize("op", ["linalg_inv", "linalg_det", "linalg_slogdet", "linalg_cholesky",
                                "linalg_eigh"])
def test_operators_reject_non_square_and_non_float_input(op):
    name = op[len("linalg_"):]
    with pytest.raises(ValueError, match=rf"{name}: the last 2 dimensions of the array must be "
                                         r"square, got shape \(2, 2, 3\)"):
        invoke(op, [np.ones((2, 2, 3))])
    with pytest.raises(ValueError, match=rf"{name}: expected an array of at least 2 dimensions "
                                         r"\(\.\.\., M, N\), got shape \(3,\)"):
        invoke(op, [np.ones(3)])
    with pytest.raises(TypeError, match=rf"{name}: expected float32 or float64 input, got int32"):
        invoke(op, [np.ones((2, 2), dtype="int32")])


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match=r"solve: b of shape \(2, 4, 1\) does not match a of "
                                         r"shape \(2, 3, 3\)"):
        np.linalg.solve(np.ones((2, 3, 3)), np.ones((2, 4, 1)))
    with pytest.raises(ValueError, match=r"batch shapes of a \(2, 3, 3\) and b \(4, 3, 1\)"):
        np.linalg.solve(np.ones((2, 3, 3)), np.ones((4, 3, 1)))
    with pytest.raises(TypeError, match="inv: expected float32 or float64 input, got float16"):
        np.linalg.inv(np.ones((2, 2), dtype="float16"))
    with pytest.raises(ValueError, match="UPLO must be 'L' or 'U', got 'X'"):
        np.linalg.eigh(np.ones((2, 2)), UPLO="X")
    with pytest.raises(ValueError, match=r"full_matrices=True is not supported .*\(3, 2\)"):
        np.linalg.svd(np.ones((3, 2)), full_matrices=True)
    with pytest.raises(ValueError, match="qr: mode 'raw' is not supported"):
        np.linalg.qr(np.ones((3, 2)), mode="raw")
    with pytest.raises(TypeError, match="exponent must be an integer, got 1.5"):
        np.linalg.matrix_power(np.ones((2, 2)), 1.5)
    with pytest.raises(ValueError, match="expecting at least two arrays, got 1"):
        np.linalg.multi_dot([np.ones((2, 2))])
    with pytest.raises(ValueError, match=r"array 1 has 3 dimensions \(shape \(2, 2, 2\)\)"):
        np.linalg.multi_dot([np.ones((2, 2)), np.ones((2, 2, 2)), np.ones((2, 2))])
    with pytest.raises(ValueError, match=r"prod\(a.shape\[:1\]\) = 2 must equal"):
        np.linalg.tensorinv(np.ones((2, 3)), ind=1)
    with pytest.raises(np.linalg.LinAlgError, match=r"lstsq: b of shape \(4,\) does not match"):
        np.linalg.lstsq(np.ones((3, 2)), np.ones(4))


# ---------------------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------------------

ENGINE_SCRIPT = """
import numpy as onp
from pymx import np
rng = onp.random.default_rng(7)
x = rng.uniform(-1, 1, (16, 6, 6))
a = np.array(x @ onp.swapaxes(x, -1, -2) + 6 * onp.eye(6))
b = np.array(rng.uniform(-1, 1, (16, 6, 2)))
r = np.array(rng.uniform(-1, 1, (16, 7, 5)))
outs = [np.linalg.inv(a), np.linalg.det(a), *np.linalg.slogdet(a), np.linalg.solve(a, b),
        np.linalg.cholesky(a), *np.linalg.eigh(a), *np.linalg.svd(r), *np.linalg.qr(r)]
onp.savez(OUT, *[o.asnumpy() for o in outs])
"""


def test_threaded_engine_equals_naive_engine(tmp_path):
    assert_engines_agree(ENGINE_SCRIPT, tmp_path)
