// Errors inside ops, under both engines: stored on the written vars, dependents skipped (except
// kNoSkip), raised once at wait_for_var, first-then-cleared at wait_for_all; the engine stays
// usable. Waiting from inside an op is refused.
#include <atomic>
#include <stdexcept>
#include <thread>

#include "pymx/engine.h"
#include "pymx/gpu.h"
#include "test_util.h"

using namespace pymx;

namespace {

void fail_with(const char* message) { PMX_THROW(Status::kInvalidArg, message); }

void test_dependents_skipped_and_raised_once(Engine* e) {
  VarHandle a = e->new_var(), b = e->new_var(), c = e->new_var(), other = e->new_var();
  std::atomic<int> ran_b{0}, ran_c{0}, ran_other{0};
  e->push_sync([](RunContext) { fail_with("boom in a"); }, Device::cpu(0), {}, {a});
  e->push_sync([&](RunContext) { ran_b++; }, Device::cpu(0), {a}, {b});  // reads a: skipped
  e->push_sync([&](RunContext) { ran_c++; }, Device::cpu(1), {b}, {c});  // reads b: skipped
  e->push_sync([&](RunContext) { ran_other++; }, Device::cpu(1), {}, {other});
  std::string message = EXPECT_THROWS(e->wait_for_var(c), "boom in a");
  EXPECT(ran_b == 0 && ran_c == 0, "dependents of a failed op must be skipped");
  // One failure, one report: a and b carry the same error, already raised through c.
  e->wait_for_var(a);
  e->wait_for_var(b);
  e->wait_for_var(other);
  EXPECT(ran_other == 1);
  e->wait_for_all();  // reported already: nothing left
  // Versions still advance for skipped writes, so waits and dumps stay consistent.
  EXPECT(e->var_version(b) == 1 && e->var_version(c) == 1);
  for (VarHandle v : {a, b, c, other}) e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
}

void test_wait_for_all_first_then_cleared(Engine* e) {
  VarHandle x = e->new_var(), y = e->new_var();
  // Same device, one worker in this test's engines (FIFO): x fails first.
  e->push_sync([](RunContext) { fail_with("first failure"); }, Device::cpu(0), {}, {x});
  e->push_sync([](RunContext) { throw std::runtime_error("second failure"); }, Device::cpu(0), {x}, {y});
  VarHandle z = e->new_var();
  e->push_sync([](RunContext) { throw std::runtime_error("third failure"); }, Device::cpu(0), {}, {z});
  try {
    e->wait_for_all();
    EXPECT(false, "wait_for_all must raise");
  } catch (const Error& error) {
    EXPECT(std::string(error.what()) == "first failure", error.what());
    EXPECT(error.status() == Status::kInvalidArg, "the op's own error is rethrown unchanged");
  }
  e->wait_for_all();     // cleared
  e->wait_for_var(y);    // cleared with the rest
  e->wait_for_var(z);
  for (VarHandle v : {x, y, z}) e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
}

void test_no_skip_and_async_failure(Engine* e) {
  VarHandle bad = e->new_var(), out = e->new_var(), async_out = e->new_var();
  std::atomic<int> no_skip_ran{0};
  e->push_sync([](RunContext) { fail_with("bad input"); }, Device::cpu(0), {}, {bad});
  e->push_sync([&](RunContext) { no_skip_ran++; }, Device::cpu(0), {bad}, {out}, FnProperty::kNoSkip);
  // An async op reports its failure through on_complete, from another thread.
  e->push_async(
      [](RunContext, OnComplete done) {
        std::thread([done] {
          // The temporary runtime_error shares its message with the stored copy (libstdc++
          // counts the references where ThreadSanitizer cannot see it): let it go before
          // handing the error over, not while the waiting thread reads the message.
          std::exception_ptr error = std::make_exception_ptr(std::runtime_error("async failure"));
          done(std::move(error));
        }).detach();
      },
      Device::cpu(0), {}, {async_out}, FnProperty::kAsync);
  EXPECT_THROWS(e->wait_for_var(async_out), "async failure");
  EXPECT_THROWS(e->wait_for_var(out), "bad input");  // kNoSkip ran, and carries the input error on
  EXPECT(no_skip_ran == 1, "a kNoSkip op runs even when its input failed");
  e->wait_for_all();
  for (VarHandle v : {bad, out, async_out}) e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
}

void test_usable_after_failure(Engine* e) {
  VarHandle v = e->new_var();
  int value = 0;
  e->push_sync([](RunContext) { fail_with("transient"); }, Device::cpu(0), {}, {v});
  EXPECT_THROWS(e->wait_for_var(v), "transient");
  // The error was reported: later ops on the same var run again.
  for (int i = 0; i < 100; ++i) e->push_sync([&value](RunContext) { value += 1; }, Device::cpu(0), {}, {v});
  e->wait_for_var(v);
  EXPECT(value == 100, "value ", value);
  e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
}

void test_wait_inside_op_refused(Engine* e) {
  VarHandle v = e->new_var(), result = e->new_var();
  std::string var_message, all_message;
  e->push_sync(
      [&](RunContext) {
        try {
          e->wait_for_var(v);
        } catch (const Error& error) {
          if (error.status() == Status::kInvalidArg) var_message = error.what();
        }
        try {
          e->wait_for_all();
        } catch (const Error& error) {
          if (error.status() == Status::kInvalidArg) all_message = error.what();
        }
      },
      Device::cpu(0), {}, {result});
  e->wait_for_var(result);
  EXPECT(var_message.find("deadlock") != std::string::npos, "got \"", var_message, "\"");
  EXPECT(all_message.find("deadlock") != std::string::npos, "got \"", all_message, "\"");
  EXPECT(!Engine::on_worker_thread());
  for (VarHandle h : {v, result}) e->delete_var({}, Device::cpu(0), h);
  e->wait_for_all();
}

void test_bad_pushes(Engine* e) {
  VarHandle v = e->new_var();
  EXPECT_THROWS(e->push_sync([](RunContext) {}, Device::cpu(64), {}, {v}), "cpu(64)");
  // One past the last GPU: refused with or without GPUs (gpu(0) is valid on a GPU machine).
  const Device missing = Device::gpu(gpu::device_count());
  EXPECT_THROWS(e->push_sync([](RunContext) {}, missing, {}, {v}), missing.str());
  EXPECT_THROWS(e->push_sync([](RunContext) {}, Device::cpu(0), {nullptr}, {v}), "null");
  // A var listed twice, and in both sets, is deduplicated instead of deadlocking.
  int runs = 0;
  e->push_sync([&](RunContext) { ++runs; }, Device::cpu(0), {v, v}, {v, v});
  e->wait_for_var(v);
  EXPECT(runs == 1 && e->var_version(v) == 1, "runs ", runs, " version ", e->var_version(v));
  e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
}

}  // namespace

int main() {
  for (const char* kind : {"naive", "threaded"}) {
    auto engine = make_engine(kind, 1);
    test_dependents_skipped_and_raised_once(engine.get());
    test_wait_for_all_first_then_cleared(engine.get());
    test_no_skip_and_async_failure(engine.get());
    test_usable_after_failure(engine.get());
    test_wait_inside_op_refused(engine.get());
    test_bad_pushes(engine.get());
    std::printf("%s engine: exception contract holds\n", kind);
  }
  std::printf("PASSED\n");
  return 0;
}
