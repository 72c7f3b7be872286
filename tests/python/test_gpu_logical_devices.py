"""Logical GPUs (Note [Logical GPUs]): with PYMX_LOGICAL_GPUS_PER_GPU=2 each physical GPU is two
devices, so the multi-GPU paths run on a one-GPU machine: copies between devices, mixed-device
errors, the 'device' kvstore's reduction, and the tutorial's data-parallel training over
[gpu(0), gpu(1)], which must match the same training over [cpu(0), cpu(1)] with identical
copies of the trained parameters after every step. Each case runs in a fresh process (the setting is read once).
Skipped when no GPU is visible."""
import os
import textwrap

from conftest import requires_gpu, run_python

from pymx.device import num_gpus

pytestmark = requires_gpu

PRELUDE = """
import numpy as onp, pymx
from pymx import autograd, gluon, np, npx
from pymx.device import cpu, gpu, num_gpus, gpu_memory_info
"""


def run_split(code):
    env = {**os.environ, "PYMX_LOGICAL_GPUS_PER_GPU": "2"}
    result = run_python(PRELUDE + textwrap.dedent(code), env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_each_gpu_is_two_devices_with_copies_between_them():
    out = run_split(f"""
        physical = {num_gpus()}  # this process's count: no split
        assert num_gpus() == 2 * physical, (num_gpus(), physical)
        assert gpu_memory_info(0)[1] == gpu_memory_info(1)[1]  # one physical device
        host = onp.arange(3000, dtype="float32").reshape(30, 100)
        a = np.array(host, device=gpu(0))
        b = a.copyto(gpu(1))
        assert b.device == gpu(1)
        onp.testing.assert_array_equal((b * 2).asnumpy(), host * 2)
        onp.testing.assert_array_equal(b.copyto(gpu(0)).asnumpy(), host)
        try:
            a + b
        except ValueError as error:
            assert "gpu(0)" in str(error) and "gpu(1)" in str(error), error
        else:
            raise AssertionError("mixing gpu(0) and gpu(1) was not refused")
        print("ok")
    """)
    assert out.split()[-1] == "ok"


def test_device_kvstore_sums_over_logical_gpus():
    out = run_split("""
        from pymx import kvstore
        store = kvstore.create("device")
        values = [onp.full((64, 33), i + 1.0, dtype="float32") for i in range(2)]
        store.init("w", np.zeros((64, 33), device=gpu(0)))
        outs = [np.zeros((64, 33), device=gpu(i)) for i in range(2)]
        store.pushpull("w", [np.array(v, device=gpu(i)) for i, v in enumerate(values)], out=outs)
        for i, out in enumerate(outs):
            assert out.device == gpu(i)
            onp.testing.assert_array_equal(out.asnumpy(), values[0] + values[1])
        print("ok")
    """)
    assert out.split()[-1] == "ok"


def test_data_parallel_training_over_two_logical_gpus_matches_two_cpus(tmp_path):
    out = run_split(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from small_leafnet import batches, leaf_network, save_starting_parameters

        sizes = dict(filters=(16, 32), hidden=50)
        path = {str(tmp_path / "leaf.params")!r}
        save_starting_parameters(path, **sizes)

        def train(devices, hybridize):
            net = leaf_network(**sizes)
            net.load_parameters(path, device=devices)
            if hybridize:
                net.hybridize(static_alloc=True, static_shape=True)
            loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
            trainer = gluon.Trainer(net.collect_params(), "sgd", {{"learning_rate": 0.05}},
                                    kvstore="device")
            for data, label in batches():
                xs = gluon.utils.split_and_load(data, devices)
                ys = gluon.utils.split_and_load(label, devices)
                with autograd.record():
                    losses = [loss_fn(net(x), y) for x, y in zip(xs, ys)]
                for loss in losses:
                    loss.backward()
                trainer.step(len(data))
                for name, p in net.collect_params().items():
                    if p.grad_req == "null":  # batch norm's running statistics: per device
                        continue
                    first, second = (a.asnumpy() for a in p.list_data())
                    onp.testing.assert_array_equal(first, second, err_msg=name)
            return {{k: p.list_data()[1].asnumpy() for k, p in net.collect_params().items()}}

        for hybridize in (False, True):
            want = train([cpu(0), cpu(1)], hybridize)
            got = train([gpu(0), gpu(1)], hybridize)
            for name, value in want.items():
                onp.testing.assert_allclose(got[name], value, rtol=1e-3, atol=1e-4, err_msg=name)
        print("ok")
    """)
    assert out.split()[-1] == "ok"


def test_dlpack_names_the_cuda_device_of_a_logical_gpu():
    # gpu(1) is CUDA device 0 here: exported as (kDLCUDA, 0), and a capsule from CUDA device 0
    # comes in on gpu(0), the first pymx device there.
    out = run_split("""
        from pymx._c import core
        assert [core.gpu_physical_device(i) for i in range(2)] == [0, 0]
        a = np.array(onp.arange(6, dtype="float32"), device=gpu(1))
        assert a.__dlpack_device__() == (2, 0), a.__dlpack_device__()
        b = np.from_dlpack(a.__dlpack__())  # the capsule: a pymx array itself is taken as is
        assert b.device == gpu(0), b.device
        onp.testing.assert_array_equal(b.asnumpy(), onp.arange(6))
        try:
            core.gpu_physical_device(2)
        except ValueError as error:
            assert "gpu(2)" in str(error), error
        else:
            raise AssertionError("gpu(2) was not refused")
        print("ok")
    """)
    assert out.split()[-1] == "ok"
