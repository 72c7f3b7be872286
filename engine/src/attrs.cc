// Attrs: operator attributes kept as strings and parsed on use. The text forms are those the
// Python layer writes (see pymx/_op.py): bools "True"/"False", numbers in repr form, tuples
// "(1, 2)", absent values "None", dtypes by name, devices "cpu(0)".
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "pymx/op.h"

namespace pymx {
namespace {

// Note [Fast attribute parsing]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Kernels and shape inference read their attributes on every call (add_scalar reads `scalar`
// and `reverse` twice per `x + 1`), so parsing works on views of the stored text, without
// copies, and reads plain decimals ("1.0", "-0.25", "3") directly. strtod/strtoll handle the
// rest (exponents, "inf", "nan", integral floats for integers).

std::string_view trimmed(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// A plain decimal: optional sign, digits with at most one '.', at most 15 digits in all. Then the
// digits form an integer m < 2^53 and the value is m / 10^k with 10^k exact (k <= 15), so one
// correctly rounded division gives exactly what strtod gives (Clinger's fast path).
bool parse_plain_decimal(std::string_view s, double* out) {
  static constexpr double kPow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) ++i;
  uint64_t mantissa = 0;
  int digits = 0, fraction_digits = 0;
  bool seen_point = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (++digits > 15) return false;
      mantissa = mantissa * 10 + static_cast<uint64_t>(c - '0');
      fraction_digits += seen_point;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      return false;
    }
  }
  if (digits == 0) return false;
  const double magnitude = static_cast<double>(mantissa) / kPow10[fraction_digits];
  *out = negative ? -magnitude : magnitude;
  return true;
}

// Parses a whole string as an integer; integral floats ("2.0") are accepted too. `s` is trimmed
// and ends at a character that is not part of a number (or at the text's end), which strtoll
// and strtod stop at.
bool parse_int(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  // Fast path: an optional '-' and at most 18 digits cannot overflow.
  const bool negative = s[0] == '-';
  const size_t first = negative ? 1 : 0;
  if (s.size() > first && s.size() - first <= 18) {
    int64_t v = 0;
    size_t i = first;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
    if (i == s.size()) {
      *out = negative ? -v : v;
      return true;
    }
  }
  const char* begin = s.data();
  const char* stop = s.data() + s.size();
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(begin, &end, 10);
  if (errno == 0 && end == stop) {
    *out = v;
    return true;
  }
  double d = std::strtod(begin, &end);
  // 2^63 bounds int64; beyond it (or for a fraction) the text is not an int64.
  if (end != stop || !(std::fabs(d) < 9223372036854775808.0) || d != std::floor(d)) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

// strtod also reads "inf", "-inf" and "nan", the forms Python's repr gives. Same contract on `s`
// as parse_int.
bool parse_float(std::string_view s, double* out) {
  if (s.empty()) return false;
  if (parse_plain_decimal(s, out)) return true;
  char* end = nullptr;
  *out = std::strtod(s.data(), &end);
  return end == s.data() + s.size();
}

// A tuple "(a, b)", "[a,b]", "(a,)" or a lone "a", each element read by parse_element.
template <typename T, typename ParseElement>
bool parse_tuple(std::string_view s, ParseElement parse_element, std::vector<T>* out) {
  s = trimmed(s);
  if (!s.empty() && (s.front() == '(' || s.front() == '[')) {
    const char close = s.front() == '(' ? ')' : ']';
    if (s.back() != close) return false;
    s = trimmed(s.substr(1, s.size() - 2));
  }
  out->clear();
  if (s.empty()) return true;                              // "()" or "[]"
  if (s.back() == ',') s = trimmed(s.substr(0, s.size() - 1));  // "(3,)"
  while (true) {
    const size_t comma = s.find(',');
    T v;
    if (!parse_element(trimmed(s.substr(0, comma)), &v)) return false;
    out->push_back(v);
    if (comma == std::string_view::npos) return true;
    s = s.substr(comma + 1);
  }
}

bool parse_shape(std::string_view s, Shape* out) { return parse_tuple(s, parse_int, out); }

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

namespace {

// The text of `key` when present and not "None" (an absent optional value), else nullptr.
const std::string* present(const Attrs& attrs, const std::string& key) {
  const std::string* v = attrs.find(key);
  return v != nullptr && *v != "None" ? v : nullptr;
}

}  // namespace

bool Attrs::has(const std::string& key) const { return present(*this, key) != nullptr; }

#define PMX_REQUIRE_ATTR_(key) \
  const std::string* text = find(key); \
  PMX_CHECK(text != nullptr, "missing required attribute '", key, "'")

namespace {

int64_t int_value(const std::string& key, const std::string& text) {
  int64_t v;
  PMX_CHECK(parse_int(trimmed(text), &v), "attribute '", key, "' must be an integer, got '", text,
            "'");
  return v;
}

double float_value(const std::string& key, const std::string& text) {
  double v;
  PMX_CHECK(parse_float(trimmed(text), &v), "attribute '", key, "' must be a number, got '", text,
            "'");
  return v;
}

Shape shape_value(const std::string& key, const std::string& text) {
  Shape v;
  PMX_CHECK(parse_shape(text, &v), "attribute '", key, "' must be a tuple of integers, got '",
            text, "'");
  return v;
}

std::vector<double> floats_value(const std::string& key, const std::string& text) {
  std::vector<double> v;
  PMX_CHECK(parse_tuple(text, parse_float, &v), "attribute '", key,
            "' must be a tuple of numbers, got '", text, "'");
  return v;
}

}  // namespace

int64_t Attrs::get_int(const std::string& key) const {
  PMX_REQUIRE_ATTR_(key);
  return int_value(key, *text);
}

int64_t Attrs::get_int(const std::string& key, int64_t fallback) const {
  const std::string* text = present(*this, key);
  return text != nullptr ? int_value(key, *text) : fallback;
}

double Attrs::get_float(const std::string& key) const {
  PMX_REQUIRE_ATTR_(key);
  return float_value(key, *text);
}

double Attrs::get_float(const std::string& key, double fallback) const {
  const std::string* text = present(*this, key);
  return text != nullptr ? float_value(key, *text) : fallback;
}

bool Attrs::get_bool(const std::string& key, bool fallback) const {
  const std::string* text = present(*this, key);
  if (text == nullptr) return fallback;
  const std::string_view s = trimmed(*text);
  if (s == "True" || s == "true" || s == "1") return true;
  if (s == "False" || s == "false" || s == "0") return false;
  PMX_THROW(Status::kInvalidArg, "attribute '", key, "' must be a bool (True/False), got '", s, "'");
}

std::string Attrs::get_str(const std::string& key, const std::string& fallback) const {
  const std::string* text = present(*this, key);
  return text != nullptr ? *text : fallback;
}

Shape Attrs::get_shape(const std::string& key) const {
  PMX_REQUIRE_ATTR_(key);
  return shape_value(key, *text);
}

Shape Attrs::get_shape(const std::string& key, const Shape& fallback) const {
  const std::string* text = present(*this, key);
  return text != nullptr ? shape_value(key, *text) : fallback;
}

std::vector<double> Attrs::get_floats(const std::string& key) const {
  PMX_REQUIRE_ATTR_(key);
  return floats_value(key, *text);
}

std::optional<int64_t> Attrs::get_optional_int(const std::string& key) const {
  const std::string* text = present(*this, key);
  if (text == nullptr) return std::nullopt;
  return int_value(key, *text);
}

std::optional<Shape> Attrs::get_optional_shape(const std::string& key) const {
  const std::string* text = present(*this, key);
  if (text == nullptr) return std::nullopt;
  return shape_value(key, *text);
}

DType Attrs::get_dtype(const std::string& key, DType fallback) const {
  const std::string* text = present(*this, key);
  return text != nullptr ? parse_dtype(std::string(trimmed(*text))) : fallback;
}

#undef PMX_REQUIRE_ATTR_

DType parse_dtype(const std::string& name) {
  if (name == "float32") return DType::kFloat32;
  if (name == "float64" || name == "float" || name == "double") return DType::kFloat64;
  if (name == "float16" || name == "half") return DType::kFloat16;
  if (name == "bfloat16") return DType::kBFloat16;
  if (name == "uint8") return DType::kUint8;
  if (name == "int8") return DType::kInt8;
  if (name == "int32") return DType::kInt32;
  if (name == "int64" || name == "int") return DType::kInt64;
  if (name == "bool" || name == "bool_") return DType::kBool;
  PMX_THROW(Status::kType, "unsupported dtype '", name,
            "' (supported: float32, float64, float16, bfloat16, uint8, int8, int32, int64, bool)");
}

Device parse_device(const std::string& raw) {
  const std::string text(trimmed(raw));
  const size_t open = text.find('(');
  int64_t id = -1;
  if (open != std::string::npos && text.back() == ')' &&
      parse_int(trimmed(std::string_view(text).substr(open + 1, text.size() - open - 2)), &id) &&
      id >= 0) {
    const std::string kind = text.substr(0, open);
    if (kind == "cpu") return Device::cpu(static_cast<int32_t>(id));
    if (kind == "gpu") return Device::gpu(static_cast<int32_t>(id));
    if (kind == "cpu_pinned") return Device::cpu_pinned(static_cast<int32_t>(id));
  }
  PMX_THROW(Status::kInvalidArg, "cannot parse device '", text,
            "' (expected cpu(N), gpu(N) or cpu_pinned(N))");
}

}  // namespace pymx
