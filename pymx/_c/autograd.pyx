# cython: language_level=3, boundscheck=False, wraparound=False, embedsignature=True
"""Cython bindings of the autograd and graph section of the C API. Python code uses
pymx.autograd (and gluon's hybridize), not this module.

Backward and graph runs only push work to the engine, but they release the GIL anyway: with the
naive engine the ops run inline, and data-parallel threads may backward on other devices.
"""
import threading

from cpython.ref cimport Py_DECREF, Py_INCREF
from libcpp.vector cimport vector

from pymx._c.c_api cimport *
from pymx._c.core cimport NDArrayBase, check, handle_of, wrap_handle


cdef int _handles(list arrays, str what, vector[PmxArray*]* out) except -1:
    # A graph replay passes every parameter each call: take valid handles directly and build the
    # message naming the entry only for a bad one.
    cdef Py_ssize_t i
    cdef object a
    out.clear()
    out.reserve(len(arrays))
    for i in range(len(arrays)):
        a = arrays[i]
        if isinstance(a, NDArrayBase) and (<NDArrayBase>a).handle != NULL:
            out.push_back((<NDArrayBase>a).handle)
        else:
            out.push_back(handle_of(a, f"{what}[{i}]"))
    return 0


cdef list _wrap_list(int num, PmxArray** handles):
    # wrap_handle frees its own handle when it fails; free the ones not reached yet too.
    cdef int i = 0, j
    owned = []
    try:
        while i < num:
            owned.append(wrap_handle(handles[i]))
            i += 1
    except BaseException:
        for j in range(i + 1, num):
            pmx_array_free(handles[j])
        raise
    return owned


def set_recording(bint on):
    cdef int prev = 0
    check(pmx_autograd_set_recording(on, &prev))
    return bool(prev)


def set_training(bint on):
    cdef int prev = 0
    check(pmx_autograd_set_training(on, &prev))
    return bool(prev)


def is_recording():
    cdef int on = 0
    check(pmx_autograd_is_recording(&on))
    return bool(on)


def is_training():
    cdef int on = 0
    check(pmx_autograd_is_training(&on))
    return bool(on)


def mark_variables(list variables, list gradients, list grad_reqs):
    """grad_reqs: ints 0 (null), 1 (write), 3 (add)."""
    cdef vector[PmxArray*] vars_, grads
    cdef vector[int] reqs
    if not (len(variables) == len(gradients) == len(grad_reqs)):
        raise ValueError(f"mark_variables: got {len(variables)} variables, {len(gradients)} "
                         f"gradients and {len(grad_reqs)} grad_reqs")
    _handles(variables, "variables", &vars_)
    _handles(gradients, "gradients", &grads)
    for r in grad_reqs:
        reqs.push_back(r)
    check(pmx_autograd_mark_variables(<int>vars_.size(), vars_.data(), grads.data(),
                                      reqs.data()))


cdef int _head_grads(list heads, object head_grads, vector[PmxArray*]* out) except -1:
    out.clear()
    if head_grads is None:
        return 0
    if len(head_grads) != len(heads):
        raise ValueError(f"got {len(heads)} heads but {len(head_grads)} head gradients")
    for i, g in enumerate(head_grads):
        if g is None:
            out.push_back(<PmxArray*>NULL)
        else:
            out.push_back(handle_of(g, f"head_grads[{i}]"))
    return 0


# ---------------------------------------------------------------------------------------------
# autograd.Function: a tape node whose gradient calls back into Python
# ---------------------------------------------------------------------------------------------

cdef extern from "Python.h":
    int Py_IsInitialized() nogil

# The exception a Function's backward raised on this thread; the backward() or grad() call that
# ran it re-raises it (the callback itself can only return a status through the C API).
_function_errors = threading.local()


cdef int _function_gradient(void* user_data, int num_out_grads, PmxArray** out_grads,
                            int num_in_grads, PmxArray** in_grads) noexcept with gil:
    # Called by pymx's backward on the thread that runs it, which released the GIL.
    cdef PmxArray* shared = NULL
    cdef int i
    try:
        grads = (<object>user_data)(_wrap_list(num_out_grads, out_grads))
        for i in range(num_in_grads):
            if grads[i] is not None:
                check(pmx_autograd_share(handle_of(grads[i], f"gradient {i}"), &shared))
                in_grads[i] = shared
        return PMX_OK
    except BaseException as error:
        _function_errors.error = error
        message = f"autograd.Function backward raised {type(error).__name__}: {error}"
        return pmx_error_set(PMX_ERR_INVALID_ARG, message.encode("utf-8", "replace"))


cdef void _release_function(void* user_data) noexcept nogil:
    # Runs on whichever thread frees the node; nothing is left to release once Python is gone.
    if Py_IsInitialized():
        with gil:
            Py_DECREF(<object>user_data)


def record_function(list inputs, list outputs, gradient):
    """Records `outputs` as computed from `inputs` by one node whose gradient is
    `gradient(list_of_output_grads) -> list (one array or None per input)`; returns
    (recorded, outputs with that history as new arrays)."""
    cdef vector[PmxArray*] ins, outs
    cdef int recorded = 0
    cdef PmxArray** out = NULL
    _handles(inputs, "inputs", &ins)
    _handles(outputs, "outputs", &outs)
    Py_INCREF(gradient)  # released by _release_function, which pymx calls exactly once
    check(pmx_autograd_record_function(<int>ins.size(), ins.data(), <int>outs.size(), outs.data(),
                                       _function_gradient, <void*>gradient, _release_function,
                                       &recorded, &out))
    return bool(recorded), _wrap_list(<int>outs.size(), out)


def is_tracing():
    """Whether this thread is tracing a graph (hybridize)."""
    cdef int on = 0
    check(pmx_graph_is_tracing(&on))
    return bool(on)


cdef int _check_backward(int rc) except -1:
    # A Function's backward that raised fails the call with its own exception.
    error = getattr(_function_errors, "error", None)
    _function_errors.error = None
    if rc != 0 and error is not None:
        raise error
    return check(rc)


def backward(list heads, head_grads, bint retain_graph, bint train_mode):
    """head_grads: None, or a list (same length as heads) of arrays or None (ones)."""
    cdef vector[PmxArray*] hs, hgs
    cdef int rc
    _handles(heads, "heads", &hs)
    _head_grads(heads, head_grads, &hgs)
    cdef PmxArray* const* hg_ptr = hgs.data() if hgs.size() else NULL
    with nogil:
        rc = pmx_autograd_backward(<int>hs.size(), hs.data(), hg_ptr, retain_graph, train_mode)
    _check_backward(rc)


def grad(list heads, list variables, head_grads, bint retain_graph, bint train_mode,
         bint create_graph):
    cdef vector[PmxArray*] hs, hgs, vs
    cdef int rc, num = 0
    cdef PmxArray** out = NULL
    _handles(heads, "heads", &hs)
    _handles(variables, "variables", &vs)
    _head_grads(heads, head_grads, &hgs)
    cdef PmxArray* const* hg_ptr = hgs.data() if hgs.size() else NULL
    with nogil:
        rc = pmx_autograd_grad(<int>hs.size(), hs.data(), hg_ptr, <int>vs.size(), vs.data(),
                               retain_graph, train_mode, create_graph, &num, &out)
    _check_backward(rc)
    return _wrap_list(num, out)


def get_grad(array):
    """The gradient buffer of a marked variable, or None."""
    cdef PmxArray* out = NULL
    check(pmx_autograd_get_grad(handle_of(array, "array"), &out))
    return None if out == NULL else wrap_handle(out)


def detach(array):
    cdef PmxArray* out = NULL
    check(pmx_autograd_detach(handle_of(array, "array"), &out))
    return wrap_handle(out)


# ---------------------------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------------------------

cdef class Graph:
    """A traced program of op calls, replayed natively (see engine/include/pymx/graph.h)."""
    cdef PmxGraph* handle
    cdef bint _static_alloc

    def __dealloc__(self):
        if self.handle != NULL:
            pmx_graph_free(self.handle)
            self.handle = NULL

    def __call__(self, *inputs):
        return self.run(list(inputs))

    def run(self, list inputs):
        cdef vector[PmxArray*] ins
        cdef int rc, num = 0
        cdef PmxArray** out = NULL
        _handles(inputs, "inputs", &ins)
        with nogil:
            rc = pmx_graph_run(self.handle, <int>ins.size(), ins.data(), &num, &out)
        check(rc)
        return _wrap_list(num, out)

    @property
    def static_alloc(self):
        return self._static_alloc

    @static_alloc.setter
    def static_alloc(self, bint on):
        """Reuse the graph's output buffers across runs (see pymx/graph.h). Set it before
        running the graph from several threads."""
        check(pmx_graph_set_static_alloc(self.handle, on))
        self._static_alloc = on

    cdef tuple _info(self):
        cdef int num_inputs, num_outputs, num_nodes, num_constants
        check(pmx_graph_info(self.handle, &num_inputs, &num_outputs, &num_nodes, &num_constants))
        return num_inputs, num_outputs, num_nodes, num_constants

    @property
    def num_inputs(self):
        return self._info()[0]

    @property
    def num_outputs(self):
        return self._info()[1]

    @property
    def num_nodes(self):
        return self._info()[2]

    @property
    def constants(self):
        """The arrays the trace read but did not compute (captured by reference)."""
        cdef int num = 0
        cdef PmxArray** out = NULL
        check(pmx_graph_constants(self.handle, &num, &out))
        return _wrap_list(num, out)

    def to_json(self):
        cdef const char* text = NULL
        check(pmx_graph_to_json(self.handle, &text))
        return text.decode("utf-8")

    @staticmethod
    def from_json(str text):
        """A graph from to_json() text; its constants become inputs after the data inputs."""
        cdef bytes encoded = text.encode("utf-8")
        cdef PmxGraph* handle = NULL
        check(pmx_graph_from_json(encoded, &handle))
        return _new_graph(handle)


cdef Graph _new_graph(PmxGraph* handle):
    cdef Graph graph = Graph.__new__(Graph)
    graph.handle = handle
    return graph


def trace_begin(list inputs):
    cdef vector[PmxArray*] ins
    _handles(inputs, "inputs", &ins)
    check(pmx_graph_trace_begin(<int>ins.size(), ins.data()))


def trace_end(list outputs):
    cdef vector[PmxArray*] outs
    cdef PmxGraph* handle = NULL
    try:
        _handles(outputs, "outputs", &outs)
    except BaseException:
        pmx_graph_trace_abort()
        raise
    check(pmx_graph_trace_end(<int>outs.size(), outs.data(), &handle))
    return _new_graph(handle)


def trace_abort():
    check(pmx_graph_trace_abort())
