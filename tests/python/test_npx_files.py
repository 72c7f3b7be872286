"""npx.save, npx.savez and npx.load: .npy/.npz files NumPy reads and writes too, MXNet's legacy
list files (written out here byte by byte), atomic writes, errors."""
import os
import struct

import numpy as onp
import pytest

import pymx
from pymx import np, npx
from pymx.base import bfloat16
from pymx.gluon import _params_file

DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool"]


def _values(shape, dtype):
    return (onp.random.uniform(-50, 50, shape) > 0 if dtype == "bool"
            else onp.random.uniform(-50, 50, shape).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_save_writes_a_npy_file_numpy_reads(tmp_path, dtype, device):
    values = _values((2, 3), dtype)
    path = str(tmp_path / "a.npy")
    npx.save(path, np.array(values, dtype=dtype, device=device))
    onp.testing.assert_array_equal(onp.load(path), values)
    assert onp.load(path).dtype == values.dtype
    loaded = npx.load(path)
    assert isinstance(loaded, np.ndarray) and loaded.device == pymx.cpu()
    assert loaded.dtype == values.dtype and loaded.shape == (2, 3)
    onp.testing.assert_array_equal(loaded.asnumpy(), values)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (2, 1, 3, 1)])
def test_save_load_shapes(tmp_path, shape):
    values = onp.random.uniform(size=shape).astype(onp.float32)
    path = str(tmp_path / "s")  # no '.npy' is appended
    npx.save(path, np.array(values))
    assert os.listdir(tmp_path) == ["s"]
    onp.testing.assert_array_equal(npx.load(path).asnumpy(), values)
    assert npx.load(path).shape == shape


def test_bfloat16_uses_mxnets_descr_and_keeps_its_bits(tmp_path, device):
    values = np.array([1.5, -2.0, 3.140625], dtype="bfloat16", device=device)
    path = str(tmp_path / "b.npy")
    npx.save(path, values)
    with open(path, "rb") as f:
        assert b"'descr': '<b2'" in f.read(128)
    loaded = npx.load(path)
    assert loaded.dtype == bfloat16
    onp.testing.assert_array_equal(loaded._host_values(), values._host_values())
    onp.testing.assert_array_equal(loaded.asnumpy(), [1.5, -2.0, 3.140625])


def test_savez_names_and_numpy_interop(tmp_path, device):
    a = onp.arange(6, dtype=onp.float32).reshape(2, 3)
    b = onp.array([1, 2], dtype=onp.int64)
    w = onp.array([[True, False]])
    path = str(tmp_path / "z.npz")
    npx.savez(path, np.array(a, device=device), np.array(b, device=device),
              w=np.array(w, device=device))
    with onp.load(path) as archive:
        assert sorted(archive.files) == ["arr_0", "arr_1", "w"]
        onp.testing.assert_array_equal(archive["w"], w)
    loaded = npx.load(path)
    assert isinstance(loaded, dict) and sorted(loaded) == ["arr_0", "arr_1", "w"]
    for name, values in (("arr_0", a), ("arr_1", b), ("w", w)):
        assert loaded[name].dtype == values.dtype and loaded[name].device == pymx.cpu()
        onp.testing.assert_array_equal(loaded[name].asnumpy(), values)
    npx.savez(str(tmp_path / "empty.npz"))
    assert npx.load(str(tmp_path / "empty.npz")) == {}


def test_files_written_by_numpy_load(tmp_path):
    onp.save(str(tmp_path / "n.npy"), onp.asfortranarray(onp.arange(6.0).reshape(2, 3)))
    onp.testing.assert_array_equal(npx.load(str(tmp_path / "n.npy")).asnumpy(),
                                   onp.arange(6.0).reshape(2, 3))
    onp.savez_compressed(str(tmp_path / "c.npz"), x=onp.ones(3, onp.int32))
    loaded = npx.load(tmp_path / "c.npz")  # an os.PathLike, compressed members
    onp.testing.assert_array_equal(loaded["x"].asnumpy(), [1, 1, 1])


# -------------------------------------------------------------------------------------------
# MXNet's legacy NDArray list (mx.nd.save, MXNet 1.x npx.save), reference/mxnet-behaviour.md
# -------------------------------------------------------------------------------------------
def _legacy_record(values, type_flag):
    """A V2 record: magic, dense storage, the int64 shape, cpu(0), the type flag, the data."""
    return (struct.pack("<Ii", 0xF993FAC9, 0) + struct.pack("<i", values.ndim)
            + struct.pack(f"<{values.ndim}q", *values.shape) + struct.pack("<iii", 1, 0,
                                                                            type_flag)
            + values.astype(values.dtype.newbyteorder("<")).tobytes())


def _legacy_list(arrays, names=()):
    out = struct.pack("<QQQ", 0x112, 0, len(arrays)) + b"".join(arrays)
    out += struct.pack("<Q", len(names))
    for name in names:
        out += struct.pack("<Q", len(name)) + name.encode()
    return out


def test_legacy_lists_load_as_mxnet_2_does(tmp_path):
    a = onp.arange(6, dtype=onp.float32).reshape(2, 3)
    b = onp.array([7, -8], dtype=onp.int32)
    records = [_legacy_record(a, 0), _legacy_record(b, 4)]
    (tmp_path / "one").write_bytes(_legacy_list(records[:1]))
    (tmp_path / "two").write_bytes(_legacy_list(records))
    (tmp_path / "named").write_bytes(_legacy_list(records, ["x", "y"]))
    one = npx.load(str(tmp_path / "one"))  # an unnamed list of one array gives the array
    assert isinstance(one, np.ndarray)
    onp.testing.assert_array_equal(one.asnumpy(), a)
    two = npx.load(str(tmp_path / "two"))
    assert isinstance(two, list) and [x.dtype for x in two] == [onp.float32, onp.int32]
    onp.testing.assert_array_equal(two[1].asnumpy(), b)
    named = npx.load(str(tmp_path / "named"))
    assert sorted(named) == ["x", "y"]
    onp.testing.assert_array_equal(named["x"].asnumpy(), a)


# -------------------------------------------------------------------------------------------
# Atomic writes and errors
# -------------------------------------------------------------------------------------------
def test_a_failed_save_leaves_the_previous_file(tmp_path, monkeypatch):
    path = str(tmp_path / "keep.npy")
    npx.save(path, np.ones(3))
    before = open(path, "rb").read()

    def write_half_then_fail(f, values):
        f.write(b"\x93NUMPY partial")
        raise OSError("disk full")

    monkeypatch.setattr(_params_file, "_write_npy", write_half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        npx.save(path, np.zeros(5))
    with pytest.raises(OSError, match="disk full"):
        npx.savez(path, np.zeros(5))
    assert open(path, "rb").read() == before
    assert os.listdir(tmp_path) == ["keep.npy"]  # no temporary file is left behind


def test_save_and_savez_errors(tmp_path):
    path = str(tmp_path / "e.npy")
    with pytest.raises(ValueError, match="npx.save: data needs to be a pymx ndarray, got list"):
        npx.save(path, [np.ones(2)])
    with pytest.raises(ValueError, match="got ndarray"):
        npx.save(path, onp.ones(2))  # a NumPy array
    with pytest.raises(TypeError, match="npx.save: file must be a str or os.PathLike file "
                                        "name, got int"):
        npx.save(3, np.ones(2))
    with pytest.raises(ValueError, match="positional argument 0 is saved as 'arr_0', which is "
                                         "also given as a keyword"):
        npx.savez(path, np.ones(2), arr_0=np.ones(2))
    with pytest.raises(TypeError, match="npx.savez: 'b' must be a pymx ndarray, got float"):
        npx.savez(path, a=np.ones(2), b=1.0)
    assert not os.path.exists(path)


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"npx.load: file '.*nothing' does not exist"):
        npx.load(str(tmp_path / "nothing"))
    with pytest.raises(TypeError, match="file must be a str or os.PathLike"):
        npx.load(None)
    npx.save(str(tmp_path / "t.npy"), np.ones((4, 4)))
    blob = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(blob[:-10])
    with pytest.raises(ValueError, match=r"npx.load: '.*t\.npy' is a corrupt or truncated "
                                         r"\.npy file"):
        npx.load(str(tmp_path / "t.npy"))
    npx.savez(str(tmp_path / "t.npz"), x=np.ones(40))
    blob = (tmp_path / "t.npz").read_bytes()
    (tmp_path / "t.npz").write_bytes(blob[:len(blob) // 2])
    with pytest.raises(ValueError, match=r"'.*t\.npz' is a corrupt or truncated \.npz"):
        npx.load(str(tmp_path / "t.npz"))
    onp.savez(str(tmp_path / "c.npz"), z=onp.ones(2, onp.complex64))
    with pytest.raises(TypeError, match=r"npx.load: array 'z' in '.*c\.npz': pymx does not "
                                        r"support dtype complex64"):
        npx.load(str(tmp_path / "c.npz"))
    (tmp_path / "junk").write_bytes(b"\x01" * 40)
    with pytest.raises(ValueError, match=r"'.*junk' has magic 0x101010101010101"):
        npx.load(str(tmp_path / "junk"))
    (tmp_path / "cut").write_bytes(_legacy_list([_legacy_record(onp.ones(3, onp.float32),
                                                                0)])[:-20])
    with pytest.raises(ValueError, match=r"'.*cut' is truncated: array 0 data needs 12 bytes"):
        npx.load(str(tmp_path / "cut"))
