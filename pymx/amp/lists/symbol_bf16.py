"""Operator lists for amp with target dtype bfloat16 (see pymx/amp/lists/__init__.py).

bfloat16 keeps float32's exponent range, so its lists differ from float16's by precision
alone: they are the same lists; this module exists so that either can change on its own, as
in MXNet.
"""
from .symbol_fp16 import (CONDITIONAL_FP32_FUNCS, FP32_FUNCS, LOSS_OUTPUT_FUNCTIONS,
                          LP16_FP32_FUNCS, LP16_FUNCS, WIDEST_TYPE_CASTS)

__all__ = ["LP16_FUNCS", "LP16_FP32_FUNCS", "FP32_FUNCS", "CONDITIONAL_FP32_FUNCS",
           "WIDEST_TYPE_CASTS", "LOSS_OUTPUT_FUNCTIONS"]
