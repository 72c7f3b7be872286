"""The ndarray class: properties, host round trips, copies between devices, printing, Python
protocols, operators (against NumPy), autograd methods, and the errors of each."""
import operator
import os
import pickle
import weakref

import numpy as onp
import pytest

import pymx
from pymx import autograd, np, npx
from pymx._c import core
from pymx._op import invoke
from pymx.device import cpu, gpu
from pymx.ndarray import ndarray
from pymx.test_utils import assert_almost_equal, same

DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4), (3, 0, 2)])
def test_host_round_trip_is_exact(device, dtype, shape):
    values = (onp.random.uniform(-50, 50, size=shape)).astype(dtype)
    x = np.array(values, dtype=dtype, device=device)
    assert isinstance(x, ndarray) and x.shape == shape and x.dtype == onp.dtype(dtype)
    assert x.device == device and x.ndim == len(shape) and x.size == values.size
    assert x.nbytes == values.nbytes
    out = x.asnumpy()
    assert out.dtype == values.dtype and out.tobytes() == values.tobytes()


def test_asnumpy_is_a_copy(device):
    x = np.ones((3,), device=device)
    values = x.asnumpy()
    values[:] = 7
    assert x.asnumpy().tolist() == [1.0, 1.0, 1.0]
    assert onp.asarray(x).tolist() == [1.0, 1.0, 1.0]
    assert onp.asarray(x, dtype="int32").dtype == onp.int32


def test_copyto_device(device):
    x = np.array([1.0, 2.0, 3.0], device=device)
    for target in (cpu(1), device):
        y = x.copyto(target)
        assert y is not x and y.device == target and y.asnumpy().tolist() == [1.0, 2.0, 3.0]
    z = x.copyto(cpu(1))
    z[0] = 9.0
    assert x.asnumpy()[0] == 1.0  # a copy, not a view


def test_copyto_array_returns_target_and_casts(device):
    x = np.array([1.5, 2.5], device=device)
    target = np.zeros((2,), dtype="float64", device=cpu(1))
    assert x.copyto(target) is target
    assert target.dtype == onp.float64 and target.asnumpy().tolist() == [1.5, 2.5]


def test_copyto_errors():
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        x.copyto(np.zeros((3, 2)))
    with pytest.raises(TypeError, match="copyto does not support type str"):
        x.copyto("gpu(0)")
    with pytest.raises(TypeError, match="copyto does not support type ndarray"):
        x.copyto(onp.zeros((2, 3)))
    with pytest.warns(RuntimeWarning, match="copy an array to itself"):
        assert x.copyto(x) is False
    assert x.asnumpy().sum() == 6.0  # still usable


def test_to_device_and_deprecated_aliases():
    x = np.ones((2,))
    assert x.to_device(cpu(0)) is x
    y = x.to_device(cpu(1))
    assert y.device == cpu(1) and same(x, y)
    with pytest.warns(DeprecationWarning):
        assert x.as_in_context(cpu(1)).device == cpu(1)
    with pytest.warns(DeprecationWarning):
        assert x.ctx == cpu(0)
    with pytest.raises(TypeError, match="Device"):
        x.to_device("cpu(1)")


def test_views_share_memory():
    x = np.array(onp.arange(6, dtype="float32"))
    matrix = x._reshape_view((2, 3))
    row = matrix._at_view(1)
    rows = matrix._slice_view(0, 1)
    assert row.asnumpy().tolist() == [3.0, 4.0, 5.0] and rows.shape == (1, 3)
    assert matrix._same_memory(x._reshape_view((2, 3))) and not rows._same_memory(matrix)
    with pytest.raises(ValueError, match="6"):
        x._reshape_view((4, 2))


def test_scalar_protocols():
    x = np.array([2.5])
    assert x.item() == 2.5 and float(x) == 2.5 and int(x) == 2 and bool(x)
    assert not bool(np.zeros((1, 1)))
    assert [1, 2, 3, 4][np.array(2, dtype="int64")] == 3
    assert f"{np.array(1.0 / 3):.3f}" == "0.333"
    with pytest.raises(ValueError, match=r"exactly one element.*\(2,\)"):
        np.ones((2,)).item()
    with pytest.raises(ValueError, match="2 elements is ambiguous"):
        bool(np.ones((2,)))
    with pytest.raises(TypeError, match="integer"):
        [1, 2][np.array(1.0)]


def test_len_and_iteration():
    x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert len(x) == 3
    assert [row.asnumpy().tolist() for row in x] == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    with pytest.raises(TypeError, match="0-d"):
        len(np.array(1.0))


def test_repr_and_str_follow_mxnet():
    assert repr(np.array([1.0, 2.0])) == "array([1., 2.])"
    assert repr(np.array([1.0, 2.0], dtype="float64")) == "array([1., 2.], dtype=float64)"
    assert repr(np.array([1, 2], dtype="int64")) == "array([1, 2], dtype=int64)"
    assert repr(np.array([True, False])) == "array([ True, False])"
    assert repr(np.ones((2, 2))) == "array([[1., 1.],\n       [1., 1.]])"
    assert repr(np.ones((2,), device=cpu(1))) == "array([1., 1.])"
    assert str(np.array([1.0, 2.0])) == "[1. 2.]"


@pytest.mark.skipif(pymx.num_gpus() == 0, reason="no GPU visible")
def test_repr_and_str_on_gpu():
    x = np.array([1.0, 2.0], device=gpu(0))
    assert repr(x) == "array([1., 2.], device=gpu(0))"
    assert str(x) == "[1. 2.] @gpu(0)"
    assert str(np.array(1.0, device=gpu(0))) == "1.0"


BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow,
          operator.mod, operator.floordiv, operator.eq, operator.ne, operator.lt, operator.le,
          operator.gt, operator.ge]


@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
def test_binary_operators_match_numpy(device, op):
    a = onp.random.uniform(0.5, 2.0, size=(3, 4)).astype("float32")
    b = onp.random.uniform(0.5, 2.0, size=(4,)).astype("float32")
    x, y = np.array(a, device=device), np.array(b, device=device)
    for got, want in [(op(x, y), op(a, b)), (op(x, 1.5), op(a, onp.float32(1.5))),
                      (op(1.5, x), op(onp.float32(1.5), a))]:
        assert got.device == device and got.dtype == want.dtype and got.shape == want.shape
        assert_almost_equal(got, want)


@pytest.mark.parametrize("op", [operator.iadd, operator.isub, operator.imul, operator.itruediv,
                                operator.ipow, operator.imod, operator.ifloordiv],
                         ids=lambda f: f.__name__)
def test_inplace_operators_keep_the_object(op):
    a = onp.random.uniform(0.5, 2.0, size=(2, 3)).astype("float32")
    x = np.array(a)
    alias = x
    x = op(x, np.array(onp.full((3,), 1.25, dtype="float32")))
    assert x is alias
    assert_almost_equal(x, op(a.copy(), onp.float32(1.25)))


def test_unary_matmul_and_logical_operators():
    a = onp.random.uniform(-2, 2, size=(3, 4)).astype("float32")
    b = onp.random.uniform(-2, 2, size=(4, 2)).astype("float32")
    x, y = np.array(a), np.array(b)
    assert_almost_equal(-x, -a)
    assert_almost_equal(abs(x), abs(a))
    assert +x is x
    assert_almost_equal(x @ y, a @ b)
    p, q = np.array([True, True, False]), np.array([True, False, False])
    assert (p & q).asnumpy().tolist() == [True, False, False]
    assert (p | q).asnumpy().tolist() == [True, True, False]
    assert (p ^ q).asnumpy().tolist() == [False, True, False]
    assert (~p).asnumpy().tolist() == [False, False, True]


def test_operators_with_foreign_types():
    x = np.ones((2,))
    assert (x == None) is False  # noqa: E711  (NotImplemented both ways: identity)
    assert x != "text"
    with pytest.raises(TypeError):
        x + "text"
    with pytest.raises(TypeError, match="unhashable"):
        hash(x)


def test_float16_casts_round_as_numpy():
    # float32 <-> float16 runs 8 values per instruction (F16C) with a scalar tail: every float16
    # pattern, ties between neighbours, overflow, NaN and random floats, at an odd length.
    patterns = onp.arange(65536, dtype=onp.uint32).astype(onp.uint16).view(onp.float16)
    finite = patterns[onp.isfinite(patterns)].astype(onp.float32)
    ties = ((finite[:-1] + finite[1:]) / 2).astype(onp.float32)
    rng = onp.random.default_rng(3)
    wide = onp.concatenate([ties, rng.standard_normal(1001).astype(onp.float32) * 1e4,
                            onp.array([65520, -65520, 1e-8, onp.inf, -onp.inf], onp.float32)])
    got = np.array(wide).astype("float16").asnumpy()
    with onp.errstate(over="ignore"):  # NumPy warns of the overflows to inf that are tested
        want = wide.astype(onp.float16)
    onp.testing.assert_array_equal(got.view(onp.uint16), want.view(onp.uint16))
    back = np.array(patterns).astype("float32").asnumpy()
    onp.testing.assert_array_equal(back, patterns.astype(onp.float32))  # NaNs compare equal


def test_reshape_astype_and_methods():
    a = onp.arange(24, dtype="float32").reshape(2, 3, 4)
    x = np.array(a)
    assert x.reshape(6, 4).shape == (6, 4) and x.reshape((4, -1)).shape == (4, 6)
    assert x.T.shape == (4, 3, 2) and same(x.T, a.T)
    with pytest.raises(ValueError, match="order='C'"):
        x.reshape(24, order="F")
    assert x.astype("float32", copy=False) is x
    y = x.astype("int32")
    assert y.dtype == onp.int32 and same(y, a.astype("int32"))
    assert x.astype(onp.float64).dtype == onp.float64
    assert_almost_equal(x.sum(), a.sum())
    assert_almost_equal(x.mean(axis=1), a.mean(axis=1))
    assert_almost_equal(x.max(axis=(0, 2)), a.max(axis=(0, 2)))
    assert x.argmax().item() == 23
    assert x.tolist() == a.tolist()


def test_mixed_devices_error_names_both():
    x, y = np.ones((3,), device=cpu(0)), np.ones((3,), device=cpu(1))
    with pytest.raises(ValueError, match=r"cpu\(0\).*cpu\(1\)|cpu\(1\).*cpu\(0\)"):
        x + y
    assert (x + x).asnumpy().tolist() == [2.0, 2.0, 2.0]  # still usable


def test_invoke_errors():
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match="no_such_op"):
        invoke("no_such_op", [x])
    with pytest.raises(TypeError, match="input 1 of operator 'add'.*list"):
        invoke("add", [x, [1, 2, 3]])
    with pytest.raises(TypeError, match="attribute 'scalar'.*object"):
        invoke("add_scalar", [x], {"scalar": object(), "reverse": False})
    with pytest.raises(ValueError, match=r"out\[0\].*\(3, 2\)"):
        invoke("add", [x, x], out=np.zeros((3, 2)))
    with pytest.raises(TypeError, match=r"out\[0\].*int32"):
        invoke("add", [x, x], out=np.zeros((2, 3), dtype="int32"))
    assert invoke("add", [x, x])[0].asnumpy().sum() == 12.0


def test_invoke_attribute_forms_and_out():
    made = invoke("full", [], {"shape": (2, 3), "dtype": onp.int64, "value": 7}, device=cpu(1))[0]
    assert made.shape == (2, 3) and made.dtype == onp.int64 and made.device == cpu(1)
    assert made.asnumpy().sum() == 42
    made = invoke("zeros", [], {"shape": [4], "dtype": onp.dtype("float16")})[0]
    assert made.shape == (4,) and made.dtype == onp.float16 and made.device == cpu(0)
    with cpu(2):
        assert invoke("ones", [], {"shape": (1,), "dtype": "bool"})[0].device == cpu(2)
    x = np.ones((3,))
    out = np.zeros((3,))
    result = invoke("add_scalar", [x], {"scalar": onp.float32(0.5), "reverse": onp.bool_(False)},
                    out=[out])
    assert result[0] is out and out.asnumpy().tolist() == [1.5, 1.5, 1.5]
    total = invoke("sum", [np.ones((2, 3))], {"axis": (1,), "keepdims": True})[0]
    assert total.shape == (2, 1) and total.asnumpy().ravel().tolist() == [3.0, 3.0]
    total = invoke("sum", [np.ones((2, 3))], {"axis": None, "keepdims": False})[0]
    assert total.shape == () and total.item() == 6.0


def test_async_error_surfaces_at_wait_once():
    x = np.ones((4,))
    core._push_failing_op(x, "kernel exploded on purpose")
    with pytest.raises(ValueError, match="kernel exploded on purpose"):
        x.asnumpy()
    x.wait_to_read()  # raised once
    assert x.shape == (4,)


def test_async_error_flows_to_dependents_and_is_raised_once():
    # MXNet's contract: ops reading a failed array are skipped and carry the same error, which
    # is raised once per failure (by whichever wait sees it first).
    x = np.ones((4,))
    core._push_failing_op(x, "upstream failure")
    y = (x + 1) * 2
    with pytest.raises(ValueError, match="upstream failure"):
        y.wait_to_read()
    x.wait_to_read()
    assert (np.ones((2,)) * 3).asnumpy().tolist() == [3.0, 3.0]


def test_async_error_surfaces_at_waitall_once():
    x = np.ones((4,))
    core._push_failing_op(x, "waitall sees this")
    with pytest.raises(ValueError, match="waitall sees this"):
        npx.waitall()
    npx.waitall()
    assert np.ones((1,)).item() == 1.0


def test_autograd_methods():
    x = np.array([1.0, 2.0, 3.0])
    assert x.grad is None
    x.attach_grad()
    assert same(x.grad, onp.zeros(3))
    with autograd.record():
        y = (x * x).sum()
    y.backward()
    assert_almost_equal(x.grad, [2.0, 4.0, 6.0])
    with autograd.record():
        z = x * 3
    z.backward(out_grad=np.array([1.0, 0.0, 2.0]))
    assert_almost_equal(x.grad, [3.0, 0.0, 6.0])
    with autograd.record():
        w = (x.detach() * x).sum()
    w.backward()
    assert_almost_equal(x.grad, [1.0, 2.0, 3.0])


def test_pickle_and_weakref():
    x = np.array([[1, 2], [3, 4]], dtype="int32", device=cpu(1))
    y = pickle.loads(pickle.dumps(x))
    assert y.device == cpu(1) and y.dtype == onp.int32 and same(x, y)
    ref = weakref.ref(x)
    assert ref() is x
    with pytest.raises(AttributeError):
        x.some_attribute = 1


def test_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="complex128"):
        np.array(onp.ones(2, dtype="complex128"))


def test_fork_child_can_use_pymx():
    x = np.ones((8,)) * 2
    x.wait_to_read()
    pid = os.fork()
    if pid == 0:
        try:
            ok = ((x + np.ones((8,))).asnumpy() == 3).all()
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert (x * 2).asnumpy().tolist() == [4.0] * 8


@pytest.mark.parametrize("dtype", DTYPES)
def test_dlpack_export_to_numpy_is_zero_copy(dtype):
    values = onp.random.uniform(0, 100, size=(3, 4)).astype(dtype)
    x = np.array(values, dtype=dtype).copy()  # a pending op: the export must wait for it
    assert x.__dlpack_device__() == (1, 0)
    view = onp.from_dlpack(x)
    assert view.dtype == values.dtype and view.tobytes() == values.tobytes()
    assert view.ctypes.data == x._data_address()
    del x  # the capsule keeps the memory alive
    assert view.tobytes() == values.tobytes()


def test_dlpack_copy_unconsumed_capsule_and_device_check():
    x = np.array([1.0, 2.0])
    copied = onp.from_dlpack(x, copy=True)
    assert copied.ctypes.data != x._data_address() and copied.tolist() == [1.0, 2.0]
    capsule = x.__dlpack__()
    del capsule  # never consumed: its destructor releases the export
    with pytest.raises(BufferError, match=r"\(2, 0\)"):
        x.__dlpack__(dl_device=(2, 0))


def test_from_dlpack_imports_host_arrays():
    from pymx.ndarray import from_dlpack

    source = onp.arange(6, dtype="int32").reshape(2, 3)
    y = from_dlpack(source, device=cpu(1))
    assert y.device == cpu(1) and y.dtype == onp.int32 and same(y, source)
    x = np.ones((2,))
    assert from_dlpack(x) is x

    class OnOpenCL:
        def __dlpack_device__(self):
            return (4, 0)

    with pytest.raises(BufferError, match=r"cannot use DLPack device \(4, 0\)"):
        from_dlpack(OnOpenCL())
