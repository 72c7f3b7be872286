"""Every GPU kernel against its CPU twin: the same operator, inputs and attributes run on cpu(0)
and gpu(0) must give the same outputs (and the same in-place updates of mutated inputs), within
the tolerance of the dtype. Skipped when no GPU is visible."""
import numpy as onp
import pytest
from conftest import requires_gpu

from pymx import autograd
from pymx._c import core as _core
from pymx._op import invoke
from pymx.base import bfloat16, bfloat16_to_float32, dtype_name
from pymx.device import cpu, gpu
from pymx.ndarray import from_numpy

pytestmark = requires_gpu

FLOATS = ("float32", "float64", "float16", "bfloat16")
ALL = FLOATS + ("int32", "int64", "uint8", "int8", "bool")
# bfloat16: both devices compute in float and round once, so results differ by a step (2^-7
# relative) where the float results straddle a rounding boundary; two steps, as for float16.
RTOL = {"float16": 2e-3, "bfloat16": 2.0 ** -6, "float32": 2e-5, "float64": 1e-12}
ATOL = {"float16": 2e-3, "bfloat16": 2.0 ** -6, "float32": 2e-5, "float64": 1e-12}
# Products (matmul, convolution, fully_connected): float sums in another order, and up to two
# 16-bit roundings on each device.
PRODUCT_RTOL = {"float16": 2e-2, "bfloat16": 2.0 ** -5, "float32": 1e-4, "float64": 1e-10}
RNG = onp.random.default_rng(0)


def host(values, dtype):
    """`values` as a NumPy array of `dtype`; bfloat16 as its bits (pymx.base.bfloat16), rounded
    by the CPU's cast."""
    if dtype == "bfloat16":
        return from_numpy(values, dtype="bfloat16")._host_values()
    return onp.asarray(values).astype(dtype)


def widened(values):
    """NumPy values, with bfloat16 bits widened to float32 (exactly)."""
    return bfloat16_to_float32(values) if values.dtype == bfloat16 else values


def sample(shape, dtype, low=-3.0, high=3.0):
    """Random values that every dtype holds exactly (integers in range for uint8 / int8)."""
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype != "bfloat16" and onp.dtype(dtype).kind in "iu":
        lo = 0 if dtype == "uint8" else max(int(low), -100)
        return RNG.integers(lo, max(int(high), lo + 1) + 1, shape).astype(dtype)
    return host(RNG.uniform(low, high, shape).astype("float32"), dtype)


def run(name, arrays, attrs, device, train=False, mutated=()):
    """Outputs of `name` on `device`, then the mutated inputs, all as NumPy arrays (bfloat16 as
    its bits)."""
    inputs = [from_numpy(a, device=device) for a in arrays]
    with autograd.train_mode() if train else autograd.predict_mode():
        outputs = invoke(name, inputs, attrs, device=device)
    return [o._host_values() for o in outputs] + [inputs[i]._host_values() for i in mutated]


def check(name, arrays, attrs=None, train=False, mutated=(), rtol=None, atol=None, seed=None):
    """`name` on gpu(0) equals `name` on cpu(0). `seed` reseeds pymx before each run, so random
    operators draw the same numbers on both devices."""
    results = []
    for device in (cpu(0), gpu(0)):
        if seed is not None:
            _core.random_seed(seed)
        results.append(run(name, arrays, attrs or {}, device, train, mutated))
    for k, (want, got) in enumerate(zip(*results)):
        assert got.shape == want.shape and got.dtype == want.dtype, (name, k, got.dtype, want.dtype)
        dtype = dtype_name(got.dtype)
        want, got = widened(want), widened(got)
        if got.dtype.kind == "f":
            tol_r = rtol if rtol is not None else RTOL[dtype]
            tol_a = atol if atol is not None else ATOL[dtype]
            onp.testing.assert_allclose(got.astype(onp.float64), want.astype(onp.float64),
                                        rtol=tol_r, atol=tol_a, equal_nan=True,
                                        err_msg=f"{name} output {k}")
        else:
            onp.testing.assert_array_equal(got, want, err_msg=f"{name} output {k}")


# ---------------------------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------------------------
FLOAT_UNARY = ["exp", "log", "log1p", "expm1", "log2", "log10", "sqrt", "cbrt", "sin", "cos",
               "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
               "arctanh", "reciprocal"]
DOMAIN = {"log": (0.1, 3), "log1p": (0.1, 3), "log2": (0.1, 3), "log10": (0.1, 3), "sqrt": (0.1, 3),
          "arcsin": (-0.9, 0.9), "arccos": (-0.9, 0.9), "arctanh": (-0.9, 0.9),
          "arccosh": (1.1, 3), "reciprocal": (0.5, 3)}


@pytest.mark.parametrize("dtype", FLOATS + ("int32",))
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_float_unary(name, dtype):
    low, high = DOMAIN.get(name, (-2, 2))
    check(name, [sample((7, 33), dtype, low, high)])


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ["abs", "negative", "sign", "square", "floor", "ceil", "round",
                                  "rint", "trunc", "isnan", "isinf", "isfinite", "logical_not",
                                  "copy"])
def test_same_dtype_unary(name, dtype):
    x = sample((5, 17), dtype)
    if dtype in FLOATS:
        x[0, :4] = host([onp.nan, onp.inf, -onp.inf, 2.5], dtype)
    check(name, [x])


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
def test_clip(dtype):
    check("clip", [sample((4, 9), dtype, -5, 9)], {"a_min": 1, "a_max": 4})
    check("clip", [sample((4, 9), dtype, -5, 9)], {"a_min": None, "a_max": 3})


BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "mod",
          "floor_divide", "arctan2", "hypot", "equal", "not_equal", "greater", "greater_equal",
          "less", "less_equal", "logical_and", "logical_or", "logical_xor"]
SHAPE_PAIRS = [((6, 5), (6, 5)), ((3, 1, 5), (4, 1)), ((), (2, 3)), ((2, 0, 3), (1, 3))]


# NumPy defines no subtract, power, mod or floor_divide on bool arrays: those pairs are left out.
NO_BOOL_ARITHMETIC = ("subtract", "power", "mod", "floor_divide")


@pytest.mark.parametrize("name,dtype", [(n, d) for n in BINARY for d in ALL
                                        if not (d == "bool" and n in NO_BOOL_ARITHMETIC)])
def test_binary_broadcast(name, dtype):
    for sa, sb in SHAPE_PAIRS:
        a, b = sample(sa, dtype, -4, 4), sample(sb, dtype, 1, 4)  # b > 0: divisors and powers
        check(name, [a, b])


@pytest.mark.parametrize("name", ["add", "multiply", "greater", "divide", "maximum"])
def test_binary_mixed_dtypes(name):
    check(name, [sample((3, 4), "int32"), sample((4,), "float32")])
    check(name, [sample((3, 4), "uint8"), sample((3, 4), "int8")])
    check(name, [sample((2, 4), "float16"), sample((2, 4), "float64")])
    check(name, [sample((2, 4), "bfloat16"), sample((2, 4), "float16")])
    check(name, [sample((3, 4), "int32"), sample((4,), "bfloat16")])


SCALAR_OPS = ["add", "subtract", "multiply", "divide", "power", "mod", "maximum", "greater",
              "less_equal", "equal"]


@pytest.mark.parametrize("name,dtype", [
    (n, d) for n in SCALAR_OPS for d in ["float32", "float16", "bfloat16", "int32", "int64",
                                         "uint8", "bool"]
    if not (d == "bool" and n in NO_BOOL_ARITHMETIC)])
def test_scalar_ops(name, dtype):
    x = sample((4, 7), dtype, 1, 4)
    for scalar in (2, 1.5):
        for reverse in (False, True):
            check(f"{name}_scalar", [x], {"scalar": scalar, "reverse": reverse})


@pytest.mark.parametrize("src", ALL)
def test_cast_every_pair(src):
    x = sample((3, 11), src, 0, 100)  # negative floats into unsigned ints are undefined in C++
    for dst in ALL:
        check("cast", [x], {"dtype": dst})


def test_bfloat16_cast_rounds_as_the_cpu():
    """float32 -> bfloat16 on the GPU (__float2bfloat16) gives the CPU's bf16_t for any bit
    pattern: ties to even, overflow to inf, NaN stays NaN."""
    patterns = RNG.integers(0, 2**32, size=100000, dtype=onp.uint64).astype(onp.uint32)
    ties = (patterns & onp.uint32(0xFFFF0000)) | onp.uint32(0x8000)
    for bits in (patterns, ties):
        check("cast", [bits.view(onp.float32)], {"dtype": "bfloat16"}, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# Creation and random
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL)
def test_creation(dtype):
    for name, attrs in [("zeros", {"shape": (3, 4)}), ("ones", {"shape": (5,)}),
                        ("full", {"shape": (2, 3), "value": 7}),
                        ("arange", {"start": 2, "stop": 40, "step": 3}),
                        ("linspace", {"start": 0, "stop": 9, "num": 10}),
                        ("eye", {"N": 4, "M": 6, "k": 1})]:
        attrs = dict(attrs, dtype=dtype)
        results = [invoke(name, [], attrs, device=d)[0] for d in (cpu(0), gpu(0))]
        onp.testing.assert_array_equal(results[1].asnumpy(), results[0].asnumpy(), err_msg=name)


def test_creation_rounds_as_the_cpu():
    """arange into integers truncates start + i * step: one rounding less (a fused multiply-add)
    would move some values across an integer; randint beyond 2**53 does not round at all."""
    for start, step in ((0.3, 0.1), (-1.7, 0.3), (1e15 + 0.5, 0.7)):
        attrs = {"start": start, "stop": start + 60 * step, "step": step, "dtype": "int64"}
        results = [invoke("arange", [], attrs, device=d)[0].asnumpy() for d in (cpu(0), gpu(0))]
        onp.testing.assert_array_equal(results[1], results[0], err_msg=str(attrs))
    check("randint", [], {"low": 2**60, "high": 2**60 + 10, "shape": (200,), "dtype": "int64"},
          seed=5)
    check("randint", [], {"low": -2**62, "high": 2**62 + 1, "shape": (200,)}, seed=5)


@pytest.mark.parametrize("name,attrs", [
    ("uniform", {"low": -2, "high": 3, "shape": (1000,)}),
    ("normal", {"loc": 1, "scale": 2, "shape": (999,)}),
    ("randint", {"low": -5, "high": 9, "shape": (500,), "dtype": "int64"}),
    ("permutation", {"n": 300}),
])
def test_random_matches_cpu_stream(name, attrs):
    check(name, [], attrs, seed=1234, rtol=1e-5, atol=1e-5)


def test_random_statistics_on_gpu():
    x = invoke("normal", [], {"loc": 3, "scale": 2, "shape": (200000,)}, device=gpu(0))[0]
    values = x.asnumpy()
    assert abs(values.mean() - 3) < 0.03 and abs(values.std() - 2) < 0.03
    u = invoke("uniform", [], {"shape": (200000,)}, device=gpu(0))[0].asnumpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    for dtype in ("bfloat16", "float16"):  # draws that would round to high are clamped below it
        attrs = {"shape": (200000,), "dtype": dtype}
        u = invoke("uniform", [], attrs, device=gpu(0))[0].asnumpy()
        assert u.min() >= 0 and u.max() < 1, dtype


# ---------------------------------------------------------------------------------------------
# Reductions, layout, indexing
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ["sum", "prod", "mean", "max", "min", "all", "any", "var", "std"])
def test_reductions(name, dtype):
    x = sample((4, 5, 6), dtype, -2, 3) if name != "prod" else sample((4, 5, 6), dtype, 1, 2)
    for axis in (None, 0, 1, -1, (0, 2), (1, 2)):
        for keepdims in (False, True):
            check(name, [x], {"axis": axis, "keepdims": keepdims}, rtol=1e-3 if dtype == "float16" else None)


def test_reductions_large_and_empty():
    big = sample((3, 70001), "float32")
    for name in ("sum", "mean", "max", "argmax"):
        check(name, [big], {"axis": 1}, rtol=1e-4, atol=1e-3)
        check(name, [big], {"axis": None} if name != "argmax" else {}, rtol=1e-4, atol=1e-2)
    check("sum", [sample((0, 4), "float32")], {"axis": 0})
    check("mean", [sample((3, 0), "float32")], {"axis": 1})
    # few outputs of many elements are split into parts; a NaN in one part still wins
    big[1, 50000] = onp.nan
    check("max", [big], {"axis": 1})
    check("min", [big], {"axis": None})
    check("prod", [onp.full((2, 40000), 1.0001, "float64")], {"axis": 1}, rtol=1e-12)


def test_reductions_convert_only_the_total():
    """The input is reduced in its own dtype (floats in double, integers in int64) and only the
    total is converted to `dtype`, as on the CPU: sum([0.5] * 4, dtype=int32) is 2, not 0."""
    halves = onp.full((3, 4), 0.5, "float32")
    for dtype in ("int32", "int64", "uint8", "bool", "float16", "float64"):
        for name in ("sum", "prod") + (("mean",) if dtype.startswith("float") else ()):
            check(name, [halves], {"axis": 1, "dtype": dtype})
    ints = onp.array([[2**53 + 1, 2**53 + 3, 1]], "int64")
    check("sum", [ints], {"axis": 1})
    check("mean", [ints], {"axis": 1, "dtype": "float64"}, rtol=0, atol=0)
    check("sum", [sample((5, 60000), "int8")], {"axis": None, "dtype": "float32"})


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions(name, dtype):
    x = sample((6, 7, 8), dtype, -50, 50)
    for axis in (None, 0, 1, 2, -1):
        check(name, [x], {"axis": axis, "keepdims": False})
    check(name, [x], {"axis": 1, "keepdims": True})


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16", "bfloat16"])
def test_layout_ops(dtype):
    x = sample((2, 3, 4), dtype)
    check("reshape", [x], {"newshape": (4, -1)})
    check("expand_dims", [x], {"axis": 1})
    check("squeeze", [sample((2, 1, 3), dtype)], {"axis": None})
    check("transpose", [x], {"axes": (2, 0, 1)})
    check("transpose", [x], {"axes": None})
    check("swapaxes", [x], {"axis1": 0, "axis2": 2})
    check("broadcast_to", [sample((3, 1), dtype)], {"shape": (2, 3, 5)})
    check("tile", [x], {"reps": (2, 1, 3)})
    check("repeat", [x], {"repeats": 3, "axis": 1})
    check("repeat", [x], {"repeats": 2, "axis": None})
    check("flip", [x], {"axis": (0, 2)})
    check("concatenate", [x, sample((2, 5, 4), dtype)], {"axis": 1})
    check("stack", [x, x, x], {"axis": 3})
    check("split", [sample((7, 4), dtype)], {"indices": (2, 5), "axis": 0})
    check("split", [sample((3, 8), dtype)], {"indices": (1, 1, 6), "axis": 1})
    check("where", [sample((3, 1), "bool"), sample((3, 4), dtype), sample((4,), dtype)])
    # 5-D tile walks 10 interleaved dimensions that no merge can join
    check("tile", [sample((2, 3, 2, 3, 2), dtype)], {"reps": (2, 3, 2, 3, 2)})
    check("_strided_copy", [sample((30,), dtype)], {"shape": (2, 3), "strides": (-3, 2),
                                                    "offset": 5})
    check("_strided_copy", [sample((30,), dtype)], {"shape": (4, 2), "strides": (0, 7),
                                                    "offset": 1})


def test_concatenate_promotes():
    check("concatenate", [sample((2, 3), "int32"), sample((2, 2), "float32")], {"axis": 1})


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "bfloat16"])
def test_indexing_ops(dtype):
    x = sample((5, 6, 4), dtype)
    check("slice", [x], {"begin": (1, 5), "end": (4, 0), "step": (2, -2)})
    check("slice_assign", [x, sample((4, 1), dtype)], {"begin": (1, 1), "end": (3, 5), "step": (1, 1)})
    idx = onp.array([[4, 0], [-1, 2]])
    check("take", [x, idx], {"axis": 1, "mode": "raise"})
    check("take", [x, onp.array([9, -8, 3])], {"axis": 0, "mode": "wrap"})
    check("take", [x, onp.array([9.7, -8.0, 3.2])], {"axis": 2, "mode": "clip"})
    values = sample((5, 3, 4), dtype)
    for accumulate in (False, True):
        check("index_update", [x, onp.array([1, 4, 1]), values], {"axis": 1, "accumulate": accumulate})


def test_take_out_of_bounds_raises_index_error_and_device_stays_usable():
    x = from_numpy(onp.arange(6.0), device=gpu(0))
    y = invoke("take", [x, from_numpy(onp.array([7]), device=gpu(0))], {"mode": "raise"})[0]
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 0 with size 6"):
        y.asnumpy()
    assert float((x + 1).sum().item()) == 21.0


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32"])
def test_matmul(dtype):
    rtol = {"float16": 1e-2, "bfloat16": PRODUCT_RTOL["bfloat16"], "float32": 1e-4}.get(dtype)
    check("matmul", [sample((5, 7), dtype), sample((7, 3), dtype)], rtol=rtol, atol=rtol)
    check("matmul", [sample((4, 5, 7), dtype), sample((7, 2), dtype)], rtol=rtol, atol=rtol)
    check("matmul", [sample((2, 1, 5, 7), dtype), sample((3, 7, 2), dtype)], rtol=rtol, atol=rtol)
    check("matmul", [sample((3, 0), dtype), sample((0, 2), dtype)])


# ---------------------------------------------------------------------------------------------
# NN operators (forward and the backward kernels training uses)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_activations_and_dropout(dtype):
    x, dy = sample((4, 33), dtype), sample((4, 33), dtype)
    for act in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
        check("activation", [x], {"act_type": act})
        y = run("activation", [x], {"act_type": act}, cpu(0))[0]
        check("activation_backward", [dy, x, y], {"act_type": act})
    check("relu", [x])
    check("sigmoid", [x])
    for act in ("leaky", "elu"):
        check("leaky_relu", [x], {"act_type": act, "slope": 0.1})
        check("leaky_relu_backward", [dy, x], {"act_type": act, "slope": 0.1})
    # the same draws and the same rounded mask: equal to the bit
    check("dropout", [x], {"p": 0.3}, train=True, seed=7, rtol=0, atol=0)
    check("dropout", [sample((3, 4, 5), dtype)], {"p": 0.5, "axes": (1,)}, train=True, seed=7,
          rtol=0, atol=0)
    check("dropout", [x], {"p": 0.3}, train=False)
    check("dropout_backward", [dy, x])


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_family(dtype):
    x, dy = sample((3, 4, 50), dtype), sample((3, 4, 50), dtype)
    for axis in (-1, 1, 0):
        for name in ("softmax", "log_softmax"):
            check(name, [x], {"axis": axis, "temperature": 2.0})
            y = run(name, [x], {"axis": axis}, cpu(0))[0]
            check(f"{name}_backward", [dy, y], {"axis": axis})
    check("softmax", [sample((2, 3000), dtype)], {"axis": -1})  # one block per row


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normalization(dtype):
    x = sample((4, 3, 5, 6), dtype)
    gamma, beta = sample((3,), dtype, 0.5, 2), sample((3,), dtype)
    mean, var = sample((3,), dtype), sample((3,), dtype, 0.5, 2)
    for train in (True, False):
        for fix_gamma in (True, False):
            attrs = {"eps": 1e-3, "momentum": 0.9, "fix_gamma": fix_gamma, "axis": 1}
            # cuDNN computes y by its own formula, rounding differently from the CPU's
            # x * scale + shift
            check("batch_norm", [x, gamma, beta, mean, var], attrs, train=train, mutated=(3, 4),
                  rtol=1e-5, atol=1e-6)
            _, bmean, bvar = run("batch_norm", [x, gamma, beta, mean, var], attrs, cpu(0), train)
            check("batch_norm_backward", [sample(x.shape, dtype), x, gamma, bmean, bvar], attrs,
                  train=train, rtol=1e-4 if dtype == "float32" else None, atol=1e-4 if dtype == "float32" else None)
    check("batch_norm", [sample((6, 4), dtype), sample((4,), dtype), sample((4,), dtype),
                         mean[:1].repeat(4), var[:1].repeat(4)], {"axis": -1}, train=True, mutated=(3, 4),
          rtol=1e-5, atol=1e-6)
    g2, b2 = sample((6,), dtype), sample((6,), dtype)
    for axis in (-1, 1):
        data = sample((3, 6, 6), dtype)
        attrs = {"axis": axis, "eps": 1e-5}
        check("layer_norm", [data, g2, b2], attrs)
        _, lmean, lstd = run("layer_norm", [data, g2, b2], attrs, cpu(0))
        check("layer_norm_backward", [sample(data.shape, dtype), data, g2, lmean, lstd], attrs,
              rtol=1e-4 if dtype == "float32" else None, atol=1e-4 if dtype == "float32" else None)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_batch_norm_16bit_data_float32_params(dtype):
    x = sample((8, 3, 4, 4), dtype)
    params = [sample((3,), "float32", 0.5, 2) for _ in range(4)]
    check("batch_norm", [x] + params, {"fix_gamma": False}, train=True, mutated=(3, 4))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_convolution(dtype):
    rtol = PRODUCT_RTOL[dtype]
    cases = [  # data, weight, attrs
        ((2, 3, 9, 8), (4, 3, 3, 2), {"kernel": (3, 2), "stride": (2, 1), "pad": (1, 0), "num_filter": 4}),
        ((2, 4, 7, 7), (6, 2, 3, 3), {"kernel": (3, 3), "dilate": (2, 2), "num_group": 2, "num_filter": 6}),
        ((3, 5, 6, 6), (4, 5, 1, 1), {"kernel": (1, 1), "num_filter": 4}),
        ((2, 3, 11), (4, 3, 4), {"kernel": (4,), "stride": (3,), "pad": (2,), "num_filter": 4}),
        ((1, 2, 4, 5, 5), (3, 2, 2, 2, 3), {"kernel": (2, 2, 3), "pad": (1, 0, 1), "num_filter": 3}),
    ]
    for data, weight, attrs in cases:
        x, w, b = sample(data, dtype, -1, 1), sample(weight, dtype, -1, 1), sample(weight[:1], dtype)
        check("convolution", [x, w, b], attrs, rtol=rtol, atol=rtol)
        check("convolution", [x, w], dict(attrs, no_bias=True), rtol=rtol, atol=rtol)
        y = run("convolution", [x, w, b], attrs, cpu(0))[0]
        dy = sample(y.shape, dtype, -1, 1)
        check("convolution_backward", [dy, x, w], attrs, rtol=rtol, atol=rtol)
        check("convolution_backward", [dy, x, w], dict(attrs, no_bias=True), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_convolution_fused_relu_and_no_data_grad(dtype):
    """act_type='relu' (relu in the bias epilogue; the backward masks out_grad by out > 0) and
    need_data_grad=False (no data_grad output) give the CPU's results."""
    rtol = PRODUCT_RTOL[dtype]
    cases = [  # data, weight, attrs
        ((2, 3, 9, 8), (4, 3, 3, 2), {"kernel": (3, 2), "stride": (2, 1), "pad": (1, 0), "num_filter": 4}),
        ((2, 4, 7, 7), (6, 2, 3, 3), {"kernel": (3, 3), "num_group": 2, "num_filter": 6}),
    ]
    for data, weight, attrs in cases:
        relu = dict(attrs, act_type="relu")
        x, w, b = sample(data, dtype, -1, 1), sample(weight, dtype, -1, 1), sample(weight[:1], dtype)
        check("convolution", [x, w, b], relu, rtol=rtol, atol=rtol)
        check("convolution", [x, w], dict(relu, no_bias=True), rtol=rtol, atol=rtol)
        y = run("convolution", [x, w, b], relu, cpu(0))[0]
        dy = sample(y.shape, dtype, -1, 1)
        check("convolution_backward", [dy, x, w, y], relu, rtol=rtol, atol=rtol)
        check("convolution_backward", [dy, x, w, y], dict(relu, need_data_grad=False), rtol=rtol,
              atol=rtol)
        check("convolution_backward", [dy, x, w], dict(attrs, need_data_grad=False, no_bias=True),
              rtol=rtol, atol=rtol)
        x_arr, w_arr, b_arr = (from_numpy(a, device=gpu(0)) for a in (x, w, b))
        w_arr.attach_grad()
        b_arr.attach_grad()
        with autograd.record():  # the data has no autograd node: its gradient is skipped
            out = invoke("convolution", [x_arr, w_arr, b_arr], relu)[0]
        out.backward(from_numpy(dy, device=gpu(0)))
        dw, db = run("convolution_backward", [dy, x, w, y], relu, cpu(0))[1:]
        onp.testing.assert_allclose(w_arr.grad.asnumpy(), widened(dw), rtol=rtol, atol=rtol)
        onp.testing.assert_allclose(b_arr.grad.asnumpy(), widened(db), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_convolution_channel_last(dtype):
    """NWC / NHWC / NDHWC run through channel-first copies, on cuDNN and on the own kernels."""
    rtol = {"float32": 1e-4, "float64": 1e-10}[dtype]
    cases = [  # data, weight (F, kernel..., C/groups), attrs
        ((2, 9, 4), (6, 3, 2), {"kernel": (3,), "num_group": 2, "layout": "NWC"}),
        ((2, 7, 6, 3), (5, 3, 2, 3), {"kernel": (3, 2), "stride": (2, 1), "pad": (1, 0),
                                      "layout": "NHWC", "act_type": "relu"}),
        ((1, 4, 5, 6, 2), (3, 2, 3, 2, 2), {"kernel": (2, 3, 2), "layout": "NDHWC"}),
    ]
    for data, weight, attrs in cases:
        attrs = dict(attrs, num_filter=weight[0])
        x, w, b = sample(data, dtype, -1, 1), sample(weight, dtype, -1, 1), sample(weight[:1], dtype)
        y = run("convolution", [x, w, b], attrs, cpu(0))[0]
        dy = sample(y.shape, dtype, -1, 1)
        backward_inputs = [dy, x, w, y] if "act_type" in attrs else [dy, x, w]
        for cudnn in ({}, {"cudnn_off": True}):
            check("convolution", [x, w, b], dict(attrs, **cudnn), rtol=rtol, atol=rtol)
            check("convolution_backward", backward_inputs, dict(attrs, **cudnn), rtol=rtol,
                  atol=rtol)
            check("convolution_backward", backward_inputs,
                  dict(attrs, need_data_grad=False, no_bias=True, **cudnn), rtol=rtol, atol=rtol)


def test_convolution_fused_relu_keeps_nan():
    """max(v, 0) in the epilogue, as on the CPU: a NaN output stays NaN instead of becoming 0."""
    x = sample((1, 2, 5, 5), "float32", -1, 1)
    x[0, 1, 2, 2] = onp.nan
    w, b = sample((3, 2, 3, 3), "float32", -1, 1), sample((3,), "float32")
    attrs = {"kernel": (3, 3), "num_filter": 3, "act_type": "relu"}
    check("convolution", [x, w, b], attrs, rtol=1e-4, atol=1e-4)
    check("convolution", [x, w, b], dict(attrs, cudnn_off=True), rtol=1e-4, atol=1e-4)
    y = run("convolution", [x, w, b], attrs, gpu(0))[0]
    assert onp.isnan(y).sum() == 3 * 9, "each filter's 3x3 outputs over the NaN"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_deconvolution_no_data_grad(dtype):
    x, w = sample((2, 3, 5, 4), dtype, -1, 1), sample((3, 4, 3, 2), dtype, -1, 1)
    attrs = {"kernel": (3, 2), "stride": (2, 1), "pad": (1, 0), "num_filter": 4}
    dy = sample(run("deconvolution", [x, w], dict(attrs, no_bias=True), cpu(0))[0].shape, dtype)
    rtol = {"float32": 1e-4, "float64": 1e-10}[dtype]
    for no_bias in (False, True):
        check("deconvolution_backward", [dy, x, w],
              dict(attrs, need_data_grad=False, no_bias=no_bias), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_deconvolution(dtype):
    rtol = PRODUCT_RTOL[dtype]
    cases = [  # data, weight (C_in, num_filter/num_group, kernel...), attrs
        ((2, 3, 5, 4), (3, 4, 3, 2), {"kernel": (3, 2), "stride": (2, 1), "pad": (1, 0), "adj": (1, 0), "num_filter": 4}),
        ((2, 4, 4, 4), (4, 3, 3, 3), {"kernel": (3, 3), "stride": (2, 2), "dilate": (2, 1), "num_group": 2, "num_filter": 6}),
        ((3, 5, 6, 6), (5, 4, 1, 1), {"kernel": (1, 1), "num_filter": 4}),
        ((2, 3, 7), (3, 2, 4), {"kernel": (4,), "stride": (3,), "pad": (2,), "adj": (2,), "num_filter": 2}),
        ((1, 2, 3, 3, 2), (2, 3, 2, 2, 3), {"kernel": (2, 2, 3), "stride": (2, 1, 2), "pad": (1, 0, 1), "num_filter": 3}),
        ((2, 2, 4, 3), (2, 3, 3, 3), {"kernel": (3, 3), "stride": (2, 2), "target_shape": (8, 6), "num_filter": 3}),
    ]
    for data, weight, attrs in cases:
        x, w = sample(data, dtype, -1, 1), sample(weight, dtype, -1, 1)
        b = sample((attrs["num_filter"],), dtype)
        check("deconvolution", [x, w, b], attrs, rtol=rtol, atol=rtol)
        check("deconvolution", [x, w], dict(attrs, no_bias=True), rtol=rtol, atol=rtol)
        y = run("deconvolution", [x, w, b], attrs, cpu(0))[0]
        dy = sample(y.shape, dtype, -1, 1)
        check("deconvolution_backward", [dy, x, w], attrs, rtol=rtol, atol=rtol)
        check("deconvolution_backward", [dy, x, w], dict(attrs, no_bias=True), rtol=rtol, atol=rtol)


def test_conv2d_transpose_layer_on_gpu():
    from pymx import np
    from pymx.gluon import nn
    layer = nn.Conv2DTranspose(4, kernel_size=3, strides=2, padding=1, output_padding=1, groups=2,
                               in_channels=2)
    layer.initialize(device=[cpu(0), gpu(0)])
    x = sample((2, 2, 5, 4), "float32")
    outs, grads = [], []
    for device in (cpu(0), gpu(0)):
        xs = np.array(x, device=device)
        xs.attach_grad()
        with autograd.record():
            y = layer(xs)
        y.backward()
        outs.append(y.asnumpy())
        grads.append(xs.grad.asnumpy())
    onp.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    onp.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_pooling(dtype):
    x = sample((2, 3, 9, 10), dtype)
    cases = [
        {"kernel": (4, 4), "stride": (2, 2), "pool_type": "max"},  # the tutorial's MaxPool2D
        {"kernel": (3, 2), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg"},
        {"kernel": (3, 2), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg", "count_include_pad": False},
        {"kernel": (3, 3), "stride": (2, 2), "pool_type": "sum", "pooling_convention": "full"},
        {"kernel": (1, 1), "global_pool": True, "pool_type": "avg"},
        {"kernel": (1, 1), "global_pool": True, "pool_type": "max"},
    ]
    for attrs in cases:
        check("pooling", [x], attrs)
        y = run("pooling", [x], attrs, cpu(0))[0]
        tol = {"float16": 1e-2, "bfloat16": RTOL["bfloat16"]}.get(dtype, 1e-5)
        check("pooling_backward", [sample(y.shape, dtype), x, y], attrs, rtol=tol, atol=tol)
    check("pooling", [sample((2, 3, 12), dtype)], {"kernel": (3,), "stride": (2,)})


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_fully_connected(dtype):
    rtol = PRODUCT_RTOL[dtype]
    x, w, b = sample((4, 3, 5), dtype, -1, 1), sample((6, 15), dtype, -1, 1), sample((6,), dtype)
    check("fully_connected", [x, w, b], {"num_hidden": 6}, rtol=rtol, atol=rtol)
    check("fully_connected", [x, w], {"num_hidden": 6, "no_bias": True}, rtol=rtol, atol=rtol)
    dy = sample((4, 6), dtype)
    check("fully_connected_backward", [dy, x, w], {"num_hidden": 6}, rtol=rtol, atol=rtol)
    w2 = sample((6, 5), dtype, -1, 1)
    check("fully_connected", [x, w2, b], {"num_hidden": 6, "flatten": False}, rtol=rtol, atol=rtol)
    check("fully_connected_backward", [sample((4, 3, 6), dtype), x, w2],
          {"num_hidden": 6, "flatten": False}, rtol=rtol, atol=rtol)
    # no input units: the output is the bias (or zeros), an empty sum
    empty_x, empty_w = sample((4, 0), dtype), sample((6, 0), dtype)
    check("fully_connected", [empty_x, empty_w, b], {"num_hidden": 6}, rtol=rtol, atol=rtol)
    check("fully_connected", [empty_x, empty_w], {"num_hidden": 6, "no_bias": True})


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64"])
def test_nn_indexing(dtype):
    data = sample((4, 5, 3), dtype)
    index = onp.array([[0, 4, 9], [1, -2, 3], [2, 2, 2], [4, 0, 1]])
    for mode in ("clip", "wrap"):
        check("pick", [data, index], {"axis": 1, "mode": mode})
        check("pick", [data, index.astype("float32")], {"axis": 1, "mode": mode, "keepdims": True})
        if dtype != "int64":
            check("pick_backward", [sample((4, 3), dtype), data, index], {"axis": 1, "mode": mode})
    check("one_hot", [onp.array([[0, 3], [7, -1]])], {"depth": 5, "on_value": 2, "off_value": -1, "dtype": dtype})
    weight = sample((6, 4), dtype)
    tokens = onp.array([[0, 5, 5], [9, 2, -3]])
    check("embedding", [tokens, weight], {"input_dim": 6, "output_dim": 4})
    if dtype != "int64":
        check("embedding_backward", [sample((2, 3, 4), dtype), tokens, weight], rtol=1e-2, atol=1e-2)
    if dtype in ("float16", "bfloat16"):
        # One row hit 5000 times: summed in float and rounded once on both devices (a 16-bit
        # running sum stops growing at 2048 in float16, 256 in bfloat16).
        ones = host(onp.ones((5000, 4), "float32"), dtype)
        check("embedding_backward", [ones, onp.zeros(5000, "int64"), weight], rtol=0, atol=0)
    check("sequence_mask", [data, onp.array([2, 5, 0, 3])], {"use_sequence_length": True, "axis": 1, "value": -7})
    check("sequence_mask", [sample((5, 4, 3), dtype), onp.array([1, 5, 0, 3])],
          {"use_sequence_length": True, "axis": 0})
    check("batch_flatten", [data])
    check("batch_flatten_backward", [sample((4, 15), dtype), data])


def test_special_values_match_cpu():
    """NaN, infinities, signed zeros and negative integer powers give the CPU's results."""
    nan, inf = onp.nan, onp.inf
    x = onp.array([nan, -1.0, 0.0, 2.0, -inf, inf], "float32")
    check("relu", [x])  # NaN stays NaN, as MXNet's relu
    check("activation", [x], {"act_type": "relu"})
    y = run("activation", [x], {"act_type": "relu"}, cpu(0))[0]
    dy = onp.array([inf, -inf, nan, 1.0, 2.0, -inf], "float32")
    check("activation_backward", [dy, x, y], {"act_type": "relu"})  # a select: 0 where y <= 0
    for dtype in ("int32", "int64", "int8"):
        base = onp.array([-2, -1, -1, 0, 1, 2, 3], dtype)
        check("power", [base, onp.array([-1, -1, -2, -3, -1, -2, 2], dtype)])
    zeros = [onp.array([0.0, -0.0, 0.0], "float32"), onp.array([-0.0, 0.0, 0.0], "float32")]
    for name in ("maximum", "minimum"):  # ties keep the first operand, whatever its sign
        signs = [onp.signbit(run(name, zeros, {}, d)[0]) for d in (cpu(0), gpu(0))]
        onp.testing.assert_array_equal(signs[1], signs[0], err_msg=name)
    weight, grad = sample((6,), "float32"), onp.array([nan, 3.0, -3.0, 0.1, inf, -inf], "float32")
    check("sgd_update", [weight, grad], {"lr": 0.1, "clip_gradient": 0.5}, mutated=(0,))
    data = onp.zeros((3, 0), "float32")  # an empty axis: mean and std are NaN
    check("layer_norm", [data, onp.zeros(0, "float32"), onp.zeros(0, "float32")], {"axis": -1})



def floats_with_specials(dtype, low, high):
    """Random values in [low, high) of a float dtype, then zeros of both signs, a subnormal,
    values beyond float16's range, infinities and NaNs of both signs."""
    specials = [0.0, -0.0, 1e-40, -3e-39, 7e4, -1e30, onp.inf, -onp.inf, onp.nan, -onp.nan]
    values = onp.concatenate([RNG.uniform(low, high, 40), specials]).astype("float32")
    with onp.errstate(over="ignore"):  # float16 turns the large ones into infinities
        return host(values, dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_float_parts(dtype):
    # Integer and bool data compute in float32; CUDA's frexp leaves the exponent of inf and NaN
    # unspecified, where the CPU gives 0.
    data = floats_with_specials(dtype, -40, 40) if dtype in FLOATS else sample((50,), dtype, -9, 9)
    for name in ("signbit", "spacing", "i0", "bessel_i1", "frexp", "modf"):
        check(name, [data])


@pytest.mark.parametrize("dtype", ALL)
def test_gamma_family(dtype):
    data = floats_with_specials(dtype, 0.1, 8) if dtype in FLOATS else sample((50,), dtype, 1, 8)
    if dtype in FLOATS:  # and the negative side, half-integers and poles
        data = onp.concatenate([data, host(onp.array([-3.5, -2.5, -1.5, -0.5, -2.0, -7.0],
                                                     "float32"), dtype)])
    # CUDA's lgamma is documented less accurate on (-11, -2.26) than glibc's.
    tol = 1e-10 if dtype == "float64" else None
    for name in ("gamma", "gammaln", "_digamma"):
        check(name, [data], rtol=tol, atol=tol)


@pytest.mark.parametrize("a_dtype,b_dtype", [("int8", "int8"), ("int8", "uint8"),
                                             ("int32", "int64"), ("bool", "int8"),
                                             ("uint8", "bool"), ("bool", "bool")])
def test_bitwise(a_dtype, b_dtype):
    # Mixed dtypes promote on the host first; broadcasting both ways; negative values.
    a, b = sample((4, 1, 6), a_dtype, -100, 100), sample((5, 1), b_dtype, -100, 100)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        check(name, [a, b])
        check(name, [b, a])
        for scalar in (5, -7) if a_dtype.startswith("int") else (5,):
            for reverse in (False, True):
                check(name + "_scalar", [a], {"scalar": scalar, "reverse": reverse})
        check(name, [a[:0], b])  # empty


OPTIMIZERS = [
    ("sgd_update", 2, {"lr": 0.1, "wd": 0.01, "clip_gradient": 0.5}),
    ("sgd_mom_update", 3, {"lr": 0.1, "momentum": 0.9, "wd": 0.01}),
    ("nag_mom_update", 3, {"lr": 0.1, "momentum": 0.9, "rescale_grad": 0.5}),
    ("adam_update", 4, {"lr": 0.01, "beta1": 0.8, "wd": 0.1}),
    ("adamw_update", 4, {"lr": 0.01, "eta": 0.5, "wd": 0.1}),
    ("rmsprop_update", 3, {"lr": 0.01, "rho": 0.8, "clip_weights": 0.7}),
    ("adagrad_update", 3, {"lr": 0.1}),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,inputs,attrs", OPTIMIZERS)
def test_optimizer_updates(name, inputs, attrs, dtype):
    arrays = [sample((5, 7), dtype)] + [sample((5, 7), dtype, 0.1, 1) for _ in range(inputs - 1)]
    check(name, arrays, attrs, mutated=[0] + list(range(2, inputs)))


@pytest.mark.parametrize("name,inputs,attrs", OPTIMIZERS)
def test_multi_optimizer_updates(name, inputs, attrs):
    """multi_<op> over 40 parameters, each with its own lr and wd: a run of 34 float32 ones of
    many sizes (two launches: 32, then 2), 2 float16 ones, and 4 empty float64 ones (a launch
    with nothing to do)."""
    shared = {k: v for k, v in attrs.items() if k not in ("lr", "wd")}
    dtypes = ["float32"] * 34 + ["float16"] * 2 + ["float64"] * 4
    sizes = [(i * 37) % 300 for i in range(33)] + [70001] + [5, 0] + [0] * 4
    arrays = []
    for size, dtype in zip(sizes, dtypes):
        arrays += [sample((size,), dtype)] + [sample((size,), dtype, 0.1, 1)
                                              for _ in range(inputs - 1)]
    lrs = tuple(0.01 * (1 + i % 3) for i in range(40))
    wds = tuple(0.001 * (i % 4) for i in range(40))
    check("multi_" + name, arrays, dict(shared, num_weights=40, lrs=lrs, wds=wds),
          mutated=[i for i in range(len(arrays)) if i % inputs != 1])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "uint8",
                                   "bool"])
def test_topk(dtype):
    # Few distinct values, so ties are everywhere: both devices keep the lower index first.
    data = sample((4, 6, 5), dtype, -2, 2)
    if dtype in FLOATS:
        data = host(onp.round(sample((4, 6, 5), "float32", -2, 2)), dtype)
    for attrs in ({"axis": 1, "k": 3}, {"axis": -1, "k": 2, "is_ascend": True}, {"axis": 0, "k": 0},
                  {"axis": "None", "k": 7}):
        for ret_typ in ("indices", "value", "both", "mask"):
            for index_dtype in ("float32", "int64"):
                check("topk", [data], dict(attrs, ret_typ=ret_typ, dtype=index_dtype))
    if dtype in FLOATS:
        attrs = {"axis": 1, "k": 3, "dtype": "int64"}
        indices = run("topk", [data], dict(attrs, ret_typ="indices"), cpu(0))[0]
        check("topk_backward", [sample((4, 3, 5), dtype), data, indices], attrs)
        check("topk_backward", [sample((4, 3, 5), dtype), data, indices.astype("float32")], attrs)


def test_topk_nan_and_signed_zeros():
    row = onp.array([1.0, onp.nan, -0.0, -onp.inf, 0.0, -onp.nan, onp.inf, -2.0])
    for dtype in FLOATS:
        data = host(onp.stack([row, row[::-1]]), dtype)
        for ascend in (False, True):
            check("topk", [data], {"k": 8, "ret_typ": "indices", "is_ascend": ascend,
                                   "dtype": "int64"})


def test_topk_long_rows():
    data = sample((3, 5000), "float32")
    for ascend in (False, True):
        check("topk", [data], {"k": 50, "ret_typ": "both", "is_ascend": ascend, "dtype": "int32"})
    check("topk", [sample((70000,), "float16")], {"k": 5, "ret_typ": "both"})
    check("topk", [sample((70000,), "bfloat16")], {"k": 5, "ret_typ": "both"})


IMAGE_DTYPES = ("uint8", "float32")


@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
def test_image_to_tensor_normalize_and_moves(dtype):
    image = sample((7, 9, 3), dtype, 0, 255)
    batch = sample((2, 7, 9, 3), dtype, 0, 255)
    for data in (image, batch):
        check("image_to_tensor", [data])
        check("image_crop", [data], {"x": 2, "y": 1, "width": 5, "height": 4})
        check("image_flip_left_right", [data])
        check("image_flip_top_bottom", [data])
    tensor = sample((2, 3, 7, 9), "float32", 0, 1)
    check("image_normalize", [tensor], {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)})
    check("image_normalize", [tensor[0]], {"mean": (0.5,), "std": (0.25,)})
    check("image_normalize", [tensor.astype("float16")], {"mean": (0.1, 0.2, 0.3)})


@pytest.mark.parametrize("dtype", IMAGE_DTYPES + ("float16",))
def test_image_resize(dtype):
    image = sample((13, 10, 3), dtype, 0, 255)
    batch = sample((2, 6, 8, 1), dtype, 0, 255)
    for interp in (0, 1):
        for size, keep_ratio in (((5, 7), False), ((25, 31), False), ((6,), True), ((20,), True),
                                 ((9,), False)):
            attrs = {"size": size, "keep_ratio": keep_ratio, "interp": interp}
            check("image_resize", [image], attrs, rtol=1e-6, atol=1e-6)
            check("image_resize", [batch], attrs, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
@pytest.mark.parametrize("name", ["image_adjust_brightness", "image_adjust_contrast",
                                  "image_adjust_saturation"])
def test_image_adjust(name, dtype):
    for factor in (0.3, 1.7):
        check(name, [sample((9, 11, 3), dtype, 0, 255)], {"factor": factor}, rtol=1e-6, atol=1e-6)
        check(name, [sample((2, 5, 4, 3), dtype, 0, 255)], {"factor": factor}, rtol=1e-6, atol=1e-6)
