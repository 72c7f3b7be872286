"""Operator lists for amp with target dtype float16 (see pymx/amp/lists/__init__.py)."""

# Products: GEMM and convolution kernels, where half precision gains the most.
LP16_FUNCS = [
    "convolution",
    "deconvolution",
    "fully_connected",
    "matmul",
]

# Exact or elementwise-stable in any float dtype; batch_norm takes float16 data with float32
# parameters and accumulates its statistics in double (engine/src/ops/nn_norm.cc).
LP16_FP32_FUNCS = [
    "abs", "activation", "batch_flatten", "batch_norm", "broadcast_to", "ceil", "clip", "copy",
    "dropout", "embedding", "erf", "expand_dims", "flip", "floor", "leaky_relu", "max", "min",
    "mish", "negative", "pick", "pooling", "relu", "repeat", "reshape", "sequence_mask",
    "sigmoid", "sign", "slice", "split", "squeeze", "take", "tanh", "tile", "topk", "trunc",
]

# Precision-sensitive: exponentials and logarithms, reductions that sum many terms, softmax,
# layer_norm, group_norm and instance_norm (whose parameters must match their data's dtype) and
# functions with a large range.
FP32_FUNCS = [
    "arccos", "arcsin", "arctanh", "cosh", "erfinv", "exp", "expm1", "group_norm",
    "instance_norm", "log", "log10", "log1p", "log2", "log_softmax", "layer_norm", "mean",
    "power", "prod", "reciprocal", "sinh", "softmax", "std", "sum", "tan", "var",
]

# softrelu is log(1 + exp(x)); elu and selu have exp(x) - 1; prelu's learned slopes (gamma)
# are float32 parameters and must match its data's dtype.
CONDITIONAL_FP32_FUNCS = [
    ("activation", "act_type", ["softrelu"]),
    ("leaky_relu", "act_type", ["elu", "selu", "prelu"]),
]

# Their C++ kernels promote mixed float inputs to the widest dtype (float16 with float32 gives
# float32), so amp needs no casts for them: listed for list_widest_type_cast.
WIDEST_TYPE_CASTS = [
    "add", "arctan2", "concatenate", "divide", "equal", "floor_divide", "greater",
    "greater_equal", "hypot", "less", "less_equal", "maximum", "minimum", "mod", "multiply",
    "not_equal", "stack", "subtract", "where",
]

LOSS_OUTPUT_FUNCTIONS = []
