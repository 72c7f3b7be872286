// Value types every layer shares: dtypes, devices, shapes, and the two failure macros.
// Header-only, C++17, no CUDA and no Python.
#pragma once

#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace pymx {

// ---------------------------------------------------------------------------------------------
// Errors.
// Note [Two kinds of failure]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PMX_CHECK: the caller erred (bad shape, bad device, bad argument) -> Python ValueError.
// PMX_ASSERT: pymx itself is wrong; the message asks for a report -> Python PymxError.
// Both throw pymx::Error and both stay on in release builds.
// ---------------------------------------------------------------------------------------------
enum class Status : int {
  kOk = 0,
  kInvalidArg = 1,  // -> ValueError
  kOutOfMemory = 2, // -> MemoryError
  kCuda = 3,        // -> PymxError
  kNoCuda = 4,      // -> PymxError (built without CUDA, or no driver)
  kAsync = 5,       // an error raised inside an asynchronous op, surfaced at a wait
  kInternal = 6,    // -> PymxError
  kIndex = 7,       // -> IndexError
  kType = 8,        // -> TypeError
  kLinAlg = 9,      // -> np.linalg.LinAlgError (a ValueError): singular or non-convergent input
  kAxis = 10,       // -> numpy.exceptions.AxisError (a ValueError and an IndexError)
  kOverflow = 11,   // -> OverflowError: a Python integer out of bounds for the op's dtype
};

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& msg) : std::runtime_error(msg), status_(status) {}
  Status status() const { return status_; }

 private:
  Status status_;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
}  // namespace detail

template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return os.str();
}

template <typename... Args>
[[noreturn]] void throw_error(Status status, const Args&... args) {
  throw Error(status, str_cat(args...));
}

#define PMX_THROW(status, ...) ::pymx::throw_error((status), __VA_ARGS__)

#define PMX_CHECK(cond, ...)                                             \
  do {                                                                   \
    if (!(cond)) ::pymx::throw_error(::pymx::Status::kInvalidArg, __VA_ARGS__); \
  } while (0)

#define PMX_ASSERT(cond, ...)                                                               \
  do {                                                                                      \
    if (!(cond))                                                                            \
      ::pymx::throw_error(::pymx::Status::kInternal, "internal error in pymx (please report): ", \
                          #cond, " at ", __FILE__, ":", __LINE__, ": ", __VA_ARGS__);      \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Devices. Values match MXNet's Context::DeviceType, so files and C callers agree.
// ---------------------------------------------------------------------------------------------
enum class DeviceType : int32_t { kCPU = 1, kGPU = 2, kCPUPinned = 3 };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int32_t id = 0;

  static Device cpu(int32_t id = 0) { return {DeviceType::kCPU, id}; }
  static Device gpu(int32_t id = 0) { return {DeviceType::kGPU, id}; }
  static Device cpu_pinned(int32_t id = 0) { return {DeviceType::kCPUPinned, id}; }

  bool is_gpu() const { return type == DeviceType::kGPU; }
  // Pinned host memory is executed on the CPU like plain host memory.
  bool is_host() const { return type != DeviceType::kGPU; }
  bool operator==(const Device& o) const { return type == o.type && id == o.id; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const {
    const char* name = type == DeviceType::kCPU ? "cpu" : type == DeviceType::kGPU ? "gpu" : "cpu_pinned";
    return str_cat(name, "(", id, ")");
  }
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

// ---------------------------------------------------------------------------------------------
// Dtypes. Values are MXNet's type flags (mshadow/base.h), which the legacy .params format stores.
// ---------------------------------------------------------------------------------------------
enum class DType : int32_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,
  kUint8 = 3,
  kInt32 = 4,
  kInt8 = 5,
  kInt64 = 6,
  kBool = 7,
  kBFloat16 = 12,
};

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kFloat16: return 2;
    case DType::kUint8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt8: return 1;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
    case DType::kBFloat16: return 2;
  }
  PMX_THROW(Status::kInvalidArg, "unknown dtype flag ", static_cast<int>(t));
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kUint8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt8: return "int8";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    case DType::kBFloat16: return "bfloat16";
  }
  return "unknown";
}

inline bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

inline bool is_16bit_float(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// ---------------------------------------------------------------------------------------------
// Shapes: row-major, int64 extents. A 0-d array has an empty shape and one element.
// ---------------------------------------------------------------------------------------------
using Shape = std::vector<int64_t>;

inline int64_t shape_size(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    out += std::to_string(s[i]);
    if (s.size() == 1 || i + 1 < s.size()) out += s.size() == 1 ? "," : ", ";
  }
  return out + ")";
}

}  // namespace pymx
