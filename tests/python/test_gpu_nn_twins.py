"""The newer NN kernels on gpu(0) against their CPU twins (test_gpu_ops.check: the same operator,
inputs and attributes on both devices, outputs equal within the dtype's tolerance): group and
instance normalisation, the activations beyond relu/sigmoid/tanh (log_sigmoid, mish, selu, gelu,
gelu_tanh, prelu), erf/erfinv, stop_gradient and the fused LSTM/GRU gates, each forward and
backward, in every float dtype, with sizes that are not multiples of the 256-thread block, size-1
axes and empty arrays. Skipped when no GPU is visible."""
import pytest
from conftest import requires_gpu
from test_gpu_ops import FLOATS, check, run, sample

from pymx.device import cpu

pytestmark = requires_gpu

# Statistics over groups: both devices sum in double, in different orders, then round once.
NORM_RTOL = {"float16": 4e-3, "bfloat16": 2.0 ** -5, "float32": 1e-4, "float64": 1e-10}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,num_groups", [((2, 6, 5, 7), 3),   # 70-element groups
                                              ((3, 4, 130), 2),    # groups over one block
                                              ((1, 3, 1), 3),      # size-1 axes
                                              ((0, 4, 3), 2),      # empty batch
                                              ((2, 4, 0), 4)])     # empty groups: NaN statistics
def test_group_norm_forward_and_backward(dtype, shape, num_groups):
    tol = NORM_RTOL[dtype]
    x, dy = sample(shape, dtype), sample(shape, dtype)
    gamma, beta = sample(shape[1:2], dtype, 0.5, 2), sample(shape[1:2], dtype)
    attrs = {"num_groups": num_groups, "eps": 1e-4}
    check("group_norm", [x, gamma, beta], attrs, rtol=tol, atol=tol)
    _, mean, std = run("group_norm", [x, gamma, beta], attrs, cpu(0))
    check("group_norm_backward", [dy, x, gamma, mean, std], attrs, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
def test_instance_norm_forward_and_backward(dtype):
    tol = NORM_RTOL[dtype]
    for shape in [(2, 3, 9, 31), (1, 1, 1), (0, 2, 5)]:
        x, dy = sample(shape, dtype), sample(shape, dtype)
        gamma, beta = sample(shape[1:2], dtype, 0.5, 2), sample(shape[1:2], dtype)
        check("instance_norm", [x, gamma, beta], {"eps": 1e-3}, rtol=tol, atol=tol)
        _, mean, std = run("instance_norm", [x, gamma, beta], {}, cpu(0))
        check("instance_norm_backward", [dy, x, gamma, mean, std], {}, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
def test_newer_activations_forward_and_backward(dtype):
    for shape in [(3, 257), (1,), (0, 4)]:
        x, dy = sample(shape, dtype, -6, 6), sample(shape, dtype)
        check("activation", [x], {"act_type": "log_sigmoid"})
        y = run("activation", [x], {"act_type": "log_sigmoid"}, cpu(0))[0]
        check("activation_backward", [dy, x, y], {"act_type": "log_sigmoid"})
        check("mish", [x])  # its own op (activation refuses act_type mish)
        y = run("mish", [x], {}, cpu(0))[0]
        check("activation_backward", [dy, x, y], {"act_type": "mish"})
        for act in ("selu", "gelu", "gelu_tanh"):
            check("leaky_relu", [x], {"act_type": act})
            check("leaky_relu_backward", [dy, x], {"act_type": act})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,gamma_shape", [((4, 3, 70), (3,)),   # channels on axis 1
                                               ((300,), (300,)),     # 1-D: channels on axis 0
                                               ((2, 5, 3), (1,)),    # one shared slope
                                               ((0, 3), (3,))])      # empty: gamma_grad 0
def test_prelu_forward_and_backward(dtype, shape, gamma_shape):
    x, dy = sample(shape, dtype), sample(shape, dtype)
    gamma = sample(gamma_shape, dtype, 0.1, 0.5)
    attrs = {"act_type": "prelu"}
    check("leaky_relu", [x, gamma], attrs)
    # gamma_grad sums dy * x over a channel's elements: float sums in another order.
    check("leaky_relu_backward", [dy, x, gamma], attrs, rtol=NORM_RTOL[dtype],
          atol=NORM_RTOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS + ("int32", "uint8"))
def test_erf_and_erfinv(dtype):
    check("erf", [sample((5, 103), dtype, -3, 3)])
    check("erf", [sample((0,), dtype)])
    inside = sample((5, 103), dtype, -0.95, 0.95) if dtype in FLOATS else sample((7,), dtype, 0, 1)
    check("erfinv", [inside])


@pytest.mark.parametrize("dtype", FLOATS + ("int64", "bool"))
def test_stop_gradient_copies(dtype):
    for shape in [(3, 257), (), (0, 2)]:
        check("stop_gradient", [sample(shape, dtype)], rtol=0, atol=0)


def gate_inputs(rows, hidden, parts, dtype):
    return [sample((rows, parts * hidden), dtype), sample((rows, parts * hidden), dtype),
            sample((rows, hidden), dtype)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("rows,hidden", [(3, 5), (2, 129), (1, 1), (0, 4)])
def test_lstm_gates_forward_and_backward(dtype, rows, hidden):
    i2h, h2h, c = gate_inputs(rows, hidden, 4, dtype)
    check("lstm_gates", [i2h, h2h, c])
    gates = run("lstm_gates", [i2h, h2h, c], {}, cpu(0))[2]
    dh, dc = sample((rows, hidden), dtype), sample((rows, hidden), dtype)
    check("lstm_gates_backward", [dh, dc, c, gates])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("rows,hidden", [(3, 5), (2, 129), (1, 1), (0, 4)])
def test_gru_gates_forward_and_backward(dtype, rows, hidden):
    i2h, h2h, h = gate_inputs(rows, hidden, 3, dtype)
    check("gru_gates", [i2h, h2h, h])
    gates = run("gru_gates", [i2h, h2h, h], {}, cpu(0))[1]
    check("gru_gates_backward", [sample((rows, hidden), dtype), h, gates])


def test_lstm_gates_three_dimensional_state():
    """A (T, N, H) state: the kernels read only the last axis as H."""
    i2h, h2h = sample((2, 3, 4 * 6), "float32"), sample((2, 3, 4 * 6), "float32")
    c = sample((2, 3, 6), "float32")
    check("lstm_gates", [i2h, h2h, c])
    gates = run("lstm_gates", [i2h, h2h, c], {}, cpu(0))[2]
    check("lstm_gates_backward", [sample((2, 3, 6), "float32"), sample((2, 3, 6), "float32"), c,
                                  gates])
