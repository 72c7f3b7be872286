"""Parameter files: .npz round trips, MXNet's legacy binary list, corrupt files, atomic saves."""
import os
import struct
import zipfile

import numpy as onp
import pytest

from pymx import cpu, np
from pymx.gluon import nn
from pymx.gluon import _params_file
from pymx.gluon._params_file import load_params_file, save_npz

_RECORD_V1, _RECORD_V2, _RECORD_V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
_TYPE_FLAGS = {'float32': 0, 'float64': 1, 'float16': 2, 'uint8': 3, 'int32': 4, 'int8': 5,
               'int64': 6}


def write_legacy(path, named, magic=_RECORD_V2, with_names=True):
    """Writes MXNet's NDArray list format (reference/mxnet-behaviour.md §6.9)."""
    out = bytearray(struct.pack('<QQQ', 0x112, 0, len(named)))
    for arr in named.values():
        arr = onp.ascontiguousarray(arr)
        if magic is None:  # pre-V1 record: u32 ndim then u32 dims
            out += struct.pack('<I', arr.ndim) + struct.pack(f'<{arr.ndim}I', *arr.shape)
        else:
            out += struct.pack('<I', magic)
            if magic != _RECORD_V1:
                out += struct.pack('<i', 0)  # dense storage
            out += struct.pack('<i', arr.ndim) + struct.pack(f'<{arr.ndim}q', *arr.shape)
        out += struct.pack('<ii', 1, 0)  # saved on cpu(0)
        out += struct.pack('<i', _TYPE_FLAGS[arr.dtype.name])
        out += arr.astype(arr.dtype.newbyteorder('<')).tobytes()
    names = list(named) if with_names else []
    out += struct.pack('<Q', len(names))
    for name in names:
        encoded = name.encode()
        out += struct.pack('<Q', len(encoded)) + encoded
    with open(path, 'wb') as f:
        f.write(bytes(out))


def _small_net():
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=4), nn.BatchNorm(in_channels=3), nn.Dense(2, in_units=3))
    return net


def _host_params(net):
    return {k: v.data().asnumpy() for k, v in net.collect_params().items()}


def test_npz_round_trip(tmp_path):
    net = _small_net()
    net.initialize()
    path = tmp_path / 'net.params'
    net.save_parameters(str(path))
    assert zipfile.is_zipfile(path)  # MXNet 2.x writes a zip whatever the extension
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == sorted(f'{k}.npy' for k in net.collect_params())
        assert all(info.compress_type == zipfile.ZIP_STORED for info in z.infolist())
    other = _small_net()
    other.load_parameters(str(path))
    expected, got = _host_params(net), _host_params(other)
    assert expected.keys() == got.keys()
    for key in expected:
        onp.testing.assert_array_equal(expected[key], got[key])


@pytest.mark.parametrize('magic', [_RECORD_V1, _RECORD_V2, _RECORD_V3, None])
def test_legacy_format_loads(tmp_path, magic):
    rng = onp.random.default_rng(0)
    net = _small_net()
    values = {k: rng.standard_normal(p.shape).astype('float32')
              for k, p in net.collect_params().items()}
    # Module-era checkpoints prefix names with arg:/aux:.
    named = {('aux:' if 'running' in k else 'arg:') + k: v for k, v in values.items()}
    path = tmp_path / 'legacy.params'
    write_legacy(path, named, magic)
    net.load_parameters(str(path), device=cpu())
    for key, value in values.items():
        onp.testing.assert_array_equal(net.collect_params()[key].data().asnumpy(), value)


def test_legacy_dtypes_and_unnamed(tmp_path):
    arrays = {'a': onp.arange(6, dtype='int64').reshape(2, 3), 'b': onp.float16([1.5, -2]),
              'c': onp.uint8([7])}
    path = tmp_path / 'x.params'
    write_legacy(path, arrays)
    loaded = load_params_file(path)
    assert list(loaded) == ['a', 'b', 'c']
    for key in arrays:
        assert loaded[key].dtype == arrays[key].dtype
        onp.testing.assert_array_equal(loaded[key], arrays[key])
    write_legacy(path, arrays, with_names=False)
    assert list(load_params_file(path)) == ['arr_0', 'arr_1', 'arr_2']


def test_truncated_and_corrupt_files(tmp_path):
    path = tmp_path / 'legacy.params'
    write_legacy(path, {'w': onp.ones((4, 4), 'float32')})
    blob = path.read_bytes()
    for cut in (3, 20, 40, len(blob) - 5):
        path.write_bytes(blob[:cut])
        with pytest.raises(ValueError, match='legacy.params'):
            load_params_file(path)
    path.write_bytes(b'\x00' * 64)
    with pytest.raises(ValueError, match='Invalid NDArray file format.*magic 0x0'):
        load_params_file(path)
    net = _small_net()
    net.initialize()
    good = tmp_path / 'good.params'
    net.save_parameters(str(good))
    zblob = good.read_bytes()
    good.write_bytes(zblob[:len(zblob) // 2])
    with pytest.raises(ValueError, match='corrupt or truncated .npz'):
        net.load_parameters(str(good))
    with pytest.raises(FileNotFoundError, match='does not exist'):
        net.load_parameters(str(tmp_path / 'missing.params'))
    # The process stays usable: a good load still works.
    net.save_parameters(str(good))
    net.load_parameters(str(good))


def test_interrupted_save_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / 'net.params'
    save_npz(path, {'w': onp.ones(3, 'float32')})
    before = path.read_bytes()

    def failing_write(f, arrays):
        f.write(b'PK\x03\x04partial')
        raise KeyboardInterrupt

    monkeypatch.setattr(_params_file, '_write_npz', failing_write)
    with pytest.raises(KeyboardInterrupt):
        save_npz(path, {'w': onp.zeros(3, 'float32')})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ['net.params']  # the temporary file was removed


def test_missing_and_extra_errors(tmp_path):
    net = _small_net()
    net.initialize()
    path = tmp_path / 'p.npz'
    save_npz(path, {'0.weight': net[0].weight.data().asnumpy()})
    with pytest.raises(ValueError, match=r"Parameter '0.bias' is missing in 'file: .*p.npz', "
                                         r"which contains parameters: '0.weight'. Set "
                                         r"allow_missing=True"):
        net.load_parameters(str(path))
    net.load_parameters(str(path), allow_missing=True)
    save_npz(path, dict(_host_params(net), extra=onp.zeros(1, 'float32')))
    with pytest.raises(ValueError, match=r"Parameter 'extra' loaded from 'file: .*' is not "
                                         r"present in Dict.*Set ignore_extra=True"):
        net.load_parameters(str(path))
    net.load_parameters(str(path), ignore_extra=True)


def test_shape_and_dtype_mismatch(tmp_path):
    net = _small_net()
    net.initialize()
    params = _host_params(net)
    path = tmp_path / 'p.npz'
    save_npz(path, dict(params, **{'0.weight': onp.zeros((3, 5), 'float32')}))
    with pytest.raises(ValueError, match=r"Failed loading Parameter '0.weight' from saved "
                                         r"params: shape incompatible expected \(3, 4\) vs saved "
                                         r"\(3, 5\)"):
        net.load_parameters(str(path))
    save_npz(path, dict(params, **{'0.weight': params['0.weight'].astype('float64')}))
    with pytest.raises(ValueError, match='dtype incompatible expected float32 vs saved float64'):
        net.load_parameters(str(path))
    net.load_parameters(str(path), cast_dtype=True)
    assert net[0].weight.dtype == 'float32'
    net.load_parameters(str(path), cast_dtype=True, dtype_source='saved')
    assert net[0].weight.data().dtype == onp.float64


def test_load_before_initialize_sets_devices_and_shapes(tmp_path):
    net = _small_net()
    net.initialize()
    path = tmp_path / 'p.params'
    net.save_parameters(str(path))
    fresh = nn.HybridSequential()
    fresh.add(nn.Dense(3), nn.BatchNorm(), nn.Dense(2))  # deferred shapes
    fresh.load_parameters(str(path), device=[cpu(0), cpu(1)])
    weight = fresh[0].weight
    assert weight.shape == (3, 4)
    assert weight.list_device() == [cpu(0), cpu(1)]
    onp.testing.assert_array_equal(weight.data(cpu(1)).asnumpy(),
                                   net[0].weight.data().asnumpy())


def test_save_averages_device_copies(tmp_path):
    net = nn.BatchNorm(in_channels=2)
    net.initialize(device=[cpu(0), cpu(1)])
    net.running_mean.data(cpu(0))[:] = np.array([1.0, 2.0], device=cpu(0))
    net.running_mean.data(cpu(1))[:] = np.array([3.0, 6.0], device=cpu(1))
    path = tmp_path / 'bn.params'
    net.save_parameters(str(path))
    onp.testing.assert_allclose(load_params_file(path)['running_mean'], [2.0, 4.0])


def _dense_bn_net():
    net = nn.HybridSequential()
    net.add(nn.Dense(5, in_units=4), nn.BatchNorm(in_channels=5), nn.Dense(2, in_units=5))
    return net


def test_load_dict_takes_saved_arrays_onto_the_device_asked(tmp_path):
    from pymx import npx
    source = _dense_bn_net()
    source.initialize()
    path = str(tmp_path / 'net.params')
    source.save_parameters(path)
    target = _dense_bn_net()
    target.load_dict(npx.load(path), device=cpu(1))
    x = np.array(onp.random.RandomState(0).randn(3, 4), dtype='float32')
    for name, param in target.collect_params().items():
        assert param.list_data()[0].device == cpu(1), name
        onp.testing.assert_array_equal(param.data().asnumpy(),
                                       source.collect_params()[name].data().asnumpy())
    onp.testing.assert_array_equal(target(x.copyto(cpu(1))).asnumpy(), source(x).asnumpy())


def test_load_dict_checks_names_as_load_parameters():
    source = _dense_bn_net()
    source.initialize()
    arrays = {name: p.data() for name, p in source.collect_params().items()}
    missing = dict(arrays)
    del missing['0.weight']
    with pytest.raises(ValueError, match=r"'0\.weight' is missing"):
        _dense_bn_net().load_dict(missing)
    extra = dict(arrays, **{'9.weight': onp.zeros(3, 'float32')})
    with pytest.raises(ValueError, match=r"'9\.weight'.*ignore_extra"):
        _dense_bn_net().load_dict(extra)
    target = _dense_bn_net()
    target.load_dict(extra, ignore_extra=True)  # NumPy values too
    onp.testing.assert_array_equal(target.collect_params()['0.weight'].data().asnumpy(),
                                   arrays['0.weight'].asnumpy())
    with pytest.raises(TypeError, match='list'):
        _dense_bn_net().load_dict(list(arrays.values()))
