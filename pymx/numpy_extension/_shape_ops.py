"""npx.shape_array, npx.reshape_like, npx.nonzero and npx.constraint_check.

shape_array and reshape_like compute on the host from shapes, which a hybridized graph fixes
per input signature, so they trace and run on every device: shape_array creates its result on
the data's device, reshape_like is np.reshape (differentiable in lhs; rhs gives only its shape).
nonzero and constraint_check depend on the values: they read them back (np.argwhere, np.all
then item()), and when reached inside a hybridized block they stop its trace, so that block
runs imperatively for that input signature (with a warning, see Note [Hybridize] in
pymx/gluon/block.py) instead of replaying a result fixed at tracing.

Deliberate differences from MXNet 2.x:
  - nonzero and constraint_check stop hybridization (MXNet runs them inside its graphs).
  - constraint_check raises its ValueError at the call, not later at a wait.
"""
import numpy as _onp

from pymx import autograd as _autograd
from pymx import numpy as _np
from pymx._c import autograd as _c_autograd

__all__ = ["shape_array", "reshape_like", "nonzero", "constraint_check"]


def _check_array(op, name, value):
    if not isinstance(value, _np.ndarray):
        raise TypeError(f"{op}: {name} must be a pymx ndarray, got {type(value).__name__}")


def _reads_values(op):
    """Values are about to be read on the host: a trace in progress cannot capture that."""
    if _c_autograd.is_tracing():
        _autograd._stop_tracing(f"npx.{op} (its result depends on the values of its input)")


def shape_array(data):
    """data's shape as a 1-D int64 array on data's device."""
    _check_array("shape_array", "data", data)
    return _np.array(data.shape, dtype="int64", device=data.device)


def _bound(op, name, value, default, ndim, shape):
    if value is None:
        return default
    if not isinstance(value, (int, _onp.integer)) or isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be an int or None, got {value!r}")
    value = int(value)
    resolved = value + ndim if value < 0 else value
    if not 0 <= resolved <= ndim:
        raise ValueError(f"{op}: {name}={value} is out of range for shape {shape}")
    return resolved


def reshape_like(lhs, rhs, lhs_begin=None, lhs_end=None, rhs_begin=None, rhs_end=None):
    """lhs reshaped so that its axes [lhs_begin, lhs_end) take the sizes of rhs's axes
    [rhs_begin, rhs_end); the other axes of lhs keep theirs. Bounds default to the whole shape
    and may be negative (counted from the end). The sizes replaced must hold as many elements
    as the sizes put in."""
    _check_array("reshape_like", "lhs", lhs)
    _check_array("reshape_like", "rhs", rhs)
    lshape, rshape = tuple(lhs.shape), tuple(rhs.shape)
    lb = _bound("reshape_like", "lhs_begin", lhs_begin, 0, lhs.ndim, lshape)
    le = _bound("reshape_like", "lhs_end", lhs_end, lhs.ndim, lhs.ndim, lshape)
    rb = _bound("reshape_like", "rhs_begin", rhs_begin, 0, rhs.ndim, rshape)
    re = _bound("reshape_like", "rhs_end", rhs_end, rhs.ndim, rhs.ndim, rshape)
    if lb > le or rb > re:
        raise ValueError(f"reshape_like: the ranges lhs [{lb}, {le}) of {lshape} and rhs "
                         f"[{rb}, {re}) of {rshape} must not end before they begin")
    shape = lshape[:lb] + rshape[rb:re] + lshape[le:]
    replaced = int(_onp.prod(lshape[lb:le], dtype=_onp.int64))
    inserted = int(_onp.prod(rshape[rb:re], dtype=_onp.int64))
    if replaced != inserted:
        raise ValueError(f"reshape_like: cannot reshape lhs {lshape} into {shape}: its axes "
                         f"[{lb}, {le}) hold {replaced} elements, rhs's axes [{rb}, {re}) of "
                         f"{rshape} hold {inserted}")
    return _np.reshape(lhs, shape)


def nonzero(x):
    """The indices of x's non-zero elements: an int64 array of shape (count, x.ndim), one row
    per element in row-major order (np.argwhere)."""
    _check_array("nonzero", "x", x)
    _reads_values("nonzero")
    return _np.argwhere(x)


def constraint_check(input, msg="Constraint violated."):  # noqa: A002 (MXNet's name)
    """Checks that every element of the boolean array `input` is True: returns a 0-d boolean
    array True on input's device, or raises ValueError(msg)."""
    _check_array("constraint_check", "input", input)
    if input.dtype != _onp.bool_:
        raise TypeError(f"constraint_check: input must be a boolean array, got dtype "
                        f"{input.dtype}")
    if not isinstance(msg, str):
        raise TypeError(f"constraint_check: msg must be a str, got {msg!r}")
    _reads_values("constraint_check")
    satisfied = _np.all(input)
    if not satisfied.item():
        raise ValueError(msg)
    return satisfied
