// Reductions.
//
//   op               input  attrs                      output dtype
//   sum prod         x      axis, keepdims, dtype      dtype, else bool/int -> int64, float -> x's
//   mean             x      axis, keepdims, dtype      dtype, else int -> float32, float -> x's
//   var std          x      axis, keepdims, ddof       int -> float32, float -> x's
//   max min          x      axis, keepdims             x's (empty reductions are an error)
//   all any          x      axis, keepdims             bool
//   argmax argmin    x      axis (None or int), keepdims   int64 (first occurrence; NaN wins)
// `axis` is None (all axes), an int, or a tuple. Accumulation is in double for floats and int64
// for integers.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "ops/elemwise.h"

namespace pymx {
namespace {

using ops::call;

enum class Red { kSum, kProd, kMean, kVar, kStd, kMax, kMin, kAll, kAny };

const char* red_name(Red r) {
  switch (r) {
    case Red::kSum: return "sum";
    case Red::kProd: return "prod";
    case Red::kMean: return "mean";
    case Red::kVar: return "var";
    case Red::kStd: return "std";
    case Red::kMax: return "max";
    case Red::kMin: return "min";
    case Red::kAll: return "all";
    case Red::kAny: return "any";
  }
  return "?";
}

Shape reduced_shape(const Shape& in, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  for (int d = 0; d < static_cast<int>(in.size()); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) out.push_back(in[d]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

DType reduce_dtype(Red r, const Attrs& attrs, DType in) {
  switch (r) {
    case Red::kSum:
    case Red::kProd:
      return attrs.get_dtype("dtype", is_float(in) ? in : DType::kInt64);
    case Red::kMean: {
      const DType out = attrs.get_dtype("dtype", is_float(in) ? in : DType::kFloat32);
      if (!is_float(out))
        PMX_THROW(Status::kType, "mean: dtype ", dtype_name(out), " is not supported; the mean "
                  "is computed in float16, bfloat16, float32 or float64");
      return out;
    }
    case Red::kVar:
    case Red::kStd:
      return is_float(in) ? in : DType::kFloat32;
    case Red::kMax:
    case Red::kMin:
      return in;
    case Red::kAll:
    case Red::kAny:
      return DType::kBool;
  }
  return in;
}

// acc[o] = combine(acc[o], x[i]) for every input element i, where o is i's output position.
// `ostrides` are the output strides per input axis (0 on reduced axes).
template <typename T, typename Acc, typename Combine>
void reduce_loop(const T* x, const Shape& in_shape, const std::vector<int64_t>& ostrides, Acc* acc,
                 Combine combine) {
  const int64_t total = shape_size(in_shape);
  if (total == 0) return;
  Shape shape;
  std::vector<int64_t> os;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (in_shape[d] == 1) continue;
    if (!shape.empty() && os.back() == ostrides[d] * in_shape[d]) {
      shape.back() *= in_shape[d];
      os.back() = ostrides[d];
    } else {
      shape.push_back(in_shape[d]);
      os.push_back(ostrides[d]);
    }
  }
  if (shape.empty()) {
    acc[0] = combine(acc[0], x[0]);
    return;
  }
  const int nd = static_cast<int>(shape.size());
  const int64_t inner = shape[nd - 1], step = os[nd - 1];
  std::vector<int64_t> index(nd, 0);
  int64_t o = 0;
  for (int64_t done = 0; done < total; done += inner) {
    if (step == 0) {
      Acc a = acc[o];
      for (int64_t i = 0; i < inner; ++i) a = combine(a, x[i]);
      acc[o] = a;
    } else {
      for (int64_t i = 0; i < inner; ++i) acc[o + i * step] = combine(acc[o + i * step], x[i]);
    }
    x += inner;
    for (int d = nd - 2; d >= 0; --d) {
      o += os[d];
      if (++index[d] < shape[d]) break;
      o -= os[d] * shape[d];
      index[d] = 0;
    }
  }
}

std::vector<int64_t> output_strides(const Shape& in, const std::vector<int>& axes) {
  const Shape kept = reduced_shape(in, axes, true);
  std::vector<int64_t> strides = ops::contiguous_strides(kept);
  for (int a : axes) strides[a] = 0;
  return strides;
}

template <typename T>
using acc_t = std::conditional_t<std::is_floating_point<ops::compute_t<T>>::value, double, int64_t>;

void reduce_kernel(Red r, const OpContext& ctx, const TBlob& in, const TBlob& out) {
  const std::vector<int> axes = ops::reduce_axes(*ctx.attrs, in.ndim(), red_name(r));
  const std::vector<int64_t> ostrides = output_strides(in.shape, axes);
  const int64_t m = out.size();
  const int64_t count = m == 0 ? 0 : in.size() / m;
  PMX_TYPE_SWITCH(in.dtype, T, {
    using C = ops::compute_t<T>;
    using Acc = acc_t<T>;
    const T* x = in.data<T>();
    std::vector<Acc> acc(static_cast<size_t>(m));
    switch (r) {
      case Red::kSum:
      case Red::kMean:
      case Red::kVar:
      case Red::kStd:
        std::fill(acc.begin(), acc.end(), Acc(0));
        reduce_loop(x, in.shape, ostrides, acc.data(), [](Acc a, T v) { return a + static_cast<Acc>(static_cast<C>(v)); });
        break;
      case Red::kProd:
        std::fill(acc.begin(), acc.end(), Acc(1));
        reduce_loop(x, in.shape, ostrides, acc.data(), [](Acc a, T v) { return a * static_cast<Acc>(static_cast<C>(v)); });
        break;
      case Red::kAll:
        std::fill(acc.begin(), acc.end(), Acc(1));
        reduce_loop(x, in.shape, ostrides, acc.data(), [](Acc a, T v) { return static_cast<Acc>(a && static_cast<bool>(v)); });
        break;
      case Red::kAny:
        std::fill(acc.begin(), acc.end(), Acc(0));
        reduce_loop(x, in.shape, ostrides, acc.data(), [](Acc a, T v) { return static_cast<Acc>(a || static_cast<bool>(v)); });
        break;
      case Red::kMax:
      case Red::kMin: {
        // Seeded with the first element of each output's group; NaN propagates.
        const bool is_max = r == Red::kMax;
        // Not std::vector: vector<bool> has no data().
        std::unique_ptr<C[]> best(new C[static_cast<size_t>(m)]);
        std::fill(best.get(), best.get() + m, is_max ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max());
        if constexpr (std::is_floating_point<C>::value) {
          reduce_loop(x, in.shape, ostrides, best.get(), [is_max](C a, T v) {
            const C c = static_cast<C>(v);
            if (a != a) return a;
            if (c != c) return c;
            return is_max ? (c > a ? c : a) : (c < a ? c : a);
          });
        } else {
          reduce_loop(x, in.shape, ostrides, best.get(), [is_max](C a, T v) {
            const C c = static_cast<C>(v);
            return is_max ? (c > a ? c : a) : (c < a ? c : a);
          });
        }
        T* y = out.data<T>();
        for (int64_t i = 0; i < m; ++i) y[i] = static_cast<T>(best[i]);
        return;
      }
    }
    if (r == Red::kMean || r == Red::kVar || r == Red::kStd) {
      std::vector<double> facc(static_cast<size_t>(m));  // mean, then var or std
      for (int64_t i = 0; i < m; ++i) facc[i] = static_cast<double>(acc[i]) / static_cast<double>(count);
      if (r != Red::kMean) {
        // Second pass over squared deviations (stable where sum(x^2) - n*mean^2 is not): spread
        // the means back over the input's positions, square the differences, reduce again.
        std::vector<double> dev(static_cast<size_t>(in.size()));
        ops::strided_copy(facc.data(), 0, in.shape, ostrides, dev.data(), sizeof(double));
        for (int64_t i = 0; i < in.size(); ++i) {
          const double d = static_cast<double>(static_cast<C>(x[i])) - dev[i];
          dev[i] = d * d;
        }
        std::vector<double> sq(static_cast<size_t>(m), 0.0);
        reduce_loop(dev.data(), in.shape, ostrides, sq.data(), [](double a, double v) { return a + v; });
        // NumPy divides by max(n - ddof, 0): ddof >= n gives inf (or nan for a zero sum).
        const double divisor = std::max(static_cast<double>(count) - ctx.attrs->get_float("ddof", 0.0), 0.0);
        for (int64_t i = 0; i < m; ++i) {
          const double v = sq[i] / divisor;
          facc[i] = r == Red::kStd ? std::sqrt(v) : v;
        }
      }
      PMX_FLOAT_SWITCH(out.dtype, O, {
        O* y = out.data<O>();
        for (int64_t i = 0; i < m; ++i) y[i] = static_cast<O>(facc[i]);
      });
      return;
    }
    PMX_TYPE_SWITCH(out.dtype, O, {
      O* y = out.data<O>();
      for (int64_t i = 0; i < m; ++i) y[i] = static_cast<O>(static_cast<ops::compute_t<O>>(acc[i]));
    });
  });
}

// The output gradient reshaped with the reduced axes kept, then broadcast to the input's shape.
NDArray spread(const GradContext& g, const NDArray& dy) {
  const Shape& in = g.input_shapes[0];
  const std::vector<int> axes = ops::reduce_axes(g.attrs, static_cast<int>(in.size()), g.op.name.c_str());
  NDArray kept = call("reshape", {dy}, Attrs{{"newshape", ops::shape_attr(reduced_shape(in, axes, true))}});
  return call("broadcast_to", {kept}, Attrs{{"shape", ops::shape_attr(in)}});
}

NDArray as_dtype(const NDArray& a, DType dtype) {
  return a.dtype() == dtype ? a : call("cast", {a}, Attrs{{"dtype", dtype_name(dtype)}});
}

GradFn reduce_grad(Red r) {
  return [r](const GradContext& g) -> std::vector<NDArray> {
    // sum and mean read only shapes (see set_grad_uses below): x and y are none arrays there.
    const NDArray& x = g.inputs[0];
    const DType dtype = g.input_dtypes[0];
    if (!is_float(dtype)) return {NDArray()};
    const int64_t out_size = shape_size(g.output_shapes[0]);
    const int64_t count = out_size == 0 ? 0 : shape_size(g.input_shapes[0]) / out_size;
    NDArray dy = as_dtype(g.out_grads[0], dtype);
    NDArray y = r == Red::kSum || r == Red::kMean ? NDArray() : as_dtype(g.outputs[0], dtype);
    switch (r) {
      case Red::kSum:
        return {spread(g, dy)};
      case Red::kMean:
        return {ops::scalar_op("divide_scalar", spread(g, dy), static_cast<double>(count))};
      case Red::kProd:
        return {call("divide", {call("multiply", {spread(g, dy), spread(g, y)}), x})};
      case Red::kMax:
      case Red::kMin: {
        NDArray hit = call("cast", {call("equal", {x, spread(g, y)})}, Attrs{{"dtype", dtype_name(x.dtype())}});
        return {call("multiply", {spread(g, dy), hit})};
      }
      case Red::kVar:
      case Red::kStd: {
        Attrs mean_attrs = g.attrs;
        mean_attrs.set("keepdims", "True");
        mean_attrs.set("ddof", "None");
        NDArray centered = call("subtract", {x, call("mean", {x}, mean_attrs)});
        const double n = std::max(static_cast<double>(count) - g.attrs.get_float("ddof", 0.0), 0.0);
        NDArray scale = r == Red::kVar ? ops::scalar_op("multiply_scalar", dy, 2.0 / n)
                                       : call("divide", {ops::scalar_op("multiply_scalar", dy, 1.0 / n), y});
        return {call("multiply", {centered, spread(g, scale)})};
      }
      default:
        return {NDArray()};
    }
  };
}

void register_reduce(Red r) {
  OpDef& op = op_registry::get_or_create(red_name(r))
      .set_num_inputs(1)
      .set_infer([r](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                     std::vector<Shape>* out, std::vector<DType>* odt) {
        const std::vector<int> axes = ops::reduce_axes(attrs, static_cast<int>(in[0].size()), red_name(r));
        if (r == Red::kMax || r == Red::kMin) {
          for (int a : axes)
            PMX_CHECK(in[0][a] != 0, "zero-size array to reduction operation ", red_name(r),
                      " which has no identity (shape ", shape_str(in[0]), ", axis ", a, ")");
        }
        (*out)[0] = reduced_shape(in[0], axes, attrs.get_bool("keepdims", false));
        (*odt)[0] = reduce_dtype(r, attrs, dt[0]);
      })
      .set_cpu([r](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
        reduce_kernel(r, ctx, in[0], out[0]);
      });
  if (r == Red::kSum || r == Red::kMean) op.set_grad_uses({}, {});
  if (r != Red::kAll && r != Red::kAny) op.set_gradient(reduce_grad(r));
  else op.set_gradient([](const GradContext&) { return std::vector<NDArray>(1); });
}

// argmax / argmin along one axis (None: the flattened array).
void register_arg(const char* name, bool is_max) {
  op_registry::get_or_create(name)
      .set_num_inputs(1)
      .set_infer([name](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>&,
                        std::vector<Shape>* out, std::vector<DType>* odt) {
        const bool keepdims = attrs.get_bool("keepdims", false);
        PMX_CHECK(shape_size(in[0]) > 0 || attrs.has("axis"), "attempt to get ", name,
                  " of an empty sequence");
        if (!attrs.has("axis")) {
          (*out)[0] = keepdims ? Shape(in[0].size(), 1) : Shape();
        } else {
          const int a = ops::normalize_axis(attrs.get_int("axis"), static_cast<int>(in[0].size()), name);
          PMX_CHECK(in[0][a] > 0, "attempt to get ", name, " of an empty sequence (axis ", a, ")");
          (*out)[0] = reduced_shape(in[0], {a}, keepdims);
        }
        (*odt)[0] = DType::kInt64;
      })
      .set_cpu([is_max, name](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
        const Shape& s = in[0].shape;
        int64_t outer = 1, n = in[0].size(), inner = 1;
        if (ctx.attrs->has("axis")) {
          const int a = ops::normalize_axis(ctx.attrs->get_int("axis"), in[0].ndim(), name);
          outer = 1;
          for (int d = 0; d < a; ++d) outer *= s[d];
          n = s[a];
          for (int d = a + 1; d < in[0].ndim(); ++d) inner *= s[d];
        }
        int64_t* y = out[0].data<int64_t>();
        PMX_TYPE_SWITCH(in[0].dtype, T, {
          using C = ops::compute_t<T>;
          const T* x = in[0].data<T>();
          for (int64_t o = 0; o < outer; ++o) {
            for (int64_t i = 0; i < inner; ++i) {
              const T* p = x + o * n * inner + i;
              int64_t best = 0;
              C bv = static_cast<C>(p[0]);
              for (int64_t k = 1; k < n && bv == bv; ++k) {
                const C v = static_cast<C>(p[k * inner]);
                if (v != v || (is_max ? v > bv : v < bv)) {
                  best = k;
                  bv = v;
                }
              }
              y[o * inner + i] = best;
            }
          }
        });
      })
      .set_gradient([](const GradContext&) { return std::vector<NDArray>(1); });
}

const bool g_registered = [] {
  for (Red r : {Red::kSum, Red::kProd, Red::kMean, Red::kVar, Red::kStd, Red::kMax, Red::kMin,
                Red::kAll, Red::kAny})
    register_reduce(r);
  register_arg("argmax", true);
  register_arg("argmin", false);
  return true;
}();

}  // namespace
}  // namespace pymx
