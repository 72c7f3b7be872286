"""pymx.device: Device values, `with` scopes, GPU queries, memory, and device errors."""
import pickle
import threading

import numpy as onp
import pytest
from conftest import requires_gpu

import pymx
from pymx import np
from pymx._c import core
from pymx.base import PymxError
from pymx.device import Device, cpu, cpu_pinned, current_device, gpu, gpu_memory_info, num_gpus


def test_device_values():
    assert str(gpu(1)) == repr(gpu(1)) == "gpu(1)"
    assert str(cpu()) == "cpu(0)" and str(cpu_pinned(2)) == "cpu_pinned(2)"
    assert gpu() == gpu(0) == Device("gpu") == Device(gpu(0))
    assert cpu(0) != cpu(1) and cpu(0) != gpu(0) and cpu(0) != "cpu(0)"
    assert hash(cpu(1)) == hash(Device("cpu", 1))
    assert len({cpu(0), cpu(0), cpu(1), gpu(0)}) == 3
    assert (gpu(3).device_type, gpu(3).device_id, gpu(3).device_typeid) == ("gpu", 3, 2)
    assert pickle.loads(pickle.dumps(cpu(1))) == cpu(1)


def test_bad_device_values():
    with pytest.raises(ValueError, match="'tpu'"):
        Device("tpu")
    with pytest.raises(ValueError, match="-1"):
        cpu(-1)
    with pytest.raises(ValueError, match="'1'"):
        gpu("1")


def test_with_scope_nests_and_restores():
    assert current_device() == cpu(0)
    with cpu(1):
        assert current_device() == cpu(1)
        assert np.zeros((2,)).device == cpu(1)
        with cpu(2) as inner:
            assert inner == cpu(2) and current_device() == cpu(2)
        assert current_device() == cpu(1)
    assert current_device() == cpu(0)
    assert np.zeros((2,)).device == cpu(0)


def test_same_device_object_reentered():
    device = cpu(3)
    with device:
        with cpu(4):
            with device:
                assert current_device() == cpu(3)
            assert current_device() == cpu(4)
        assert current_device() == cpu(3)
    assert current_device() == cpu(0)


def test_scope_is_per_thread():
    seen = []
    with cpu(1):
        thread = threading.Thread(target=lambda: seen.append(current_device()))
        thread.start()
        thread.join()
    assert seen == [cpu(0)]


def test_num_gpus_is_a_count():
    count = num_gpus()
    assert isinstance(count, int) and count >= 0
    assert pymx.num_gpus() == count


def test_missing_gpu_is_a_clear_error():
    missing = num_gpus() + 4
    with pytest.raises(ValueError, match=rf"gpu\({missing}\) does not exist: {num_gpus()} GPU"):
        np.zeros((2,), device=gpu(missing))
    # The process stays usable.
    assert np.ones((2,)).asnumpy().tolist() == [1.0, 1.0]


@pytest.mark.skipif(num_gpus() > 0, reason="checks the CPU-only behaviour")
def test_no_gpu_allocation_and_memory_info_errors():
    with pytest.raises(ValueError, match=r"gpu\(0\) does not exist: 0 GPU"):
        np.ones((3,), device=gpu(0))
    with pytest.raises(PymxError, match="GPU|CUDA"):
        gpu_memory_info(0)
    with pytest.raises((ValueError, PymxError), match=r"gpu\(0\) does not exist"):
        core.gpu_physical_device(0)  # a CUDA build says ValueError, a CPU-only one PymxError
    assert np.ones((1,)).item() == 1.0


@requires_gpu
def test_gpu_memory_info():
    free, total = gpu_memory_info(0)
    assert 0 < free <= total


def test_cpu_memory_stats_and_empty_cache():
    x = np.ones((1024,))
    x.wait_to_read()
    stats = cpu(0).memory_stats()
    assert set(stats) == {"in_use", "cached", "peak_in_use", "num_allocs"}
    assert stats["in_use"] >= 4096 and stats["peak_in_use"] >= stats["in_use"]
    del x
    pymx.waitall()
    cpu(0).empty_cache()
    assert cpu(0).memory_stats()["cached"] == 0


@requires_gpu
def test_gpu_empty_cache_returns_memory():
    x = np.ones((1 << 20,), device=gpu(0))
    x.wait_to_read()
    del x
    pymx.waitall()
    gpu(0).empty_cache()
    assert gpu(0).memory_stats()["cached"] == 0


def test_cpu_devices_are_distinct(device):
    # cpu(0) and cpu(1) are separate devices: arrays keep their device through ops and copies.
    a = np.array(onp.arange(4.0), device=cpu(1))
    b = (a * 2).copyto(cpu(2))
    assert a.device == cpu(1) and (a * 2).device == cpu(1) and b.device == cpu(2)
    assert b.asnumpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    c = b.copyto(device)
    assert c.device == device and c.asnumpy().tolist() == [0.0, 2.0, 4.0, 6.0]
