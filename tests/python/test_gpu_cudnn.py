"""The cuDNN paths of convolution, pooling and batch_norm (cuda/src/cudnn_*) and their fallbacks.

Each GPU case runs three ways on the same inputs: gpu(0) through cuDNN (the default), gpu(0) on
pymx's own kernels (cudnn_off=True), and cpu(0); all three must match a float64 reference (the
NumPy implementations of test_npx_nn.py for forward outputs, the CPU operator on float64 copies
of the inputs otherwise) within the tolerance of their dtype: TOL below, relative and absolute,
for inputs of magnitude about 1 (float16 results are rounded to float16, so 2e-2 covers sums
of dozens of terms). GPU tests skip when no GPU is visible; the attribute checks run anywhere.
"""
import importlib.util
import os

import numpy as onp
import pytest
from conftest import requires_gpu, run_python
from test_npx_nn import ref_conv, ref_pool

from pymx import autograd, npx
from pymx._op import invoke
from pymx.device import cpu, gpu
from pymx.ndarray import from_numpy

TOL = {"float16": 2e-2, "float32": 1e-4, "float64": 1e-9}
RNG = onp.random.default_rng(0)


def uniform(shape, dtype, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(dtype)


def halves(shape, dtype):
    """Multiples of 0.5 in [-1.5, 1.5]: exact in every dtype, and full of ties for max pooling."""
    return (RNG.integers(-3, 4, shape) / 2).astype(dtype)


def run(name, arrays, attrs, device, train=False, mutated=()):
    """Outputs of operator `name` on `device`, then the inputs it mutates, as NumPy arrays."""
    inputs = [from_numpy(a, device=device) for a in arrays]
    with autograd.train_mode() if train else autograd.predict_mode():
        outputs = invoke(name, inputs, attrs, device=device)
    return [o.asnumpy() for o in outputs] + [inputs[i].asnumpy() for i in mutated]


def as_float64(arrays):
    return [a.astype(onp.float64) for a in arrays]


def check_three_ways(name, arrays, attrs, train=False, mutated=(), forward_ref=None):
    """`name` through cuDNN, through the own GPU kernels and on the CPU, against the CPU operator
    on float64 copies of the inputs (and `forward_ref`, the NumPy result of output 0, if given).
    Each output's tolerance is TOL of its dtype."""
    want = run(name, as_float64(arrays), attrs, cpu(0), train, mutated)
    if forward_ref is not None:
        onp.testing.assert_allclose(want[0], forward_ref, rtol=1e-10, atol=1e-10)
    ways = {"cudnn": (gpu(0), attrs), "own GPU kernels": (gpu(0), dict(attrs, cudnn_off=True)),
            "cpu": (cpu(0), attrs)}
    for way, (device, way_attrs) in ways.items():
        got = run(name, arrays, way_attrs, device, train, mutated)
        for k, (g, w) in enumerate(zip(got, want)):
            tol = TOL[g.dtype.name]
            onp.testing.assert_allclose(g.astype(onp.float64), w, rtol=tol, atol=tol,
                                        err_msg=f"{name} output {k} ({way}), attrs {attrs}")


# ---------------------------------------------------------------------------------------------
# convolution
# ---------------------------------------------------------------------------------------------
CONV_CASES = [  # data shape, weight shape, attrs
    ((2, 3, 9, 8), (4, 3, 3, 2), {"kernel": (3, 2), "stride": (2, 1), "pad": (1, 0)}),
    ((2, 4, 7, 7), (6, 2, 3, 3), {"kernel": (3, 3), "dilate": (2, 2), "num_group": 2}),
    ((2, 8, 6, 6), (8, 1, 3, 3), {"kernel": (3, 3), "pad": (1, 1), "num_group": 8}),
    ((3, 5, 6, 6), (4, 5, 1, 1), {"kernel": (1, 1)}),
    ((2, 3, 11), (4, 3, 4), {"kernel": (4,), "stride": (3,), "pad": (2,)}),
    ((1, 2, 4, 5, 5), (3, 2, 2, 2, 3),
     {"kernel": (2, 2, 3), "pad": (1, 0, 1), "dilate": (1, 2, 1)}),
    ((4, 16, 10, 10), (32, 16, 3, 3), {"kernel": (3, 3), "pad": (1, 1)}),  # tensor-core channels
]


def conv_attrs(weight, attrs, bias, act):
    full = dict(attrs, num_filter=weight[0], no_bias=not bias)
    if act:
        full["act_type"] = act
    return full


def conv_reference(x, w, b, attrs, act):
    nsp = x.ndim - 2
    y = ref_conv(x.astype(onp.float64), w.astype(onp.float64),
                 None if b is None else b.astype(onp.float64),
                 attrs.get("stride", (1,) * nsp), attrs.get("pad", (0,) * nsp),
                 attrs.get("dilate", (1,) * nsp), attrs.get("num_group", 1))
    return onp.maximum(y, 0) if act else y


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_convolution(case, dtype):
    """Forward with and without bias and the fused relu; backward with and without the data
    gradient (groups, stride, pad, dilation, 1-D, 2-D and 3-D)."""
    data, weight, base = case
    x, w, b = uniform(data, dtype), uniform(weight, dtype), uniform(weight[:1], dtype)
    for bias in (True, False):
        for act in (None, "relu"):
            attrs = conv_attrs(weight, base, bias, act)
            inputs = [x, w, b] if bias else [x, w]
            y = conv_reference(x, w, b if bias else None, base, act)
            check_three_ways("convolution", inputs, attrs, forward_ref=y)
            dy = uniform(y.shape, dtype)
            grad_inputs = [dy, x, w] + ([y.astype(dtype)] if act else [])  # relu's mask
            for need_data_grad in (True, False):
                check_three_ways("convolution_backward", grad_inputs,
                                 dict(attrs, need_data_grad=need_data_grad))


@requires_gpu
@pytest.mark.parametrize("tune", [None, "off", "limited_workspace", "fastest"])
def test_convolution_tuning_modes(tune):
    """Every way of choosing cuDNN's algorithms (also with no workspace at all, and a second
    time from the cache) gives the reference's results."""
    data, weight, base = CONV_CASES[-1]
    x, w, b = uniform(data, "float32"), uniform(weight, "float32"), uniform(weight[:1], "float32")
    y = conv_reference(x, w, b, base, None)
    dy = uniform(y.shape, "float32")
    for workspace in (None, 0):
        attrs = conv_attrs(weight, base, True, None)
        for key, value in (("cudnn_tune", tune), ("workspace", workspace)):
            if value is not None:
                attrs[key] = value
        for _ in range(2):
            check_three_ways("convolution", [x, w, b], attrs, forward_ref=y)
            check_three_ways("convolution_backward", [dy, x, w], attrs)


@requires_gpu
def test_gluon_conv_net_through_cudnn_matches_cpu():
    """A recorded Conv2D(relu) -> BatchNorm -> MaxPool2D -> Dense step: outputs and every
    parameter gradient agree between gpu(0) (cuDNN) and cpu(0)."""
    from pymx import np
    from pymx.gluon import nn
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, kernel_size=3, padding=1, activation="relu"), nn.BatchNorm(),
            nn.MaxPool2D(pool_size=2, strides=2), nn.Dense(5))
    net.initialize(device=[cpu(0), gpu(0)])
    x = uniform((4, 3, 8, 8), "float32")
    results = []
    for device in (cpu(0), gpu(0)):
        xs = np.array(x, device=device)
        with autograd.record():
            out = net(xs)
        out.backward()
        grads = [p.grad(device).asnumpy() for p in net.collect_params().values()
                 if p.grad_req != "null"]
        results.append([out.asnumpy()] + grads)
    for k, (want, got) in enumerate(zip(*results)):
        onp.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"result {k}")


# ---------------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------------
POOL_CASES = [  # data shape, attrs
    ((2, 3, 11, 11), {"kernel": (4, 4), "stride": (2, 2)}),
    ((2, 3, 9, 10), {"kernel": (3, 2), "stride": (2, 2), "pad": (1, 1)}),
    ((2, 3, 9, 9), {"kernel": (3, 3), "stride": (2, 2), "pooling_convention": "full"}),  # = valid
    ((2, 3, 8, 9), {"kernel": (3, 3), "stride": (2, 2), "pad": (0, 1),
                    "pooling_convention": "full"}),  # one more window than valid: own kernels
    ((2, 3, 12), {"kernel": (3,), "stride": (2,), "pad": (1,)}),
    ((1, 2, 5, 6, 7), {"kernel": (2, 3, 2), "stride": (1, 2, 2), "pad": (1, 1, 0)}),
    ((2, 3, 5, 7), {"global_pool": True}),
]


def pool_reference(x, attrs, pool_type, count_include_pad):
    nsp = x.ndim - 2
    if attrs.get("global_pool"):
        kernel, stride, pad = x.shape[2:], (1,) * nsp, (0,) * nsp
    else:
        kernel, stride, pad = attrs["kernel"], attrs["stride"], attrs.get("pad", (0,) * nsp)
    return ref_pool(x.astype(onp.float64), kernel, stride, pad, pool_type,
                    attrs.get("pooling_convention") == "full", count_include_pad)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pooling(case, dtype):
    """max, avg (count_include_pad both ways) and sum, forward and backward, on data full of
    ties: the max backward sends each gradient to the first maximum of its window, as the CPU."""
    data, base = case
    x = halves(data, dtype)
    for pool_type, include_pad in (("max", True), ("avg", True), ("avg", False), ("sum", True)):
        attrs = dict(base, pool_type=pool_type, count_include_pad=include_pad)
        y = pool_reference(x, base, pool_type, include_pad)
        check_three_ways("pooling", [x], attrs, forward_ref=y)
        check_three_ways("pooling_backward", [uniform(y.shape, dtype), x, y.astype(dtype)], attrs)


# ---------------------------------------------------------------------------------------------
# batch_norm
# ---------------------------------------------------------------------------------------------
BN_CASES = [((4, 3, 5, 6), 1), ((6, 4), -1), ((2, 5, 3, 4), 3), ((3, 4, 8), 2)]  # shape, axis
BN_DTYPES = [("float32", "float32"), ("float16", "float32"), ("float64", "float64"),
             ("float16", "float16")]  # (data, parameters); the last runs the own kernels


@requires_gpu
@pytest.mark.parametrize("dtypes", BN_DTYPES)
@pytest.mark.parametrize("case", BN_CASES)
def test_batch_norm(case, dtypes):
    """Training (batch statistics, the running statistics' update) and inference, fix_gamma both
    ways, any axis; the backward in both modes; use_global_stats in training."""
    shape, axis = case
    dtype, ptype = dtypes
    channels = shape[axis]
    x = uniform(shape, dtype, -2, 3)
    gamma, beta = uniform((channels,), ptype, 0.5, 2), uniform((channels,), ptype)
    moving_mean, moving_var = uniform((channels,), ptype), uniform((channels,), ptype, 0.5, 2)
    params = [gamma, beta, moving_mean, moving_var]
    for train, global_stats in ((True, False), (False, False), (True, True)):
        for fix_gamma in (True, False):
            attrs = {"eps": 1e-3, "momentum": 0.9, "fix_gamma": fix_gamma, "axis": axis,
                     "use_global_stats": global_stats}
            check_three_ways("batch_norm", [x] + params, attrs, train=train, mutated=(3, 4))
            _, mean, var = run("batch_norm", as_float64([x] + params), attrs, cpu(0), train)
            dy = uniform(shape, dtype)
            check_three_ways("batch_norm_backward",
                             [dy, x, gamma, mean.astype(ptype), var.astype(ptype)], attrs,
                             train=train)


# ---------------------------------------------------------------------------------------------
# Whether cuDNN is used, and PYMX_CUDNN=0
# ---------------------------------------------------------------------------------------------
_PROBE = """
from pymx import np, npx
from pymx.device import gpu
x = np.ones((2, 3, 8, 8), device=gpu(0))
w = np.ones((4, 3, 3, 3), device=gpu(0))
y = npx.convolution(x, w, kernel=(3, 3), num_filter=4, no_bias=True)
print(float(y.sum()))
print(any("libcudnn_cnn" in line for line in open("/proc/self/maps")))
"""


def _probe(cudnn_setting):
    env = dict(os.environ)
    env.pop("PYMX_CUDNN", None)
    if cudnn_setting is not None:
        env["PYMX_CUDNN"] = cudnn_setting
    return run_python(_PROBE, env=env)


def _cudnn_installed():
    """Whether this Python sees cuDNN 9: the nvidia-cudnn wheel or a system libcudnn.so.9."""
    if importlib.util.find_spec("nvidia") and importlib.util.find_spec("nvidia.cudnn"):
        return True
    import ctypes
    try:
        ctypes.CDLL("libcudnn.so.9")
        return True
    except OSError:
        return False


@requires_gpu
def test_pymx_cudnn_0_runs_the_own_kernels():
    """With cuDNN installed the convolution loads it (its convolution library appears in the
    process); PYMX_CUDNN=0 never touches it and gives the same result; other values fail with
    a message naming the variable."""
    expected = 2 * 4 * 6 * 6 * 27
    default, off = _probe(None), _probe("0")
    assert default.returncode == 0 and off.returncode == 0, default.stderr + off.stderr
    assert float(default.stdout.split()[0]) == expected
    assert off.stdout.split() == [str(float(expected)), "False"]
    if _cudnn_installed():
        assert default.stdout.split()[1] == "True", default.stdout
    bad = _probe("2")
    assert bad.returncode != 0 and 'PYMX_CUDNN="2" is not 0 or 1' in bad.stderr


# ---------------------------------------------------------------------------------------------
# The attributes on every device
# ---------------------------------------------------------------------------------------------
def test_cudnn_attributes_are_validated():
    x = from_numpy(uniform((1, 2, 5, 5), "float32"))
    w = from_numpy(uniform((3, 2, 3, 3), "float32"))
    with pytest.raises(ValueError, match="cudnn_tune 'bogus' is not one of"):
        npx.convolution(x, w, kernel=(3, 3), no_bias=True, cudnn_tune="bogus")
    with pytest.raises(ValueError, match="attribute 'cudnn_off' must be a bool .*'maybe'"):
        npx.convolution(x, w, kernel=(3, 3), no_bias=True, cudnn_off="maybe")
    with pytest.raises(ValueError, match=r"workspace must be >= 0 \(MB\), got -1"):
        npx.convolution(x, w, kernel=(3, 3), no_bias=True, workspace=-1)
    with pytest.raises(ValueError, match="attribute 'cudnn_off' must be a bool .*'maybe'"):
        npx.pooling(x, kernel=(2, 2), cudnn_off="maybe")
    params = [from_numpy(onp.ones(2, "float32")) for _ in range(4)]
    with pytest.raises(ValueError, match="attribute 'cudnn_off' must be a bool .*'maybe'"):
        npx.batch_norm(x, *params, cudnn_off="maybe")


def test_cudnn_attributes_change_nothing_on_the_cpu():
    """The attributes reach the forward and backward operators, which accept them and compute
    the same results."""
    x_np, w_np = uniform((2, 2, 6, 6), "float64"), uniform((3, 2, 3, 3), "float64")
    results = []
    for extra in ({}, {"cudnn_off": True, "cudnn_tune": "fastest", "workspace": 0},
                  {"cudnn_off": False, "cudnn_tune": "off"}):
        x, w = from_numpy(x_np), from_numpy(w_np)
        x.attach_grad()
        w.attach_grad()
        params = [from_numpy(v) for v in (onp.ones(3), onp.zeros(3), onp.zeros(3), onp.ones(3))]
        pool_off = {"cudnn_off": extra["cudnn_off"]} if extra else {}
        with autograd.record():
            y = npx.convolution(x, w, kernel=(3, 3), no_bias=True, pad=(1, 1), **extra)
            y = npx.batch_norm(y, *params, fix_gamma=False, **pool_off)
            y = npx.pooling(y, kernel=(2, 2), stride=(2, 2), pool_type="avg", **pool_off)
        y.backward()
        results.append([y.asnumpy(), x.grad.asnumpy(), w.grad.asnumpy()])
    for other in results[1:]:
        for want, got in zip(results[0], other):
            onp.testing.assert_array_equal(got, want)
