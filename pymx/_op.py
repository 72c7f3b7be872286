"""Running operators from Python: the one entry point every op binding uses.

invoke(name, inputs, attrs=None, device=None, out=None) -> list of ndarrays
    name    the C++ operator name ("add", "add_scalar", "convolution", ...)
    inputs  pymx ndarrays, all on one device (the error names both devices otherwise)
    attrs   dict; values become text: bool -> "True"/"False", int/float -> repr,
            tuple/list -> "(1, 2)", None -> "None", dtype -> "float32", Device -> "cpu(0)"
    device  where an op without inputs runs (creation ops); default current_device()
    out     an ndarray or a list of ndarrays/None that receive the results in place
Never blocks: results may still be computing. waitall() blocks until every op has finished.
"""
from pymx._c.core import invoke, waitall

__all__ = ["invoke", "waitall"]
