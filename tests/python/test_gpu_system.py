"""The GPU backend as a whole: copies between host and GPU (every dtype, pinned and pageable),
the caching allocator (statistics, reuse, empty_cache, recovery from out-of-memory), device
errors, a random DAG of ops run on GPU and on CPU, and LeafNetwork training giving the same
parameters on gpu(0) as on cpu(0); a process forked after GPU use computes on the CPU only.
Skipped when no GPU is visible."""
import gc
import os

import numpy as onp
import pytest
from conftest import requires_gpu
from small_leafnet import batches, leaf_network, save_starting_parameters

from pymx import autograd, gluon, np, npx
from pymx._op import invoke
from pymx.base import PymxError
from pymx.device import cpu, cpu_pinned, gpu, gpu_memory_info, num_gpus
from pymx.ndarray import from_numpy

pytestmark = requires_gpu

DTYPES = ("float32", "float64", "float16", "int32", "int64", "uint8", "int8", "bool")


def values(shape, dtype, seed=0):
    rng = onp.random.default_rng(seed)
    return rng.uniform(0, 100, shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (33, 65), (1 << 20,)])
def test_round_trip_copies(shape, dtype):
    host = values(shape, dtype)
    on_gpu = from_numpy(host, device=gpu(0))
    assert on_gpu.device == gpu(0) and on_gpu.dtype == host.dtype and on_gpu.shape == shape
    onp.testing.assert_array_equal(on_gpu.asnumpy(), host)
    twin = on_gpu.copyto(gpu(0))  # device to device
    back = twin.copyto(cpu(0))
    onp.testing.assert_array_equal(back.asnumpy(), host)
    pinned = on_gpu.copyto(cpu_pinned(0))
    onp.testing.assert_array_equal(pinned.asnumpy(), host)
    onp.testing.assert_array_equal(pinned.copyto(gpu(0)).asnumpy(), host)


def test_copies_that_change_dtype():
    host = values((5, 6), "float64")
    for src, dst in [(cpu(0), gpu(0)), (gpu(0), cpu(0)), (gpu(0), gpu(0))]:
        a = from_numpy(host, device=src)
        b = from_numpy(onp.zeros((5, 6), "float16"), device=dst)
        a.copyto(b)
        onp.testing.assert_allclose(b.asnumpy(), host.astype("float16"), rtol=1e-3)


def test_copy_between_two_gpus():
    if num_gpus() < 2:
        pytest.skip("needs two GPUs")
    host = values((300, 7), "float32")
    on_1 = from_numpy(host, device=gpu(0)).copyto(gpu(1))
    assert on_1.device == gpu(1)
    onp.testing.assert_array_equal(on_1.asnumpy(), host)


def test_results_stay_on_the_gpu_and_mixed_devices_are_refused():
    x = np.ones((3, 4), device=gpu(0))
    y = x * 2 + 1
    assert y.device == gpu(0)
    assert float(y.sum()) == 36.0
    with pytest.raises(ValueError, match=r"gpu\(0\).*cpu\(0\)|cpu\(0\).*gpu\(0\)"):
        x + np.ones((3, 4), device=cpu(0))


def test_unknown_gpu_id_names_id_and_count():
    count = num_gpus()
    with pytest.raises((ValueError, PymxError), match=rf"gpu\({count}\).*{count}"):
        np.ones((2,), device=gpu(count)).asnumpy()
    assert float(np.ones((2,), device=gpu(0)).sum()) == 2.0  # still usable


def test_memory_info_and_stats():
    free, total = gpu_memory_info(0)
    assert 0 < free <= total
    gpu(0).empty_cache()
    before = gpu(0).memory_stats()
    x = np.zeros((1 << 20,), device=gpu(0))  # 4 MiB: a 2 MiB-rounded large block
    x.wait_to_read()
    during = gpu(0).memory_stats()
    assert during["in_use"] >= before["in_use"] + (4 << 20)
    assert during["peak_in_use"] >= during["in_use"]
    del x
    npx.waitall()
    after = gpu(0).memory_stats()
    assert after["in_use"] == before["in_use"] and after["cached"] >= 4 << 20
    # The cached block is reused: no new driver allocation for the same size.
    y = np.zeros((1 << 20,), device=gpu(0))
    y.wait_to_read()
    del y
    npx.waitall()
    assert gpu(0).memory_stats()["num_allocs"] == after["num_allocs"]
    gpu(0).empty_cache()
    assert gpu(0).memory_stats()["cached"] == 0


def test_out_of_memory_is_a_memory_error_with_numbers_and_recovers():
    _, total = gpu_memory_info(0)
    keep = np.ones((1024,), device=gpu(0))
    with pytest.raises(MemoryError) as info:
        np.zeros((int(total),), device=gpu(0)).wait_to_read()  # 4x the device's memory
    message = str(info.value)
    assert "CUDA out of memory on gpu(0)" in message
    for part in ("tried to allocate", "in use", "cached", "free of", "total"):
        assert part in message, message
    x = np.ones((1 << 16,), device=gpu(0)) + keep[:1]
    assert float(x.sum()) == 2.0 * (1 << 16)


def test_async_kernel_error_surfaces_at_the_wait_and_device_stays_usable():
    x = from_numpy(onp.arange(4.0), device=gpu(0))
    bad = invoke("take", [x, from_numpy(onp.array([0, 11]), device=gpu(0))], {"mode": "raise"})[0]
    with pytest.raises(IndexError):
        (bad * 2).asnumpy()
    onp.testing.assert_array_equal((x * 2).asnumpy(), onp.arange(4.0) * 2)


def test_random_dag_matches_cpu():
    """A random program of 300 ops over 12 arrays gives the same arrays on gpu(0) as on cpu(0)."""
    rng = onp.random.default_rng(42)
    start = [rng.uniform(0.5, 1.5, (16, 8)).astype("float32") for _ in range(12)]
    program = [(rng.integers(0, 6), rng.integers(0, 12), rng.integers(0, 12), rng.integers(0, 12))
               for _ in range(300)]

    def execute(device):
        arrays = [from_numpy(a, device=device) for a in start]
        for op, dst, a, b in program:
            x, y = arrays[a], arrays[b]
            arrays[dst] = [lambda: x + y, lambda: x * 0.5 + y * 0.5, lambda: np.maximum(x, y),
                           lambda: np.tanh(x) + 1, lambda: x / (np.abs(y) + 1),
                           lambda: (x - y).mean(axis=1, keepdims=True) + y][op]()
        return [a.asnumpy() for a in arrays]

    for want, got in zip(execute(cpu(0)), execute(gpu(0))):
        onp.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("hybridize", [False, True])
def test_leafnet_training_on_gpu_matches_cpu(tmp_path, hybridize):
    path = str(tmp_path / "leaf.params")
    save_starting_parameters(path)
    trained = []
    for device in (cpu(0), gpu(0)):
        net = leaf_network()
        net.load_parameters(path, device=device)
        if hybridize:
            net.hybridize()
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05})
        for data, label in batches():
            data, label = from_numpy(data, device=device), from_numpy(label, device=device)
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(len(data))
        trained.append({k: p.data().asnumpy() for k, p in net.collect_params().items()})
    for name, want in trained[0].items():
        onp.testing.assert_allclose(trained[1][name], want, rtol=1e-3, atol=1e-4, err_msg=name)


def test_forked_child_uses_the_cpu_and_drops_inherited_gpu_arrays():
    """CUDA does not survive fork: a child of a process that used the GPU computes on the CPU,
    gets an error naming fork for the GPU, and frees the GPU arrays it inherited without
    touching CUDA (a crash there would kill the child with a signal)."""
    on_gpu = np.ones((4,), device=gpu(0)) * 2
    on_gpu.wait_to_read()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            cpu_ok = (np.ones((3,)) + 1).asnumpy().tolist() == [2.0] * 3
            npx.waitall()  # waits for the child's work only: the parent's GPU streams are not its
            try:
                np.ones((2,), device=gpu(0))
                code = 4
            except PymxError as error:
                code = 0 if cpu_ok and "fork" in str(error) else 5
            del on_gpu
            gc.collect()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert on_gpu.asnumpy().tolist() == [2.0] * 4
