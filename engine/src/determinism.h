// The deterministic mode: whether ops must give bitwise reproducible results.
//
// Note [Deterministic mode]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// MXNet's MXNET_ENFORCE_DETERMINISM. pymx's form: PYMX_ENFORCE_DETERMINISM=1 starts the process in
// it, npx.set_deterministic(True/False) switches it.
//
// Guarantee. With the mode on, every forward and backward computation gives bitwise identical
// results run to run on the same machine (same cores, same GPU model and device set, same pymx,
// CUDA, cuBLAS and cuDNN), with the same seeds and the same sequence of calls, under the threaded
// engine as under the naive one, whatever the scheduling. Not across machines or library
// versions: a GPU generation or a core count may change a kernel's blocking, hence its rounding.
//
// What it changes (each only while the mode is on, the default paths being faster; float16 and
// bfloat16 take the first two in both modes, which sum in float and round once):
//  - GPU pooling backward with overlapping windows (stride < kernel) gathers: each input element
//    sums, in a fixed order, the gradients of the windows covering it, instead of each window
//    adding into its inputs with atomics (conv_pool.cu; disjoint windows add at most once into
//    each input, exactly, and keep the atomic kernel). Costs a second read of each window for
//    max (its argmax is found first), and reads of dy per covering window.
//  - GPU embedding backward sorts the indices stably (CUB radix sort) and sums each weight row's
//    gradients in index order, instead of adding them with atomics (indexing.cu). Costs the
//    sort, and a row indexed m times takes m sequential additions per column.
//  - cuDNN convolutions choose by cuDNN's heuristic ranking whatever cudnn_tune says (a choice
//    by measured times can differ between runs, and two algorithms round differently), and only
//    among the algorithms cuDNN reports as CUDNN_DETERMINISTIC (cudnn_convolution.cu); when none
//    qualifies, the op runs pymx's own kernels (im2col and cuBLAS, deterministic), as it does
//    when no algorithm fits the workspace. Choices are kept per mode. Costs what the measured
//    fastest algorithm would have saved.
//  - A captured CUDA graph of a bulk replay is kept per mode (a graph captured with the atomic
//    kernels is never replayed in the mode).
// Nothing raises: every op in pymx has a deterministic implementation on every device it runs
// on (the audit below). An op added without one must, while the mode is on, throw
// Error(kInvalidArg) naming itself and why, rather than run nondeterministically.
//
// Already deterministic, mode or not (audited):
//  - CPU kernels: a parallel loop's chunks depend only on its range, grain and the core count,
//    also when the intra-op pool is busy: its caller then runs the pool's chunks itself, which
//    costs nothing, so it is done in both modes (Note [Intra-op threads]); per-part sums are
//    combined in part order; OpenBLAS runs on one thread per call.
//  - Random numbers: counter-based (Note [Counter-based random numbers]), seeded per op at push
//    in push order (Note [RNG seeds]), so dropout's mask does not depend on the engine.
//  - GPU reductions, softmax, norms: one group of threads per output, combined by a fixed tree
//    (group_reduce in kernel_util.cuh); no atomics anywhere else in cuda/src.
//  - cuBLAS: bitwise reproducible on one architecture, given a fixed workspace per stream: each
//    (device, stream) handle owns its own (cublas_loader.cc), and atomics mode is never enabled.
//  - cuDNN pooling forward, average pooling backward and batch norm: not among the routines
//    cuDNN documents as nondeterministic (developer guide, "Reproducibility (Determinism)": some
//    convolution algorithms, which the mode excludes, and max pooling backward, which pymx never
//    runs: Note [Max pooling backward on the own kernel]).
//  - kvstore 'device' and 'local' add a key's values in list order on one device; 'nccl' sums
//    with NCCL, whose algorithm and order depend only on the GPUs, sizes and NCCL version.
#pragma once

namespace pymx {

// Whether the mode is on. Thread-safe; one relaxed atomic load.
bool deterministic();

// Switches the mode for ops that run from now on and returns its previous state. Thread-safe.
// Callers switch with no op in flight (npx.set_deterministic waits for all work first), so
// that every op runs in the mode that was on when it was pushed.
bool set_deterministic(bool on);

}  // namespace pymx
