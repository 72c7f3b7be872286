"""Operators written in Python, as in ``mxnet.operator``: CustomOp, CustomOpProp, register.

A custom operator is a pair of classes. The *property* class, registered under a name, describes
the operator: its argument, output and auxiliary-state names, output shapes and dtypes, which
forward arrays its backward needs, and creates the *operator* that computes::

    class Sqr(operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0] * in_data[0])

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], 2 * in_data[0] * out_grad[0])

    @operator.register("sqr")
    class SqrProp(operator.CustomOpProp):
        def create_operator(self, device, in_shapes, in_dtypes):
            return Sqr()

    y = npx.custom(x, op_type="sqr")

``npx.custom(*inputs, op_type=name, **kwargs)`` creates the property with ``kwargs`` converted to
strings (as MXNet passes them), checks the inputs (the arguments, then the auxiliary states),
allocates the outputs from ``infer_shape``/``infer_type`` on the inputs' device, and runs the
operator's ``forward`` there, with autograd recording paused, ``is_train`` from
``autograd.is_training()`` and ``req`` 'write' for every output. Under ``autograd.record()`` the
call is one node of the tape (an ``autograd.Function`` node): ``backward()`` calls the
operator's ``backward`` with one gradient per output (zeros for an output no gradient reached)
and zero-filled ``in_grad`` arrays, which the tape then writes or adds into the inputs'
gradients according to their grad_req. Auxiliary states are changed in place and get no
gradient. An exception raised by the user's code surfaces as ``CustomOpError`` naming the
op_type and the method, chained to the original.

Differences from MXNet:
  - ``backward``'s ``req`` is 'write' for every floating-point argument and 'null' for an
    integer or boolean one (it gets no gradient). A parameter with grad_req='add' still
    accumulates, as in MXNet: the tape adds the gradient the operator wrote into its buffer.
  - ``create_operator`` receives the device as a ``pymx.Device``, and the dtypes as NumPy dtype
    types (``numpy.float32``), as ``infer_type`` does (MXNet passes its integer dtype codes).
  - Arrays that ``declare_backward_dependency`` leaves out are not kept for backward; they reach
    ``backward`` as None (MXNet passes empty arrays).
  - Inside a hybridized HybridBlock the custom operator cannot be part of the native graph (it
    runs Python): the first call of a block that reaches ``npx.custom`` stops tracing and the
    block runs imperatively for that input signature from then on, with a warning (its children
    that do not call custom operators stay hybridized). MXNet keeps the Custom node in the
    cached graph and calls back into Python from there. The results and gradients are the same.
  - Storage types (``infer_storage_type*``) are not supported: pymx arrays are dense.
"""
import numpy as _onp

from pymx import autograd
from pymx import numpy as _np
from pymx._c import autograd as _c_autograd
from pymx._c.core import NDArrayBase as _NDArrayBase

__all__ = ["CustomOp", "CustomOpProp", "CustomOpError", "register", "get_all_registered",
           "custom"]


class CustomOpError(RuntimeError):
    """An exception raised by the Python code of a custom operator (its ``__cause__``)."""


class CustomOp:
    """Base class of the operators that compute a custom operator."""

    def forward(self, is_train, req, in_data, out_data, aux):
        """Computes ``out_data`` (preallocated) from ``in_data``; override it.

        is_train : bool
            Whether autograd is in training mode.
        req : list of str
            How to assign each output: 'null', 'write', 'inplace' or 'add' (see ``assign``).
        in_data, out_data, aux : list of ndarray
            The arguments, the outputs and the auxiliary states (which forward may update).
        """
        raise NotImplementedError(f"{type(self).__name__} must define forward")

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        """Computes ``in_grad`` (preallocated) from ``out_grad``; override it.

        req : list of str
            How to assign each input gradient: 'null', 'write', 'inplace' or 'add'.
        out_grad, in_data, out_data, in_grad, aux : list of ndarray
            Gradients of the outputs, the forward's arguments and outputs (None for those
            ``declare_backward_dependency`` left out), the input gradients, the aux states.
        """
        raise NotImplementedError(f"{type(self).__name__} must define backward")

    def assign(self, dst, req, src):
        """Stores ``src`` into ``dst`` as ``req`` says: nothing for 'null', overwrite for
        'write' and 'inplace', add for 'add'."""
        if req == "null":
            return
        if req in ("write", "inplace"):
            dst[:] = src
        elif req == "add":
            dst[:] += src
        else:
            raise ValueError(f"req must be one of 'null', 'write', 'inplace' or 'add', got "
                             f"{req!r}")


class CustomOpProp:
    """Base class of the properties that describe a custom operator.

    need_top_grad : bool
        Whether backward reads the gradients of the outputs (False for a loss-style operator,
        whose backward ignores them); used by the default ``declare_backward_dependency``.
    """

    def __init__(self, need_top_grad=True):
        self.need_top_grad_ = need_top_grad

    def infer_shape(self, in_shape):
        """(argument shapes, output shapes[, aux shapes]) from the argument shapes; by default
        every output and no aux state, each shaped like the first argument."""
        return in_shape, (in_shape[0],) * len(self.list_outputs()), ()

    def infer_type(self, in_type):
        """(argument dtypes, output dtypes[, aux dtypes]) from the argument dtypes (NumPy dtype
        types); by default all like the first argument."""
        return in_type, [in_type[0]] * len(self.list_outputs()), \
            [in_type[0]] * len(self.list_auxiliary_states())

    def list_outputs(self):
        """Names of the outputs."""
        return ["output"]

    def list_arguments(self):
        """Names of the arguments (the inputs before the auxiliary states)."""
        return ["data"]

    def list_auxiliary_states(self):
        """Names of the auxiliary states (the inputs after the arguments; no gradient)."""
        return []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        """The ids, among those given, of the arrays backward reads; the others are not kept."""
        deps = []
        if self.need_top_grad_:
            deps.extend(out_grad)
        deps.extend(in_data)
        deps.extend(out_data)
        return deps

    def create_operator(self, ctx, in_shapes, in_dtypes):
        """The CustomOp that computes, for inputs on device ``ctx`` with the given shapes
        (lists of ints) and dtypes (NumPy dtype types), arguments then aux states."""
        return CustomOp()


_registry = {}


def register(reg_name):
    """Class decorator: registers a CustomOpProp subclass as the custom operator ``reg_name``
    (a later registration under the same name replaces the earlier one, as in MXNet)."""
    if not isinstance(reg_name, str) or not reg_name:
        raise TypeError(f"register needs a non-empty operator name string, got {reg_name!r}")

    def do_register(prop_cls):
        if not (isinstance(prop_cls, type) and issubclass(prop_cls, CustomOpProp)):
            raise TypeError(f"register({reg_name!r}) decorates a subclass of "
                            f"operator.CustomOpProp, got {prop_cls!r}")
        _registry[reg_name] = prop_cls
        return prop_cls
    return do_register


def get_all_registered():
    """The names of the registered custom operators, sorted."""
    return sorted(_registry)


register("custom_op")(CustomOpProp)


def _call_user(op_type, owner, method, *args):
    """Calls ``owner.method(*args)``; an exception becomes a CustomOpError naming the op."""
    try:
        return getattr(owner, method)(*args)
    except Exception as error:
        raise CustomOpError(f"custom operator {op_type!r}: {type(owner).__name__}.{method} raised "
                            f"{type(error).__name__}: {error}") from error


def _split_inferred(op_type, method, result, counts):
    """The (arguments, outputs, aux) lists of an infer_shape/infer_type result (aux optional),
    each checked to have as many entries as the operator declares."""
    if not isinstance(result, (list, tuple)) or len(result) not in (2, 3):
        raise ValueError(f"custom operator {op_type!r}: {method} must return 2 or 3 lists "
                         f"(arguments, outputs[, aux states]), got {result!r}")
    parts = list(result) if len(result) == 3 else list(result) + [[]]
    for part, count, what in zip(parts, counts, ("argument", "output", "aux state")):
        if len(part) != count:
            raise ValueError(f"custom operator {op_type!r}: {method} returned {len(part)} "
                             f"{what} entries, expected {count}")
    return [list(part) for part in parts]


def _differentiable(x):
    return _onp.issubdtype(x.dtype, _onp.floating)


def _new_prop(op_type, kwargs):
    prop_cls = _registry[op_type]
    try:
        return prop_cls(**{key: str(value) for key, value in kwargs.items()})
    except Exception as error:
        raise CustomOpError(f"custom operator {op_type!r}: {prop_cls.__name__}(**{kwargs}) "
                            f"raised {type(error).__name__}: {error}") from error


def _input_device(op_type, data):
    """The one device of the inputs, after checking their type."""
    for i, x in enumerate(data):
        if not isinstance(x, _NDArrayBase):
            raise TypeError(f"custom operator {op_type!r}: input {i} must be a pymx ndarray, "
                            f"got {type(x).__name__}")
    if not data:
        raise ValueError(f"custom operator {op_type!r} has no inputs; pymx runs a custom "
                         f"operator on its inputs' device, so it needs at least one")
    devices = {x.device for x in data}
    if len(devices) > 1:
        raise ValueError(f"custom operator {op_type!r}: all inputs must be on one device, got "
                         f"{sorted(str(d) for d in devices)}")
    return data[0].device


def _output_shapes_and_dtypes(op_type, prop, names, args, aux):
    """The outputs' shapes and dtypes from infer_shape/infer_type, after checking that
    infer_shape agrees with the shapes of the inputs."""
    counts = [len(n) for n in names]
    in_shapes, out_shapes, aux_shapes = _split_inferred(
        op_type, "infer_shape",
        _call_user(op_type, prop, "infer_shape", [list(x.shape) for x in args]), counts)
    for what, inputs, shapes, input_names in (("argument", args, in_shapes, names[0]),
                                              ("aux state", aux, aux_shapes, names[2])):
        for name, x, shape in zip(input_names, inputs, shapes):
            if tuple(shape) != x.shape:
                raise ValueError(f"custom operator {op_type!r}: infer_shape gives {what} "
                                 f"{name!r} the shape {tuple(shape)}, but it has shape {x.shape}")
    _, out_dtypes, _ = _split_inferred(
        op_type, "infer_type",
        _call_user(op_type, prop, "infer_type", [x.dtype.type for x in args]), counts)
    return [tuple(shape) for shape in out_shapes], out_dtypes


def custom(*data, op_type=None, **kwargs):
    """Runs the custom operator registered as ``op_type`` on ``data`` (its arguments, then its
    auxiliary states); ``kwargs`` reach the property's constructor as strings. Returns the
    output, or a list of outputs when the operator has several. See the module docstring."""
    if op_type not in _registry:
        raise ValueError(f"npx.custom: no custom operator is registered as {op_type!r}; "
                         f"registered: {get_all_registered()}")
    prop = _new_prop(op_type, kwargs)
    names = [_call_user(op_type, prop, method)
             for method in ("list_arguments", "list_outputs", "list_auxiliary_states")]
    num_args, num_aux = len(names[0]), len(names[2])
    if len(data) != num_args + num_aux:
        raise ValueError(f"custom operator {op_type!r} takes {num_args} arguments "
                         f"{list(names[0])} and {num_aux} auxiliary states {list(names[2])}, "
                         f"got {len(data)} inputs")
    device = _input_device(op_type, data)
    if _c_autograd.is_tracing():
        # A native graph cannot call back into Python: the traced block runs imperatively.
        autograd._stop_tracing(f"npx.custom(op_type={op_type!r}), which runs Python code "
                                   f"that a native graph cannot replay")
    args, aux = list(data[:num_args]), list(data[num_args:])
    out_shapes, out_dtypes = _output_shapes_and_dtypes(op_type, prop, names, args, aux)
    operator = _call_user(op_type, prop, "create_operator", device,
                          [list(x.shape) for x in data], [x.dtype.type for x in data])
    with device:
        outputs = [_np.zeros(shape, dtype=dtype) for shape, dtype in zip(out_shapes, out_dtypes)]
    was_recording = autograd.set_recording(False)
    try:
        with device:
            _call_user(op_type, operator, "forward", autograd.is_training(),
                       ["write"] * len(outputs), list(args), list(outputs), list(aux))
    finally:
        autograd.set_recording(was_recording)

    if was_recording:
        backward = _Backward(op_type, prop, operator, args, outputs, aux, device)
        _, outputs = _c_autograd.record_function(args, outputs, backward)
    return outputs[0] if len(outputs) == 1 else outputs


class _Backward:
    """The tape's gradient callback of one custom operator call: runs the operator's backward
    on the forward arrays it declared as dependencies."""

    def __init__(self, op_type, prop, operator, args, outputs, aux, device):
        num_out, num_in = len(outputs), len(args)
        out_grad_ids = list(range(num_out))
        in_data_ids = list(range(num_out, num_out + num_in))
        out_data_ids = list(range(num_out + num_in, 2 * num_out + num_in))
        deps = set(_call_user(op_type, prop, "declare_backward_dependency",
                              out_grad_ids, in_data_ids, out_data_ids))
        self.op_type = op_type
        self.operator = operator
        self.in_data = [x if i in deps else None for i, x in zip(in_data_ids, args)]
        self.out_data = [y if i in deps else None for i, y in zip(out_data_ids, outputs)]
        self.input_likes = [(x.shape, x.dtype, _differentiable(x)) for x in args]
        self.aux = aux
        self.device = device

    def __call__(self, out_grads):
        with self.device:
            in_grads = [_np.zeros(shape, dtype=dtype) for shape, dtype, _ in self.input_likes]
            reqs = ["write" if differentiable else "null"
                    for _, _, differentiable in self.input_likes]
            _call_user(self.op_type, self.operator, "backward", reqs, list(out_grads),
                       list(self.in_data), list(self.out_data), list(in_grads), list(self.aux))
        return [g if req != "null" else None for g, req in zip(in_grads, reqs)]
