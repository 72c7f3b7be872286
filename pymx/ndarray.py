"""The array class, `pymx.np.ndarray` (MXNet 2.x's mxnet.numpy.ndarray).

An ndarray owns a handle to a native array: {shape, dtype, device, memory, engine var}. Ops on it
return at once; `asnumpy()`, `item()`, printing and `wait_to_read()` wait for pending work and
raise errors from failed asynchronous ops. Arithmetic and most methods delegate to the functions
of `pymx.numpy`, so each operation is defined once.
"""
import numbers
import warnings

import numpy as _onp

from pymx._c import autograd as _c_autograd
from pymx._c import core as _core
from pymx.base import DEFAULT_DTYPE, as_dtype, bfloat16, bfloat16_to_float32, dtype_name
from pymx.device import Device, current_device

# Types arithmetic is defined with; anything else returns NotImplemented so that Python tries
# the other operand. Exact types first: isinstance against numbers.Number is slow.
_FAST_OPERANDS = frozenset([float, int, bool])
_OPERANDS = (_core.NDArrayBase, numbers.Number, _onp.ndarray, _onp.generic)


def _is_operand(value):
    return type(value) in _FAST_OPERANDS or isinstance(value, _OPERANDS)


class ndarray(_core.NDArrayBase):
    """An n-dimensional array on a device. Create arrays with pymx.np functions
    (np.array, np.zeros, ...); `shape`, `dtype` (a numpy dtype), `device`, `size` and `ndim`
    are read-only."""

    __slots__ = ()  # no __dict__; NDArrayBase provides __weakref__
    __hash__ = None  # == is elementwise

    # ---- basic properties ----------------------------------------------------------------
    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def T(self):
        return _mxnp.transpose(self)

    def transpose(self, *axes):
        """Same as pymx.np.transpose(self, axes). As in NumPy the axes may come one by one
        (a.transpose(1, 0)), as one tuple (a.transpose((1, 0))) or not at all (reversed)."""
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return _mxnp.transpose(self, tuple(axes) if axes else None)

    @property
    def ctx(self):
        warnings.warn("ndarray.ctx is deprecated; use ndarray.device", DeprecationWarning,
                      stacklevel=2)
        return self.device

    context = ctx

    # ---- moving data ---------------------------------------------------------------------
    def copyto(self, other):
        """Copies into `other`: a Device (returns a new array there) or an ndarray of the same
        shape (returns `other`). Asynchronous."""
        if isinstance(other, Device):
            return self._copy_to_device(other)
        if isinstance(other, ndarray):
            if self._same_memory(other):
                warnings.warn("You are attempting to copy an array to itself", RuntimeWarning,
                              stacklevel=2)
                return False
            self._copy_into(other)
            return other
        raise TypeError(f"copyto does not support type {type(other).__name__}; expected a "
                        f"Device or an ndarray")

    def to_device(self, device):
        """This array on `device`: itself when it is already there, else a copy."""
        if not isinstance(device, Device):
            raise TypeError(f"to_device expects a Device, got {type(device).__name__}")
        if self.device == device:
            return self
        return self._copy_to_device(device)

    def as_in_context(self, context):
        warnings.warn("ndarray.as_in_context is deprecated; use ndarray.to_device",
                      DeprecationWarning, stacklevel=2)
        return self.to_device(context)

    as_in_ctx = as_in_context

    def _host_values(self):
        """NDArrayBase._host_values, which asnumpy, item, bool(), tolist and NumPy conversion
        read through. While a hybridized block traces its forward, a value read on the host could
        steer the code or end up in the graph as a constant fixed at tracing, so reading one stops
        the trace and the block runs imperatively (Note [Hybridize] in gluon/block.py)."""
        if _c_autograd.is_tracing():
            from pymx import autograd  # imported late: autograd imports this module
            autograd._stop_tracing("asnumpy, item, bool(), tolist or a NumPy conversion, "
                                   "which read an array's values on the host: a native graph "
                                   "would replay what they gave when it was traced")
        return _core.NDArrayBase._host_values(self)

    def _values_outside_trace(self):
        """asnumpy() for reads that change nothing a traced graph computes, so a trace in
        progress goes on: printing (it shows the tracing call's values) and argument checks
        that only raise (they check the tracing call; the graph's replays are not checked)."""
        values = _core.NDArrayBase._host_values(self)
        return bfloat16_to_float32(values) if values.dtype == bfloat16 else values

    def __array__(self, dtype=None, copy=None):
        values = self.asnumpy()
        return values if dtype is None else values.astype(dtype, copy=False)

    def tolist(self):
        return self.asnumpy().tolist()

    def item(self, *args):
        """The value as a Python scalar (blocks). With no arguments the array must have one
        element."""
        if not args and self.size != 1:
            raise ValueError(f"item() needs an array with exactly one element, got shape "
                             f"{self.shape}")
        return self.asnumpy().item(*args)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.kind not in "iub":
            raise TypeError(f"only integer arrays can be used as an index, got {self.dtype}")
        return int(self.item())

    def __bool__(self):
        if self.size != 1:
            raise ValueError(f"the truth value of an array with {self.size} elements is "
                             f"ambiguous; use a.any() or a.all()")
        return bool(self.item())

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __reduce__(self):
        return (_rebuild, (self._host_values(), self.device))

    # ---- printing (MXNet's format) -------------------------------------------------------
    def __repr__(self):
        text = repr(self._values_outside_trace())
        # NumPy names float32 for a bfloat16 array's values (asnumpy widens them).
        if "dtype=" in text and self.dtype in (DEFAULT_DTYPE, bfloat16):
            text = text[:text.rindex(",")] + ")"
        if "dtype=" not in text and self.dtype not in (DEFAULT_DTYPE, _onp.bool_):
            text = f"{text[:-1]}, dtype={dtype_name(self.dtype)})"
        if self.device.device_type == "cpu":
            return text
        return f"{text[:-1]}, device={self.device})"

    def __str__(self):
        text = str(self._values_outside_trace())
        if self.device.device_type == "cpu" or self.ndim == 0:
            return text
        return f"{text} @{self.device}"

    def __format__(self, spec):
        if spec and self.size == 1:
            return format(self._values_outside_trace().item(), spec)
        return format(str(self), spec)

    # ---- shape and type ------------------------------------------------------------------
    def reshape(self, *shape, order="C"):
        """reshape(2, 3) or reshape((2, 3)); one dimension may be -1."""
        if order != "C":
            raise ValueError(f"pymx arrays are row-major; reshape supports only order='C', "
                             f"got {order!r}")
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return _mxnp.reshape(self, tuple(shape))

    def astype(self, dtype, copy=True):
        """This array converted to `dtype`; itself when the dtype matches and copy=False."""
        dtype = as_dtype(dtype)
        if not copy and dtype == self.dtype:
            return self
        return _core.invoke("cast", [self], {"dtype": dtype_name(dtype)})[0]

    # ---- indexing ------------------------------------------------------------------------
    def __getitem__(self, key):
        return _indexing.getitem(self, key)

    def __setitem__(self, key, value):
        _indexing.setitem(self, key, value)

    # ---- autograd ------------------------------------------------------------------------
    def attach_grad(self, grad_req="write", stype=None):
        """Allocates a zero gradient buffer for this array and marks it for autograd."""
        if stype not in (None, "default"):
            raise ValueError(f"pymx supports only dense gradients, got stype={stype!r}")
        grad = _mxnp.zeros_like(self)
        _autograd.mark_variables([self], [grad], grad_reqs=grad_req)

    @property
    def grad(self):
        """The gradient buffer attached by attach_grad (None when there is none)."""
        return _autograd._get_grad(self)

    def backward(self, out_grad=None, retain_graph=False, train_mode=True):
        """Back-propagates from this array into the gradients of marked variables."""
        _autograd.backward([self], None if out_grad is None else [out_grad],
                             retain_graph=retain_graph, train_mode=train_mode)

    def detach(self):
        """The same values, cut from the autograd graph."""
        return _autograd._detach(self)

    # ---- arithmetic (pymx.numpy functions) -----------------------------------------------
    # + - * / are implemented by NDArrayBase (Note [Arithmetic fast path] in pymx/_c/core.pyx),
    # which calls _arithmetic_fallback below for operands other than ndarrays and Python
    # int/float.
    def __iadd__(self, other):
        return _mxnp.add(self, other, out=self) if _is_operand(other) else NotImplemented

    def __isub__(self, other):
        return _mxnp.subtract(self, other, out=self) if _is_operand(other) else NotImplemented

    def __imul__(self, other):
        return _mxnp.multiply(self, other, out=self) if _is_operand(other) else NotImplemented

    def __itruediv__(self, other):
        return _mxnp.true_divide(self, other, out=self) if _is_operand(other) else NotImplemented

    def __floordiv__(self, other):
        return _mxnp.floor_divide(self, other) if _is_operand(other) else NotImplemented

    def __rfloordiv__(self, other):
        return _mxnp.floor_divide(other, self) if _is_operand(other) else NotImplemented

    def __ifloordiv__(self, other):
        return _mxnp.floor_divide(self, other, out=self) if _is_operand(other) else NotImplemented

    def __mod__(self, other):
        return _mxnp.mod(self, other) if _is_operand(other) else NotImplemented

    def __rmod__(self, other):
        return _mxnp.mod(other, self) if _is_operand(other) else NotImplemented

    def __imod__(self, other):
        return _mxnp.mod(self, other, out=self) if _is_operand(other) else NotImplemented

    def __pow__(self, other):
        return _mxnp.power(self, other) if _is_operand(other) else NotImplemented

    def __rpow__(self, other):
        return _mxnp.power(other, self) if _is_operand(other) else NotImplemented

    def __ipow__(self, other):
        return _mxnp.power(self, other, out=self) if _is_operand(other) else NotImplemented

    def __matmul__(self, other):
        return _mxnp.matmul(self, other) if _is_operand(other) else NotImplemented

    def __rmatmul__(self, other):
        return _mxnp.matmul(other, self) if _is_operand(other) else NotImplemented

    def __neg__(self):
        return _mxnp.negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _mxnp.abs(self)

    def __invert__(self):
        return _mxnp.logical_not(self) if self.dtype == _onp.bool_ else _mxnp.invert(self)

    def __and__(self, other):
        return _mxnp.bitwise_and(self, other) if _is_operand(other) else NotImplemented

    def __rand__(self, other):
        return _mxnp.bitwise_and(other, self) if _is_operand(other) else NotImplemented

    def __iand__(self, other):
        return _mxnp.bitwise_and(self, other, out=self) if _is_operand(other) else NotImplemented

    def __or__(self, other):
        return _mxnp.bitwise_or(self, other) if _is_operand(other) else NotImplemented

    def __ror__(self, other):
        return _mxnp.bitwise_or(other, self) if _is_operand(other) else NotImplemented

    def __ior__(self, other):
        return _mxnp.bitwise_or(self, other, out=self) if _is_operand(other) else NotImplemented

    def __xor__(self, other):
        return _mxnp.bitwise_xor(self, other) if _is_operand(other) else NotImplemented

    def __rxor__(self, other):
        return _mxnp.bitwise_xor(other, self) if _is_operand(other) else NotImplemented

    def __ixor__(self, other):
        return _mxnp.bitwise_xor(self, other, out=self) if _is_operand(other) else NotImplemented

    def __lshift__(self, other):
        return _mxnp.left_shift(self, other) if _is_operand(other) else NotImplemented

    def __rlshift__(self, other):
        return _mxnp.left_shift(other, self) if _is_operand(other) else NotImplemented

    def __ilshift__(self, other):
        return _mxnp.left_shift(self, other, out=self) if _is_operand(other) else NotImplemented

    def __rshift__(self, other):
        return _mxnp.right_shift(self, other) if _is_operand(other) else NotImplemented

    def __rrshift__(self, other):
        return _mxnp.right_shift(other, self) if _is_operand(other) else NotImplemented

    def __irshift__(self, other):
        return _mxnp.right_shift(self, other, out=self) if _is_operand(other) else NotImplemented

    # ---- comparisons ---------------------------------------------------------------------
    def __eq__(self, other):
        return _mxnp.equal(self, other) if _is_operand(other) else NotImplemented

    def __ne__(self, other):
        return _mxnp.not_equal(self, other) if _is_operand(other) else NotImplemented

    def __lt__(self, other):
        return _mxnp.less(self, other) if _is_operand(other) else NotImplemented

    def __le__(self, other):
        return _mxnp.less_equal(self, other) if _is_operand(other) else NotImplemented

    def __gt__(self, other):
        return _mxnp.greater(self, other) if _is_operand(other) else NotImplemented

    def __ge__(self, other):
        return _mxnp.greater_equal(self, other) if _is_operand(other) else NotImplemented


def _delegate(name):
    def method(self, *args, **kwargs):
        return getattr(_mxnp, name)(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Same as pymx.np.{name}(self, ...)."
    return method


# Methods that are plain calls of the pymx.np function of the same name.
for _name in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "std", "var", "any",
              "all", "cumsum", "clip", "round", "swapaxes", "ravel", "diagonal", "trace",
              "squeeze", "expand_dims", "repeat", "tile", "take", "sort", "argsort", "dot",
              "copy", "nonzero", "broadcast_to", "square", "sqrt", "exp", "log", "abs"):
    setattr(ndarray, _name, _delegate(_name))
del _name


def _flatten(self, order="C"):
    """A 1-d copy of the array (pymx.np.ravel, whose reshapes copy too)."""
    return _mxnp.ravel(self, order)


_flatten.__name__ = _flatten.__qualname__ = "flatten"
ndarray.flatten = _flatten

_core.set_ndarray_class(ndarray)


def _arithmetic_fallback(name, array, other, reverse):
    """`array <op> other` (`other <op> array` when reverse) through pymx.np.<name>."""
    if not _is_operand(other):
        return NotImplemented
    function = getattr(_mxnp, name)
    return function(other, array) if reverse else function(array, other)


_core.set_arithmetic_fallback(_arithmetic_fallback)


def _rebuild(values, device):
    """Unpickles an ndarray (its values travel as a NumPy array)."""
    return from_numpy(values, device=device)


def empty(shape, dtype=None, device=None):
    """An array with uninitialised values (np.empty); the building block of creation functions."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    return _core.empty(shape, DEFAULT_DTYPE if dtype is None else dtype,
                       current_device() if device is None else device)


def from_numpy(values, device=None, dtype=None):
    """A new array holding a copy of `values` (a NumPy array or anything np.asarray takes),
    keeping its dtype unless `dtype` is given (bfloat16 rounds numbers to nearest even; a NumPy
    array of `bfloat16` bits keeps them). Blocks until the data is copied."""
    dtype = None if dtype is None else as_dtype(dtype)
    converts = dtype is not None and dtype != bfloat16  # _sync_copy_from rounds into bfloat16
    if converts and isinstance(values, _onp.ndarray) and values.dtype == bfloat16:
        values = bfloat16_to_float32(values)  # bits, not numbers: widen them first
    values = _onp.asarray(values, dtype=dtype if converts else None)
    out = empty(values.shape, values.dtype if dtype is None else dtype, device)
    out._sync_copy_from(values)
    return out


def from_dlpack(x, device=None, copy=None):
    """An array sharing the memory of a DLPack producer: any object with __dlpack__ (NumPy,
    PyTorch, CuPy, JAX arrays) or a DLPack capsule. A pymx array is returned as is.

    Zero-copy for contiguous, writable tensors on the CPU or a CUDA device: writes through either
    library show in the other once each side waits for the other's (pymx: wait_to_read; on a
    GPU, torch: torch.cuda.synchronize()), and the producer's memory lives until the pymx array
    dies. A single copy is made for strided tensors (gathered where they lie, on the GPU for a
    CUDA tensor), misaligned host tensors, read-only tensors, and when `device` differs from the
    producer's (any cpu(i) shares host memory). copy=True always copies; copy=False raises
    BufferError instead of copying. See Note [Zero-copy DLPack import] in pymx/_c/core.pyx.

    CUDA producers are asked for their data on the legacy default stream (stream=1), which pymx
    waits for before its own streams use the memory.
    """
    if isinstance(x, ndarray):
        moved = device is not None and device != x.device
        if moved and copy is False:
            raise BufferError(f"from_dlpack(copy=False): the array is on {x.device}, not {device}")
        return x._copy_to_device(device if moved else x.device) if copy or moved else x
    capsule = x if type(x).__name__ == "PyCapsule" else _dlpack_capsule(x)
    return _core.from_dlpack_capsule(capsule, device, copy)


def _dlpack_capsule(x):
    """x.__dlpack__() with the arguments of the DLPack protocol (versioned when offered)."""
    dl_device = (1, 0)
    if hasattr(x, "__dlpack_device__"):
        dl_device = tuple(int(v) for v in x.__dlpack_device__())
        _core.dlpack_device_of(*dl_device)  # BufferError before the export for unusable devices
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack expects an object with __dlpack__ (a NumPy, PyTorch, CuPy "
                        f"or JAX array) or a DLPack capsule, got {type(x).__name__}")
    stream = 1 if dl_device[0] == 2 else None  # CUDA: the legacy default stream
    try:
        return x.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:  # a producer older than DLPack 1.0: no max_version
        return x.__dlpack__() if stream is None else x.__dlpack__(stream=stream)


# Imported last: these modules import this one, so the class must exist first. pymx/__init__
# imports this module before them, so the order is always the same.
from pymx import numpy as _mxnp  # noqa: E402
from pymx import autograd as _autograd  # noqa: E402
from pymx.numpy import _indexing  # noqa: E402
