// Sorting and scanning along an axis: the operators behind pymx.np.sort, argsort and cumsum.
// (GPU kernels: cuda/src/sort_scan.cu; the row geometry both use: ops/sort_scan_geometry.h.)
//
// | op              | inputs   | outputs   | attrs |
// |-----------------|----------|-----------|-------|
// | sort            | data     | out       | axis (-1, or None), is_ascend (True) |
// | argsort         | data     | indices   | axis (-1, or None), is_ascend (True), dtype (int64: of indices) |
// | cumsum          | data     | out       | axis (None, or an int), dtype (None: see Note [cumsum dtypes]) |
// | cumsum_backward | out_grad | data_grad | axis (None, or an int) |
//
// axis None works on the flattened array, and the output is then 1-D. sort's gradient scatters
// the output gradient back through the sorting permutation (topk_backward); argsort has none;
// cumsum's is the reversed cumulative sum of the output gradient (cumsum_backward).
//
// Note [Sort order]
// ~~~~~~~~~~~~~~~~~
// Ascending order is NumPy's: NaNs last, whatever their sign bit. Descending order (is_ascend
// False) is its exact reverse except for ties, so NaNs come first. Both are stable: equal values
// (-0.0 and +0.0 among them) keep their input order, which is NumPy's argsort(kind='stable').
// sort's output is the input gathered by that permutation, so NaN payloads and the signs of
// zeros travel with their values, and the CPU and GPU ops give the same bits.
//
// Note [cumsum dtypes]
// ~~~~~~~~~~~~~~~~~~~~
// Without a dtype, bool, int8, uint8 and int32 data accumulate in int64 (NumPy's platform
// integer; NumPy would give uint8 a uint64, which pymx lacks), other dtypes in their own. Each
// element is first converted to the output dtype (NumPy's astype), then added to a running sum
// in the output's compute type, one row element after another; integers wrap around as in
// NumPy. float32 and float64 rows are therefore summed in exactly NumPy's order and give its bits.
// float16 and bfloat16 keep their running sum in float and round each output once: NumPy (and
// MXNet) round every partial sum to float16, whose error grows with the row (a 4096-long row of
// 0.1s ends at 256 in NumPy's float16, instead of 410).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/elemwise.h"
#include "ops/sort_scan_geometry.h"

namespace pymx {
namespace {

using nn::AxisView;
using nn::row_geom;
using nn::RowGeom;

// Rows that lie `inner` apart in memory are handled up to kLaneTile at a time: element j of all
// of them is one contiguous run, so gathering and scanning them together reads whole cache lines.
constexpr int64_t kLaneTile = 64;
// Elements below which a chunk of the intra-op loop is not worth handing to another thread.
constexpr int64_t kMinChunkElements = int64_t(1) << 15;

// Calls fn(scratch, o, i0, i1) for every tile of rows (o, i), i in [i0, i1), over the intra-op
// threads; `scratch` is one Scratch per chunk of tiles, reused across its tiles. A row belongs to
// exactly one tile, so results do not depend on the thread count.
template <typename Scratch, typename Fn>
void for_row_tiles(const AxisView& v, Fn fn) {
  if (v.outer * v.n * v.inner == 0) return;
  const int64_t lanes = std::min(v.inner, kLaneTile);
  const int64_t tiles_per_outer = (v.inner + lanes - 1) / lanes;
  const int64_t grain = std::max<int64_t>(1, kMinChunkElements / (v.n * lanes));
  parallel_for(0, v.outer * tiles_per_outer, grain, [&](int64_t lo, int64_t hi) {
    Scratch scratch;
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t o = t / tiles_per_outer, i0 = (t % tiles_per_outer) * lanes;
      fn(scratch, o, i0, std::min(i0 + lanes, v.inner));
    }
  });
}

// ---------------------------------------------------------------------------------------------
// sort and argsort (Note [Sort order])
// ---------------------------------------------------------------------------------------------
template <typename C>
bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

template <typename C>
bool ascending_before(C a, C b) {
  return a < b || (is_nan(b) && !is_nan(a));  // NaNs after everything else
}

template <typename C>
bool descending_before(C a, C b) {
  return b < a || (is_nan(a) && !is_nan(b));  // NaNs before everything else
}

// Stable-sorts [first, last) by key(element) in the order `ascend` says.
template <typename It, typename Key>
void stable_sort_by(It first, It last, bool ascend, Key key) {
  if (ascend) {
    std::stable_sort(first, last, [&](const auto& a, const auto& b) {
      return ascending_before(key(a), key(b));
    });
  } else {
    std::stable_sort(first, last, [&](const auto& a, const auto& b) {
      return descending_before(key(a), key(b));
    });
  }
}

// How sort_rows keeps elements of type T in a std::vector (not std::vector<bool>'s bits).
template <typename T>
using Stored = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <typename T>
void sort_rows(const T* x, T* y, const AxisView& v, bool ascend) {
  using C = compute_t<T>;
  using S = Stored<T>;
  for_row_tiles<std::vector<S>>(v, [&](std::vector<S>& rows, int64_t o, int64_t i0, int64_t i1) {
    const int64_t lanes = i1 - i0;
    rows.resize(lanes * v.n);
    for (int64_t j = 0; j < v.n; ++j)
      for (int64_t i = i0; i < i1; ++i) rows[(i - i0) * v.n + j] = x[(o * v.n + j) * v.inner + i];
    for (int64_t r = 0; r < lanes; ++r)
      stable_sort_by(rows.begin() + r * v.n, rows.begin() + (r + 1) * v.n, ascend,
                     [](S value) { return static_cast<C>(static_cast<T>(value)); });
    for (int64_t j = 0; j < v.n; ++j)
      for (int64_t i = i0; i < i1; ++i) y[(o * v.n + j) * v.inner + i] = rows[(i - i0) * v.n + j];
  });
}

template <typename C>
struct Keyed {
  C key;
  int64_t position;  // along the row
};

template <typename T, typename I>
void argsort_rows(const T* x, I* indices, const AxisView& v, bool ascend) {
  using C = compute_t<T>;
  for_row_tiles<std::vector<Keyed<C>>>(
      v, [&](std::vector<Keyed<C>>& rows, int64_t o, int64_t i0, int64_t i1) {
        const int64_t lanes = i1 - i0;
        rows.resize(lanes * v.n);
        for (int64_t j = 0; j < v.n; ++j)
          for (int64_t i = i0; i < i1; ++i)
            rows[(i - i0) * v.n + j] = {static_cast<C>(x[(o * v.n + j) * v.inner + i]), j};
        for (int64_t r = 0; r < lanes; ++r)
          stable_sort_by(rows.begin() + r * v.n, rows.begin() + (r + 1) * v.n, ascend,
                         [](const Keyed<C>& k) { return k.key; });
        for (int64_t j = 0; j < v.n; ++j)
          for (int64_t i = i0; i < i1; ++i)
            indices[(o * v.n + j) * v.inner + i] =
                static_cast<I>(static_cast<compute_t<I>>(rows[(i - i0) * v.n + j].position));
      });
}

void sort_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                std::vector<Shape>* out, std::vector<DType>* out_dt) {
  *out = {row_geom(attrs, in[0], "sort", "-1").out_shape(in[0])};
  *out_dt = {dt[0]};
}

void sort_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const RowGeom g = row_geom(*ctx.attrs, in[0].shape, "sort", "-1");
  const bool ascend = ctx.attrs->get_bool("is_ascend", true);
  PMX_TYPE_SWITCH(in[0].dtype, T,
                  { sort_rows(in[0].data<T>(), out[0].data<T>(), g.view, ascend); });
}

// The values are differentiable: the output gradient goes back to where each value came from.
std::vector<NDArray> sort_gradient(const GradContext& ctx) {
  if (!is_float(ctx.input_dtypes[0])) return {NDArray()};
  Attrs index_attrs = ctx.attrs;
  index_attrs.set("dtype", "int64");
  NDArray positions = ops::call("argsort", {ctx.inputs[0]}, index_attrs);
  // topk_backward with k=0 takes the whole axis: dx[.., positions[.., j, ..], ..] = dy[.., j, ..].
  Attrs scatter_attrs{{"axis", nn::axis_text(ctx.attrs, "-1")}, {"k", "0"}};
  return {ops::call("topk_backward", {ctx.out_grads[0], ctx.inputs[0], positions}, scatter_attrs)};
}

void argsort_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>&,
                   std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const DType index_dtype = attrs.get_dtype("dtype", DType::kInt64);
  PMX_CHECK(index_dtype != DType::kBool, "argsort: dtype bool cannot hold indices; use int64");
  *out = {row_geom(attrs, in[0], "argsort", "-1").out_shape(in[0])};
  *out_dt = {index_dtype};
}

void argsort_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const RowGeom g = row_geom(*ctx.attrs, in[0].shape, "argsort", "-1");
  const bool ascend = ctx.attrs->get_bool("is_ascend", true);
  PMX_TYPE_SWITCH(in[0].dtype, T, {
    PMX_TYPE_SWITCH(out[0].dtype, I,
                    { argsort_rows(in[0].data<T>(), out[0].data<I>(), g.view, ascend); });
  });
}

PMX_REGISTER_OP(sort)
    .set_infer(sort_infer)
    .set_cpu(sort_forward)
    .set_gradient(sort_gradient)
    .set_grad_uses({0}, {});

PMX_REGISTER_OP(argsort).set_infer(argsort_infer).set_cpu(argsort_forward);

// ---------------------------------------------------------------------------------------------
// cumsum (Note [cumsum dtypes])
// ---------------------------------------------------------------------------------------------
// a + b with integers wrapping around (NumPy's overflow; signed overflow is undefined in C++),
// and bool sums saturating at true (NumPy's bool add is logical or).
template <typename A>
A wrapping_add(A a, A b) {
  if constexpr (std::is_same_v<A, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename A>
struct RunningSum {
  A value;  // a struct, so that a std::vector of bool sums holds bools rather than bits
};

// y along each row = the running sum of x converted to Out, last element first when `reverse`.
template <typename In, typename Out>
void scan_rows(const In* x, Out* y, const AxisView& v, bool reverse) {
  using Acc = compute_t<Out>;
  const auto value = [](In e) {
    return static_cast<Acc>(static_cast<Out>(static_cast<compute_t<Out>>(
        static_cast<compute_t<In>>(e))));
  };
  for_row_tiles<std::vector<RunningSum<Acc>>>(v, [&](std::vector<RunningSum<Acc>>& sums,
                                                     int64_t o, int64_t i0, int64_t i1) {
    sums.resize(i1 - i0);
    for (int64_t step = 0; step < v.n; ++step) {
      const int64_t row_start = (o * v.n + (reverse ? v.n - 1 - step : step)) * v.inner;
      for (int64_t i = i0; i < i1; ++i) {
        Acc& sum = sums[i - i0].value;
        // The first element is taken as it is (0 + -0.0 would be +0.0).
        sum = step == 0 ? value(x[row_start + i]) : wrapping_add(sum, value(x[row_start + i]));
        y[row_start + i] = static_cast<Out>(sum);
      }
    }
  });
}

DType cumsum_dtype(const Attrs& attrs, DType data) {
  if (attrs.has("dtype")) return attrs.get_dtype("dtype", data);
  switch (data) {
    case DType::kBool:
    case DType::kInt8:
    case DType::kUint8:
    case DType::kInt32: return DType::kInt64;
    default: return data;
  }
}

void cumsum_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
  *out = {row_geom(attrs, in[0], "cumsum", "None").out_shape(in[0])};
  *out_dt = {cumsum_dtype(attrs, dt[0])};
}

void cumsum_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const RowGeom g = row_geom(*ctx.attrs, in[0].shape, "cumsum", "None");
  PMX_TYPE_SWITCH(in[0].dtype, In, {
    PMX_TYPE_SWITCH(out[0].dtype, Out,
                    { scan_rows(in[0].data<In>(), out[0].data<Out>(), g.view, false); });
  });
}

// dx_j = sum over k >= j of dy_k, then back to the data's shape and dtype.
std::vector<NDArray> cumsum_gradient(const GradContext& ctx) {
  if (!is_float(ctx.input_dtypes[0]) || !is_float(ctx.output_dtypes[0])) return {NDArray()};
  NDArray dx = ops::call("cumsum_backward", {ctx.out_grads[0]},
                         Attrs{{"axis", nn::axis_text(ctx.attrs, "None")}});
  if (dx.shape() != ctx.input_shapes[0])  // axis None flattened the data
    dx = ops::call("reshape", {dx}, Attrs{{"newshape", ops::shape_attr(ctx.input_shapes[0])}});
  if (dx.dtype() != ctx.input_dtypes[0])  // a dtype argument changed the output's
    dx = ops::call("cast", {dx}, Attrs{{"dtype", dtype_name(ctx.input_dtypes[0])}});
  return {dx};
}

void cumsum_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                           const std::vector<DType>& dt, std::vector<Shape>* out,
                           std::vector<DType>* out_dt) {
  const RowGeom g = row_geom(attrs, in[0], "cumsum_backward", "None");
  PMX_CHECK(!g.flat || in[0].size() == 1, "cumsum_backward: with axis None out_grad must be "
            "1-d, got shape ", shape_str(in[0]));
  nn::check_float(dt[0], "cumsum_backward");
  *out = {in[0]};
  *out_dt = {dt[0]};
}

void cumsum_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const RowGeom g = row_geom(*ctx.attrs, in[0].shape, "cumsum_backward", "None");
  PMX_FLOAT_SWITCH(in[0].dtype, T, { scan_rows(in[0].data<T>(), out[0].data<T>(), g.view, true); });
}

PMX_REGISTER_OP(cumsum)
    .set_infer(cumsum_infer)
    .set_cpu(cumsum_forward)
    .set_gradient(cumsum_gradient)
    .set_grad_uses({}, {});

PMX_REGISTER_OP(cumsum_backward)
    .set_infer(cumsum_backward_infer)
    .set_cpu(cumsum_backward)
    .set_gradient([](const GradContext& ctx) {
      // cumsum_backward is linear: its gradient is the forward scan of the incoming gradient.
      return std::vector<NDArray>{ops::call("cumsum", {ctx.out_grads[0]},
                                            Attrs{{"axis", nn::axis_text(ctx.attrs, "None")}})};
    })
    .set_grad_uses({}, {});

}  // namespace
}  // namespace pymx
