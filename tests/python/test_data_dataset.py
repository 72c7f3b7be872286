import pickle

import numpy as onp
import pytest

from pymx import np
from pymx.gluon.data import ArrayDataset, Dataset, RandomSampler, SimpleDataset


def _double(x):
    return x * 2


def test_simple_dataset():
    data = SimpleDataset([5, 6, 7])
    assert len(data) == 3 and data[1] == 6


def test_array_dataset_mixes_arrays_and_lists():
    x = onp.arange(12, dtype=onp.float32).reshape(4, 3)
    y = [10, 11, 12, 13]
    data = ArrayDataset(x, y)
    assert len(data) == 4
    sample = data[2]
    assert isinstance(sample, tuple) and sample[1] == 12
    onp.testing.assert_array_equal(sample[0], x[2])
    assert ArrayDataset(y)[3] == 13          # a single array gives bare samples


def test_array_dataset_turns_1d_pymx_arrays_into_host_values():
    labels = np.array(onp.array([3, 1, 2], dtype=onp.int32))
    images = np.array(onp.ones((3, 2, 2), dtype=onp.float32))
    data = ArrayDataset(images, labels)
    image, label = data[1]
    assert isinstance(label, onp.integer) and label == 1
    assert image.shape == (2, 2)             # 2-D+ pymx arrays are indexed as they are


def test_array_dataset_length_mismatch():
    with pytest.raises(ValueError, match=r"All arrays must have the same length; array\[0\] has "
                                         r"length 3 while array\[1\] has 2\."):
        ArrayDataset([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="Needs at least 1 arrays"):
        ArrayDataset()


def test_transform_and_transform_first():
    data = ArrayDataset([1, 2, 3], [10, 20, 30])
    assert data.transform(lambda x, y: x + y)[1] == 22
    assert data.transform_first(_double)[2] == (6, 30)
    eager = SimpleDataset([1, 2]).transform(_double, lazy=False)
    assert isinstance(eager, SimpleDataset) and eager[1] == 4
    assert SimpleDataset([1, 2]).transform_first(_double)[0] == 2   # non-tuple samples


def test_transform_first_pickles():
    data = ArrayDataset([1, 2, 3], [10, 20, 30]).transform_first(_double)
    again = pickle.loads(pickle.dumps(data))
    assert again[0] == (2, 10)


def test_filter_take_shard_sample():
    data = SimpleDataset(list(range(10)))
    assert list(data.filter(lambda x: x > 6)) == [7, 8, 9]
    assert len(data.take(3)) == 3 and data.take(3)[2] == 2
    assert len(data.take(None)) == 10 and len(data.take(100)) == 10
    shards = [list(data.shard(3, i)) for i in range(3)]
    assert shards == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert sorted(data.sample(RandomSampler(10))) == list(range(10))
    with pytest.raises(ValueError, match="Shard index out of bound: 3 out of 3"):
        data.shard(3, 3)
    with pytest.raises(TypeError, match="Invalid sampler type"):
        data.sample([1, 2])


def test_abstract_dataset():
    with pytest.raises(NotImplementedError):
        len(Dataset())
