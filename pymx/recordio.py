"""pymx.recordio: MXNet's RecordIO files (python/mxnet/recordio.py), read and written in Python.

    with recordio.MXIndexedRecordIO('data.idx', 'data.rec', 'w') as rec:
        rec.write_idx(0, recordio.pack_img(recordio.IRHeader(0, 3.0, 0, 0), bgr_image))
    header, bgr_image = recordio.unpack_img(recordio.MXIndexedRecordIO(
        'data.idx', 'data.rec', 'r').read_idx(0))

Note [RecordIO on disk]
~~~~~~~~~~~~~~~~~~~~~~~
A .rec file is a sequence of records, all little-endian, as dmlc-core's RecordIOWriter writes:
each part is `u32 magic 0xced7230a`, `u32 lrec`, then `length` payload bytes and zero padding to
a multiple of 4. lrec holds the continuation flag in its top 3 bits and the part's length in
the low 29 (so a record is under 2**29 bytes). A reader finds records by the magic word, so a
payload must not hold the magic at a 4-byte-aligned offset: the writer cuts the payload at each
such occurrence, drops those 4 bytes and writes the pieces as parts flagged 1 (first), 2
(middle) and 3 (last); a record with no such occurrence is one part flagged 0. The reader joins
the parts with the magic word between them. An index file (.idx) has one line per record,
`key<TAB>byte offset of the record's first part<LF>`.

A packed record (`pack`) starts with a 24-byte header `u32 flag, f32 label, u64 id, u64 id2`.
flag 0: the label is that float. flag n > 0: n float32 labels follow the header (the header's
label field is 0) and precede the payload.

Images (`pack_img`, `unpack_img`) use OpenCV's channel order as MXNet's functions do (MXNet
encodes and decodes with cv2): pack_img takes a BGR (H, W, 3), BGRA (H, W, 4) or grayscale
(H, W) / (H, W, 1) uint8 array, and unpack_img returns one. Images from MXNet's files decode to
the same pixels as in MXNet (see the differences below). gluon.data.vision.ImageRecordDataset
gives RGB, as MXNet's does.

Deliberate differences from MXNet 2.x:
- Images are encoded and decoded with Pillow, not OpenCV. img_fmt is '.jpg', '.jpeg' or '.png'
  (any case), and iscolor -1 (as stored), 0 (grayscale) or 1 (BGR); other values raise
  ValueError. Only 8-bit images are packed and unpacked (a 16-bit PNG raises ValueError). The
  JPEG bytes differ from OpenCV's (the images are equally valid). Decoding gives OpenCV's
  pixels, except a colour PNG read as grayscale: Pillow's luma is within one level of OpenCV's.
  Undecodable image bytes raise ValueError (MXNet returns None).
- Misuse raises exceptions rather than failing asserts or crashing: bad flags, reading a writer,
  a closed file, a truncated or corrupt file (ValueError naming the file and byte offset), a
  missing key (KeyError naming it and the index file).
- `tell()` is on MXRecordIO too, in both modes (MXNet: MXIndexedRecordIO in 'w' mode only).
- The objects are context managers.
- Pickling does not close the original object. An unpickled reader is reopened at its first
  record (as in MXNet); pickling an open writer raises TypeError, as reopening it would truncate
  the file the original is writing.
- `write_idx` refuses a key already written (a second offset for one key would make the index
  ambiguous). Index files with repeated keys are read as MXNet reads them: `keys` lists every
  line, `idx` keeps the last offset.
- `uri` is a local path (no s3:// or hdfs://).
"""
import io
import numbers
import os
import struct
from collections import namedtuple

import numpy as onp
from PIL import Image, ImageOps, UnidentifiedImageError

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img"]

_MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", _MAGIC)
_PART_HEADER = struct.Struct("<II")            # magic, lrec
_LENGTH_BITS = 29
_MAX_RECORD = 1 << _LENGTH_BITS                # records are shorter than this
_WHOLE, _FIRST, _MIDDLE, _LAST = 0, 1, 2, 3    # continuation flags, Note [RecordIO on disk]


def _as_bytes(buf, what):
    """The bytes of a bytes-like `buf` (bytes, bytearray, memoryview, a NumPy array...)."""
    try:
        return memoryview(buf).tobytes()
    except TypeError:
        raise TypeError(f"{what} must be bytes-like, got {type(buf).__name__}") from None


def _padding(length):
    return -length % 4


def _part(cflag, payload):
    return (_PART_HEADER.pack(_MAGIC, (cflag << _LENGTH_BITS) | len(payload)) + payload
            + b"\0" * _padding(len(payload)))


def _encode_record(data):
    """The bytes of one record holding `data`. See Note [RecordIO on disk]."""
    parts = []
    start = 0
    pos = data.find(_MAGIC_BYTES)
    while pos != -1:
        if pos % 4:  # only aligned occurrences can be mistaken for a part header
            pos = data.find(_MAGIC_BYTES, pos + 1)
            continue
        parts.append(_part(_MIDDLE if parts else _FIRST, data[start:pos]))
        start = pos + 4
        pos = data.find(_MAGIC_BYTES, start)
    parts.append(_part(_LAST if parts else _WHOLE, data[start:]))
    return b"".join(parts)


class MXRecordIO:
    """Reads (flag 'r') or writes (flag 'w', truncating) a RecordIO file record by record.

    `read()` returns the next record as bytes, None at the end of the file; `write(buf)`
    appends a bytes-like record; `tell()` is the byte offset of the next record; `reset()`
    goes back to the first record (in 'w' mode: truncates the file again); `close()` closes.

    Fork safety (as in MXNet): the object remembers the process that opened it. In another
    process (a DataLoader worker, say) `read` and `write` raise RuntimeError, since the two
    processes would share one file position, while MXIndexedRecordIO's `read_idx` reopens the
    file there first. Each record is written to the file at once, so nothing is buffered that a
    forked child could write a second time.
    """

    def __init__(self, uri, flag):
        self.uri = os.fspath(uri)
        self.flag = flag
        self.is_open = False
        self.writable = None
        self.pid = None
        self._file = None
        self._pos = 0
        self.open()

    def open(self):
        """Opens the file: for reading at its first record, or for writing, emptied."""
        if self.flag not in ("r", "w"):
            raise ValueError(f"Invalid flag {self.flag!r} for RecordIO file {self.uri}: "
                             f"expected 'r' (read) or 'w' (write)")
        self.writable = self.flag == "w"
        self._file = open(self.uri, "wb" if self.writable else "rb")
        self._pos = 0
        self.pid = os.getpid()
        self.is_open = True

    def close(self):
        """Closes the file; closing a closed file does nothing."""
        if not self.is_open:
            return
        self._file.close()
        self._file = None
        self.is_open = False
        self.pid = None

    def reset(self):
        """Back to the first record; in 'w' mode this truncates the file."""
        self.close()
        self.open()

    def __del__(self):
        if getattr(self, "is_open", False):
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __getstate__(self):
        if self.is_open and self.writable:
            raise TypeError(f"Cannot pickle {type(self).__name__} of {self.uri}: it is open "
                            f"for writing, and reopening it would truncate the file")
        state = dict(self.__dict__)
        state["_file"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        was_open = self.is_open
        self.is_open = False
        if was_open:
            self.open()

    def _check_open(self, writing):
        if not self.is_open:
            raise ValueError(f"RecordIO file {self.uri} is closed")
        if writing != self.writable:
            raise ValueError(f"Cannot {'write' if writing else 'read'} RecordIO file "
                             f"{self.uri}: it is open with flag {self.flag!r}")

    def _check_pid(self, allow_reset=False):
        """In a process other than the opener, reopens the file (allow_reset) or raises."""
        if self.pid == os.getpid():
            return
        if allow_reset:
            self.reset()
            return
        raise RuntimeError(
            f"Forbidden operation in multiple processes: RecordIO file {self.uri} was opened "
            f"in process {self.pid}, and this is process {os.getpid()}; the two would share "
            f"one file position. Open the file again in this process (MXIndexedRecordIO's "
            f"read_idx does so by itself).")

    def tell(self):
        """The byte offset of the next record to be read or written."""
        if not self.is_open:
            raise ValueError(f"RecordIO file {self.uri} is closed")
        return self._pos

    def write(self, buf):
        """Appends `buf` (bytes or any object exposing a buffer) as one record."""
        self._check_open(writing=True)
        self._check_pid(allow_reset=False)
        data = _as_bytes(buf, "RecordIO write: a record")
        if len(data) >= _MAX_RECORD:
            raise ValueError(f"RecordIO write: a record must be shorter than 2**29 bytes, got "
                             f"{len(data)} bytes for {self.uri}")
        record = _encode_record(data)
        self._file.write(record)
        self._file.flush()  # see the class docstring: no buffered bytes survive into a fork
        self._pos += len(record)

    def read(self):
        """The next record as bytes, or None at the end of the file. A truncated or corrupt
        file raises ValueError naming it and the byte offset."""
        self._check_open(writing=False)
        self._check_pid(allow_reset=False)
        start = self._pos
        pieces = []
        while True:
            offset = self._pos
            head = self._file.read(_PART_HEADER.size)
            if not head and not pieces:
                return None
            if len(head) < _PART_HEADER.size:
                self._corrupt(start, offset, f"the file ends {len(head)} bytes into a part "
                                             f"header (8 bytes)")
            magic, lrec = _PART_HEADER.unpack(head)
            if magic != _MAGIC:
                self._corrupt(start, offset, f"found {magic:#010x} where the magic word "
                                             f"{_MAGIC:#010x} should be")
            cflag, length = lrec >> _LENGTH_BITS, lrec & (_MAX_RECORD - 1)
            expected = (_MIDDLE, _LAST) if pieces else (_WHOLE, _FIRST)
            if cflag not in expected:
                self._corrupt(start, offset, f"part has continuation flag {cflag}, expected "
                                             f"{' or '.join(map(str, expected))}")
            size = length + _padding(length)
            payload = self._file.read(size)
            self._pos = offset + _PART_HEADER.size + len(payload)
            if len(payload) < size:
                self._corrupt(start, offset, f"the part holds {length} bytes (padded to "
                                             f"{size}) but the file has {len(payload)} left")
            pieces.append(payload[:length])
            if cflag in (_WHOLE, _LAST):
                return _MAGIC_BYTES.join(pieces)

    def _corrupt(self, start, offset, what):
        raise ValueError(f"Invalid RecordIO file {self.uri}: record at byte {start}, part at "
                         f"byte {offset}: {what}")


class MXIndexedRecordIO(MXRecordIO):
    """A RecordIO file with an index file for random access by key.

    `keys` lists the keys in file order and `idx` maps each to its record's byte offset.
    `read_idx(key)` returns a record; `write_idx(key, buf)` appends one and its index line.
    Keys are `key_type(text)` of the index file's first column (int by default).
    """

    def __init__(self, idx_path, uri, flag, key_type=int):
        self.idx_path = os.fspath(idx_path)
        self.idx = {}
        self.keys = []
        self.key_type = key_type
        self._fidx = None
        super().__init__(uri, flag)

    def open(self):
        super().open()
        self.idx = {}
        self.keys = []
        try:
            self._fidx = open(self.idx_path, self.flag)
            if not self.writable:
                self._read_index()
        except BaseException:
            self.close()
            raise

    def _read_index(self):
        for lineno, line in enumerate(self._fidx, 1):
            fields = line.strip().split("\t")
            if fields == [""]:
                continue  # a blank line, e.g. a trailing one
            try:
                if len(fields) != 2:
                    raise ValueError(f"{len(fields)} tab-separated fields")
                key, offset = self.key_type(fields[0]), int(fields[1])
                if offset < 0:
                    raise ValueError("a negative offset")
            except ValueError as err:
                raise ValueError(f"Invalid index file {self.idx_path}: line {lineno} is "
                                 f"{line!r}, expected 'key<TAB>offset' ({err})") from None
            self.idx[key] = offset
            self.keys.append(key)

    def close(self):
        if self._fidx is not None:
            self._fidx.close()
            self._fidx = None
        super().close()

    def __getstate__(self):
        state = super().__getstate__()
        state["_fidx"] = None
        return state

    def seek(self, idx):
        """Moves the read position to the record of key `idx` (reopening the file first in a
        process other than the one that opened it)."""
        self._check_open(writing=False)
        self._check_pid(allow_reset=True)
        try:
            pos = self.idx[idx]
        except KeyError:
            raise KeyError(f"Key {idx!r} is not in index file {self.idx_path} "
                           f"({len(self.keys)} keys)") from None
        self._file.seek(pos)
        self._pos = pos

    def read_idx(self, idx):
        """The record of key `idx`."""
        self.seek(idx)
        record = self.read()
        if record is None:
            raise ValueError(f"Index file {self.idx_path} puts key {idx!r} at byte "
                             f"{self.idx[idx]}, at or past the end of {self.uri} "
                             f"({os.path.getsize(self.uri)} bytes)")
        return record

    def write_idx(self, idx, buf):
        """Appends `buf` as the record of key `idx` and its line to the index file."""
        self._check_open(writing=True)
        key = self.key_type(idx)
        if key in self.idx:
            raise ValueError(f"Key {key!r} was already written to {self.uri} (at byte "
                             f"{self.idx[key]}); each key may be written once")
        pos = self.tell()
        self.write(buf)
        self._fidx.write("%s\t%d\n" % (str(key), pos))
        self._fidx.flush()
        self.idx[key] = pos
        self.keys.append(key)


IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """The header of a packed record (see `pack`): `flag` (set by pack: 0 for a
scalar label, else the number of labels), `label` (a float or a 1-D array of float32), `id` and
`id2` (unsigned 64-bit ints: a record id and its high-order part, usually 0)."""

_IR_FORMAT = struct.Struct("<IfQQ")
_IR_SIZE = _IR_FORMAT.size


def _check_uint(name, value, bits):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or not 0 <= value < 1 << bits:
        raise ValueError(f"pack: header.{name} must be an integer in [0, 2**{bits}), got "
                         f"{value!r}")


def pack(header, s):
    """`header` (an IRHeader or a 4-sequence) and the bytes `s` as one record's bytes. A number
    label is stored in the header (flag 0); an array-like label is stored as float32 values
    before `s`, with flag set to their count and the header's label to 0."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = onp.asarray(header.label, dtype=onp.float32)
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + _as_bytes(s, "pack: s")
    _check_uint("id", header.id, 64)
    _check_uint("id2", header.id2, 64)
    _check_uint("flag", header.flag, 32)
    return _IR_FORMAT.pack(*header) + _as_bytes(s, "pack: s")


def unpack(s):
    """(IRHeader, payload bytes) of a record made by `pack`. The label is a float (flag 0) or
    a float32 NumPy array of `flag` values."""
    if len(s) < _IR_SIZE:
        raise ValueError(f"unpack: a packed record starts with a {_IR_SIZE}-byte header, got "
                         f"{len(s)} bytes")
    header = IRHeader(*_IR_FORMAT.unpack_from(s))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        label_bytes = 4 * header.flag
        if len(s) < label_bytes:
            raise ValueError(f"unpack: the header says {header.flag} float32 labels "
                             f"({label_bytes} bytes) follow, but only {len(s)} bytes do")
        header = header._replace(label=onp.frombuffer(s, onp.float32, header.flag))
        s = s[label_bytes:]
    return header, s


_JPEG_FORMATS = (".jpg", ".jpeg")
_PNG_FORMATS = (".png",)
_PNG_MAX_COMPRESSION = 9


def pack_img(header, img, quality=95, img_fmt=".jpg"):
    """`header` and the image `img` encoded as JPEG or PNG, as one record's bytes (see `pack`).

    img: a uint8 array in OpenCV's channel order, (H, W) or (H, W, 1) grayscale, (H, W, 3) BGR,
    or (H, W, 4) BGRA (JPEG keeps no alpha: it is dropped, as OpenCV does).
    quality: the JPEG quality, 0-100; for PNG the zlib compression level 0-9 (values above 9
    mean 9, as in OpenCV, so the default 95 compresses most).
    img_fmt: '.jpg', '.jpeg' or '.png', in any case.
    """
    fmt = img_fmt.lower() if isinstance(img_fmt, str) else img_fmt
    if fmt not in _JPEG_FORMATS + _PNG_FORMATS:
        raise ValueError(f"pack_img: img_fmt {img_fmt!r} is not supported; use '.jpg', "
                         f"'.jpeg' or '.png'")
    if isinstance(quality, bool) or not isinstance(quality, numbers.Integral):
        raise TypeError(f"pack_img: quality must be an int, got {quality!r}")
    jpeg = fmt in _JPEG_FORMATS
    if quality < 0 or (jpeg and quality > 100):
        raise ValueError(f"pack_img: quality {quality} is out of range: 0-100 for JPEG, a "
                         f"non-negative compression level for PNG")
    image = _to_pillow(onp.asarray(img), jpeg)
    out = io.BytesIO()
    if jpeg:
        image.save(out, format="JPEG", quality=int(quality))
    else:
        image.save(out, format="PNG", compress_level=min(int(quality), _PNG_MAX_COMPRESSION))
    return pack(header, out.getvalue())


def _to_pillow(img, jpeg):
    """A Pillow image of an OpenCV-ordered uint8 array (see pack_img)."""
    if img.dtype != onp.uint8:
        raise TypeError(f"pack_img: img must be uint8, got {img.dtype}")
    if img.ndim == 3 and img.shape[2] == 1:
        img = img[:, :, 0]
    if img.ndim == 3 and img.shape[2] == 4 and jpeg:
        img = img[:, :, :3]
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[2] not in (3, 4)) \
            or 0 in img.shape:
        raise ValueError(f"pack_img: img must be a non-empty (H, W) or (H, W, 1) grayscale, "
                         f"(H, W, 3) BGR or (H, W, 4) BGRA array, got shape {img.shape}")
    if img.ndim == 2:
        return Image.fromarray(onp.ascontiguousarray(img), "L")
    if img.shape[2] == 3:
        return Image.fromarray(onp.ascontiguousarray(img[:, :, ::-1]), "RGB")
    return Image.fromarray(onp.ascontiguousarray(img[:, :, [2, 1, 0, 3]]), "RGBA")


_ALPHA_MODES = ("RGBA", "LA", "PA")
_DECODED_MODES = ("1", "L", "P", "RGB", "CMYK", "YCbCr") + _ALPHA_MODES  # 8 bits a channel


def unpack_img(s, iscolor=-1):
    """(IRHeader, image) of a record made by `pack_img` (or any packed JPEG/PNG image).

    iscolor (OpenCV's imdecode flags): 1 gives (H, W, 3) BGR; 0 gives (H, W) grayscale; -1
    (the default) keeps what is stored: (H, W) for grayscale, (H, W, 3) BGR, or (H, W, 4) BGRA
    for images with alpha. Colour and grayscale results follow the EXIF orientation, as
    OpenCV's do. The image is a uint8 NumPy array.
    """
    if iscolor not in (-1, 0, 1):
        raise ValueError(f"unpack_img: iscolor must be -1 (unchanged), 0 (grayscale) or 1 "
                         f"(colour), got {iscolor!r}")
    header, payload = unpack(s)
    return header, _decode(payload, iscolor,
                           f"unpack_img: the record's payload ({len(payload)} bytes, id "
                           f"{header.id})")


def _decode(payload, iscolor, what):
    """The uint8 array of the encoded image `payload` as unpack_img describes; `what` starts
    the message of the ValueError raised when it cannot be decoded."""
    try:
        with Image.open(io.BytesIO(payload)) as image:
            if iscolor == 0:
                # libjpeg then decodes the luma channel alone, as OpenCV has it do
                image.draft("L", image.size)
            image.load()
            if image.mode not in _DECODED_MODES:
                raise ValueError(f"images of Pillow mode {image.mode} (not 8 bits per "
                                 f"channel) are not supported")
            if iscolor == -1:
                mode = "RGBA" if image.mode in _ALPHA_MODES or "transparency" in image.info \
                    else "L" if image.mode in ("1", "L") else "RGB"
            else:
                image = ImageOps.exif_transpose(image)
                mode = "RGB" if iscolor == 1 else "L"
            array = onp.asarray(image.convert(mode), dtype=onp.uint8)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise ValueError(f"{what} is not a decodable image: {err}") from err
    if array.ndim == 3:  # OpenCV's order: BGR / BGRA
        array = array[:, :, [2, 1, 0, 3][:array.shape[2]]]
    return array
