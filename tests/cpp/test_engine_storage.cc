// storage::alloc/free/empty_cache/stats on the host: alignment, zero size, reuse of cached
// blocks, statistics, pinned memory without a GPU, a clear error for a missing GPU.
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "pymx/gpu.h"
#include "pymx/storage.h"
#include "test_util.h"

using namespace pymx;

int main() {
  const Device cpu = Device::cpu(0);
  StorageHandle empty = storage::alloc(0, cpu);
  EXPECT(empty.dptr == nullptr && empty.size == 0);
  storage::free(empty);  // no-op

  storage::empty_cache(cpu);
  MemoryStats before = storage::stats(cpu);
  StorageHandle a = storage::alloc(1000, cpu);
  EXPECT(a.dptr != nullptr && a.size == 1000 && a.device == cpu);
  EXPECT(reinterpret_cast<uintptr_t>(a.dptr) % 64 == 0, "not 64-byte aligned");
  std::memset(a.dptr, 1, 1000);
  MemoryStats during = storage::stats(cpu);
  EXPECT(during.in_use == before.in_use + 1024, "in_use ", during.in_use, " (1000 B -> 1024 B bucket)");
  EXPECT(during.num_allocs == before.num_allocs + 1);
  void* first = a.dptr;
  storage::free(a);
  MemoryStats after_free = storage::stats(cpu);
  EXPECT(after_free.in_use == before.in_use && after_free.cached == before.cached + 1024);
  // Same bucket: the cached block comes back without a system allocation.
  StorageHandle b = storage::alloc(900, Device::cpu(1));
  EXPECT(b.dptr == first, "cached block not reused");
  EXPECT(storage::stats(cpu).num_allocs == during.num_allocs);
  EXPECT(storage::stats(cpu).peak_in_use >= during.in_use);
  storage::free(b);
  storage::empty_cache(cpu);
  EXPECT(storage::stats(cpu).cached == 0);

  // Large blocks round to whole MiB.
  StorageHandle big = storage::alloc((3 << 20) + 5, cpu);
  EXPECT(storage::stats(cpu).in_use == before.in_use + (4u << 20), "in_use ", storage::stats(cpu).in_use);
  storage::free(big);

  // Pinned memory is plain aligned host memory without a GPU, accounted separately.
  if (gpu::device_count() == 0) {
    StorageHandle p = storage::alloc(4096, Device::cpu_pinned(0));
    EXPECT(p.dptr != nullptr && reinterpret_cast<uintptr_t>(p.dptr) % 64 == 0);
    EXPECT(storage::stats(Device::cpu_pinned(0)).in_use == 4096);
    storage::free(p);
    EXPECT_THROWS(storage::alloc(16, Device::gpu(0)), "gpu(0)");
  }

  // Concurrent allocations and frees keep the books balanced.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::vector<StorageHandle> held;
      for (int i = 0; i < 2000; ++i) {
        held.push_back(storage::alloc(64 + (i * 37 + t * 11) % 5000, Device::cpu(t % 2)));
        std::memset(held.back().dptr, 0, held.back().size);
        if (i % 3 == 2) {
          storage::free(held.front());
          held.erase(held.begin());
        }
      }
      for (auto& h : held) storage::free(h);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT(storage::stats(cpu).in_use == before.in_use, "leaked ", storage::stats(cpu).in_use - before.in_use, " bytes");
  storage::empty_cache(cpu);
  std::printf("PASSED\n");
  return 0;
}
