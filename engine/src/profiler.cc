// The operator profiler (pymx/profiler.h).
//
// Note [Operator profiler]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Off, it costs one relaxed atomic load per op. On, the worker that runs an op takes the host
// clock before it and, on a GPU, records a timing event on the op's stream; that is after the
// stream waited for the op's inputs, so the GPU begin is when the device reached the op. When the
// op completes (a GPU op: after its work was launched), the worker takes the clock again, records
// the end event and appends the span to one list under a mutex: a lock per op is cheap next to
// the op, and profiling is a diagnosis mode.
// GPU times are resolved when a report is asked for, outside that mutex so that workers keep
// running: the report waits for each end event and measures both events from a reference event
// of the device whose host time was taken the moment it completed (recorded on the idle legacy
// stream, which our non-blocking worker streams do not wait for), so GPU spans and host spans
// share one clock, to within the event's resolution (about a microsecond). The distance to the
// reference is a float of milliseconds, a microsecond coarse after 16 s: each recording takes
// its references afresh.
#include "pymx/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "pymx/gpu.h"

namespace pymx {
namespace profiler {

namespace detail {
std::atomic<bool> recording{false};
}  // namespace detail

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A small id per thread that ever ran a profiled op (the trace's "tid").
int thread_id() {
  static std::atomic<int> next{0};
  thread_local const int id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

struct Record {
  std::string name;
  Device device;
  int thread = 0;
  void* stream = nullptr;
  int64_t host_begin_ns = 0, host_end_ns = 0;
  void* gpu_begin = nullptr;  // timing events until resolved
  void* gpu_end = nullptr;
  int64_t gpu_begin_ns = 0, gpu_end_ns = 0;  // on the host clock, once resolved
};

// The host time of a completed timing event on one GPU.
struct Reference {
  void* event = nullptr;
  int64_t host_ns = 0;
};

class Profiler {
 public:
  void set_running(bool running) {
    if (running) forget_references();
    std::lock_guard<std::mutex> lock(state_mu_);
    running_ = running;
    detail::recording.store(running_ && !paused_, std::memory_order_relaxed);
  }

  void set_paused(bool paused) {
    std::lock_guard<std::mutex> lock(state_mu_);
    paused_ = paused;
    detail::recording.store(running_ && !paused_, std::memory_order_relaxed);
  }

  Span begin_op(Device device, void* stream) {
    Span span;
    if (stream != nullptr) {
      reference(device.id);  // before the begin event: the reference must not be later
      void* event = gpu::create_timing_event(device.id);
      try {
        gpu::record_event(event, stream);
      } catch (...) {
        gpu::destroy_event(device.id, event);
        throw;
      }
      span.gpu_begin = event;
    }
    span.host_begin_ns = now_ns();
    span.active = true;
    return span;
  }

  void end_op(Span* span, const char* name, Device device, void* stream) {
    span->active = false;
    Record record;
    record.host_end_ns = now_ns();
    record.host_begin_ns = span->host_begin_ns;
    record.name = name != nullptr ? name : "op";
    record.device = device;
    record.thread = thread_id();
    record.stream = stream;
    record.gpu_begin = std::exchange(span->gpu_begin, nullptr);
    if (record.gpu_begin != nullptr) {
      void* event = gpu::create_timing_event(device.id);
      try {
        gpu::record_event(event, stream);
      } catch (...) {
        gpu::destroy_event(device.id, event);
        gpu::destroy_event(device.id, record.gpu_begin);
        throw;
      }
      record.gpu_end = event;
    }
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_.push_back(std::move(record));
  }

  std::string trace_json() {
    std::lock_guard<std::mutex> lock(report_mu_);
    resolve();
    // One trace process per device and timeline; GPU threads are its streams.
    std::map<std::pair<std::string, bool>, int> pids;
    std::map<void*, int> stream_ids;
    auto pid_of = [&](const Device& device, bool gpu_timeline) {
      auto key = std::make_pair(device.str(), gpu_timeline);
      auto it = pids.find(key);
      if (it == pids.end()) it = pids.emplace(key, static_cast<int>(pids.size())).first;
      return it->second;
    };
    int64_t origin = resolved_.empty() ? 0 : resolved_.front().host_begin_ns;
    for (const Record& r : resolved_) {
      origin = std::min(origin, r.host_begin_ns);
      if (r.stream != nullptr) origin = std::min(origin, r.gpu_begin_ns);
    }
    std::string events;
    auto add_span = [&](const Record& r, bool gpu_timeline, int64_t begin, int64_t end, int tid) {
      if (!events.empty()) events += ",\n";
      char times[96];
      std::snprintf(times, sizeof times, "\"ts\": %.3f, \"dur\": %.3f", (begin - origin) / 1e3,
                    (end - begin) / 1e3);
      events += str_cat("{\"name\": ", quoted(r.name), ", \"cat\": \"operator\", \"ph\": \"X\", ",
                        times, ", \"pid\": ", pid_of(r.device, gpu_timeline), ", \"tid\": ", tid,
                        "}");
    };
    for (const Record& r : resolved_) {
      add_span(r, false, r.host_begin_ns, r.host_end_ns, r.thread);
      if (r.stream != nullptr) {
        auto it = stream_ids.emplace(r.stream, static_cast<int>(stream_ids.size())).first;
        add_span(r, true, r.gpu_begin_ns, r.gpu_end_ns, it->second);
      }
    }
    for (const auto& [key, pid] : pids) {
      if (!events.empty()) events += ",\n";
      const std::string label = key.second ? key.first + " GPU" : key.first + " workers";
      events += str_cat("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": ", pid,
                        ", \"args\": {\"name\": ", quoted(label), "}}");
    }
    return str_cat("{\"traceEvents\": [\n", events, "\n], \"displayTimeUnit\": \"ms\"}\n");
  }

  std::string aggregate_json(bool reset) {
    std::lock_guard<std::mutex> lock(report_mu_);
    resolve();
    struct Stats {
      int64_t count = 0, total_ns = 0, min_ns = INT64_MAX, max_ns = 0;
      void add(int64_t ns) {
        ++count;
        total_ns += ns;
        min_ns = std::min(min_ns, ns);
        max_ns = std::max(max_ns, ns);
      }
    };
    // (device, timeline, name) in a stable order.
    std::map<std::tuple<std::string, std::string, std::string>, Stats> stats;
    for (const Record& r : resolved_) {
      const std::string device = r.device.str();
      stats[{device, "host", r.name}].add(r.host_end_ns - r.host_begin_ns);
      if (r.stream != nullptr) stats[{device, "gpu", r.name}].add(r.gpu_end_ns - r.gpu_begin_ns);
    }
    std::string out;
    for (const auto& [key, s] : stats) {
      if (!out.empty()) out += ",\n";
      char numbers[160];
      std::snprintf(numbers, sizeof numbers,
                    "\"count\": %lld, \"total_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f",
                    static_cast<long long>(s.count), s.total_ns / 1e6, s.min_ns / 1e6,
                    s.max_ns / 1e6);
      out += str_cat("{\"device\": ", quoted(std::get<0>(key)), ", \"timeline\": \"",
                     std::get<1>(key), "\", \"name\": ", quoted(std::get<2>(key)), ", ", numbers,
                     "}");
    }
    // Under the same lock as the report, so spans that end meanwhile wait in pending_ for the
    // next one instead of being dropped unreported.
    if (reset) resolved_.clear();
    return str_cat("[\n", out, "\n]\n");
  }

  void clear() {
    std::lock_guard<std::mutex> report_lock(report_mu_);
    std::vector<Record> pending;
    {
      std::lock_guard<std::mutex> lock(pending_mu_);
      pending.swap(pending_);
    }
    for (Record& r : pending) release_events(&r);
    resolved_.clear();
  }

 private:
  static std::string quoted(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char escape[8];
        std::snprintf(escape, sizeof escape, "\\u%04x", c);
        out += escape;
      } else {
        out += c;
      }
    }
    return out + "\"";
  }

  static void release_events(Record* r) {
    if (r->gpu_begin != nullptr) gpu::destroy_event(r->device.id, r->gpu_begin);
    if (r->gpu_end != nullptr) gpu::destroy_event(r->device.id, r->gpu_end);
    r->gpu_begin = r->gpu_end = nullptr;
  }

  // The next report takes new reference events (see the Note); the spans still pending are
  // resolved against the old ones first, which they were recorded after. Under report_mu_,
  // which resolve() holds while it uses a reference.
  void forget_references() {
    std::lock_guard<std::mutex> report_lock(report_mu_);
    try {
      resolve();
    } catch (...) {
      // The device failed: resolve() dropped those spans; the new recording starts anyway.
    }
    std::lock_guard<std::mutex> lock(references_mu_);
    for (auto& [device_id, ref] : references_) gpu::destroy_event(device_id, ref.event);
    references_.clear();
  }

  // The reference event of GPU `device_id`, made on first use (see the Note).
  const Reference& reference(int device_id) {
    std::lock_guard<std::mutex> lock(references_mu_);
    Reference& ref = references_[device_id];
    if (ref.event == nullptr) {
      void* event = gpu::create_timing_event(device_id);
      try {
        gpu::record_event(event, nullptr);
        gpu::event_synchronize(event);
      } catch (...) {
        gpu::destroy_event(device_id, event);
        throw;
      }
      ref.host_ns = now_ns();
      ref.event = event;
    }
    return ref;
  }

  // Moves the pending spans to resolved_, with their GPU times on the host clock. Under
  // report_mu_; the workers append to pending_ meanwhile.
  void resolve() {
    std::vector<Record> pending;
    {
      std::lock_guard<std::mutex> lock(pending_mu_);
      pending.swap(pending_);
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      Record& r = pending[i];
      if (r.gpu_end == nullptr) continue;
      try {
        gpu::event_synchronize(r.gpu_end);
        const Reference& ref = reference(r.device.id);
        // The duration from the span's own events (exact); only its place on the timeline
        // comes from the reference (a float of milliseconds since then: coarser as it ages).
        r.gpu_begin_ns = ref.host_ns + static_cast<int64_t>(gpu::elapsed_ms(ref.event, r.gpu_begin) * 1e6);
        r.gpu_end_ns = r.gpu_begin_ns + static_cast<int64_t>(gpu::elapsed_ms(r.gpu_begin, r.gpu_end) * 1e6);
      } catch (...) {
        // The device failed: drop the spans not yet resolved rather than report wrong times.
        for (size_t j = i; j < pending.size(); ++j) release_events(&pending[j]);
        throw;
      }
      release_events(&r);
    }
    resolved_.insert(resolved_.end(), std::make_move_iterator(pending.begin()),
                     std::make_move_iterator(pending.end()));
  }

  std::mutex state_mu_;
  bool running_ = false;
  bool paused_ = false;

  std::mutex pending_mu_;
  std::vector<Record> pending_;  // appended by workers, guarded by pending_mu_

  std::mutex report_mu_;
  std::vector<Record> resolved_;  // guarded by report_mu_

  std::mutex references_mu_;
  std::map<int, Reference> references_;  // taken afresh by each recording
};

Profiler& the_profiler() {
  static auto* profiler = new Profiler();  // never destroyed: ops may complete during exit
  return *profiler;
}

}  // namespace

void set_running(bool running) { the_profiler().set_running(running); }
void set_paused(bool paused) { the_profiler().set_paused(paused); }
Span begin_op(Device device, void* stream) { return the_profiler().begin_op(device, stream); }
void end_op(Span* span, const char* name, Device device, void* stream) {
  the_profiler().end_op(span, name, device, stream);
}
std::string trace_json() { return the_profiler().trace_json(); }
std::string aggregate_json(bool reset) { return the_profiler().aggregate_json(reset); }
void clear() { the_profiler().clear(); }

}  // namespace profiler
}  // namespace pymx
