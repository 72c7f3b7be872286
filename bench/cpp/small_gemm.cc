// The few-row products of engine/src/ops/small_gemm.h against OpenBLAS's sgemm split over the
// intra-op threads (nn::gemm_in_parallel, what nn::gemm runs otherwise), interleaved, in GFLOP/s
// on all the intra-op threads: the measurements Note [Small GEMM] chose its ranges from.
//
//   small_gemm [repeats]   (default 7; the median of that many timings of each)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "ops/nn_common.h"
#include "ops/small_gemm.h"

namespace {

struct Shape {
  const char* what;
  bool trans_a, trans_b;
  int64_t m, n, k;
};

// LSTM(256) / GRU(256) recurrences at batch 32 and their data gradients, LeafNetwork's first
// Dense layer (21632 -> 100) at batch 9-64 and its data gradient, square Dense layers, and
// weight gradients (dY^T . X).
constexpr Shape kShapes[] = {
    {"lstm h2h", false, true, 32, 1024, 256},
    {"lstm h2h dgrad", false, false, 32, 256, 1024},
    {"gru h2h", false, true, 32, 768, 256},
    {"lstm h2h b64", false, true, 64, 1024, 256},
    {"lstm h2h b16", false, true, 16, 1024, 256},
    {"lstm h2h b9", false, true, 9, 1024, 256},
    {"leaf dense1 b9", false, true, 9, 100, 21632},
    {"leaf dense1 b16", false, true, 16, 100, 21632},
    {"leaf dense1 b32", false, true, 32, 100, 21632},
    {"leaf dense1 b64", false, true, 64, 100, 21632},
    {"leaf dgrad b8", false, false, 8, 21632, 100},
    {"leaf dgrad b32", false, false, 32, 21632, 100},
    {"leaf dgrad b64", false, false, 64, 21632, 100},
    {"dense 512 b16", false, true, 16, 512, 512},
    {"dense 512 b64", false, true, 64, 512, 512},
    {"dense 512 dgrad b4", false, false, 4, 512, 512},
    {"dense 512 dgrad b64", false, false, 64, 512, 512},
    {"dense 128 b32", false, true, 32, 128, 128},
    {"dense 64 b64", false, true, 64, 64, 64},
    {"lstm h2h wgrad", true, false, 1024, 256, 32},
    {"lstm i2h wgrad", true, false, 1024, 128, 1120},
    {"dense 512 wgrad b16", true, false, 512, 512, 16},
    {"leaf wgrad b32", true, false, 100, 21632, 32},
};

double seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (pymx::nn::fma_level() == pymx::nn::FmaLevel::kNone) {
    std::printf("small_gemm: this CPU has neither AVX2+FMA nor AVX-512\n");
    return 0;
  }
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 7;
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::printf("%-20s %5s %6s %6s %10s %10s %8s\n", "shape", "m", "n", "k", "sgemm", "small",
              "speedup");
  for (const Shape& s : kShapes) {
    std::vector<float> a(s.m * s.k), b(s.n * s.k), c(s.m * s.n);
    const int64_t lda = s.trans_a ? s.m : s.k;
    for (float& v : a) v = normal(rng);
    for (float& v : b) v = normal(rng);
    const int64_t ldb = s.trans_b ? s.k : s.n;
    // About 20 ms per timing.
    const double flops = 2.0 * s.m * s.n * s.k;
    const int calls = std::max(1, static_cast<int>(2e9 * 0.02 / flops));
    const auto sgemm = [&] {
      for (int i = 0; i < calls; ++i)
        pymx::nn::gemm_in_parallel<float>(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data(), lda,
                                          b.data(), ldb, 0.0f, c.data(), s.n);
    };
    const auto small = [&] {
      for (int i = 0; i < calls; ++i)
        pymx::nn::small_gemm_f32(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data(), lda,
                                 b.data(), ldb, 0.0f, c.data(), s.n);
    };
    sgemm();
    small();  // warm up
    std::vector<double> t_sgemm, t_small;
    for (int i = 0; i < repeats; ++i) {  // interleaved, so a busy moment hits both
      t_sgemm.push_back(seconds(sgemm));
      t_small.push_back(seconds(small));
    }
    std::sort(t_sgemm.begin(), t_sgemm.end());
    std::sort(t_small.begin(), t_small.end());
    const double gf_sgemm = flops * calls / t_sgemm[repeats / 2] * 1e-9;
    const double gf_small = flops * calls / t_small[repeats / 2] * 1e-9;
    std::printf("%-20s %5lld %6lld %6lld %10.1f %10.1f %7.2fx\n", s.what,
                static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), gf_sgemm, gf_small, gf_small / gf_sgemm);
  }
  return 0;
}
