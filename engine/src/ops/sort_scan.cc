// Sorting and scanning along an axis: the operators behind pymx.np.sort, argsort and cumsum.
// (GPU kernels: cuda/src/sort_scan.cu; the row geometry and sort keys both use:
// ops/sort_scan_geometry.h.)
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
// (-0.0 and +0.0 among them, and all NaNs) keep their input order, which is NumPy's
// argsort(kind='stable'). Both devices sort by the keys of Note [Sort keys]. sort's output is
// the input gathered by that permutation, so NaN payloads and the signs of zeros travel with
// their values, and the CPU and GPU ops give the same bits.
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
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/elemwise.h"
#include "ops/sort_keys.h"
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
// Note [CPU sort by radix]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Rows are sorted by their keys (Note [Sort keys] in sort_scan_geometry.h) with a stable
// least-significant-digit radix sort on 8-bit digits, carrying the value (sort) or its position
// (argsort) along; a digit that all keys of a row share costs no pass (small integers in
// int64). On a (1000, 1000) float32 array a sort ran 2.5-10 times faster so than by
// std::stable_sort with a NaN-aware comparison (10 for the flattened array), an argsort 5 times. Rows shorter than kRadixMinRow, where the 256
// counters of a pass cost more than they save, take an insertion sort on the same keys.
constexpr int64_t kRadixMinRow = 64;

// Stable-sorts the n (key, payload) pairs at `keys` / `payloads` by key, using `spare_keys` /
// `spare_payloads` (n each) as the other buffers of the radix passes; returns the buffer of
// payloads that holds the result (either of the two).
template <typename K, typename P>
P* sort_pairs(K* keys, P* payloads, K* spare_keys, P* spare_payloads, int64_t n) {
  if (n < kRadixMinRow) {
    for (int64_t i = 1; i < n; ++i) {
      const K key = keys[i];
      const P payload = payloads[i];
      int64_t j = i;
      for (; j > 0 && key < keys[j - 1]; --j) {
        keys[j] = keys[j - 1];
        payloads[j] = payloads[j - 1];
      }
      keys[j] = key;
      payloads[j] = payload;
    }
    return payloads;
  }
  for (int shift = 0; shift < static_cast<int>(sizeof(K) * 8); shift += 8) {
    int64_t start[256] = {};
    for (int64_t i = 0; i < n; ++i) ++start[(keys[i] >> shift) & 0xff];
    if (start[(keys[0] >> shift) & 0xff] == n) continue;  // one digit for all: order unchanged
    int64_t offset = 0;
    for (int64_t& s : start) offset += std::exchange(s, offset);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t to = start[(keys[i] >> shift) & 0xff]++;
      spare_keys[to] = keys[i];
      spare_payloads[to] = payloads[i];
    }
    std::swap(keys, spare_keys);
    std::swap(payloads, spare_payloads);
  }
  return payloads;
}

// How a std::vector holds payloads of type T (not std::vector<bool>'s bits).
template <typename T>
using Stored = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <typename K, typename P>
struct SortScratch {
  std::vector<K> keys, spare_keys;
  std::vector<P> payloads, spare_payloads;
  std::vector<const P*> sorted;  // per row of the tile: the buffer holding its sorted payloads
};

// Sorts every row of x (Note [CPU sort by radix]) carrying payload(j, x_j) along, and stores
// payload k of the sorted row (o, i) with store(flat index of element k of that row, payload).
template <typename T, typename P, typename MakePayload, typename Store>
void sort_rows(const T* x, const AxisView& v, bool ascend, MakePayload payload, Store store) {
  using K = typename nn::RadixKeyOf<T>::type;
  for_row_tiles<SortScratch<K, P>>(v, [&](SortScratch<K, P>& s, int64_t o, int64_t i0,
                                          int64_t i1) {
    const int64_t lanes = i1 - i0;
    for (auto* buffer : {&s.keys, &s.spare_keys}) buffer->resize(lanes * v.n);
    for (auto* buffer : {&s.payloads, &s.spare_payloads}) buffer->resize(lanes * v.n);
    s.sorted.resize(lanes);
    for (int64_t j = 0; j < v.n; ++j)
      for (int64_t i = i0; i < i1; ++i) {
        const T value = x[(o * v.n + j) * v.inner + i];
        s.keys[(i - i0) * v.n + j] = nn::sort_key(value, ascend);
        s.payloads[(i - i0) * v.n + j] = payload(j, value);
      }
    for (int64_t r = 0; r < lanes; ++r)
      s.sorted[r] = sort_pairs(&s.keys[r * v.n], &s.payloads[r * v.n], &s.spare_keys[r * v.n],
                               &s.spare_payloads[r * v.n], v.n);
    for (int64_t j = 0; j < v.n; ++j)
      for (int64_t i = i0; i < i1; ++i)
        store((o * v.n + j) * v.inner + i, s.sorted[i - i0][j]);
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
  PMX_TYPE_SWITCH(in[0].dtype, T, {
    T* y = out[0].data<T>();
    sort_rows<T, Stored<T>>(
        in[0].data<T>(), g.view, ascend, [](int64_t, T value) { return Stored<T>(value); },
        [y](int64_t at, Stored<T> value) { y[at] = static_cast<T>(value); });
  });
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
    PMX_TYPE_SWITCH(out[0].dtype, I, {
      I* indices = out[0].data<I>();
      sort_rows<T, int64_t>(
          in[0].data<T>(), g.view, ascend, [](int64_t j, T) { return j; },
          [indices](int64_t at, int64_t j) {
            indices[at] = static_cast<I>(static_cast<compute_t<I>>(j));
          });
    });
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
