// Process settings read from the environment. This is the only code in pymx that reads
// environment variables; config.cc lists every one of them.
#pragma once

#include <string>

namespace pymx {

struct Config {
  std::string engine = "threaded";  // "threaded" | "naive"
  int cpu_workers = 1;              // worker threads per CPU device
  int gpu_workers = 1;              // compute workers (one stream each) per GPU
  int gpu_copy_workers = 1;         // copy workers per GPU and direction (H2D, D2H)
  size_t cpu_cache_bytes = 0;       // upper bound on freed host memory kept for reuse
  size_t packed_weight_cache_bytes = 0;  // Note [Packed weight cache] (ops/packed_weight_cache.h)
  bool cudnn = true;                // false: GPU ops never use cuDNN, only pymx's own kernels
  bool bulk_inference = true;       // false: graph replays op by op (Note [Bulk execution])
  bool bulk_train = true;           // the same for replays recorded by autograd
  bool cuda_graphs = true;          // false: bulk replays on a GPU never use CUDA graphs
  int logical_gpus_per_gpu = 1;     // devices each physical GPU appears as (Note [Logical GPUs])
  bool enforce_determinism = false;  // the mode's start value (Note [Deterministic mode])
  std::string cpu_isa;              // "" (the CPU's best) | "baseline" | "avx2" | "avx512"
};

// Read once, on first use; thread-safe. Throws Error(kInvalidArg) naming the variable and the
// value when a setting does not parse.
const Config& config();

}  // namespace pymx
