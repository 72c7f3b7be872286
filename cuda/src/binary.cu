// Binary elementwise operators with NumPy broadcasting, and their `_scalar` forms.
//
// | op                                            | inputs   | attrs             | out dtype        |
// |-----------------------------------------------|----------|-------------------|------------------|
// | add subtract multiply maximum minimum power   | lhs, rhs |                   | promoted         |
// | mod floor_divide                              | lhs, rhs |                   | promoted         |
// | divide arctan2 hypot                          | lhs, rhs |                   | float            |
// | equal not_equal greater greater_equal less    | lhs, rhs |                   | bool             |
// | less_equal logical_and logical_or logical_xor | lhs, rhs |                   | bool             |
// | bitwise_and bitwise_or bitwise_xor            | lhs, rhs |                   | promoted (ints)  |
// | left_shift right_shift (ops/shift_math.h)     | lhs, rhs |                   | promoted (ints)  |
// | <each of the above>_scalar                    | data     | scalar, reverse   | as CPU infers    |
//
// Dtypes follow the CPU definitions (engine/src/ops/broadcast.cc): operands are converted to the
// compute dtype (the promoted one; float32 for float-only ops on integers) in the op's workspace,
// predicates compute in it and write bool. `reverse` puts the scalar on the left.
#include "kernel_util.cuh"
#include "launch.h"
#include "ops/elemwise.h"
#include "ops/shift_math.h"

namespace pymx {
namespace gpu {
namespace {

// What an operator computes, and on which dtypes it is instantiated.
enum class Kind {
  kArith,      // out dtype = compute dtype, every dtype
  kFloatOnly,  // out dtype = compute dtype, float dtypes only
  kPredicate,  // bool out; compute in the (common) input dtype
  kIntegerOnly,  // out dtype = compute dtype, integer and bool dtypes only
};

#define PMX_BINARY_OP(Name, kind, expr)                                      \
  struct Name {                                                              \
    static constexpr Kind kKind = kind;                                      \
    template <typename C>                                                    \
    __device__ __forceinline__ auto operator()(C a, C b) const { return expr; } \
  };

template <typename C>
__device__ __forceinline__ C int_power(C base, C exp) {
  if constexpr (std::is_signed_v<C>) {
    if (exp < C(0))  // the integer results of negative powers: 1 and -1 keep their magnitude
      return base == C(1) ? C(1) : base == C(-1) ? (exp % C(2) == C(0) ? C(1) : C(-1)) : C(0);
  }
  C result = 1;
  while (exp > C(0)) {
    if (exp % C(2) == C(1)) result *= base;
    base *= base;
    exp /= C(2);
  }
  return result;
}

template <typename C>
__device__ __forceinline__ C py_mod(C a, C b) {  // sign of the divisor, like NumPy / Python
  if constexpr (std::is_floating_point_v<C>) {
    C r = fmod(a, b);  // nan for b == 0, like NumPy
    if (r == C(0)) return copysign(C(0), b);  // a zero takes the divisor's sign too
    return ((r < C(0)) != (b < C(0))) ? r + b : r;
  } else {
    // b == -1 is answered here: INT64_MIN % -1 overflows (the CPU's mod_of traps without it).
    if (b == C(0) || (std::is_signed_v<C> && b == C(-1))) return C(0);
    C r = a % b;
    if constexpr (std::is_signed_v<C>) {
      if (r != C(0) && ((r < C(0)) != (b < C(0)))) r += b;
    }
    return r;
  }
}

template <typename C>
__device__ __forceinline__ C floor_div(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    // Through the remainder, as the CPU's floor_div_of (NumPy's divmod): inf // 2 is NaN.
    if (b == C(0)) return a / b;
    const C mod = fmod(a, b);
    C div = (a - mod) / b;
    if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) div -= C(1);
    if (div == C(0)) return copysign(C(0), a / b);
    C floored = floor(div);
    if (div - floored > C(0.5)) floored += C(1);
    return floored;
  } else {
    if (b == C(0)) return C(0);
    if constexpr (std::is_signed_v<C>) {  // INT64_MIN / -1 overflows; NumPy wraps to INT64_MIN
      if (b == C(-1)) return C(std::make_unsigned_t<C>(0) - static_cast<std::make_unsigned_t<C>>(a));
    }
    C q = a / b;
    if constexpr (std::is_signed_v<C>) {
      if (q * b != a && ((a < C(0)) != (b < C(0)))) --q;
    }
    return q;
  }
}

template <typename C>
__device__ __forceinline__ C power_op(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return pow(a, b);
  } else if constexpr (std::is_same_v<C, bool>) {
    return a || !b;
  } else {
    return int_power(a, b);
  }
}

PMX_BINARY_OP(AddOp, Kind::kArith, C(a + b))
PMX_BINARY_OP(SubtractOp, Kind::kArith, C(a - b))
PMX_BINARY_OP(MultiplyOp, Kind::kArith, C(a * b))
PMX_BINARY_OP(DivideOp, Kind::kFloatOnly, C(a / b))
PMX_BINARY_OP(MaximumOp, Kind::kArith, (a >= b || a != a) ? a : b)  // NaN propagates; ties: a
PMX_BINARY_OP(MinimumOp, Kind::kArith, (a <= b || a != a) ? a : b)
PMX_BINARY_OP(PowerOp, Kind::kArith, power_op(a, b))
PMX_BINARY_OP(ModOp, Kind::kArith, py_mod(a, b))
PMX_BINARY_OP(Arctan2Op, Kind::kFloatOnly, C(atan2(a, b)))
PMX_BINARY_OP(HypotOp, Kind::kFloatOnly, C(hypot(a, b)))
PMX_BINARY_OP(FloorDivideOp, Kind::kArith, floor_div(a, b))
PMX_BINARY_OP(EqualOp, Kind::kPredicate, a == b)
PMX_BINARY_OP(NotEqualOp, Kind::kPredicate, a != b)
PMX_BINARY_OP(GreaterOp, Kind::kPredicate, a > b)
PMX_BINARY_OP(GreaterEqualOp, Kind::kPredicate, a >= b)
PMX_BINARY_OP(LessOp, Kind::kPredicate, a < b)
PMX_BINARY_OP(LessEqualOp, Kind::kPredicate, a <= b)
PMX_BINARY_OP(LogicalAndOp, Kind::kPredicate, a != C(0) && b != C(0))
PMX_BINARY_OP(LogicalOrOp, Kind::kPredicate, a != C(0) || b != C(0))
PMX_BINARY_OP(LogicalXorOp, Kind::kPredicate, (a != C(0)) != (b != C(0)))
PMX_BINARY_OP(BitwiseAndOp, Kind::kIntegerOnly, C(a & b))
PMX_BINARY_OP(BitwiseOrOp, Kind::kIntegerOnly, C(a | b))
PMX_BINARY_OP(BitwiseXorOp, Kind::kIntegerOnly, C(a ^ b))

// One kernel for same-shape and broadcast operands: a contiguous operand skips the index maths
// (the flag is uniform across the grid, so the branch costs nothing).
template <typename In, typename Out, typename Op>
__global__ void binary_kernel(const In* a, const In* b, Out* out, int64_t n, StridedIndex ia,
                              StridedIndex ib, bool a_dense, bool b_dense, Op op) {
  using C = AccT<In>;
  PMX_GRID_STRIDE_LOOP(i, n) {
    const C x = convert<C>(a[a_dense ? i : ia.offset(i)]);
    const C y = convert<C>(b[b_dense ? i : ib.offset(i)]);
    out[i] = convert<Out>(op(x, y));
  }
}

// Scalar on one side, converted to the compute type once on the host.
template <typename In, typename Out, typename C, typename Op>
__global__ void scalar_kernel(const In* x, Out* out, int64_t n, C scalar, bool reverse, Op op) {
  PMX_GRID_STRIDE_LOOP(i, n) {
    const C v = convert<C>(x[i]);
    out[i] = convert<Out>(reverse ? op(scalar, v) : op(v, scalar));
  }
}

template <typename Op, typename T>
constexpr bool instantiated() {
  if constexpr (Op::kKind == Kind::kFloatOnly) return kIsFloat<T>;
  else if constexpr (Op::kKind == Kind::kIntegerOnly) return !kIsFloat<T>;
  else return true;
}

template <typename Op>
void binary_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const TBlob& o = out[0];
  const int64_t n = o.size();
  if (n == 0) return;
  const DType compute = Op::kKind == Kind::kPredicate ? ops::promote(in[0].dtype, in[1].dtype)
                                                      : o.dtype;
  // This runs on the GPU worker for every op: operands already in the compute dtype and of the
  // output's shape (the usual case) build no vectors.
  const bool convert = in[0].dtype != compute || in[1].dtype != compute;
  const std::vector<TBlob> converted = convert ? blobs_as(ctx, in, compute) : std::vector<TBlob>();
  const std::vector<TBlob>& args = convert ? converted : in;
  const bool a_dense = args[0].shape == o.shape, b_dense = args[1].shape == o.shape;
  StridedIndex index[2] = {};
  if (!a_dense || !b_dense) {
    const std::vector<StridedIndex> strided =
        make_strided({args[0].shape, args[1].shape}, o.shape);
    index[0] = strided[0];
    index[1] = strided[1];
  }
  cudaStream_t s = stream_of(ctx);
  PMX_GPU_TYPE_SWITCH(compute, T, {
    if constexpr (instantiated<Op, T>()) {
      if constexpr (Op::kKind == Kind::kPredicate) {
        binary_kernel<T, bool, Op><<<grid_for(n), kBlock, 0, s>>>(
            args[0].data<T>(), args[1].data<T>(), o.data<bool>(), n, index[0], index[1], a_dense,
            b_dense, Op());
      } else {
        binary_kernel<T, T, Op><<<grid_for(n), kBlock, 0, s>>>(
            args[0].data<T>(), args[1].data<T>(), o.data<T>(), n, index[0], index[1], a_dense,
            b_dense, Op());
      }
      PMX_KERNEL_LAUNCH_CHECK();
    } else {
      PMX_THROW(Status::kType, "GPU kernel does not support dtype ", dtype_name(compute));
    }
  });
}

template <typename Op>
void scalar_compute(const std::string& name, const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const TBlob& o = out[0];
  const int64_t n = o.size();
  if (n == 0) return;
  const bool reverse = ctx.attrs->get_bool("reverse", false);
  const bool scalar_is_int = ops::scalar_text_is_int(*ctx.attrs->find("scalar"));
  const DType compute = Op::kKind == Kind::kPredicate
                            ? ops::promote_scalar(in[0].dtype, scalar_is_int)
                            : o.dtype;
  std::vector<TBlob> converted;  // only when the operand is not in the compute dtype
  const TBlob& x = in[0].dtype == compute ? in[0] : (converted = blobs_as(ctx, in, compute))[0];
  cudaStream_t s = stream_of(ctx);
  PMX_GPU_TYPE_SWITCH(compute, T, {
    if constexpr (instantiated<Op, T>()) {
      using C = AccT<T>;
      using Out = std::conditional_t<Op::kKind == Kind::kPredicate, bool, T>;
      // See Note [Integer scalars are read as int64] (engine/src/ops/elemwise.h).
      const C scalar = ops::scalar_as<C>(*ctx.attrs, "scalar", name);
      scalar_kernel<T, Out, C, Op><<<grid_for(n), kBlock, 0, s>>>(
          x.data<T>(), o.data<Out>(), n, scalar, reverse, Op());
      PMX_KERNEL_LAUNCH_CHECK();
    } else {
      PMX_THROW(Status::kType, "GPU kernel does not support dtype ", dtype_name(compute));
    }
  });
}

template <typename Op>
bool register_binary(const char* name) {
  op_registry::get_or_create(name).set_gpu(binary_compute<Op>);
  const std::string scalar_name = std::string(name) + "_scalar";
  op_registry::get_or_create(scalar_name).set_gpu(
      [scalar_name](const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) { scalar_compute<Op>(scalar_name, ctx, in, out); });
  return true;
}

const bool registered = register_binary<AddOp>("add") && register_binary<SubtractOp>("subtract") &&
                        register_binary<MultiplyOp>("multiply") &&
                        register_binary<DivideOp>("divide") &&
                        register_binary<MaximumOp>("maximum") &&
                        register_binary<MinimumOp>("minimum") &&
                        register_binary<PowerOp>("power") && register_binary<ModOp>("mod") &&
                        register_binary<FloorDivideOp>("floor_divide") &&
                        register_binary<Arctan2Op>("arctan2") && register_binary<HypotOp>("hypot") &&
                        register_binary<EqualOp>("equal") &&
                        register_binary<NotEqualOp>("not_equal") &&
                        register_binary<GreaterOp>("greater") &&
                        register_binary<GreaterEqualOp>("greater_equal") &&
                        register_binary<LessOp>("less") &&
                        register_binary<LessEqualOp>("less_equal") &&
                        register_binary<LogicalAndOp>("logical_and") &&
                        register_binary<LogicalOrOp>("logical_or") &&
                        register_binary<LogicalXorOp>("logical_xor") &&
                        register_binary<BitwiseAndOp>("bitwise_and") &&
                        register_binary<BitwiseOrOp>("bitwise_or") &&
                        register_binary<BitwiseXorOp>("bitwise_xor");

// NumPy's shifts, the CPU's element functions (ops/shift_math.h).
PMX_BINARY_OP(LeftShiftOp, Kind::kIntegerOnly, ops::left_shift_of(a, b))
PMX_BINARY_OP(RightShiftOp, Kind::kIntegerOnly, ops::right_shift_of(a, b))
const bool shifts_registered = register_binary<LeftShiftOp>("left_shift") &&
                               register_binary<RightShiftOp>("right_shift");

}  // namespace
}  // namespace gpu
}  // namespace pymx
