// Binary elementwise operators with NumPy broadcasting and dtype promotion, and their variants
// with a Python scalar.
//
//   op                                      inputs  attrs            output dtype
//   add subtract multiply power maximum     a, b    -                promote(a, b)
//   minimum mod floor_divide arctan2 hypot
//   divide (true division)                  a, b    -                promote(a, b); int/int -> float32
//   equal not_equal greater greater_equal   a, b    -                bool
//   less less_equal logical_and logical_or
//   logical_xor
//   bitwise_and bitwise_or bitwise_xor      a, b    -                promote(a, b); integers and bool only
//   left_shift right_shift                  a, b    -                promote(a, b); integers only (shift_math.h)
//   <any of the above>_scalar               x       scalar, reverse  as above, with the scalar's kind
//                                                                    (int array, float scalar -> float32)
// `reverse` = True puts the scalar on the left (`2 - x` is subtract_scalar(x, 2, reverse)).
// arctan2 and hypot always give a float (int inputs -> float32).
#include <cmath>
#include <type_traits>

#include "ops/elemwise.h"
#include "ops/shift_math.h"

namespace pymx {
namespace {

using ops::call;
using ops::compute_t;
using ops::scalar_op;

enum class Result { kPromote, kFloat, kBool, kInteger };

// The bitwise operators are defined on integers and bools only: a float operand is a TypeError
// naming both dtypes, as NumPy's ufuncs refuse it.
void check_integer_operands(Result kind, const std::string& name, DType a, DType b) {
  if (kind != Result::kInteger || (!is_float(a) && !is_float(b))) return;
  PMX_THROW(Status::kType, "operator '", name, "': only integer and bool operands are supported, got ",
            dtype_name(a), " and ", dtype_name(b));
}

// NumPy has no boolean subtract (a - b of bools is ambiguous): a TypeError pointing to the
// operator that is meant, as NumPy's.
void check_not_bool_subtract(const std::string& name, DType a, DType b) {
  if (name != "subtract" || a != DType::kBool || b != DType::kBool) return;
  PMX_THROW(Status::kType, "operator 'subtract': boolean subtract is not supported (operands bool and bool); "
            "use logical_xor or not_equal instead");
}

// a & b etc. on the computed type. The float branch only satisfies the compiler: inference
// refuses float operands (see above), so it never runs.
template <typename C, typename F>
C bitwise_of(C a, C b, F f) {
  if constexpr (std::is_floating_point<C>::value) return C(0);
  else return static_cast<C>(f(a, b));
}

DType compute_dtype(Result kind, DType promoted) {
  return kind == Result::kFloat && !is_float(promoted) ? DType::kFloat32 : promoted;
}

DType result_dtype(Result kind, DType compute) {
  return kind == Result::kBool ? DType::kBool : compute;
}

// out[i] = f(a[ia], b[ib]) over the broadcast shape `oshape`. `sa`/`sb` are the operands' strides
// in the output's index space (0 along broadcast axes).
template <typename T, typename O, typename F>
void broadcast_loop(const T* a, const T* b, O* out, const Shape& oshape, std::vector<int64_t> sa,
                    std::vector<int64_t> sb, F f) {
  const int64_t total = shape_size(oshape);
  if (total == 0) return;
  // Merge adjacent axes that both operands traverse contiguously.
  Shape shape;
  std::vector<int64_t> ta, tb;
  for (size_t d = 0; d < oshape.size(); ++d) {
    if (oshape[d] == 1) continue;
    if (!shape.empty() && ta.back() == sa[d] * oshape[d] && tb.back() == sb[d] * oshape[d]) {
      shape.back() *= oshape[d];
      ta.back() = sa[d];
      tb.back() = sb[d];
    } else {
      shape.push_back(oshape[d]);
      ta.push_back(sa[d]);
      tb.push_back(sb[d]);
    }
  }
  if (shape.empty()) {
    out[0] = f(static_cast<compute_t<T>>(a[0]), static_cast<compute_t<T>>(b[0]));
    return;
  }
  const int nd = static_cast<int>(shape.size());
  const int64_t inner = shape[nd - 1], ia = ta[nd - 1], ib = tb[nd - 1];
  std::vector<int64_t> index(nd, 0);
  int64_t oa = 0, ob = 0;
  for (int64_t done = 0; done < total; done += inner) {
    const T* pa = a + oa;
    const T* pb = b + ob;
    // The common cases get loops with constant strides, which vectorize.
    if (ia == 1 && ib == 1) {
      for (int64_t i = 0; i < inner; ++i) out[i] = f(static_cast<compute_t<T>>(pa[i]), static_cast<compute_t<T>>(pb[i]));
    } else if (ia == 1 && ib == 0) {
      const compute_t<T> vb = static_cast<compute_t<T>>(pb[0]);
      for (int64_t i = 0; i < inner; ++i) out[i] = f(static_cast<compute_t<T>>(pa[i]), vb);
    } else if (ia == 0 && ib == 1) {
      const compute_t<T> va = static_cast<compute_t<T>>(pa[0]);
      for (int64_t i = 0; i < inner; ++i) out[i] = f(va, static_cast<compute_t<T>>(pb[i]));
    } else {
      for (int64_t i = 0; i < inner; ++i)
        out[i] = f(static_cast<compute_t<T>>(pa[i * ia]), static_cast<compute_t<T>>(pb[i * ib]));
    }
    out += inner;
    for (int d = nd - 2; d >= 0; --d) {
      oa += ta[d];
      ob += tb[d];
      if (++index[d] < shape[d]) break;
      oa -= ta[d] * shape[d];
      ob -= tb[d] * shape[d];
      index[d] = 0;
    }
  }
}

// Strides of an operand of shape `s` inside the broadcast shape `oshape`.
std::vector<int64_t> broadcast_strides(const Shape& s, const Shape& oshape) {
  std::vector<int64_t> strides(oshape.size(), 0);
  const std::vector<int64_t> own = ops::contiguous_strides(s);
  const size_t lead = oshape.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) strides[lead + d] = s[d] == 1 ? 0 : own[d];
  return strides;
}

template <typename F>
void run_binary(const OpContext& ctx, const std::vector<TBlob>& inputs, const TBlob& out,
                DType compute, F f) {
  const std::vector<TBlob> in = ops::inputs_as(ctx, inputs, compute);
  const std::vector<int64_t> sa = broadcast_strides(in[0].shape, out.shape);
  const std::vector<int64_t> sb = broadcast_strides(in[1].shape, out.shape);
  PMX_TYPE_SWITCH(compute, T, {
    if (out.dtype == DType::kBool) {
      broadcast_loop(in[0].data<T>(), in[1].data<T>(), out.data<bool>(), out.shape, sa, sb,
                     [&f](auto x, auto y) { return static_cast<bool>(f(x, y)); });
    } else {
      broadcast_loop(in[0].data<T>(), in[1].data<T>(), out.data<T>(), out.shape, sa, sb,
                     [&f](auto x, auto y) { return static_cast<T>(f(x, y)); });
    }
  });
}

template <typename F>
void run_scalar(const OpContext& ctx, const std::string& name, const TBlob& input, const TBlob& out,
                DType compute, F f) {
  const TBlob x = ops::inputs_as(ctx, {input}, compute)[0];
  const bool reverse = ctx.attrs->get_bool("reverse", false);
  const int64_t n = x.size();
  PMX_TYPE_SWITCH(compute, T, {
    using C = compute_t<T>;
    // See Note [Integer scalars are read as int64] (ops/elemwise.h).
    const C s = ops::scalar_as<C>(*ctx.attrs, "scalar", name);
    const T* src = x.data<T>();
    auto run = [&](auto* dst) {
      using O = std::remove_pointer_t<decltype(dst)>;
      if (reverse) {
        for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<O>(f(s, static_cast<C>(src[i])));
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<O>(f(static_cast<C>(src[i]), s));
      }
    };
    if (out.dtype == DType::kBool) run(out.data<bool>()); else run(out.data<T>());
  });
}

// NumPy's mod: the result takes the sign of the divisor; x % 0 is 0 for integers (NumPy warns).
template <typename C>
C mod_of(C a, C b) {
  if constexpr (std::is_floating_point<C>::value) {
    C r = std::fmod(a, b);
    if (r == 0) return std::copysign(C(0), b);  // a zero takes the divisor's sign too
    if ((r < 0) != (b < 0)) r += b;
    return r;
  } else if constexpr (std::is_same<C, bool>::value) {
    return false;
  } else {
    // b == -1 is answered here: INT64_MIN % -1 traps on x86 (the quotient overflows).
    if (b == 0 || (std::is_signed<C>::value && b == C(-1))) return 0;
    C r = static_cast<C>(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
    return r;
  }
}

template <typename C>
C floor_div_of(C a, C b) {
  if constexpr (std::is_floating_point<C>::value) {
    // NumPy's (and Python's) floor division goes through the remainder, as divmod does: so
    // inf // 2.0 is NaN and -1.0 // inf is -1.0, where floor(a / b) would give inf and -0.0.
    if (b == 0) return a / b;
    const C mod = std::fmod(a, b);
    C div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    if (div == 0) return std::copysign(C(0), a / b);
    C floored = std::floor(div);
    if (div - floored > C(0.5)) floored += 1;  // (a - mod) / b may round just below an integer
    return floored;
  } else if constexpr (std::is_same<C, bool>::value) {
    return a && b;
  } else {
    if (b == 0) return 0;
    // INT64_MIN / -1 traps on x86; NumPy wraps it to INT64_MIN, as negation in unsigned does.
    if (std::is_signed<C>::value && b == C(-1))
      return static_cast<C>(std::make_unsigned_t<C>(0) - static_cast<std::make_unsigned_t<C>>(a));
    C q = static_cast<C>(a / b);
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }
}

template <typename C>
C power_of(C a, C b) {
  if constexpr (std::is_floating_point<C>::value) {
    return std::pow(a, b);
  } else if constexpr (std::is_same<C, bool>::value) {
    return a || !b;
  } else {
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 == 0 ? 1 : -1) : 0;
    C r = 1, base = a;
    for (auto e = b; e > 0; e >>= 1) {
      if (e & 1) r = static_cast<C>(r * base);
      base = static_cast<C>(base * base);
    }
    return r;
  }
}

template <typename C>
auto float_of(C x) {
  if constexpr (std::is_floating_point<C>::value) return x; else return static_cast<double>(x);
}

// ---------------------------------------------------------------------------------------------
// Gradients
// ---------------------------------------------------------------------------------------------

NDArray mul(const NDArray& a, const NDArray& b) { return call("multiply", {a, b}); }
NDArray as_mask(const NDArray& cond, DType dtype) {
  return call("cast", {cond}, Attrs{{"dtype", dtype_name(dtype)}});
}

// A gradient computed in the broadcast shape, brought back to input `i`'s shape and dtype
// (from the context: the input itself may not have been kept). Integer inputs get no gradient.
NDArray fit(const NDArray& grad, const GradContext& g, int i) {
  const DType dtype = g.input_dtypes[i];
  if (!is_float(dtype)) return NDArray();
  NDArray fitted = ops::sum_to_shape(grad, g.input_shapes[i]);
  if (fitted.dtype() != dtype) fitted = call("cast", {fitted}, Attrs{{"dtype", dtype_name(dtype)}});
  return fitted;
}

using PairGrad = std::function<std::pair<NDArray, NDArray>(const NDArray& a, const NDArray& b,
                                                           const NDArray& y, const NDArray& dy)>;

GradFn binary_grad(PairGrad f) {
  return [f](const GradContext& g) -> std::vector<NDArray> {
    auto [ga, gb] = f(g.inputs[0], g.inputs[1], g.outputs[0], g.out_grads[0]);
    return {fit(ga, g, 0), fit(gb, g, 1)};
  };
}

GradFn no_grad(int n) {
  return [n](const GradContext&) { return std::vector<NDArray>(n); };
}

using ScalarGrad = std::function<NDArray(const NDArray& x, const NDArray& y, const NDArray& dy,
                                         double s, bool reverse)>;

GradFn scalar_grad(ScalarGrad f) {
  return [f](const GradContext& g) -> std::vector<NDArray> {
    if (!is_float(g.input_dtypes[0])) return {NDArray()};
    NDArray gx = f(g.inputs[0], g.outputs[0], g.out_grads[0], g.attrs.get_float("scalar"),
                   g.attrs.get_bool("reverse", false));
    return {fit(gx, g, 0)};
  };
}

// ---------------------------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------------------------

template <typename F>
void register_binary(const std::string& name, Result kind, F f, GradFn grad, ScalarGrad sgrad) {
  op_registry::get_or_create(name)
      .set_num_inputs(2)
      .set_infer([kind, name](const Attrs&, const std::vector<Shape>& in,
                              const std::vector<DType>& dt, std::vector<Shape>* out,
                              std::vector<DType>* odt) {
        check_integer_operands(kind, name, dt[0], dt[1]);
        check_not_bool_subtract(name, dt[0], dt[1]);
        (*out)[0] = ops::broadcast_shapes(in[0], in[1], name.c_str());
        (*odt)[0] = result_dtype(kind, compute_dtype(kind, ops::promote(dt[0], dt[1])));
      })
      .set_cpu([kind, f](const OpContext& ctx, const std::vector<TBlob>& in,
                         const std::vector<TBlob>& out) {
        run_binary(ctx, in, out[0], compute_dtype(kind, ops::promote(in[0].dtype, in[1].dtype)), f);
      })
      .set_gradient(grad ? grad : no_grad(2));

  op_registry::get_or_create(name + "_scalar")
      .set_num_inputs(1)
      .set_infer([kind, name](const Attrs& attrs, const std::vector<Shape>& in,
                        const std::vector<DType>& dt, std::vector<Shape>* out,
                        std::vector<DType>* odt) {
        const std::string* scalar = attrs.find("scalar");
        PMX_CHECK(scalar != nullptr, "missing required attribute 'scalar'");
        attrs.get_float("scalar");  // fail early on a malformed scalar
        const bool scalar_is_int = ops::scalar_text_is_int(*scalar);
        check_integer_operands(kind, name + "_scalar", dt[0],
                               scalar_is_int ? DType::kInt64 : DType::kFloat64);
        const DType compute = compute_dtype(kind, ops::promote_scalar(dt[0], scalar_is_int));
        // An integer too big for int64 is refused here, before the op is queued.
        if (scalar_is_int && !is_float(compute)) ops::scalar_int(*scalar, name + "_scalar");
        (*out)[0] = in[0];
        (*odt)[0] = result_dtype(kind, compute);
      })
      .set_cpu([kind, name, f](const OpContext& ctx, const std::vector<TBlob>& in,
                               const std::vector<TBlob>& out) {
        const bool scalar_int = ops::scalar_text_is_int(*ctx.attrs->find("scalar"));
        run_scalar(ctx, name + "_scalar", in[0], out[0],
                   compute_dtype(kind, ops::promote_scalar(in[0].dtype, scalar_int)), f);
      })
      .set_gradient(sgrad ? scalar_grad(sgrad) : no_grad(1));
}

const bool g_registered = [] {
  using A = const NDArray&;
  register_binary("add", Result::kPromote, [](auto a, auto b) { return a + b; },
                  binary_grad([](A, A, A, A dy) { return std::make_pair(dy, dy); }),
                  [](A, A, A dy, double, bool) { return dy; });
  register_binary("subtract", Result::kPromote, [](auto a, auto b) { return a - b; },
                  binary_grad([](A, A, A, A dy) { return std::make_pair(dy, call("negative", {dy})); }),
                  [](A, A, A dy, double, bool reverse) { return reverse ? call("negative", {dy}) : dy; });
  register_binary("multiply", Result::kPromote, [](auto a, auto b) { return a * b; },
                  binary_grad([](A a, A b, A, A dy) { return std::make_pair(mul(dy, b), mul(dy, a)); }),
                  [](A, A, A dy, double s, bool) { return scalar_op("multiply_scalar", dy, s); });
  register_binary("divide", Result::kFloat, [](auto a, auto b) { return a / b; },
                  binary_grad([](A, A b, A y, A dy) {
                    NDArray ga = call("divide", {dy, b});
                    return std::make_pair(ga, call("negative", {mul(ga, y)}));
                  }),
                  [](A x, A y, A dy, double s, bool reverse) {
                    // s / x: d/dx = -s / x^2 = -y / x
                    return reverse ? call("negative", {call("divide", {mul(dy, y), x})})
                                   : scalar_op("divide_scalar", dy, s);
                  });
  register_binary("power", Result::kPromote, [](auto a, auto b) { return power_of(a, b); },
                  binary_grad([](A a, A b, A y, A dy) {
                    // d/da = b * a^(b-1) = b * y / a would fail at a = 0; use the power form.
                    NDArray ga = mul(dy, mul(b, call("power", {a, scalar_op("subtract_scalar", b, 1.0)})));
                    NDArray gb = mul(dy, mul(y, call("log", {a})));
                    return std::make_pair(ga, gb);
                  }),
                  [](A x, A y, A dy, double s, bool reverse) {
                    if (reverse) return mul(dy, scalar_op("multiply_scalar", y, std::log(s)));
                    return mul(dy, scalar_op("multiply_scalar", scalar_op("power_scalar", x, s - 1.0), s));
                  });
  register_binary("maximum", Result::kPromote, [](auto a, auto b) { return (a >= b || a != a) ? a : b; },
                  binary_grad([](A a, A b, A, A dy) {
                    NDArray take_a = as_mask(call("greater_equal", {a, b}), dy.dtype());
                    return std::make_pair(mul(dy, take_a), call("subtract", {dy, mul(dy, take_a)}));
                  }),
                  [](A x, A, A dy, double s, bool) {
                    return mul(dy, as_mask(scalar_op("greater_equal_scalar", x, s), dy.dtype()));
                  });
  register_binary("minimum", Result::kPromote, [](auto a, auto b) { return (a <= b || a != a) ? a : b; },
                  binary_grad([](A a, A b, A, A dy) {
                    NDArray take_a = as_mask(call("less_equal", {a, b}), dy.dtype());
                    return std::make_pair(mul(dy, take_a), call("subtract", {dy, mul(dy, take_a)}));
                  }),
                  [](A x, A, A dy, double s, bool) {
                    return mul(dy, as_mask(scalar_op("less_equal_scalar", x, s), dy.dtype()));
                  });
  register_binary("mod", Result::kPromote, [](auto a, auto b) { return mod_of(a, b); },
                  binary_grad([](A a, A b, A, A dy) {
                    return std::make_pair(dy, call("negative", {mul(dy, call("floor_divide", {a, b}))}));
                  }),
                  [](A x, A, A dy, double s, bool reverse) {
                    if (!reverse) return dy;
                    return call("negative", {mul(dy, call("floor", {scalar_op("divide_scalar", x, s, true)}))});
                  });
  register_binary("floor_divide", Result::kPromote, [](auto a, auto b) { return floor_div_of(a, b); },
                  binary_grad([](A a, A b, A, A) {
                    return std::make_pair(ops::zeros_like(a), ops::zeros_like(b));
                  }),
                  [](A x, A, A, double, bool) { return ops::zeros_like(x); });
  register_binary("arctan2", Result::kFloat, [](auto a, auto b) { return std::atan2(float_of(a), float_of(b)); },
                  binary_grad([](A a, A b, A, A dy) {
                    NDArray denom = call("add", {mul(a, a), mul(b, b)});
                    return std::make_pair(mul(dy, call("divide", {b, denom})),
                                          call("negative", {mul(dy, call("divide", {a, denom}))}));
                  }),
                  nullptr);
  register_binary("hypot", Result::kFloat, [](auto a, auto b) { return std::hypot(float_of(a), float_of(b)); },
                  binary_grad([](A a, A b, A y, A dy) {
                    return std::make_pair(mul(dy, call("divide", {a, y})), mul(dy, call("divide", {b, y})));
                  }),
                  nullptr);

  register_binary("equal", Result::kBool, [](auto a, auto b) { return a == b; }, nullptr, nullptr);
  register_binary("not_equal", Result::kBool, [](auto a, auto b) { return a != b; }, nullptr, nullptr);
  register_binary("greater", Result::kBool, [](auto a, auto b) { return a > b; }, nullptr, nullptr);
  register_binary("greater_equal", Result::kBool, [](auto a, auto b) { return a >= b; }, nullptr, nullptr);
  register_binary("less", Result::kBool, [](auto a, auto b) { return a < b; }, nullptr, nullptr);
  register_binary("less_equal", Result::kBool, [](auto a, auto b) { return a <= b; }, nullptr, nullptr);
  register_binary("logical_and", Result::kBool, [](auto a, auto b) { return static_cast<bool>(a) && static_cast<bool>(b); }, nullptr, nullptr);
  register_binary("logical_or", Result::kBool, [](auto a, auto b) { return static_cast<bool>(a) || static_cast<bool>(b); }, nullptr, nullptr);
  register_binary("logical_xor", Result::kBool, [](auto a, auto b) { return static_cast<bool>(a) != static_cast<bool>(b); }, nullptr, nullptr);
  // Integers are two's complement, so these are NumPy's results for negative values too.
  register_binary("bitwise_and", Result::kInteger,
                  [](auto a, auto b) { return bitwise_of(a, b, [](auto x, auto y) { return x & y; }); },
                  nullptr, nullptr);
  register_binary("bitwise_or", Result::kInteger,
                  [](auto a, auto b) { return bitwise_of(a, b, [](auto x, auto y) { return x | y; }); },
                  nullptr, nullptr);
  register_binary("bitwise_xor", Result::kInteger,
                  [](auto a, auto b) { return bitwise_of(a, b, [](auto x, auto y) { return x ^ y; }); },
                  nullptr, nullptr);

  // What the gradients above read (OpDef::grad_uses_*): sums and differences only the output
  // gradient (and the shapes), a product the factors, a quotient the divisor and the result.
  // divide_scalar reads x and y when reversed, so it keeps the default (everything).
  for (const char* name : {"add", "subtract", "add_scalar", "subtract_scalar", "multiply_scalar"})
    op_registry::get_or_create(name).set_grad_uses({}, {});
  op_registry::get_or_create("multiply").set_grad_uses({0, 1}, {});
  op_registry::get_or_create("divide").set_grad_uses({1}, {0});
  return true;
}();

// NumPy's left_shift and right_shift, with their meaning for counts as wide as the type or
// negative (see ops/shift_math.h). Integer results: no gradient.
const bool g_shifts_registered = [] {
  register_binary("left_shift", Result::kInteger,
                  [](auto a, auto b) { return ops::left_shift_of(a, b); }, nullptr, nullptr);
  register_binary("right_shift", Result::kInteger,
                  [](auto a, auto b) { return ops::right_shift_of(a, b); }, nullptr, nullptr);
  return true;
}();

}  // namespace
}  // namespace pymx
