// A C++ program that embeds pymx through its C API (pymx/c_api.h): one dense layer,
// y = relu(x @ w + b), on the first GPU or else the CPU, then a function of our own pushed onto
// pymx's engine after it, and a bad call whose error the program reports and survives.
// Build: see CMakeLists.txt next to this file. Prints "name: values" lines.
#include <pymx/c_api.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// Turns a failed pmx_ call into an exception carrying pymx's message.
void check(int status, const char* call) {
  if (status != PMX_OK)
    throw std::runtime_error(std::string(call) + " failed: " + pmx_last_error());
}

// Owns one PmxArray handle.
class Array {
 public:
  explicit Array(PmxArray* handle) : handle_(handle) {}
  Array(const std::vector<int64_t>& shape, const std::vector<float>& values, int device_type,
        int device_id) {
    check(pmx_array_create(shape.data(), static_cast<int>(shape.size()), PMX_FLOAT32,
                           device_type, device_id, &handle_),
          "pmx_array_create");
    check(pmx_array_copy_from_cpu(handle_, values.data(), values.size() * sizeof(float)),
          "pmx_array_copy_from_cpu");
  }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  ~Array() { pmx_array_free(handle_); }

  PmxArray* get() const { return handle_; }

  size_t size() const {
    int ndim = 0;
    const int64_t* shape = nullptr;
    check(pmx_array_shape(handle_, &ndim, &shape), "pmx_array_shape");
    size_t size = 1;
    for (int i = 0; i < ndim; ++i) size *= static_cast<size_t>(shape[i]);
    return size;
  }

  // Blocks until the value is computed.
  std::vector<float> to_host() const {
    std::vector<float> values(size());
    check(pmx_array_copy_to_cpu(handle_, values.data(), values.size() * sizeof(float)),
          "pmx_array_copy_to_cpu");
    return values;
  }

 private:
  PmxArray* handle_ = nullptr;
};

// Runs operator `name` on `inputs`; returns its one output. Never blocks.
Array invoke(const char* name, std::vector<PmxArray*> inputs) {
  PmxOp* op = nullptr;
  check(pmx_op_find(name, &op), "pmx_op_find");
  int num_outputs = 0;
  PmxArray** outputs = nullptr;
  check(pmx_op_invoke(op, static_cast<int>(inputs.size()), inputs.data(), 0, nullptr, nullptr,
                      PMX_DEVICE_CPU, 0, 0, nullptr, &num_outputs, &outputs),
        name);
  for (int i = 1; i < num_outputs; ++i) pmx_array_free(outputs[i]);
  return Array(outputs[0]);
}

void print(const char* name, const std::vector<float>& values) {
  std::printf("%s:", name);
  for (float v : values) std::printf(" %.9g", v);
  std::printf("\n");
}

// Our own engine op: sums a CPU array's elements into a double.
struct SumTask {
  const float* data;
  size_t size;
  double* total;
};

int sum_on_worker(void* user_data, int /*device_type*/, int /*device_id*/, void* /*stream*/) {
  const auto* task = static_cast<const SumTask*>(user_data);
  double total = 0;
  for (size_t i = 0; i < task->size; ++i) total += task->data[i];
  *task->total = total;
  return PMX_OK;
}

void delete_task(void* user_data) { delete static_cast<SumTask*>(user_data); }

void run() {
  int major = 0, minor = 0;
  check(pmx_api_version(&major, &minor), "pmx_api_version");
  if (major != PMX_API_VERSION_MAJOR || minor < PMX_API_VERSION_MINOR)
    throw std::runtime_error("libpymx.so has C API " + std::to_string(major) + "." +
                             std::to_string(minor) + ", this program was built against " +
                             std::to_string(PMX_API_VERSION_MAJOR) + "." +
                             std::to_string(PMX_API_VERSION_MINOR));
  int gpus = 0;
  check(pmx_gpu_count(&gpus), "pmx_gpu_count");
  const int device_type = gpus > 0 ? PMX_DEVICE_GPU : PMX_DEVICE_CPU;
  std::printf("device: %s(0)\n", gpus > 0 ? "gpu" : "cpu");

  const Array x({2, 3}, {1, -2, 3, 0.5f, 4, -1}, device_type, 0);
  const Array w({3, 4}, {0.1f, -0.2f, 0.3f, 0.4f, 1, 0, -1, 0.5f, -0.3f, 0.2f, 0.1f, 2},
                device_type, 0);
  const Array b({4}, {0.05f, -0.1f, 0.2f, -3}, device_type, 0);
  const Array product = invoke("matmul", {x.get(), w.get()});
  const Array sum = invoke("add", {product.get(), b.get()});  // b broadcasts over the rows
  const Array y = invoke("relu", {sum.get()});
  print("y", y.to_host());

  // A function of ours, ordered after pymx's work by engine vars: it reads y's host copy.
  PmxArray* y_host_handle = nullptr;
  check(pmx_array_copy_to_device(y.get(), PMX_DEVICE_CPU, 0, &y_host_handle),
        "pmx_array_copy_to_device");
  const Array y_host(y_host_handle);
  void* data = nullptr;
  PmxVar *reads = nullptr, *total_var = nullptr;
  check(pmx_array_data(y_host.get(), &data), "pmx_array_data");
  check(pmx_array_var(y_host.get(), &reads), "pmx_array_var");
  check(pmx_var_new(&total_var), "pmx_var_new");
  double total = 0;
  check(pmx_engine_push(sum_on_worker, new SumTask{static_cast<const float*>(data), y_host.size(), &total},
                        delete_task, &reads, 1, &total_var, 1, PMX_DEVICE_CPU, 0, "sum_of_y"),
        "pmx_engine_push");
  check(pmx_var_wait(total_var), "pmx_var_wait");
  check(pmx_var_free(total_var), "pmx_var_free");
  std::printf("sum: %.9g\n", total);

  // A bad call fails with a message naming the shapes, and pymx stays usable.
  try {
    invoke("matmul", {x.get(), x.get()});
    throw std::logic_error("matmul of (2,3) by (2,3) should have failed");
  } catch (const std::runtime_error& error) {
    std::printf("error: %s\n", error.what());
  }
  print("y_again", invoke("relu", {sum.get()}).to_host());
}

}  // namespace

int main() {
  try {
    run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "embed: %s\n", error.what());
    return 1;
  }
  return 0;
}
