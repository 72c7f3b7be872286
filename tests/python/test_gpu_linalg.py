"""np.linalg on the GPU (cuSOLVER) against the CPU (LAPACK): values, gradients and LinAlgError
for inv, det, slogdet, solve, cholesky, eigh, svd and qr (and the gradient helpers they use), and
eig's refusal of infs and NaNs (its values: test_linalg_eig.py).
Skipped when no GPU is visible."""
import numpy as onp
import pytest
from conftest import requires_gpu

from pymx import autograd, np
from pymx.device import cpu, gpu
from pymx.test_utils import assert_almost_equal

pytestmark = requires_gpu

TOL = {"float32": 1e-4, "float64": 1e-10}


def both_devices(fn, *arrays, grad=False):
    """fn's results (and with `grad`, the gradients of sum(results * weights)) on cpu(0) and
    gpu(0), as NumPy arrays."""
    results = []
    for device in (cpu(0), gpu(0)):
        inputs = [np.array(a, device=device) for a in arrays]
        if grad:
            for x in inputs:
                x.attach_grad()
        with autograd.record():
            out = fn(*inputs)
            outs = list(out) if isinstance(out, tuple) else [out]
            if grad:
                total = sum(((o * o).sum() for o in outs), np.zeros((), dtype=outs[0].dtype,
                                                                     device=device))
        if grad:
            total.backward()
        results.append([o.asnumpy() for o in outs] + ([x.grad.asnumpy() for x in inputs] if grad else []))
    return results


def matrices(shape, dtype, kind="general"):
    x = onp.random.uniform(-1, 1, shape)
    n = shape[-1]
    if kind == "spd":
        x = x @ onp.swapaxes(x, -1, -2) + n * onp.eye(n)
    elif kind == "symmetric":
        x = x + onp.swapaxes(x, -1, -2) + onp.diag(onp.arange(n) * 2.0)
    else:
        x = x + 2 * n ** 0.5 * onp.eye(n)
    return x.astype(dtype)


def assert_devices_agree(results, dtype, scale=1.0):
    """Elementwise, with an absolute tolerance relative to the largest entry: the two devices'
    rounding errors are of the size of the whole matrix (det's gradient is det^2 inv(A)^T, ~1e6
    here), not of each entry."""
    for got_cpu, got_gpu in zip(*results):
        tol = TOL[dtype] * scale
        largest = float(onp.abs(got_cpu).max(initial=1.0))
        assert_almost_equal(got_gpu, got_cpu, rtol=tol, atol=tol * largest, names=("gpu", "cpu"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (0, 3, 3), (2, 0, 0)])
def test_lu_ops_match_the_cpu(shape, dtype):
    a = matrices(shape, dtype)
    b = onp.random.uniform(-1, 1, shape[:-1] + (2,)).astype(dtype)
    assert_devices_agree(both_devices(np.linalg.inv, a, grad=True), dtype, scale=10)
    assert_devices_agree(both_devices(np.linalg.det, a, grad=True), dtype, scale=10)
    assert_devices_agree(both_devices(np.linalg.slogdet, a, grad=True), dtype, scale=10)
    assert_devices_agree(both_devices(np.linalg.solve, a, b, grad=True), dtype, scale=10)


def junk_in_unread_triangle(a, lower):
    """a with the triangle that cholesky and eigh do not read (above the diagonal for `lower`)
    overwritten: a kernel reading the wrong triangle (row-major against column-major) then
    disagrees with the CPU, where on a symmetric matrix it would not."""
    n = a.shape[-1]
    unread = onp.triu(onp.ones((n, n), bool), 1) if lower else onp.tril(onp.ones((n, n), bool), -1)
    return onp.where(unread, onp.random.uniform(-5, 5, a.shape), a).astype(a.dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (0, 3, 3)])
def test_cholesky_and_eigh_match_the_cpu(shape, dtype):
    spd = junk_in_unread_triangle(matrices(shape, dtype, "spd"), lower=True)
    assert_devices_agree(both_devices(np.linalg.cholesky, spd, grad=True), dtype, scale=10)
    for uplo in ("L", "U"):
        a = junk_in_unread_triangle(matrices(shape, dtype, "symmetric"), lower=uplo == "L")

        def eigen(x):
            w, v = np.linalg.eigh(x, UPLO=uplo)
            return w, v * v  # v * v: independent of the eigenvectors' signs

        assert_devices_agree(both_devices(eigen, a, grad=True), dtype, scale=100)


def test_singular_and_indefinite_matrices_raise_on_the_gpu():
    singular = onp.stack([onp.eye(3), onp.ones((3, 3))])
    with pytest.raises(np.linalg.LinAlgError, match=r"singular matrix \(matrix 1 of the batch; getrf"):
        np.linalg.inv(np.array(singular, device=gpu(0))).asnumpy()
    with pytest.raises(np.linalg.LinAlgError, match=r"singular matrix \(matrix 1 of the batch; getrf"):
        np.linalg.solve(np.array(singular, device=gpu(0)), np.ones((2, 3, 1), device=gpu(0))).asnumpy()
    indefinite = onp.stack([onp.eye(3), onp.diag([1.0, -1.0, 1.0])])
    with pytest.raises(np.linalg.LinAlgError, match=r"not positive definite .* \(matrix 1 of the "
                                                    r"batch; potrf info 2\)"):
        np.linalg.cholesky(np.array(indefinite, device=gpu(0))).asnumpy()
    assert np.linalg.det(np.array(singular, device=gpu(0))).asnumpy()[1] == 0
    # The device stays usable.
    assert_almost_equal(np.linalg.inv(np.array(onp.eye(3) * 2, device=gpu(0))), onp.eye(3) / 2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eig_refuses_infs_and_nans_naming_the_first_matrix_as_the_cpu(dtype):
    a = onp.stack([onp.diag([3.0, 1.0, 2.0])] * 4).astype(dtype)
    a[2, 0, 1] = onp.inf
    a[3, 1, 1] = onp.nan
    for device in (cpu(0), gpu(0)):
        with pytest.raises(np.linalg.LinAlgError,
                           match="eig: matrix 2 of the batch contains infs or NaNs"):
            np.linalg.eigvals(np.array(a, device=device)).asnumpy()
    # The device stays usable.
    w = np.linalg.eigvals(np.array(a[:2], device=gpu(0))).asnumpy()
    assert_almost_equal(onp.sort(w, axis=-1), onp.array([[1.0, 2.0, 3.0]] * 2), rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 3, 5), (0, 3, 2), (2, 0, 3)])
def test_svd_and_qr_match_the_cpu(shape, dtype):
    a = onp.random.uniform(-1, 1, shape).astype(dtype)

    def singular(x):
        u, s, vh = np.linalg.svd(x)  # vectors up to sign: compare sign-free products
        return s, u * u * np.expand_dims(s, -2), vh * vh * np.expand_dims(s, -1)

    def orthogonal_triangular(x):
        q, r = np.linalg.qr(x)  # unique up to the signs of R's rows: compare sign-free products
        return q * q, r * r, np.matmul(q, r)

    assert_devices_agree(both_devices(singular, a, grad=True), dtype, scale=100)
    assert_devices_agree(both_devices(orthogonal_triangular, a, grad=True), dtype, scale=100)
