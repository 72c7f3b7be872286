// Random DAG: several threads push thousands of ops over ~100 vars (each thread writes its own
// vars and reads those plus shared read-only vars, on cpu(0) and cpu(1)); the values must be
// bitwise equal to a plain sequential loop and to the naive engine, for 1, 2, 4 and 8 workers.
// Usage: test_engine_randdag [seed]
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "pymx/engine.h"
#include "test_util.h"

using namespace pymx;

namespace {

constexpr int kThreads = 4;
constexpr int kVarsPerThread = 22;
constexpr int kSharedVars = 12;  // written once before the pushing threads start
constexpr int kOpsPerThread = 2000;
constexpr int kWidth = 4;  // floats per var

struct OpSpec {
  std::vector<int> reads;  // may repeat and may include `write` (the engine deduplicates)
  int write;
  int device;  // cpu(device)
  bool async;  // pushed with push_async, completing from inside fn
  bool wait_after;  // the pushing thread waits for `write` after the push
};

using Values = std::vector<std::array<float, kWidth>>;

// The deterministic computation of one op, order-sensitive through the old value.
void apply(const OpSpec& op, int index, Values& v) {
  std::array<float, kWidth> acc = v[op.write];
  for (int k = 0; k < kWidth; ++k) {
    float x = acc[k] * 0.5f + 0.001f * static_cast<float>(index % 97);
    for (size_t r = 0; r < op.reads.size(); ++r)
      x += v[op.reads[r]][(k + r) % kWidth] * (0.25f + 0.125f * static_cast<float>(r));
    acc[k] = x;
  }
  v[op.write] = acc;
}

struct Dag {
  std::vector<std::vector<OpSpec>> per_thread;
  int num_vars() const { return kSharedVars + kThreads * kVarsPerThread; }
};

Dag random_dag(uint32_t seed) {
  std::mt19937 rng(seed);
  Dag dag;
  dag.per_thread.resize(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    const int own_begin = kSharedVars + t * kVarsPerThread;
    std::uniform_int_distribution<int> own(own_begin, own_begin + kVarsPerThread - 1);
    std::uniform_int_distribution<int> shared(0, kSharedVars - 1);
    for (int i = 0; i < kOpsPerThread; ++i) {
      OpSpec op;
      op.write = own(rng);
      int num_reads = static_cast<int>(rng() % 4);  // 0..3
      for (int r = 0; r < num_reads; ++r) op.reads.push_back(rng() % 3 == 0 ? shared(rng) : own(rng));
      if (rng() % 8 == 0) op.reads.push_back(op.write);
      op.device = static_cast<int>(rng() % 2);
      op.async = rng() % 5 == 0;
      op.wait_after = rng() % 200 == 0;
      dag.per_thread[t].push_back(std::move(op));
    }
  }
  return dag;
}

Values initial_values(int num_vars) {
  Values v(num_vars);
  for (int i = 0; i < num_vars; ++i)
    for (int k = 0; k < kWidth; ++k) v[i][k] = static_cast<float>(i * kWidth + k) * 0.01f;
  return v;
}

Values run_plain(const Dag& dag) {
  Values v = initial_values(dag.num_vars());
  for (const auto& ops : dag.per_thread)
    for (size_t i = 0; i < ops.size(); ++i) apply(ops[i], static_cast<int>(i), v);
  return v;
}

Values run_engine(Engine* engine, const Dag& dag, std::vector<uint64_t>* versions) {
  Values v = initial_values(dag.num_vars());
  std::vector<VarHandle> vars(dag.num_vars());
  for (auto& var : vars) var = engine->new_var();
  std::vector<std::thread> pushers;
  for (int t = 0; t < kThreads; ++t) {
    pushers.emplace_back([&, t] {
      const auto& ops = dag.per_thread[t];
      for (size_t i = 0; i < ops.size(); ++i) {
        const OpSpec* op = &ops[i];
        std::vector<VarHandle> reads;
        for (int r : op->reads) reads.push_back(vars[r]);
        const int index = static_cast<int>(i);
        Values* values = &v;
        if (op->async) {
          engine->push_async(
              [op, index, values](RunContext, OnComplete done) {
                apply(*op, index, *values);
                done();
              },
              Device::cpu(op->device), reads, {vars[op->write]}, FnProperty::kAsync);
        } else {
          engine->push_sync([op, index, values](RunContext) { apply(*op, index, *values); },
                            Device::cpu(op->device), reads, {vars[op->write]});
        }
        if (op->wait_after) engine->wait_for_var(vars[op->write]);
      }
    });
  }
  for (auto& thread : pushers) thread.join();
  engine->wait_for_all();
  versions->clear();
  for (VarHandle var : vars) {
    versions->push_back(engine->var_version(var));
    engine->delete_var({}, Device::cpu(0), var);
  }
  engine->wait_for_all();
  return v;
}

bool bitwise_equal(const Values& a, const Values& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const uint32_t seed = argc > 1 ? static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10))
                                 : static_cast<uint32_t>(std::random_device{}());
  std::printf("test_engine_randdag seed=%u (rerun: test_engine_randdag %u)\n", seed, seed);
  const Dag dag = random_dag(seed);
  const Values expected = run_plain(dag);

  std::vector<uint64_t> expected_versions(dag.num_vars(), 0);
  for (const auto& ops : dag.per_thread)
    for (const OpSpec& op : ops) ++expected_versions[op.write];

  std::vector<uint64_t> versions;
  auto naive = make_engine("naive", 1);
  EXPECT(bitwise_equal(run_engine(naive.get(), dag, &versions), expected), "naive engine, seed ", seed);
  EXPECT(versions == expected_versions, "naive engine versions, seed ", seed);

  for (int workers : {1, 2, 4, 8}) {
    auto start = std::chrono::steady_clock::now();
    auto engine = make_engine("threaded", workers);
    Values got = run_engine(engine.get(), dag, &versions);
    EXPECT(bitwise_equal(got, expected), "threaded engine, ", workers, " workers, seed ", seed);
    EXPECT(versions == expected_versions, "threaded engine versions, ", workers, " workers, seed ", seed);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("  %d worker(s): %d ops bitwise equal (%.1f ms)\n", workers, kThreads * kOpsPerThread, ms);
  }
  std::printf("PASSED\n");
  return 0;
}
