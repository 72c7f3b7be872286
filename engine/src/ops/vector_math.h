// Transcendental functions (exp, log, tanh, ...) over float and double arrays, several elements
// per instruction, by glibc's vector math library libmvec.
//
// Note [Vector math through libmvec]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// glibc's scalar tanhf, expm1f, sinf... take 10-25 ns an element: np.tanh over an LSTM's gates
// was a third of its inference step. libmvec, part of glibc, has the same functions on 4, 8 or 16
// lanes (SSE, AVX2, AVX-512), each lane computed independently: a lane whose argument is special
// (inf, NaN, out of the fast path's range) is recomputed by the scalar routine, so every element's
// result is a function of that element alone. Its documented bounds (glibc manual, "Known Maximum
// Errors in Math Functions", x86_64 libmvec) are 1-4 ulp, against 1-2 for the scalar routines.
//  - The routines are looked up once with dlopen/dlsym rather than linked: most came with glibc
//    2.35 (exp, log, sin and cos with 2.22), and a library linked against them would not load on
//    an older glibc. Where libmvec or a routine is missing (older glibc, musl, not x86-64) the
//    callers keep their scalar loops.
//  - The widest set the CPU runs is chosen (AVX-512F, else AVX2 with FMA, else SSE), once per
//    process, so a machine computes the same results on every run.
//  - vector_math computes every element by the vector routine, whatever n: a tail shorter than a
//    vector goes through a padded copy, not the scalar routine. So a kernel that splits an array
//    into parts anywhere (parallel_for) gets the same bits for any split and thread count.
#pragma once

#include <cstdint>

namespace pymx {
namespace ops {

// The functions libmvec offers that pymx's elementwise ops compute.
enum class MathFn {
  kExp, kExpm1, kLog, kLog1p, kLog2, kLog10, kCbrt,
  kSin, kCos, kTan, kArcsin, kArccos, kArctan,
  kSinh, kCosh, kTanh, kArcsinh, kArccosh, kArctanh, kErf, kErfc,
};

// Whether vector_math computes `fn` for T (float or double) on this machine. Thread-safe.
template <typename T>
bool has_vector_math(MathFn fn);

// dst[i] = fn(src[i]) for i < n by libmvec's vector routine, in the calling thread; src may equal
// dst. Only when has_vector_math<T>(fn).
void vector_math(MathFn fn, const float* src, float* dst, int64_t n);
void vector_math(MathFn fn, const double* src, double* dst, int64_t n);

}  // namespace ops
}  // namespace pymx
