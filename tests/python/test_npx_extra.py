"""npx operators composed from pymx operators: batch_dot, gather_nd/scatter_nd, index_add/
index_update, reshape codes, slice/slice_like/broadcast_like/arange_like, sequence_last/
sequence_reverse, softmax with length, masked softmax, smooth_l1, stop_gradient,
l2_normalization and cast, against float64 NumPy references."""
import numpy as onp
import pytest

import pymx
from pymx import autograd, gluon, np, npx
from pymx.test_utils import assert_almost_equal, check_numeric_gradient
from conftest import requires_gpu

TOL = {"rtol": 1e-12, "atol": 1e-12}


def arr(values, device, dtype="float64"):
    return np.array(onp.asarray(values, dtype=dtype), device=device)


def rand(*shape):
    return onp.random.uniform(-1, 1, size=shape)


# ------------------------------------------------------------------------------------------
# batch_dot
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("transpose_a, transpose_b", [(False, False), (True, False),
                                                      (False, True), (True, True)])
def test_batch_dot(device, transpose_a, transpose_b):
    a = rand(2, 4, 3) if transpose_a else rand(2, 3, 4)
    b = rand(2, 5, 4) if transpose_b else rand(2, 4, 5)
    ref = onp.matmul(a.swapaxes(1, 2) if transpose_a else a, b.swapaxes(1, 2) if transpose_b else b)
    out = npx.batch_dot(arr(a, device), arr(b, device), transpose_a, transpose_b)
    assert_almost_equal(out, ref, **TOL)
    check_numeric_gradient(lambda x, y: npx.batch_dot(x, y, transpose_a, transpose_b), [a, b],
                           device=device)


def test_batch_dot_errors():
    with pytest.raises(ValueError, match=r"at least 3, got shapes \(3, 4\) and \(4, 5\)"):
        npx.batch_dot(np.ones((3, 4)), np.ones((4, 5)))
    with pytest.raises(ValueError, match="batch axes"):
        npx.batch_dot(np.ones((2, 3, 4)), np.ones((3, 4, 5)))
    with pytest.raises(ValueError, match="inner dimensions differ"):
        npx.batch_dot(np.ones((2, 3, 4)), np.ones((2, 3, 5)))
    with pytest.raises(ValueError, match="forward_stype"):
        npx.batch_dot(np.ones((2, 3, 4)), np.ones((2, 4, 5)), forward_stype="csr")


# ------------------------------------------------------------------------------------------
# gather_nd / scatter_nd / index_add / index_update
# ------------------------------------------------------------------------------------------
def test_gather_nd(device):
    data = rand(3, 4, 2)
    indices = onp.array([[0, 2, -1, 1], [3, 0, 1, -4]])
    ref = data[tuple(onp.where(indices < 0, indices + onp.array([[3], [4]]), indices))]
    out = npx.gather_nd(arr(data, device), arr(indices, device, "int32"))
    assert out.shape == (4, 2)
    assert_almost_equal(out, ref, **TOL)
    # float indices (pymx's default dtype) as in MXNet; repeated positions add up in backward
    repeated = onp.array([[0, 0, 2]])
    check_numeric_gradient(lambda x: npx.gather_nd(x, arr(repeated, device, "float32")),
                           [data], device=device)


def test_scatter_nd(device):
    data = rand(3, 2)
    indices = onp.array([[0, 2, 1], [1, 0, 3]])
    ref = onp.zeros((3, 4, 2))
    ref[indices[0], indices[1]] = data
    out = npx.scatter_nd(arr(data, device), arr(indices, device, "int64"), (3, 4, 2))
    assert_almost_equal(out, ref, **TOL)
    check_numeric_gradient(lambda x: npx.scatter_nd(x, arr(indices, device, "int64"), (3, 4, 2)),
                           [data], device=device)


def test_index_add_and_update(device):
    a = rand(3, 4)
    ind = onp.array([[0, 0, 2], [1, 1, 3]])
    val = rand(3)
    ref_add = a.copy()
    onp.add.at(ref_add, (ind[0], ind[1]), val)
    assert_almost_equal(npx.index_add(arr(a, device), arr(ind, device, "int32"), arr(val, device)),
                        ref_add, **TOL)
    unique = onp.array([[0, 2], [1, 3]])
    ref_update = a.copy()
    ref_update[unique[0], unique[1]] = val[:2]
    out = npx.index_update(arr(a, device), arr(unique, device, "int32"), arr(val[:2], device))
    assert_almost_equal(out, ref_update, **TOL)
    # one index axis given as a 1-D ind; val broadcasts over the selected rows
    rows = npx.index_add(arr(a, device), arr([2, 0], device, "int64"), arr(val[:1], device))
    assert_almost_equal(rows, a + onp.array([[val[0]], [0], [val[0]]]), **TOL)
    check_numeric_gradient(lambda x, v: npx.index_add(x, arr(ind, device, "int32"), v), [a, val],
                           device=device)
    check_numeric_gradient(lambda x, v: npx.index_update(x, arr(unique, device, "int32"), v),
                           [a, val[:2]], device=device)


def test_gather_scatter_errors():
    data = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"index 3 axes, but the array of shape \(2, 3\) has 2"):
        npx.gather_nd(data, np.zeros((3, 1), dtype="int32"))
    with pytest.raises(TypeError, match="integer or float array, got dtype bool"):
        npx.gather_nd(data, np.zeros((1, 1), dtype="bool"))
    with pytest.raises(ValueError, match="at least one dimension"):
        npx.gather_nd(data, np.array(0, dtype="int32"))
    with pytest.raises(IndexError):
        npx.gather_nd(data, np.array([[5], [0]], dtype="int32")).asnumpy()
    # Outside its own axis yet inside the flattened array ((0, 3) would be element 3 = (1, 0)),
    # and past the start of an axis after the negative wrap: refused, never another element.
    for outside in ([[0], [3]], [[0], [-4]], [[-3], [0]]):
        with pytest.raises(IndexError, match="out of bounds"):
            npx.gather_nd(data, np.array(outside, dtype="int32")).asnumpy()
        with pytest.raises(IndexError, match="out of bounds"):
            npx.scatter_nd(np.ones(1), np.array(outside, dtype="int32"), (2, 3)).asnumpy()
        with pytest.raises(IndexError, match="out of bounds"):
            npx.index_add(data, np.array(outside, dtype="int32"), np.ones(1)).asnumpy()
    assert npx.gather_nd(data * 2, np.array([[-1], [-3]], dtype="int32")).asnumpy().tolist() == [2]
    with pytest.raises(ValueError, match=r"data has shape \(3,\), but .* need \(2,\)"):
        npx.scatter_nd(np.ones(3), np.zeros((2, 2), dtype="int32"), (4, 4))
    with pytest.raises(ValueError, match=r"val of shape \(4,\) does not broadcast to \(2,\)"):
        npx.index_add(data, np.zeros((2, 2), dtype="int32"), np.ones(4))
    with pytest.raises(ValueError, match=r"ind must have shape"):
        npx.index_update(data, np.zeros((2, 2, 2), dtype="int32"), np.ones(2))


# ------------------------------------------------------------------------------------------
# reshape, slice, slice_like, broadcast_like, arange_like
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, codes, reverse, expected", [
    ((2, 3, 8), (-2, -2, 2, -1), False, (2, 3, 2, 4)),
    ((8, 3, 3, 3, 4, 4), (-6, 2, -1, -4), False, (2, 4, 3, 3, 3, 4, 4)),
    ((8, 3, 3, 3, 4, 4), (-5, -4), False, (24, 3, 3, 4, 4)),
    ((8, 1, 1, 1, 3), (-2, -3, -3, -3, -2), False, (8, 3)),
    ((8, 3, 3, 3, 3, 8), (-4, -5), True, (8, 3, 3, 3, 24)),
    ((8, 3, 2, 4, 8), (-4, -1, 2, -6), True, (8, 3, 2, 4, 4, 2)),
    ((2, 3, 4), 24, False, (24,)),
    ((2, 3, 4), (-1, 4), False, (6, 4)),
])
def test_reshape_codes(device, shape, codes, reverse, expected):
    data = rand(*shape)
    out = npx.reshape(arr(data, device), codes, reverse=reverse)
    assert out.shape == expected
    assert_almost_equal(out, data.reshape(expected), rtol=0, atol=0)


def test_reshape_gradient_and_errors(device):
    check_numeric_gradient(lambda x: npx.reshape(x, (-5, -6, 2, -1)), [rand(2, 2, 4)],
                           device=device)
    data = np.ones((2, 3, 4))
    with pytest.raises(ValueError, match="more than one -1"):
        npx.reshape(data, (-1, -1))
    with pytest.raises(ValueError, match="skips only an input dimension of size 1, got 2"):
        npx.reshape(data, (-3, -4))
    with pytest.raises(ValueError, match=r"cannot split input dimension 2 into \(3, -1\)"):
        npx.reshape(data, (-6, 3, -1, -4))
    with pytest.raises(ValueError, match="unknown code -7"):
        npx.reshape(data, (-7,))
    with pytest.raises(ValueError, match=r"into \(5, -4\)"):
        npx.reshape(data, (5, -4))
    with pytest.raises(ValueError, match="needs 2 more input dimension"):
        npx.reshape(data, (-2, -2, -5))
    with pytest.raises(ValueError, match="order='C'"):
        npx.reshape(data, (24,), order="F")


def test_slice(device):
    data = rand(4, 5, 3)
    cases = [((1, None), (3, None), None), ((None, 4), (None, 0), (None, -2)),
             ((0, 1, 2), (4, 5, 3), (2, 2, 1)), ((-1,), (None,), (-1,))]
    for begin, end, step in cases:
        index = tuple(slice(b, e, s) for b, e, s in zip(begin, end, step or (None,) * len(begin)))
        out = npx.slice(arr(data, device), begin, end, step)
        assert_almost_equal(out, data[index], rtol=0, atol=0)
    check_numeric_gradient(lambda x: npx.slice(x, (1, None), (None, None), (2, -1)),
                           [rand(4, 3)], device=device)
    with pytest.raises(ValueError, match="must have the same length"):
        npx.slice(np.ones((2, 2)), (0, 0), (1,))
    with pytest.raises(ValueError, match="step must not be 0"):
        npx.slice(np.ones((2, 2)), (0,), (1,), (0,))
    with pytest.raises(ValueError, match=r"3 entries for an array of shape \(2, 2\)"):
        npx.slice(np.ones((2, 2)), (0, 0, 0), (1, 1, 1))


def test_slice_like_and_broadcast_like(device):
    data, like = rand(4, 5, 3), onp.zeros((2, 3, 3))
    assert_almost_equal(npx.slice_like(arr(data, device), arr(like, device)), data[:2, :3],
                        rtol=0, atol=0)
    assert_almost_equal(npx.slice_like(arr(data, device), arr(like, device), axes=(0, -1)),
                        data[:2, :, :3], rtol=0, atol=0)
    check_numeric_gradient(lambda x: npx.slice_like(x, arr(like, device), axes=(1,)),
                           [data], device=device)
    with pytest.raises(ValueError, match=r"larger than data \(4, 5, 3\) on axis 2"):
        npx.slice_like(arr(data, device), np.zeros((1, 1, 4)))
    with pytest.raises(ValueError, match="same number of dimensions"):
        npx.slice_like(arr(data, device), np.zeros((1, 1)))

    lhs = rand(1, 3, 1)
    assert_almost_equal(npx.broadcast_like(arr(lhs, device), np.zeros((2, 3, 4))),
                        onp.broadcast_to(lhs, (2, 3, 4)), rtol=0, atol=0)
    out = npx.broadcast_like(arr(lhs, device), np.zeros((5, 6)), lhs_axes=(0, 2), rhs_axes=(1, 0))
    assert_almost_equal(out, onp.broadcast_to(lhs, (6, 3, 5)), rtol=0, atol=0)
    check_numeric_gradient(lambda x: npx.broadcast_like(x, np.zeros((2, 3, 4), device=device)),
                           [lhs], device=device)
    with pytest.raises(ValueError,
                       match="axis 1 of lhs .* has size 3, which does not broadcast to 5"):
        npx.broadcast_like(arr(lhs, device), np.zeros((5,)), lhs_axes=(1,), rhs_axes=(0,))
    with pytest.raises(ValueError, match="give both lhs_axes and rhs_axes"):
        npx.broadcast_like(arr(lhs, device), np.zeros((5,)), lhs_axes=(1,))


def test_arange_like(device):
    data = np.zeros((2, 3), device=device)
    out = npx.arange_like(data, start=1.5, step=0.5, repeat=2)
    assert out.shape == (2, 3) and out.device == device and out.dtype == onp.float32
    assert_almost_equal(out, 1.5 + 0.5 * (onp.arange(6) // 2).reshape(2, 3), rtol=0, atol=0)
    assert_almost_equal(npx.arange_like(data, axis=-1), onp.arange(3.0), rtol=0, atol=0)
    with pytest.raises(ValueError, match="repeat must be a positive int, got 0"):
        npx.arange_like(data, repeat=0)
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        npx.arange_like(data, axis=2)


# ------------------------------------------------------------------------------------------
# sequences
# ------------------------------------------------------------------------------------------
def test_sequence_last_and_reverse(device):
    data = rand(4, 3, 2)  # (time, batch, feature)
    lengths = onp.array([2, 4, 1])
    last = onp.stack([data[n - 1, b] for b, n in enumerate(lengths)])
    reverse = data.copy()
    for b, n in enumerate(lengths):
        reverse[:n, b] = data[:n, b][::-1]
    seq = arr(lengths, device, "float32")
    assert_almost_equal(npx.sequence_last(arr(data, device), seq, True), last, **TOL)
    assert_almost_equal(npx.sequence_last(arr(data, device)), data[-1], **TOL)
    assert_almost_equal(npx.sequence_last(arr(data.swapaxes(0, 1), device), seq, True, axis=1),
                        last, **TOL)
    assert_almost_equal(npx.sequence_reverse(arr(data, device), seq, True), reverse, **TOL)
    assert_almost_equal(npx.sequence_reverse(arr(data, device)), data[::-1], **TOL)
    assert_almost_equal(npx.sequence_reverse(arr(data.swapaxes(0, 1), device), seq, True, axis=1),
                        reverse.swapaxes(0, 1), **TOL)
    check_numeric_gradient(lambda x: npx.sequence_last(x, seq, True), [data], device=device)
    check_numeric_gradient(lambda x: npx.sequence_reverse(x, seq, True), [data], device=device)


def test_sequence_errors():
    data = np.ones((4, 3))
    with pytest.raises(ValueError, match="needs sequence_length"):
        npx.sequence_last(data, use_sequence_length=True)
    with pytest.raises(ValueError, match=r"shape \(3,\), one length per sequence, got \(4,\)"):
        npx.sequence_reverse(data, np.ones(4), True)
    with pytest.raises(ValueError, match="axis must be 0 or 1"):
        npx.sequence_last(data, axis=2)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        npx.sequence_reverse(np.ones(3))


# ------------------------------------------------------------------------------------------
# softmax family
# ------------------------------------------------------------------------------------------
def ref_softmax(x, valid, axis, t=1.0):
    """softmax and log_softmax over the valid positions (0 and -inf elsewhere)."""
    z = onp.where(valid, x / t, -onp.inf)
    z = z - z.max(axis=axis, keepdims=True, initial=-1e300, where=valid)
    e = onp.where(valid, onp.exp(z), 0.0)
    total = e.sum(axis=axis, keepdims=True)
    with onp.errstate(divide="ignore", invalid="ignore"):  # rows without a valid position
        log_soft = onp.where(valid, z - onp.log(total), -onp.inf)
    return e / onp.where(total == 0, 1, total), log_soft


def test_softmax_with_length(device):
    x = rand(3, 2, 4)
    length = onp.array([[1, 4], [0, 2], [3, 3]])
    valid = onp.arange(4) < length[..., None]
    soft, log_soft = ref_softmax(x, valid, -1, 2.0)
    lx, ll = arr(x, device), arr(length, device, "int32")
    assert_almost_equal(npx.softmax(lx, ll, temperature=2.0, use_length=True), soft, **TOL)
    assert_almost_equal(npx.log_softmax(lx, ll, temperature=2.0, use_length=True),
                        onp.where(valid, log_soft, 0.0), **TOL)
    # along axis 1, length over the other axes
    length1 = onp.array([[1, 2, 0, 2], [2, 2, 1, 1], [1, 1, 1, 2]])
    valid1 = onp.arange(2)[:, None] < length1[:, None, :]
    out = npx.softmax(lx, arr(length1, device, "float32"), axis=1, use_length=True)
    assert_almost_equal(out, ref_softmax(x, valid1, 1)[0], **TOL)
    assert_almost_equal(npx.softmax(lx, axis=0), ref_softmax(x, onp.ones_like(x, bool), 0)[0],
                        **TOL)
    check_numeric_gradient(lambda v: npx.softmax(v, ll, use_length=True), [x], device=device)
    check_numeric_gradient(lambda v: npx.log_softmax(v, ll, use_length=True), [x],
                           device=device)
    with pytest.raises(ValueError, match="use_length=True needs length"):
        npx.softmax(lx, use_length=True)
    with pytest.raises(ValueError, match=r"data's shape without axis 2, \(3, 2\), got \(3,\)"):
        npx.softmax(lx, np.ones(3), use_length=True)


def test_masked_softmax(device):
    x = rand(2, 3, 4)
    mask = onp.random.uniform(size=(2, 1, 4)) > 0.4
    mask[0, 0, :] = False  # a row without a valid position
    full = onp.broadcast_to(mask, x.shape)
    soft, log_soft = ref_softmax(x, full, -1, 0.5)
    lx, lm = arr(x, device), arr(mask, device, "bool")
    assert_almost_equal(npx.masked_softmax(lx, lm, temperature=0.5), soft, **TOL)
    assert_almost_equal(npx.masked_log_softmax(lx, lm, temperature=0.5), log_soft, **TOL)
    check_numeric_gradient(lambda v: npx.masked_softmax(v, lm), [x], device=device)
    finite = onp.ones((2, 1, 4), bool)
    finite[:, :, 1] = False
    check_numeric_gradient(
        lambda v: npx.masked_log_softmax(v, arr(finite, device, "bool"))[..., [0, 2, 3]], [x],
        device=device)
    with pytest.raises(ValueError, match=r"mask of shape \(3,\) does not broadcast"):
        npx.masked_softmax(lx, np.ones(3, dtype="bool"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_masked_and_length_softmax_in_half_precision(dtype, device):
    # The left-out positions enter as the dtype's lowest finite value, also for bfloat16.
    x = rand(2, 4)
    mask = onp.array([[True, False, True, True], [False, False, False, False]])
    length = onp.array([2, 4])
    data = arr(x, device).astype(dtype)
    values = data.astype("float64").asnumpy()  # what the half-precision array holds
    got = npx.masked_softmax(data, arr(mask, device, "bool"))
    assert got.dtype == data.dtype
    assert_almost_equal(got, ref_softmax(values, mask, -1)[0])
    got = npx.softmax(data, arr(length, device, "int32"), use_length=True, temperature=0.5)
    assert got.dtype == data.dtype
    valid = onp.arange(4) < length[:, None]
    assert_almost_equal(got, ref_softmax(values, valid, -1, 0.5)[0])


# ------------------------------------------------------------------------------------------
# smooth_l1, stop_gradient, l2_normalization, cast
# ------------------------------------------------------------------------------------------
def test_smooth_l1(device):
    x = onp.array([-2.0, -0.3, -0.1, 0.05, 0.2, 1.5])
    for sigma in (1.0, 2.0):
        ref = onp.where(onp.abs(x) < 1 / sigma**2, 0.5 * (sigma * x) ** 2,
                        onp.abs(x) - 0.5 / sigma**2)
        assert_almost_equal(npx.smooth_l1(arr(x, device), sigma), ref, **TOL)
        check_numeric_gradient(lambda v: npx.smooth_l1(v, sigma), [x], device=device)
    with pytest.raises(ValueError, match="scalar must be > 0, got -1"):
        npx.smooth_l1(arr(x, device), -1)


def test_stop_gradient(device):
    x = arr([1.0, -2.0, 3.0], device)
    x.attach_grad()
    with autograd.record():
        y = (npx.stop_gradient(x * x) + 2 * x).sum()
        blocked = npx.BlockGrad(x).sum()
    y.backward()
    assert_almost_equal(x.grad, [2.0, 2.0, 2.0], rtol=0, atol=0)
    blocked.backward()
    assert_almost_equal(x.grad, [0.0, 0.0, 0.0], rtol=0, atol=0)
    assert_almost_equal(npx.stop_gradient(x), x, rtol=0, atol=0)


def test_stop_gradient_hybridized_equals_imperative():
    class Net(gluon.HybridBlock):
        def forward(self, x):
            return (npx.stop_gradient(x * x) * x).sum()

    x = arr([1.0, 2.0], pymx.cpu())
    grads = []
    for hybridize in (False, True):
        net = Net()
        if hybridize:
            net.hybridize()
        for _ in range(2):  # the second call of a hybridized block replays its graph
            x.attach_grad()
            with autograd.record():
                out = net(x)
            out.backward()
        grads.append(x.grad.asnumpy())
    onp.testing.assert_array_equal(grads[0], [1.0, 4.0])
    onp.testing.assert_array_equal(grads[1], grads[0])


@pytest.mark.parametrize("mode, axes", [("instance", (1, 2, 3)), ("channel", (1,)),
                                        ("spatial", (2, 3))])
def test_l2_normalization(device, mode, axes):
    x = rand(2, 3, 2, 2)
    ref = x / onp.sqrt((x * x).sum(axis=axes, keepdims=True) + 1e-10)
    assert_almost_equal(npx.l2_normalization(arr(x, device), mode=mode), ref, **TOL)
    check_numeric_gradient(lambda v: npx.l2_normalization(v, mode=mode), [x], device=device)


def test_l2_normalization_errors():
    with pytest.raises(ValueError, match="mode must be 'instance', 'channel' or 'spatial'"):
        npx.l2_normalization(np.ones((2, 3)), mode="batch")
    with pytest.raises(ValueError, match=r"at least 3 dimensions, got shape \(2, 3\)"):
        npx.l2_normalization(np.ones((2, 3)), mode="spatial")


def test_cast(device):
    x = arr([1.7, -2.2], device)
    out = npx.cast(x, "int32")
    assert out.dtype == onp.int32 and out.device == device
    onp.testing.assert_array_equal(out.asnumpy(), [1, -2])


# ------------------------------------------------------------------------------------------
# hybridize == imperative, and GPU == CPU
# ------------------------------------------------------------------------------------------
def _composite(x, lengths, indices):
    y = npx.sequence_reverse(x, lengths, True)
    y = npx.reshape(y, (-2, -5))
    y = npx.gather_nd(y, indices)
    z = npx.batch_dot(npx.reshape(y, (-1, 2, 2)), npx.reshape(y, (-1, 2, 2)), transpose_b=True)
    return npx.masked_softmax(z, z > 0) + npx.smooth_l1(npx.l2_normalization(z))


def test_hybridized_equals_imperative():
    class Net(gluon.HybridBlock):
        def forward(self, x, lengths, indices):
            return _composite(x, lengths, indices)

    x = rand(3, 2, 2)
    lengths = arr([3, 2], pymx.cpu(), "float32")
    indices = arr([[0, 2, 1, 0]], pymx.cpu(), "int32")
    results = []
    for hybridize in (False, True):
        net = Net()
        if hybridize:
            net.hybridize()
        for _ in range(2):
            data = arr(x, pymx.cpu())
            data.attach_grad()
            with autograd.record():
                out = net(data, lengths, indices)
            out.backward()
        results.append((out.asnumpy(), data.grad.asnumpy()))
    assert_almost_equal(results[1][0], results[0][0], **TOL)
    assert_almost_equal(results[1][1], results[0][1], **TOL)


@requires_gpu
def test_gpu_matches_cpu():
    x = rand(3, 2, 2)
    results = []
    for device in (pymx.cpu(), pymx.gpu(0)):
        data = arr(x, device)
        data.attach_grad()
        with autograd.record():
            out = _composite(data, arr([3, 2], device, "float32"),
                             arr([[0, 2, 1, 0]], device, "int32"))
        out.backward()
        results.append((out.asnumpy(), data.grad.asnumpy()))
    assert_almost_equal(results[1][0], results[0][0], rtol=1e-10, atol=1e-12)
    assert_almost_equal(results[1][1], results[0][1], rtol=1e-10, atol=1e-12)
