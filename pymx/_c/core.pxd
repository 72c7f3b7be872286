# What other Cython modules (pymx/_c/autograd.pyx, ...) cimport from core:
#   from pymx._c.core cimport NDArrayBase, check, wrap_handle, handle_of
from pymx._c.c_api cimport PmxArray


cdef class NDArrayBase:
    # Owned: freed by __dealloc__. NULL only for an object made without a handle.
    cdef PmxArray* handle
    cdef object _shape  # cached tuple; a handle's shape never changes
    cdef object __weakref__


# Raises the exception for C status `rc` with pmx_last_error() as its message.
cdef int raise_error(int rc) except -1

cdef inline int check(int rc) except -1:
    if rc != 0:
        raise_error(rc)
    return 0

# A new pymx ndarray owning `handle` (freed if wrapping fails).
cdef object wrap_handle(PmxArray* handle)

# The handle of an ndarray; TypeError naming `what` for anything else.
cdef PmxArray* handle_of(object array, str what) except NULL
