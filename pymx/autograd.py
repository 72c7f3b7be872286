"""Automatic differentiation, as in ``mxnet.autograd``.

Ops run inside ``with autograd.record():`` are recorded on a native tape when one of their inputs
is a marked variable (``x.attach_grad()``) or a recorded result. ``backward()`` pushes the
gradient ops to the engine, so it returns before they finish, like any other op. The recording
and training flags are per thread.

Example::

    x = np.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = (x * x).sum()
    y.backward()
    x.grad  # [2., 4.]

As in MXNet, writing into an array inside ``record()`` (``+=``, ``x[i] = ...``, ``out=``) is
recorded when the array is not part of the recorded graph yet (a fresh buffer, or one whose
graph backward freed), and raises MXNet's error when the graph holds it, since the gradients of
the ops that read it would see the new values. An array whose graph backward freed counts as a
constant in later recordings.

``Function`` defines an operation by its forward and backward written with pymx arrays (see its
docstring). Differences from MXNet's ``Function``: ``backward`` may return None for an input that
gets no gradient; a Function cannot run inside a hybridized block (it raises instead of being
traced as its forward ops, whose gradient would not be the user's backward); the outputs returned
are new array objects over the forward's results (MXNet records on the forward's own objects).
"""
import threading

from pymx._c import autograd as _c
from pymx._c.core import NDArrayBase as _NDArrayBase

__all__ = ["record", "pause", "train_mode", "predict_mode", "is_recording", "is_training",
           "set_recording", "set_training", "mark_variables", "backward", "grad", "Function"]

# MXNet's OpReqType values.
_GRAD_REQS = {"null": 0, "write": 1, "add": 3}


def set_recording(is_recording):
    """Sets whether ops are recorded for gradients on this thread; returns the previous value."""
    return _c.set_recording(bool(is_recording))


def set_training(train_mode):
    """Sets training mode (dropout active, batch norm using batch statistics) on this thread;
    returns the previous value."""
    return _c.set_training(bool(train_mode))


def is_recording():
    """Whether ops are being recorded on this thread."""
    return _c.is_recording()


def is_training():
    """Whether this thread is in training mode."""
    return _c.is_training()


class _RecordingStateScope:
    """Sets the recording and/or training flag for a ``with`` block (None: leave it) and
    restores the previous values on exit."""

    def __init__(self, is_record, train_mode):
        self._enter_is_record = is_record
        self._enter_train_mode = train_mode
        self._prev_is_record = None
        self._prev_train_mode = None

    def __enter__(self):
        if self._enter_is_record is not None:
            self._prev_is_record = set_recording(self._enter_is_record)
        if self._enter_train_mode is not None:
            self._prev_train_mode = set_training(self._enter_train_mode)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if self._enter_is_record is not None and self._prev_is_record != self._enter_is_record:
            set_recording(self._prev_is_record)
        if self._enter_train_mode is not None and self._prev_train_mode != self._enter_train_mode:
            set_training(self._prev_train_mode)


def record(train_mode=True):
    """Scope in which ops are recorded for ``backward()``; training mode by default."""
    return _RecordingStateScope(True, train_mode)


def pause(train_mode=False):
    """Scope in which recording is off (e.g. metric updates inside ``record()``)."""
    return _RecordingStateScope(False, train_mode)


def train_mode():
    """Scope in training mode without changing recording."""
    return _RecordingStateScope(None, True)


def predict_mode():
    """Scope in prediction mode without changing recording."""
    return _RecordingStateScope(None, False)


def _as_list(arrays):
    return list(arrays) if isinstance(arrays, (list, tuple)) else [arrays]


def _grad_req_value(req):
    try:
        return _GRAD_REQS[req]
    except (KeyError, TypeError):
        raise ValueError(f"grad_req must be one of 'write', 'add' or 'null', got {req!r}") from None


def mark_variables(variables, gradients, grad_reqs="write"):
    """Marks arrays as variables: ``backward()`` writes (or adds) their gradients into
    ``gradients``. ``grad_reqs`` is one of 'write', 'add', 'null', or a list of them."""
    variables = _as_list(variables)
    gradients = _as_list(gradients)
    if isinstance(grad_reqs, str):
        grad_reqs = [grad_reqs] * len(variables)
    _c.mark_variables(variables, gradients, [_grad_req_value(r) for r in grad_reqs])


def _head_grads(heads, head_grads):
    if head_grads is None:
        return None
    head_grads = _as_list(head_grads)
    if len(head_grads) != len(heads):
        raise ValueError(f"got {len(heads)} heads but {len(head_grads)} head gradients")
    return head_grads


def backward(heads, head_grads=None, retain_graph=False, train_mode=True):
    """Computes the gradients of ``heads`` with respect to the marked variables and stores
    them in the variables' gradient buffers. ``head_grads`` defaults to ones. The recorded graph
    is freed unless ``retain_graph``."""
    heads = _as_list(heads)
    _c.backward(heads, _head_grads(heads, head_grads), retain_graph, train_mode)


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False,
         train_mode=True):
    """Returns the gradients of ``heads`` with respect to ``variables`` (marked variables)
    without touching their gradient buffers: a list, or one array when ``variables`` is one
    array. With ``create_graph`` the gradient computation is recorded, so the results can be
    differentiated again; ``retain_graph`` defaults to ``create_graph``. A variable the heads do
    not depend on gets zeros (MXNet raises "... unreachable from the outputs")."""
    single = not isinstance(variables, (list, tuple))
    heads = _as_list(heads)
    if retain_graph is None:
        retain_graph = create_graph
    grads = _c.grad(heads, _as_list(variables), _head_grads(heads, head_grads), retain_graph,
                    train_mode, create_graph)
    return grads[0] if single else grads


class Function:
    """An operation with a hand-written gradient. Subclass it, define ``forward(self, *inputs)``
    and ``backward(self, *output_grads)`` with pymx arrays, and call an instance on arrays::

        class Sigmoid(autograd.Function):
            def forward(self, x):
                y = 1 / (1 + np.exp(-x))
                self.save_for_backward(y)
                return y

            def backward(self, dy):
                y, = self.saved_tensors
                return dy * y * (1 - y)

        with autograd.record():
            y = Sigmoid()(x)

    ``forward`` runs with recording paused and returns one array or a tuple/list of arrays.
    Under ``record()`` the call is one node of the tape: ``backward`` receives one gradient per
    output (zeros for an output no gradient reached) and returns one gradient per input, shaped
    like that input (a single array for a single input; None for no gradient). It runs on the
    thread that calls ``backward()``/``grad()``, with recording on only for ``create_graph``;
    an exception it raises propagates from that call, and the graph stays usable. Each instance
    may be called once (it holds the tensors saved for its backward).
    """

    def __init__(self):
        self._used = False
        self.saved_tensors = ()

    def save_for_backward(self, *args):
        """Keeps `args` for backward, as ``self.saved_tensors``."""
        self.saved_tensors = args

    def forward(self, *inputs):
        """The outputs from the inputs; override it."""
        raise NotImplementedError(f"{type(self).__name__} must define forward")

    def backward(self, *output_grads):
        """The gradients of the inputs from those of the outputs; override it."""
        raise NotImplementedError(f"{type(self).__name__} must define backward")

    def __call__(self, *inputs):
        name = type(self).__name__
        if self._used:
            raise RuntimeError(f"{name}: each Function instance can be called only once; "
                               "create another instance")
        for i, x in enumerate(inputs):
            if not isinstance(x, _NDArrayBase):
                raise TypeError(f"{name}: input {i} must be a pymx ndarray, got "
                                f"{type(x).__name__}")
        if _c.is_tracing():
            raise RuntimeError(f"{name}: an autograd.Function cannot run inside a hybridized "
                               "block (the traced graph would not call its backward); call it "
                               "from a block that is not hybridized")
        self._used = True
        was_recording = set_recording(False)
        try:
            outputs = self.forward(*inputs)
        finally:
            set_recording(was_recording)
        single = isinstance(outputs, _NDArrayBase)
        output_list = [outputs] if single else outputs
        if not isinstance(output_list, (list, tuple)) or not output_list or not all(
                isinstance(y, _NDArrayBase) for y in output_list):
            raise TypeError(f"{name}.forward must return an ndarray or a non-empty tuple/list "
                            f"of ndarrays, got {outputs!r}")
        if not was_recording:
            return outputs
        input_shapes = [x.shape for x in inputs]
        _, recorded = _c.record_function(
            list(inputs), list(output_list),
            lambda output_grads: _function_backward(self, input_shapes, output_grads))
        if single:
            return recorded[0]
        return recorded if isinstance(outputs, list) else tuple(recorded)


def _function_backward(function, input_shapes, output_grads):
    """Runs ``function.backward`` and checks its result: one gradient (or None) per input."""
    name = type(function).__name__
    grads = function.backward(*output_grads)
    if isinstance(grads, _NDArrayBase) or grads is None:
        grads = [grads]
    elif not isinstance(grads, (list, tuple)):
        raise TypeError(f"{name}.backward must return an ndarray, None or a tuple/list of "
                        f"them, got {type(grads).__name__}")
    grads = list(grads)
    if len(grads) != len(input_shapes):
        raise ValueError(f"{name}.backward returned {len(grads)} gradients for "
                         f"{len(input_shapes)} inputs")
    for i, (g, shape) in enumerate(zip(grads, input_shapes)):
        if g is None:
            continue
        if not isinstance(g, _NDArrayBase):
            raise TypeError(f"{name}.backward: gradient {i} must be a pymx ndarray or None, got "
                            f"{type(g).__name__}")
        if g.shape != shape:
            raise ValueError(f"{name}.backward returned a gradient of shape {g.shape} for input "
                             f"{i} of shape {shape}")
    return grads


def _get_grad(array):
    """The gradient buffer of a marked variable, or None (for ``ndarray.grad``)."""
    return _c.get_grad(array)


def _detach(array):
    """The same memory without autograd history (for ``ndarray.detach()``)."""
    return _c.detach(array)


class _TraceStop(threading.local):
    reason = None  # why this thread's trace was stopped; None while it was not


_trace_stop = _TraceStop()


def _stop_tracing(reason):
    """Ends this thread's trace without a graph, so the code being traced runs on imperatively
    (for operations a native graph cannot replay, such as Python custom operators). The tracer
    learns it, and why, from _take_trace_stop()."""
    _c.trace_abort()
    _trace_stop.reason = reason


def _take_trace_stop():
    """The reason given to _stop_tracing since the last call on this thread, or None."""
    reason, _trace_stop.reason = _trace_stop.reason, None
    return reason


def _trace(fn, inputs):
    """Runs ``fn(*inputs)`` (a list/tuple of arrays or one array as result) while tracing the
    ops it invokes on this thread; returns ``(graph, outputs)``. ``graph.run(list_of_inputs)``
    replays the ops natively (for ``HybridBlock.hybridize``); see pymx/_c/autograd.pyx Graph.
    Arrays ``fn`` reads besides ``inputs`` are captured by reference as constants."""
    inputs = list(inputs)
    _c.trace_begin(inputs)
    try:
        outputs = fn(*inputs)
    except BaseException:
        _c.trace_abort()
        _take_trace_stop()
        raise
    stopped = _take_trace_stop()
    if stopped is not None:
        raise RuntimeError(f"cannot trace a graph: {stopped} runs Python code that a native "
                           "graph cannot replay")
    graph = _c.trace_end(_as_list(outputs))
    return graph, outputs
