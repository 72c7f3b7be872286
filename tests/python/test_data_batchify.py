import numpy as onp
import pytest

from pymx import np
from pymx.gluon.data import batchify


def test_stack_numbers_keep_numpy_dtype():
    ints = batchify.Stack()([1, 2, 3])
    assert isinstance(ints, np.ndarray) and ints.dtype == onp.int64
    onp.testing.assert_array_equal(ints.asnumpy(), [1, 2, 3])
    floats = batchify.Stack()([onp.array([1.5, 2.0]), onp.array([3.0, 4.0])])
    assert floats.dtype == onp.float64 and floats.shape == (2, 2)
    fields = batchify.Stack()([[1.5, 7], [3.0, 8]])       # lists are samples of two fields
    assert fields[0].dtype == onp.float64 and fields[1].dtype == onp.int64


def test_stack_pymx_arrays():
    a = onp.arange(6, dtype=onp.float32).reshape(2, 3)
    out = batchify.Stack()([np.array(a), np.array(a + 1)])
    assert out.shape == (2, 2, 3) and out.dtype == onp.float32
    onp.testing.assert_array_equal(out.asnumpy(), onp.stack([a, a + 1]))


def test_stack_tuples_batches_each_field():
    samples = [(onp.full((2,), i, onp.float32), i) for i in range(3)]
    data, label = batchify.Stack()(samples)
    onp.testing.assert_array_equal(data.asnumpy(), [[0, 0], [1, 1], [2, 2]])
    onp.testing.assert_array_equal(label.asnumpy(), [0, 1, 2])


def test_pad_lists_and_arrays():
    out = batchify.Pad()([[1, 2, 3, 4], [4, 5, 6], [8, 2]])
    onp.testing.assert_array_equal(out.asnumpy(), [[1, 2, 3, 4], [4, 5, 6, 0], [8, 2, 0, 0]])
    a = onp.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    b = onp.array([[5, 8], [1, 2]])
    out = batchify.Pad(val=-1)([a, b])
    expected = onp.array([[[1, 2, 3, 4], [5, 6, 7, 8]], [[5, 8, -1, -1], [1, 2, -1, -1]]])
    onp.testing.assert_array_equal(out.asnumpy(), expected)


def test_pad_dtype_and_round_to():
    out = batchify.Pad(val=0, dtype="float32", round_to=4)([[1, 2, 3, 4, 5], [6]])
    assert out.dtype == onp.float32 and out.shape == (2, 8)
    onp.testing.assert_array_equal(out.asnumpy()[1], [6, 0, 0, 0, 0, 0, 0, 0])


def test_pad_pymx_arrays_warns_once():
    pad = batchify.Pad(val=9)
    samples = [np.array(onp.ones(2, onp.float32)), np.array(onp.ones(3, onp.float32))]
    with pytest.warns(UserWarning, match="Using Pad with NDArrays is discouraged"):
        out = pad(samples)
    onp.testing.assert_array_equal(out.asnumpy(), [[1, 1, 9], [1, 1, 1]])
    assert out.dtype == onp.float32


@pytest.mark.parametrize("in_worker", [False, True])
def test_bfloat16_batches_keep_their_dtype_and_bits(monkeypatch, in_worker):
    # In a worker, batches travel as HostBatch (bfloat16 as its bits) and become arrays in the
    # main process.
    monkeypatch.setattr(batchify, "_in_worker", in_worker)

    def as_array(batch):
        return batchify.to_device(batch, np.array(0).device) if in_worker else batch

    samples = [np.array([1.5, 1 + 2.0 ** -9], dtype="bfloat16"), np.array([3.0], dtype="bfloat16")]
    with pytest.warns(UserWarning, match="Pad with NDArrays"):  # MXNet's advice, kept
        padded = as_array(batchify.Pad(val=-1)(samples))
    assert padded.dtype == np.bfloat16
    onp.testing.assert_array_equal(padded.asnumpy(), [[1.5, 1.0], [3.0, -1.0]])
    # 3 + 2^-7 lies halfway between 3 and the next bfloat16: ties go to the even 3.
    rounded = as_array(batchify.Pad(dtype="bfloat16")([[1 + 2.0 ** -9, 3 + 2.0 ** -7], [2.0]]))
    assert rounded.dtype == np.bfloat16
    onp.testing.assert_array_equal(rounded.asnumpy(), [[1.0, 3.0], [2.0, 0.0]])
    pair = [np.array([0.1, -7.0], dtype="bfloat16"), np.array([2.0 ** -100, 5.0], dtype="bfloat16")]
    stacked = as_array(batchify.Stack()(pair))
    assert stacked.dtype == np.bfloat16
    onp.testing.assert_array_equal(stacked._host_values(), onp.stack([p._host_values() for p in pair]))
    moved = as_array(batchify.to_host(pair[0])) if in_worker else pair[0]
    assert moved.dtype == np.bfloat16
    onp.testing.assert_array_equal(moved._host_values(), pair[0]._host_values())


def test_pad_rejects_tuples():
    with pytest.raises(NotImplementedError, match="use Group"):
        batchify.Pad()([(1, 2), (3, 4)])


def test_group_and_aslist():
    samples = [([1, 2, 3, 4], 0, "a"), ([5, 7], 1, "b")]
    data, label, text = batchify.Group(batchify.Pad(val=0), batchify.Stack(),
                                       batchify.AsList())(samples)
    onp.testing.assert_array_equal(data.asnumpy(), [[1, 2, 3, 4], [5, 7, 0, 0]])
    onp.testing.assert_array_equal(label.asnumpy(), [0, 1])
    assert text == ["a", "b"]
    same = batchify.Group([batchify.Pad(), batchify.Stack(), batchify.AsList()])(samples)
    onp.testing.assert_array_equal(same[0].asnumpy(), data.asnumpy())


def test_group_errors():
    with pytest.raises(ValueError, match="should contain 2 elements, but the first sample has 3"):
        batchify.Group(batchify.Stack(), batchify.Stack())([(1, 2, 3)])
    with pytest.raises(TypeError, match=r"type\(fn\[1\]\)"):
        batchify.Group(batchify.Stack(), 5)
    with pytest.raises(ValueError, match="Input pattern not understood"):
        batchify.Group([batchify.Stack()], batchify.Stack())
