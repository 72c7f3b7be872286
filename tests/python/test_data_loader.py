import multiprocessing
import os
import time

import numpy as onp
import pytest

import pymx
from pymx import np
from pymx.gluon.data import (ArrayDataset, BatchSampler, DataLoader, Dataset, SequentialSampler,
                             SimpleDataset, batchify)

N = 10
X = onp.arange(N * 6, dtype=onp.float32).reshape(N, 2, 3)
Y = onp.arange(N) % 3


def _dataset():
    return ArrayDataset(X, Y)


def _collect(loader):
    batches = list(loader)
    data = onp.concatenate([b[0].asnumpy() for b in batches])
    label = onp.concatenate([b[1].asnumpy() for b in batches])
    return batches, data, label


@pytest.mark.parametrize("num_workers,thread_pool", [(0, False), (1, False), (2, False),
                                                     (2, True)])
def test_loader_yields_every_sample_in_order(num_workers, thread_pool):
    loader = DataLoader(_dataset(), batch_size=4, num_workers=num_workers,
                        thread_pool=thread_pool)
    assert len(loader) == 3
    batches, data, label = _collect(loader)
    assert [b[0].shape for b in batches] == [(4, 2, 3), (4, 2, 3), (2, 2, 3)]
    assert all(isinstance(b[0], np.ndarray) and b[0].device == pymx.cpu() for b in batches)
    assert batches[0][0].dtype == onp.float32 and batches[0][1].dtype == onp.int64
    onp.testing.assert_array_equal(data, X)
    onp.testing.assert_array_equal(label, Y)
    # a second epoch reuses the pool
    _, data_again, _ = _collect(loader)
    onp.testing.assert_array_equal(data_again, X)
    loader.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_shuffle_and_last_batch(num_workers):
    onp.random.seed(1)
    loader = DataLoader(_dataset(), batch_size=4, shuffle=True, last_batch="discard",
                        num_workers=num_workers)
    assert len(loader) == 2
    batches, data, label = _collect(loader)
    assert len(batches) == 2
    rows = [int(r[0, 0]) // 6 for r in data]
    assert len(set(rows)) == 8 and rows != sorted(rows)
    onp.testing.assert_array_equal(label, Y[rows])
    rollover = DataLoader(_dataset(), batch_size=4, last_batch="rollover")
    assert [len(b[1]) for b in rollover] == [4, 4]
    first = next(iter(rollover))[1].asnumpy()
    onp.testing.assert_array_equal(first, Y[[8, 9, 0, 1]])
    loader.close()


class _AddOneToImages:
    """A transform that runs pymx ops: inside a worker process it needs the forked engine."""

    def __call__(self, x, y):
        return np.array(x) + 1, y


def test_worker_processes_run_pymx_ops():
    data = ArrayDataset(X, Y).transform(_AddOneToImages())
    loader = DataLoader(data, batch_size=5, num_workers=2)
    _, out, _ = _collect(loader)
    onp.testing.assert_array_equal(out, X + 1)
    loader.close()


class _Pid(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, idx):
        return os.getpid(), onp.random.uniform()


def test_workers_are_processes_with_their_own_random_state():
    loader = DataLoader(_Pid(), batch_size=1, num_workers=2)
    pids, draws = zip(*[(int(b[0].item()), float(b[1].item())) for b in loader])
    assert os.getpid() not in pids
    assert len(set(draws)) == len(draws)     # reseeded per worker, not copies of one state
    loader.close()


class _CurrentDevice(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, idx):
        return onp.array(pymx.device.current_device().device_id, dtype="int32")


def test_worker_processes_build_on_the_cpu_inside_a_device_scope():
    """A forked worker does not inherit the parent's `with device:` scope: a child of a process
    that used CUDA must not touch the GPU (cpu(3) stands in for one here)."""
    with pymx.cpu(3):
        loader = DataLoader(_CurrentDevice(), batch_size=2, num_workers=2)
        ids = onp.concatenate([batch.asnumpy().ravel() for batch in loader])
    assert ids.tolist() == [0] * 6
    loader.close()


def test_batch_sampler_and_custom_batchify():
    sampler = BatchSampler(SequentialSampler(N), 3, "keep")
    loader = DataLoader(SimpleDataset([[i] * (i % 3 + 1) for i in range(N)]),
                        batch_sampler=sampler, batchify_fn=batchify.Pad(val=-1))
    batches = list(loader)
    assert len(batches) == 4
    onp.testing.assert_array_equal(batches[0].asnumpy(), [[0, -1, -1], [1, 1, -1], [2, 2, 2]])


def test_custom_batchify_returning_pymx_arrays_in_workers():
    def batchify_fn(samples):
        return np.array(onp.stack([s[0] for s in samples])) * 2
    loader = DataLoader(_dataset(), batch_size=5, batchify_fn=batchify_fn, num_workers=2)
    out = onp.concatenate([b.asnumpy() for b in loader])
    onp.testing.assert_array_equal(out, X * 2)
    loader.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_pin_memory(num_workers):
    loader = DataLoader(_dataset(), batch_size=5, pin_memory=True, num_workers=num_workers)
    batches = list(loader)
    assert all(b[0].device == pymx.device.Device("cpu_pinned", 0) for b in batches)
    onp.testing.assert_array_equal(onp.concatenate([b[0].asnumpy() for b in batches]), X)
    loader.close()


class _Slow(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, idx):
        time.sleep(3)
        return idx


def test_worker_timeout():
    loader = DataLoader(_Slow(), batch_size=1, num_workers=1, timeout=0.5)
    with pytest.raises(multiprocessing.TimeoutError, match="Worker timed out after 0.5 seconds"):
        next(iter(loader))
    loader.close()


class _Broken(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, idx):
        if idx == 2:
            raise KeyError("sample 2 is broken")
        return idx


@pytest.mark.parametrize("num_workers", [0, 1])
def test_worker_errors_reach_the_caller(num_workers):
    loader = DataLoader(_Broken(), batch_size=2, num_workers=num_workers)
    it = iter(loader)
    onp.testing.assert_array_equal(next(it).asnumpy(), [0, 1])
    with pytest.raises(KeyError, match="sample 2 is broken"):
        next(it)
    loader.close()
    assert float(np.array(onp.ones(3)).sum().item()) == 3.0     # process still usable


def test_invalid_combinations():
    data = _dataset()
    with pytest.raises(ValueError, match="batch_size must be specified unless batch_sampler is "
                                         "specified"):
        DataLoader(data)
    with pytest.raises(ValueError, match="shuffle must not be specified if sampler is specified"):
        DataLoader(data, batch_size=2, shuffle=True, sampler=SequentialSampler(N))
    sampler = BatchSampler(SequentialSampler(N), 2)
    for kwargs in ({"batch_size": 2}, {"shuffle": True}, {"sampler": SequentialSampler(N)},
                   {"last_batch": "keep"}):
        with pytest.raises(ValueError, match="batch_size, shuffle, sampler and last_batch must "
                                             "not be specified if batch_sampler is specified."):
            DataLoader(data, batch_sampler=sampler, **kwargs)
    with pytest.raises(ValueError, match="last_batch must be one of"):
        DataLoader(data, batch_size=2, last_batch="bad")
    with pytest.raises(ValueError, match="timeout must be positive, given 0"):
        DataLoader(data, batch_size=2, timeout=0)


def test_prefetch_and_try_nopython_are_accepted():
    loader = DataLoader(_dataset(), batch_size=4, num_workers=1, prefetch=0, try_nopython=True)
    _, data, _ = _collect(loader)
    onp.testing.assert_array_equal(data, X)
    loader.close()
