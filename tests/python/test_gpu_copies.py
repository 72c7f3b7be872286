"""Copies between host memory and a GPU around the staged path for pageable memory (Note [Staged
copies] in cuda/src/staged_copy.cc): sizes at the staging threshold and the chunk edges, odd
dtypes and lengths, unaligned host pointers, many copies in flight from several threads (also
with several copy streams and with the naive engine), pinned memory, and sources changed right
after the copy call. Every check is bitwise equality with the NumPy data. Skipped when no GPU is
visible."""
import os
import subprocess
import sys
import threading

import numpy as onp
import pytest
from conftest import requires_gpu

from pymx import np, npx
from pymx.device import cpu, cpu_pinned, gpu
from pymx.ndarray import from_numpy

pytestmark = requires_gpu

KiB, MiB = 1 << 10, 1 << 20
THRESHOLD = 256 * KiB  # kStagingThreshold in cuda/src/staged_copy.h
CHUNK = 4 * MiB        # kStagingChunkBytes
SIZES = [0, 1, THRESHOLD - 1, THRESHOLD, CHUNK - 1, CHUNK, CHUNK + 1, CHUNK * 7 // 2, 64 * MiB]


def random_bytes(nbytes, seed=0):
    return onp.random.default_rng(seed).integers(0, 256, nbytes, dtype=onp.uint8)


def assert_bitwise_equal(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert onp.array_equal(actual.view(onp.uint8), expected.view(onp.uint8))


@pytest.mark.parametrize("nbytes", SIZES)
def test_round_trip_at_threshold_and_chunk_edges(nbytes):
    host = random_bytes(nbytes, seed=nbytes)
    on_gpu = np.array(host, device=gpu(0))
    assert_bitwise_equal(on_gpu.asnumpy(), host)
    # The asynchronous copies between a pageable pymx CPU array and the GPU, both ways.
    back = from_numpy(host, device=cpu(0)).copyto(gpu(0)).copyto(cpu(0))
    assert_bitwise_equal(back.asnumpy(), host)


@pytest.mark.parametrize("dtype, count", [
    ("uint8", 1_000_003),                   # a prime length
    ("float64", CHUNK // 8 * 3 + 5),        # ends 40 bytes into a chunk
    ("float16", (CHUNK + THRESHOLD) // 2 + 1),
    ("int64", THRESHOLD // 8 + 1),
    ("bool", 2 * CHUNK + 7),
    ("float32", 9_999_991),                 # prime, ~38 MiB
])
def test_round_trip_dtypes_and_odd_lengths(dtype, count):
    rng = onp.random.default_rng(count)
    host = rng.standard_normal(count).astype(dtype) if dtype.startswith("float") else \
        rng.integers(0, 2 if dtype == "bool" else 100, count).astype(dtype)
    assert_bitwise_equal(np.array(host, device=gpu(0)).asnumpy(), host)


@pytest.mark.parametrize("nbytes", [1001, THRESHOLD + 3, 2 * CHUNK + 5])
def test_unaligned_host_pointers(nbytes):
    host = random_bytes(nbytes + 2, seed=nbytes)
    source = host[1:1 + nbytes]  # one byte past NumPy's (at least 16-byte) alignment
    assert source.ctypes.data % 2 == 1
    on_gpu = np.array(source, device=gpu(0))
    assert_bitwise_equal(on_gpu.asnumpy(), source)
    # Through a pymx array sharing the unaligned memory: host to device, then device to host
    # into an unaligned destination, which must not be written outside its bytes.
    shared_source = np.from_dlpack(source)
    assert shared_source._data_address() == source.ctypes.data
    assert_bitwise_equal(shared_source.copyto(gpu(0)).asnumpy(), source)
    target = onp.zeros(nbytes + 2, dtype=onp.uint8)
    shared_target = np.from_dlpack(target[1:1 + nbytes])
    assert shared_target._data_address() % 2 == 1
    on_gpu.copyto(shared_target)
    shared_target.wait_to_read()
    assert_bitwise_equal(target[1:1 + nbytes], source)
    assert target[0] == 0 and target[-1] == 0


def test_unaligned_float_view():
    raw = random_bytes(4 * (CHUNK // 4 + 3) + 1, seed=3)
    view = raw[1:].view(onp.float32)  # NumPy passes an unaligned float32 view through as is
    assert view.ctypes.data % 4 == 1
    assert_bitwise_equal(np.array(view, device=gpu(0)).asnumpy(), view)


@pytest.mark.parametrize("size", [THRESHOLD, CHUNK * 5 // 2 + 1])
def test_pinned_memory_both_ways(size):
    host = random_bytes(size, seed=size)
    pinned = from_numpy(host, device=cpu_pinned(0))
    on_gpu = pinned.copyto(gpu(0))
    assert_bitwise_equal(on_gpu.asnumpy(), host)
    pinned_back = on_gpu.copyto(cpu_pinned(0))  # device to pinned host: the direct copy
    assert_bitwise_equal(pinned_back.asnumpy(), host)


@pytest.mark.parametrize("size", [THRESHOLD, 3 * CHUNK + 1])
def test_source_changed_after_the_copy_returned(size):
    host = random_bytes(size, seed=size)
    expected = host.copy()
    # np.array blocks until the data is copied: the NumPy source is free to change afterwards.
    on_gpu = np.array(host, device=gpu(0))
    host[:] = 0
    assert_bitwise_equal(on_gpu.asnumpy(), expected)
    # copyto is asynchronous, but the engine orders a later pymx write of the source after it
    # (writes through NumPy into memory a pymx array shares are not ordered, so not tested).
    source = from_numpy(expected, device=cpu(0))
    uploaded = source.copyto(gpu(0))
    source[:] = 7
    downloaded = on_gpu.copyto(cpu(0))
    on_gpu[:] = 9
    assert_bitwise_equal(uploaded.asnumpy(), expected)
    assert_bitwise_equal(downloaded.asnumpy(), expected)
    assert (source.asnumpy() == 7).all() and (on_gpu.asnumpy() == 9).all()


def check_concurrent_copies(threads=4, arrays_per_thread=5):
    """Several threads, each with several uploads and downloads in flight before it checks."""
    sizes = [THRESHOLD + 1, CHUNK - 3, 2 * CHUNK + 11, 5 * CHUNK + 1, 9 * MiB]
    failures = []

    def work(seed):
        try:
            hosts = [random_bytes(sizes[(seed + k) % len(sizes)], seed=seed * 100 + k)
                     for k in range(arrays_per_thread)]
            sources = [from_numpy(h, device=cpu(0)) for h in hosts]
            uploaded = [s.copyto(gpu(0)) for s in sources]              # all in flight
            downloaded = [u.copyto(cpu(0)) for u in uploaded]           # all in flight
            direct = [np.array(h, device=gpu(0)).asnumpy() for h in hosts]
            for h, d, x in zip(hosts, downloaded, direct):
                assert_bitwise_equal(d.asnumpy(), h)
                assert_bitwise_equal(x, h)
        except Exception as error:  # reported by the main thread
            failures.append(f"thread {seed}: {type(error).__name__}: {error}")

    workers = [threading.Thread(target=work, args=(seed,)) for seed in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    npx.waitall()
    assert not failures, failures


def test_many_copies_in_flight_from_several_threads():
    check_concurrent_copies()


@pytest.mark.parametrize("env", [{"PYMX_GPU_COPY_WORKERS": "3"}, {"PYMX_ENGINE": "naive"}],
                         ids=["three_copy_streams", "naive_engine_one_stream"])
def test_many_copies_in_flight_other_engines(env):
    # The engine reads these settings once per process. The naive engine runs every thread's
    # copies on one stream per device, so they share (and take turns on) its staging ring.
    result = subprocess.run([sys.executable, __file__], env={**os.environ, **env},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


if __name__ == "__main__":
    check_concurrent_copies()
