// Elementwise unary operators.
//
//   op                                   input  attrs          output dtype
//   exp log log1p expm1 log2 log10 sqrt  x      -              x's if float, else float32
//   cbrt sin cos tan arcsin arccos arctan
//   sinh cosh tanh arcsinh arccosh arctanh
//   reciprocal
//   abs negative sign square floor ceil  x      -              x's
//   round rint trunc
//   clip                                 x      a_min, a_max   x's (either bound may be None)
//   isnan isinf isfinite logical_not     x      -              bool
//
// Gradients are written with other operators; ops that are piecewise constant (sign, floor, ...)
// have a zero gradient.
#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>

#include "ops/elemwise.h"
#include "ops/float_unary_kernel.h"
#include "parallel.h"

namespace pymx {
namespace {

using ops::call;
using ops::MathFn;
using ops::scalar_op;

enum class Kind { kFloat, kSame, kBool };

void infer_unary(Kind kind, const std::vector<Shape>& in, const std::vector<DType>& in_dtypes,
                 std::vector<Shape>* out, std::vector<DType>* out_dtypes) {
  (*out)[0] = in[0];
  const DType t = in_dtypes[0];
  (*out_dtypes)[0] = kind == Kind::kBool ? DType::kBool
                     : kind == Kind::kFloat && !is_float(t) ? DType::kFloat32
                                                            : t;
}

// Registers a unary op whose result is computed in the output's float type: f(x) in
// compute_t<T>, or libmvec's `vector_fn` where there is one.
template <typename F>
OpDef& float_unary(const char* name, F f, std::optional<ops::MathFn> vector_fn = std::nullopt) {
  return op_registry::get_or_create(name)
      .set_num_inputs(1)
      .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                    std::vector<Shape>* out, std::vector<DType>* odt) {
        infer_unary(Kind::kFloat, in, dt, out, odt);
      })
      .set_cpu(ops::float_unary_kernel(f, vector_fn));
}

template <typename F>
OpDef& same_unary(const char* name, F f) {
  return op_registry::get_or_create(name)
      .set_num_inputs(1)
      .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                    std::vector<Shape>* out, std::vector<DType>* odt) {
        infer_unary(Kind::kSame, in, dt, out, odt);
      })
      .set_cpu([f](const OpContext&, const std::vector<TBlob>& inputs,
                   const std::vector<TBlob>& outputs) {
        const int64_t n = inputs[0].size();
        PMX_TYPE_SWITCH(inputs[0].dtype, T, {
          const T* src = inputs[0].data<T>();
          T* dst = outputs[0].data<T>();
          for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(f(static_cast<ops::compute_t<T>>(src[i])));
        });
      });
}

template <typename F>
OpDef& bool_unary(const char* name, F f) {
  return op_registry::get_or_create(name)
      .set_num_inputs(1)
      .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                    std::vector<Shape>* out, std::vector<DType>* odt) {
        infer_unary(Kind::kBool, in, dt, out, odt);
      })
      .set_cpu([f](const OpContext&, const std::vector<TBlob>& inputs,
                   const std::vector<TBlob>& outputs) {
        const int64_t n = inputs[0].size();
        bool* dst = outputs[0].data<bool>();
        PMX_TYPE_SWITCH(inputs[0].dtype, T, {
          const T* src = inputs[0].data<T>();
          for (int64_t i = 0; i < n; ++i) dst[i] = f(static_cast<ops::compute_t<T>>(src[i]));
        });
      });
}

NDArray mul(const NDArray& a, const NDArray& b) { return call("multiply", {a, b}); }

// The gradient dy * f'(x), given f'(x) from the op's input and output (a none array when the op
// does not keep it: see set_grad_uses below).
template <typename D>
GradFn chain(D derivative) {
  return [derivative](const GradContext& g) -> std::vector<NDArray> {
    return {mul(g.out_grads[0], derivative(g.inputs[0], g.outputs[0]))};
  };
}

GradFn zero_grad() {
  return [](const GradContext& g) -> std::vector<NDArray> { return {ops::zeros_like(g.inputs[0])}; };
}

template <typename T>
T sign_of(T x) {
  if constexpr (std::is_floating_point<T>::value) {
    if (std::isnan(x)) return x;  // NumPy's sign(NaN) is NaN
  }
  return static_cast<T>((T(0) < x) - (x < T(0)));
}

// Registration runs once, from this file's static initialiser.
const bool g_registered = [] {
  using A = const NDArray&;
  // set_grad_uses(inputs, outputs): what the gradient reads, so that autograd keeps only that.
  float_unary("exp", [](auto x) { return std::exp(x); }, MathFn::kExp)
      .set_gradient(chain([](A, A y) { return y; }))
      .set_grad_uses({}, {0});
  float_unary("log", [](auto x) { return std::log(x); }, MathFn::kLog)
      .set_gradient(chain([](A x, A) { return scalar_op("divide_scalar", x, 1.0, true); }))
      .set_grad_uses({0}, {});
  float_unary("log1p", [](auto x) { return std::log1p(x); }, MathFn::kLog1p)
      .set_gradient(chain([](A x, A) {
        return scalar_op("divide_scalar", scalar_op("add_scalar", x, 1.0), 1.0, true);
      }));
  float_unary("expm1", [](auto x) { return std::expm1(x); }, MathFn::kExpm1)
      .set_gradient(chain([](A, A y) { return scalar_op("add_scalar", y, 1.0); }));
  float_unary("log2", [](auto x) { return std::log2(x); }, MathFn::kLog2)
      .set_gradient(chain([](A x, A) { return scalar_op("divide_scalar", x, 1.0 / std::log(2.0), true); }));
  float_unary("log10", [](auto x) { return std::log10(x); }, MathFn::kLog10)
      .set_gradient(chain([](A x, A) { return scalar_op("divide_scalar", x, 1.0 / std::log(10.0), true); }));
  float_unary("sqrt", [](auto x) { return std::sqrt(x); })
      .set_gradient(chain([](A, A y) { return scalar_op("divide_scalar", y, 0.5, true); }))
      .set_grad_uses({}, {0});
  float_unary("cbrt", [](auto x) { return std::cbrt(x); }, MathFn::kCbrt)
      .set_gradient(chain([](A, A y) {
        return scalar_op("divide_scalar", scalar_op("multiply_scalar", mul(y, y), 3.0), 1.0, true);
      }));
  float_unary("sin", [](auto x) { return std::sin(x); }, MathFn::kSin)
      .set_gradient(chain([](A x, A) { return call("cos", {x}); }));
  float_unary("cos", [](auto x) { return std::cos(x); }, MathFn::kCos)
      .set_gradient(chain([](A x, A) { return call("negative", {call("sin", {x})}); }));
  float_unary("tan", [](auto x) { return std::tan(x); }, MathFn::kTan)
      .set_gradient(chain([](A, A y) { return scalar_op("add_scalar", mul(y, y), 1.0); }));
  float_unary("arcsin", [](auto x) { return std::asin(x); }, MathFn::kArcsin)
      .set_gradient(chain([](A x, A) {
        return call("reciprocal", {call("sqrt", {scalar_op("subtract_scalar", mul(x, x), 1.0, true)})});
      }));
  float_unary("arccos", [](auto x) { return std::acos(x); }, MathFn::kArccos)
      .set_gradient(chain([](A x, A) {
        return scalar_op("divide_scalar",
                         call("sqrt", {scalar_op("subtract_scalar", mul(x, x), 1.0, true)}), -1.0, true);
      }));
  float_unary("arctan", [](auto x) { return std::atan(x); }, MathFn::kArctan)
      .set_gradient(chain([](A x, A) {
        return scalar_op("divide_scalar", scalar_op("add_scalar", mul(x, x), 1.0), 1.0, true);
      }));
  float_unary("sinh", [](auto x) { return std::sinh(x); }, MathFn::kSinh)
      .set_gradient(chain([](A x, A) { return call("cosh", {x}); }));
  float_unary("cosh", [](auto x) { return std::cosh(x); }, MathFn::kCosh)
      .set_gradient(chain([](A x, A) { return call("sinh", {x}); }));
  float_unary("tanh", [](auto x) { return std::tanh(x); }, MathFn::kTanh)
      .set_gradient(chain([](A, A y) { return scalar_op("subtract_scalar", mul(y, y), 1.0, true); }))
      .set_grad_uses({}, {0});
  float_unary("arcsinh", [](auto x) { return std::asinh(x); }, MathFn::kArcsinh)
      .set_gradient(chain([](A x, A) {
        return call("reciprocal", {call("sqrt", {scalar_op("add_scalar", mul(x, x), 1.0)})});
      }));
  float_unary("arccosh", [](auto x) { return std::acosh(x); }, MathFn::kArccosh)
      .set_gradient(chain([](A x, A) {
        return call("reciprocal", {call("sqrt", {scalar_op("subtract_scalar", mul(x, x), 1.0)})});
      }));
  float_unary("arctanh", [](auto x) { return std::atanh(x); }, MathFn::kArctanh)
      .set_gradient(chain([](A x, A) {
        return call("reciprocal", {scalar_op("subtract_scalar", mul(x, x), 1.0, true)});
      }));
  float_unary("reciprocal", [](auto x) { return decltype(x)(1) / x; })
      .set_gradient(chain([](A, A y) { return call("negative", {mul(y, y)}); }));

  // fabs for floats: the comparison would keep -0.0 negative (NumPy's abs(-0.0) is +0.0).
  same_unary("abs", [](auto x) {
    if constexpr (std::is_floating_point<decltype(x)>::value) return std::fabs(x);
    else return x < decltype(x)(0) ? -x : x;
  })
      .set_gradient(chain([](A x, A) { return call("sign", {x}); }));
  same_unary("negative", [](auto x) { return -x; })
      .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
        return {call("negative", {g.out_grads[0]})};
      })
      .set_grad_uses({}, {});
  same_unary("square", [](auto x) { return x * x; })
      .set_gradient(chain([](A x, A) { return scalar_op("multiply_scalar", x, 2.0); }))
      .set_grad_uses({0}, {});
  same_unary("sign", [](auto x) { return sign_of(x); }).set_gradient(zero_grad());
  // Rounding is the identity on integers; std::floor etc. would promote them to double.
  same_unary("floor", [](auto x) {
    if constexpr (std::is_floating_point<decltype(x)>::value) return std::floor(x); else return x;
  }).set_gradient(zero_grad());
  same_unary("ceil", [](auto x) {
    if constexpr (std::is_floating_point<decltype(x)>::value) return std::ceil(x); else return x;
  }).set_gradient(zero_grad());
  same_unary("trunc", [](auto x) {
    if constexpr (std::is_floating_point<decltype(x)>::value) return std::trunc(x); else return x;
  }).set_gradient(zero_grad());
  // NumPy rounds halves to even: nearbyint in the default rounding mode does the same.
  for (const char* name : {"round", "rint"}) {
    same_unary(name, [](auto x) {
      if constexpr (std::is_floating_point<decltype(x)>::value) return std::nearbyint(x); else return x;
    }).set_gradient(zero_grad());
  }

  bool_unary("isnan", [](auto x) {
    if constexpr (std::is_floating_point<decltype(x)>::value) return std::isnan(x); else return false;
  });
  bool_unary("isinf", [](auto x) {
    if constexpr (std::is_floating_point<decltype(x)>::value) return std::isinf(x); else return false;
  });
  bool_unary("isfinite", [](auto x) {
    if constexpr (std::is_floating_point<decltype(x)>::value) return std::isfinite(x); else return true;
  });
  bool_unary("logical_not", [](auto x) { return !static_cast<bool>(x); });
  return true;
}();

// clip keeps the dtype; a missing bound is "None". NaN stays NaN, as in NumPy.
PMX_REGISTER_OP(clip)
    .set_num_inputs(1)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      PMX_CHECK(attrs.has("a_min") || attrs.has("a_max"), "clip: a_min and a_max are both None");
      infer_unary(Kind::kSame, in, dt, out, odt);
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const double lo = ctx.attrs->get_float("a_min", -INFINITY);
      const double hi = ctx.attrs->get_float("a_max", INFINITY);
      // NumPy's clip is minimum(maximum(x, a_min), a_max): below a_min gives min(a_min, a_max),
      // so a_min > a_max yields a_max everywhere.
      const double floor_value = std::min(lo, hi);
      const int64_t n = in[0].size();
      PMX_TYPE_SWITCH(in[0].dtype, T, {
        using C = ops::compute_t<T>;
        const T* src = in[0].data<T>();
        T* dst = out[0].data<T>();
        for (int64_t i = 0; i < n; ++i) {
          const double v = static_cast<double>(static_cast<C>(src[i]));
          dst[i] = v < lo ? static_cast<T>(static_cast<C>(floor_value)) : v > hi ? static_cast<T>(static_cast<C>(hi)) : src[i];
        }
      });
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      // The gradient passes where the input was inside [a_min, a_max].
      const NDArray& x = g.inputs[0];
      NDArray inside = ops::ones_like(x);
      if (g.attrs.has("a_min"))
        inside = mul(inside, call("cast", {scalar_op("greater_equal_scalar", x, g.attrs.get_float("a_min"))},
                                  Attrs{{"dtype", dtype_name(x.dtype())}}));
      if (g.attrs.has("a_max"))
        inside = mul(inside, call("cast", {scalar_op("less_equal_scalar", x, g.attrs.get_float("a_max"))},
                                  Attrs{{"dtype", dtype_name(x.dtype())}}));
      return {mul(g.out_grads[0], inside)};
    });

}  // namespace
}  // namespace pymx
