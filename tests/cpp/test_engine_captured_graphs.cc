// CapturedGraphs (engine/src/captured_graphs.h) against a fake CUDA that records what is captured
// and launched: a key runs directly the first time, is captured the second and replayed from
// then on; failed, unreplayable and workspace-changing captures are refused for good (the kernels
// then run directly, and a real error still reaches the caller), as are keys whose capture
// cannot begin; at most four keys are kept, the least recently used graph destroyed; several
// workers on one pool capture a key once.
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "captured_graphs.h"
#include "test_util.h"

using pymx::CaptureKey;
using pymx::CapturedGraphs;
using pymx::GraphCalls;

namespace {

// Streams are plain addresses here; a graph is a counter value the fake hands out.
class FakeCuda {
 public:
  GraphCalls calls() {
    return {
        [this](void* stream) {
          std::lock_guard<std::mutex> lock(mu_);
          ++begin_attempts;
          if (fail_begin) throw std::runtime_error("the stream cannot begin a capture");
          EXPECT(capturing_.insert(stream).second, "begin_capture on a stream already capturing");
          ++begun;
        },
        [this](void* stream) -> void* {
          std::lock_guard<std::mutex> lock(mu_);
          EXPECT(capturing_.erase(stream) == 1, "end_capture without begin_capture");
          if (refuse_next) {
            refuse_next = false;
            return nullptr;
          }
          live_.insert(++made);
          return reinterpret_cast<void*>(made);
        },
        [this](void* graph, void*) {
          std::lock_guard<std::mutex> lock(mu_);
          EXPECT(live_.count(reinterpret_cast<intptr_t>(graph)) == 1, "launch of a dead graph");
          ++launches;
        },
        [this](void* graph) {
          if (graph == nullptr) return;
          std::lock_guard<std::mutex> lock(mu_);
          EXPECT(live_.erase(reinterpret_cast<intptr_t>(graph)) == 1, "destroy of a dead graph");
          ++destroyed;
        }};
  }

  bool capturing(void* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    return capturing_.count(stream) == 1;
  }
  size_t live_graphs() {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }

  std::atomic<int> begin_attempts{0}, begun{0}, launches{0}, destroyed{0};
  std::atomic<bool> refuse_next{false}, fail_begin{false};
  intptr_t made = 0;  // guarded by mu_

 private:
  std::mutex mu_;
  std::set<void*> capturing_;
  std::set<intptr_t> live_;
};

// The kernels of one bulk op: counted as run directly, or as recorded while capturing.
struct Kernels {
  FakeCuda* cuda;
  void* stream;
  std::atomic<int> direct{0}, recorded{0};
  void operator()() {
    if (cuda->capturing(stream)) {
      ++recorded;
    } else {
      ++direct;
    }
  }
};

void* const kStream = reinterpret_cast<void*>(0x1000);
uint64_t fixed_generation() { return 7; }

void test_first_run_direct_second_captured_then_replayed() {
  FakeCuda cuda;
  Kernels kernels{&cuda, kStream};
  const pymx::CaptureStats before = pymx::capture_stats();
  {
    CapturedGraphs graphs(cuda.calls());
    for (int i = 0; i < 5; ++i) graphs.run({1, 2, 3}, kStream, std::ref(kernels), fixed_generation);
    EXPECT(kernels.direct == 1 && kernels.recorded == 1, kernels.direct.load(), " ",
           kernels.recorded.load());
    EXPECT(cuda.begun == 1 && cuda.launches == 4, cuda.begun.load(), " ", cuda.launches.load());
    const pymx::CaptureStats after = pymx::capture_stats();
    EXPECT(after.captured == before.captured + 1 && after.replayed == before.replayed + 3 &&
           after.refused == before.refused);
  }
  EXPECT(cuda.live_graphs() == 0, "the pool's graphs outlived it");
}

void test_refused_captures_run_directly_for_good() {
  FakeCuda cuda;
  CapturedGraphs graphs(cuda.calls());
  const uint64_t refused_before = pymx::capture_stats().refused;

  // Not replayable (end_capture gives no graph).
  Kernels unreplayable{&cuda, kStream};
  cuda.refuse_next = true;
  for (int i = 0; i < 4; ++i) graphs.run({1}, kStream, std::ref(unreplayable), fixed_generation);
  EXPECT(unreplayable.direct == 4 && unreplayable.recorded == 1 && cuda.begun == 1);

  // A kernel that cannot be captured (throws while capturing, works directly).
  int direct = 0;
  auto fails_in_capture = [&] {
    if (cuda.capturing(kStream)) throw std::runtime_error("operation not permitted when capturing");
    ++direct;
  };
  for (int i = 0; i < 4; ++i) graphs.run({2}, kStream, fails_in_capture, fixed_generation);
  EXPECT(direct == 4 && cuda.begun == 2);

  // The workspace reallocated during the capture: the graph addresses the old one.
  uint64_t generation = 1;
  Kernels grows{&cuda, kStream};
  auto growing = [&] {
    grows();
    if (cuda.capturing(kStream)) ++generation;
  };
  for (int i = 0; i < 4; ++i) graphs.run({3}, kStream, growing, [&] { return generation; });
  // Destroyed: this graph and the one the failed capture above still ended with.
  EXPECT(grows.direct == 4 && cuda.begun == 3 && cuda.destroyed == 2 && cuda.launches == 0,
         grows.direct.load(), " ", cuda.begun.load(), " ", cuda.destroyed.load(), " ",
         cuda.launches.load());
  EXPECT(pymx::capture_stats().refused == refused_before + 3);

  // A real error: raised to the caller when first seen, and again after the failed capture.
  for (int i = 0; i < 3; ++i)
    expect_throws([&] {
      graphs.run({4}, kStream, [] { throw std::runtime_error("bad index 12"); }, fixed_generation);
    }, "bad index 12", "real error");
  EXPECT(cuda.begun == 4, "a refused key was captured again");

  // A capture that cannot even begin: the key is refused, its kernels run directly.
  cuda.fail_begin = true;
  Kernels no_capture{&cuda, kStream};
  const int attempts_before = cuda.begin_attempts;
  for (int i = 0; i < 4; ++i) graphs.run({5}, kStream, std::ref(no_capture), fixed_generation);
  EXPECT(no_capture.direct == 4 && no_capture.recorded == 0 &&
             cuda.begin_attempts == attempts_before + 1 && !cuda.capturing(kStream),
         no_capture.direct.load(), " ", cuda.begin_attempts.load() - attempts_before);
  EXPECT(pymx::capture_stats().refused == refused_before + 5);
}

void test_least_recently_used_graph_goes_first() {
  FakeCuda cuda;
  CapturedGraphs graphs(cuda.calls());
  Kernels kernels{&cuda, kStream};
  for (int64_t key = 0; key < 4; ++key)
    for (int i = 0; i < 2; ++i) graphs.run({key}, kStream, std::ref(kernels), fixed_generation);
  EXPECT(cuda.live_graphs() == 4);
  graphs.run({0}, kStream, std::ref(kernels), fixed_generation);  // key 1 is now the oldest
  graphs.run({9}, kStream, std::ref(kernels), fixed_generation);  // evicts key 1
  EXPECT(cuda.live_graphs() == 3 && cuda.destroyed == 1);
  const int launches = cuda.launches;
  graphs.run({0}, kStream, std::ref(kernels), fixed_generation);
  EXPECT(cuda.launches == launches + 1, "key 0 was evicted");
  const int direct = kernels.direct;
  graphs.run({1}, kStream, std::ref(kernels), fixed_generation);
  EXPECT(kernels.direct == direct + 1, "key 1 was kept");
}

void test_workers_sharing_a_pool_capture_each_key_once() {
  FakeCuda cuda;
  CapturedGraphs graphs(cuda.calls());
  constexpr int kThreads = 4, kRuns = 300, kKeys = 3;
  std::atomic<int> runs{0};
  std::vector<std::unique_ptr<Kernels>> kernels;
  for (int t = 0; t < kThreads; ++t)
    kernels.push_back(std::unique_ptr<Kernels>(
        new Kernels{&cuda, reinterpret_cast<void*>(0x100 * (t + 1))}));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Kernels& mine = *kernels[t];
      for (int i = 0; i < kRuns; ++i) {
        graphs.run({i % kKeys}, mine.stream, std::ref(mine), fixed_generation);
        ++runs;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  int direct = 0, recorded = 0;
  for (const auto& k : kernels) {
    direct += k->direct;
    recorded += k->recorded;
  }
  EXPECT(cuda.begun == kKeys && recorded == kKeys, cuda.begun.load(), " captures");
  // Every run either ran its kernels or launched a graph (a capture launches its graph once).
  EXPECT(direct + cuda.launches == runs, direct, " + ", cuda.launches.load(), " != ", runs.load());
}

}  // namespace

int main() {
  test_first_run_direct_second_captured_then_replayed();
  test_refused_captures_run_directly_for_good();
  test_least_recently_used_graph_goes_first();
  test_workers_sharing_a_pool_capture_each_key_once();
  std::printf("captured graphs: capture, replay, refusal, eviction, concurrency hold\nPASSED\n");
  return 0;
}
