"""Data-parallel helpers (split a batch across devices, clip gradients by their global norm) and
split_rnn_params."""
import warnings

import numpy as onp

from .. import autograd
from .. import numpy as np
from ..ndarray import ndarray

__all__ = ['split_data', 'split_and_load', 'clip_global_norm', 'split_rnn_params']


def split_data(data, num_slice, batch_axis=0, even_split=True):
    """Splits `data` into `num_slice` slices along `batch_axis`; always returns a list.

    With even_split=False the first `size % num_slice` slices get one extra element (and slices
    may be empty when size < num_slice).
    """
    if num_slice < 1:
        raise ValueError(f"num_slice must be >= 1, got {num_slice}")
    if not -data.ndim <= batch_axis < data.ndim:
        raise onp.exceptions.AxisError(f"batch_axis {batch_axis} is out of bounds for data of "
                                       f"shape {data.shape}")
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ValueError(f"data with shape {data.shape} cannot be evenly split into {num_slice} "
                         f"slices along axis {batch_axis}. Use a batch size that's multiple of "
                         f"{num_slice} or set even_split=False to allow uneven partitioning of "
                         f"data.")
    if num_slice == 1:
        return [data]
    step, extra = divmod(size, num_slice)
    # Along the first axis, outside autograd, a slice is a view of data's memory: no copy, and a
    # pinned batch stays pinned for its copy to a GPU.
    as_view = isinstance(data, ndarray) and batch_axis % data.ndim == 0 and \
        not autograd.is_recording()
    slices, begin = [], 0
    lead = (slice(None),) * (batch_axis % data.ndim)
    for i in range(num_slice):
        end = begin + step + (1 if i < extra else 0)
        slices.append(data._slice_view(begin, end) if as_view else data[lead + (slice(begin, end),)])
        begin = end
    return slices


def split_and_load(data, device_list, batch_axis=0, even_split=True):
    """Splits `data` along `batch_axis` and copies slice i to device_list[i] (asynchronously).

    A numpy array is first made a pymx array on device_list[0]. With one device the whole batch
    is moved there, with no divisibility check.
    """
    if not isinstance(data, ndarray):
        data = np.array(data, device=device_list[0])
    if len(device_list) == 1:
        return [data.to_device(device_list[0])]
    slices = split_data(data, len(device_list), batch_axis, even_split)
    return [s.to_device(device) for s, device in zip(slices, device_list)]


def clip_global_norm(arrays, max_norm, check_isfinite=True):
    """Scales `arrays` in place so that their joint L2 norm is at most `max_norm`.

    Returns the norm before clipping: a float when check_isfinite (which syncs, and warns on
    nan/inf), else a 0-d array on arrays[0]'s device (no sync).
    """
    if not arrays:
        raise ValueError("clip_global_norm: arrays must not be empty")
    device = arrays[0].device
    total = None
    for arr in arrays:
        flat = arr.reshape(-1)
        squared = np.sum(flat * flat).to_device(device)
        total = squared if total is None else total + squared
    total_norm = np.sqrt(total)
    if check_isfinite:
        norm_value = float(total_norm.item())
        if norm_value != norm_value or norm_value in (float('inf'), float('-inf')):
            warnings.warn(UserWarning('nan or inf is detected. Clipping results will be '
                                      'undefined.'), stacklevel=2)
    scale = np.minimum(max_norm / (total_norm + 1e-8), 1.0)
    for arr in arrays:
        arr *= scale.to_device(arr.device).astype(arr.dtype)
    return norm_value if check_isfinite else total_norm


def split_rnn_params(param, mode, num_layers, input_size, hidden_size, bidirectional=False,
                     projection_size=None):
    """{name: array} of the weights and biases packed in MXNet 2.x's flat recurrent parameter
    vector `param` (names as the gluon.rnn layers give their parameters: `l0_i2h_weight`, ...);
    each is a reshaped slice of `param`. mode: 'rnn_relu', 'rnn_tanh', 'lstm' or 'gru'."""
    from .rnn.rnn_layer import flat_parameter_layout, split_flat_parameters
    return split_flat_parameters(param.reshape(-1), flat_parameter_layout(
        mode, num_layers, input_size, hidden_size, bidirectional, projection_size))
