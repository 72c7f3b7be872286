import numpy as onp
import pytest

from pymx.gluon.data import (BatchSampler, FilterSampler, IntervalSampler, RandomSampler,
                             SequentialSampler, SimpleDataset)


def test_sequential_sampler():
    assert list(SequentialSampler(5)) == [0, 1, 2, 3, 4]
    assert list(SequentialSampler(3, start=4)) == [4, 5, 6]
    assert len(SequentialSampler(7)) == 7


def test_random_sampler_is_a_fresh_permutation_each_epoch():
    onp.random.seed(0)
    sampler = RandomSampler(50)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(50))
    assert first != second
    assert len(sampler) == 50
    onp.random.seed(0)
    assert list(RandomSampler(50)) == first      # seeded by numpy.random.seed


def test_filter_sampler():
    data = SimpleDataset(list(range(10)))
    sampler = FilterSampler(lambda x: x % 3 == 0, data)
    assert list(sampler) == [0, 3, 6, 9]
    assert len(sampler) == 4


def test_interval_sampler():
    assert list(IntervalSampler(7, 3)) == [0, 3, 6, 1, 4, 2, 5]
    assert list(IntervalSampler(7, 3, rollover=False)) == [0, 3, 6]
    assert len(IntervalSampler(7, 3)) == 7 and len(IntervalSampler(7, 3, rollover=False)) == 3
    with pytest.raises(ValueError, match="Interval 8"):
        IntervalSampler(7, 8)


def test_batch_sampler_keep():
    sampler = BatchSampler(SequentialSampler(10), 3, "keep")
    assert list(sampler) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert len(sampler) == 4


def test_batch_sampler_discard():
    sampler = BatchSampler(SequentialSampler(10), 3, "discard")
    assert list(sampler) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert len(sampler) == 3


def test_batch_sampler_rollover_carries_the_remainder_into_the_next_epoch():
    sampler = BatchSampler(SequentialSampler(10), 3, "rollover")
    assert len(sampler) == 3
    assert list(sampler) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert len(sampler) == 3                     # (1 left over + 10) // 3
    assert list(sampler) == [[9, 0, 1], [2, 3, 4], [5, 6, 7]]
    assert len(sampler) == 4                     # (2 left over + 10) // 3
    assert list(sampler) == [[8, 9, 0], [1, 2, 3], [4, 5, 6], [7, 8, 9]]


def test_batch_sampler_even_division_has_no_remainder():
    for mode in ("keep", "discard", "rollover"):
        sampler = BatchSampler(SequentialSampler(6), 2, mode)
        assert list(sampler) == [[0, 1], [2, 3], [4, 5]]
        assert len(sampler) == 3


def test_batch_sampler_rejects_bad_arguments():
    with pytest.raises(ValueError, match="last_batch must be one of 'keep', 'discard', or "
                                         "'rollover', but got wrap"):
        BatchSampler(SequentialSampler(4), 2, "wrap")
    with pytest.raises(ValueError, match="batch_size must be a positive integer, but got 0"):
        BatchSampler(SequentialSampler(4), 0)
