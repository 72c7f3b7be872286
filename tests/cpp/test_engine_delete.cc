// Var deletion order, versions, dump(), per-device pools, and the process engine across fork().
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pymx/engine.h"
#include "test_util.h"

using namespace pymx;

namespace {

void test_delete_runs_last(Engine* e) {
  VarHandle v = e->new_var();
  std::atomic<int> done{0};
  int seen_by_deleter = -1;
  for (int i = 0; i < 200; ++i) {
    auto slow = [&done](RunContext) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      done++;
    };
    if (i % 3 == 0) {
      e->push_sync(slow, Device::cpu(0), {}, {v});
    } else {
      e->push_sync(slow, Device::cpu(0), {v}, {});  // concurrent reads
    }
  }
  e->delete_var([&](RunContext) { seen_by_deleter = done.load(); }, Device::cpu(0), v);
  e->wait_for_all();
  EXPECT(seen_by_deleter == 200, "the deleter ran after ", seen_by_deleter, " of 200 ops");
}

void test_versions(Engine* e) {
  VarHandle v = e->new_var(), r = e->new_var();
  EXPECT(e->var_version(v) == 0);
  for (int i = 0; i < 10; ++i) e->push_sync([](RunContext) {}, Device::cpu(0), {r}, {v});
  e->wait_for_var(v);
  EXPECT(e->var_version(v) == 10 && e->var_version(r) == 0, "versions ", e->var_version(v), " ",
         e->var_version(r));
  e->delete_var({}, Device::cpu(0), v);
  e->delete_var({}, Device::cpu(0), r);
  e->wait_for_all();
}

// Reads of one var overlap; a write waits for them and runs alone.
void test_reads_overlap_writes_exclusive(Engine* e) {
  VarHandle v = e->new_var();
  std::atomic<int> running{0}, max_running{0};
  std::atomic<bool> overlap_with_write{false};
  auto read = [&](RunContext) {
    int now = ++running;
    int seen = max_running.load();
    while (now > seen && !max_running.compare_exchange_weak(seen, now)) {}
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --running;
  };
  auto write = [&](RunContext) {
    if (running.load() != 0) overlap_with_write = true;
  };
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 4; ++i) e->push_sync(read, Device::cpu(0), {v}, {});
    e->push_sync(write, Device::cpu(0), {}, {v});
  }
  e->wait_for_all();
  EXPECT(!overlap_with_write, "a write ran while reads were running");
  EXPECT(max_running.load() >= 2, "reads never overlapped with 4 workers (max ", max_running.load(), ")");
  e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
}

void test_devices_have_own_workers(Engine* e) {
  std::mutex mu;
  std::set<std::thread::id> cpu0, cpu1;
  VarHandle a = e->new_var(), b = e->new_var();
  for (int i = 0; i < 20; ++i) {
    e->push_sync([&](RunContext ctx) {
      EXPECT(ctx.device == Device::cpu(0) && ctx.stream == nullptr);
      std::lock_guard<std::mutex> lock(mu);
      cpu0.insert(std::this_thread::get_id());
    }, Device::cpu(0), {}, {a});
    e->push_sync([&](RunContext ctx) {
      EXPECT(ctx.device == Device::cpu(1));
      std::lock_guard<std::mutex> lock(mu);
      cpu1.insert(std::this_thread::get_id());
    }, Device::cpu(1), {}, {b});
  }
  e->wait_for_all();
  for (auto id : cpu0) EXPECT(cpu1.count(id) == 0, "cpu(0) and cpu(1) shared a worker thread");
  EXPECT(cpu0.count(std::this_thread::get_id()) == 0, "ops must not run on the pushing thread");
  e->delete_var({}, Device::cpu(0), a);
  e->delete_var({}, Device::cpu(1), b);
  e->wait_for_all();
}

void test_dump_lists_pending_ops(Engine* e) {
  VarHandle v = e->new_var();
  std::atomic<bool> release{false};
  e->push_sync([&](RunContext) { while (!release) std::this_thread::yield(); }, Device::cpu(0), {},
               {v}, FnProperty::kNormal, 0, "gate");
  e->push_sync([](RunContext) {}, Device::cpu(0), {v}, {}, FnProperty::kNormal, 0, "reader_after_gate");
  std::string dump = e->dump();
  release = true;
  e->wait_for_all();
  EXPECT(dump.find("running write 'gate'") != std::string::npos, dump);
  EXPECT(dump.find("R'reader_after_gate'") != std::string::npos, dump);
  EXPECT(e->dump().find("var ") == std::string::npos, "nothing pending after wait_for_all: ", e->dump());
  e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
}

// Deleted vars are recycled (Note [Var registry]): a new var never inherits a deleted one's
// version or its failure, even while that failure is not yet reported.
void test_recycled_vars_start_clean(Engine* e) {
  std::vector<VarHandle> vars;
  for (int round = 0; round < 4; ++round) {
    std::atomic<int> deleted{0};
    for (size_t i = 0; i < vars.size(); ++i) {
      e->push_sync([i](RunContext) {
        if (i % 2 == 0) throw std::runtime_error("failing write");
      }, Device::cpu(0), {}, {vars[i]});
      e->delete_var([&deleted](RunContext) { ++deleted; }, Device::cpu(0), vars[i]);
    }
    while (deleted < static_cast<int>(vars.size())) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the deletions complete
    vars.clear();
    for (int i = 0; i < 300; ++i) {
      VarHandle v = e->new_var();
      EXPECT(e->var_version(v) == 0, "round ", round, ": a new var has version ", e->var_version(v));
      e->wait_for_var(v);  // a recycled var carrying the unreported failure would throw here
      vars.push_back(v);
    }
    bool threw = false;
    try {
      e->wait_for_all();
    } catch (const std::exception&) {
      threw = true;
    }
    EXPECT(threw == (round > 0), "round ", round, ": failing writes reported: ", threw);
  }
  for (VarHandle v : vars) e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
}

// Two engines at once: each one's dump() lists only its own vars.
void test_dump_lists_own_vars_only() {
  auto mine = make_engine("threaded", 1), other = make_engine("threaded", 1);
  VarHandle v = other->new_var();
  std::atomic<bool> release{false};
  other->push_sync([&](RunContext) { while (!release) std::this_thread::yield(); },
                   Device::cpu(0), {}, {v}, FnProperty::kNormal, 0, "other_engines_gate");
  std::string dump = mine->dump();
  EXPECT(other->dump().find("other_engines_gate") != std::string::npos, other->dump());
  release = true;
  other->wait_for_all();
  EXPECT(dump.find("var ") == std::string::npos, "an idle engine listed another's var: ", dump);
  // `v` is never deleted: the engine releases it when destroyed.
}

// Push work, fork while it is pending, use the engine in both processes.
void test_fork() {
  Engine* e = Engine::get();
  VarHandle v = e->new_var();
  std::atomic<int> count{0};
  for (int i = 0; i < 1000; ++i) e->push_sync([&count](RunContext) { count++; }, Device::cpu(0), {}, {v});
  std::fflush(stdout);  // the child must not print our buffered lines again
  pid_t child = fork();
  EXPECT(child >= 0, "fork failed");
  if (child == 0) {
    // The pending work finished before fork (prepare waits for it).
    bool ok = count.load() == 1000;
    for (int i = 0; i < 500; ++i) e->push_sync([&count](RunContext) { count++; }, Device::cpu(1), {}, {v});
    e->wait_for_var(v);
    ok = ok && count.load() == 1500;
    _exit(ok ? 0 : 3);
  }
  for (int i = 0; i < 100; ++i) e->push_sync([&count](RunContext) { count++; }, Device::cpu(0), {}, {v});
  e->wait_for_var(v);
  EXPECT(count.load() == 1100, "parent count ", count.load());
  int status = 0;
  EXPECT(waitpid(child, &status, 0) == child);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed, status ", status);
  e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
}

// Constructed before main, so destroyed after the engine's atexit handler: it pushes on the
// process engine during static destruction, with ops from main still pending at return.
struct LateUser {
  std::atomic<int>* pending_count = nullptr;
  ~LateUser() {
    if (pending_count == nullptr) return;
    Engine* e = Engine::get();
    if (pending_count->load() != 300) {
      std::fprintf(stderr, "FAILED: exit did not finish pending ops (%d of 300)\n", pending_count->load());
      _exit(1);
    }
    VarHandle v = e->new_var();
    int late = 0;
    e->push_sync([&late](RunContext) { late = 1; }, Device::cpu(0), {}, {v});
    e->wait_for_var(v);
    e->delete_var({}, Device::cpu(0), v);
    if (late != 1) {
      std::fprintf(stderr, "FAILED: an op pushed during static destruction did not run\n");
      _exit(1);
    }
    std::printf("static destruction: late push ran\n");
  }
} late_user;

// Leaves slow ops pending when main returns.
void leave_work_pending_at_exit() {
  static std::atomic<int> count{0};
  Engine* e = Engine::get();
  VarHandle v = e->new_var();
  for (int i = 0; i < 300; ++i) {
    e->push_sync([](RunContext) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      count++;
    }, Device::cpu(0), {}, {v});
  }
  e->delete_var({}, Device::cpu(0), v);
  late_user.pending_count = &count;
}

}  // namespace

int main() {
  for (const char* kind : {"naive", "threaded"}) {
    auto engine = make_engine(kind, 4);
    test_delete_runs_last(engine.get());
    test_versions(engine.get());
    test_recycled_vars_start_clean(engine.get());
    std::printf("%s engine: deletion order, versions and recycled vars hold\n", kind);
  }
  {
    auto threaded = make_engine("threaded", 4);
    test_reads_overlap_writes_exclusive(threaded.get());
    test_devices_have_own_workers(threaded.get());
    test_dump_lists_pending_ops(threaded.get());
  }
  test_dump_lists_own_vars_only();  // its workers are gone: at fork only the process engine's (stopped by its fork hook) exist
  test_fork();
  std::printf("threaded engine: overlap, devices, dump, fork hold\nPASSED\n");
  leave_work_pending_at_exit();
  return 0;
}
