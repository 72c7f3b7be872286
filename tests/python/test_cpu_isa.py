"""PYMX_CPU_ISA (Note [CPU instruction sets], engine/src/cpu_isa.h): every instruction set this
CPU runs below its best computes what the best computes, through the kernels compiled once per
set (direct and fused convolutions and their gradients, few-row products, recurrent layers,
softmax, layer_norm, pooling, vector math, float16 conversion) to float32 rounding, and draws the
same random numbers bit for bit; runtime.Features reports the capped set; other values are
refused, naming them. On an AVX-512 machine this is what runs the AVX2 paths, and on any machine
the baseline ones."""
import os

import numpy as onp
import pytest

from conftest import run_python

LEVELS = ["baseline", "avx2", "avx512"]

_FEATURES = """
from pymx.runtime import Features
features = Features()
print(*[name for name in ("CPU_SSE2", "CPU_AVX2", "CPU_AVX512F") if features.is_enabled(name)])
"""

# Saves to OUT (an .npz path) results of the per-instruction-set kernels.
_SCRIPT = """
import numpy as onp
from pymx import autograd, gluon, np, npx
from pymx._train import LeafNetwork
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(3)
def arr(*shape, dtype="float32"):
    return from_numpy(rng.standard_normal(shape), dtype=dtype)
out = {}
def grads(name, fn, *inputs):
    for x in inputs:
        x.attach_grad()
    with autograd.record():
        y = fn(*inputs)
    y.backward(from_numpy(rng.standard_normal(y.shape), dtype=y.dtype))
    out[name] = y.asnumpy()
    for i, x in enumerate(inputs):
        out[f"{name} grad {i}"] = x.grad.asnumpy()

# The tutorial's network, hybridized (fused conv + relu + pool) and not, at batch 1 and 8: its
# output. (Its gradients are not compared: a relu input within rounding of 0 takes a gradient on
# one machine and none on another.)
net = LeafNetwork(dropout=0.0)
net.initialize()
for batch in (1, 8):
    out[f"leafnet b{batch}"] = net(arr(batch, 3, 128, 128)).asnumpy()
net.hybridize()
out["leafnet hybridized"] = net(arr(4, 3, 128, 128)).asnumpy()
# The fused relu's backward, with a bias that keeps every output positive (see above).
grads("conv 2x2 relu", lambda x, w, b: npx.convolution(x, w, b + 30, kernel=(2, 2),
      num_filter=32, act_type="relu"), arr(2, 3, 64, 64), arr(32, 3, 2, 2), arr(32))
grads("conv 3x3", lambda x, w, b: npx.convolution(x, w, b, kernel=(3, 3), pad=(1, 1),
      num_filter=24), arr(3, 16, 20, 20), arr(24, 16, 3, 3), arr(24))
grads("conv 5x5 stride 2", lambda x, w: npx.convolution(x, w, None, kernel=(5, 5),
      stride=(2, 2), num_filter=8, no_bias=True), arr(2, 3, 31, 31), arr(8, 3, 5, 5))
for rows in (1, 3, 6, 20, 40):
    grads(f"dense {rows} rows", lambda x, w: npx.fully_connected(x, w, None, num_hidden=300,
          no_bias=True), arr(rows, 700), arr(300, 700))
lstm = gluon.rnn.LSTM(24, num_layers=2, bidirectional=True)
lstm.initialize()
grads("lstm", lstm, arr(9, 3, 10))
gru = gluon.rnn.GRU(16)
gru.initialize()
grads("gru", gru, arr(6, 2, 5))
for axis in (-1, 1):
    grads(f"softmax axis {axis}", lambda x: npx.softmax(x, axis=axis), arr(4, 37, 50))
    grads(f"log_softmax axis {axis}", lambda x: npx.log_softmax(x, axis=axis), arr(4, 37, 50))
grads("layer_norm", lambda x, g, b: npx.layer_norm(x, g, b, axis=-1), arr(30, 130), arr(130),
      arr(130))
grads("max_pool", lambda x: npx.pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max"),
      arr(2, 5, 16, 16))
for dtype in ("float32", "float64"):
    x = arr(1000, dtype=dtype)
    for name in ("exp", "log", "tanh", "sin", "sqrt"):
        out[f"{name} {dtype}"] = getattr(np, name)(np.abs(x) if name in ("log", "sqrt")
                                                   else x).asnumpy()
    out[f"erf {dtype}"] = npx.erf(x).asnumpy()
out["to float16"] = arr(1001).astype("float16").asnumpy()
out["from float16"] = arr(1001).astype("float16").astype("float32").asnumpy()
np.random.seed(11)
out["normal"] = np.random.normal(size=(1003,)).asnumpy()
out["uniform"] = np.random.uniform(size=(1003,)).asnumpy()
with autograd.train_mode():
    out["dropout"] = npx.dropout(np.ones((64, 65)), p=0.3).asnumpy()
onp.savez(OUT, **out)
"""

# Arrays that must match bit for bit whatever the instruction set: draws and exact conversions.
_EXACT = ("normal", "uniform", "dropout", "to float16", "from float16")


def _env(level=None):
    env = {k: v for k, v in os.environ.items() if k != "PYMX_CPU_ISA"}
    if level is not None:
        env["PYMX_CPU_ISA"] = level
    return env


def _features(level=None):
    done = run_python(_FEATURES, env=_env(level))
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def _best_level():
    return LEVELS[len(_features()) - 1]


def _run(level, tmp_path):
    path = str(tmp_path / f"{level}.npz")
    done = run_python(f"OUT = {path!r}\n" + _SCRIPT, env=_env(level), timeout=600)
    assert done.returncode == 0, done.stderr
    return onp.load(path)


@pytest.mark.parametrize("level", LEVELS)
def test_features_report_the_capped_instruction_set(level):
    best = _best_level()
    effective = LEVELS[min(LEVELS.index(level), LEVELS.index(best))]
    assert _features(level) == ["CPU_SSE2", "CPU_AVX2", "CPU_AVX512F"][:LEVELS.index(effective) + 1]


def test_each_lower_instruction_set_computes_what_the_best_computes(tmp_path):
    best = _best_level()
    lower = LEVELS[:LEVELS.index(best)]
    if not lower:
        pytest.skip("this CPU runs only x86-64's baseline instruction set")
    want = _run(best, tmp_path)
    for level in lower:
        got = _run(level, tmp_path)
        assert sorted(got.files) == sorted(want.files)
        for key in want.files:
            if key in _EXACT:
                onp.testing.assert_array_equal(got[key], want[key], err_msg=f"{level}: {key}")
            else:
                # float32 sums in another order or with separate multiplies and adds: errors
                # of the order of the terms' rounding, which for a sum that cancels (a weight
                # gradient over thousands of pixels) is relative to the array's scale; the
                # network and the recurrent layers carry rounding through layers and steps.
                scale = max(1.0, float(onp.abs(want[key]).max(initial=0.0)))
                onp.testing.assert_allclose(got[key], want[key], rtol=2e-4, atol=2e-5 * scale,
                                            err_msg=f"{level}: {key}")


@pytest.mark.parametrize("value", ["sse9", "AVX2", "avx-512"])
def test_other_values_are_refused_naming_them(value):
    done = run_python("from pymx import np\nprint((np.ones(3) + 1).asnumpy())", env=_env(value))
    assert done.returncode != 0
    assert f'PYMX_CPU_ISA="{value}" is not one of "baseline", "avx2", "avx512"' in done.stderr, \
        done.stderr
