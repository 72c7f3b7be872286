// Allocation at first use (Note [Allocation at first use], engine/src/ndarray.cc): outputs of
// queued ops take no memory until their op runs, concurrent first uses allocate once, sizes no
// memory could hold are refused at once, and results are unchanged. Run under ThreadSanitizer
// in CI with the other engine tests.
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "pymx/ndarray.h"
#include "pymx/op.h"
#include "pymx/storage.h"
#include "test_util.h"

using namespace pymx;

namespace {

const Device kCpu = Device::cpu(0);

NDArray filled(const Shape& shape, float value) {
  NDArray a(shape, kCpu, DType::kFloat32);
  std::vector<float> host(static_cast<size_t>(a.size()), value);
  a.sync_copy_from_cpu(host.data(), a.nbytes());
  return a;
}

std::vector<float> read(const NDArray& a) {
  std::vector<float> host(static_cast<size_t>(a.size()));
  a.sync_copy_to_cpu(host.data(), a.nbytes());
  return host;
}

// An op on `array`'s var that blocks its worker until release() is called: everything pushed
// after it on that array waits, queued.
class Gate {
 public:
  explicit Gate(const NDArray& array) {
    Engine::get()->push_sync(
        [this](RunContext) {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [this] { return open_; });
        },
        kCpu, {}, {array.var()}, FnProperty::kNormal, 0, "gate");
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// A chain of 16 additions of 4 MiB arrays pushed behind a closed gate holds no memory for them
// until they run; once run, every intermediate has been freed and the result is right.
void queued_outputs_take_no_memory() {
  const Shape shape = {1 << 20};  // 4 MiB of float32
  NDArray x = filled(shape, 1.f);
  NDArray one = filled(shape, 1.f);
  Gate gate(x);
  const uint64_t before = storage::stats(kCpu).in_use;
  NDArray y = x;
  for (int i = 0; i < 16; ++i) y = invoke("add", {y, one})[0];
  const uint64_t queued = storage::stats(kCpu).in_use;
  gate.release();  // before any check: a failing check exits, and exit waits for the workers
  EXPECT(queued == before, "16 queued outputs already hold ", queued - before, " bytes");
  const std::vector<float> result = read(y);
  EXPECT(result.front() == 17.f && result.back() == 17.f, "got ", result.front());
  Engine::get()->wait_for_all();  // the intermediates' frees are queued ops too
  const uint64_t after = storage::stats(kCpu).in_use;
  EXPECT(after == before + (4u << 20), "only y should remain allocated, in use grew by ",
         after - before);
}

// Several threads ask for the address of one never-used chunk at once: one allocation, one
// address for all.
void concurrent_first_uses_allocate_once() {
  for (int round = 0; round < 20; ++round) {
    Engine::get()->wait_for_all();  // the last round's array is freed by then
    NDArray a({4096}, kCpu, DType::kFloat32, Allocation::kAtFirstUse);
    const uint64_t before = storage::stats(kCpu).in_use;
    std::vector<void*> seen(4, nullptr);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        ready.fetch_add(1);
        while (ready.load() < 4) {
        }
        seen[t] = a.blob().dptr;
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (void* address : seen) EXPECT(address != nullptr && address == seen[0]);
    EXPECT(storage::stats(kCpu).in_use == before + 16384, "allocated more than once");
  }
}

// Pushed ops and the pushing thread race for the first use of an op's output: the kernel writes
// where the reader later reads.
void pusher_and_worker_agree_on_the_address() {
  for (int round = 0; round < 50; ++round) {
    NDArray x = filled({257}, float(round));
    NDArray y = invoke("negative", {x})[0];
    void* seen_by_pusher = y.blob().dptr;  // may allocate before the kernel runs
    const std::vector<float> result = read(y);
    EXPECT(result[0] == -float(round) && result[256] == -float(round));
    EXPECT(y.blob().dptr == seen_by_pusher);
  }
}

// A size beyond all of the machine's memory is refused where the array is made, with the
// numbers, and the process goes on.
void impossible_sizes_are_refused_at_once() {
  const size_t huge = size_t(1) << 62;
  EXPECT_THROWS(NDArray({int64_t(huge / 4)}, kCpu, DType::kFloat32, Allocation::kAtFirstUse),
                "4611686018427387904 bytes");
  NDArray x = filled({8}, 2.f);
  EXPECT(read(invoke("add", {x, x})[0])[7] == 4.f);
}

}  // namespace

int main() {
  queued_outputs_take_no_memory();
  concurrent_first_uses_allocate_once();
  pusher_and_worker_agree_on_the_address();
  impossible_sizes_are_refused_at_once();
  Engine::get()->wait_for_all();
  std::printf("ok\n");
  return 0;
}
