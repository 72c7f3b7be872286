// Attrs parsing (engine/src/attrs.cc): the fast path for plain decimals must give exactly what
// strtod gives, and every form the Python layer writes must parse, with clear errors otherwise.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "pymx/op.h"
#include "test_util.h"

using namespace pymx;

namespace {

void expect_invalid(const std::function<void()>& f, const char* fragment) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT(e.status() == Status::kInvalidArg);
    if (std::strstr(e.what(), fragment) == nullptr) {
      std::fprintf(stderr, "message '%s' lacks '%s'\n", e.what(), fragment);
      std::exit(1);
    }
    return;
  }
  std::fprintf(stderr, "expected an error mentioning '%s'\n", fragment);
  std::exit(1);
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Each text parses to strtod's value, bit for bit (including the sign of zero).
void test_floats_match_strtod() {
  const char* texts[] = {"1.0",   "-0.25",  "0.1",      "3",         "-0.0",     "+2.5",
                         "1e-05", "1E3",    "inf",      "-inf",      "2.",       ".5",
                         "0.3",   "123456789012345", "1234567890123456", "0.000001",
                         "9007199254740993",  "1.7976931348623157e+308", "5e-324", " 4.5 "};
  for (const char* text : texts) {
    const double got = Attrs{{"x", text}}.get_float("x");
    EXPECT(same_bits(got, std::strtod(text, nullptr)));
  }
  EXPECT(std::isnan(Attrs{{"x", "nan"}}.get_float("x")));
  // Random plain decimals of up to 17 digits, as Python's repr writes them.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    char text[64];
    const int digits = 1 + static_cast<int>(rng() % 17);
    const int point = static_cast<int>(rng() % (digits + 1));
    int n = (rng() % 2) ? std::snprintf(text, sizeof text, "-") : 0;
    for (int d = 0; d < digits; ++d) {
      if (d == point && d > 0) text[n++] = '.';
      text[n++] = static_cast<char>('0' + rng() % 10);
    }
    text[n] = '\0';
    const double got = Attrs{{"x", text}}.get_float("x");
    if (!same_bits(got, std::strtod(text, nullptr))) {
      std::fprintf(stderr, "'%s' parsed as %.17g, strtod gives %.17g\n", text, got,
                   std::strtod(text, nullptr));
      std::exit(1);
    }
  }
}

void test_ints_shapes_bools() {
  Attrs a{{"i", "-42"},       {"big", "9223372036854775807"}, {"f", "2.0"},   {"sp", " 7 "},
          {"t", "(1, 2, 3)"}, {"one", "(3,)"},                {"l", "[4,5]"}, {"bare", "6"},
          {"e", "()"},        {"ft", "(2.0, 3)"},             {"b", " True"}, {"n", "None"}};
  EXPECT(a.get_int("i") == -42);
  EXPECT(a.get_int("big") == INT64_MAX);
  EXPECT(a.get_int("f") == 2);
  EXPECT(a.get_int("sp") == 7);
  EXPECT(a.get_shape("t") == Shape({1, 2, 3}));
  EXPECT(a.get_shape("one") == Shape({3}));
  EXPECT(a.get_shape("l") == Shape({4, 5}));
  EXPECT(a.get_shape("bare") == Shape({6}));
  EXPECT(a.get_shape("e").empty());
  EXPECT(a.get_shape("ft") == Shape({2, 3}));
  EXPECT(a.get_bool("b", false));
  EXPECT(a.get_int("n", 5) == 5 && a.get_float("n", 1.5) == 1.5 && !a.get_bool("n", false));
  EXPECT(!a.get_optional_shape("n").has_value() && a.get_str("n", "x") == "x");
  EXPECT(parse_device(" gpu(1) ") == Device::gpu(1));
}

void test_errors_name_key_and_value() {
  Attrs a{{"f", "1.5.2"}, {"h", "12abc"}, {"s", "(1, x)"}, {"g", "2.5"}, {"b", "yes"},
          {"m", "-"},     {"o", "99999999999999999999"}};
  expect_invalid([&] { a.get_float("f"); }, "'f' must be a number, got '1.5.2'");
  expect_invalid([&] { a.get_int("h"); }, "'h' must be an integer, got '12abc'");
  expect_invalid([&] { a.get_shape("s"); }, "'s' must be a tuple of integers, got '(1, x)'");
  expect_invalid([&] { a.get_int("g"); }, "got '2.5'");
  expect_invalid([&] { a.get_bool("b", false); }, "got 'yes'");
  expect_invalid([&] { a.get_float("m"); }, "got '-'");
  expect_invalid([&] { a.get_int("o"); }, "got '99999999999999999999'");
  expect_invalid([&] { a.get_float("absent"); }, "missing required attribute 'absent'");
  expect_invalid([] { parse_device("cpu()"); }, "cannot parse device 'cpu()'");
}

}  // namespace

int main() {
  test_floats_match_strtod();
  test_ints_shapes_bools();
  test_errors_name_key_and_value();
  std::printf("test_attrs: ok\n");
  return 0;
}
