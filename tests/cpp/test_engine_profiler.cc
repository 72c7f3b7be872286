// The profiler under concurrent engines: several threads push named ops on 4 workers (and the
// naive engine) while recording; every op that ran while recording is counted exactly once, none
// pushed while stopped or paused is, the reports stay valid while workers append, and reports
// that reset while workers append lose no span between them (runs under ThreadSanitizer in CI).
#include <string>
#include <thread>
#include <vector>

#include "pymx/engine.h"
#include "pymx/profiler.h"
#include "test_util.h"

using namespace pymx;

namespace {

// The "count" of the aggregate entry named `name` on the host timeline, 0 when absent.
long count_of(const std::string& aggregate, const std::string& name) {
  const std::string key = "\"name\": \"" + name + "\", \"count\": ";
  const size_t at = aggregate.find(key);
  return at == std::string::npos ? 0 : std::stol(aggregate.substr(at + key.size()));
}

void push_named(Engine* e, VarHandle var, const char* name, int n) {
  for (int i = 0; i < n; ++i) e->push_sync([](RunContext) {}, Device::cpu(0), {}, {var},
                                           FnProperty::kNormal, 0, name);
}

void test_counts(const std::string& kind) {
  std::unique_ptr<Engine> e = make_engine(kind, 4);
  profiler::clear();

  VarHandle unrecorded = e->new_var();
  push_named(e.get(), unrecorded, "before_run", 50);
  e->wait_for_all();

  profiler::set_running(true);
  std::vector<std::thread> pushers;
  std::vector<VarHandle> vars;
  for (int t = 0; t < 4; ++t) vars.push_back(e->new_var());
  for (int t = 0; t < 4; ++t)
    pushers.emplace_back([&, t] {
      push_named(e.get(), vars[t], "recorded", 500);
      e->push_sync([](RunContext) {}, Device::cpu(0), {vars[t]}, {}, FnProperty::kNormal, 0,
                   "read");
    });
  // A report while the workers append must not disturb them.
  const std::string early = profiler::aggregate_json();
  EXPECT(count_of(early, "recorded") <= 2000, early);
  for (std::thread& t : pushers) t.join();
  e->wait_for_all();

  profiler::set_paused(true);
  push_named(e.get(), unrecorded, "while_paused", 50);
  e->wait_for_all();
  profiler::set_paused(false);
  profiler::set_running(false);
  push_named(e.get(), unrecorded, "after_stop", 50);
  e->wait_for_all();

  const std::string aggregate = profiler::aggregate_json();
  EXPECT(count_of(aggregate, "recorded") == 2000, kind, ": ", aggregate);
  EXPECT(count_of(aggregate, "read") == 4, kind, ": ", aggregate);
  for (const char* absent : {"before_run", "while_paused", "after_stop"})
    EXPECT(count_of(aggregate, absent) == 0, kind, ": ", absent, " was recorded: ", aggregate);
  const std::string trace = profiler::trace_json();
  EXPECT(trace.find("\"cpu(0) workers\"") != std::string::npos, trace.substr(0, 400));

  profiler::clear();
  EXPECT(count_of(profiler::aggregate_json(), "recorded") == 0, "clear() kept spans");
  for (VarHandle v : vars) e->delete_var({}, Device::cpu(0), v);
  e->delete_var({}, Device::cpu(0), unrecorded);
  e->wait_for_all();
}

// Aggregates with reset taken while ops run: each span is in exactly one report.
void test_reset_while_recording(const std::string& kind) {
  std::unique_ptr<Engine> e = make_engine(kind, 4);
  profiler::clear();
  profiler::set_running(true);
  std::vector<VarHandle> vars;
  for (int t = 0; t < 4; ++t) vars.push_back(e->new_var());
  std::vector<std::thread> pushers;
  for (int t = 0; t < 4; ++t)
    pushers.emplace_back([&, t] { push_named(e.get(), vars[t], "recorded", 2000); });
  long reported = 0;
  for (int i = 0; i < 200; ++i) reported += count_of(profiler::aggregate_json(true), "recorded");
  for (std::thread& t : pushers) t.join();
  e->wait_for_all();
  profiler::set_running(false);
  reported += count_of(profiler::aggregate_json(true), "recorded");
  EXPECT(reported == 8000, kind, ": the reports with reset counted ", reported, " of 8000 spans");
  EXPECT(count_of(profiler::aggregate_json(), "recorded") == 0, "reset kept reported spans");
  for (VarHandle v : vars) e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
}

}  // namespace

int main() {
  test_counts("threaded");
  test_counts("naive");
  test_reset_while_recording("threaded");
  test_reset_while_recording("naive");
  std::printf("test_engine_profiler: ok\n");
  return 0;
}
