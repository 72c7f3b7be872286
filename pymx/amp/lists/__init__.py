"""pymx.amp's operator lists, one module per target dtype (MXNet's symbol_fp16 / symbol_bf16).

Entries are pymx's C++ operator names, as `pymx._op.invoke` receives them (pymx._c.core's
op_names() lists them all). Each module defines the same six names:

    LP16_FUNCS              run in the target dtype: float32 inputs are cast down
    LP16_FP32_FUNCS         run in whichever float dtype they receive (no casts)
    FP32_FUNCS              run in float32: target-dtype inputs are cast up
    CONDITIONAL_FP32_FUNCS  (op, attribute, values): float32 when the attribute has one of values
    WIDEST_TYPE_CASTS       ops that run in the widest float dtype of their inputs
    LOSS_OUTPUT_FUNCTIONS   MXNet's ops with a grad_scale argument; pymx has none (empty)

amp casts the inputs of the LP16, FP32 and conditional FP32 operators. Every pymx operator with
several float inputs that is in none of those lists promotes them to the widest dtype in C++,
as NumPy does, so the widest-type list needs no casts (MXNet casts them). An operator in no list
runs as without amp.
"""
from . import symbol_bf16, symbol_fp16

__all__ = ["symbol_fp16", "symbol_bf16"]
