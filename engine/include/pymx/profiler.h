// The operator profiler (MXNet's mx.profiler): while it records, every op an engine runs becomes
// a span with its name, device, worker thread and host begin/end; a GPU op also gets its begin
// and end on the GPU, measured with timing events on its stream. pymx/profiler.py turns the spans
// into a Chrome trace file and an aggregate table. See Note [Operator profiler] in profiler.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "pymx/base.h"

namespace pymx {
namespace profiler {

namespace detail {
extern std::atomic<bool> recording;
}  // namespace detail

// True while spans are recorded (running and not paused): one relaxed load per op.
inline bool is_recording() { return detail::recording.load(std::memory_order_relaxed); }

// set_state('run' | 'stop') and pause() / resume(): spans are recorded while running and not
// paused. Neither clears the spans recorded so far.
void set_running(bool running);
void set_paused(bool paused);

// What an engine keeps on an op between its start and its end.
struct Span {
  bool active = false;
  int64_t host_begin_ns = 0;
  void* gpu_begin = nullptr;  // timing event recorded on the op's stream before it ran
};

// Called by a worker right before it runs an op (`stream` is nullptr on the host), and when the
// op completes (for a GPU op, after its work was launched on `stream`). Thread-safe.
Span begin_op(Device device, void* stream);
void end_op(Span* span, const char* name, Device device, void* stream);

// The spans recorded so far, as a Chrome trace (a JSON object with "traceEvents"), and as JSON
// aggregate statistics per device, timeline (host or gpu) and op name. Both wait for the GPU
// spans they report to finish on the device. `reset` forgets the spans the aggregate reports
// (and only those: spans that end while it is made are kept for the next report).
std::string trace_json();
std::string aggregate_json(bool reset = false);

// Forgets every span recorded so far.
void clear();

}  // namespace profiler
}  // namespace pymx
