// Reductions (the CPU definitions are in engine/src/ops/reduce.cc).
//
// | op             | input | attrs                        | out dtype                                |
// |----------------|-------|------------------------------|------------------------------------------|
// | sum prod       | x     | axis, keepdims, dtype        | dtype, else bool/int -> int64, float: x's |
// | mean           | x     | axis, keepdims, dtype        | dtype, else int -> float32, float: x's   |
// | var std        | x     | axis, keepdims, ddof         | int -> float32, float: x's               |
// | max min        | x     | axis, keepdims               | x's                                      |
// | all any        | x     | axis, keepdims               | bool                                     |
// | argmax argmin  | x     | axis (None or int), keepdims | int64 (first occurrence; NaN wins)       |
//
// Note [GPU reductions: a group of threads per output]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every output element is reduced by a group of threads: a warp when each output reduces few
// elements, a whole block of 256 when it reduces many. Each group walks its output's elements
// with a strided index (any set of axes, no transposes) and combines partials in shared memory.
// As on the CPU, the input is read in its own dtype and sums, products and means accumulate in
// double for floats and in int64 for integers; only the total is converted to the output dtype
// (sum([0.5] * 4, dtype=int32) is 2, not 0). When there are too few outputs to fill the GPU (a
// full sum has one), each output's elements are split into parts reduced by separate groups,
// whose partial totals a second launch combines.
#include <cfloat>
#include <climits>

#include "kernel_util.cuh"
#include "launch.h"
#include "ops/elemwise.h"

namespace pymx {
namespace gpu {
namespace {

constexpr int kReduceBlock = kBlock;

template <typename T>
using SumAcc = std::conditional_t<kIsFloat<T>, double, int64_t>;

// The dtype of a reduction's result type (Op::Result).
template <typename T> constexpr DType kDTypeOf = DType::kFloat64;
template <> constexpr DType kDTypeOf<float> = DType::kFloat32;
template <> constexpr DType kDTypeOf<__half> = DType::kFloat16;
template <> constexpr DType kDTypeOf<__nv_bfloat16> = DType::kBFloat16;
template <> constexpr DType kDTypeOf<int64_t> = DType::kInt64;
template <> constexpr DType kDTypeOf<int32_t> = DType::kInt32;
template <> constexpr DType kDTypeOf<int8_t> = DType::kInt8;
template <> constexpr DType kDTypeOf<uint8_t> = DType::kUint8;
template <> constexpr DType kDTypeOf<bool> = DType::kBool;

template <typename T>
__device__ __forceinline__ AccT<T> lowest() {
  if constexpr (kIsFloat<T>) return -INFINITY;
  else return std::numeric_limits<T>::lowest();
}
template <typename T>
__device__ __forceinline__ AccT<T> highest() {
  if constexpr (kIsFloat<T>) return INFINITY;
  else return std::numeric_limits<T>::max();
}

// Each op: Acc type, identity, combine; finish(total, count) gives the result (of type Result),
// which the kernel converts to the output dtype.
template <typename T>
struct SumOp {
  using Acc = SumAcc<T>;
  using Result = Acc;
  __device__ Acc identity() const { return Acc(0); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ Result finish(Acc a, int64_t) const { return a; }
};
template <typename T>
struct ProdOp {
  using Acc = SumAcc<T>;
  using Result = Acc;
  __device__ Acc identity() const { return Acc(1); }
  __device__ Acc combine(Acc a, Acc b) const { return a * b; }
  __device__ Result finish(Acc a, int64_t) const { return a; }
};
template <typename T>
struct MeanOp : SumOp<T> {
  using Acc = SumAcc<T>;
  using Result = double;
  __device__ Result finish(Acc a, int64_t count) const { return double(a) / double(count); }
};
template <typename T>
struct MaxOp {
  using Acc = AccT<T>;
  using Result = Acc;
  __device__ Acc identity() const { return lowest<T>(); }
  __device__ Acc combine(Acc a, Acc b) const { return (a != a || a > b) ? a : b; }  // NaN wins
  __device__ Result finish(Acc a, int64_t) const { return a; }
};
template <typename T>
struct MinOp {
  using Acc = AccT<T>;
  using Result = Acc;
  __device__ Acc identity() const { return highest<T>(); }
  __device__ Acc combine(Acc a, Acc b) const { return (a != a || a < b) ? a : b; }
  __device__ Result finish(Acc a, int64_t) const { return a; }
};
struct AllOp {
  using Acc = bool;
  using Result = bool;
  __device__ bool identity() const { return true; }
  __device__ bool combine(bool a, bool b) const { return a && b; }
  __device__ bool finish(bool a, int64_t) const { return a; }
};
struct AnyOp {
  using Acc = bool;
  using Result = bool;
  __device__ bool identity() const { return false; }
  __device__ bool combine(bool a, bool b) const { return a || b; }
  __device__ bool finish(bool a, int64_t) const { return a; }
};

// See Note [GPU reductions: a group of threads per output]. There are num_out * parts groups'
// worth of work: work item v reduces part v % parts of output v / parts, its elements
// [part * part_len, (part + 1) * part_len) of k. `outer` maps an output index to the offset of its
// first input element; `inner` maps 0..k-1 to offsets from there. With kFinish, out[v] is the
// finished result (over `count` elements); without, the part's raw total for a second launch.
template <typename T, typename Op, typename Out, bool kFinish>
__global__ void reduce_kernel(const T* in, Out* out, int64_t num_out, int64_t parts,
                              int64_t part_len, int64_t k, StridedIndex outer, StridedIndex inner,
                              int group, int64_t count, Op op) {
  using Acc = typename Op::Acc;
  const int groups_per_block = kReduceBlock / group;
  const int g = threadIdx.x / group, lane = threadIdx.x % group;
  const int64_t work = num_out * parts;
  for (int64_t base = int64_t(blockIdx.x) * groups_per_block; base < work;
       base += int64_t(gridDim.x) * groups_per_block) {
    const int64_t v = base + g;
    Acc acc = op.identity();
    if (v < work) {
      const T* p = in + outer.offset(v / parts);
      const int64_t begin = (v % parts) * part_len;
      const int64_t end = begin + part_len < k ? begin + part_len : k;
      for (int64_t i = begin + lane; i < end; i += group)
        acc = op.combine(acc, convert<Acc>(p[inner.offset(i)]));
    }
    acc = group_reduce(acc, group, [&](Acc a, Acc b) { return op.combine(a, b); });
    if (v < work && lane == 0) {
      if constexpr (kFinish) out[v] = convert<Out>(op.finish(acc, count));
      else out[v] = acc;
    }
  }
}

// var / std: mean first, then the mean of squared deviations (two passes over the group's data,
// which stays in cache), divided by max(k - ddof, 0); in double, as on the CPU.
template <typename T, typename Out>
__global__ void var_kernel(const T* in, Out* out, int64_t num_out, int64_t k, StridedIndex outer,
                           StridedIndex inner, int group, double ddof, bool take_sqrt) {
  auto add = [](double a, double b) { return a + b; };
  const int groups_per_block = kReduceBlock / group;
  const int g = threadIdx.x / group, lane = threadIdx.x % group;
  for (int64_t base = int64_t(blockIdx.x) * groups_per_block; base < num_out;
       base += int64_t(gridDim.x) * groups_per_block) {
    const int64_t o = base + g;
    const T* p = in + (o < num_out ? outer.offset(o) : 0);
    double sum = 0;
    if (o < num_out)
      for (int64_t i = lane; i < k; i += group) sum += convert<double>(p[inner.offset(i)]);
    const double mean = group_reduce(sum, group, add) / double(k);
    double sq = 0;
    if (o < num_out) {
      for (int64_t i = lane; i < k; i += group) {
        const double d = convert<double>(p[inner.offset(i)]) - mean;
        sq += d * d;
      }
    }
    // NumPy divides by max(k - ddof, 0): ddof >= k gives inf (or nan for a zero sum).
    const double var = group_reduce(sq, group, add) / fmax(double(k) - ddof, 0.0);
    if (o < num_out && lane == 0) out[o] = convert<Out>(take_sqrt ? sqrt(var) : var);
  }
}

// First index of the max (min) along the reduced elements; NaN wins, ties keep the lower index.
template <typename T, bool kMax>
__global__ void arg_kernel(const T* in, int64_t* out, int64_t num_out, int64_t k,
                           StridedIndex outer, StridedIndex inner, int group) {
  using Acc = AccT<T>;
  struct Best { Acc v; int64_t i; };
  auto better = [](Best a, Best b) {  // is a preferred over b?
    if (b.i < 0) return true;
    if (a.i < 0) return false;
    const bool a_nan = a.v != a.v, b_nan = b.v != b.v;
    if (a_nan || b_nan) return a_nan && (!b_nan || a.i < b.i);
    if (a.v == b.v) return a.i < b.i;
    return kMax ? a.v > b.v : a.v < b.v;
  };
  const int groups_per_block = kReduceBlock / group;
  const int g = threadIdx.x / group, lane = threadIdx.x % group;
  for (int64_t base = int64_t(blockIdx.x) * groups_per_block; base < num_out;
       base += int64_t(gridDim.x) * groups_per_block) {
    const int64_t o = base + g;
    Best best{Acc(0), -1};
    if (o < num_out) {
      const T* p = in + outer.offset(o);
      for (int64_t i = lane; i < k; i += group) {
        const Best cand{convert<Acc>(p[inner.offset(i)]), i};
        if (better(cand, best)) best = cand;
      }
    }
    best = group_reduce(best, group, [&](Best a, Best b) { return better(a, b) ? a : b; });
    if (o < num_out && lane == 0) out[o] = best.i;
  }
}

struct ReducePlan {
  int64_t num_out = 1, k = 1;
  StridedIndex outer, inner;
  int group = 32;
};

// Splits the input's axes into kept (outer) and reduced (inner) ones.
ReducePlan plan_reduce(const Shape& shape, const std::vector<int>& axes) {
  ReducePlan plan;
  const std::vector<int64_t> strides = ops::contiguous_strides(shape);
  std::vector<bool> reduced(shape.size(), false);
  for (int a : axes) reduced[a] = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    StridedIndex& idx = reduced[d] ? plan.inner : plan.outer;
    if (shape[d] == 1) continue;
    PMX_CHECK(idx.ndim < kMaxDims, "GPU reductions support at most ", kMaxDims, " axes, got ",
              shape_str(shape));
    idx.shape[idx.ndim] = shape[d];
    idx.stride[idx.ndim] = strides[d];
    ++idx.ndim;
    (reduced[d] ? plan.k : plan.num_out) *= shape[d];
  }
  if (shape_size(shape) == 0) {  // an empty input: outputs get the identity, or nothing
    plan.num_out = 1;
    plan.k = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!reduced[d]) plan.num_out *= shape[d];
  }
  plan.group = plan.k >= 2048 ? kReduceBlock : 32;
  return plan;
}

unsigned reduce_grid(const ReducePlan& plan) {
  return grid_for(plan.num_out, kReduceBlock / plan.group);
}

// Parts per output (Note [GPU reductions: a group of threads per output]): enough work items to
// give every multiprocessor of an H200 (132) about four blocks, each part at least kMinPart long.
int64_t parts_per_output(const ReducePlan& plan) {
  constexpr int64_t kTargetBlocks = 528, kMinPart = 8192;
  const int64_t work_per_block = kReduceBlock / plan.group;
  const int64_t blocks = (plan.num_out + work_per_block - 1) / work_per_block;
  if (blocks >= kTargetBlocks / 2 || plan.k < 2 * kMinPart) return 1;
  const int64_t by_length = plan.k / kMinPart;
  const int64_t by_grid = (kTargetBlocks + plan.num_out - 1) / plan.num_out;
  return by_length < by_grid ? by_length : by_grid;
}

// out[o] = the finished reduction of output o, converted to Out; through partial totals in
// `partials` (Acc, num_out * parts of them) when parts > 1.
template <typename T, typename Out, typename Op>
void launch_reduce(const ReducePlan& p, const T* in, Out* out, typename Op::Acc* partials,
                   int64_t parts, Op op, cudaStream_t s) {
  using Acc = typename Op::Acc;
  if (parts == 1) {
    reduce_kernel<T, Op, Out, true><<<reduce_grid(p), kReduceBlock, 0, s>>>(
        in, out, p.num_out, 1, p.k, p.k, p.outer, p.inner, p.group, p.k, op);
    PMX_KERNEL_LAUNCH_CHECK();
    return;
  }
  const int64_t part_len = (p.k + parts - 1) / parts;
  reduce_kernel<T, Op, Acc, false><<<grid_for(p.num_out * parts, 1), kReduceBlock, 0, s>>>(
      in, partials, p.num_out, parts, part_len, p.k, p.outer, p.inner, kReduceBlock, p.k, op);
  PMX_KERNEL_LAUNCH_CHECK();
  // The partials are a (num_out, parts) row-major matrix, reduced along its rows.
  StridedIndex rows, cols;
  rows.ndim = cols.ndim = 1;
  rows.shape[0] = p.num_out;
  rows.stride[0] = parts;
  cols.shape[0] = parts;
  cols.stride[0] = 1;
  reduce_kernel<Acc, Op, Out, true><<<grid_for(p.num_out, kReduceBlock / 32), kReduceBlock, 0, s>>>(
      partials, out, p.num_out, 1, parts, parts, rows, cols, 32, p.k, op);
  PMX_KERNEL_LAUNCH_CHECK();
}

enum class Red { kSum, kProd, kMean, kVar, kStd, kMax, kMin, kAll, kAny };

// sum, prod, mean, max, min of an input of type T with Op<T>: straight into the output when its
// dtype is the op's result type or T, else through a result buffer and a cast (as the CPU converts
// only the total).
template <template <typename> class Op, typename T>
void reduce_typed(const OpContext& ctx, const ReducePlan& p, const TBlob& x, const TBlob& o) {
  using Acc = typename Op<T>::Acc;
  using Result = typename Op<T>::Result;
  cudaStream_t s = stream_of(ctx);
  const int64_t parts = parts_per_output(p);
  const bool direct = o.dtype == x.dtype || o.dtype == kDTypeOf<Result>;
  const size_t partial_bytes = parts > 1 ? workspace_aligned(p.num_out * parts * sizeof(Acc)) : 0;
  const size_t result_bytes = direct ? 0 : p.num_out * sizeof(Result);
  char* ws = partial_bytes + result_bytes > 0
                 ? static_cast<char*>(ctx.workspace(partial_bytes + result_bytes))
                 : nullptr;
  Acc* partials = reinterpret_cast<Acc*>(ws);
  if (o.dtype == x.dtype) {
    launch_reduce(p, x.data<T>(), o.data<T>(), partials, parts, Op<T>(), s);
  } else if (direct) {
    launch_reduce(p, x.data<T>(), o.data<Result>(), partials, parts, Op<T>(), s);
  } else {
    TBlob result = o;
    result.dptr = ws + partial_bytes;
    result.dtype = kDTypeOf<Result>;
    launch_reduce(p, x.data<T>(), result.data<Result>(), partials, parts, Op<T>(), s);
    cast_blob(result, o, ctx.run.stream);
  }
}

template <Red r>
void reduce_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const TBlob& o = out[0];
  if (o.size() == 0) return;
  const std::vector<int> axes = ops::reduce_axes(*ctx.attrs, in[0].ndim(), "reduction");
  const TBlob& x = in[0];
  const ReducePlan p = plan_reduce(x.shape, axes);
  cudaStream_t s = stream_of(ctx);
  if constexpr (r == Red::kAll || r == Red::kAny) {
    const TBlob flags = blobs_as(ctx, in, DType::kBool)[0];  // "!= 0", as the CPU's bool()
    using Op = std::conditional_t<r == Red::kAll, AllOp, AnyOp>;
    reduce_kernel<bool, Op, bool, true><<<reduce_grid(p), kReduceBlock, 0, s>>>(
        flags.data<bool>(), o.data<bool>(), p.num_out, 1, p.k, p.k, p.outer, p.inner, p.group,
        p.k, Op());
    PMX_KERNEL_LAUNCH_CHECK();
  } else if constexpr (r == Red::kVar || r == Red::kStd) {
    const double ddof = ctx.attrs->get_float("ddof", 0.0);
    PMX_GPU_TYPE_SWITCH(x.dtype, T, {
      PMX_GPU_FLOAT_SWITCH(o.dtype, Out, {
        var_kernel<T, Out><<<reduce_grid(p), kReduceBlock, 0, s>>>(
            x.data<T>(), o.data<Out>(), p.num_out, p.k, p.outer, p.inner, p.group, ddof,
            r == Red::kStd);
      });
    });
    PMX_KERNEL_LAUNCH_CHECK();
  } else {
    PMX_GPU_TYPE_SWITCH(x.dtype, T, {
      if constexpr (r == Red::kSum) reduce_typed<SumOp, T>(ctx, p, x, o);
      else if constexpr (r == Red::kProd) reduce_typed<ProdOp, T>(ctx, p, x, o);
      else if constexpr (r == Red::kMean) reduce_typed<MeanOp, T>(ctx, p, x, o);
      else if constexpr (r == Red::kMax) reduce_typed<MaxOp, T>(ctx, p, x, o);
      else reduce_typed<MinOp, T>(ctx, p, x, o);
    });
  }
}

template <bool kMax>
void arg_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                 const std::vector<TBlob>& out) {
  if (out[0].size() == 0) return;
  std::vector<int> axes;
  if (ctx.attrs->has("axis")) {
    axes = {ops::normalize_axis(ctx.attrs->get_int("axis"), in[0].ndim(), kMax ? "argmax" : "argmin")};
  } else {
    for (int d = 0; d < in[0].ndim(); ++d) axes.push_back(d);
  }
  const ReducePlan p = plan_reduce(in[0].shape, axes);
  PMX_GPU_TYPE_SWITCH(in[0].dtype, T, {
    arg_kernel<T, kMax><<<reduce_grid(p), kReduceBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), out[0].data<int64_t>(), p.num_out, p.k, p.outer, p.inner, p.group);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  op_registry::get_or_create("sum").set_gpu(reduce_compute<Red::kSum>);
  op_registry::get_or_create("prod").set_gpu(reduce_compute<Red::kProd>);
  op_registry::get_or_create("mean").set_gpu(reduce_compute<Red::kMean>);
  op_registry::get_or_create("var").set_gpu(reduce_compute<Red::kVar>);
  op_registry::get_or_create("std").set_gpu(reduce_compute<Red::kStd>);
  op_registry::get_or_create("max").set_gpu(reduce_compute<Red::kMax>);
  op_registry::get_or_create("min").set_gpu(reduce_compute<Red::kMin>);
  op_registry::get_or_create("all").set_gpu(reduce_compute<Red::kAll>);
  op_registry::get_or_create("any").set_gpu(reduce_compute<Red::kAny>);
  op_registry::get_or_create("argmax").set_gpu(arg_compute<true>);
  op_registry::get_or_create("argmin").set_gpu(arg_compute<false>);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
