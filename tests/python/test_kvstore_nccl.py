"""kvstore 'nccl' (pymx/kvstore/nccl.py, cuda/src/nccl_all_reduce.cc): its errors on machines
without a usable GPU, and on a GPU the same results as the 'device' store, with the sums run by
NCCL (the engine op 'nccl_all_reduce'). Sums over one GPU are exact, so those comparisons are
exact; a sum over two GPUs is compared with NumPy's (float32 sums of two terms are exact too).
Logical GPUs of one physical GPU are refused before NCCL sees them (fresh processes, as in
test_gpu_logical_devices.py)."""
import os
import textwrap

import numpy as onp
import pytest
from conftest import ops_ran, requires_gpu, run_python

from pymx import autograd, cpu, gpu, kvstore, np
from pymx._c import core as _core
from pymx.base import PymxError
from pymx.device import num_gpus
from pymx.gluon import Trainer, nn


def test_unknown_store_type_lists_nccl():
    with pytest.raises(ValueError, match="Unknown KVStore type 'bogus'; pymx supports 'device', "
                                         "'local', 'nccl'"):
        kvstore.create('bogus')


@pytest.mark.skipif(num_gpus() > 0, reason="a GPU is visible")
def test_create_without_gpu_raises_and_the_process_stays_usable():
    with pytest.raises(PymxError, match=r"KVStore 'nccl' sums arrays on GPUs with NCCL, but no "
                                        r"GPU is visible \(num_gpus\(\) is 0"):
        kvstore.create('nccl')
    store = kvstore.create('device')
    values = [np.array([1.0, 2.0], device=cpu(0)), np.array([3.0, 4.0], device=cpu(1))]
    store.pushpull('w', values)
    for value in values:
        onp.testing.assert_array_equal(value.asnumpy(), [4.0, 6.0])


def test_trainer_with_nccl_over_cpu_devices_raises():
    net = nn.Dense(2, in_units=3)
    net.initialize(device=[cpu(0), cpu(1)])
    trainer = Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1}, kvstore='nccl')
    for device in (cpu(0), cpu(1)):
        with autograd.record():
            loss = net(np.ones((2, 3), device=device)).sum()
        loss.backward()
    if num_gpus() == 0:  # the store cannot be made
        error, message = PymxError, "no GPU is visible"
    else:
        error, message = ValueError, r"sums GPU arrays only, but key 0 has a value on cpu\(0\)"
    with pytest.raises(error, match=message):
        trainer.step(4)


def test_native_all_reduce_refuses_cpu_arrays():
    arrays = [np.ones((3,), device=cpu(0)), np.ones((3,), device=cpu(1))]
    # A CPU-only build has no NCCL at all; a CUDA build names the array that is not on a GPU.
    with pytest.raises(PymxError, match=r"built without CUDA, so the NCCL all-reduce|NCCL "
                                        r"all-reduce sums arrays on GPUs, but got one on cpu\(0\)"):
        _core.nccl_all_reduce(arrays)
    onp.testing.assert_array_equal(arrays[1].asnumpy(), [1.0, 1.0, 1.0])


# ---- on a GPU ------------------------------------------------------------------------------

def _runs_nccl(fn, sums=1):
    """Runs fn(), checking that it ran `sums` NCCL all-reduces (pushed on gpu(0))."""
    assert ops_ran(fn, device="gpu(0)").get("nccl_all_reduce") == sums


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "uint8"])
def test_pushpull_on_one_gpu_matches_device_store(dtype):
    host = (onp.random.uniform(-50, 50, size=(257, 129)) % 100).astype(dtype)
    results = {}

    def sum_then_add_one(store):
        value = np.array(host, device=gpu(0)) * 1  # pending when the sum is pushed
        store.pushpull("w", value)
        results[store.type] = (value + 1).asnumpy()  # an op after the sum must see it

    nccl = kvstore.create('nccl')
    assert nccl.type == 'nccl'
    _runs_nccl(lambda: sum_then_add_one(nccl))
    sum_then_add_one(kvstore.create('device'))
    onp.testing.assert_array_equal(results["nccl"], host + 1)
    onp.testing.assert_array_equal(results["nccl"], results["device"])


@requires_gpu
def test_push_pull_and_out_leave_the_pushed_values_alone():
    host = onp.random.uniform(size=(1000,)).astype("float32")
    store = kvstore.create('nccl')
    value = np.array(host, device=gpu(0))
    out = np.zeros((1000,), device=gpu(0))
    _runs_nccl(lambda: store.pushpull(3, value, out=out))
    onp.testing.assert_array_equal(out.asnumpy(), host)
    store.init("k", np.zeros((1000,), device=gpu(0)))
    _runs_nccl(lambda: store.push("k", [value]))
    pulled = [np.zeros((1000,), device=gpu(0)), np.zeros((1000,), device=cpu(0))]
    store.pull("k", pulled)
    for array in pulled + [value]:
        onp.testing.assert_array_equal(array.asnumpy(), host)


@requires_gpu
def test_gpu_errors_name_the_values():
    store = kvstore.create('nccl')
    with pytest.raises(TypeError, match="NCCL all-reduce cannot sum arrays of dtype bool"):
        store.pushpull("b", np.array([True, False], device=gpu(0)))
    with pytest.raises(ValueError, match=r"KVStore 'nccl' sums GPU arrays only, but key 'c' has "
                                         r"a value on cpu\(0\)"):
        store.pushpull("c", [np.ones((2,), device=gpu(0)), np.ones((2,), device=cpu(0))])
    with pytest.raises(ValueError, match=r"gpu\(0\) is listed twice"):
        store.pushpull("d", [np.ones((2,), device=gpu(0)), np.ones((2,), device=gpu(0))])
    value = np.array([1.0, 2.0], device=gpu(0))  # the store still works
    store.pushpull("e", value)
    onp.testing.assert_array_equal(value.asnumpy(), [1.0, 2.0])


@requires_gpu
@pytest.mark.parametrize("on_kvstore", [False, True])
def test_trainer_on_one_gpu_trains_as_with_the_device_store(on_kvstore):
    x = onp.random.uniform(-1, 1, size=(8, 5)).astype("float32")
    y = onp.random.uniform(-1, 1, size=(8, 3)).astype("float32")
    trained = {}
    for name in ("nccl", "device"):
        net = nn.Dense(3, in_units=5)
        net.initialize(device=gpu(0))
        for param, seed in zip(net.collect_params().values(), (1, 2)):
            param.set_data(np.array(onp.random.RandomState(seed).uniform(
                -1, 1, size=param.shape).astype("float32"), device=gpu(0)))
        # A store object, not a name: for one device a name makes no store (MXNet's rule).
        trainer = Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1, 'momentum': 0.9},
                          kvstore=kvstore.create(name), update_on_kvstore=on_kvstore)

        def step():
            with autograd.record():
                loss = ((net(np.array(x, device=gpu(0))) - np.array(y, device=gpu(0))) ** 2).sum()
            loss.backward()
            trainer.step(8)

        for _ in range(3):
            if name == "nccl":
                _runs_nccl(step, sums=2)  # one per parameter: weight and bias
            else:
                step()
        trained[name] = [p.data(gpu(0)).asnumpy() for p in net.collect_params().values()]
    for nccl_value, device_value in zip(trained["nccl"], trained["device"]):
        onp.testing.assert_array_equal(nccl_value, device_value)


@requires_gpu
@pytest.mark.skipif(num_gpus() < 2, reason="needs two GPUs")
def test_pushpull_over_two_gpus_sums_like_numpy():
    hosts = [onp.random.uniform(size=(333, 77)).astype("float32") for _ in range(2)]
    store = kvstore.create('nccl')
    values = [np.array(host, device=gpu(1 - i)) for i, host in enumerate(hosts)]  # any order
    store.pushpull("w", values)
    for value in values:
        onp.testing.assert_allclose(value.asnumpy(), hosts[0] + hosts[1], rtol=1e-6)
    with pytest.raises(ValueError, match=r"sums every key over one set of GPUs, but key 'v' has "
                                         r"values on \[gpu\(0\)\] and earlier keys on "
                                         r"\[gpu\(0\), gpu\(1\)\]"):
        store.pushpull("v", np.ones((2,), device=gpu(0)))


@requires_gpu
def test_logical_gpus_of_one_gpu_are_refused_and_the_process_stays_usable():
    code = textwrap.dedent("""
        import numpy as onp
        from pymx import kvstore, np
        from pymx.device import gpu
        store = kvstore.create("nccl")
        values = [np.ones((4, 5), device=gpu(i)) for i in range(2)]
        try:
            store.pushpull("w", values)
        except ValueError as error:
            message = str(error)
            assert "gpu(0) and gpu(1) are both physical GPU 0" in message, message
            assert "PYMX_LOGICAL_GPUS_PER_GPU=2" in message, message
        else:
            raise AssertionError("two logical GPUs of one GPU were not refused")
        kvstore.create("device").pushpull("w", values)  # the 'device' store sums over them
        for value in values:
            onp.testing.assert_array_equal(value.asnumpy(), onp.full((4, 5), 2.0))
        alone = np.ones((3,), device=gpu(1))
        store.pushpull("v", alone)  # the nccl store still works on one of them
        onp.testing.assert_array_equal((alone * 3).asnumpy(), [3.0, 3.0, 3.0])
        print("ok")
    """)
    result = run_python(code, env={**os.environ, "PYMX_LOGICAL_GPUS_PER_GPU": "2"}, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split()[-1] == "ok"
