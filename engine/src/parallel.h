// Intra-op parallelism on the CPU: one small process-wide thread pool that kernels split their
// loops over.
//
// Note [Intra-op threads]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The engine runs each CPU device's ops one at a time on that device's worker thread, so without
// help a big op (a convolution over 64 images, a ReLU over 33M floats) uses one core. A kernel
// splits its outer loop with parallel_for; the calling worker runs chunks itself and the pool's
// helper threads (one fewer than the cores this process may run on) take the rest.
//  - Nested calls (a parallel_for inside a chunk) run serially on the calling thread.
//  - The pool serves one caller at a time: when another engine worker (say cpu(1) while cpu(0)
//    is mid-convolution) calls parallel_for, it runs its loop serially instead of waiting, so
//    devices never block on each other and at most cores + (devices - 1) threads are busy. It
//    runs the same chunks as the pool would, one after another: chunk boundaries depend only on
//    the range, the grain and the core count, never on whether the pool was free, so a kernel
//    whose rounding follows its chunks is still reproducible (Note [Deterministic mode]).
//  - fork() is safe: the fork waits for a running loop to end, and the child starts with a fresh
//    pool whose threads are created on first use (DataLoader workers fork).
//  - Chunks are claimed dynamically, so a core stolen by another process slows the loop down
//    rather than stalling it on one late chunk.
//  - After a loop a helper keeps looking for the next one for 200 us (kSpin) before it sleeps,
//    yielding its core meanwhile. Woken from sleep, a helper started 25-40 us after the caller
//    (measured here), and at small batches the kernels' loops are only tens of us long, so the
//    caller did most of each loop alone; back-to-back ops (a hybridized graph's kernels) now find
//    the helper awake. It yields rather than spins on the CPU's pause instruction: with two CPU
//    devices (data parallelism over cpu(0) and cpu(1), the main job's default without a GPU)
//    a pausing helper kept the other device's worker off its core (training b8 6 % slower);
//    yielding costs nothing there and did as well or better everywhere else. LeafNetwork on 2
//    cores, samples/s, interleaved runs (medians of 12 for b1 and 6 for b4), without the wait
//    -> pausing -> yielding: inference b1 1650 -> 2053 -> 2143, b4 2365 -> 2594 -> 2631;
//    training b4 +3-8 %, batch 64 and the tiny op unchanged. The cost: a helper thread keeps
//    running (yielding) for 200 us after each loop, about what OpenMP runtimes spend by default.
// Chunk results must not depend on which thread runs them (kernels write disjoint ranges, or
// per-chunk buffers reduced in a fixed order), so results are the same for any thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace pymx {

// How many threads a parallel_for may use (helpers + the caller); at least 1.
int parallel_max_threads();

// Calls fn(lo, hi) on disjoint sub-ranges covering [begin, end), each at least `grain` long
// (except perhaps the last), possibly from several threads at once. Returns when all are done;
// an exception thrown by fn is rethrown here (the first one, when several chunks throw).
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

// Splits [0, n) into at most kPartsPerThread * parallel_max_threads() contiguous parts of at
// least `grain` items and calls fn(part, lo, hi) for each, part in [0, parts). For kernels that
// give each part its own scratch buffer (sized with parallel_parts) and combine the parts'
// results in order. Several parts per thread, claimed dynamically, keep a core that another
// process is using from stalling the whole loop on its one part; the part count depends only on
// n, grain and the core count, so results are reproducible on a machine.
constexpr int kPartsPerThread = 4;
int64_t parallel_parts(int64_t n, int64_t grain);
void parallel_for_parts(int64_t n, int64_t grain,
                        const std::function<void(int64_t part, int64_t lo, int64_t hi)>& fn);

}  // namespace pymx
