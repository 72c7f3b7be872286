// Engine overhead: empty ops pushed and completed per second.
//   chain:   N writes of one var (each op waits for the previous one)
//   fan-out: N ops each writing its own var (all independent)
// For the naive engine and the threaded engine with 1, 2, 4, 8 CPU workers. "push" is the time
// the pushing thread spends in push_sync; "total" ends when wait_for_all returns.
// Usage: engine_micro [num_ops]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pymx/engine.h"

using namespace pymx;
using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  double push_us_per_op;
  double total_ops_per_s;
};

Result run(Engine* e, int num_ops, bool chain) {
  std::vector<VarHandle> vars(chain ? 1 : num_ops);
  for (auto& v : vars) v = e->new_var();
  e->wait_for_all();
  auto start = Clock::now();
  for (int i = 0; i < num_ops; ++i) {
    e->push_sync([](RunContext) {}, Device::cpu(0), {}, {vars[chain ? 0 : i]});
  }
  auto pushed = Clock::now();
  e->wait_for_all();
  auto done = Clock::now();
  for (auto v : vars) e->delete_var({}, Device::cpu(0), v);
  e->wait_for_all();
  double push_s = std::chrono::duration<double>(pushed - start).count();
  double total_s = std::chrono::duration<double>(done - start).count();
  return {push_s * 1e6 / num_ops, num_ops / total_s};
}

}  // namespace

int main(int argc, char** argv) {
  const int num_ops = argc > 1 ? std::atoi(argv[1]) : 200000;
  std::printf("engine_micro: %d empty ops per run, best of 3\n\n", num_ops);
  std::printf("| engine | workers | chain Mops/s | chain push us/op | fan-out Mops/s | fan-out push us/op |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (int workers : {0, 1, 2, 4, 8}) {
    auto engine = make_engine(workers == 0 ? "naive" : "threaded", workers == 0 ? 1 : workers);
    Result best_chain{1e9, 0}, best_fan{1e9, 0};
    for (int rep = 0; rep < 3; ++rep) {
      Result c = run(engine.get(), num_ops, true);
      Result f = run(engine.get(), num_ops, false);
      if (c.total_ops_per_s > best_chain.total_ops_per_s) best_chain = c;
      if (f.total_ops_per_s > best_fan.total_ops_per_s) best_fan = f;
    }
    std::printf("| %s | %d | %.2f | %.3f | %.2f | %.3f |\n", workers == 0 ? "naive" : "threaded",
                workers == 0 ? 0 : workers, best_chain.total_ops_per_s / 1e6, best_chain.push_us_per_op,
                best_fan.total_ops_per_s / 1e6, best_fan.push_us_per_op);
  }
  return 0;
}
