"""npx.deconvolution: MXNet's Deconvolution (transposed convolution), one call to the C++
`deconvolution` operator (engine/src/ops/nn_deconvolution.cc documents the attributes and the
gradient)."""
from pymx._op import invoke

__all__ = ["deconvolution"]


def _spatial(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def deconvolution(data, weight, bias=None, kernel=None, stride=None, dilate=None, pad=None,
                  adj=None, target_shape=None, num_filter=None, num_group=1, workspace=None,
                  no_bias=None, cudnn_tune=None, cudnn_off=None, layout=None):
    """N-D transposed convolution (1-3 spatial dims, channel-first) as MXNet's Deconvolution.

    weight is (C_in, num_filter/num_group, kernel...); the output extent per spatial dim is
    (in-1)*stride - 2*pad + dilate*(kernel-1) + 1 + adj (adj < stride), or target_shape when
    given, which then sets pad and adj. kernel and num_filter default to the weight's shape;
    no_bias defaults to `bias is None`. workspace/cudnn_tune/cudnn_off are accepted and ignored.
    """
    if no_bias is None:
        no_bias = bias is None
    if not no_bias and bias is None:
        raise ValueError("deconvolution: no_bias=False but no bias array was given")
    inputs = [data, weight] if no_bias else [data, weight, bias]
    if kernel is None:
        kernel = weight.shape[2:]
    if num_filter is None:
        num_filter = weight.shape[1] * num_group
    attrs = {"kernel": _spatial(kernel), "num_filter": num_filter, "num_group": num_group,
             "no_bias": no_bias, "layout": layout}
    for key, value in (("stride", stride), ("dilate", dilate), ("pad", pad), ("adj", adj),
                       ("target_shape", target_shape)):
        if value is not None:
            attrs[key] = _spatial(value)
    return invoke("deconvolution", inputs, attrs)[0]
