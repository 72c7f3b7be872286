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
// The input is converted to the output dtype first (as the CPU does), then every output element
// is reduced by a group of threads: a warp when each output reduces few elements, a whole block of
// 256 when it reduces many. Each group walks its output's elements with a strided index (any set
// of axes, no transposes) and combines partials in shared memory. Floats accumulate in float
// (double for float64), integers in int64.
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
using SumAcc = std::conditional_t<kIsFloat<T>, AccT<T>, int64_t>;

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

// Each op: Acc type, identity, combine; finish() turns the total into the output value.
template <typename T>
struct SumOp {
  using Acc = SumAcc<T>;
  __device__ Acc identity() const { return Acc(0); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ T finish(Acc a, int64_t) const { return convert<T>(a); }
};
template <typename T>
struct ProdOp {
  using Acc = SumAcc<T>;
  __device__ Acc identity() const { return Acc(1); }
  __device__ Acc combine(Acc a, Acc b) const { return a * b; }
  __device__ T finish(Acc a, int64_t) const { return convert<T>(a); }
};
template <typename T>
struct MeanOp : SumOp<T> {
  using Acc = SumAcc<T>;
  __device__ T finish(Acc a, int64_t k) const { return convert<T>(a / Acc(k)); }
};
template <typename T>
struct MaxOp {
  using Acc = AccT<T>;
  __device__ Acc identity() const { return lowest<T>(); }
  __device__ Acc combine(Acc a, Acc b) const { return (a != a || a > b) ? a : b; }  // NaN wins
  __device__ T finish(Acc a, int64_t) const { return convert<T>(a); }
};
template <typename T>
struct MinOp {
  using Acc = AccT<T>;
  __device__ Acc identity() const { return highest<T>(); }
  __device__ Acc combine(Acc a, Acc b) const { return (a != a || a < b) ? a : b; }
  __device__ T finish(Acc a, int64_t) const { return convert<T>(a); }
};
struct AllOp {
  using Acc = bool;
  __device__ bool identity() const { return true; }
  __device__ bool combine(bool a, bool b) const { return a && b; }
  __device__ bool finish(bool a, int64_t) const { return a; }
};
struct AnyOp {
  using Acc = bool;
  __device__ bool identity() const { return false; }
  __device__ bool combine(bool a, bool b) const { return a || b; }
  __device__ bool finish(bool a, int64_t) const { return a; }
};

// See Note [GPU reductions: a group of threads per output]. `outer` maps an output index to the
// offset of its first input element; `inner` maps 0..k-1 to offsets from there.
template <typename T, typename Op>
__global__ void reduce_kernel(const T* in, T* out, int64_t num_out, int64_t k, StridedIndex outer,
                              StridedIndex inner, int group, Op op) {
  using Acc = typename Op::Acc;
  const int groups_per_block = kReduceBlock / group;
  const int g = threadIdx.x / group, lane = threadIdx.x % group;
  for (int64_t base = int64_t(blockIdx.x) * groups_per_block; base < num_out;
       base += int64_t(gridDim.x) * groups_per_block) {
    const int64_t o = base + g;
    Acc acc = op.identity();
    if (o < num_out) {
      const T* p = in + outer.offset(o);
      for (int64_t i = lane; i < k; i += group) acc = op.combine(acc, convert<Acc>(p[inner.offset(i)]));
    }
    acc = group_reduce(acc, group, [&](Acc a, Acc b) { return op.combine(a, b); });
    if (o < num_out && lane == 0) out[o] = op.finish(acc, k);
  }
}

// var / std: mean first, then the mean of squared deviations (two passes over the group's data,
// which stays in cache), divided by max(k - ddof, 0).
template <typename T>
__global__ void var_kernel(const T* in, T* out, int64_t num_out, int64_t k, StridedIndex outer,
                           StridedIndex inner, int group, double ddof, bool take_sqrt) {
  using Acc = AccT<T>;
  auto add = [](Acc a, Acc b) { return a + b; };
  const int groups_per_block = kReduceBlock / group;
  const int g = threadIdx.x / group, lane = threadIdx.x % group;
  for (int64_t base = int64_t(blockIdx.x) * groups_per_block; base < num_out;
       base += int64_t(gridDim.x) * groups_per_block) {
    const int64_t o = base + g;
    const T* p = in + (o < num_out ? outer.offset(o) : 0);
    Acc sum = 0;
    if (o < num_out)
      for (int64_t i = lane; i < k; i += group) sum += convert<Acc>(p[inner.offset(i)]);
    const Acc mean = group_reduce(sum, group, add) / Acc(k);
    Acc sq = 0;
    if (o < num_out) {
      for (int64_t i = lane; i < k; i += group) {
        const Acc d = convert<Acc>(p[inner.offset(i)]) - mean;
        sq += d * d;
      }
    }
    // NumPy divides by max(k - ddof, 0): ddof >= k gives inf (or nan for a zero sum).
    const Acc var = group_reduce(sq, group, add) / Acc(fmax(double(k) - ddof, 0.0));
    if (o < num_out && lane == 0) out[o] = convert<T>(take_sqrt ? Acc(sqrt(var)) : var);
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

enum class Red { kSum, kProd, kMean, kVar, kStd, kMax, kMin, kAll, kAny };

template <Red r>
void reduce_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const TBlob& o = out[0];
  if (o.size() == 0) return;
  const std::vector<int> axes = ops::reduce_axes(*ctx.attrs, in[0].ndim(), "reduction");
  const TBlob x = blobs_as(ctx, in, o.dtype)[0];
  const ReducePlan p = plan_reduce(x.shape, axes);
  cudaStream_t s = stream_of(ctx);
  const unsigned grid = reduce_grid(p);
  auto launch = [&](auto tag, auto op) {
    using T = decltype(tag);
    reduce_kernel<<<grid, kReduceBlock, 0, s>>>(x.data<T>(), o.data<T>(), p.num_out, p.k, p.outer,
                                                p.inner, p.group, op);
  };
  if constexpr (r == Red::kAll || r == Red::kAny) {
    if constexpr (r == Red::kAll) launch(bool(), AllOp()); else launch(bool(), AnyOp());
  } else if constexpr (r == Red::kVar || r == Red::kStd) {
    const double ddof = ctx.attrs->get_float("ddof", 0.0);
    PMX_GPU_FLOAT_SWITCH(o.dtype, T, {
      var_kernel<T><<<grid, kReduceBlock, 0, s>>>(x.data<T>(), o.data<T>(), p.num_out, p.k,
                                                  p.outer, p.inner, p.group, ddof, r == Red::kStd);
    });
  } else if constexpr (r == Red::kMean) {
    PMX_GPU_FLOAT_SWITCH(o.dtype, T, { launch(T(), MeanOp<T>()); });
  } else {
    PMX_GPU_TYPE_SWITCH(o.dtype, T, {
      if constexpr (r == Red::kSum) launch(T(), SumOp<T>());
      else if constexpr (r == Red::kProd) launch(T(), ProdOp<T>());
      else if constexpr (r == Red::kMax) launch(T(), MaxOp<T>());
      else launch(T(), MinOp<T>());
    });
  }
  PMX_KERNEL_LAUNCH_CHECK();
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
