// parallel_for / parallel_for_parts (engine/src/parallel.h): coverage of the range, grain,
// nesting, exceptions, concurrent callers, chunks of a caller that finds the pool busy, and use
// after fork().
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "parallel.h"
#include "test_util.h"

using pymx::parallel_for;
using pymx::parallel_for_parts;
using pymx::parallel_max_threads;
using pymx::parallel_parts;

// Every index in [begin, end) is visited exactly once, in chunks of at least `grain`.
void check_cover(int64_t begin, int64_t end, int64_t grain) {
  std::vector<std::atomic<int>> hits(end > begin ? end - begin : 0);
  std::atomic<int> short_chunks{0};
  parallel_for(begin, end, grain, [&](int64_t lo, int64_t hi) {
    EXPECT(begin <= lo && lo < hi && hi <= end, "chunk [", lo, ", ", hi, ") outside the range");
    if (hi - lo < grain && hi != end) ++short_chunks;
    for (int64_t i = lo; i < hi; ++i) ++hits[i - begin];
  });
  for (size_t i = 0; i < hits.size(); ++i)
    EXPECT(hits[i] == 1, "index ", begin + int64_t(i), " visited ", hits[i].load(), " times");
  EXPECT(short_chunks == 0, short_chunks.load(), " chunks shorter than grain ", grain);
}

void test_cover() {
  check_cover(0, 0, 1);
  check_cover(5, 3, 1);  // empty: fn is not called
  check_cover(0, 1, 1);
  check_cover(-7, 1000, 1);
  check_cover(0, 100000, 1024);
  check_cover(3, 10, 100);  // one chunk
}

void test_parts() {
  EXPECT(parallel_max_threads() >= 1);
  EXPECT(parallel_parts(0, 1) == 0);
  EXPECT(parallel_parts(1, 1) == 1);
  const int64_t most =
      parallel_max_threads() == 1 ? 1 : pymx::kPartsPerThread * parallel_max_threads();
  EXPECT(parallel_parts(1000, 1) == most, parallel_parts(1000, 1), " parts, expected ", most);
  EXPECT(parallel_parts(10, 100) == 1, "fewer items than one grain make one part");
  const int64_t n = 1001;
  const int64_t parts = parallel_parts(n, 1);
  std::vector<int> part_of(n, -1);
  std::vector<std::atomic<int>> seen(parts);
  parallel_for_parts(n, 1, [&](int64_t part, int64_t lo, int64_t hi) {
    EXPECT(part >= 0 && part < parts);
    ++seen[part];
    for (int64_t i = lo; i < hi; ++i) part_of[i] = static_cast<int>(part);
  });
  for (int64_t p = 0; p < parts; ++p)
    EXPECT(seen[p] == 1, "part ", p, " ran ", seen[p].load(), " times");
  for (int64_t i = 1; i < n; ++i)
    EXPECT(part_of[i] >= part_of[i - 1], "parts are contiguous and in order");
}

void test_nested_runs_serially() {
  std::atomic<int64_t> sum{0};
  parallel_for(0, 64, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const std::thread::id outer = std::this_thread::get_id();
      parallel_for(0, 100, 1, [&](int64_t a, int64_t b) {
        EXPECT(std::this_thread::get_id() == outer, "a nested loop left its thread");
        EXPECT(a == 0 && b == 100, "a nested loop was split");
        sum += b - a;
      });
    }
  });
  EXPECT(sum == 6400, "sum ", sum.load());
}

void test_exception() {
  expect_throws([] {
    parallel_for(0, 1000, 1, [](int64_t lo, int64_t hi) {
      if (lo <= 500 && 500 < hi) throw std::runtime_error("chunk with 500 failed");
    });
  }, "chunk with 500 failed", "exception from a chunk");
  check_cover(0, 1000, 1);  // the pool is usable afterwards
}

void test_concurrent_callers() {
  // Two "engine workers" hammering the pool: both finish and both see full coverage.
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t)
    callers.emplace_back([] {
      for (int rep = 0; rep < 200; ++rep) check_cover(0, 5000, 16);
    });
  for (auto& c : callers) c.join();
}

// The (lo, hi) chunks parallel_for(0, n, grain) ran, sorted.
std::vector<std::pair<int64_t, int64_t>> chunks_of(int64_t n, int64_t grain) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(lo, hi);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

void test_busy_pool_runs_the_same_chunks() {
  // A caller that finds the pool busy (another device's worker mid-loop) runs its loop itself,
  // in the chunks the pool would have used (Note [Deterministic mode]).
  const auto with_free_pool = chunks_of(1000, 7);
  std::atomic<bool> holding{false}, release{false};
  std::thread holder([&] {
    parallel_for(0, parallel_max_threads(), 1, [&](int64_t, int64_t) {
      holding = true;
      while (!release) std::this_thread::yield();
    });
  });
  while (!holding && parallel_max_threads() > 1) std::this_thread::yield();
  const auto with_busy_pool = chunks_of(1000, 7);
  release = true;
  holder.join();
  EXPECT(with_busy_pool == with_free_pool, "a busy pool gave ", with_busy_pool.size(),
         " chunks, a free one ", with_free_pool.size());
}

void test_fork() {
  check_cover(0, 10000, 1);  // helpers started in the parent
  const pid_t pid = fork();
  EXPECT(pid >= 0, "fork failed");
  if (pid == 0) {
    check_cover(0, 10000, 1);  // the child's fresh pool works (it would hang on dead helpers)
    _exit(0);
  }
  int status = 0;
  EXPECT(waitpid(pid, &status, 0) == pid);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed, status ", status);
  check_cover(0, 10000, 1);  // and the parent's still does
}

int main() {
  test_cover();
  test_parts();
  test_nested_runs_serially();
  test_exception();
  test_concurrent_callers();
  test_busy_pool_runs_the_same_chunks();
  test_fork();
  std::printf("test_parallel: ok (%d threads)\n", parallel_max_threads());
  return 0;
}
