// Unary elementwise operators (the CPU definitions are in engine/src/ops/elemwise.cc).
//
// | op                                                 | input | attrs        | out dtype          |
// |----------------------------------------------------|-------|--------------|--------------------|
// | exp log log1p expm1 log2 log10 sqrt cbrt sin cos   | x     |              | x's if float, else |
// | tan arcsin arccos arctan sinh cosh tanh arcsinh    |       |              | float32            |
// | arccosh arctanh reciprocal                         |       |              |                    |
// | abs negative sign square floor ceil round rint     | x     |              | x's                |
// | trunc                                              |       |              |                    |
// | clip                                               | x     | a_min, a_max | x's                |
// | isnan isinf isfinite logical_not                   | x     |              | bool               |
// | copy                                               | x     |              | x's                |
#include <cmath>

#include "kernel_util.cuh"
#include "launch.h"

namespace pymx {
namespace gpu {
namespace {

enum class Kind { kFloat, kSame, kBool };

#define PMX_UNARY_OP(Name, kind, expr)                                           \
  struct Name {                                                                  \
    static constexpr Kind kKind = kind;                                          \
    template <typename C>                                                        \
    __device__ __forceinline__ auto operator()(C x) const { return expr; }       \
  };

template <typename C>
__device__ __forceinline__ bool is_negative(C x) {
  if constexpr (std::is_signed_v<C> || std::is_floating_point_v<C>) return x < C(0);
  else return false;
}

template <typename C>
__device__ __forceinline__ C sign_of(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    if (isnan(x)) return x;  // NumPy's sign(NaN) is NaN
  }
  return static_cast<C>((C(0) < x) - is_negative(x));
}

template <typename C>
__device__ __forceinline__ C abs_of(C x) {  // fabs for floats: NumPy's abs(-0.0) is +0.0
  if constexpr (std::is_floating_point_v<C>) return fabs(x);
  else return is_negative(x) ? C(-x) : x;
}

// Rounding is the identity on integers. rint rounds halves to even, like NumPy.
#define PMX_FLOAT_OR_SELF(fn) \
  [&] { if constexpr (std::is_floating_point_v<C>) return C(fn(x)); else return x; }()

PMX_UNARY_OP(ExpOp, Kind::kFloat, C(exp(x)))
PMX_UNARY_OP(LogOp, Kind::kFloat, C(log(x)))
PMX_UNARY_OP(Log1pOp, Kind::kFloat, C(log1p(x)))
PMX_UNARY_OP(Expm1Op, Kind::kFloat, C(expm1(x)))
PMX_UNARY_OP(Log2Op, Kind::kFloat, C(log2(x)))
PMX_UNARY_OP(Log10Op, Kind::kFloat, C(log10(x)))
PMX_UNARY_OP(SqrtOp, Kind::kFloat, C(sqrt(x)))
PMX_UNARY_OP(CbrtOp, Kind::kFloat, C(cbrt(x)))
PMX_UNARY_OP(SinOp, Kind::kFloat, C(sin(x)))
PMX_UNARY_OP(CosOp, Kind::kFloat, C(cos(x)))
PMX_UNARY_OP(TanOp, Kind::kFloat, C(tan(x)))
PMX_UNARY_OP(ArcsinOp, Kind::kFloat, C(asin(x)))
PMX_UNARY_OP(ArccosOp, Kind::kFloat, C(acos(x)))
PMX_UNARY_OP(ArctanOp, Kind::kFloat, C(atan(x)))
PMX_UNARY_OP(SinhOp, Kind::kFloat, C(sinh(x)))
PMX_UNARY_OP(CoshOp, Kind::kFloat, C(cosh(x)))
PMX_UNARY_OP(TanhOp, Kind::kFloat, C(tanh(x)))
PMX_UNARY_OP(ArcsinhOp, Kind::kFloat, C(asinh(x)))
PMX_UNARY_OP(ArccoshOp, Kind::kFloat, C(acosh(x)))
PMX_UNARY_OP(ArctanhOp, Kind::kFloat, C(atanh(x)))
PMX_UNARY_OP(ReciprocalOp, Kind::kFloat, C(C(1) / x))
PMX_UNARY_OP(AbsOp, Kind::kSame, abs_of(x))
PMX_UNARY_OP(NegativeOp, Kind::kSame, C(-x))
PMX_UNARY_OP(SquareOp, Kind::kSame, C(x * x))
PMX_UNARY_OP(SignOp, Kind::kSame, sign_of(x))
PMX_UNARY_OP(FloorOp, Kind::kSame, PMX_FLOAT_OR_SELF(floor))
PMX_UNARY_OP(CeilOp, Kind::kSame, PMX_FLOAT_OR_SELF(ceil))
PMX_UNARY_OP(TruncOp, Kind::kSame, PMX_FLOAT_OR_SELF(trunc))
PMX_UNARY_OP(RintOp, Kind::kSame, PMX_FLOAT_OR_SELF(rint))
PMX_UNARY_OP(IsnanOp, Kind::kBool, [&] { if constexpr (std::is_floating_point_v<C>) return bool(isnan(x)); else return false; }())
PMX_UNARY_OP(IsinfOp, Kind::kBool, [&] { if constexpr (std::is_floating_point_v<C>) return bool(isinf(x)); else return false; }())
PMX_UNARY_OP(IsfiniteOp, Kind::kBool, [&] { if constexpr (std::is_floating_point_v<C>) return bool(isfinite(x)); else return true; }())
PMX_UNARY_OP(LogicalNotOp, Kind::kBool, x == C(0))

template <typename In, typename Out, typename Op>
__global__ void unary_kernel(const In* in, Out* out, int64_t n, Op op) {
  PMX_GRID_STRIDE_LOOP(i, n) out[i] = convert<Out>(op(convert<AccT<In>>(in[i])));
}

template <typename T>
__global__ void clip_kernel(const T* in, T* out, int64_t n, double lo, double hi) {
  using C = AccT<T>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    const double v = static_cast<double>(convert<C>(in[i]));
    // NumPy: minimum(maximum(x, a_min), a_max), so a_min > a_max yields a_max everywhere.
    out[i] = v < lo ? convert<T>(static_cast<C>(fmin(lo, hi)))
                    : v > hi ? convert<T>(static_cast<C>(hi)) : in[i];
  }
}

template <typename Op>
void unary_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const TBlob& o = out[0];
  const int64_t n = o.size();
  if (n == 0) return;
  cudaStream_t s = stream_of(ctx);
  if constexpr (Op::kKind == Kind::kBool) {
    PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
      unary_kernel<T, bool, Op><<<grid_for(n), kBlock, 0, s>>>(in[0].data<T>(), o.data<bool>(), n, Op());
    });
  } else if constexpr (Op::kKind == Kind::kFloat) {
    const TBlob x = blobs_as(ctx, in, o.dtype)[0];  // integers compute in float32
    PMX_GPU_FLOAT_SWITCH(o.dtype, T, {
      unary_kernel<T, T, Op><<<grid_for(n), kBlock, 0, s>>>(x.data<T>(), o.data<T>(), n, Op());
    });
  } else {
    PMX_GPU_TYPE_SWITCH(o.dtype, T, {
      unary_kernel<T, T, Op><<<grid_for(n), kBlock, 0, s>>>(in[0].data<T>(), o.data<T>(), n, Op());
    });
  }
  PMX_KERNEL_LAUNCH_CHECK();
}

void clip_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const int64_t n = out[0].size();
  if (n == 0) return;
  const double lo = ctx.attrs->get_float("a_min", -INFINITY);
  const double hi = ctx.attrs->get_float("a_max", INFINITY);
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
    clip_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(in[0].data<T>(), out[0].data<T>(),
                                                                n, lo, hi);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

void copy_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  cast_blob(in[0], out[0], ctx.run.stream);  // same dtype: a device-to-device memcpy
}

template <typename Op>
bool register_unary(const char* name) {
  op_registry::get_or_create(name).set_gpu(unary_compute<Op>);
  return true;
}

const bool registered =
    register_unary<ExpOp>("exp") && register_unary<LogOp>("log") &&
    register_unary<Log1pOp>("log1p") && register_unary<Expm1Op>("expm1") &&
    register_unary<Log2Op>("log2") && register_unary<Log10Op>("log10") &&
    register_unary<SqrtOp>("sqrt") && register_unary<CbrtOp>("cbrt") &&
    register_unary<SinOp>("sin") && register_unary<CosOp>("cos") && register_unary<TanOp>("tan") &&
    register_unary<ArcsinOp>("arcsin") && register_unary<ArccosOp>("arccos") &&
    register_unary<ArctanOp>("arctan") && register_unary<SinhOp>("sinh") &&
    register_unary<CoshOp>("cosh") && register_unary<TanhOp>("tanh") &&
    register_unary<ArcsinhOp>("arcsinh") && register_unary<ArccoshOp>("arccosh") &&
    register_unary<ArctanhOp>("arctanh") && register_unary<ReciprocalOp>("reciprocal") &&
    register_unary<AbsOp>("abs") && register_unary<NegativeOp>("negative") &&
    register_unary<SquareOp>("square") && register_unary<SignOp>("sign") &&
    register_unary<FloorOp>("floor") && register_unary<CeilOp>("ceil") &&
    register_unary<TruncOp>("trunc") && register_unary<RintOp>("round") &&
    register_unary<RintOp>("rint") && register_unary<IsnanOp>("isnan") &&
    register_unary<IsinfOp>("isinf") && register_unary<IsfiniteOp>("isfinite") &&
    register_unary<LogicalNotOp>("logical_not") &&
    op_registry::get_or_create("clip").set_gpu(clip_compute).compute_gpu &&
    op_registry::get_or_create("copy").set_gpu(copy_compute).compute_gpu;

}  // namespace
}  // namespace gpu
}  // namespace pymx
