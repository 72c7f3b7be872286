"""pymx.recordio and the RecordIO datasets: the on-disk format byte for byte (written out here
from Note [RecordIO on disk]), round trips, images, pickling and fork safety, errors."""
import io
import multiprocessing
import os
import pickle
import struct

import numpy as onp
import pytest
from PIL import Image

import pymx
from pymx import np, recordio
from pymx.gluon.data import DataLoader, RecordFileDataset
from pymx.gluon.data.vision import ImageRecordDataset

MAGIC = b"\x0a\x23\xd7\xce"  # 0xced7230a, little-endian


def part(cflag, payload):
    """One part as dmlc-core writes it: magic, lrec (flag << 29 | length), payload, padding."""
    return MAGIC + struct.pack("<I", cflag << 29 | len(payload)) + payload \
        + b"\0" * (-len(payload) % 4)


def write_records(path, records):
    with recordio.MXRecordIO(str(path), "w") as rec:
        for record in records:
            rec.write(record)
    return path.read_bytes()


def read_all(path):
    with recordio.MXRecordIO(str(path), "r") as rec:
        return list(iter(rec.read, None))


# -------------------------------------------------------------------------------------------
# The file format
# -------------------------------------------------------------------------------------------
def test_plain_records_are_one_part_padded_to_4_bytes(tmp_path):
    records = [b"abc", b"abcd", b"", b"hello"]
    expected = (MAGIC + b"\x03\x00\x00\x00abc\x00" + MAGIC + b"\x04\x00\x00\x00abcd"
                + MAGIC + b"\x00\x00\x00\x00" + MAGIC + b"\x05\x00\x00\x00hello\x00\x00\x00")
    assert write_records(tmp_path / "a.rec", records) == expected
    assert read_all(tmp_path / "a.rec") == records


def test_magic_at_aligned_offsets_splits_the_record(tmp_path):
    # aligned magic at 0, 8 and 12 (the end): parts flagged first, middle, middle, last; the
    # magic at offset 5 is not aligned and stays inside a part
    record = MAGIC + b"xy" + MAGIC + b"12" + MAGIC + MAGIC + b"end"
    # offsets: MAGIC@0, 'xy'@4, MAGIC@6 (unaligned), '12'@10, MAGIC@12, MAGIC@16, 'end'@20
    expected = (part(1, b"") + part(2, b"xy" + MAGIC + b"12") + part(2, b"")
                + part(3, b"end"))
    assert write_records(tmp_path / "m.rec", [record]) == expected
    assert expected[4:8] == struct.pack("<I", 1 << 29)  # first part: flag 1, length 0
    assert read_all(tmp_path / "m.rec") == [record]


def test_unaligned_magic_and_magic_at_the_end(tmp_path):
    unaligned = b"ab" + MAGIC + b"cd"
    ends_with_magic = b"abcd" + MAGIC
    data = write_records(tmp_path / "u.rec", [unaligned, ends_with_magic, MAGIC])
    assert data == (part(0, unaligned) + part(1, b"abcd") + part(3, b"")
                    + part(1, b"") + part(3, b""))
    assert read_all(tmp_path / "u.rec") == [unaligned, ends_with_magic, MAGIC]


def test_hand_assembled_file_is_read(tmp_path):
    path = tmp_path / "h.rec"
    path.write_bytes(part(0, b"one") + part(1, b"ab\0\0") + part(2, b"") + part(3, b"z")
                     + part(0, b"four"))
    assert read_all(path) == [b"one", b"ab\0\0" + MAGIC + MAGIC + b"z", b"four"]


def test_random_records_round_trip(tmp_path):
    rng = onp.random.default_rng(0)
    records = []
    for size in rng.integers(0, 64, 30):
        words = rng.integers(0, 3, (size + 3) // 4)
        # many words are the magic, at aligned and unaligned offsets
        chunks = [MAGIC if w == 0 else rng.bytes(4) for w in words]
        records.append(rng.bytes(int(rng.integers(0, 4))) + b"".join(chunks)[:size])
    write_records(tmp_path / "r.rec", records)
    assert read_all(tmp_path / "r.rec") == records


def test_tell_reset_and_bytes_like_records(tmp_path):
    path = str(tmp_path / "t.rec")
    with recordio.MXRecordIO(path, "w") as rec:
        assert rec.tell() == 0
        rec.write(bytearray(b"abc"))
        assert rec.tell() == 12
        rec.write(onp.arange(3, dtype=onp.uint16))  # its 6 bytes
        assert rec.tell() == 12 + 16
    rec = recordio.MXRecordIO(path, "r")
    assert rec.read() == b"abc" and rec.tell() == 12
    assert rec.read() == onp.arange(3, dtype=onp.uint16).tobytes()
    assert rec.read() is None and rec.read() is None
    rec.reset()
    assert rec.read() == b"abc"
    rec.close()
    rec.close()  # closing twice is harmless
    writer = recordio.MXRecordIO(path, "w")
    writer.write(b"x")
    writer.reset()  # in 'w' mode: truncates
    writer.close()
    assert os.path.getsize(path) == 0


# -------------------------------------------------------------------------------------------
# Indexed files
# -------------------------------------------------------------------------------------------
def test_indexed_file_and_its_index_lines(tmp_path):
    idx, rec = str(tmp_path / "d.idx"), str(tmp_path / "d.rec")
    with recordio.MXIndexedRecordIO(idx, rec, "w") as writer:
        for key in (7, 2, 11):
            writer.write_idx(key, b"record %d" % key)
    # 'record 7' is 8 bytes: 16 bytes a record; 'record 11' 9 bytes
    assert open(idx).read() == "7\t0\n2\t16\n11\t32\n"
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    assert reader.keys == [7, 2, 11] and reader.idx == {7: 0, 2: 16, 11: 32}
    assert [reader.read_idx(k) for k in (11, 7, 2, 11)] == [b"record 11", b"record 7",
                                                             b"record 2", b"record 11"]
    assert reader.read() is None  # sequential reads go on from the last record read
    reader.close()
    with recordio.MXIndexedRecordIO(idx, rec, "r", key_type=str) as by_name:
        assert by_name.keys == ["7", "2", "11"] and by_name.read_idx("2") == b"record 2"


def test_index_lines_as_mxnet_reads_them(tmp_path):
    rec = tmp_path / "d.rec"
    rec.write_bytes(part(0, b"a") + part(0, b"b"))
    (tmp_path / "d.idx").write_text("1\t12\n1\t0\n\n")  # a repeated key; a blank last line
    reader = recordio.MXIndexedRecordIO(str(tmp_path / "d.idx"), str(rec), "r")
    assert reader.keys == [1, 1] and reader.read_idx(1) == b"a"


# -------------------------------------------------------------------------------------------
# pack / unpack
# -------------------------------------------------------------------------------------------
def test_pack_scalar_label_header_bytes():
    packed = recordio.pack(recordio.IRHeader(5, 2.5, 2 ** 64 - 1, 3), b"data")
    assert packed == (struct.pack("<I", 0) + struct.pack("<f", 2.5) + b"\xff" * 8
                      + struct.pack("<Q", 3) + b"data")
    header, payload = recordio.unpack(packed)
    assert header == recordio.IRHeader(0, 2.5, 2 ** 64 - 1, 3) and payload == b"data"
    assert isinstance(header.label, float)


def test_pack_label_vector_header_bytes():
    packed = recordio.pack((0, [1, -2.5, 3e6], 9, 0), b"xy")
    assert packed == (struct.pack("<IfQQ", 3, 0.0, 9, 0) + struct.pack("<3f", 1, -2.5, 3e6)
                      + b"xy")
    header, payload = recordio.unpack(packed)
    assert (header.flag, header.id, header.id2, payload) == (3, 9, 0, b"xy")
    assert header.label.dtype == onp.float32
    onp.testing.assert_array_equal(header.label, onp.array([1, -2.5, 3e6], onp.float32))
    # a NumPy or pymx array label, and a 0-d one, are vectors too
    assert recordio.unpack(recordio.pack((0, onp.ones(2), 1, 0), b""))[0].flag == 2
    assert recordio.unpack(recordio.pack((0, np.ones(4), 1, 0), b""))[0].flag == 4
    assert recordio.unpack(recordio.pack((0, onp.array(7.0), 1, 0), b""))[0].flag == 1
    assert recordio.unpack(recordio.pack((0, onp.float32(7), 1, 0), b""))[0].flag == 0


# -------------------------------------------------------------------------------------------
# Images
# -------------------------------------------------------------------------------------------
def _image(shape, seed=1):
    return onp.random.default_rng(seed).integers(0, 256, shape, dtype=onp.uint8)


def _pillow_decode(packed):
    return onp.asarray(Image.open(io.BytesIO(recordio.unpack(packed)[1])))


def test_pack_img_takes_bgr_and_unpack_img_gives_bgr():
    bgr = onp.zeros((2, 3, 3), onp.uint8)
    bgr[..., 0] = 200  # blue, in OpenCV's order
    packed = recordio.pack_img((0, 1.0, 4, 0), bgr, img_fmt=".png")
    onp.testing.assert_array_equal(_pillow_decode(packed)[0, 0], [0, 0, 200])  # RGB on disk
    header, out = recordio.unpack_img(packed)
    assert header == recordio.IRHeader(0, 1.0, 4, 0)
    onp.testing.assert_array_equal(out, bgr)


@pytest.mark.parametrize("shape", [(5, 7), (5, 7, 1), (5, 7, 3), (5, 7, 4)])
def test_png_round_trip_is_exact(shape):
    img = _image(shape)
    packed = recordio.pack_img((0, [1, 2], 0, 0), img, quality=3, img_fmt=".PNG")
    header, out = recordio.unpack_img(packed)  # iscolor=-1: as stored
    onp.testing.assert_array_equal(header.label, [1, 2])
    onp.testing.assert_array_equal(out, img[:, :, 0] if shape == (5, 7, 1) else img)
    assert out.dtype == onp.uint8


def test_unpack_img_iscolor_conversions():
    bgr = _image((4, 6, 3))
    packed = recordio.pack_img((0, 0, 0, 0), bgr, img_fmt=".png")
    onp.testing.assert_array_equal(recordio.unpack_img(packed, 1)[1], bgr)
    gray = recordio.unpack_img(packed, 0)[1]
    b, g, r = (bgr[..., i].astype(onp.float64) for i in range(3))
    luma = 0.299 * r + 0.587 * g + 0.114 * b  # ITU-R 601-2, to within one level
    assert gray.shape == (4, 6) and onp.abs(gray - luma).max() <= 1.0
    gray_packed = recordio.pack_img((0, 0, 0, 0), bgr[..., 0], img_fmt=".png")
    onp.testing.assert_array_equal(recordio.unpack_img(gray_packed, 1)[1],
                                   onp.repeat(bgr[..., :1], 3, axis=2))
    bgra = _image((4, 6, 4))
    bgra_packed = recordio.pack_img((0, 0, 0, 0), bgra, img_fmt=".png")
    onp.testing.assert_array_equal(recordio.unpack_img(bgra_packed, 1)[1], bgra[..., :3])


def test_jpeg_round_trip_within_tolerance():
    # a smooth image: JPEG at quality 95 keeps it within a few levels
    y, x = onp.mgrid[0:16, 0:24]
    bgr = onp.stack([x * 10, y * 15, (x + y) * 6], axis=2).astype(onp.uint8)
    for fmt in (".jpg", ".JPEG"):
        packed = recordio.pack_img((0, 3.0, 1, 0), bgr, img_fmt=fmt)
        assert recordio.unpack(packed)[1][:2] == b"\xff\xd8"  # a JPEG stream
        header, out = recordio.unpack_img(packed, 1)
        assert out.shape == bgr.shape and header.label == 3.0
        error = onp.abs(out.astype(onp.int64) - bgr)
        assert error.mean() < 2.0 and error.max() <= 12
    low = recordio.pack_img((0, 0, 0, 0), bgr, quality=10)
    assert len(low) < len(recordio.pack_img((0, 0, 0, 0), bgr, quality=95))
    # JPEG keeps no alpha: a BGRA image loses it, as in OpenCV
    bgra = onp.concatenate([bgr, onp.full(bgr.shape[:2] + (1,), 9, onp.uint8)], axis=2)
    assert recordio.unpack_img(recordio.pack_img((0, 0, 0, 0), bgra))[1].shape == bgr.shape


# -------------------------------------------------------------------------------------------
# Pickling and processes
# -------------------------------------------------------------------------------------------
def test_pickled_reader_reopens_at_the_first_record(tmp_path):
    path = tmp_path / "p.rec"
    write_records(path, [b"a", b"b"])
    reader = recordio.MXRecordIO(str(path), "r")
    assert reader.read() == b"a"
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.read() == b"a" and reader.read() == b"b"  # the original goes on
    reader.close()
    closed = pickle.loads(pickle.dumps(reader))
    assert not closed.is_open


def test_pickling_an_open_writer_raises(tmp_path):
    writer = recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    with pytest.raises(TypeError, match="open for writing"):
        pickle.dumps(writer)
    writer.close()
    pickle.dumps(writer)


def _read_in_child(reader, queue):
    try:
        queue.put(("read_idx", reader.read_idx(2)))
        queue.put(("read", reader.read()))  # the child's own, reopened file
    except Exception as err:  # noqa: BLE001 -- sent back to the parent to assert on
        queue.put(("error", repr(err)))


def _sequential_read_in_child(reader, queue):
    try:
        reader.read()
        queue.put("no error")
    except RuntimeError as err:
        queue.put(str(err))


def test_forked_child_reopens_for_read_idx_and_refuses_sequential_reads(tmp_path):
    idx, rec = str(tmp_path / "f.idx"), str(tmp_path / "f.rec")
    with recordio.MXIndexedRecordIO(idx, rec, "w") as writer:
        for key in range(3):
            writer.write_idx(key, b"r%d" % key)
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    assert reader.read_idx(0) == b"r0"
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_read_in_child, args=(reader, queue))
    child.start()
    assert [queue.get(timeout=60) for _ in range(2)] == [("read_idx", b"r2"), ("read", None)]
    child.join()
    assert reader.read() == b"r1"  # the parent's position did not move
    child = context.Process(target=_sequential_read_in_child, args=(reader, queue))
    child.start()
    message = queue.get(timeout=60)
    child.join()
    assert "Forbidden operation in multiple processes" in message and rec in message


# -------------------------------------------------------------------------------------------
# Datasets
# -------------------------------------------------------------------------------------------
@pytest.fixture
def image_file(tmp_path):
    """data.rec/.idx: 5 PNG images (BGR, as pack_img takes them), scalar and vector labels."""
    images = [_image((5, 6, 3), seed=i) for i in range(5)]
    labels = [0.0, [1.0, 10.0], 4.0, [0.5], 7.0]
    with recordio.MXIndexedRecordIO(str(tmp_path / "data.idx"), str(tmp_path / "data.rec"),
                                    "w") as writer:
        for i, (img, label) in enumerate(zip(images, labels)):
            writer.write_idx(i, recordio.pack_img((0, label, i, 0), img, img_fmt=".png"))
    return tmp_path / "data.rec", images, labels


def test_record_file_dataset(image_file):
    path, _, _ = image_file
    dataset = RecordFileDataset(str(path))
    assert len(dataset) == 5 and dataset.idx_file == str(path.with_suffix(".idx"))
    header, _ = recordio.unpack(dataset[3])
    assert header.id == 3 and dataset[-1] == dataset[4]


def test_image_record_dataset_gives_rgb_hwc_uint8_on_cpu(image_file):
    path, images, labels = image_file
    dataset = ImageRecordDataset(str(path))
    assert len(dataset) == 5
    for i in (0, 1):
        image, label = dataset[i]
        assert isinstance(image, np.ndarray) and image.dtype == onp.uint8
        assert image.device == pymx.cpu()
        onp.testing.assert_array_equal(image.asnumpy(), images[i][:, :, ::-1])
        onp.testing.assert_array_equal(label, labels[i])
    assert isinstance(dataset[0][1], float) and dataset[1][1].dtype == onp.float32
    gray, _ = ImageRecordDataset(str(path), flag=0)[2]
    assert gray.shape == (5, 6, 1)
    with pymx.cpu(3):  # a device scope (a GPU's, say) does not move the decoding off the CPU
        assert dataset[0][0].device == pymx.cpu()
    scaled = ImageRecordDataset(str(path), transform=lambda x, y: (x.astype("float32") / 255,
                                                                   y))
    onp.testing.assert_allclose(scaled[4][0].asnumpy(), images[4][:, :, ::-1] / 255.0,
                                rtol=1e-6)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_image_record_dataset_through_data_loader(image_file, num_workers):
    path, images, labels = image_file
    # the samples with scalar labels (0, 2 and 4), as float32 images
    dataset = ImageRecordDataset(str(path)).filter(lambda sample: onp.ndim(sample[1]) == 0)
    loader = DataLoader(dataset.transform_first(lambda x: x.astype("float32")), batch_size=2,
                        num_workers=num_workers)
    batches = [(x.asnumpy(), y.asnumpy()) for x, y in loader]
    assert [x.shape for x, _ in batches] == [(2, 5, 6, 3), (1, 5, 6, 3)]
    for (x, y), indices in zip(batches, ([0, 2], [4])):
        for row, i in enumerate(indices):
            onp.testing.assert_array_equal(x[row], images[i][:, :, ::-1].astype(onp.float32))
            assert y[row] == labels[i]


def test_raw_records_through_data_loader_workers(image_file):
    path, _, _ = image_file
    dataset = RecordFileDataset(str(path)).transform(
        lambda record: onp.int64(recordio.unpack(record)[0].id))
    ids = [b.asnumpy().tolist() for b in DataLoader(dataset, batch_size=2, num_workers=2)]
    assert ids == [[0, 1], [2, 3], [4]]


# -------------------------------------------------------------------------------------------
# Errors
# -------------------------------------------------------------------------------------------
def test_bad_flags(tmp_path):
    path = str(tmp_path / "x.rec")
    with pytest.raises(ValueError, match=r"Invalid flag 'a' for RecordIO file .*x\.rec"):
        recordio.MXRecordIO(path, "a")
    with pytest.raises(ValueError, match="Invalid flag 'rw'"):
        recordio.MXIndexedRecordIO(str(tmp_path / "x.idx"), path, "rw")
    with pytest.raises(ValueError, match="flag must be 0 .* or 1 .*, got 2"):
        ImageRecordDataset(path, flag=2)


def test_misuse_of_open_and_closed_files(tmp_path):
    path = str(tmp_path / "x.rec")
    writer = recordio.MXRecordIO(path, "w")
    with pytest.raises(ValueError, match=r"Cannot read RecordIO file .*x\.rec: it is open "
                                         r"with flag 'w'"):
        writer.read()
    with pytest.raises(TypeError, match="a record must be bytes-like, got str"):
        writer.write("text")
    writer.close()
    with pytest.raises(ValueError, match=r"RecordIO file .*x\.rec is closed"):
        writer.write(b"x")
    with pytest.raises(ValueError, match="is closed"):
        writer.tell()
    with recordio.MXRecordIO(path, "r") as reader:
        with pytest.raises(ValueError, match="Cannot write .* it is open with flag 'r'"):
            reader.write(b"x")
    assert not reader.is_open


@pytest.mark.parametrize("data, where, what", [
    (part(0, b"abcdef")[:10], "part at byte 0", "holds 6 bytes .* has 2 left"),
    (part(0, b"abcd")[:6], "part at byte 0", "ends 6 bytes into a part header"),
    (part(0, b"ok") + part(1, b"abcd") + part(3, b"ef")[:9],
     "record at byte 12, part at byte 24", "holds 2 bytes .* has 1 left"),
    (part(0, b"ok") + part(1, b"abcd"), "record at byte 12, part at byte 24",
     "ends 0 bytes into a part header"),
    (part(0, b"ok") + b"\x01\x02\x03\x04" + part(0, b"x")[4:],
     "record at byte 12, part at byte 12",
     "found 0x04030201 where the magic word 0xced7230a should be"),
    (part(2, b"ab"), "part at byte 0", "continuation flag 2, expected 0 or 1"),
    (part(1, b"ab") + part(0, b"cd"), "part at byte 12", "continuation flag 0, expected 2 or 3"),
])
def test_truncated_and_corrupt_files_name_file_and_offset(tmp_path, data, where, what):
    path = tmp_path / "bad.rec"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=rf"Invalid RecordIO file .*bad\.rec: .*{where}: "
                                         rf".*{what}"):
        read_all(path)


def test_index_file_errors(tmp_path):
    rec, idx = tmp_path / "d.rec", tmp_path / "d.idx"
    rec.write_bytes(part(0, b"a"))
    for text, detail in (("0\t0\nzero\t12\n", "line 2 is 'zero\\\\t12\\\\n'"),
                         ("0\n", "line 1 is '0\\\\n'.*1 tab-separated fields"),
                         ("0\t-4\n", "line 1 .*a negative offset")):
        idx.write_text(text)
        with pytest.raises(ValueError, match=rf"Invalid index file .*d\.idx: {detail}"):
            recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    idx.write_text("0\t0\n1\t12\n")
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    with pytest.raises(KeyError, match=r"Key 5 is not in index file .*d\.idx \(2 keys\)"):
        reader.read_idx(5)
    with pytest.raises(ValueError, match=r"puts key 1 at byte 12, at or past the end of "
                                         r".*d\.rec \(12 bytes\)"):
        reader.read_idx(1)
    with pytest.raises(FileNotFoundError):
        RecordFileDataset(str(tmp_path / "missing.rec"))
    with recordio.MXIndexedRecordIO(str(idx), str(rec), "w") as writer:
        writer.write_idx(3, b"a")
        with pytest.raises(ValueError, match=r"Key 3 was already written to .*d\.rec \(at "
                                             r"byte 0\)"):
            writer.write_idx(3, b"b")


def test_pack_and_unpack_errors():
    with pytest.raises(ValueError, match=r"header.id must be an integer in \[0, 2\*\*64\), "
                                         r"got -1"):
        recordio.pack((0, 1.0, -1, 0), b"")
    with pytest.raises(ValueError, match="header.id2 .* got 2.5"):
        recordio.pack((0, 1.0, 0, 2.5), b"")
    with pytest.raises(TypeError, match="pack: s must be bytes-like, got str"):
        recordio.pack((0, 1.0, 0, 0), "text")
    with pytest.raises(ValueError, match="starts with a 24-byte header, got 10 bytes"):
        recordio.unpack(b"\0" * 10)
    short = recordio.pack((0, [1.0, 2.0, 3.0], 0, 0), b"")[:-4]
    with pytest.raises(ValueError, match=r"3 float32 labels \(12 bytes\) follow, but only 8"):
        recordio.unpack(short)


def test_pack_img_and_unpack_img_errors():
    img = _image((3, 4, 3))
    header = (0, 0.0, 0, 0)
    with pytest.raises(ValueError, match=r"img_fmt '\.bmp' is not supported"):
        recordio.pack_img(header, img, img_fmt=".bmp")
    with pytest.raises(ValueError, match="quality 101 is out of range"):
        recordio.pack_img(header, img, quality=101)
    with pytest.raises(ValueError, match="quality -1 is out of range"):
        recordio.pack_img(header, img, quality=-1, img_fmt=".png")
    with pytest.raises(TypeError, match="quality must be an int, got 9.5"):
        recordio.pack_img(header, img, quality=9.5)
    with pytest.raises(TypeError, match="img must be uint8, got float32"):
        recordio.pack_img(header, img.astype(onp.float32))
    for shape in ((3, 4, 2), (3,), (0, 4, 3), (2, 3, 4, 3)):
        with pytest.raises(ValueError, match=rf"got shape {re_shape(shape)}"):
            recordio.pack_img(header, onp.zeros(shape, onp.uint8))
    with pytest.raises(ValueError, match="iscolor must be -1 .*, got 2"):
        recordio.unpack_img(recordio.pack_img(header, img), 2)
    with pytest.raises(ValueError, match=r"payload \(9 bytes, id 6\) is not a decodable image"):
        recordio.unpack_img(recordio.pack((0, 0.0, 6, 0), b"not image"))
    png = recordio.unpack(recordio.pack_img(header, img, img_fmt=".png"))[1]
    with pytest.raises(ValueError, match="is not a decodable image"):
        recordio.unpack_img(recordio.pack(header, png[:len(png) // 2]))
    out = io.BytesIO()
    Image.fromarray(onp.full((2, 2), 1000, onp.uint16)).save(out, format="PNG")  # 16-bit
    with pytest.raises(ValueError, match="Pillow mode I;16 .* not supported"):
        recordio.unpack_img(recordio.pack(header, out.getvalue()))


def re_shape(shape):
    return str(shape).replace("(", r"\(").replace(")", r"\)")


# -------------------------------------------------------------------------------------------
# python -m pymx.tools.im2rec
# -------------------------------------------------------------------------------------------
@pytest.fixture
def image_tree(tmp_path):
    """root/{cat,dog}/<n>.png (RGB pixels kept for the checks) and root/top.png."""
    root = tmp_path / "root"
    rng = onp.random.default_rng(3)
    pixels = {}
    for name in ("cat/0.png", "cat/1.png", "dog/0.PNG", "top.png"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pixels[name] = rng.integers(0, 256, (6, 10, 3), dtype=onp.uint8)
        Image.fromarray(pixels[name]).save(root / name)
    (root / "dog" / "notes.txt").write_text("not an image")
    return root, pixels


def test_im2rec_lists(image_tree, tmp_path, capsys):
    from pymx.tools import im2rec
    root, _ = image_tree
    assert im2rec.main(["--list", "--recursive", "--no-shuffle", str(tmp_path / "all"),
                        str(root)]) == 0
    # a label per folder holding images, in walk order (root first), printed
    assert (tmp_path / "all.lst").read_text() == (
        "0\t0.000000\ttop.png\n1\t1.000000\tcat/0.png\n2\t1.000000\tcat/1.png\n"
        "3\t2.000000\tdog/0.PNG\n")
    assert ". 0\ncat 1\ndog 2\n" in capsys.readouterr().out
    assert im2rec.main(["--list", str(tmp_path / "flat"), str(root)]) == 0
    assert (tmp_path / "flat.lst").read_text() == "0\t0.000000\ttop.png\n"
    im2rec.main(["--list", "--recursive", "--train-ratio", "0.5", "--test-ratio", "0.25",
                 str(tmp_path / "split"), str(root)])
    lines = {part: (tmp_path / f"split_{part}.lst").read_text().splitlines()
             for part in ("train", "val", "test")}
    assert [len(lines[p]) for p in ("train", "val", "test")] == [2, 1, 1]
    assert sorted(line.split("\t")[0] for p in lines for line in lines[p]) == list("0123")


@pytest.mark.parametrize("num_thread", [1, 2])
def test_im2rec_packs_the_listed_images(image_tree, tmp_path, num_thread):
    from pymx.tools import im2rec
    root, pixels = image_tree
    prefix = str(tmp_path / "data")
    (tmp_path / "data.lst").write_text("7\t1.000000\tcat/1.png\n3\t2.000000\ttop.png\n"
                                       "bad line\n")
    assert im2rec.main([prefix, str(root), "--encoding", ".png",
                        "--num-thread", str(num_thread)]) == 0
    dataset = ImageRecordDataset(prefix + ".rec")
    assert dataset._record.keys == [7, 3]
    for i, (name, label) in enumerate((("cat/1.png", 1.0), ("top.png", 2.0))):
        image, got_label = dataset[i]
        onp.testing.assert_array_equal(image.asnumpy(), pixels[name])
        assert got_label == label


def test_im2rec_options(image_tree, tmp_path, capsys):
    from pymx.tools import im2rec
    root, _ = image_tree
    prefix = str(tmp_path / "o")
    (tmp_path / "o.lst").write_text("0\t1.000000\t5.000000\tcat/0.png\n")
    im2rec.main([prefix, str(root), "--pass-through", "--pack-label"])
    header, payload = recordio.unpack(RecordFileDataset(prefix + ".rec")[0])
    assert payload == (root / "cat" / "0.png").read_bytes()
    onp.testing.assert_array_equal(header.label, [1.0, 5.0])
    im2rec.main([prefix, str(root), "--center-crop", "--resize", "4", "--color", "0"])
    header, image = recordio.unpack_img(RecordFileDataset(prefix + ".rec")[0])
    assert image.shape == (4, 4) and header.label == 1.0  # a JPEG of the 6x6 centre, resized
    (tmp_path / "o.lst").write_text("0\t1.000000\tmissing.png\n")
    assert im2rec.main([prefix, str(root)]) == 1
    assert "skipping " + str(root / "missing.png") in capsys.readouterr().err
    assert im2rec.main([str(tmp_path / "none"), str(root)]) == 1
