// Softmax and log-softmax along one axis.
//
// | op                     | inputs          | outputs    | attrs |
// |------------------------|-----------------|------------|-------|
// | softmax                | data            | out        | axis (-1), temperature (None = 1) |
// | log_softmax            | data            | out        | axis (-1), temperature (None = 1) |
// | softmax_backward       | out_grad, out   | data_grad  | axis, temperature |
// | log_softmax_backward   | out_grad, out   | data_grad  | axis, temperature |
//
// softmax(x)_i = exp((x_i - max x) / t) / sum_j exp((x_j - max x) / t) (max subtracted for
// stability). Backward from the output y: softmax: dx = y * (dy - sum(dy * y)) / t;
// log_softmax: dx = (dy - exp(y) * sum(dy)) / t. Float dtypes; float16 and bfloat16 compute in
// float; sums accumulate in double. npx.softmax's lengths and npx.masked_softmax run through these
// ops (pymx/numpy_extension/_softmax.py).
//
// Note [Softmax on vector spans]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// One scalar exp per element (glibc's, 10-20 ns) was nearly all of a softmax over a language
// model's (32, 30000) logits or attention scores. A row (the elements along the axis at one
// position of the others) is computed in passes: its maximum (vector compares),
// exp((x - max) / t) for every element by libmvec (Note [Vector math through libmvec]) over
// blocks of kVectorBlock written in place into the output, their sum in double, then the
// scaling by 1 / sum (in double, rounded once) or, for log_softmax, the subtraction of log(sum).
//  - Rows along the last axis are contiguous and run one at a time, summed in vectors of double
//    lanes (Note [Lane sums]). Rows along another axis (inner > 1) lie side by side in memory:
//    they run kPanel at a time, each pass going across the panel (contiguous) for one position
//    along the axis after another, and each row's sum is added in the axis's order.
//  - Whole rows or panels are split over the intra-op threads; an element's value depends only
//    on its row, so results are the same for any thread count.
//  - Accuracy: float32 data computes its exponents (x - max) / t and their exp in float (libmvec's
//    1-4 ulp), where the scalar loop used double: a few float ulp relative to the float64
//    result, plus |z| 2^-24 for an element exp(z) far below the largest, whose absolute error
//    stays below 2^-24 of the row's largest output. float64 stays in double throughout.
//  - Without libmvec (Note [Vector math through libmvec]) the same passes call std::exp.
//
// Note [Softmax exp floor]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// libmvec's exp sends a whole vector through its scalar path when one lane is far enough below
// zero for the result to leave the normal numbers. Masked attention scores are exactly that:
// npx.masked_softmax fills the padding with the lowest finite value, and rows along -inf masks
// are the same, so a (8, 4, 128, 128) masked softmax ran 4x slower than an unmasked one. Exponents
// below kExpFloor (float -87, double -708: exp below 1.7e-38 / 3.1e-308, next to the smallest
// normal number) are therefore raised to kExpFloor for libmvec and their exp set to 0 afterwards.
// The error is below that bound absolutely, far inside the accuracy stated above (2^-24 of the
// row's largest output, which is at least 1 / n); it leaves the row's double sum unchanged, so
// log_softmax gives the same bits as before, and softmax differs only in outputs below 1.7e-38
// (float) that are now 0. log_softmax's backward takes exp(y) through the same floor.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/activation_vector.h"
#include "ops/float16_convert.h"
#include "ops/nn_common.h"
#include "cpu_isa.h"
#include "ops/vector_math.h"
#include "parallel.h"

namespace pymx {
namespace {

using nn::AxisView;
using nn::kVectorBlock;

// Neighbouring strided rows computed together (Note [Softmax on vector spans]): wide enough for
// whole vectors per step, narrow enough that a (1000, 256) softmax along axis 0 still splits.
constexpr int64_t kPanel = 64;

// Elements per parallel chunk: ~64 KiB of float, enough to pay for handing a chunk to a thread.
constexpr int64_t kGrain = 16384;

// dst[i] = exp(src[i]) for i < n; dst may be src.
template <typename A>
__attribute__((always_inline)) inline void exp_span(const A* src, A* dst, int64_t n) {
  if (ops::has_vector_math<A>(ops::MathFn::kExp)) {
    ops::vector_math(ops::MathFn::kExp, src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = std::exp(src[i]);
  }
}

// Exponents below this have their exp taken as 0 (Note [Softmax exp floor]).
template <typename A>
constexpr A kExpFloor = std::is_same_v<A, double> ? A(-708) : A(-87);

// out[i] = exp(z[i]) for i < n, and 0 where z[i] < kExpFloor (Note [Softmax exp floor]).
// scratch holds n elements; out may be z or scratch.
template <typename A>
__attribute__((always_inline)) inline void exp_floored(const A* z, A* scratch, A* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) scratch[i] = z[i] < kExpFloor<A> ? kExpFloor<A> : z[i];
  exp_span(scratch, scratch, n);
  for (int64_t i = 0; i < n; ++i) out[i] = z[i] < kExpFloor<A> ? A(0) : scratch[i];
}

// GCC's vector of T filling kBytes. The row reductions below are written on these, kBytes the
// register width of the copy they are compiled into (Note [Softmax per instruction set]): GCC
// vectorised neither a max over floats written as a loop nor one over an array of lanes.
template <typename T, int kBytes>
struct VectorOf {
  typedef T type __attribute__((vector_size(kBytes)));
};

// The largest of x[0..n), -inf for n == 0. NaN elements are passed over (the row's sum turns
// NaN through them anyway).
template <int kBytes, typename A>
__attribute__((always_inline)) inline A row_max(const A* x, int64_t n) {
  using V = typename VectorOf<A, kBytes>::type;
  constexpr int64_t kWidth = kBytes / sizeof(A);
  V lane;
  for (int64_t j = 0; j < kWidth; ++j) lane[j] = -std::numeric_limits<A>::infinity();
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    V v;
    std::memcpy(&v, x + i, sizeof v);
    lane = lane < v ? v : lane;
  }
  A mx = -std::numeric_limits<A>::infinity();
  for (; i < n; ++i) mx = mx < x[i] ? x[i] : mx;
  for (int64_t j = 0; j < kWidth; ++j) mx = mx < lane[j] ? lane[j] : mx;
  return mx;
}

// sum(a[i] * b[i]) for i < n (sum(a[i]) without b) in double, in four vectors of double lanes
// (Note [Lane sums]) added in a fixed order. Four chains of additions, not one or two: each
// addition waits for the one before it in its lanes, and a row of 128 to 30000 floats was bound
// by that wait rather than by loading and converting its elements.
template <int kBytes, typename A>
__attribute__((always_inline)) inline double row_sum(const A* a, const A* b, int64_t n) {
  using Doubles = typename VectorOf<double, kBytes>::type;
  constexpr int64_t kWidth = kBytes / sizeof(double);
  constexpr int kChains = 4;
  using Part = typename VectorOf<A, kWidth * sizeof(A)>::type;  // kWidth elements of A
  Doubles sums[kChains] = {};
  int64_t i = 0;
  for (; i + kChains * kWidth <= n; i += kChains * kWidth) {
    for (int c = 0; c < kChains; ++c) {
      Part part;
      std::memcpy(&part, a + i + c * kWidth, sizeof part);
      Doubles term = __builtin_convertvector(part, Doubles);
      if (b) {
        std::memcpy(&part, b + i + c * kWidth, sizeof part);
        term *= __builtin_convertvector(part, Doubles);
      }
      sums[c] += term;
    }
  }
  double total = 0;
  for (; i < n; ++i)
    total += b ? static_cast<double>(a[i]) * static_cast<double>(b[i]) : static_cast<double>(a[i]);
  const Doubles lanes = (sums[0] + sums[1]) + (sums[2] + sums[3]);
  for (int64_t j = 0; j < kWidth; ++j) total += lanes[j];
  return total;
}

// softmax / log_softmax of one contiguous row of n elements; y may be x.
template <int kBytes, bool kLog, typename A>
__attribute__((always_inline)) inline void forward_row(const A* x, A* y, int64_t n, A inv_t) {
  const A mx = row_max<kBytes>(x, n);
  double sum = 0;
  A e[kVectorBlock];  // exp's scratch; log_softmax keeps the exponents in y and their exp here
  for (int64_t first = 0; first < n; first += kVectorBlock) {
    const int64_t m = std::min(kVectorBlock, n - first);
    A* z = y + first;
    for (int64_t j = 0; j < m; ++j) z[j] = (x[first + j] - mx) * inv_t;
    A* out = kLog ? e : z;
    exp_floored(z, e, out, m);
    sum += row_sum<kBytes>(out, static_cast<const A*>(nullptr), m);
  }
  if constexpr (kLog) {
    const double log_sum = std::log(sum);
    for (int64_t j = 0; j < n; ++j) y[j] = static_cast<A>(static_cast<double>(y[j]) - log_sum);
  } else {
    const double inv_sum = 1.0 / sum;
    for (int64_t j = 0; j < n; ++j) y[j] = static_cast<A>(static_cast<double>(y[j]) * inv_sum);
  }
}

// softmax / log_softmax of w <= kPanel strided rows side by side: element k of row c at
// x[k * x_stride + c] (and y[k * y_stride + c]); y may be x.
template <int kBytes, bool kLog, typename A>
__attribute__((always_inline)) inline void forward_panel(const A* x, int64_t x_stride, A* y,
                                                        int64_t y_stride, int64_t n, int64_t w,
                                                        A inv_t) {
  A mx[kPanel], e[kPanel];
  double sum[kPanel];
  std::fill(mx, mx + w, -std::numeric_limits<A>::infinity());
  std::fill(sum, sum + w, 0.0);
  for (int64_t k = 0; k < n; ++k) {
    const A* xk = x + k * x_stride;
    for (int64_t c = 0; c < w; ++c) mx[c] = mx[c] < xk[c] ? xk[c] : mx[c];
  }
  for (int64_t k = 0; k < n; ++k) {
    const A* xk = x + k * x_stride;
    A* z = y + k * y_stride;
    for (int64_t c = 0; c < w; ++c) z[c] = (xk[c] - mx[c]) * inv_t;
    A* out = kLog ? e : z;
    exp_floored(z, e, out, w);
    for (int64_t c = 0; c < w; ++c) sum[c] += static_cast<double>(out[c]);
  }
  double finish[kPanel];  // log(sum) to subtract, or 1 / sum to multiply by
  for (int64_t c = 0; c < w; ++c) finish[c] = kLog ? std::log(sum[c]) : 1.0 / sum[c];
  for (int64_t k = 0; k < n; ++k) {
    A* yk = y + k * y_stride;
    for (int64_t c = 0; c < w; ++c)
      yk[c] = static_cast<A>(kLog ? static_cast<double>(yk[c]) - finish[c]
                                  : static_cast<double>(yk[c]) * finish[c]);
  }
}

// dx from dy and y along one contiguous row of n elements; dx may be dy.
template <int kBytes, bool kLog, typename A>
__attribute__((always_inline)) inline void backward_row(const A* dy, const A* y, A* dx, int64_t n,
                                                       double inv_t) {
  if constexpr (kLog) {
    const double sum = row_sum<kBytes>(dy, static_cast<const A*>(nullptr), n);
    const A sum_hi = static_cast<A>(sum);
    const A sum_lo = static_cast<A>(sum - static_cast<double>(sum_hi));
    const A inv_t_a = static_cast<A>(inv_t);
    A e[kVectorBlock];
    for (int64_t first = 0; first < n; first += kVectorBlock) {
      const int64_t m = std::min(kVectorBlock, n - first);
      exp_floored(y + first, e, e, m);
      if constexpr (kBytes >= 32) {  // the FMA builds (Note [Softmax backward in float])
        for (int64_t j = 0; j < m; ++j)
          dx[first + j] = (std::fma(-e[j], sum_hi, dy[first + j]) - e[j] * sum_lo) * inv_t_a;
      } else {
        for (int64_t j = 0; j < m; ++j) {
          const double g = static_cast<double>(dy[first + j]);
          dx[first + j] = static_cast<A>((g - static_cast<double>(e[j]) * sum) * inv_t);
        }
      }
    }
  } else {
    // In A, the double sum split into a leading part and the rest (zero for double) that
    // dy - sum takes in two steps: for float32 that difference keeps the double sum's accuracy
    // where dy and sum nearly cancel, at twice the vector width of arithmetic in double
    // (Note [Softmax backward in float]).
    const double sum = row_sum<kBytes>(dy, y, n);
    const A sum_hi = static_cast<A>(sum);
    const A sum_lo = static_cast<A>(sum - static_cast<double>(sum_hi));
    const A inv_t_a = static_cast<A>(inv_t);
    for (int64_t j = 0; j < n; ++j) dx[j] = y[j] * ((dy[j] - sum_hi) - sum_lo) * inv_t_a;
  }
}

// dx from dy and y along w <= kPanel strided rows side by side (element k of row c at
// [k * stride + c] in all three); dx may be dy.
template <int kBytes, bool kLog, typename A>
__attribute__((always_inline)) inline void backward_panel(const A* dy, const A* y, A* dx,
                                                         int64_t stride, int64_t n, int64_t w,
                                                         double inv_t) {
  double sum[kPanel];
  std::fill(sum, sum + w, 0.0);
  for (int64_t k = 0; k < n; ++k) {
    const A* g = dy + k * stride;
    const A* v = y + k * stride;
    for (int64_t c = 0; c < w; ++c)
      sum[c] += kLog ? static_cast<double>(g[c])
                     : static_cast<double>(g[c]) * static_cast<double>(v[c]);
  }
  A e[kPanel];
  for (int64_t k = 0; k < n; ++k) {
    const A* g = dy + k * stride;
    const A* v = y + k * stride;
    A* d = dx + k * stride;
    if constexpr (kLog) {
      exp_floored(v, e, e, w);
      for (int64_t c = 0; c < w; ++c)
        d[c] = static_cast<A>((static_cast<double>(g[c]) - static_cast<double>(e[c]) * sum[c]) *
                              inv_t);
    } else {
      for (int64_t c = 0; c < w; ++c)
        d[c] = static_cast<A>(static_cast<double>(v[c]) * (static_cast<double>(g[c]) - sum[c]) *
                              inv_t);
    }
  }
}

// Note [Softmax backward in float]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// softmax's backward along contiguous rows, dx = y * (dy - sum(dy * y)) / t, has no
// transcendental: converting every element to double and back, and arithmetic at half the vector
// width, were most of its time after the row's sum. The sum stays in double (four chains of
// lanes, row_sum); the element pass runs in float32 for float32, float16 and bfloat16 with the
// sum split into float hi + lo, dy - hi - lo in two steps. hi is within half a float ulp of the
// sum, so wherever dy and the sum nearly cancel (dy = hi exactly when they agree to float
// precision) the difference is that of the double sum to a float rounding or two, as before; the
// products with y and 1 / t add one rounding each (dx within ~3 float ulp of the float64 formula
// on the values held, against one before). float64 rows compute as before (lo is 0).
// log_softmax's, dx = (dy - exp(y) * sum(dy)) / t, takes the same split in the FMA builds (Note
// [Softmax per instruction set]): dy - exp(y) * hi rounds once (fma), so a near cancellation
// keeps its accuracy there too; the baseline build, whose product would round before the
// subtraction, keeps double.

// Note [Softmax per instruction set]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Around libmvec's exp, the passes (maximum, exponents, double sums, scaling, conversions to and
// from double) are plain loops that the baseline x86-64 build vectorises to SSE, 4 floats or 2
// doubles an instruction; they took most of a softmax's time once exp was vectorised. They are
// compiled three times, for the baseline, AVX2 with FMA and AVX-512, and cpu_isa()'s set is
// chosen (Note [CPU instruction sets]), as vector_math chooses libmvec's routines. The FMA builds
// contract a * b + c to one rounding (the dot products, log_softmax's backward), and the row sums'
// lanes are as wide as the registers, so the last bit may differ between machines of different
// instruction sets, never between runs, thread counts or engines on one machine.

// One unit of work (for_each_unit): a contiguous row of n elements (row), else a panel of w
// strided rows, element k of row c at [k * stride + c] (x_stride for the inputs, y_stride for
// the output; the backward's three arrays share x_stride). The passes below are inlined into
// one copy per instruction set (Note [Softmax per instruction set]).
struct Unit {
  int64_t n, w, x_stride, y_stride;
  bool row;
};

template <int kBytes, bool kLog, typename A>
__attribute__((always_inline)) inline void forward_unit(const Unit& u, const A* x, A* y, A inv_t) {
  if (u.row) {
    forward_row<kBytes, kLog>(x, y, u.n, inv_t);
  } else {
    forward_panel<kBytes, kLog>(x, u.x_stride, y, u.y_stride, u.n, u.w, inv_t);
  }
}

template <int kBytes, bool kLog, typename A>
__attribute__((always_inline)) inline void backward_unit(const Unit& u, const A* dy, const A* y,
                                                        A* dx, double inv_t) {
  if (u.row) {
    backward_row<kBytes, kLog>(dy, y, dx, u.n, inv_t);
  } else {
    backward_panel<kBytes, kLog>(dy, y, dx, u.x_stride, u.n, u.w, inv_t);
  }
}

template <bool kLog, typename A>
__attribute__((target("avx2,fma"))) void forward_avx2(const Unit& u, const A* x, A* y, A inv_t) {
  forward_unit<32, kLog>(u, x, y, inv_t);
}
template <bool kLog, typename A>
__attribute__((target("avx512f"))) void forward_avx512(const Unit& u, const A* x, A* y,
                                                       A inv_t) {
  forward_unit<64, kLog>(u, x, y, inv_t);
}
template <bool kLog, typename A>
__attribute__((target("avx2,fma"))) void backward_avx2(const Unit& u, const A* dy, const A* y,
                                                       A* dx, double inv_t) {
  backward_unit<32, kLog>(u, dy, y, dx, inv_t);
}
template <bool kLog, typename A>
__attribute__((target("avx512f"))) void backward_avx512(const Unit& u, const A* dy, const A* y,
                                                        A* dx, double inv_t) {
  backward_unit<64, kLog>(u, dy, y, dx, inv_t);
}

template <bool kLog, typename A>
void forward_any(const Unit& u, const A* x, A* y, A inv_t) {
  switch (cpu_isa()) {
    case CpuIsa::kAvx512: forward_avx512<kLog>(u, x, y, inv_t); break;
    case CpuIsa::kAvx2: forward_avx2<kLog>(u, x, y, inv_t); break;
    default: forward_unit<16, kLog>(u, x, y, inv_t); break;
  }
}

template <bool kLog, typename A>
void backward_any(const Unit& u, const A* dy, const A* y, A* dx, double inv_t) {
  switch (cpu_isa()) {
    case CpuIsa::kAvx512: backward_avx512<kLog>(u, dy, y, dx, inv_t); break;
    case CpuIsa::kAvx2: backward_avx2<kLog>(u, dy, y, dx, inv_t); break;
    default: backward_unit<16, kLog>(u, dy, y, dx, inv_t); break;
  }
}

// Converts a unit's n rows of w elements from src (rows `src_stride` apart) to dst (rows
// `dst_stride` apart): one span when both are contiguous.
template <typename To, typename From>
void convert_rows(const From* src, int64_t src_stride, To* dst, int64_t dst_stride, int64_t n,
                  int64_t w) {
  if (src_stride == w && dst_stride == w) {
    convert_span(src, dst, n * w);
    return;
  }
  for (int64_t k = 0; k < n; ++k) convert_span(src + k * src_stride, dst + k * dst_stride, w);
}

// The units of work a softmax over L splits into: whole rows when they are contiguous
// (inner == 1), else panels of up to kPanel neighbouring rows; calls fn(o, c0, w, scratch) for
// each, o the outer index and [c0, c0 + w) the inner positions, over the intra-op threads.
// scratch is a float buffer of the calling chunk for float16 and bfloat16 copies, reused by its
// units (fn grows it as it needs).
template <typename Fn>
void for_each_unit(const AxisView& L, Fn fn) {
  const int64_t panels = L.inner == 1 ? 1 : (L.inner + kPanel - 1) / kPanel;
  const int64_t width = L.inner == 1 ? 1 : std::min(kPanel, L.inner);
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, L.n * width));
  parallel_for(0, L.outer * panels, grain, [=](int64_t lo, int64_t hi) {
    std::vector<float> scratch;
    for (int64_t u = lo; u < hi; ++u) {
      const int64_t o = u / panels, c0 = u % panels * kPanel;
      fn(o, c0, std::min(kPanel, L.inner - c0), scratch);
    }
  });
}

// At least n floats of scratch.
float* scratch_of(std::vector<float>& scratch, int64_t n) {
  if (static_cast<int64_t>(scratch.size()) < n) scratch.resize(static_cast<size_t>(n));
  return scratch.data();
}

AxisView layout_of(const Attrs& attrs, const Shape& s, const char* op) {
  return nn::axis_view(s, attrs.get_int("axis", -1), op);
}

double temperature(const Attrs& attrs, const char* op) {
  const double t = attrs.get_float("temperature", 1.0);
  PMX_CHECK(t > 0, op, ": temperature must be > 0, got ", t);
  return t;
}

void softmax_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                   std::vector<Shape>* out, std::vector<DType>* out_dt) {
  layout_of(attrs, in[0], "softmax");
  temperature(attrs, "softmax");
  nn::check_float(dt[0], "softmax", "data");
  *out = {in[0]};
  *out_dt = {dt[0]};
}

template <bool kLog>
void softmax_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const char* op = kLog ? "log_softmax" : "softmax";
  const AxisView L = layout_of(*ctx.attrs, in[0].shape, op);
  if (L.n == 0 || L.outer * L.inner == 0) return;  // nothing to compute
  const double inv_t = 1.0 / temperature(*ctx.attrs, op);
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    using A = nn::acc_t<T>;
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    const A inv_t_a = static_cast<A>(inv_t);
    for_each_unit(L, [=](int64_t o, int64_t c0, int64_t w, std::vector<float>& scratch) {
      const int64_t base = o * L.n * L.inner + c0;
      if constexpr (std::is_same_v<T, A>) {
        forward_any<kLog>(Unit{L.n, w, L.inner, L.inner, L.inner == 1}, x + base, y + base,
                          inv_t_a);
      } else {  // float16, bfloat16: the unit's rows through a float copy
        float* wide = scratch_of(scratch, L.n * w);
        convert_rows(x + base, L.inner, wide, w, L.n, w);
        forward_any<kLog>(Unit{L.n, w, w, w, L.inner == 1}, wide, wide, inv_t_a);
        convert_rows(wide, w, y + base, L.inner, L.n, w);
      }
    });
  });
}

template <bool kLog>
void backward_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                    std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const char* op = kLog ? "log_softmax_backward" : "softmax_backward";
  PMX_CHECK(in[0] == in[1], op, ": out_grad ", shape_str(in[0]), " and out ", shape_str(in[1]),
            " differ");
  layout_of(attrs, in[1], op);
  temperature(attrs, op);
  nn::check_same_float(dt, op);
  *out = {in[0]};
  *out_dt = {dt[0]};
}

template <bool kLog>
void softmax_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  const char* op = kLog ? "log_softmax" : "softmax";
  const AxisView L = layout_of(*ctx.attrs, in[1].shape, op);
  if (L.n == 0 || L.outer * L.inner == 0) return;
  const double inv_t = 1.0 / temperature(*ctx.attrs, op);
  PMX_FLOAT_SWITCH(in[0].dtype, T, {
    using A = nn::acc_t<T>;
    const T* dy = in[0].data<T>();
    const T* y = in[1].data<T>();
    T* dx = out[0].data<T>();
    for_each_unit(L, [=](int64_t o, int64_t c0, int64_t w, std::vector<float>& scratch) {
      const int64_t base = o * L.n * L.inner + c0;
      if constexpr (std::is_same_v<T, A>) {
        backward_any<kLog>(Unit{L.n, w, L.inner, L.inner, L.inner == 1}, dy + base, y + base,
                           dx + base, inv_t);
      } else {  // float16, bfloat16: through float copies; dx is written over dy's
        float* g = scratch_of(scratch, 2 * L.n * w);
        float* v = g + L.n * w;
        convert_rows(dy + base, L.inner, g, w, L.n, w);
        convert_rows(y + base, L.inner, v, w, L.n, w);
        backward_any<kLog>(Unit{L.n, w, w, w, L.inner == 1}, g, v, g, inv_t);
        convert_rows(g, w, dx + base, L.inner, L.n, w);
      }
    });
  });
}

PMX_REGISTER_OP(softmax)
    .set_infer(softmax_infer)
    .set_cpu(softmax_forward<false>)
    .set_gradient([](const GradContext& ctx) {
      return invoke("softmax_backward", {ctx.out_grads[0], ctx.outputs[0]}, ctx.attrs);
    });

PMX_REGISTER_OP(log_softmax)
    .set_infer(softmax_infer)
    .set_cpu(softmax_forward<true>)
    .set_gradient([](const GradContext& ctx) {
      return invoke("log_softmax_backward", {ctx.out_grads[0], ctx.outputs[0]}, ctx.attrs);
    });

PMX_REGISTER_OP(softmax_backward)
    .set_num_inputs(2)
    .set_infer(backward_infer<false>)
    .set_cpu(softmax_backward<false>);

PMX_REGISTER_OP(log_softmax_backward)
    .set_num_inputs(2)
    .set_infer(backward_infer<true>)
    .set_cpu(softmax_backward<true>);

}  // namespace
}  // namespace pymx
