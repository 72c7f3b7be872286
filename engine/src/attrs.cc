// Attrs: operator attributes kept as strings and parsed on use. The text forms are those the
// Python layer writes (see pymx/_op.py): bools "True"/"False", numbers in repr form, tuples
// "(1, 2)", absent values "None", dtypes by name, devices "cpu(0)".
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "pymx/op.h"

namespace pymx {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Parses a whole string as an integer; integral floats ("2.0") are accepted too.
bool parse_int(const std::string& raw, int64_t* out) {
  const std::string s = trim(raw);
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == 0 && *end == '\0') {
    *out = v;
    return true;
  }
  double d = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(d) || d != std::floor(d)) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

// strtod also reads "inf", "-inf" and "nan", the forms Python's repr gives.
bool parse_float(const std::string& raw, double* out) {
  const std::string s = trim(raw);
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return *end == '\0';
}

bool parse_shape(const std::string& raw, Shape* out) {
  std::string s = trim(raw);
  if (!s.empty() && (s.front() == '(' || s.front() == '[')) {
    const char close = s.front() == '(' ? ')' : ']';
    if (s.back() != close) return false;
    s = trim(s.substr(1, s.size() - 2));
  }
  out->clear();
  if (s.empty()) return true;                        // "()" or "[]"
  if (s.back() == ',') s.pop_back();                 // "(3,)"
  size_t pos = 0;
  while (true) {
    const size_t comma = s.find(',', pos);
    int64_t v;
    if (!parse_int(s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos), &v))
      return false;
    out->push_back(v);
    if (comma == std::string::npos) return true;
    pos = comma + 1;
  }
}

}  // namespace

void Attrs::set(const std::string& key, const std::string& value) {
  for (auto& kv : items_) {
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  }
  items_.emplace_back(key, value);
}

const std::string* Attrs::find(const std::string& key) const {
  for (const auto& kv : items_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

bool Attrs::has(const std::string& key) const {
  const std::string* v = find(key);
  return v != nullptr && *v != "None";
}

#define PMX_REQUIRE_ATTR_(key) \
  const std::string* text = find(key); \
  PMX_CHECK(text != nullptr, "missing required attribute '", key, "'")

int64_t Attrs::get_int(const std::string& key) const {
  PMX_REQUIRE_ATTR_(key);
  int64_t v;
  PMX_CHECK(parse_int(*text, &v), "attribute '", key, "' must be an integer, got '", *text, "'");
  return v;
}

int64_t Attrs::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double Attrs::get_float(const std::string& key) const {
  PMX_REQUIRE_ATTR_(key);
  double v;
  PMX_CHECK(parse_float(*text, &v), "attribute '", key, "' must be a number, got '", *text, "'");
  return v;
}

double Attrs::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool Attrs::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const std::string s = trim(*find(key));
  if (s == "True" || s == "true" || s == "1") return true;
  if (s == "False" || s == "false" || s == "0") return false;
  PMX_THROW(Status::kInvalidArg, "attribute '", key, "' must be a bool (True/False), got '", s, "'");
}

std::string Attrs::get_str(const std::string& key, const std::string& fallback) const {
  return has(key) ? *find(key) : fallback;
}

Shape Attrs::get_shape(const std::string& key) const {
  PMX_REQUIRE_ATTR_(key);
  Shape v;
  PMX_CHECK(parse_shape(*text, &v), "attribute '", key, "' must be a tuple of integers, got '",
            *text, "'");
  return v;
}

Shape Attrs::get_shape(const std::string& key, const Shape& fallback) const {
  return has(key) ? get_shape(key) : fallback;
}

std::optional<int64_t> Attrs::get_optional_int(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_int(key);
}

std::optional<Shape> Attrs::get_optional_shape(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_shape(key);
}

DType Attrs::get_dtype(const std::string& key, DType fallback) const {
  return has(key) ? parse_dtype(trim(*find(key))) : fallback;
}

#undef PMX_REQUIRE_ATTR_

DType parse_dtype(const std::string& name) {
  if (name == "float32") return DType::kFloat32;
  if (name == "float64" || name == "float" || name == "double") return DType::kFloat64;
  if (name == "float16" || name == "half") return DType::kFloat16;
  if (name == "uint8") return DType::kUint8;
  if (name == "int8") return DType::kInt8;
  if (name == "int32") return DType::kInt32;
  if (name == "int64" || name == "int") return DType::kInt64;
  if (name == "bool" || name == "bool_") return DType::kBool;
  PMX_THROW(Status::kType, "unsupported dtype '", name,
            "' (supported: float32, float64, float16, uint8, int8, int32, int64, bool)");
}

Device parse_device(const std::string& raw) {
  const std::string text = trim(raw);
  const size_t open = text.find('(');
  int64_t id = -1;
  if (open != std::string::npos && text.back() == ')' &&
      parse_int(text.substr(open + 1, text.size() - open - 2), &id) && id >= 0) {
    const std::string kind = text.substr(0, open);
    if (kind == "cpu") return Device::cpu(static_cast<int32_t>(id));
    if (kind == "gpu") return Device::gpu(static_cast<int32_t>(id));
    if (kind == "cpu_pinned") return Device::cpu_pinned(static_cast<int32_t>(id));
  }
  PMX_THROW(Status::kInvalidArg, "cannot parse device '", text,
            "' (expected cpu(N), gpu(N) or cpu_pinned(N))");
}

}  // namespace pymx
