// The machine's float32 multiply-add peak, the ceiling for compute-bound kernels such as the
// direct convolution: independent FMA chains on every thread, AVX-512 when the CPU has it, else
// AVX2. bench/RESULTS.md compares kernels' GFLOP/s with this figure.
//
//   fma_peak [max_threads]   (default: the hardware threads)
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

// Enough independent chains to cover the FMA latency on two pipes (4 cycles x 2 = 8 in flight).
constexpr int kChains = 12;
constexpr long kIterations = 20'000'000;

__attribute__((target("avx512f"))) float chains_avx512(long iterations) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1.0f + 1e-3f * i);
  const __m512 scale = _mm512_set1_ps(0.999999f), shift = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], scale, shift);
  float sum = 0;  // used, so the loop is not optimised away
  for (int i = 0; i < kChains; ++i) sum += _mm512_reduce_add_ps(acc[i]);
  return sum;
}

__attribute__((target("avx2,fma"))) float chains_avx2(long iterations) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(1.0f + 1e-3f * i);
  const __m256 scale = _mm256_set1_ps(0.999999f), shift = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], scale, shift);
  float lanes[8], sum = 0;
  for (int i = 0; i < kChains; ++i) {
    _mm256_storeu_ps(lanes, acc[i]);
    for (float lane : lanes) sum += lane;
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const int lanes = avx512 ? 16 : 8;
  const int max_threads = argc > 1 ? std::atoi(argv[1])
                                   : static_cast<int>(std::thread::hardware_concurrency());
  std::printf("float32 FMA peak (%s, %d chains per thread)\n", avx512 ? "AVX-512" : "AVX2",
              kChains);
  for (int threads = 1; threads <= max_threads; ++threads) {
    std::vector<float> sums(threads);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&sums, t, avx512] {
        sums[t] = avx512 ? chains_avx512(kIterations) : chains_avx2(kIterations);
      });
    for (std::thread& worker : workers) worker.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * lanes * kChains * kIterations * threads;
    std::printf("%d thread(s): %.1f GFLOP/s (checksum %.3f)\n", threads, flops / seconds / 1e9,
                sums[0]);
  }
  return 0;
}
