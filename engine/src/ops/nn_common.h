// Helpers shared by the NN operator files (nn_*.cc, optimizer.cc, image.cc): a row-major GEMM over
// every float dtype, axis normalisation, small attribute helpers and the counter-based RNG.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "blas.h"
#include "ops/dispatch.h"
#include "ops/float16_convert.h"
#include "ops/small_gemm.h"
#include "ops/small_rows_product.h"
#include "parallel.h"
#include "pymx/op.h"

namespace pymx {
namespace nn {

// Note [Parallel GEMM]
// ~~~~~~~~~~~~~~~~~~~~
// OpenBLAS runs one thread per call (blas.h): its own threads would oversubscribe the engine's
// workers. A large product that a worker runs on its own splits C over the intra-op pool
// instead. Called inside a parallel_for chunk (a convolution over its batch), parallel_for runs
// the blocks serially, so nothing is oversubscribed.
// The split must not change results: the thread count may not change a product's value. But
// OpenBLAS's kernels round an element according to where it falls in the call's own tiling
// (its AVX2 sgemm: (148 x 140) . (140 x 280) as two blocks of columns differed from one call in
// ~1000 elements' last bits, and so did OpenBLAS's own threads). Two splits keep every element's
// arithmetic fixed:
//  - Along C's rows at multiples of kExactRowSplit. OpenBLAS's driver takes our rows (its
//    column-major N) in chunks of three times its kernel's N unroll (4 for the AVX2 and AVX-512
//    sgemm, 4 or 2 for dgemm), so a block that starts at a multiple of 12 meets the same chunks
//    as one call: measured bitwise equal for sgemm and dgemm, either operand transposed (splits
//    at 4, 6, 8 and 16 rows were not), and checked on the machine that runs the native tests
//    (tests/cpp/test_blas_splits.cc). Products taller than wide split this way, about one block
//    per thread; each block repacks the whole of B, the smaller operand there.
//  - Along C's columns only in blocks that the shape alone fixes (about kColumnBlocks of them,
//    whatever the thread count), one thread running them in order when there is one. Products
//    wider than tall split this way: a convolution's C = W . col at batch 1 (a few dozen filters
//    by thousands of pixels), where each block packs only its own part of col. Against one
//    block per thread, eight fixed blocks measured 0-8 % slower on two cores (m x n x k from
//    148 x 280 x 140 to 16 x 50176 x 27): the price of results that do not depend on the core
//    count.
constexpr int64_t kParallelGemmMinFlops = int64_t(1) << 22;  // m * n * k; below, one call wins
constexpr int64_t kExactRowSplit = 12;
constexpr int64_t kColumnBlocks = 8;
constexpr int64_t kMinColumnBlock = 64;

// The width of the column blocks of a product with n columns: a function of n alone.
inline int64_t column_block(int64_t n) {
  const int64_t width = (n + kColumnBlocks - 1) / kColumnBlocks;
  return std::max(kMinColumnBlock, (width + 15) / 16 * 16);  // whole vectors of the kernel
}

// Rows per block when `rows` rows split over `threads` threads at multiples of `multiple`.
inline int64_t aligned_share(int64_t rows, int64_t threads, int64_t multiple) {
  const int64_t share = (rows + threads - 1) / threads;
  return (share + multiple - 1) / multiple * multiple;
}

// OpenBLAS's routines by element type.
template <typename T> struct Blas;
template <> struct Blas<float> {
  template <typename... Args> static void gemm(Args... args) { PMX_CBLAS(sgemm)(args...); }
  template <typename... Args> static void gemv(Args... args) { PMX_CBLAS(sgemv)(args...); }
};
template <> struct Blas<double> {
  template <typename... Args> static void gemm(Args... args) { PMX_CBLAS(dgemm)(args...); }
  template <typename... Args> static void gemv(Args... args) { PMX_CBLAS(dgemv)(args...); }
};

// Note [Vector products]
// ~~~~~~~~~~~~~~~~~~~~~~
// A product whose C has one row or one column is a matrix-vector product. OpenBLAS's gemm would
// still pack its matrix operand first: for a Dense layer at batch 1 (21632 inputs, 100 units)
// that is an 8.6 MB copy per call, and the call took 10x NumPy's; gemv reads the matrix once.
// A large matrix is split by its outputs across the intra-op threads, as Note [Parallel GEMM]
// splits C: outputs that are dot products of the matrix's stored rows (gemv without transpose)
// at multiples of kExactGemvSplit, which measured bitwise equal to one call; outputs that run
// down its stored columns (gemv transposed, whose kernel blocks the sum by the call's width) in
// blocks the shape alone fixes. (K = 0 stays with gemm: gemv returns without scaling C by beta
// when the vector is empty.)
constexpr int64_t kParallelGemvMinElements = int64_t(1) << 20;
constexpr int64_t kExactGemvSplit = 16;

template <typename T>
void vector_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
                    const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c,
                    int64_t ldc) {
  // m == 1: c (1 x n) = a (1 x k) . op(B); with B stored n x k (trans_b), c = B . a, else
  // c = B^T . a. Otherwise: c (m x 1, stride ldc) = op(A) . b (k x 1); with A stored k x m
  // (trans_a), c = A^T . b, else c = A . b.
  const bool row = m == 1;
  const int64_t count = row ? n : m;  // outputs
  const int64_t inc_a = trans_a ? lda : 1, inc_b = trans_b ? 1 : ldb;  // the vector's stride
  const auto outputs = [&](int64_t lo, int64_t hi) {  // outputs [lo, hi) of c
    if (row && trans_b) {
      Blas<T>::gemv(CblasRowMajor, CblasNoTrans, hi - lo, k, alpha, b + lo * ldb, ldb, a, inc_a,
                    beta, c + lo, 1);
    } else if (row) {
      Blas<T>::gemv(CblasRowMajor, CblasTrans, k, hi - lo, alpha, b + lo, ldb, a, inc_a, beta,
                    c + lo, 1);
    } else if (trans_a) {
      Blas<T>::gemv(CblasRowMajor, CblasTrans, k, hi - lo, alpha, a + lo, lda, b, inc_b, beta,
                    c + lo * ldc, ldc);
    } else {
      Blas<T>::gemv(CblasRowMajor, CblasNoTrans, hi - lo, k, alpha, a + lo * lda, lda, b, inc_b,
                    beta, c + lo * ldc, ldc);
    }
  };
  if (count * k < kParallelGemvMinElements) {
    outputs(0, count);
    return;
  }
  const bool stored_rows = row ? trans_b : !trans_a;  // each output a stored row's dot product
  const int64_t block = stored_rows ? aligned_share(count, parallel_max_threads(), kExactGemvSplit)
                                    : column_block(count);
  parallel_for(0, (count + block - 1) / block, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) outputs(i * block, std::min(count, (i + 1) * block));
  });
}

template <typename T>
void gemm_in_parallel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
                      const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c,
                      int64_t ldc) {
  if ((m == 1 || n == 1) && k > 0) {
    vector_product(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const auto call = [&](int64_t rows, int64_t cols, const T* a_block, const T* b_block,
                        T* c_block) {
    Blas<T>::gemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                  trans_b ? CblasTrans : CblasNoTrans, rows, cols, k, alpha, a_block, lda,
                  b_block, ldb, beta, c_block, ldc);
  };
  if (m * n * k < kParallelGemmMinFlops || (m >= n && m < 2 * kExactRowSplit)) {
    call(m, n, a, b, c);
  } else if (m >= n) {
    const int64_t rows = aligned_share(m, parallel_max_threads(), kExactRowSplit);
    parallel_for(0, (m + rows - 1) / rows, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t first = i * rows, count = std::min(m, first + rows) - first;
        call(count, n, trans_a ? a + first : a + first * lda, b, c + first * ldc);
      }
    });
  } else {
    const int64_t columns = column_block(n);
    parallel_for(0, (n + columns - 1) / columns, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t first = i * columns, count = std::min(n, first + columns) - first;
        call(m, count, a, trans_b ? b + first * ldb : b + first, c + first);
      }
    });
  }
}

// Row-major C = alpha * op(A) * op(B) + beta * C, with op(A) M x K and op(B) K x N.
// float products in the ranges where pymx's own kernels measured faster than OpenBLAS go to them
// (Note [Small GEMM], Note [Small-row products]), other float and double products to OpenBLAS
// (see Note [Parallel GEMM]); float16 and bfloat16 through float (below).
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (small_gemm_handles(trans_a, trans_b, m, n, k)) {  // Note [Small GEMM]
    small_gemm_f32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (!trans_a && trans_b && small_rows_product_handles(m, n, k)) {  // Note [Small-row products]
    small_rows_product_f32(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  gemm_in_parallel<float>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                 double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  gemm_in_parallel<double>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The rows x cols matrix at `m` (row stride ld) as a dense float matrix.
template <typename T>
std::vector<float> widened(const T* m, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) convert_span(m + i * ld, out.data() + i * cols, cols);
  return out;
}

// float16 and bfloat16 have no BLAS on the CPU: the operands are widened to float, multiplied
// by the float GEMM above, and C is rounded once. Widening costs O(mk + kn + mn) next to the
// product's O(mnk), and the product runs at OpenBLAS's speed instead of a loop's.
template <typename T, std::enable_if_t<is_16bit_float_v<T>, int> = 0>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, float beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const int64_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  const std::vector<float> a_wide = widened(a, trans_a ? k : m, a_cols, lda);
  const std::vector<float> b_wide = widened(b, trans_b ? n : k, b_cols, ldb);
  // beta == 0 ignores C (NaN included), as BLAS does.
  std::vector<float> c_wide = beta == 0.f ? std::vector<float>(static_cast<size_t>(m * n))
                                          : widened(c, m, n, ldc);
  gemm(trans_a, trans_b, m, n, k, alpha, a_wide.data(), std::max<int64_t>(a_cols, 1),
       b_wide.data(), std::max<int64_t>(b_cols, 1), beta, c_wide.data(), n);
  for (int64_t i = 0; i < m; ++i) convert_span(c_wide.data() + i * n, c + i * ldc, n);
}

// The type in which a kernel over T accumulates (dispatch.h's compute_t).
template <typename T> using acc_t = compute_t<T>;

// Note [Lane sums]
// ~~~~~~~~~~~~~~~~
// A single running sum over a long row is bound by the latency of one floating-point add per
// element (the compiler may not reorder float adds), about 4x slower than the memory can feed it.
// These helpers keep kLanes independent partial sums, which the compiler vectorises and
// pipelines; the result differs from the sequential sum only by rounding.
constexpr int kLanes = 8;

// sum(x[0..n)) in Acc.
template <typename Acc, typename T>
inline Acc lane_sum(const T* x, int64_t n) {
  Acc part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) part[j] += static_cast<Acc>(x[i + j]);
  Acc total = 0;
  for (; i < n; ++i) total += static_cast<Acc>(x[i]);
  for (int j = 0; j < kLanes; ++j) total += part[j];
  return total;
}

// sum((x - center)^2) over [0, n) in Acc.
template <typename Acc, typename T>
inline Acc lane_sum_sq_dev(const T* x, int64_t n, Acc center) {
  Acc part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const Acc d = static_cast<Acc>(x[i + j]) - center;
      part[j] += d * d;
    }
  Acc total = 0;
  for (; i < n; ++i) {
    const Acc d = static_cast<Acc>(x[i]) - center;
    total += d * d;
  }
  for (int j = 0; j < kLanes; ++j) total += part[j];
  return total;
}

// sum(dy * (x - center)) over [0, n) in Acc.
template <typename Acc, typename T>
inline Acc lane_dot_dev(const T* dy, const T* x, int64_t n, Acc center) {
  Acc part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j)
      part[j] += static_cast<Acc>(dy[i + j]) * (static_cast<Acc>(x[i + j]) - center);
  Acc total = 0;
  for (; i < n; ++i) total += static_cast<Acc>(dy[i]) * (static_cast<Acc>(x[i]) - center);
  for (int j = 0; j < kLanes; ++j) total += part[j];
  return total;
}

// Maps a possibly negative axis into [0, ndim); the error names the op, axis and ndim.
inline int normalize_axis(int64_t axis, int ndim, const char* op) {
  PMX_CHECK(axis >= -ndim && axis < ndim, op, ": axis ", axis, " is out of range for an array with ",
            ndim, " dimensions");
  return static_cast<int>(axis < 0 ? axis + ndim : axis);
}

// A spatial attribute (kernel/stride/pad/dilate) of length `nsp`: absent -> `fill` repeated,
// one value -> broadcast, else exactly nsp values.
inline Shape spatial_attr(const Attrs& attrs, const char* key, int nsp, int64_t fill,
                          const char* op) {
  Shape v = attrs.get_shape(key, Shape());
  if (v.empty()) return Shape(nsp, fill);
  if (v.size() == 1 && nsp > 1) return Shape(nsp, v[0]);
  PMX_CHECK(static_cast<int>(v.size()) == nsp, op, ": ", key, " ", shape_str(v), " has ",
            v.size(), " values but the input has ", nsp, " spatial dimensions");
  return v;
}

// Product of the extents in [begin, end).
inline int64_t prod(const Shape& s, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= s[i];
  return n;
}

// Data viewed as (outer, n, inner) around one axis: element j of row (o, i) is at
// (o * n + j) * inner + i. Shared by the CPU and GPU softmax / norm kernels (GPU kernels take it
// by value).
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

// The view around axis `axis`, already in [0, ndim).
inline AxisView axis_view(const Shape& s, int axis) {
  return {prod(s, 0, axis), s[axis], prod(s, axis + 1, static_cast<int>(s.size()))};
}

// The view around the axis attribute `axis_attr` (negative counts from the end); s must have at
// least one dimension.
inline AxisView axis_view(const Shape& s, int64_t axis_attr, const char* op) {
  PMX_CHECK(!s.empty(), op, ": data must have at least one dimension");
  return axis_view(s, normalize_axis(axis_attr, static_cast<int>(s.size()), op));
}

// Whether dropout draws a mask (and so random numbers): in train mode, or always with
// mode='always'; never when p is 0. CPU and GPU kernels and OpDef::draws_random agree through it.
inline bool dropout_draws_mask(const Attrs& attrs, bool is_train) {
  return (attrs.get_str("mode", "training") == "always" || is_train) &&
         attrs.get_float("p", 0.5) > 0;
}

// Note [Counter-based random numbers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Dropout draws element i's number as a hash of (seed, i) (SplitMix64's finaliser), not from a
// sequential generator: the result does not depend on how the loop is split across threads, and a
// GPU kernel reproduces the same mask bit for bit with the same two lines.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// Uniform in [0, 1) with 24 random bits (exact in float).
inline float uniform01(uint64_t seed, uint64_t index) {
  return static_cast<float>(mix64(seed ^ mix64(index)) >> 40) * (1.0f / 16777216.0f);
}

// Checks that a float op got a float dtype; the error (a TypeError) names the op.
inline void check_float(DType t, const char* op, const char* what = "input") {
  if (!is_float(t))
    PMX_THROW(Status::kType, op, ": ", what, " must be a floating-point array, got ", dtype_name(t));
}

// Checks that inputs [begin, end) share input `begin`'s dtype and that it is a float: kernels
// read them all through one pointer type, so a smaller dtype would be read past its end.
inline void check_same_float(const std::vector<DType>& dt, const char* op, size_t begin = 0,
                             size_t end = static_cast<size_t>(-1)) {
  end = std::min(end, dt.size());
  check_float(dt[begin], op);
  for (size_t i = begin + 1; i < end; ++i) {
    if (dt[i] != dt[begin])
      PMX_THROW(Status::kType, op, ": input ", i, " has dtype ", dtype_name(dt[i]), " but input ",
                begin, " has ", dtype_name(dt[begin]));
  }
}

// convolution's act_type: None, or "relu" applied to the output in the kernel (Note [Fused
// convolution + relu] in nn_convolution.cc). Shared with the GPU kernel, which must agree.
inline bool conv_fused_relu(const Attrs& attrs) {
  const std::string act = attrs.get_str("act_type", "None");
  PMX_CHECK(act == "None" || act == "relu", "convolution: act_type '", act,
            "' is not supported (use None or 'relu')");
  return act == "relu";
}

// cudnn_off (MXNet's attribute on convolution, pooling and batch_norm, default False): True keeps
// the op on pymx's own GPU kernels instead of cuDNN (cuda/src/cudnn_nn.h). The CPU ops only
// validate it; shared with the GPU dispatch.
inline bool cudnn_off(const Attrs& attrs) { return attrs.get_bool("cudnn_off", false); }

// convolution's cudnn_tune (MXNet's attribute): how the GPU convolution chooses its cuDNN
// algorithms. off: the best one by cuDNN's heuristics whose workspace fits `workspace` MB;
// limited_workspace (the default, also for None): the fastest measured one that fits; fastest:
// the fastest measured (cuda/src/cudnn_convolution.cu).
enum class CudnnTune { kOff, kLimitedWorkspace, kFastest };

inline CudnnTune conv_cudnn_tune(const Attrs& attrs) {
  const std::string tune = attrs.get_str("cudnn_tune", "None");
  if (tune == "off") return CudnnTune::kOff;
  if (tune == "None" || tune == "limited_workspace") return CudnnTune::kLimitedWorkspace;
  if (tune == "fastest") return CudnnTune::kFastest;
  PMX_THROW(Status::kInvalidArg, "convolution: cudnn_tune '", tune,
            "' is not one of None, 'off', 'limited_workspace', 'fastest'");
}

// convolution's workspace (MXNet's attribute): the most GPU scratch memory, in MB, that a cuDNN
// algorithm may use unless cudnn_tune='fastest' (default 1024).
inline int64_t conv_workspace_mb(const Attrs& attrs) {
  const int64_t mb = attrs.get_int("workspace", 1024);
  PMX_CHECK(mb >= 0, "convolution: workspace must be >= 0 (MB), got ", mb);
  return mb;
}

// need_data_grad=False on convolution_backward / deconvolution_backward: the gradient function
// found that no gradient can flow through the data input, so the op has no data_grad output and
// skips its GEMM (and col2im). Outputs are then (weight_grad, [bias_grad]).
inline bool need_data_grad(const Attrs& attrs) { return attrs.get_bool("need_data_grad", true); }

// The gradient of a (de)convolution through `backward_op`, whose inputs are `backward_inputs` and
// outputs [data_grad], weight_grad, [bias_grad]; one gradient per forward input. A data input
// whose autograd entry has no node is neither a marked variable nor a recorded result, so a
// gradient sent to it could reach nothing (autograd drops it): its gradient is not computed
// (need_data_grad=False) and is a none array. For the first layer that data is the images: a
// third of the backward GEMMs plus col2im.
inline std::vector<NDArray> backward_skipping_data_grad(const char* backward_op,
                                                        const GradContext& ctx,
                                                        const std::vector<NDArray>& backward_inputs) {
  const OpDef& op = op_registry::get(backward_op);
  const Device device = backward_inputs[0].device();
  // The gradients go where autograd offers (GradContext::grad_targets), else to new arrays.
  if (ctx.inputs[0].autograd_entry().node)
    return invoke(op, backward_inputs, ctx.attrs, device, ctx.grad_targets);
  Attrs attrs = ctx.attrs;
  attrs.set("need_data_grad", "False");
  const std::vector<NDArray> targets(ctx.grad_targets.begin() + 1, ctx.grad_targets.end());
  std::vector<NDArray> grads = invoke(op, backward_inputs, attrs, device, targets);
  grads.insert(grads.begin(), NDArray());
  return grads;
}

}  // namespace nn
}  // namespace pymx
