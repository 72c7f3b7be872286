// libmvec's vector routines, looked up at run time (Note [Vector math through libmvec]).
#include "ops/vector_math.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#if defined(__x86_64__) && defined(__GLIBC__)
#include <dlfcn.h>
#define PMX_HAVE_LIBMVEC 1
#endif

#include "cpu_isa.h"
#include "pymx/base.h"

namespace pymx {
namespace ops {
namespace {

constexpr int kFunctionCount = static_cast<int>(MathFn::kErfc) + 1;

// libmvec's names of the functions in MathFn's order (the double routines; float's end in 'f').
constexpr const char* kNames[kFunctionCount] = {
    "exp", "expm1", "log",  "log1p", "log2", "log10", "cbrt",  "sin",   "cos",  "tan",
    "asin", "acos", "atan", "sinh",  "cosh", "tanh",  "asinh", "acosh", "atanh", "erf",
    "erfc"};

// The widest vector length a tail is padded to: 16 floats (AVX-512), a multiple of every width.
constexpr int64_t kMaxLanes = 16;

enum class Isa { kNone, kSse, kAvx2, kAvx512 };

struct Routines {
  Isa isa = Isa::kNone;
  void* for_float[kFunctionCount] = {};
  void* for_double[kFunctionCount] = {};
};

#ifdef PMX_HAVE_LIBMVEC
typedef float Floats4 __attribute__((vector_size(16)));
typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats16 __attribute__((vector_size(64)));
typedef double Doubles2 __attribute__((vector_size(16)));
typedef double Doubles4 __attribute__((vector_size(32)));
typedef double Doubles8 __attribute__((vector_size(64)));

Isa best_isa() {
  switch (cpu_isa()) {
    case CpuIsa::kAvx512: return Isa::kAvx512;
    case CpuIsa::kAvx2: return Isa::kAvx2;
    default: return Isa::kSse;
  }
}

// The vector function ABI's name of `name`'s routine on `lanes` lanes: _ZGV, the ISA letter (b
// SSE, d AVX2, e AVX-512), N (unmasked), the lane count, v (one vector argument), _, the name.
std::string mangled(Isa isa, int lanes, const std::string& name) {
  const char letter = isa == Isa::kAvx512 ? 'e' : isa == Isa::kAvx2 ? 'd' : 'b';
  return std::string("_ZGV") + letter + "N" + std::to_string(lanes) + "v_" + name;
}

const Routines& routines() {
  static const Routines table = [] {
    Routines r;
    // Never closed: the routines serve until the process exits.
    void* library = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return r;
    r.isa = best_isa();
    const int float_lanes = r.isa == Isa::kAvx512 ? 16 : r.isa == Isa::kAvx2 ? 8 : 4;
    for (int k = 0; k < kFunctionCount; ++k) {
      r.for_float[k] = dlsym(library, mangled(r.isa, float_lanes, std::string(kNames[k]) + "f").c_str());
      r.for_double[k] = dlsym(library, mangled(r.isa, float_lanes / 2, kNames[k]).c_str());
    }
    return r;
  }();
  return table;
}

// dst[i] = routine(src[i]) for i < n, n a multiple of V's lane count. Inlined into the callers
// below, each compiled for the instruction set whose registers carry V.
template <typename V, typename T>
__attribute__((always_inline)) inline void map_vectors(void* routine, const T* src, T* dst,
                                                       int64_t n) {
  const auto fn = reinterpret_cast<V (*)(V)>(routine);
  for (int64_t i = 0; i < n; i += sizeof(V) / sizeof(T)) {
    V v;
    std::memcpy(&v, src + i, sizeof(V));
    v = fn(v);
    std::memcpy(dst + i, &v, sizeof(V));
  }
}

void map_sse(void* r, const float* s, float* d, int64_t n) { map_vectors<Floats4>(r, s, d, n); }
void map_sse(void* r, const double* s, double* d, int64_t n) { map_vectors<Doubles2>(r, s, d, n); }
__attribute__((target("avx2,fma"))) void map_avx2(void* r, const float* s, float* d, int64_t n) {
  map_vectors<Floats8>(r, s, d, n);
}
__attribute__((target("avx2,fma"))) void map_avx2(void* r, const double* s, double* d, int64_t n) {
  map_vectors<Doubles4>(r, s, d, n);
}
__attribute__((target("avx512f"))) void map_avx512(void* r, const float* s, float* d, int64_t n) {
  map_vectors<Floats16>(r, s, d, n);
}
__attribute__((target("avx512f"))) void map_avx512(void* r, const double* s, double* d,
                                                   int64_t n) {
  map_vectors<Doubles8>(r, s, d, n);
}

// Never called with kNone: a routine was found only where an instruction set was chosen.
template <typename T>
void map_with(Isa isa, void* routine, const T* src, T* dst, int64_t n) {
  if (isa == Isa::kAvx512) {
    map_avx512(routine, src, dst, n);
  } else if (isa == Isa::kAvx2) {
    map_avx2(routine, src, dst, n);
  } else {
    map_sse(routine, src, dst, n);
  }
}
#else
const Routines& routines() {
  static const Routines none;
  return none;
}
#endif

template <typename T>
void* routine_of(MathFn fn) {
  const Routines& r = routines();
  return std::is_same_v<T, float> ? r.for_float[static_cast<int>(fn)]
                                  : r.for_double[static_cast<int>(fn)];
}

template <typename T>
void apply(MathFn fn, const T* src, T* dst, int64_t n) {
#ifdef PMX_HAVE_LIBMVEC
  void* routine = routine_of<T>(fn);
  PMX_ASSERT(routine != nullptr, "vector_math: libmvec has no ", kNames[static_cast<int>(fn)],
             " routine for ", sizeof(T) == 4 ? "float" : "double", " here (callers check first)");
  const Isa isa = routines().isa;
  const int64_t whole = n / kMaxLanes * kMaxLanes;
  map_with(isa, routine, src, dst, whole);
  if (whole == n) return;
  // The tail by the same vector routine (Note [Vector math through libmvec]), padded with 1, an
  // ordinary argument of every function here (acosh's domain starts there).
  T in[kMaxLanes], out[kMaxLanes];
  std::fill(in, in + kMaxLanes, T(1));
  std::copy(src + whole, src + n, in);
  map_with(isa, routine, in, out, kMaxLanes);
  std::copy(out, out + (n - whole), dst + whole);
#else
  PMX_ASSERT(false, "vector_math: this build has no libmvec (callers check has_vector_math)");
#endif
}

}  // namespace

template <typename T>
bool has_vector_math(MathFn fn) {
  return routine_of<T>(fn) != nullptr;
}
template bool has_vector_math<float>(MathFn);
template bool has_vector_math<double>(MathFn);

void vector_math(MathFn fn, const float* src, float* dst, int64_t n) { apply(fn, src, dst, n); }
void vector_math(MathFn fn, const double* src, double* dst, int64_t n) { apply(fn, src, dst, n); }

}  // namespace ops
}  // namespace pymx
