"""pymx.npx: MXNet's NumPy extension namespace (neural-network operators, device helpers, flags).

The operators defined here are one call each to a C++ operator through `pymx._op.invoke`; the
C++ files (engine/src/ops/nn_*.cc) document the attributes and the gradient of each. Those
imported from the private modules are composed from pymx operators; each module's docstring
says how, and lists its differences from MXNet.

Differences from MXNet 2.x in the activation and normalisation operators:
  - leaky_relu has no act_type 'rrelu' (a ValueError names the supported ones); 'gelu' and
    'gelu_erf' (MXNet's later name) are the same function. lower_bound and upper_bound are
    accepted and unused. leaky and prelu return +0 for an input of -0 (MXNet: -0).
  - activation(act_type='mish') runs the native op mish (its gradient needs the input, which the
    activation op does not keep); the result is the same.
  - instance_norm's hidden statistics are (mean, std), not MXNet's (mean, var); only the
    normalised data is returned, as in MXNet.
"""
from pymx._c import core as _core
from pymx._op import invoke, waitall
from pymx.device import (Device, cpu, cpu_pinned, current_device, gpu, gpu_memory_info,
                         num_gpus)
from pymx.numpy_extension import image, random
from pymx.numpy_extension._deconvolution import deconvolution
from pymx.numpy_extension._batch_dot import batch_dot
from pymx.numpy_extension._elementwise import BlockGrad, cast, smooth_l1, stop_gradient
from pymx.numpy_extension._gather_scatter import gather_nd, index_add, index_update, scatter_nd
from pymx.numpy_extension._normalization import l2_normalization
from pymx.numpy_extension._sequence import sequence_last, sequence_reverse
from pymx.numpy_extension._shape import arange_like, broadcast_like, reshape, slice, slice_like
from pymx.numpy_extension._softmax import (log_softmax, masked_log_softmax, masked_softmax,
                                           softmax)

__all__ = ["relu", "sigmoid", "activation", "leaky_relu", "erf", "erfinv", "gamma", "gammaln",
           "softmax",
           "log_softmax", "pick",
           "one_hot", "topk", "batch_flatten", "fully_connected", "convolution", "deconvolution",
           "pooling",
           "batch_norm", "dropout", "layer_norm", "group_norm", "instance_norm", "embedding",
           "sequence_mask",
           "set_np", "reset_np", "is_np_array", "is_np_shape", "use_np", "use_np_array",
           "use_np_shape", "image", "random", "cpu", "gpu", "cpu_pinned", "num_gpus",
           "gpu_memory_info", "current_device", "Device", "waitall", "set_deterministic",
           "is_deterministic",
           "batch_dot", "gather_nd", "scatter_nd", "index_add", "index_update", "reshape",
           "slice", "slice_like", "broadcast_like", "arange_like", "sequence_last",
           "sequence_reverse", "masked_softmax", "masked_log_softmax", "smooth_l1",
           "stop_gradient", "BlockGrad", "l2_normalization", "cast"]

# Shape queries, value checks and the CTC loss (composed of np operators)
from pymx.numpy_extension._shape_ops import (constraint_check, nonzero,  # noqa: E402
                                             reshape_like, shape_array)
from pymx.numpy_extension._ctc_loss import ctc_loss  # noqa: E402
__all__ += ["shape_array", "reshape_like", "nonzero", "constraint_check", "ctc_loss"]

# SSD detection: anchors, training targets, decoding with NMS (native operators)
from pymx.numpy_extension._detection import (multibox_detection,  # noqa: E402
                                             multibox_prior, multibox_target)
__all__ += ["multibox_prior", "multibox_target", "multibox_detection"]

# Array files (.npy, .npz, MXNet's legacy list): npx.save, npx.savez, npx.load
from pymx.numpy_extension._files import load, save, savez  # noqa: E402
__all__ += ["save", "savez", "load"]

# MXNet's fused recurrent operator over a flat parameter vector (gluon.rnn's layers underneath)
from pymx.numpy_extension._rnn import rnn  # noqa: E402
__all__ += ["rnn"]

# Regions of interest and bounding boxes: roi_pooling, roi_align, box_iou, box_nms
from pymx.numpy_extension._roi import roi_align, roi_pooling  # noqa: E402
from pymx.numpy_extension._boxes import box_iou, box_nms  # noqa: E402
__all__ += ["roi_pooling", "roi_align", "box_iou", "box_nms"]

# Python custom operators (pymx.operator): npx.custom(*inputs, op_type=name, **kwargs)
from pymx.operator import custom  # noqa: E402
__all__ += ["custom"]


# -------------------------------------------------------------------------------------------
# NumPy-semantics flags. pymx always has NumPy semantics; these exist so MXNet code runs as is.
# -------------------------------------------------------------------------------------------
def set_np(shape=True, array=True, dtype=False):
    """Accepted for MXNet compatibility: pymx always uses NumPy shape and array semantics."""
    return None


def reset_np():
    """Accepted for MXNet compatibility (see set_np)."""
    return None


def is_np_array():
    return True


def is_np_shape():
    return True


def use_np(func):
    """Decorator accepted for MXNet compatibility; returns `func` unchanged."""
    return func


use_np_array = use_np
use_np_shape = use_np


# -------------------------------------------------------------------------------------------
# Deterministic mode (MXNet's MXNET_ENFORCE_DETERMINISM; Note [Deterministic mode] in
# engine/src/determinism.h says what it guarantees, changes and costs).
# -------------------------------------------------------------------------------------------
def set_deterministic(flag):
    """With `flag` True, every operator computes bitwise reproducible results (run to run, same
    machine, seeds and calls), or raises naming itself and why. Waits for all pushed work first,
    so every operator runs in the mode that was on when it was called. Returns the previous
    state. PYMX_ENFORCE_DETERMINISM=1 starts a process with the mode on."""
    if not isinstance(flag, bool):
        raise TypeError(f"set_deterministic: flag must be True or False, got {flag!r}")
    waitall()
    return _core.set_deterministic(flag)


def is_deterministic():
    """Whether the deterministic mode is on (see set_deterministic)."""
    return _core.is_deterministic()


# -------------------------------------------------------------------------------------------
# Activations
# -------------------------------------------------------------------------------------------
def relu(data):
    """max(data, 0)."""
    return invoke("relu", [data])[0]


def sigmoid(data):
    """1 / (1 + exp(-data))."""
    return invoke("sigmoid", [data])[0]


def activation(data, act_type="relu"):
    """act_type: 'relu', 'sigmoid', 'tanh', 'softrelu' (log(1+exp(x))), 'softsign' (x/(1+|x|)),
    'log_sigmoid' (log(sigmoid(x))) or 'mish' (x*tanh(softrelu(x)))."""
    if act_type == "mish":  # its own op: its gradient reads the input (nn_activation.cc)
        return invoke("mish", [data])[0]
    return invoke("activation", [data], {"act_type": act_type})[0]


def leaky_relu(data, gamma=None, act_type="leaky", slope=0.25, lower_bound=0.125,
               upper_bound=0.334):
    """act_type 'leaky': x > 0 ? x : slope*x; 'prelu': the same with the learned slopes `gamma`
    (shape (1,), or (C,) broadcast along axis 1, the channels); 'elu': x > 0 ? x :
    slope*(exp(x)-1); 'selu': 1.0507 * (x > 0 ? x : 1.6733*(exp(x)-1)); 'gelu' (or 'gelu_erf'):
    x*Phi(x) with Phi the normal CDF; 'gelu_tanh': GELU's tanh approximation. lower_bound and
    upper_bound (MXNet's rrelu bounds) are accepted for compatibility; 'rrelu' is not
    supported."""
    if act_type == "prelu":
        if gamma is None:
            raise ValueError("leaky_relu: act_type 'prelu' needs gamma (the learned slopes)")
        return invoke("leaky_relu", [data, gamma], {"act_type": act_type})[0]
    return invoke("leaky_relu", [data], {"act_type": act_type, "slope": slope})[0]


def erf(data):
    """The error function 2/sqrt(pi) * integral of exp(-t^2) from 0 to data, elementwise
    (integers compute in float32)."""
    return invoke("erf", [data])[0]


def erfinv(data):
    """The inverse error function on [-1, 1] (+-inf at +-1, NaN outside), elementwise
    (integers compute in float32)."""
    return invoke("erfinv", [data])[0]


def gamma(data):
    """The gamma function, elementwise (integers compute in float32): +-inf at +-0, NaN at the
    negative integers. Its gradient is gamma(x) * digamma(x)."""
    return invoke("gamma", [data])[0]


def gammaln(data):
    """ln|gamma(data)|, elementwise (integers compute in float32): +inf at 0 and the negative
    integers. Its gradient is digamma(x)."""
    return invoke("gammaln", [data])[0]


# -------------------------------------------------------------------------------------------
# Indexing helpers
# -------------------------------------------------------------------------------------------
def pick(data, index, axis=-1, mode="clip", keepdims=False):
    """data[..., index[...], ...] along `axis`; mode 'clip' clamps indices, 'wrap' wraps them."""
    return invoke("pick", [data, index], {"axis": axis, "mode": mode, "keepdims": keepdims})[0]


def one_hot(data, depth, on_value=1.0, off_value=0.0, dtype="float32"):
    """Appends an axis of length `depth`: on_value at each index, off_value elsewhere."""
    return invoke("one_hot", [data], {"depth": depth, "on_value": on_value,
                                      "off_value": off_value, "dtype": dtype})[0]


def topk(data, axis=-1, k=1, ret_typ="indices", is_ascend=False, dtype="float32"):
    """The k largest (smallest with is_ascend) along `axis` (None: the flattened array).
    ret_typ: 'indices' (of `dtype`), 'value', 'both' (returns [values, indices]) or 'mask'."""
    outs = invoke("topk", [data], {"axis": axis, "k": k, "ret_typ": ret_typ,
                                   "is_ascend": is_ascend, "dtype": dtype})
    return outs if ret_typ == "both" else outs[0]


def batch_flatten(x):
    """Reshapes (N, d1, d2, ...) to (N, d1*d2*...)."""
    return invoke("batch_flatten", [x])[0]


def embedding(data, weight, input_dim=None, output_dim=None, dtype="float32", sparse_grad=False):
    """weight[data] with indices clipped to [0, input_dim): shape data.shape + (output_dim,).
    `dtype` and `sparse_grad` are accepted for MXNet compatibility (the weight's dtype is used)."""
    input_dim = weight.shape[0] if input_dim is None else input_dim
    output_dim = weight.shape[1] if output_dim is None else output_dim
    return invoke("embedding", [data, weight],
                  {"input_dim": input_dim, "output_dim": output_dim})[0]


def sequence_mask(data, sequence_length=None, use_sequence_length=False, value=0.0, axis=0):
    """Sets the steps t >= sequence_length[b] of data (time on `axis`, 0 or 1) to `value`."""
    inputs = [data]
    if use_sequence_length:
        if sequence_length is None:
            raise ValueError("sequence_mask: use_sequence_length=True needs sequence_length")
        inputs.append(sequence_length)
    return invoke("sequence_mask", inputs, {"use_sequence_length": use_sequence_length,
                                            "value": value, "axis": axis})[0]


# -------------------------------------------------------------------------------------------
# Layers
# -------------------------------------------------------------------------------------------
def _with_bias(op, data, weight, bias, no_bias):
    """Inputs and the no_bias flag: no_bias defaults to `bias is None`."""
    if no_bias is None:
        no_bias = bias is None
    if not no_bias and bias is None:
        raise ValueError(f"{op}: no_bias=False but no bias array was given")
    return ([data, weight] if no_bias else [data, weight, bias]), no_bias


def fully_connected(x, weight, bias=None, num_hidden=None, no_bias=None, flatten=True):
    """x . weight^T + bias; weight is (num_hidden, in_units). flatten=True reads x as
    (N, prod(rest)); flatten=False applies to the last axis."""
    inputs, no_bias = _with_bias("fully_connected", x, weight, bias, no_bias)
    num_hidden = weight.shape[0] if num_hidden is None else num_hidden
    return invoke("fully_connected", inputs,
                  {"num_hidden": num_hidden, "no_bias": no_bias, "flatten": flatten})[0]


_CHANNEL_LAST = ("NWC", "NHWC", "NDHWC")


def _cudnn_attrs(attrs, **values):
    """Adds MXNet's cuDNN attributes that were given (not None) to `attrs`; the operator
    validates them on every device and uses them on GPUs."""
    attrs.update((key, value) for key, value in values.items() if value is not None)


def convolution(data, weight, bias=None, kernel=None, stride=None, dilate=None, pad=None,
                num_filter=None, num_group=1, workspace=None, no_bias=None, cudnn_tune=None,
                cudnn_off=None, layout=None, act_type=None):
    """N-D convolution (1-3 spatial dims) as MXNet's Convolution. kernel and num_filter default
    to the weight's shape. On a GPU it runs through cuDNN when available, unless cudnn_off=True;
    cudnn_tune (None = 'limited_workspace', 'fastest', 'off') chooses how cuDNN's algorithms are
    picked, workspace (MB, default 1024) bounds their scratch memory under 'limited_workspace'.
    act_type='relu' (a pymx extension) returns relu(convolution) from one fused kernel."""
    inputs, no_bias = _with_bias("convolution", data, weight, bias, no_bias)
    if kernel is None:
        kernel = weight.shape[1:-1] if layout in _CHANNEL_LAST else weight.shape[2:]
    attrs = {"kernel": tuple(kernel), "num_filter": weight.shape[0] if num_filter is None
             else num_filter, "num_group": num_group, "no_bias": no_bias, "layout": layout}
    if act_type is not None:
        attrs["act_type"] = act_type
    _cudnn_attrs(attrs, cudnn_off=cudnn_off, cudnn_tune=cudnn_tune, workspace=workspace)
    for key, value in (("stride", stride), ("dilate", dilate), ("pad", pad)):
        if value is not None:
            attrs[key] = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    return invoke("convolution", inputs, attrs)[0]


def pooling(data, kernel=None, stride=None, pad=None, pool_type="max",
            pooling_convention="valid", global_pool=False, cudnn_off=None, p_value=None,
            count_include_pad=None, layout=None):
    """max/avg/sum pooling over 1-3 spatial dims (channel-first layouts). On a GPU it runs
    through cuDNN where cuDNN computes it exactly, unless cudnn_off=True."""
    attrs = {"pool_type": pool_type, "pooling_convention": pooling_convention,
             "global_pool": global_pool, "layout": layout}
    _cudnn_attrs(attrs, cudnn_off=cudnn_off)
    for key, value in (("kernel", kernel), ("stride", stride), ("pad", pad)):
        if value is not None:
            attrs[key] = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if count_include_pad is not None:
        attrs["count_include_pad"] = count_include_pad
    if kernel is None and not global_pool:
        raise ValueError("pooling: kernel is required unless global_pool=True")
    return invoke("pooling", [data], attrs)[0]


def batch_norm(x, gamma, beta, running_mean, running_var, eps=1e-3, momentum=0.9,
               fix_gamma=True, use_global_stats=False, output_mean_var=False, axis=1,
               cudnn_off=False, min_calib_range=None, max_calib_range=None):
    """Batch normalisation over `axis`. In training mode (autograd.record / train_mode) it uses
    the batch statistics and updates running_mean/running_var in place; otherwise it uses them.
    output_mean_var=True returns [out, mean, var] (the statistics used). On a GPU it runs
    through cuDNN where cuDNN computes it exactly, unless cudnn_off=True."""
    attrs = {"eps": eps, "momentum": momentum, "fix_gamma": fix_gamma,
             "use_global_stats": use_global_stats, "axis": axis}
    _cudnn_attrs(attrs, cudnn_off=cudnn_off)
    outs = invoke("batch_norm", [x, gamma, beta, running_mean, running_var], attrs)
    return outs if output_mean_var else outs[0]


def dropout(data, p=0.5, mode="training", axes=None, cudnn_off=True):
    """Zeroes each element with probability p and scales the rest by 1/(1-p), in training mode
    (or always with mode='always'); the identity otherwise. `axes` share one draw."""
    attrs = {"p": p, "mode": mode}
    if axes:
        attrs["axes"] = tuple(axes)
    return invoke("dropout", [data], attrs)[0]


def layer_norm(data, gamma, beta, axis=-1, eps=1e-5, output_mean_var=False):
    """(data - mean) / sqrt(var + eps) * gamma + beta over `axis`.
    output_mean_var=True returns [out, mean, std]."""
    outs = invoke("layer_norm", [data, gamma, beta], {"axis": axis, "eps": eps})
    return outs if output_mean_var else outs[0]


def group_norm(data, gamma, beta, num_groups=1, eps=1e-5, output_mean_var=False):
    """Group normalisation of data (N, C, spatial...): each sample's C channels form num_groups
    groups, each normalised over its channels and positions, then scaled and shifted per
    channel: (x - mean) / sqrt(var + eps) * gamma + beta, gamma and beta of shape (C,).
    output_mean_var=True returns [out, mean, std], the statistics of shape (N, num_groups)."""
    outs = invoke("group_norm", [data, gamma, beta], {"num_groups": num_groups, "eps": eps})
    return outs if output_mean_var else outs[0]


def instance_norm(data, gamma, beta, eps=1e-3):
    """Instance normalisation of data (N, C, spatial...): each channel of each sample normalised
    over its positions, then (x - mean) / sqrt(var + eps) * gamma + beta with gamma and beta of
    shape (C,)."""
    return invoke("instance_norm", [data, gamma, beta], {"eps": eps})[0]
