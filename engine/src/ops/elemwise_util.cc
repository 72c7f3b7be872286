// Implementation of the helpers in ops/elemwise.h.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ops/cast.h"
#include "ops/elemwise.h"

namespace pymx {
namespace ops {
namespace {

int int_rank(DType t) {
  switch (t) {
    case DType::kBool: return 0;
    case DType::kUint8:
    case DType::kInt8: return 1;
    case DType::kInt32: return 2;
    case DType::kInt64: return 3;
    default: return -1;
  }
}

int float_rank(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16: return 0;
    case DType::kFloat32: return 1;
    case DType::kFloat64: return 2;
    default: return -1;
  }
}

}  // namespace

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kBool) return b;
  if (b == DType::kBool) return a;
  const bool fa = is_float(a), fb = is_float(b);
  // float16 and bfloat16 hold neither's values (one has range, the other precision): float32.
  if (fa && fb) {
    if (float_rank(a) == float_rank(b)) return DType::kFloat32;
    return float_rank(a) > float_rank(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  // Both integers and different. uint8 with int8 needs int16, which pymx lacks: int32.
  if (int_rank(a) == 1 && int_rank(b) == 1) return DType::kInt32;
  return int_rank(a) > int_rank(b) ? a : b;
}

DType promote_scalar(DType array, bool scalar_is_int) {
  if (is_float(array)) return array;
  if (!scalar_is_int) return DType::kFloat32;
  return array == DType::kBool ? DType::kInt64 : array;
}

bool scalar_text_is_int(const std::string& text) {
  if (text.empty()) return false;
  size_t i = (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i)
    if (text[i] < '0' || text[i] > '9') return false;
  return true;
}

int64_t scalar_int(const std::string& text, const std::string& op_name) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  PMX_CHECK(end == text.c_str() + text.size() && scalar_text_is_int(text), "operator '", op_name,
            "': scalar '", text, "' is not an integer");
  if (errno == ERANGE)
    PMX_THROW(Status::kOverflow, "operator '", op_name, "': Python integer ", text,
              " out of bounds for int64");
  return static_cast<int64_t>(v);
}

std::optional<IntRange> int_arange_range(const Attrs& attrs, DType dtype) {
  if (is_float(dtype) || dtype == DType::kBool) return std::nullopt;
  for (const char* key : {"start", "stop", "step"}) {
    const std::string* text = attrs.find(key);
    if (text != nullptr && *text != "None" && !scalar_text_is_int(*text)) return std::nullopt;
  }
  const auto bound = [&](const char* key, int64_t fallback) {
    return attrs.has(key) ? scalar_int(*attrs.find(key), "arange") : fallback;
  };
  int64_t start = bound("start", 0), stop = 0;
  const int64_t step = bound("step", 1);
  if (attrs.has("stop")) stop = bound("stop", 0); else std::swap(start, stop);  // arange(n): [0, n)
  PMX_CHECK(step != 0, "arange: step must not be zero");
  // ceil((stop - start) / step) in 128 bits: the difference of two int64 need not fit in one.
  const __int128 span = static_cast<__int128>(stop) - start;
  __int128 length = span / step;
  if (span % step != 0 && ((span > 0) == (step > 0))) ++length;
  if (length > static_cast<__int128>(INT64_MAX / 2))
    PMX_THROW(Status::kOutOfMemory, "arange: the range (start=", start, ", stop=", stop,
              ", step=", step, ") has too many elements to allocate");
  return IntRange{start, step, length > 0 ? static_cast<int64_t>(length) : 0};
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op_name) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    PMX_CHECK(da == db || da == 1 || db == 1, "operator '", op_name,
              "': operands could not be broadcast together with shapes ", shape_str(a), " ",
              shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int normalize_axis(int64_t axis, int ndim, const char* op_name) {
  if (axis < -ndim || axis >= ndim)  // NumPy raises AxisError here, so that is what it becomes
    PMX_THROW(Status::kAxis, "operator '", op_name, "': axis ", axis,
              " is out of bounds for an array of dimension ", ndim);
  return static_cast<int>(axis < 0 ? axis + ndim : axis);
}

std::vector<int> reduce_axes(const Attrs& attrs, int ndim, const char* op_name) {
  std::vector<int> axes;
  if (!attrs.has("axis")) {
    for (int i = 0; i < ndim; ++i) axes.push_back(i);
    return axes;
  }
  for (int64_t a : attrs.get_shape("axis")) {
    const int ax = normalize_axis(a, ndim, op_name);
    PMX_CHECK(std::find(axes.begin(), axes.end(), ax) == axes.end(), "operator '", op_name,
              "': duplicate value in 'axis' ", *attrs.find("axis"));
    axes.push_back(ax);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

namespace {

template <typename E>
void strided_copy_typed(const E* src, const Shape& shape, const std::vector<int64_t>& strides,
                        E* dst) {
  const int nd = static_cast<int>(shape.size());
  const int64_t total = shape_size(shape);
  if (total == 0) return;
  if (nd == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = shape[nd - 1], step = strides[nd - 1];
  std::vector<int64_t> index(nd, 0);
  int64_t offset = 0;
  for (int64_t done = 0; done < total; done += inner) {
    const E* s = src + offset;
    if (step == 1) {
      std::memcpy(dst, s, static_cast<size_t>(inner) * sizeof(E));
    } else if (step == 0) {
      std::fill(dst, dst + inner, *s);
    } else {
      for (int64_t i = 0; i < inner; ++i) dst[i] = s[i * step];
    }
    dst += inner;
    // Advance the outer index like an odometer, keeping `offset` in step.
    for (int d = nd - 2; d >= 0; --d) {
      offset += strides[d];
      if (++index[d] < shape[d]) break;
      offset -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace

void strided_copy(const void* src, int64_t offset, const Shape& shape,
                  const std::vector<int64_t>& strides, void* dst, size_t elem_size) {
  // Merge dims that are contiguous with each other and drop unit dims: fewer, longer rows.
  Shape s;
  std::vector<int64_t> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!s.empty() && st.back() == strides[d] * shape[d]) {
      s.back() *= shape[d];
      st.back() = strides[d];
    } else {
      s.push_back(shape[d]);
      st.push_back(strides[d]);
    }
  }
  if (shape_size(shape) == 0) return;
  switch (elem_size) {
    case 1:
      strided_copy_typed(static_cast<const uint8_t*>(src) + offset, s, st, static_cast<uint8_t*>(dst));
      break;
    case 2:
      strided_copy_typed(static_cast<const uint16_t*>(src) + offset, s, st, static_cast<uint16_t*>(dst));
      break;
    case 4:
      strided_copy_typed(static_cast<const uint32_t*>(src) + offset, s, st, static_cast<uint32_t*>(dst));
      break;
    case 8:
      strided_copy_typed(static_cast<const uint64_t*>(src) + offset, s, st, static_cast<uint64_t*>(dst));
      break;
    default:
      PMX_ASSERT(false, "element size ", elem_size);
  }
}

std::vector<TBlob> inputs_as(const OpContext& ctx, const std::vector<TBlob>& inputs, DType dtype) {
  size_t bytes = 0;
  for (const TBlob& b : inputs)
    if (b.dtype != dtype) bytes += (b.size() * dtype_size(dtype) + 63) / 64 * 64;
  std::vector<TBlob> out = inputs;
  // An empty input still takes the dtype (its kernel switches on it), with no workspace.
  char* space = bytes > 0 ? static_cast<char*>(ctx.workspace(bytes)) : nullptr;
  for (TBlob& b : out) {
    if (b.dtype == dtype) continue;
    TBlob converted = b;
    converted.dtype = dtype;
    converted.dptr = space;
    if (b.size() > 0) cast_cpu(b, converted);
    space += (b.size() * dtype_size(dtype) + 63) / 64 * 64;
    b = converted;
  }
  return out;
}

std::string shape_attr(const Shape& shape) { return shape_str(shape); }

std::string axes_attr(const std::vector<int>& axes) {
  Shape s(axes.begin(), axes.end());
  return shape_str(s);
}

NDArray call(const std::string& op, const std::vector<NDArray>& inputs, const Attrs& attrs) {
  return invoke(op_registry::get(op), inputs, attrs, inputs.empty() ? Device::cpu() : inputs[0].device())[0];
}

NDArray scalar_op(const std::string& op, const NDArray& x, double scalar, bool reverse) {
  std::ostringstream text;
  text.precision(17);
  text << scalar;
  std::string s = text.str();
  // Keep the scalar a float literal so int arrays promote like a Python float would.
  if (scalar_text_is_int(s) && is_float(x.dtype())) s += ".0";
  return call(op, {x}, Attrs{{"scalar", s}, {"reverse", reverse ? "True" : "False"}});
}

NDArray sum_to_shape(const NDArray& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const Shape& g = grad.shape();
  const size_t lead = g.size() - shape.size();
  std::vector<int> axes;
  for (size_t i = 0; i < g.size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g[i] != 1)) axes.push_back(static_cast<int>(i));
  NDArray summed = call("sum", {grad}, Attrs{{"axis", axes_attr(axes)}, {"keepdims", "True"}});
  return call("reshape", {summed}, Attrs{{"newshape", shape_attr(shape)}});
}

NDArray zeros_like(const NDArray& x) {
  return invoke(op_registry::get("zeros"), {},
                Attrs{{"shape", shape_attr(x.shape())}, {"dtype", dtype_name(x.dtype())}},
                x.device())[0];
}

NDArray ones_like(const NDArray& x) {
  return invoke(op_registry::get("ones"), {},
                Attrs{{"shape", shape_attr(x.shape())}, {"dtype", dtype_name(x.dtype())}},
                x.device())[0];
}

}  // namespace ops
}  // namespace pymx
