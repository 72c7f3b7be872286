// Every environment variable pymx reads (13); nothing else in pymx reads any.
//
//   variable               values                  default   meaning
//   PYMX_ENGINE            threaded | naive        threaded  naive = run each op at push (debugging)
//   PYMX_CPU_WORKERS       int >= 1                1         worker threads per CPU device
//   PYMX_GPU_WORKERS       int >= 1                1         compute workers (streams) per GPU
//   PYMX_GPU_COPY_WORKERS  int >= 1                1         copy workers per GPU and direction
//   PYMX_CPU_CACHE_MB      int >= 0                RAM / 8   freed host memory kept for reuse
//                                                  (256 MiB to 4 GiB)
//   PYMX_PACKED_WEIGHT_CACHE_MB  int >= 0          64        convolution weights kept in their
//                                                            kernels' layouts for inference (0 =
//                                                            none; Note [Packed weight cache])
//   PYMX_CUDNN             0 | 1                   1         0 = GPU convolution, pooling and
//                                                            batch_norm never use cuDNN
//   PYMX_EXEC_BULK_EXEC_INFERENCE  0 | 1           1         0 = a hybridized graph replays
//                                                            op by op, never as one engine op
//   PYMX_EXEC_BULK_EXEC_TRAIN      0 | 1           1         the same for replays recorded by
//                                                            autograd (training forward passes)
//   PYMX_ENABLE_CUDA_GRAPHS  0 | 1                 1         0 = a bulk replay on a GPU launches
//                                                            its kernels, never a CUDA graph
//                                                            (never one under the naive engine)
//   PYMX_LOGICAL_GPUS_PER_GPU  int >= 1            1         each physical GPU appears as this
//                                                            many devices (testing multi-GPU
//                                                            code on fewer GPUs)
//   PYMX_ENFORCE_DETERMINISM  0 | 1                0         1 = every op computes bitwise
//                                                            reproducible results or raises
//                                                            (Note [Deterministic mode]; the
//                                                            start value of npx.set_deterministic)
//   PYMX_CPU_ISA           baseline | avx2 | avx512  the     the widest vector instruction set
//                                                  CPU's     pymx's CPU kernels use (Note [CPU
//                                                  best      instruction sets])
//
// Why one CPU worker per device by default: on the 2-core reference machine a second worker per
// device only adds wake-ups (bench/cpp/engine_micro.cc), and data parallelism already uses one
// device (hence one worker) per core. OpenBLAS and the kernels parallelise inside an op.
//
// Why the host cache defaults to an eighth of RAM: a training step frees and re-requests the same
// large blocks every step; when they do not fit in the cache each one comes back as fresh pages
// from the kernel, and the page faults cost more than the step's arithmetic (LeafNetwork at
// batch 64 needs about 1.5 GiB per step; with a 256 MiB cache it ran at 60 % of its speed).
#include "config.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "pymx/base.h"

namespace pymx {
namespace {

int read_int(const char* name, int default_value, int min_value) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return default_value;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  PMX_CHECK(*end == '\0' && value >= min_value && value <= (1 << 20), name, "=\"", text,
            "\" is not an integer >= ", min_value);
  return static_cast<int>(value);
}

// A 0 | 1 setting.
bool read_switch(const char* name, bool default_value) {
  const int value = read_int(name, default_value ? 1 : 0, 0);
  PMX_CHECK(value <= 1, name, "=\"", value, "\" is not 0 or 1");
  return value == 1;
}

int default_cpu_cache_mb() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 256;
  const long long eighth_mb = static_cast<long long>(pages) * page_size / 8 / (1 << 20);
  return static_cast<int>(std::clamp<long long>(eighth_mb, 256, 4096));
}

Config read_config() {
  Config c;
  if (const char* engine = std::getenv("PYMX_ENGINE"); engine != nullptr && *engine != '\0') {
    c.engine = engine;
    PMX_CHECK(c.engine == "threaded" || c.engine == "naive", "PYMX_ENGINE=\"", c.engine,
              "\" is not one of \"threaded\", \"naive\"");
  }
  c.cpu_workers = read_int("PYMX_CPU_WORKERS", 1, 1);
  c.gpu_workers = read_int("PYMX_GPU_WORKERS", 1, 1);
  c.gpu_copy_workers = read_int("PYMX_GPU_COPY_WORKERS", 1, 1);
  c.cpu_cache_bytes = static_cast<size_t>(read_int("PYMX_CPU_CACHE_MB", default_cpu_cache_mb(), 0)) << 20;
  c.packed_weight_cache_bytes =
      static_cast<size_t>(read_int("PYMX_PACKED_WEIGHT_CACHE_MB", 64, 0)) << 20;
  c.cudnn = read_switch("PYMX_CUDNN", true);
  c.bulk_inference = read_switch("PYMX_EXEC_BULK_EXEC_INFERENCE", true);
  c.bulk_train = read_switch("PYMX_EXEC_BULK_EXEC_TRAIN", true);
  c.cuda_graphs = read_switch("PYMX_ENABLE_CUDA_GRAPHS", true);
  c.logical_gpus_per_gpu = read_int("PYMX_LOGICAL_GPUS_PER_GPU", 1, 1);
  c.enforce_determinism = read_switch("PYMX_ENFORCE_DETERMINISM", false);
  if (const char* isa = std::getenv("PYMX_CPU_ISA"); isa != nullptr && *isa != '\0') {
    c.cpu_isa = isa;
    PMX_CHECK(c.cpu_isa == "baseline" || c.cpu_isa == "avx2" || c.cpu_isa == "avx512",
              "PYMX_CPU_ISA=\"", c.cpu_isa, "\" is not one of \"baseline\", \"avx2\", \"avx512\"");
  }
  return c;
}

}  // namespace

const Config& config() {
  static const Config instance = read_config();
  return instance;
}

}  // namespace pymx
