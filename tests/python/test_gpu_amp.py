"""pymx.amp on a GPU: the op lists give the same dtypes as on the CPU, multi_all_finite agrees
with NumPy, the conv net of test_amp trains under amp in float16 and bfloat16 on gpu(0) as in
float32 on cpu(0), an inf gradient on the GPU skips the step, and convert_hybrid_block placed on
gpu(0) matches the CPU's conversion. Skipped when no GPU is visible."""
import numpy as onp
import pytest
from conftest import requires_gpu
from test_amp import (BATCH, LOW, SCALE, all_finite_cases, amp_off,  # noqa: F401
                      amp_trainer, assert_follows, backward, dtypes_of_listed_ops, snapshot,
                      small_net, start, task, train)

from pymx import amp, np
from pymx._op import invoke
from pymx.base import bfloat16
from pymx.device import cpu, gpu

pytestmark = requires_gpu


@pytest.mark.parametrize("target", LOW)
def test_op_lists_give_the_cpu_dtypes(target):
    low = bfloat16 if target == "bfloat16" else onp.dtype("float16")
    amp.init(target)
    on_cpu = dtypes_of_listed_ops(low)
    with gpu(0):
        assert dtypes_of_listed_ops(low) == on_cpu


def test_multi_all_finite_on_gpu_matches_numpy():
    for name, arrays in all_finite_cases().items():
        expected = all(onp.isfinite(a).all() for a in arrays)
        result = invoke("multi_all_finite", [np.array(a, device=gpu(0)) for a in arrays])[0]
        assert result.device == gpu(0) and bool(result) == expected, name
    big = onp.zeros(1 << 22, dtype="float16")  # many blocks; the inf in the last one
    big[-1] = onp.inf
    assert not bool(invoke("multi_all_finite", [np.array(big, device=gpu(0))])[0])


@pytest.mark.parametrize("target", LOW)
def test_training_on_gpu_follows_float32_on_cpu(start, target):
    reference, _ = train(start, [cpu(0)])
    history, trainer = train(start, [gpu(0)], target)
    # cuBLAS and cuDNN sum the low-precision products in another order than the CPU's widened
    # GEMMs, well inside the tolerance of assert_follows.
    assert_follows(reference, history, trainer, target)


def test_inf_gradient_on_gpu_skips_the_step(start):
    devices = [gpu(0)]
    net, trainer = amp_trainer(start, devices)
    backward(net, trainer, devices)
    trainer.step(BATCH)
    before = snapshot(trainer)
    backward(net, trainer, devices)
    grad = net.collect_params()["3.weight"].grad(gpu(0))
    grad[(0,) * grad.ndim] = onp.inf
    trainer.step(BATCH)
    after = snapshot(trainer)
    for a, b in zip(before[0] + before[1], after[0] + after[1]):
        assert a.tobytes() == b.tobytes()
    assert before[2] == after[2] and trainer.amp_loss_scale == SCALE / 2


@pytest.mark.parametrize("target", LOW)
def test_convert_hybrid_block_on_gpu_matches_cpu(start, target):
    net = small_net(start)
    images = np.array(task()[0])
    on_cpu = amp.convert_hybrid_block(net, images, target_dtype=target)(images)
    converted = amp.convert_hybrid_block(net, images, target_dtype=target, device=gpu(0),
                                         cast_params_offline=True)
    converted.hybridize()
    on_gpu = converted(images.to_device(gpu(0)))
    assert on_gpu.device == gpu(0) and on_gpu.dtype == on_cpu.dtype
    tolerance = 1e-2 if target == "float16" else 5e-2  # as above: another summation order
    onp.testing.assert_allclose(on_gpu.asnumpy().astype("float32"),
                                on_cpu.asnumpy().astype("float32"), atol=tolerance)
