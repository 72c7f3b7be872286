"""Parameter files: MXNet 2.x `.npz` (written and read) and MXNet's legacy binary list (read).

Note [Parameter file formats]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`save_parameters` writes what MXNet 2.x writes in np mode: an uncompressed zip with one standard
`<name>.npy` member per parameter, whatever the file's extension; bfloat16 members use MXNet's
cnpy descr '<b2' (NumPy has no bfloat16) and load back as `pymx.base.bfloat16` bits, as do legacy
records of type flag 12. It is written to a temporary file in the same directory and renamed over
the target, so an interrupted save leaves the previous file intact. Loading sniffs the first four bytes like MXNDArrayLoad: a zip signature means npz,
anything else is tried as the legacy list (u64 magic 0x112, u64 reserved, u64 N records, u64 K
names); the record layout is in reference/mxnet-behaviour.md §6.9. Every read is bounds-checked, so
a truncated or corrupt file raises ValueError naming the file and the byte offset.
"""
import ast
import io
import os
import struct
import zipfile

import numpy as _onp

from .._atomic_file import write_atomically
from ..base import bfloat16

__all__ = ['save_npz', 'save_npy', 'load_params_file', 'load_into']

_ZIP_MAGICS = (b'PK\x03\x04', b'PK\x05\x06')
_LIST_MAGIC = 0x112
_RECORD_V1, _RECORD_V2, _RECORD_V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
# mshadow type flags (3rdparty/mshadow/mshadow/base.h); 12 is bfloat16, kept as its bits.
_TYPE_FLAGS = {0: _onp.float32, 1: _onp.float64, 2: _onp.float16, 3: _onp.uint8, 4: _onp.int32,
               5: _onp.int8, 6: _onp.int64, 7: _onp.bool_, 8: _onp.int16, 9: _onp.uint16,
               10: _onp.uint32, 11: _onp.uint64}
_BFLOAT16 = 12
_BFLOAT16_DESCR = '<b2'  # MXNet's src/serialization/cnpy.cc


def save_npz(filename, arrays):
    """Writes {name: numpy array} as an uncompressed .npz, atomically (temp file + os.replace).
    Arrays of `bfloat16` bits are written with the descr '<b2'."""
    write_atomically(filename, lambda f: _write_npz(f, arrays))


def save_npy(filename, values):
    """Writes one numpy array as a .npy file, atomically, as save_npz writes its members."""
    write_atomically(filename, lambda f: _write_npy(f, values))


def _write_npz(f, arrays):
    # np.savez's layout: an uncompressed zip of <name>.npy members.
    with zipfile.ZipFile(f, 'w', zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, values in arrays.items():
            with archive.open(name + '.npy', 'w', force_zip64=True) as member:
                _write_npy(member, values)


def _write_npy(f, values):
    if values.dtype == bfloat16:
        header = {'descr': _BFLOAT16_DESCR, 'fortran_order': False, 'shape': values.shape}
        _onp.lib.format.write_array_header_1_0(f, header)
        f.write(_onp.ascontiguousarray(values).view('<u2').tobytes())
    else:
        _onp.lib.format.write_array(f, _onp.asanyarray(values), allow_pickle=False)


def load_params_file(filename):
    """Reads a parameter file into an ordered {name: numpy array}."""
    filename = os.fspath(filename)
    if os.path.isdir(filename):
        raise IsADirectoryError(f"Parameter file '{filename}' is a directory")
    if not os.path.isfile(filename):
        raise FileNotFoundError(f"Parameter file '{filename}' does not exist")
    with open(filename, 'rb') as f:
        head = f.read(4)
    if head in _ZIP_MAGICS:
        return _load_npz(filename)
    with open(filename, 'rb') as f:
        return _LegacyReader(filename, f.read()).read_list()


def _load_npz(filename):
    try:
        with zipfile.ZipFile(filename) as archive:
            return {name[:-4] if name.endswith('.npy') else name: _read_npy(archive.read(name))
                    for name in archive.namelist()}
    except (zipfile.BadZipFile, ValueError, SyntaxError, OSError, EOFError, KeyError) as err:
        raise ValueError(f"Parameter file '{filename}' is a corrupt or truncated .npz: "
                         f"{err}") from err


def _read_npy(raw):
    """One .npy member; MXNet's '<b2' members give `bfloat16` bits (NumPy rejects that descr)."""
    stream = io.BytesIO(raw)
    major, _minor = _onp.lib.format.read_magic(stream)
    length_format = '<H' if major == 1 else '<I'
    (header_length,) = struct.unpack(length_format, stream.read(struct.calcsize(length_format)))
    header = ast.literal_eval(stream.read(header_length).decode('latin1'))
    if not isinstance(header, dict) or header.get('descr') != _BFLOAT16_DESCR:
        return _onp.lib.format.read_array(io.BytesIO(raw), allow_pickle=False)
    shape = tuple(header['shape'])
    size = 1
    for d in shape:
        size *= d
    bits = _onp.frombuffer(raw, dtype='<u2', count=size, offset=stream.tell())
    bits = bits.reshape(shape, order='F' if header['fortran_order'] else 'C')
    return _onp.ascontiguousarray(bits, dtype=_onp.uint16).view(bfloat16)


class _LegacyReader:
    """Bounds-checked little-endian reader for MXNet's NDArray list format."""

    def __init__(self, filename, blob):
        self.filename = filename
        self.blob = blob
        self.pos = 0

    def _fail(self, what):
        raise ValueError(f"Invalid NDArray file format: '{self.filename}' {what} (at byte "
                         f"{self.pos} of {len(self.blob)})")

    def take(self, nbytes, what):
        if nbytes < 0 or self.pos + nbytes > len(self.blob):
            self._fail(f"is truncated: {what} needs {nbytes} bytes")
        chunk = self.blob[self.pos:self.pos + nbytes]
        self.pos += nbytes
        return chunk

    def unpack(self, fmt, what):
        return struct.unpack('<' + fmt, self.take(struct.calcsize('<' + fmt), what))

    def read_list(self):
        arrays, names = self.read_arrays()
        if not names:
            names = [f'arr_{i}' for i in range(len(arrays))]
        return dict(zip(names, arrays))

    def read_arrays(self):
        """(list of arrays, list of their names: empty when the file has none)."""
        if len(self.blob) < 16:
            self._fail("is too short to be a parameter file")
        magic, _reserved = self.unpack('QQ', 'header')
        if magic != _LIST_MAGIC:
            self._fail(f"has magic {magic:#x}; expected a zip (.npz) or {_LIST_MAGIC:#x}")
        (count,) = self.unpack('Q', 'array count')
        if count > len(self.blob):
            self._fail(f"claims {count} arrays")
        arrays = [self.read_array(i) for i in range(count)]
        (num_names,) = self.unpack('Q', 'name count')
        if num_names not in (0, count):
            self._fail(f"has {num_names} names for {count} arrays")
        names = []
        for i in range(num_names):
            (length,) = self.unpack('Q', f'length of name {i}')
            raw = self.take(length, f'name {i}')
            try:
                names.append(raw.decode('utf-8'))
            except UnicodeDecodeError:
                self._fail(f"has a name that is not UTF-8: {raw[:40]!r}")
        return arrays, names

    def read_shape(self, what, dim_format='q'):
        (ndim,) = self.unpack('i', f'{what} ndim')
        if ndim < -1 or ndim > 32:
            self._fail(f"has {what} ndim {ndim}")
        if ndim <= 0:
            return ndim, ()
        return ndim, self.unpack(dim_format * ndim, f'{what} dims')

    def read_array(self, index):
        (magic,) = self.unpack('I', f'array {index} magic')
        if magic in (_RECORD_V1, _RECORD_V2, _RECORD_V3):
            if magic != _RECORD_V1:
                (stype,) = self.unpack('i', f'array {index} storage type')
                if stype != 0:
                    self._fail(f"array {index} has sparse storage type {stype}; only dense "
                               f"arrays are supported")
            ndim, shape = self.read_shape(f'array {index} shape')
            # A "none" array: V1/V2 mark it with ndim 0, V3 with an unknown shape.
            empty = ndim == -1 or (ndim == 0 and magic != _RECORD_V3) or \
                (magic == _RECORD_V3 and any(d < 0 for d in shape))
        else:
            # Pre-V1 record: the magic word is the ndim, then u32 dims.
            ndim = magic
            if ndim > 32:
                self._fail(f"array {index} has unknown record magic {magic:#x}")
            shape = self.unpack('I' * ndim, f'array {index} dims') if ndim else ()
            empty = ndim == 0
        if empty:
            return _onp.zeros((0,), dtype=_onp.float32)
        if any(d < 0 for d in shape):
            self._fail(f"array {index} has negative dims {shape}")
        self.unpack('ii', f'array {index} device')
        (type_flag,) = self.unpack('i', f'array {index} dtype')
        size = 1
        for d in shape:
            size *= d
        if type_flag == _BFLOAT16:
            raw = _onp.frombuffer(self.take(2 * size, f'array {index} data'), dtype='<u2')
            return raw.astype(_onp.uint16).view(bfloat16).reshape(shape)
        dtype = _TYPE_FLAGS.get(type_flag)
        if dtype is None:
            self._fail(f"array {index} has unknown dtype flag {type_flag}")
        dtype = _onp.dtype(dtype).newbyteorder('<')
        raw = self.take(dtype.itemsize * size, f'array {index} data')
        return _onp.frombuffer(raw, dtype=dtype).reshape(shape).astype(dtype.newbyteorder('='))


def _brief_print_list(names, limit=7):
    names = list(names)
    if len(names) > limit:
        return (_brief_print_list(names[:limit // 2], limit) + ', ..., ' +
                _brief_print_list(names[-limit // 2:], limit))
    return ', '.join(f"'{n}'" for n in names)


def load_into(params, loaded, filename, device, allow_missing, ignore_extra, cast_dtype,
              dtype_source):
    """Loads {name: numpy array} into {name: Parameter} with MXNet's checks and messages."""
    # Module-era checkpoints prefix names with 'arg:' / 'aux:'.
    loaded = {(k[4:] if k.startswith(('arg:', 'aux:')) else k): v for k, v in loaded.items()}
    if not allow_missing:
        # A shared Parameter is present if any of its names is.
        present = {id(params[name]) for name in loaded if name in params}
        for name, param in params.items():
            if id(param) not in present:
                raise ValueError(f"Parameter '{name}' is missing in 'file: {filename}', which "
                                 f"contains parameters: {_brief_print_list(loaded)}. Set "
                                 f"allow_missing=True to ignore missing parameters.")
    for name, value in loaded.items():
        if name not in params:
            if ignore_extra:
                continue
            raise ValueError(f"Parameter '{name}' loaded from 'file: {filename}' is not present "
                             f"in Dict, which contains parameters {_brief_print_list(params)}. "
                             f"Set ignore_extra=True to ignore. ")
        params[name]._load_init(value, device, cast_dtype=cast_dtype, dtype_source=dtype_source,
                                name=name)
