// Shared by the C API implementation files (c_api.cc, c_api_autograd.cc): the handle structs,
// the error boundary macros and the thread-local return buffers.
#pragma once

#include <new>
#include <string>
#include <vector>

#include "pymx/base.h"
#include "pymx/c_api.h"
#include "pymx/ndarray.h"

// A C handle owns one NDArray value (a shared reference to the chunk).
struct PmxArray {
  pymx::NDArray array;
};

namespace pymx {
namespace c_api {

// Stores `message` as this thread's last error and returns `status`.
int set_last_error(Status status, const char* message);

// Converts the exception in flight into a status and this thread's last error. Call only from
// a catch block.
int handle_exception();

inline const NDArray& array_of(const PmxArray* handle) {
  PMX_CHECK(handle != nullptr, "expected an array handle, got NULL");
  return handle->array;
}
inline NDArray& array_of(PmxArray* handle) {
  PMX_CHECK(handle != nullptr, "expected an array handle, got NULL");
  return handle->array;
}

inline PmxArray* new_handle(NDArray array) { return new PmxArray{std::move(array)}; }

// The error a status returned by a caller's callback becomes (an unknown value: internal).
inline Status status_of_callback(int status) {
  return status > PMX_OK && status <= PMX_ERR_LINALG ? static_cast<Status>(status)
                                                     : Status::kInternal;
}

// Hands `arrays` to the caller as new handles in a thread-local list (valid until the next call
// that uses it on this thread).
void return_arrays(std::vector<NDArray>&& arrays, int* out_num, PmxArray*** out_arrays);

Device make_device(int device_type, int device_id);  // checks the type value
DType make_dtype(int dtype);                         // checks the flag value

}  // namespace c_api
}  // namespace pymx

// Every C entry point body sits between these two: exceptions become a status + last error.
#define PMX_API_BEGIN() try {
#define PMX_API_END()                      \
  }                                        \
  catch (...) {                            \
    return ::pymx::c_api::handle_exception(); \
  }                                        \
  return PMX_OK;
