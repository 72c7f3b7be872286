// The GPU events a var hands to an op before it runs (Var::collect_events, Note [GPU completion
// by events] in threaded_engine.cc), with fake events: an op waits for the write and, to write,
// for the reads on other streams; nothing on its own stream; nothing the stream already waited
// for (a read on that stream after the write); the host waits for everything.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "test_util.h"
#include "var.h"

using pymx::GpuEvent;
using pymx::GpuEventPtr;
using pymx::Var;

namespace {

void* const kCopyStream = reinterpret_cast<void*>(0x10);
void* const kStreamA = reinterpret_cast<void*>(0x20);
void* const kStreamB = reinterpret_cast<void*>(0x30);
void* const kHost = nullptr;

GpuEventPtr event_on(void* stream) {
  return std::make_shared<GpuEvent>(GpuEvent{nullptr, stream, 0});
}

std::vector<GpuEventPtr> waits(Var* var, bool for_write, void* stream) {
  std::vector<GpuEventPtr> events;
  var->collect_events(for_write, stream, &events);
  return events;
}

bool same(std::vector<GpuEventPtr> got, std::vector<GpuEventPtr> want) {
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  return got == want;
}

void test_waits_follow_writes_and_reads() {
  Var* var = Var::acquire(nullptr);
  const GpuEventPtr copied = event_on(kCopyStream);  // a parameter copied in from the host
  var->set_writer_event(copied);
  EXPECT(same(waits(var, false, kStreamA), {copied}));
  EXPECT(same(waits(var, false, kCopyStream), {}), "the writer's own stream is ordered");

  // A read on stream A waited for the copy: later ops on A need not wait again, those on B do.
  const GpuEventPtr read_a = event_on(kStreamA);
  var->add_reader_event(read_a);
  EXPECT(same(waits(var, false, kStreamA), {}));
  EXPECT(same(waits(var, false, kStreamB), {copied}));
  EXPECT(same(waits(var, true, kStreamA), {}), "A's read and the copy A waited for");
  EXPECT(same(waits(var, true, kStreamB), {copied, read_a}));
  EXPECT(same(waits(var, false, kHost), {copied}));
  EXPECT(same(waits(var, true, kHost), {copied, read_a}));

  // A newer read on A stands for the older one.
  const GpuEventPtr read_a2 = event_on(kStreamA);
  var->add_reader_event(read_a2);
  EXPECT(same(waits(var, true, kStreamB), {copied, read_a2}));

  // A new write drops the reads: stream A waits for it again.
  const GpuEventPtr written_b = event_on(kStreamB);
  var->set_writer_event(written_b);
  EXPECT(same(waits(var, false, kStreamA), {written_b}));
  EXPECT(same(waits(var, true, kStreamB), {}));
  Var::release(var);
}

}  // namespace

int main() {
  test_waits_follow_writes_and_reads();
  std::printf("var events: writes, reads and streams already ordered hold\nPASSED\n");
  return 0;
}
