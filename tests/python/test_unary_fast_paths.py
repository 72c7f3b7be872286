"""The CPU fast paths of the transcendental elementwise ops (np.exp, np.tanh, ...) and of the
activation op's sigmoid, tanh, softrelu and log_sigmoid: libmvec's vector routines over the
intra-op threads (Note [Vector math through libmvec] in engine/src/ops/vector_math.h).

Accuracy: against float64 NumPy, within kUlps units in the last place of the result's dtype
(libmvec measured here: at most 3.3 ulp in float32 and 3 in float64), special values (inf, -inf,
NaN, -0, subnormals, saturation) as NumPy gives them; float16 and bfloat16 within one ulp of
their dtype. Every element is computed the same way wherever an array starts or is split, so a
slice gives the bits of the whole array's result, and one thread (and the naive engine) the bits
of two."""
import json

import numpy as onp
import pytest

import pymx
from pymx import gluon, np, npx
from pymx.test_utils import assert_almost_equal, bfloat16, check_numeric_gradient

from conftest import requires_gpu, run_python

# Units in the last place allowed against float64 NumPy, float32 and float64 results.
kUlps = 4

# op: (low, high) of the arguments drawn, wide enough to leave each routine's fast range.
DOMAINS = {
    "exp": (-100, 100), "expm1": (-30, 30), "log": (1e-30, 1e30), "log1p": (-0.999, 1e6),
    "log2": (1e-30, 1e30), "log10": (1e-30, 1e30), "cbrt": (-1e6, 1e6),
    "sin": (-1e3, 1e3), "cos": (-1e3, 1e3), "tan": (-10, 10),
    "arcsin": (-1, 1), "arccos": (-1, 1), "arctan": (-1e4, 1e4),
    "sinh": (-100, 100), "cosh": (-100, 100), "tanh": (-12, 12),
    "arcsinh": (-1e6, 1e6), "arccosh": (1, 1e6), "arctanh": (-1, 1),
}
OPS = sorted(DOMAINS)
SPECIAL = [onp.nan, onp.inf, -onp.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-40, -1e-40, 1e-310,
           -1e-310, 3e-8, -3e-8, 20.0, -20.0, 40.0, -40.0, 89.0, -89.0, 710.0, -710.0, 1e30, -1e30]


def draw(op, n, dtype, rng):
    low, high = DOMAINS[op]
    if low > 0 and high / low > 1e3:  # spread over magnitudes
        values = onp.exp(rng.uniform(onp.log(low), onp.log(high), n))
    else:
        values = rng.uniform(low, high, n)
    return values.astype(dtype)


# The largest finite value of each result dtype: beyond it a result is rounded to infinity.
LARGEST = {onp.dtype("float16"): 65504.0, bfloat16: 3.3895313892515355e38,
           onp.dtype("float32"): float(onp.finfo(onp.float32).max),
           onp.dtype("float64"): float(onp.finfo(onp.float64).max)}


def ulps_apart(got, want, dtype):
    """|got - want| in units in the last place of `want` rounded to `dtype` (0 where both are the
    same non-finite value, or `want` overflows `dtype` and `got` is the infinity of its sign)."""
    got, want = onp.asarray(got, onp.float64), onp.asarray(want, onp.float64)
    with onp.errstate(all="ignore"):
        rounded = want.astype(onp.float32 if dtype == bfloat16 else dtype)
        ulp = onp.spacing(onp.abs(rounded)).astype(onp.float64)
        if dtype == bfloat16:
            ulp = ulp * 2.0**16  # 8 significand bits against float32's 24
        overflowed = onp.isinf(got) & (onp.abs(want) > LARGEST[dtype]) & \
            (onp.sign(got) == onp.sign(want))
        same = (got == want) | (onp.isnan(got) & onp.isnan(want)) | overflowed
        return onp.where(same, 0.0, onp.abs(got - want) / ulp)


def assert_within_ulps(got, want, dtype, ulps, label):
    err = ulps_apart(got, want, dtype)
    worst = int(onp.argmax(err)) if err.size else 0
    assert err.size == 0 or err[worst] <= ulps, \
        f"{label}: {err[worst]:.2f} ulp at index {worst}: got {onp.ravel(got)[worst]!r}, " \
        f"float64 reference {onp.ravel(want)[worst]!r}"


def reference(op, x):
    with onp.errstate(all="ignore"):
        return getattr(onp, op)(onp.asarray(x, onp.float64))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_float_unary_matches_float64_numpy(op, dtype):
    rng = onp.random.default_rng(sum(map(ord, op)))
    # 0, 1, around the vector widths (4, 8, 16), and more than one parallel chunk (16384).
    for n in (0, 1, 3, 15, 16, 17, 33, 1000, 3 * 16384 + 5):
        x = draw(op, n, dtype, rng)
        got = getattr(np, op)(np.array(x))
        assert got.shape == (n,) and got.dtype == onp.dtype(dtype)
        assert_within_ulps(got.asnumpy(), reference(op, x), onp.dtype(dtype), kUlps,
                           f"{op} {dtype} n={n}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_float_unary_special_values(op, dtype):
    with onp.errstate(all="ignore"):
        x = onp.array(SPECIAL, dtype=dtype)
    want = reference(op, x)
    got = getattr(np, op)(np.array(x)).asnumpy()
    with onp.errstate(over="ignore"):
        want_rounded = want.astype(dtype)
    assert onp.array_equal(onp.isnan(got), onp.isnan(want_rounded)), (op, x, got, want_rounded)
    infinite = onp.isinf(want_rounded)
    assert onp.array_equal(got[infinite], want_rounded[infinite]), (op, x, got, want_rounded)
    zeros = want_rounded == 0
    assert onp.array_equal(onp.signbit(got[zeros]), onp.signbit(want_rounded[zeros])), \
        (op, "sign of zero", x[zeros], got[zeros])
    assert_within_ulps(got, want, onp.dtype(dtype), kUlps, f"{op} {dtype} special values")


@pytest.mark.parametrize("dtype", ["float16", bfloat16])
@pytest.mark.parametrize("op", OPS)
def test_float_unary_16bit_floats(op, dtype):
    rng = onp.random.default_rng(7)
    low, high = DOMAINS[op]
    x = onp.clip(draw(op, 2051, "float64", rng), max(low, -60000), min(high, 60000))
    x = onp.concatenate([x, [onp.nan, onp.inf, -onp.inf, 0.0, -0.0]])
    data = np.array(x, dtype=dtype)
    stored = data.asnumpy().astype(onp.float64)  # the 16-bit values pymx holds
    got = getattr(np, op)(data)
    assert got.dtype == data.dtype
    # The float result (within kUlps of float) rounded once more: one ulp of the 16-bit dtype.
    assert_within_ulps(got.asnumpy().astype(onp.float64), reference(op, stored),
                       onp.dtype("float16") if dtype == "float16" else bfloat16, 1,
                       f"{op} {dtype}")


def test_float_unary_integer_input_computes_in_float32():
    x = onp.arange(-5, 300, dtype=onp.int32)
    got = np.exp(np.array(x))
    assert got.dtype == onp.float32
    assert_within_ulps(got.asnumpy(), reference("exp", x), onp.dtype("float32"), kUlps, "exp int32")


@pytest.mark.parametrize("op", OPS)
def test_float_unary_same_bits_wherever_the_array_starts(op):
    # A slice starts at another offset from the vector and chunk boundaries: its elements must be
    # computed exactly as in the whole array (no scalar tail that rounds differently).
    rng = onp.random.default_rng(3)
    for dtype in ("float32", "float64"):
        x = draw(op, 16384 + 999, dtype, rng)
        whole = getattr(np, op)(np.array(x)).asnumpy()
        for first, last in ((1, 40), (7, 16391), (15, 16), (17, 17383), (16380, 17383)):
            part = getattr(np, op)(np.array(x[first:last])).asnumpy()
            assert part.tobytes() == whole[first:last].tobytes(), (op, dtype, first, last)


ACTIVATIONS = {
    "sigmoid": lambda x: 1 / (1 + onp.exp(-x)),
    "tanh": onp.tanh,
    "softrelu": lambda x: onp.where(x > 20, x, onp.log1p(onp.exp(onp.minimum(x, 20)))),
    "log_sigmoid": lambda x: onp.minimum(x, 0) - onp.log1p(onp.exp(-onp.abs(x))),
}


def activation_reference(act_type, x):
    with onp.errstate(all="ignore"):
        return ACTIVATIONS[act_type](onp.asarray(x, onp.float64))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("act_type", sorted(ACTIVATIONS))
def test_activation_matches_float64_numpy(act_type, dtype):
    rng = onp.random.default_rng(11)
    for n in (0, 1, 17, 1023, 1025, 3 * 16384 + 5):
        x = rng.uniform(-30, 30, n).astype(dtype)
        got = npx.activation(np.array(x), act_type=act_type)
        assert got.shape == (n,) and got.dtype == onp.dtype(dtype)
        # The formulas add, divide and subtract after libmvec's exp and log1p: a few more ulps;
        # log_sigmoid's difference cancels near x = 0 relative to its size, so an absolute bound.
        assert_almost_equal(got, activation_reference(act_type, x),
                            rtol=8 * onp.finfo(dtype).eps, atol=4 * onp.finfo(dtype).eps,
                            names=("pymx", "float64 numpy"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("act_type", sorted(ACTIVATIONS))
def test_activation_special_values(act_type, dtype):
    with onp.errstate(all="ignore"):
        x = onp.array(SPECIAL, dtype=dtype)
    with onp.errstate(over="ignore"):
        want = activation_reference(act_type, x).astype(dtype)
    got = npx.activation(np.array(x), act_type=act_type).asnumpy()
    assert onp.array_equal(onp.isnan(got), onp.isnan(want)), (act_type, x, got, want)
    finite = ~onp.isnan(want)
    assert_almost_equal(got[finite], want[finite], rtol=8 * onp.finfo(dtype).eps,
                        atol=onp.finfo(dtype).tiny, names=("pymx", "float64 numpy"))
    if act_type == "tanh":
        zeros = want == 0
        assert onp.array_equal(onp.signbit(got[zeros]), onp.signbit(want[zeros]))


@pytest.mark.parametrize("dtype", ["float16", bfloat16])
@pytest.mark.parametrize("act_type", sorted(ACTIVATIONS))
def test_activation_16bit_floats(act_type, dtype):
    x = np.array(onp.concatenate([onp.linspace(-12, 12, 2001), [onp.inf, -onp.inf, onp.nan]]),
                 dtype=dtype)
    got = npx.activation(x, act_type=act_type)
    assert got.dtype == x.dtype
    want = activation_reference(act_type, x.asnumpy().astype(onp.float64))
    assert_within_ulps(got.asnumpy().astype(onp.float64), want,
                       onp.dtype("float16") if dtype == "float16" else bfloat16, 1,
                       f"{act_type} {dtype}")


@pytest.mark.parametrize("act_type", sorted(ACTIVATIONS))
def test_activation_same_bits_wherever_the_array_starts(act_type):
    x = onp.random.default_rng(5).uniform(-25, 25, 16384 + 2000).astype("float32")
    whole = npx.activation(np.array(x), act_type=act_type).asnumpy()
    for first, last in ((1, 1030), (1023, 16390), (16385, 18384)):
        part = npx.activation(np.array(x[first:last]), act_type=act_type).asnumpy()
        assert part.tobytes() == whole[first:last].tobytes(), (act_type, first, last)


def test_sigmoid_and_tanh_ops_equal_the_activation_op():
    x = np.array(onp.random.default_rng(2).uniform(-9, 9, (37, 29)).astype("float32"))
    assert npx.sigmoid(x).asnumpy().tobytes() == \
        npx.activation(x, act_type="sigmoid").asnumpy().tobytes()
    assert np.tanh(x).asnumpy().tobytes() == npx.activation(x, act_type="tanh").asnumpy().tobytes()


@pytest.mark.parametrize("act_type", sorted(ACTIVATIONS))
def test_activation_gradient(act_type):
    x = onp.random.default_rng(4).uniform(-3, 3, (3, 5))
    check_numeric_gradient(lambda a: npx.activation(a, act_type=act_type), [x])


@pytest.mark.parametrize("op", ["exp", "log1p", "tanh", "arcsinh", "sin"])
def test_float_unary_gradient(op):
    x = onp.random.default_rng(6).uniform(0.1, 0.9, (4, 3))
    check_numeric_gradient(getattr(np, op), [x])


def test_hybridized_equals_imperative():
    class Gates(gluon.HybridBlock):
        def forward(self, x):
            return np.tanh(x) * npx.sigmoid(x) + np.exp(-np.abs(x)) + \
                npx.activation(x, act_type="softrelu")

    x = np.array(onp.random.default_rng(8).uniform(-6, 6, (9, 131)).astype("float32"))
    block = Gates()
    imperative = block(x).asnumpy()
    block.hybridize()
    assert block(x).asnumpy().tobytes() == imperative.tobytes()


_ONE_THREAD_SCRIPT = r"""
import json, os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core: no helper threads
import numpy as onp
from pymx import np, npx
x = onp.random.default_rng(9).uniform(0.05, 0.95, 40005).astype("float32")
out = {op: getattr(np, op)(np.array(x)).asnumpy().tobytes().hex() for op in %r}
out.update({"act_" + a: npx.activation(np.array(x * 40 - 20), act_type=a).asnumpy().tobytes().hex()
            for a in %r})
sys.stdout.write(json.dumps(out))
"""


@pytest.mark.parametrize("engine", ["threaded", "naive"])
def test_one_thread_gives_the_same_bits(engine):
    import os
    x = onp.random.default_rng(9).uniform(0.05, 0.95, 40005).astype("float32")
    env = dict(os.environ, PYMX_ENGINE=engine)
    child = run_python(_ONE_THREAD_SCRIPT % (OPS, sorted(ACTIVATIONS)), env=env)
    assert child.returncode == 0, child.stderr
    theirs = json.loads(child.stdout)
    for op in OPS:
        assert getattr(np, op)(np.array(x)).asnumpy().tobytes().hex() == theirs[op], op
    for a in ACTIVATIONS:
        mine = npx.activation(np.array(x * 40 - 20), act_type=a).asnumpy().tobytes().hex()
        assert mine == theirs["act_" + a], a


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_gpu_equals_cpu(dtype):
    # Both sides are within a few ulps of the exact results: their difference is too.
    rng = onp.random.default_rng(10)
    tolerance = {"float32": 1e-5, "float64": 1e-13, "float16": 2e-3}[dtype]
    for op in OPS:
        x = onp.clip(draw(op, 4099, "float64", rng), -60000, 60000).astype(dtype)
        cpu = getattr(np, op)(np.array(x, device=pymx.cpu()))
        gpu = getattr(np, op)(np.array(x, device=pymx.gpu(0)))
        assert_almost_equal(gpu.asnumpy(), cpu.asnumpy(), rtol=tolerance, atol=tolerance,
                            names=(f"gpu {op}", f"cpu {op}"), equal_nan=True)
    x = rng.uniform(-30, 30, 4099).astype(dtype)
    for act_type in ACTIVATIONS:
        cpu = npx.activation(np.array(x, device=pymx.cpu()), act_type=act_type)
        gpu = npx.activation(np.array(x, device=pymx.gpu(0)), act_type=act_type)
        assert_almost_equal(gpu.asnumpy(), cpu.asnumpy(), rtol=tolerance, atol=tolerance,
                            names=(f"gpu {act_type}", f"cpu {act_type}"))
