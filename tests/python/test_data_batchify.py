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
