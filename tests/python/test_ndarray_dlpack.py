"""DLPack import (pymx.np.from_dlpack): zero-copy from NumPy (and PyTorch when installed), the
producer's memory kept alive exactly as long as the pymx array, and the documented one-copy
fallbacks. Export is tested in test_ndarray.py."""
import gc
import os
import sys
import weakref

import numpy as onp
import pytest

from pymx import np, npx
from pymx._c import core
from pymx.device import cpu
from conftest import run_python

DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool"]


def values_of(dtype, shape=(3, 4)):
    return onp.random.uniform(0, 100, size=shape).astype(dtype)


def released(ref):
    """Whether the object behind weakref `ref` is gone once pending engine work has finished
    (a worker queues the producer's deleter for the main thread, which runs it at the next
    bytecode boundary)."""
    npx.waitall()
    gc.collect()
    return ref() is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_import_is_zero_copy(dtype):
    source = values_of(dtype)
    y = np.from_dlpack(source)
    assert y.device == cpu(0) and y.dtype == source.dtype and y.shape == source.shape
    assert y._data_address() == source.ctypes.data
    assert y.asnumpy().tobytes() == source.tobytes()


def test_writes_show_in_both_libraries():
    source = onp.arange(12, dtype="float32").reshape(3, 4)
    y = np.from_dlpack(source)
    source[1, 2] = -5.0
    y.wait_to_read()
    assert y.asnumpy()[1, 2] == -5.0
    assert onp.array_equal((y * 2).asnumpy(), source * 2)
    y[0] = 7.0  # a pymx op writing the shared memory
    y.wait_to_read()
    assert source[0].tolist() == [7.0] * 4


def test_producer_memory_lives_until_the_pymx_array_dies():
    source = onp.arange(1000, dtype="float64")
    ref = weakref.ref(source)
    refs_before = sys.getrefcount(source)
    y = np.from_dlpack(source)
    assert sys.getrefcount(source) == refs_before + 1  # the export holds the NumPy array
    del source
    assert not released(ref)
    doubled = y * 2  # queued on the shared memory, which must outlive it
    assert doubled.asnumpy()[999] == 1998.0
    assert y.asnumpy()[999] == 999.0
    view = y._reshape_view((10, 100))  # a view shares the memory, so it keeps it alive too
    del y
    assert not released(ref)
    assert view.asnumpy()[9, 99] == 999.0
    del view
    assert released(ref)


@pytest.mark.parametrize("versioned", [False, True])
def test_raw_capsules_legacy_and_versioned(versioned):
    source = onp.arange(6, dtype="int32")
    ref = weakref.ref(source)
    capsule = source.__dlpack__(max_version=(1, 0)) if versioned else source.__dlpack__()
    y = np.from_dlpack(capsule)
    assert y._data_address() == source.ctypes.data and y.asnumpy().tolist() == list(range(6))
    with pytest.raises(BufferError, match="already consumed"):
        np.from_dlpack(capsule)
    del capsule, source
    assert not released(ref)
    del y
    assert released(ref)


def test_round_trip_pymx_numpy_pymx_shares_memory():
    x = np.arange(8).reshape(2, 4)
    through_numpy = onp.from_dlpack(x)
    back = np.from_dlpack(through_numpy)
    assert back._data_address() == x._data_address()
    back[:] = 3.0
    back.wait_to_read()  # `back` has an engine var of its own: x's waits do not cover it
    assert x.asnumpy().tolist() == [[3.0] * 4] * 2
    assert np.from_dlpack(x) is x
    moved = np.from_dlpack(x, device=cpu(1))
    assert moved.device == cpu(1) and moved._data_address() != x._data_address()


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3)])
def test_zero_dim_and_empty(shape):
    source = onp.full(shape, 4.5, dtype="float32")
    y = np.from_dlpack(source)
    assert y.shape == shape and y.dtype == onp.float32
    assert onp.array_equal(y.asnumpy(), source)
    if shape == ():
        assert y._data_address() == source.ctypes.data and y.item() == 4.5
        assert (y + 1).item() == 5.5


@pytest.mark.parametrize("make", [
    lambda a: a[:, ::2],                 # strided columns
    lambda a: a.T,                       # transposed
    lambda a: a[::-1],                   # negative stride
    lambda a: onp.frombuffer(a.tobytes() + b"\0", dtype="uint8")[1:].view("float32")
              .reshape(3, 4),            # contiguous but not 4-byte aligned
], ids=["strided", "transposed", "reversed", "misaligned"])
def test_unsuitable_layouts_are_copied_once(make):
    source = make(onp.arange(12, dtype="float32").reshape(3, 4))
    y = np.from_dlpack(source)
    assert y.shape == source.shape and onp.array_equal(y.asnumpy(), source)
    assert y._data_address() != source.ctypes.data
    with pytest.raises(BufferError, match="copy=False.*strides"):
        np.from_dlpack(source, copy=False)


def test_read_only_tensors_are_copied():
    source = onp.arange(4, dtype="float64")
    source.flags.writeable = False
    y = np.from_dlpack(source)
    assert y.asnumpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert y._data_address() != source.ctypes.data
    with pytest.raises(BufferError, match="read-only"):
        np.from_dlpack(source, copy=False)


def test_device_and_copy_arguments():
    source = onp.arange(5, dtype="int64")
    on_cpu1 = np.from_dlpack(source, device=cpu(1))  # host memory serves any cpu(i)
    assert on_cpu1.device == cpu(1) and on_cpu1._data_address() == source.ctypes.data
    copied = np.from_dlpack(source, copy=True)
    assert copied._data_address() != source.ctypes.data
    source[0] = 9
    assert copied.asnumpy()[0] == 0 and on_cpu1.asnumpy()[0] == 9
    assert np.from_dlpack(source, copy=False)._data_address() == source.ctypes.data


def test_unsupported_inputs_raise_clear_errors():
    with pytest.raises(TypeError, match="unsupported dtype complex128"):
        np.from_dlpack(onp.ones(2, dtype="complex128"))
    with pytest.raises(TypeError, match="unsupported dtype uint16"):
        np.from_dlpack(onp.ones(2, dtype="uint16"))
    with pytest.raises(TypeError, match="__dlpack__.*list"):
        np.from_dlpack([1, 2])

    class OnOpenCL:
        def __dlpack_device__(self):
            return (4, 0)

        def __dlpack__(self, **kwargs):
            raise AssertionError("must not be exported")

    with pytest.raises(BufferError, match=r"\(4, 0\) \(kDLOpenCL\)"):
        np.from_dlpack(OnOpenCL())
    if npx.num_gpus() == 0:
        class OnCuda(OnOpenCL):
            def __dlpack_device__(self):
                return (2, 0)

        with pytest.raises(BufferError, match=r"\(2, 0\).*0 GPU"):
            np.from_dlpack(OnCuda())
    # The failed imports left the process usable.
    assert np.from_dlpack(onp.ones(3)).asnumpy().tolist() == [1.0, 1.0, 1.0]


EXIT_SCRIPT = """
import numpy as onp
from pymx import np
kept = np.from_dlpack(onp.arange(1000.0))      # alive when the interpreter exits
busy = kept * 2                                # ops still queued at exit
dropped = np.from_dlpack(onp.ones(1000))
dropped = dropped + 1                          # the import dies with ops pending on it
print("ok")
"""


@pytest.mark.parametrize("engine", ["threaded", "naive"])
def test_no_crash_at_interpreter_exit(engine):
    done = run_python(EXIT_SCRIPT, env=dict(os.environ, PYMX_ENGINE=engine), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_torch_interop():
    torch = pytest.importorskip("torch", reason="torch not installed")
    source = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    y = np.from_dlpack(source)
    assert y._data_address() == source.data_ptr()
    source[0, 0] = 42.0
    y.wait_to_read()
    assert y.asnumpy()[0, 0] == 42.0
    back = torch.from_dlpack(y * 2)
    assert back.tolist() == [[84.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    strided = np.from_dlpack(source.t())
    assert onp.array_equal(strided.asnumpy(), source.t().numpy())


def test_strided_copy_op_behind_strided_imports():
    """_strided_copy (how a strided tensor is copied where it lies) against NumPy's as_strided,
    with negative and zero strides, and its bounds check naming the numbers."""
    from pymx._op import invoke
    flat = onp.arange(30, dtype="float32")
    for shape, strides, offset in [((2, 3), (-3, 2), 5), ((4, 2), (0, 7), 1), ((0, 3), (1, 1), 0),
                                   ((3,), (-1,), 29)]:
        got = invoke("_strided_copy", [np.array(flat)],
                     {"shape": shape, "strides": strides, "offset": offset})[0]
        want = onp.lib.stride_tricks.as_strided(flat[offset:], shape,
                                                tuple(4 * s for s in strides))
        assert onp.array_equal(got.asnumpy(), want), (shape, strides, offset)
    with pytest.raises(ValueError, match=r"reaches elements 5 to 32 of 30"):
        invoke("_strided_copy", [np.array(flat)], {"shape": (2, 3), "strides": (3, 12),
                                                   "offset": 5})
