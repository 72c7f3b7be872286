"""npx.activation's log_sigmoid and mish, and npx.leaky_relu's act_types (leaky, prelu, elu,
selu, gelu, gelu_tanh) against float64 NumPy references: values in every float dtype, gradients
against central differences, empty and 0-d shapes, the serial engine as the parallel kernels'
oracle, GPU against CPU, and the errors. The libmvec paths (mish, elu, selu, gelu, gelu_tanh
forward and backward, log_sigmoid's backward) at sizes around the vector width, block and thread
chunk, special values, 16-bit floats as the float results rounded, and the same bits wherever an
array starts."""
import math

import numpy as onp
import pytest

import pymx
from pymx import autograd, npx
from pymx.ndarray import from_numpy
from pymx._op import invoke
from pymx.test_utils import assert_almost_equal, check_numeric_gradient, check_op
from conftest import assert_engines_agree, requires_gpu

SHAPES = [(3, 4), (2, 0, 3), (0,), ()]
DTYPES_16 = ["float16", "bfloat16"]



def _erf(x):
    """math.erf elementwise, in x's dtype (check_op reads the result dtype from the reference)."""
    x = onp.asarray(x)
    return onp.vectorize(math.erf, otypes=[x.dtype])(x)


def softrelu(x):
    return onp.maximum(x, 0) + onp.log1p(onp.exp(-onp.abs(x)))


ACTIVATIONS = {
    "log_sigmoid": lambda x: onp.minimum(x, 0) - onp.log1p(onp.exp(-onp.abs(x))),
    "mish": lambda x: x * onp.tanh(softrelu(x)),
}

SELU_LAMBDA, SELU_ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717


def leaky_reference(act_type, slope=0.25):
    return {
        "leaky": lambda x: onp.where(x > 0, x, slope * x),
        "elu": lambda x: onp.where(x > 0, x, slope * onp.expm1(x)),
        "selu": lambda x: SELU_LAMBDA * onp.where(x > 0, x, SELU_ALPHA * onp.expm1(x)),
        "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
        "gelu_erf": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
        "gelu_tanh": lambda x: 0.5 * x * (1 + onp.tanh(math.sqrt(2 / math.pi) *
                                                       (x + 0.044715 * x ** 3))),
    }[act_type]


LEAKY_TYPES = ["leaky", "elu", "selu", "gelu", "gelu_erf", "gelu_tanh"]


def prelu_reference(x, gamma):
    if gamma.size > 1:  # per channel: axis 1, or axis 0 of one-dimensional data
        gamma = gamma.reshape((-1,) + (1,) * (x.ndim - 2)) if x.ndim >= 2 else gamma
    return onp.where(x > 0, x, gamma * x)


def away_from_zero(shape, dtype="float64"):
    """Values in +-[0.1, 1.1): central differences do not straddle leaky_relu's kink at 0."""
    values = onp.random.uniform(0.1, 1.1, size=shape) * onp.random.choice([-1, 1], size=shape)
    return values.astype(dtype)


# ---------------------------------------------------------------------------------------------
# activation: log_sigmoid, mish
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("act_type", sorted(ACTIVATIONS))
def test_activation_values_and_gradients(device, act_type):
    check_op(ACTIVATIONS[act_type], lambda x: npx.activation(x, act_type=act_type),
             shapes=SHAPES, low=-4, high=4, grad=True, device=device)


@pytest.mark.parametrize("act_type", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", ["float64"] + DTYPES_16)
def test_activation_dtypes(device, act_type, dtype):
    check_op(ACTIVATIONS[act_type], lambda x: npx.activation(x, act_type=act_type),
             shapes=[(5, 7)], dtype=dtype, low=-6, high=6, device=device)


@pytest.mark.parametrize("act_type", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_activation_gradient_dtypes(device, act_type, dtype):
    """The backward kernels in 16-bit and float64 against the float64 derivative."""
    x = away_from_zero((4, 6))
    data = from_numpy(x, dtype=dtype, device=device)
    data.attach_grad()
    with autograd.record():
        out = npx.activation(data, act_type=act_type)
    out.backward()
    exact = data.asnumpy().astype(onp.float64)  # the values pymx holds
    h = 1e-6
    derivative = (ACTIVATIONS[act_type](exact + h) - ACTIVATIONS[act_type](exact - h)) / (2 * h)
    assert_almost_equal(data.grad, derivative.astype(onp.float32) if dtype != "float64"
                        else derivative)


def test_log_sigmoid_is_stable_for_large_inputs():
    x = onp.array([-1000.0, -100.0, -30.0, 0.0, 30.0, 100.0, 1000.0])
    out = npx.activation(from_numpy(x, dtype="float32"), act_type="log_sigmoid").asnumpy()
    want = onp.minimum(x, 0) - onp.log1p(onp.exp(-onp.abs(x)))
    assert onp.all(onp.isfinite(out)), out
    assert_almost_equal(out, want.astype(onp.float32), rtol=1e-6, atol=1e-30)


def test_mish_large_inputs_and_hybridized_gradient():
    """mish runs as its own op (its gradient reads x): recorded and traced graphs agree."""
    x = onp.array([-50.0, -1.2, 0.0, 3.0, 50.0])
    data = from_numpy(x)
    data.attach_grad()
    with autograd.record():
        out = npx.activation(data, act_type="mish")
    out.backward()
    assert_almost_equal(out, ACTIVATIONS["mish"](x), rtol=1e-12, atol=1e-15)
    net = pymx.gluon.nn.HybridLambda(lambda v: npx.activation(v, act_type="mish"))
    net.hybridize()
    traced = from_numpy(x)
    traced.attach_grad()
    with autograd.record():
        out2 = net(traced)
    out2.backward()
    assert_almost_equal(out2, out, rtol=0, atol=0)
    assert_almost_equal(traced.grad, data.grad, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# leaky_relu: leaky, elu, selu, gelu, gelu_tanh
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("act_type", LEAKY_TYPES)
def test_leaky_relu_values_and_gradients(device, act_type):
    slope = 0.3
    reference = leaky_reference(act_type, slope)
    check_op(lambda x: reference(x), lambda x: npx.leaky_relu(x, act_type=act_type, slope=slope),
             shapes=[(3, 4), (2, 0, 3), ()], low=-3, high=3, device=device)
    check_numeric_gradient(lambda x: npx.leaky_relu(x, act_type=act_type, slope=slope),
                           [away_from_zero((3, 5))], device=device)


@pytest.mark.parametrize("act_type", LEAKY_TYPES)
@pytest.mark.parametrize("dtype", ["float64"] + DTYPES_16)
def test_leaky_relu_dtypes(device, act_type, dtype):
    check_op(leaky_reference(act_type), lambda x: npx.leaky_relu(x, act_type=act_type),
             shapes=[(6, 5)], dtype=dtype, low=-4, high=4, device=device)


def test_selu_ignores_slope():
    x = onp.linspace(-3, 3, 13)
    a = npx.leaky_relu(from_numpy(x), act_type="selu", slope=0.01).asnumpy()
    assert_almost_equal(a, leaky_reference("selu")(x), rtol=1e-14, atol=1e-15)


# ---------------------------------------------------------------------------------------------
# leaky_relu: prelu
# ---------------------------------------------------------------------------------------------
PRELU_CASES = [((2, 3, 4), (3,)), ((2, 3, 4), (1,)), ((5,), (5,)), ((4, 3), (3,)),
               ((2, 3, 2, 2), (3,))]


@pytest.mark.parametrize("data_shape,gamma_shape", PRELU_CASES)
def test_prelu_values_and_gradients(device, data_shape, gamma_shape):
    x, gamma = away_from_zero(data_shape), onp.random.uniform(0.05, 0.5, size=gamma_shape)
    out = npx.leaky_relu(from_numpy(x, device=device), from_numpy(gamma, device=device),
                         act_type="prelu")
    assert_almost_equal(out, prelu_reference(x, gamma), rtol=1e-14, atol=1e-15)
    check_numeric_gradient(lambda d, g: npx.leaky_relu(d, g, act_type="prelu"), [x, gamma],
                           device=device)


@pytest.mark.parametrize("dtype", ["float32"] + DTYPES_16)
def test_prelu_dtypes(device, dtype):
    x = from_numpy(onp.random.uniform(-2, 2, size=(3, 4, 5)), dtype=dtype, device=device)
    gamma = from_numpy(onp.random.uniform(0, 0.5, size=(4,)), dtype=dtype, device=device)
    x.attach_grad()
    gamma.attach_grad()
    with autograd.record():
        out = npx.leaky_relu(x, gamma, act_type="prelu")
    head = onp.random.uniform(-1, 1, size=out.shape)
    out.backward(from_numpy(head, dtype=dtype, device=device))
    xs, gs, hs = (a.asnumpy().astype(onp.float64) for a in
                  (x, gamma, from_numpy(head, dtype=dtype)))
    assert out.dtype == x.dtype
    assert_almost_equal(out, prelu_reference(xs, gs).astype(onp.float32))
    g = gs.reshape(-1, 1)
    assert_almost_equal(x.grad, (hs * onp.where(xs > 0, 1.0, g)).astype(onp.float32))
    gamma_grad = (hs * onp.where(xs > 0, 0.0, xs)).sum(axis=(0, 2))
    # gamma_grad sums 15 rounded products: tolerances of the dtype on a sum of |terms|.
    scale = onp.abs(hs * xs).sum(axis=(0, 2))
    onp.testing.assert_array_less(onp.abs(gamma.grad.asnumpy() - gamma_grad),
                                  0.02 * scale + 1e-6)


def test_prelu_empty_data_gives_zero_gamma_grad(device):
    x = from_numpy(onp.zeros((0, 3, 2)), device=device)
    gamma = from_numpy(onp.ones(3), device=device)
    gamma.attach_grad()
    with autograd.record():
        out = npx.leaky_relu(x, gamma, act_type="prelu")
    out.backward()
    assert out.shape == (0, 3, 2)
    assert_almost_equal(gamma.grad, onp.zeros(3), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# The libmvec paths (activation_vector.h): mish, elu, selu, gelu, gelu_tanh forward and
# backward, and log_sigmoid's and mish's backward, computed a block at a time
# ---------------------------------------------------------------------------------------------
def _sigmoid(x):
    return 0.5 * (1 + onp.tanh(0.5 * x))  # no overflow warning for large |x|


def _mish_derivative(x):
    t = onp.tanh(softrelu(x))
    return t + x * _sigmoid(x) * (1 - t * t)


def _gelu_tanh_derivative(x):
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    t = onp.tanh(u)
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x * x)


VECTOR_SLOPE = 0.3
# name: (forward through pymx, float64 forward, float64 derivative)
VECTOR_PATHS = {
    "mish": (lambda x: npx.activation(x, act_type="mish"), ACTIVATIONS["mish"], _mish_derivative),
    "log_sigmoid": (lambda x: npx.activation(x, act_type="log_sigmoid"),
                    ACTIVATIONS["log_sigmoid"], lambda x: _sigmoid(-x)),
    "elu": (lambda x: npx.leaky_relu(x, act_type="elu", slope=VECTOR_SLOPE),
            leaky_reference("elu", VECTOR_SLOPE),
            lambda x: onp.where(x > 0, 1.0, VECTOR_SLOPE * onp.exp(onp.minimum(x, 0)))),
    "selu": (lambda x: npx.leaky_relu(x, act_type="selu"), leaky_reference("selu"),
             lambda x: SELU_LAMBDA * onp.where(x > 0, 1.0, SELU_ALPHA * onp.exp(onp.minimum(x, 0)))),
    "gelu": (lambda x: npx.leaky_relu(x, act_type="gelu"), leaky_reference("gelu"),
             lambda x: 0.5 * (1 + _erf(x / math.sqrt(2))) +
             x * onp.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)),
    "gelu_tanh": (lambda x: npx.leaky_relu(x, act_type="gelu_tanh"), leaky_reference("gelu_tanh"),
                  _gelu_tanh_derivative),
}
# Sizes around the vector width (16 floats), the block (1024) and the threads' chunk (16384).
VECTOR_SIZES = (0, 1, 15, 16, 17, 1025, 2 * 16384 + 5)


def forward_and_gradient(name, x, head, dtype=None):
    data = from_numpy(x, dtype=dtype)
    data.attach_grad()
    with autograd.record():
        out = VECTOR_PATHS[name][0](data)
    out.backward(from_numpy(head, dtype=dtype))
    return out.asnumpy(), data.grad.asnumpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(VECTOR_PATHS))
def test_vector_paths_match_float64_numpy(name, dtype):
    """Values and gradients at sizes that end inside a vector, a block and a thread's chunk,
    against the float64 formulas: the libm calls replaced by libmvec's (2-4 ulp) plus the
    formulas' own roundings."""
    rng = onp.random.default_rng(21)
    _, forward, derivative = VECTOR_PATHS[name]
    # gelu_tanh's exp(-2 u), u = sqrt(2/pi) (x + 0.044715 x^3), gets u rounded, an absolute error
    # of |2 u| eps (up to 50 eps for |x| <= 8) that exp turns into a relative one.
    eps = onp.finfo(dtype).eps * (8 if name == "gelu_tanh" else 1)
    for n in VECTOR_SIZES:
        x = rng.uniform(-8, 8, n).astype(dtype)
        head = rng.uniform(-1, 1, n).astype(dtype)
        out, grad = forward_and_gradient(name, x, head)
        assert out.shape == grad.shape == (n,) and out.dtype == grad.dtype == onp.dtype(dtype)
        exact = x.astype(onp.float64)
        assert_almost_equal(out, forward(exact), rtol=8 * eps, atol=8 * eps,
                            names=(f"pymx {name} n={n}", "float64 numpy"))
        # gelu's derivative crosses zero near x = -0.75 (a sum of terms of order 1): an
        # absolute bound there, as for the other formulas' small results.
        assert_almost_equal(grad, head.astype(onp.float64) * derivative(exact), rtol=16 * eps,
                            atol=16 * eps, names=(f"pymx {name}' n={n}", "float64 numpy"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(VECTOR_PATHS))
def test_vector_paths_special_values(name, dtype):
    """+-0, +-inf, NaN, mish's switch at 20, saturation and subnormals, mixed into one block,
    against the float64 formulas (NaN where they give NaN: mish(-inf) = -inf * 0)."""
    x = onp.array([0.0, -0.0, onp.inf, -onp.inf, onp.nan, 20.0, onp.nextafter(20.0, 21),
                   -20.0, 44.0, 89.0, -89.0, 700.0, -700.0, 1e-40, -1e-40, 1e-310, -1e-310,
                   1e30, -1e30, 0.5, -0.5, 3.0, -3.0], dtype="float64").astype(dtype)
    with onp.errstate(all="ignore"):
        want = VECTOR_PATHS[name][1](x.astype(onp.float64)).astype(dtype)
        got, _ = forward_and_gradient(name, x, onp.ones_like(x))
    assert onp.array_equal(onp.isnan(got), onp.isnan(want)), (name, x, got, want)
    assert onp.array_equal(onp.isinf(got), onp.isinf(want)), (name, x, got, want)
    finite = onp.isfinite(want)
    assert onp.array_equal(got[~finite & ~onp.isnan(want)], want[~finite & ~onp.isnan(want)])
    # gelu's 1 + erf(x / sqrt 2) and gelu_tanh's exp(-2 u) leave an error of order eps |x| in
    # results that are much smaller where x < 0 (the float64 formulas have it too).
    scale = onp.abs(want[finite]).astype(onp.float64) + onp.minimum(onp.abs(x[finite]), 1)
    error = onp.abs(got[finite].astype(onp.float64) - want[finite])
    bound = 8 * onp.finfo(dtype).eps * scale + onp.finfo(dtype).tiny
    assert (error <= bound).all(), (name, x[finite][error > bound], got[finite][error > bound],
                                    want[finite][error > bound])


@pytest.mark.parametrize("dtype", DTYPES_16)
@pytest.mark.parametrize("name", sorted(VECTOR_PATHS))
def test_vector_paths_16bit_floats(name, dtype):
    """float16 and bfloat16 widen to float a block at a time: each result, and each gradient,
    is the float32 op's result on the same values rounded to the dtype (log_sigmoid's gradient
    reads the rounded output). bfloat16 arrays read back as float32, exactly."""
    x = onp.linspace(-6, 6, 1500)
    low, low_grad = forward_and_gradient(name, x, onp.ones(x.size), dtype=dtype)
    stored = from_numpy(x, dtype=dtype).astype("float32").asnumpy()
    wide, wide_grad = forward_and_gradient(name, stored, onp.ones(x.size, onp.float32))
    if name == "log_sigmoid":
        y = from_numpy(low.astype(onp.float32))
        wide_grad = invoke("activation_backward", [from_numpy(onp.ones(x.size, onp.float32)), y, y],
                           {"act_type": "log_sigmoid"})[0].asnumpy()
    assert low.tobytes() == from_numpy(wide).astype(dtype).asnumpy().tobytes(), name
    assert low_grad.tobytes() == from_numpy(wide_grad).astype(dtype).asnumpy().tobytes(), name


@pytest.mark.parametrize("name", sorted(VECTOR_PATHS))
def test_vector_paths_same_bits_wherever_the_array_starts(name):
    """A slice starts elsewhere against the vectors, blocks and chunks: its elements, and their
    gradients, must be the whole array's bits."""
    rng = onp.random.default_rng(22)
    x = rng.uniform(-25, 25, 16384 + 2000).astype("float32")
    head = rng.uniform(-1, 1, x.size).astype("float32")
    whole, whole_grad = forward_and_gradient(name, x, head)
    for first, last in ((1, 1030), (15, 16), (1023, 16390), (16385, 18384)):
        part, part_grad = forward_and_gradient(name, x[first:last], head[first:last])
        assert part.tobytes() == whole[first:last].tobytes(), (name, first, last)
        assert part_grad.tobytes() == whole_grad[first:last].tobytes(), (name, first, last)


@pytest.mark.parametrize("name", sorted(VECTOR_PATHS))
def test_vector_paths_gradient_by_central_differences(name):
    """17 elements: a whole vector and a one-element tail, away from elu's and selu's kink."""
    check_numeric_gradient(VECTOR_PATHS[name][0], [away_from_zero((17,)) * 3])


_VECTOR_ENGINE_SCRIPT = r"""
import numpy as onp
from pymx import autograd, npx
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(23)
results = []
for act, kind in [("mish", "activation"), ("log_sigmoid", "activation"), ("elu", "leaky"),
                  ("gelu_tanh", "leaky")]:
    for dtype in ("float32", "float64", "float16"):
        x = from_numpy(rng.uniform(-9, 9, 40005), dtype=dtype)
        x.attach_grad()
        with autograd.record():
            out = (npx.activation(x, act_type=act) if kind == "activation"
                   else npx.leaky_relu(x, act_type=act))
        out.backward(from_numpy(rng.uniform(-1, 1, 40005), dtype=dtype))
        results += [out.asnumpy(), x.grad.asnumpy()]
onp.savez(OUT, *results)
"""


def test_vector_paths_threaded_engine_matches_naive(tmp_path):
    assert_engines_agree(_VECTOR_ENGINE_SCRIPT, tmp_path)


# ---------------------------------------------------------------------------------------------
# The serial engine as the parallel kernels' oracle
# ---------------------------------------------------------------------------------------------
_ENGINE_SCRIPT = r'''
import numpy as onp
from pymx import autograd, npx
from pymx.ndarray import from_numpy
rng = onp.random.default_rng(7)
results = []
for act_type, gamma_shape in [("gelu", None), ("selu", None), ("prelu", (8,)), ("prelu", (1,))]:
    x = from_numpy(rng.uniform(-3, 3, size=(5, 8, 1200)), dtype="float32")
    h = from_numpy(rng.uniform(-1, 1, size=(5, 8, 1200)), dtype="float32")
    inputs = [x]
    if gamma_shape:
        inputs.append(from_numpy(rng.uniform(0, 0.5, size=gamma_shape), dtype="float32"))
    for a in inputs:
        a.attach_grad()
    with autograd.record():
        out = npx.leaky_relu(*inputs, act_type=act_type)
    out.backward(h)
    results += [out.asnumpy()] + [a.grad.asnumpy() for a in inputs]
onp.savez(OUT, *results)
'''


def test_leaky_relu_threaded_engine_matches_naive(tmp_path):
    """48000 elements: the kernels split them over the intra-op threads; the serial engine runs
    the same chunks, so results are bitwise equal (gamma_grad's parts are added in order)."""
    assert_engines_agree(_ENGINE_SCRIPT, tmp_path)


# ---------------------------------------------------------------------------------------------
# GPU against CPU
# ---------------------------------------------------------------------------------------------
@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"] + DTYPES_16)
@pytest.mark.parametrize("act", [("activation", "log_sigmoid"), ("activation", "mish")] +
                         [("leaky_relu", t) for t in LEAKY_TYPES + ["prelu", "prelu_one_slope"]])
def test_gpu_matches_cpu(dtype, act):
    op, act_type = act
    x = onp.random.uniform(-4, 4, size=(3, 5, 40))
    gamma = onp.random.uniform(0, 0.5, size=(5,))
    if act_type == "prelu_one_slope":
        # One channel of 6020 elements: its gamma_grad is summed in 6 chunks on the GPU, the
        # last one partial (Note [Segment sums in chunks]).
        act_type = "prelu"
        x = onp.random.uniform(-4, 4, size=(4, 5, 301))
        gamma = onp.random.uniform(0, 0.5, size=(1,))
    head = onp.random.uniform(-1, 1, size=x.shape)
    results = []
    for device in (pymx.cpu(0), pymx.gpu(0)):
        inputs = [from_numpy(x, dtype=dtype, device=device)]
        if act_type == "prelu":
            inputs.append(from_numpy(gamma, dtype=dtype, device=device))
        for a in inputs:
            a.attach_grad()
        with autograd.record():
            if op == "activation":
                out = npx.activation(inputs[0], act_type=act_type)
            else:
                out = npx.leaky_relu(*inputs, act_type=act_type)
        out.backward(from_numpy(head, dtype=dtype, device=device))
        results.append([out] + [a.grad for a in inputs])
    cpu, gpu = results
    # Both devices evaluate the same formulas (activation_math.h); float64 differs only by the
    # math libraries' last bits and prelu's gamma_grad by its summation order.
    for got, want in zip(gpu, cpu):
        assert_almost_equal(got.asnumpy(), want.asnumpy(), rtol=1e-12 if dtype == "float64"
                            else None, atol=1e-12 if dtype == "float64" else None)


@requires_gpu
def test_gpu_prelu_gamma_grad_propagates_nan_like_the_cpu():
    """gamma_grad sums dy * (x > 0 ? 0 : x): a NaN or infinite out_grad at a positive x makes the
    channel's sum NaN on both devices (MXNet's formula); the other channels stay finite."""
    x = onp.array([[1.0, 0.5, 2.0], [-2.0, -1.0, 3.0]])  # (2, 3): channel c is column c
    head = onp.array([[onp.nan, onp.inf, 1.0], [1.0, 1.0, 1.0]])  # NaN and inf at x > 0
    grads = []
    for device in (pymx.cpu(0), pymx.gpu(0)):
        gamma = from_numpy(onp.full(3, 0.25), device=device)
        gamma.attach_grad()
        with autograd.record():
            out = npx.leaky_relu(from_numpy(x, device=device), gamma, act_type="prelu")
        out.backward(from_numpy(head, device=device))
        grads.append(gamma.grad.asnumpy())
    cpu, gpu = grads
    assert onp.isnan(cpu[:2]).all() and cpu[2] == 0.0, cpu
    assert_almost_equal(gpu, cpu, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
def test_bad_activation_type_names_the_choices():
    with pytest.raises(ValueError, match=r"act_type 'swishy'.*log_sigmoid, mish"):
        npx.activation(from_numpy(onp.ones(3)), act_type="swishy")


def test_bad_leaky_relu_type_names_the_choices():
    for act_type in ("rrelu", "gelu2"):
        with pytest.raises(ValueError, match=rf"act_type '{act_type}'.*gelu_tanh"):
            npx.leaky_relu(from_numpy(onp.ones(3)), act_type=act_type)


def test_prelu_needs_gamma():
    with pytest.raises(ValueError, match="needs gamma"):
        npx.leaky_relu(from_numpy(onp.ones(3)), act_type="prelu")


@pytest.mark.parametrize("data_shape,gamma_shape,pattern", [
    ((2, 3, 4), (4,), r"gamma shape \(4,\) must be \(1,\) or \(3,\) for data \(2, 3, 4\)"),
    ((2, 3, 4), (2, 3), r"gamma shape \(2, 3\) must be \(1,\) or \(3,\)"),
    ((5,), (4,), r"gamma shape \(4,\) must be \(1,\) or \(5,\)"),
    ((), (3,), r"gamma shape \(3,\) must be \(1,\) for 0-dimensional data"),
])
def test_prelu_wrong_gamma_shape(data_shape, gamma_shape, pattern):
    with pytest.raises(ValueError, match=pattern):
        npx.leaky_relu(from_numpy(onp.ones(data_shape)), from_numpy(onp.ones(gamma_shape)),
                       act_type="prelu")


def test_prelu_gamma_dtype_must_match_data():
    with pytest.raises(TypeError, match="float64"):
        npx.leaky_relu(from_numpy(onp.ones((2, 3)), dtype="float32"),
                       from_numpy(onp.ones(3), dtype="float64"), act_type="prelu")


def test_integer_data_is_a_type_error():
    with pytest.raises(TypeError, match="int32"):
        npx.activation(from_numpy(onp.ones(3, dtype="int32")), act_type="mish")
    with pytest.raises(TypeError, match="int32"):
        npx.leaky_relu(from_numpy(onp.ones(3, dtype="int32")), act_type="gelu")
