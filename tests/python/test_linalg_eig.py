"""np.linalg.eig, eigvals and cond against numpy.linalg (float64 references): eigenpairs of
non-symmetric matrices with real eigenvalues, batched, unbatched and empty, in float64 and
float32; eig's gradient against central differences; LinAlgError for complex eigenvalues, infs
or NaNs and bad shapes (the process stays usable); cond for every norm order NumPy takes,
singular and empty matrices; and the GPU (cuSOLVER's Xgeev) against the CPU."""
import numpy as onp
import pytest
from conftest import requires_gpu

from pymx import autograd, np
from pymx.device import cpu, gpu
from pymx.test_utils import assert_almost_equal, check_numeric_gradient

TOL = {"float32": 1e-4, "float64": 1e-10}
SHAPES = [(3, 3), (2, 4, 4), (2, 1, 3, 3), (1, 1), (0, 3, 3), (2, 0, 0)]


def real_spectrum(shape, dtype="float64", seed=0):
    """Non-symmetric matrices P diag(w) P^-1 with distinct real eigenvalues w (gaps >= 0.5) and
    a well-conditioned P."""
    rng = onp.random.default_rng(seed)
    *batch, n, _ = shape
    p = rng.uniform(-0.3, 0.3, shape) + onp.eye(n)
    w = onp.arange(n) - n / 2 + rng.uniform(0, 0.5, tuple(batch) + (n,))
    a = p @ (w[..., :, None] * onp.linalg.inv(p)) if n else onp.zeros(shape)
    return a.astype(dtype)


def sorted_pairs(w, v):
    """Eigenvalues ascending, the eigenvector columns permuted alike and signed so that their
    largest-magnitude entry is positive (eigenvectors are defined up to sign)."""
    order = onp.argsort(w, axis=-1)
    w = onp.take_along_axis(w, order, axis=-1)
    v = onp.take_along_axis(v, order[..., None, :], axis=-1)
    if v.size:
        biggest = onp.take_along_axis(v, onp.abs(v).argmax(axis=-2)[..., None, :], axis=-2)
        v = v * onp.sign(biggest)
    return w, v


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", SHAPES)
def test_eig_matches_numpy(shape, dtype):
    a = real_spectrum(shape, dtype)
    w, v = np.linalg.eig(np.array(a))
    assert w.shape == shape[:-1] and v.shape == shape
    assert w.dtype == onp.dtype(dtype) and v.dtype == onp.dtype(dtype)
    want_w, want_v = onp.linalg.eig(a.astype("float64"))
    assert not onp.iscomplexobj(want_w) or onp.all(want_w.imag == 0)
    got_w, got_v = sorted_pairs(w.asnumpy(), v.asnumpy())
    want_w, want_v = sorted_pairs(want_w.real, want_v.real)
    tol = TOL[dtype] * 10
    assert_almost_equal(got_w, want_w, rtol=tol, atol=tol, names=("pymx", "numpy"))
    assert_almost_equal(got_v, want_v, rtol=tol, atol=tol, names=("pymx", "numpy"))
    # A v = v diag(w), with unit-norm columns.
    a64, v64 = a.astype("float64"), v.asnumpy().astype("float64")
    assert_almost_equal(a64 @ v64, v64 * w.asnumpy()[..., None, :], rtol=tol, atol=tol)
    if v64.size:
        assert_almost_equal(onp.linalg.norm(v64, axis=-2), onp.ones(shape[:-1]), rtol=tol,
                            atol=tol)


def test_eig_keeps_lapacks_order_and_eigvals_equals_it():
    a = real_spectrum((2, 5, 5), seed=3)
    w = np.linalg.eig(np.array(a))[0].asnumpy()
    onp.testing.assert_allclose(w, onp.linalg.eig(a)[0].real, rtol=1e-10)
    onp.testing.assert_array_equal(np.linalg.eigvals(np.array(a)).asnumpy(), w)


def test_eig_of_integers_and_of_triangular_matrices():
    a = onp.array([[2, 1, 0], [0, 3, 4], [0, 0, -1]])
    w, v = np.linalg.eig(a)
    assert w.dtype == onp.float32 and v.dtype == onp.float32  # pymx's default float dtype
    onp.testing.assert_allclose(onp.sort(w.asnumpy()), [-1, 2, 3], rtol=1e-6)
    assert_almost_equal(a @ v.asnumpy(), v.asnumpy() * w.asnumpy(), rtol=1e-5, atol=1e-5)


def test_complex_eigenvalues_raise_naming_the_matrix():
    a = onp.stack([onp.diag([1.0, 2.0]), [[0.0, -2.0], [2.0, 0.0]]])  # matrix 1 rotates
    with pytest.raises(np.linalg.LinAlgError, match=r"eig: matrix 1 of the batch has complex "
                                                    r"eigenvalues \(0 \+- 2i\)"):
        np.linalg.eig(np.array(a))[0].asnumpy()
    with pytest.raises(np.linalg.LinAlgError, match="complex eigenvalues"):
        np.linalg.eigvals(np.array(a, dtype="float32")).asnumpy()
    # The process stays usable.
    onp.testing.assert_allclose(np.linalg.eigvals(np.array(a[0])).asnumpy(), [1, 2])


@pytest.mark.parametrize("bad", [onp.nan, onp.inf])
def test_infs_and_nans_raise(bad):
    a = onp.eye(3)[None].repeat(2, axis=0)
    a[1, 0, 2] = bad
    with pytest.raises(np.linalg.LinAlgError, match="matrix 1 of the batch contains infs or NaNs"):
        np.linalg.eig(np.array(a))[1].asnumpy()


def test_bad_shapes_and_dtypes_raise():
    with pytest.raises(np.linalg.LinAlgError, match=r"eig: the last 2 dimensions of the array "
                                                    r"must be square, got shape \(2, 3\)"):
        np.linalg.eig(np.zeros((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match="eig: 1-dimensional array given"):
        np.linalg.eigvals(np.zeros((3,)))
    with pytest.raises(TypeError, match="eig: expected float32 or float64 input, got float16"):
        np.linalg.eig(np.zeros((2, 2), dtype="float16"))


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_eig_gradient_against_finite_differences(shape):
    a = real_spectrum(shape, seed=5)
    check_numeric_gradient(lambda x: np.linalg.eig(x)[0], [a], eps=1e-6, rtol=1e-5, atol=1e-7)
    check_numeric_gradient(lambda x: np.linalg.eigvals(x), [a], eps=1e-6, rtol=1e-5, atol=1e-7)

    def signed_vectors(x):
        # Fixed signs (no gradient through np.sign), so the differences see a smooth function.
        v = np.linalg.eig(x)[1]
        return v * np.sign(np.sum(v, axis=-2, keepdims=True))

    check_numeric_gradient(signed_vectors, [a], eps=1e-6, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------------------------------------
# cond
# ---------------------------------------------------------------------------------------------

ORDERS = [None, "fro", "nuc", onp.inf, -onp.inf, 1, -1, 2, -2]


@pytest.mark.parametrize("p", ORDERS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cond_matches_numpy(p, dtype):
    a = onp.random.default_rng(7).uniform(-1, 1, (2, 3, 4, 4)).astype(dtype)
    got = np.linalg.cond(np.array(a), p)
    want = onp.linalg.cond(a.astype("float64"), p)
    assert got.shape == want.shape and got.dtype == onp.dtype(dtype)
    assert_almost_equal(got, want, rtol=TOL[dtype] * 10, atol=0, names=("pymx", "numpy"))
    one = np.linalg.cond(np.array(a[0, 0]), p)
    assert one.shape == ()
    assert_almost_equal(one, onp.linalg.cond(a[0, 0].astype("float64"), p),
                        rtol=TOL[dtype] * 10, atol=0)


@pytest.mark.parametrize("p", [None, 2, -2])
def test_cond_of_non_square_matrices_through_singular_values(p):
    a = onp.random.default_rng(8).uniform(-1, 1, (2, 3, 5))
    assert_almost_equal(np.linalg.cond(np.array(a), p), onp.linalg.cond(a, p), rtol=1e-10,
                        atol=0)


@pytest.mark.parametrize("p", ["fro", "nuc", onp.inf, -onp.inf, 1, -1])
def test_cond_of_singular_matrices_is_inf(p):
    a = onp.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 1.0], [1.0, 3.0]], [[0.0, 0.0], [0.0, 0.0]]])
    got = np.linalg.cond(np.array(a), p).asnumpy()
    assert onp.isinf(got[0]) and onp.isinf(got[2])
    assert_almost_equal(got[1], onp.linalg.cond(a[1], p), rtol=1e-10, atol=0)
    if p != "nuc":  # NumPy's nuclear norm of the NaN inverse raises instead
        assert onp.isinf(onp.linalg.cond(a[0], p))


def test_svd_of_nans_raises_and_cond_of_nans_is_nan():
    a = onp.eye(3)[None].repeat(2, axis=0)
    a[1, 2, 0] = onp.nan
    with pytest.raises(np.linalg.LinAlgError, match=r"svd: the matrix contains NaNs \(matrix 1 "
                                                    r"of the batch; gesdd info -4\)"):
        np.linalg.svd(np.array(a))[1].asnumpy()
    for p in ORDERS:
        got = np.linalg.cond(np.array(a), p).asnumpy()
        assert_almost_equal(got[0], onp.linalg.cond(onp.eye(3), p), rtol=1e-12, atol=0)
        assert onp.isnan(got[1]), p


def test_cond_errors():
    with pytest.raises(np.linalg.LinAlgError, match=r"cond: not defined on empty arrays \(shape "
                                                    r"\(2, 0, 0\)\)"):
        np.linalg.cond(np.zeros((2, 0, 0)))
    with pytest.raises(np.linalg.LinAlgError, match="must be square, got shape"):
        np.linalg.cond(np.zeros((2, 3)), 1)
    with pytest.raises(ValueError, match="invalid norm order 3 for matrices"):
        np.linalg.cond(np.eye(3), 3)


@pytest.mark.parametrize("p", [None, "fro", 1])
def test_cond_gradient_against_finite_differences(p):
    a = onp.random.default_rng(9).uniform(-1, 1, (2, 3, 3)) + 2 * onp.eye(3)
    check_numeric_gradient(lambda x: np.linalg.cond(x, p), [a], eps=1e-6, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------------------------------------
# GPU against CPU
# ---------------------------------------------------------------------------------------------

@requires_gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(3, 3), (3, 6, 6), (0, 2, 2)])
def test_gpu_eig_values_and_gradients_equal_cpu(shape, dtype):
    a = real_spectrum(shape, dtype, seed=11)
    results = []
    for device in (cpu(0), gpu(0)):
        x = np.array(a, device=device)
        x.attach_grad()
        with autograd.record():
            w, v = np.linalg.eig(x)
            signs = np.sign(np.sum(v, axis=-2, keepdims=True))
            loss = (w * w).sum() + (v * signs).sum()
        loss.backward()
        results.append(sorted_pairs(w.asnumpy(), v.asnumpy()) + (x.grad.asnumpy(),))
    (cpu_w, cpu_v, cpu_grad), (gpu_w, gpu_v, gpu_grad) = results
    tol = TOL[dtype] * 10
    assert_almost_equal(gpu_w, cpu_w, rtol=tol, atol=tol, names=("gpu", "cpu"))
    assert_almost_equal(gpu_v, cpu_v, rtol=tol, atol=tol, names=("gpu", "cpu"))
    assert_almost_equal(gpu_grad, cpu_grad, rtol=tol * 10, atol=tol * 10, names=("gpu", "cpu"))


@requires_gpu
def test_gpu_eig_errors_equal_cpu():
    rotation = onp.stack([onp.eye(2), [[0.0, -1.0], [1.0, 0.0]]])
    for device in (cpu(0), gpu(0)):
        with pytest.raises(np.linalg.LinAlgError, match="matrix 1 of the batch has complex"):
            np.linalg.eig(np.array(rotation, device=device))[0].asnumpy()
        nan = onp.eye(2)
        nan[0, 1] = onp.nan
        with pytest.raises(np.linalg.LinAlgError, match="infs or NaNs"):
            np.linalg.eigvals(np.array(nan, device=device)).asnumpy()
    assert_almost_equal(np.linalg.cond(np.array(rotation, device=gpu(0)), 1),
                        onp.linalg.cond(rotation, 1), rtol=1e-10, atol=0)
