// Smoke test of the core without Python: attrs parsing, invoke on cpu(0) and the mixed-device
// error, broadcasting, reductions, matmul, out= validation and an async error surfacing at a wait.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pymx/ndarray.h"
#include "pymx/op.h"

using namespace pymx;

namespace {

int g_failures = 0;

#define EXPECT(cond)                                                       \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                        \
    }                                                                      \
  } while (0)

// Runs `fn` and expects an Error whose message contains every string in `parts`.
template <typename F>
void expect_error(F fn, std::vector<std::string> parts, Status status = Status::kInvalidArg) {
  try {
    fn();
  } catch (const Error& e) {
    for (const std::string& p : parts) {
      if (std::string(e.what()).find(p) == std::string::npos) {
        std::fprintf(stderr, "error message '%s' lacks '%s'\n", e.what(), p.c_str());
        ++g_failures;
      }
    }
    EXPECT(e.status() == status);
    return;
  }
  std::fprintf(stderr, "expected an error containing '%s'\n", parts.empty() ? "" : parts[0].c_str());
  ++g_failures;
}

NDArray from(const std::vector<float>& v, const Shape& shape, Device dev = Device::cpu()) {
  NDArray a(shape, dev, DType::kFloat32);
  a.sync_copy_from_cpu(v.data(), v.size() * sizeof(float));
  return a;
}

std::vector<float> values(const NDArray& a) {
  std::vector<float> v(static_cast<size_t>(a.size()));
  a.sync_copy_to_cpu(v.data(), v.size() * sizeof(float));
  return v;
}

void test_attrs() {
  Attrs a{{"i", "3"}, {"f", "-inf"}, {"n", "nan"}, {"b", "True"}, {"t", "(1, 2)"}, {"l", "[4,5]"},
          {"one", "(3,)"}, {"s", "7"}, {"none", "None"}, {"e", "()"}, {"d", "int64"}};
  EXPECT(a.get_int("i") == 3);
  EXPECT(std::isinf(a.get_float("f")) && a.get_float("f") < 0);
  EXPECT(std::isnan(a.get_float("n")));
  EXPECT(a.get_bool("b", false));
  EXPECT(a.get_shape("t") == Shape({1, 2}));
  EXPECT(a.get_shape("l") == Shape({4, 5}));
  EXPECT(a.get_shape("one") == Shape({3}));
  EXPECT(a.get_shape("s") == Shape({7}));
  EXPECT(a.get_shape("e").empty());
  EXPECT(!a.has("none") && !a.get_optional_int("none").has_value());
  EXPECT(a.get_dtype("d", DType::kFloat32) == DType::kInt64);
  EXPECT(parse_device("gpu(1)") == Device::gpu(1));
  expect_error([&] { a.get_int("t"); }, {"'t'", "(1, 2)"});
  expect_error([&] { a.get_int("missing"); }, {"missing"});
  expect_error([] { parse_dtype("complex64"); }, {"complex64"}, Status::kType);
}

void test_add_and_devices() {
  NDArray x = from({1, 2, 3}, {3});
  NDArray y = from({10, 20, 30}, {3});
  NDArray z = invoke("add", {x, y})[0];
  EXPECT(values(z) == std::vector<float>({11, 22, 33}));

  NDArray other = from({1, 1, 1}, {3}, Device::cpu(1));
  expect_error([&] { invoke("add", {x, other}); }, {"add", "cpu(0)", "cpu(1)"});
  // The process stays usable after the error.
  EXPECT(values(invoke("multiply", {x, x})[0]) == std::vector<float>({1, 4, 9}));
  // Ops on cpu(1) produce results on cpu(1).
  EXPECT(invoke("add", {other, other})[0].device() == Device::cpu(1));
}

void test_broadcast_reduce_matmul() {
  NDArray a = from({1, 2, 3, 4, 5, 6}, {2, 3});
  NDArray b = from({10, 20, 30}, {3});
  EXPECT(values(invoke("add", {a, b})[0]) == std::vector<float>({11, 22, 33, 14, 25, 36}));
  NDArray col = invoke("sum", {a}, Attrs{{"axis", "(0,)"}})[0];
  EXPECT(values(col) == std::vector<float>({5, 7, 9}));
  NDArray m = invoke("matmul", {a, invoke("transpose", {a}, {})[0]})[0];
  EXPECT(m.shape() == Shape({2, 2}));
  EXPECT(values(m) == std::vector<float>({14, 32, 32, 77}));
  expect_error([&] { invoke("add", {a, from({1, 2}, {2})}); }, {"(2, 3)", "(2,)"});
}

void test_out_and_async_errors() {
  NDArray a = from({1, 2}, {2});
  NDArray out(Shape{2}, Device::cpu(), DType::kFloat32);
  invoke(op_registry::get("add"), {a, a}, {}, Device::cpu(), {out});
  EXPECT(values(out) == std::vector<float>({2, 4}));
  NDArray bad(Shape{3}, Device::cpu(), DType::kFloat32);
  expect_error([&] { invoke(op_registry::get("add"), {a, a}, {}, Device::cpu(), {bad}); }, {"(3,)", "(2,)"});
  // An out-of-range index fails inside the kernel and surfaces at the wait, as an IndexError.
  NDArray idx(Shape{1}, Device::cpu(), DType::kInt64);
  const int64_t five = 5;
  idx.sync_copy_from_cpu(&five, sizeof(five));
  NDArray taken = invoke("take", {a, idx})[0];
  expect_error([&] { taken.wait_to_read(); }, {"index 5", "size 2"}, Status::kIndex);
  EXPECT(values(invoke("add", {a, a})[0]) == std::vector<float>({2, 4}));
}

void test_copy_and_cast() {
  NDArray a = from({1.5f, -2.5f}, {2});
  NDArray on1 = a.copy_to(Device::cpu(1));
  EXPECT(on1.device() == Device::cpu(1) && values(on1) == std::vector<float>({1.5f, -2.5f}));
  NDArray ints(Shape{2}, Device::cpu(), DType::kInt32);
  a.copy_to(ints);
  std::vector<int32_t> iv(2);
  ints.sync_copy_to_cpu(iv.data(), sizeof(int32_t) * 2);
  EXPECT(iv == std::vector<int32_t>({1, -2}));
  expect_error([&] { a.sync_copy_from_cpu(iv.data(), 3); }, {"3 bytes", "8 bytes"});
}

}  // namespace

int main() {
  test_attrs();
  test_add_and_devices();
  test_broadcast_reduce_matmul();
  test_out_and_async_errors();
  test_copy_and_cast();
  if (g_failures == 0) std::printf("test_ops_core: all passed\n");
  return g_failures == 0 ? 0 : 1;
}
