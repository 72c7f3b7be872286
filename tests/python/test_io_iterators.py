"""pymx.io: DataDesc / DataBatch / DataIter, NDArrayIter's last-batch modes over several
epochs, ResizeIter, PrefetchingIter, CSVIter and ImageRecordIter (a small .rec written with
pymx.recordio)."""
import threading

import numpy as onp
import pytest

import pymx
from pymx import np, recordio
from conftest import requires_gpu
from pymx.io import (CSVIter, DataBatch, DataDesc, DataIter, ImageRecordIter, NDArrayIter,
                     PrefetchingIter, ResizeIter)


def _epochs(it, count):
    """[[(first data column as ints, pad) per batch] per epoch], resetting between epochs."""
    result = []
    for _ in range(count):
        result.append([(batch.data[0].asnumpy()[:, 0].astype(int).tolist(), batch.pad)
                       for batch in it])
        it.reset()
    return result


def _examples(n):
    """n examples whose data row k is [k, 100 + k] and label k."""
    data = onp.stack([onp.arange(n), 100 + onp.arange(n)], axis=1).astype(onp.float32)
    return data, onp.arange(n, dtype=onp.float32)


# ---------------------------------------------------------------- DataDesc, DataBatch, DataIter

def test_data_desc_and_batch():
    desc = DataDesc("data", (2, 3))
    assert desc == ("data", (2, 3)) and desc.dtype == onp.float32 and desc.layout == "NCHW"
    assert repr(desc) == "DataDesc[data,(2, 3),<class 'numpy.float32'>,NCHW]"
    assert DataDesc.get_batch_axis("TNC") == 1 and DataDesc.get_batch_axis(None) == 0
    descs = DataDesc.get_list([("a", (1,)), ("b", (2,))], [("a", onp.int32), ("b", onp.uint8)])
    assert [(d.name, d.dtype) for d in descs] == [("a", onp.int32), ("b", onp.uint8)]
    batch = DataBatch([np.zeros((2, 3))], [np.zeros((2,))], pad=1)
    assert str(batch) == "DataBatch: data shapes: [(2, 3)] label shapes: [(2,)]"
    with pytest.raises(TypeError, match="data must be a list of arrays, got ndarray"):
        DataBatch(np.zeros((2, 3)))


def test_data_iter_protocol_from_iter_next():
    class Countdown(DataIter):
        def __init__(self):
            super().__init__(batch_size=1)
            self.left = 2

        def iter_next(self):
            self.left -= 1
            return self.left >= 0

        def getdata(self):
            return [np.array([self.left])]

        def getlabel(self):
            return []

        def getpad(self):
            return 0

    batches = list(Countdown())
    assert [b.data[0].asnumpy().tolist() for b in batches] == [[1], [0]]
    with pytest.raises(NotImplementedError, match="DataIter must define next"):
        DataIter().next()


# ---------------------------------------------------------------- NDArrayIter

def test_ndarray_iter_pad_over_epochs():
    data, label = _examples(10)
    it = NDArrayIter(data, label, batch_size=3, last_batch_handle="pad")
    epoch = [([0, 1, 2], 0), ([3, 4, 5], 0), ([6, 7, 8], 0), ([9, 0, 1], 2)]
    assert _epochs(it, 3) == [epoch] * 3
    # a pad longer than the data repeats it
    short = NDArrayIter(_examples(2)[0], batch_size=5)
    assert _epochs(short, 2) == [[([0, 1, 0, 1, 0], 3)]] * 2


def test_ndarray_iter_discard_over_epochs():
    data, label = _examples(10)
    it = NDArrayIter(data, label, batch_size=3, last_batch_handle="discard")
    assert _epochs(it, 3) == [[([0, 1, 2], 0), ([3, 4, 5], 0), ([6, 7, 8], 0)]] * 3


def test_ndarray_iter_roll_over_carries_the_remainder():
    data, label = _examples(10)
    it = NDArrayIter(data, label, batch_size=3, last_batch_handle="roll_over")
    # pad of a batch that starts with carried examples: how many were carried (MXNet's value)
    assert _epochs(it, 4) == [
        [([0, 1, 2], 0), ([3, 4, 5], 0), ([6, 7, 8], 0)],
        [([9, 0, 1], 1), ([2, 3, 4], 0), ([5, 6, 7], 0)],
        [([8, 9, 0], 2), ([1, 2, 3], 0), ([4, 5, 6], 0), ([7, 8, 9], 0)],
        [([0, 1, 2], 0), ([3, 4, 5], 0), ([6, 7, 8], 0)]]
    it.hard_reset()
    assert it.next().data[0].asnumpy()[:, 0].tolist() == [0, 1, 2]


def test_ndarray_iter_labels_follow_data_and_names():
    data, label = _examples(5)
    it = NDArrayIter(data, label, batch_size=2, last_batch_handle="pad")
    for batch in it:
        onp.testing.assert_array_equal(batch.label[0].asnumpy(), batch.data[0].asnumpy()[:, 0])
        onp.testing.assert_array_equal(batch.data[0].asnumpy()[:, 1],
                                       100 + batch.data[0].asnumpy()[:, 0])
    assert it.provide_data == [("data", (2, 2))]
    assert it.provide_data[0].dtype == onp.float32
    assert it.provide_label == [("softmax_label", (2,))]
    named = NDArrayIter({"b": data, "a": data}, {"y": label}, batch_size=2)
    assert [d.name for d in named.provide_data] == ["a", "b"]
    listed = NDArrayIter([data, data], batch_size=2, data_name="x")
    assert [d.name for d in listed.provide_data] == ["_0_x", "_1_x"]
    assert listed.provide_label == []
    keep_dtype = NDArrayIter(np.array(onp.arange(4), dtype="int32"), batch_size=2)
    assert keep_dtype.next().data[0].dtype == onp.int32     # pymx arrays keep their dtype
    assert NDArrayIter(onp.arange(4), batch_size=2).next().data[0].dtype == onp.float32


def test_ndarray_iter_shuffle_repeats_under_a_seed():
    data, label = _examples(12)

    def run(seed):
        pymx.random.seed(seed)
        it = NDArrayIter(data, label, batch_size=4, shuffle=True)
        epochs = []
        for _ in range(3):
            order = []
            for batch in it:
                onp.testing.assert_array_equal(batch.label[0].asnumpy(),
                                               batch.data[0].asnumpy()[:, 0])
                order += batch.label[0].asnumpy().astype(int).tolist()
            epochs.append(order)
            it.reset()
        return epochs

    first = run(7)
    assert first == run(7)
    assert all(sorted(order) == list(range(12)) for order in first)
    assert first[0] != first[1] or first[1] != first[2]
    assert run(8) != first


def test_ndarray_iter_bad_input():
    data, _ = _examples(4)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        NDArrayIter(data, batch_size=0)
    with pytest.raises(ValueError, match="last_batch_handle must be one of .* got 'keep'"):
        NDArrayIter(data, batch_size=2, last_batch_handle="keep")
    with pytest.raises(ValueError, match="data has 4, softmax_label has 3"):
        NDArrayIter(data, onp.zeros(3), batch_size=2)
    with pytest.raises(ValueError, match="data must be given"):
        NDArrayIter(None)
    with pytest.raises(TypeError, match="must be an array, a list of arrays or a dict"):
        NDArrayIter("data.csv")
    assert NDArrayIter(data, batch_size=2).next().data[0].shape == (2, 2)


# ---------------------------------------------------------------- ResizeIter, PrefetchingIter

def test_resize_iter_wraps_and_cuts():
    data, label = _examples(6)
    longer = ResizeIter(NDArrayIter(data, label, batch_size=2), 5)
    assert [b.data[0].asnumpy()[:, 0].tolist() for b in longer] == [
        [0, 1], [2, 3], [4, 5], [0, 1], [2, 3]]
    shorter = ResizeIter(NDArrayIter(data, label, batch_size=2), 2)
    assert _epochs(shorter, 2) == [[([0, 1], 0), ([2, 3], 0)]] * 2
    assert shorter.provide_data == [("data", (2, 2))] and shorter.batch_size == 2


def test_prefetching_iter_matches_and_renames():
    data, label = _examples(7)
    with PrefetchingIter(NDArrayIter(data, label, batch_size=3)) as prefetched:
        assert _epochs(prefetched, 3) == _epochs(NDArrayIter(data, label, batch_size=3), 3)
    pair = PrefetchingIter([NDArrayIter(data, label, batch_size=3),
                            NDArrayIter(data * 2, label, batch_size=3)],
                           rename_data=[{"data": "a"}, {"data": "b"}])
    assert [d.name for d in pair.provide_data] == ["a", "b"]
    batch = pair.next()
    assert len(batch.data) == 2 and len(batch.label) == 2
    onp.testing.assert_array_equal(batch.data[1].asnumpy(), 2 * batch.data[0].asnumpy())
    pair.close()


class _Failing(DataIter):
    """Two good batches, then an error."""

    def __init__(self):
        super().__init__(batch_size=1)
        self.count = 0
        self.provide_data = [DataDesc("data", (1,))]
        self.provide_label = []

    def next(self):
        self.count += 1
        if self.count > 2:
            raise KeyError("record 3 is missing")
        return DataBatch([np.array([self.count])], [], pad=0)

    def reset(self):
        self.count = 0


def test_prefetching_iter_raises_errors_in_the_consumer_and_shuts_down():
    prefetched = PrefetchingIter(_Failing())
    assert prefetched.next().data[0].asnumpy().tolist() == [1]
    assert prefetched.next().data[0].asnumpy().tolist() == [2]
    with pytest.raises(KeyError, match="record 3 is missing"):
        prefetched.next()
    prefetched.reset()
    assert prefetched.next().data[0].asnumpy().tolist() == [1]
    threads = [p.thread for p in prefetched._prefetchers]
    prefetched.close()
    assert not any(thread.is_alive() for thread in threads)
    with pytest.raises(RuntimeError, match="closed"):
        prefetched.next()


def test_prefetching_iter_close_during_a_fetch_does_not_hang():
    entered, release = threading.Event(), threading.Event()

    class Blocking(_Failing):
        def next(self):
            if self.count == 1:          # the second fetch waits until close() was called
                entered.set()
                release.wait()
            return super().next()

    prefetched = PrefetchingIter(Blocking())
    prefetched.next()
    assert entered.wait(10)
    threading.Timer(0.2, release.set).start()      # let the fetch finish after the stop request
    closer = threading.Thread(target=prefetched.close)
    closer.start()
    closer.join(timeout=20)
    assert not closer.is_alive()


def test_prefetching_iter_stops_its_thread_when_dropped():
    prefetched = PrefetchingIter(NDArrayIter(_examples(4)[0], batch_size=2))
    thread = prefetched._prefetchers[0].thread
    del prefetched
    thread.join(timeout=10)
    assert not thread.is_alive()


# ---------------------------------------------------------------- CSVIter

@pytest.fixture
def csv_files(tmp_path):
    """MXNet's documented example: rows [1,2,3], [2,3,4], [3,4,5], [4,5,6]."""
    data = tmp_path / "data.csv"
    data.write_text("1,2,3\n2,3,4\n3,4,5\n4,5,6\n")
    label = tmp_path / "label.csv"
    label.write_text("10\n20\n30\n40\n")
    return str(data), str(label)


def _csv_epochs(it, count):
    """[[(first data column, labels, pad) per batch] per epoch], resetting between epochs."""
    epochs = []
    for _ in range(count):
        epochs.append([(b.data[0].asnumpy()[:, 0].astype(int).tolist(),
                        b.label[0].asnumpy().reshape(-1).astype(int).tolist(), b.pad)
                       for b in it])
        it.reset()
    return epochs


def test_csv_iter_round_batch_continues_after_the_wrapped_rows(csv_files):
    data, label = csv_files
    it = CSVIter(data_csv=data, data_shape=(3,), label_csv=label, batch_size=3)
    assert _csv_epochs(it, 3) == [
        [([1, 2, 3], [10, 20, 30], 0), ([4, 1, 2], [40, 10, 20], 2)],
        [([3, 4, 1], [30, 40, 10], 1)],
        [([2, 3, 4], [20, 30, 40], 0)]]
    assert it.provide_data == [("data", (3, 3))] and it.provide_label == [("softmax_label",
                                                                           (3, 1))]


def test_csv_iter_without_round_batch_keeps_the_previous_rows(csv_files):
    data, _ = csv_files
    it = CSVIter(data_csv=data, data_shape=(3,), batch_size=3, round_batch=False)
    first = _csv_epochs(it, 2)
    assert first == [[([1, 2, 3], [0, 0, 0], 0), ([4, 2, 3], [0, 0, 0], 2)]] * 2


def test_csv_iter_shapes_dtype_and_errors(csv_files, tmp_path):
    data, label = csv_files
    grid = tmp_path / "grid.csv"
    grid.write_text("\n".join(",".join(str(r * 4 + c) for c in range(4)) for r in range(3)))
    it = CSVIter(data_csv=str(grid), data_shape=(2, 2), batch_size=3, dtype="int32")
    batch = it.next()
    assert batch.data[0].dtype == onp.int32
    onp.testing.assert_array_equal(batch.data[0].asnumpy(), onp.arange(12).reshape(3, 2, 2))
    with pytest.raises(ValueError, match=r"have 3 values, but its shape \(2, 2\) needs 4"):
        CSVIter(data_csv=data, data_shape=(2, 2), batch_size=2)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        CSVIter(data_csv=data, data_shape=(3,), batch_size=0)
    with pytest.raises(FileNotFoundError):
        CSVIter(data_csv=str(tmp_path / "missing.csv"), data_shape=(3,), batch_size=2)
    (tmp_path / "short.csv").write_text("1\n2\n")
    with pytest.raises(ValueError, match="has 4 rows but label_csv .* has 2"):
        CSVIter(data_csv=data, data_shape=(3,), label_csv=str(tmp_path / "short.csv"),
                batch_size=2)
    (tmp_path / "words.csv").write_text("a,b,c\n")
    with pytest.raises(ValueError, match="words.csv is not a CSV file of numbers"):
        CSVIter(data_csv=str(tmp_path / "words.csv"), data_shape=(3,), batch_size=2)


# ---------------------------------------------------------------- ImageRecordIter

def _write_rec(tmp_path, count=10, size=(12, 10), label_width=1):
    """A .rec/.idx pair of PNG images (OpenCV's BGR order in the records), image k labelled k
    (and 100 + k when label_width is 2); returns the paths and the RGB pixels."""
    rec, idx = str(tmp_path / "data.rec"), str(tmp_path / "data.idx")
    pixels = []
    rng = onp.random.default_rng(3)
    with recordio.MXIndexedRecordIO(idx, rec, "w") as writer:
        for k in range(count):
            rgb = rng.integers(0, 256, (size[0], size[1], 3), dtype=onp.uint8)
            label = float(k) if label_width == 1 else [float(k), 100.0 + k]
            header = recordio.IRHeader(0 if label_width == 1 else 2, label, k, 0)
            writer.write_idx(k, recordio.pack_img(header, rgb[:, :, ::-1], img_fmt=".png"))
            pixels.append(rgb)
    return rec, idx, pixels


def test_image_record_iter_normalises_float32_nchw_batches(tmp_path):
    rec, _, pixels = _write_rec(tmp_path)
    mean, std = (120.0, 110.0, 100.0), (50.0, 60.0, 70.0)
    it = ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 6), batch_size=4, mean_r=mean[0],
                         mean_g=mean[1], mean_b=mean[2], std_r=std[0], std_g=std[1],
                         std_b=std[2], preprocess_threads=2)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 2]
    assert [b.label[0].asnumpy().astype(int).tolist() for b in batches] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    first = batches[0].data[0]
    assert first.dtype == onp.float32 and first.shape == (4, 3, 8, 6)
    centre = pixels[1][2:10, 2:8].astype(onp.float64)        # 12x10 -> centre 8x6
    expected = ((centre - mean) / std).transpose(2, 0, 1)
    onp.testing.assert_allclose(first.asnumpy()[1], expected, rtol=1e-5, atol=1e-5)
    it.close()


def test_image_record_iter_repeats_whatever_the_thread_count(tmp_path):
    rec, idx, _ = _write_rec(tmp_path)

    def run(threads):
        pymx.random.seed(4)
        with ImageRecordIter(path_imgrec=rec, data_shape=(3, 6, 6), batch_size=5, shuffle=True,
                             rand_crop=True, rand_mirror=True, resize=8,
                             preprocess_threads=threads) as it:
            batches = []
            for _ in range(2):
                batches += [(b.label[0].asnumpy(), b.data[0].asnumpy()) for b in it]
                it.reset()
            return batches

    single, pooled = run(1), run(4)
    assert len(single) == 4
    for (labels_a, data_a), (labels_b, data_b) in zip(single, pooled):
        onp.testing.assert_array_equal(labels_a, labels_b)
        onp.testing.assert_array_equal(data_a, data_b)
    assert sorted(onp.concatenate([single[0][0], single[1][0]]).tolist()) == list(range(10))
    assert not onp.array_equal(single[0][0], single[2][0])     # reshuffled per epoch


def test_image_record_iter_labels_parts_and_round_batch(tmp_path):
    rec, _, _ = _write_rec(tmp_path, count=8, label_width=2)
    it = ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=3, label_width=2,
                         round_batch=False, num_parts=2, part_index=0)
    batches = list(it)  # part 0 holds images 0-3: the last batch is completed, none dropped
    assert len(batches) == 2 and batches[0].label[0].shape == (3, 2)
    onp.testing.assert_array_equal(batches[0].label[0].asnumpy(),
                                   [[0, 100], [1, 101], [2, 102]])
    assert batches[0].pad == 0 and batches[1].pad == 2
    onp.testing.assert_array_equal(batches[1].label[0].asnumpy()[0], [3, 103])
    it.close()


def test_image_record_iter_bad_input(tmp_path):
    rec, _, _ = _write_rec(tmp_path, count=2)
    with pytest.raises(FileNotFoundError, match="nothing.rec"):
        ImageRecordIter(path_imgrec=str(tmp_path / "nothing.rec"), data_shape=(3, 8, 8),
                        batch_size=2)
    with pytest.raises(ValueError, match=r"3 channels, got data_shape \(1, 8, 8\)"):
        ImageRecordIter(path_imgrec=rec, data_shape=(1, 8, 8), batch_size=2)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=0)
    with pytest.raises(ValueError, match="preprocess_threads must be an int >= 1, got 0"):
        ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=2,
                        preprocess_threads=0)
    plain = tmp_path / "plain.rec"
    plain.write_bytes(open(rec, "rb").read())
    with pytest.raises(ValueError, match="need the index file of .*plain.rec"):
        ImageRecordIter(path_imgrec=str(plain), data_shape=(3, 8, 8), batch_size=2,
                        shuffle=True)
    # a record whose payload is not an image names the record
    broken_rec, broken_idx = str(tmp_path / "broken.rec"), str(tmp_path / "broken.idx")
    with recordio.MXIndexedRecordIO(broken_idx, broken_rec, "w") as writer:
        writer.write_idx(0, recordio.pack(recordio.IRHeader(0, 1.0, 0, 0), b"not an image"))
    with ImageRecordIter(path_imgrec=broken_rec, data_shape=(3, 8, 8), batch_size=1) as broken:
        with pytest.raises(ValueError, match="Broken image record 0 of .*broken.rec"):
            broken.next()
    with ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=2) as ok:
        assert ok.next().data[0].shape == (2, 3, 8, 8)


@requires_gpu
def test_ndarray_iter_on_gpu_matches_cpu():
    data, label = _examples(7)
    batches = {}
    for device in (pymx.cpu(0), pymx.gpu(0)):
        pymx.random.seed(9)
        it = NDArrayIter(np.array(data, device=device), np.array(label, device=device),
                         batch_size=3, shuffle=True, last_batch_handle="roll_over")
        epochs = []
        for _ in range(2):
            epochs.append([(b.data[0], b.label[0], b.pad) for b in it])
            it.reset()
        batches[str(device)] = epochs
    for epoch_cpu, epoch_gpu in zip(batches["cpu(0)"], batches["gpu(0)"]):
        for (x_cpu, y_cpu, pad_cpu), (x_gpu, y_gpu, pad_gpu) in zip(epoch_cpu, epoch_gpu):
            assert str(x_gpu.device) == "gpu(0)" and pad_gpu == pad_cpu
            onp.testing.assert_array_equal(x_gpu.asnumpy(), x_cpu.asnumpy())
            onp.testing.assert_array_equal(y_gpu.asnumpy(), y_cpu.asnumpy())
