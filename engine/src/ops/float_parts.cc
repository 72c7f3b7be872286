// Elementwise operators that take floats apart or need a series, which compositions of other
// operators would compute wrongly (signs of zeros and NaN, subnormals, the last ulp) or slowly.
//
// | op         | input | outputs                               | output dtypes           | gradient         |
// |------------|-------|---------------------------------------|-------------------------|------------------|
// | signbit    | x     | whether the sign bit is set           | bool                    | -                |
// | spacing    | x     | ulp of x away from zero, signed as x  | x's if float, else f32  | 0                |
// | frexp      | x     | mantissa in [0.5, 1), exponent        | x's (f32), int32        | dy_m * 2^-e      |
// | modf       | x     | fractional part, integral part        | x's (f32), x's (f32)    | dy_frac          |
// | i0         | x     | modified Bessel function I0(x)        | x's if float, else f32  | dy * i1(x)       |
// | bessel_i1  | x     | modified Bessel function I1(x)        | x's if float, else f32  | -                |
//
// bessel_i1 exists for i0's gradient. Both parts of frexp and modf carry x's sign, as in NumPy
// (modf(-0.5) = (-0.5, -0.0), frexp(-8) = (-0.5, 4)); frexp(0), frexp(inf) and frexp(nan) give x
// and exponent 0. The element functions are in float_parts_math.h, shared with the GPU kernels.
#include <cmath>
#include <type_traits>

#include "ops/elemwise.h"
#include "ops/float_parts_math.h"

namespace pymx {
namespace {

using ops::call;
using ops::scalar_op;

DType float_of(DType t) { return is_float(t) ? t : DType::kFloat32; }

void infer_float(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                 std::vector<Shape>* out, std::vector<DType>* odt) {
  for (size_t i = 0; i < out->size(); ++i) {
    (*out)[i] = in[0];
    (*odt)[i] = float_of(dt[0]);
  }
}

template <typename T>
constexpr ops::FloatFormat format_of() {
  if constexpr (std::is_same_v<T, half_t>) return ops::kFloat16Format;
  else if constexpr (std::is_same_v<T, bf16_t>) return ops::kBFloat16Format;
  else if constexpr (std::is_same_v<T, float>) return ops::kFloat32Format;
  else return ops::kFloat64Format;
}

// Runs f(x) -> T over x converted to the output's float dtype.
template <typename Kernel>
ComputeFn float_kernel(Kernel kernel) {
  return [kernel](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
    const TBlob x = ops::inputs_as(ctx, in, out[0].dtype)[0];
    PMX_FLOAT_SWITCH(x.dtype, T, { kernel(T(), x.data<T>(), out, x.size()); });
  };
}

// f(x) computed in double for each element, rounded once to the output's float dtype.
template <typename F>
ComputeFn through_double(F f) {
  return float_kernel([f](auto tag, const auto* src, const std::vector<TBlob>& out, int64_t n) {
    using T = decltype(tag);
    using C = ops::compute_t<T>;
    T* dst = out[0].data<T>();
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<T>(static_cast<C>(f(static_cast<double>(static_cast<C>(src[i])))));
  });
}

NDArray mul(const NDArray& a, const NDArray& b) { return call("multiply", {a, b}); }

const bool g_registered = [] {
  op_registry::get_or_create("signbit")
      .set_num_inputs(1)
      .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>&,
                    std::vector<Shape>* out, std::vector<DType>* odt) {
        (*out)[0] = in[0];
        (*odt)[0] = DType::kBool;
      })
      .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
        const int64_t n = in[0].size();
        bool* dst = out[0].data<bool>();
        PMX_TYPE_SWITCH(in[0].dtype, T, {
          using C = ops::compute_t<T>;
          const T* src = in[0].data<T>();
          for (int64_t i = 0; i < n; ++i) {
            const C v = static_cast<C>(src[i]);
            // copysign rather than std::signbit: GCC 12 fails to vectorize the latter (an ICE).
            if constexpr (std::is_floating_point_v<C>) dst[i] = std::copysign(C(1), v) < C(0);
            else if constexpr (std::is_signed_v<C>) dst[i] = static_cast<int64_t>(v) < 0;
            else dst[i] = false;
          }
        });
      });

  op_registry::get_or_create("spacing")
      .set_num_inputs(1)
      .set_infer(infer_float)
      .set_cpu(float_kernel([](auto tag, const auto* src, const std::vector<TBlob>& out, int64_t n) {
        using T = decltype(tag);
        T* dst = out[0].data<T>();
        for (int64_t i = 0; i < n; ++i)
          dst[i] = static_cast<T>(ops::spacing_of(static_cast<ops::compute_t<T>>(src[i]), format_of<T>()));
      }))
      .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
        return {ops::zeros_like(g.out_grads[0])};  // piecewise constant
      })
      .set_grad_uses({}, {});

  op_registry::get_or_create("frexp")
      .set_num_inputs(1)
      .set_num_outputs(2)
      .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                    std::vector<Shape>* out, std::vector<DType>* odt) {
        infer_float(attrs, in, dt, out, odt);
        (*odt)[1] = DType::kInt32;
      })
      .set_cpu(float_kernel([](auto tag, const auto* src, const std::vector<TBlob>& out, int64_t n) {
        using T = decltype(tag);
        T* mantissa = out[0].data<T>();
        int32_t* exponent = out[1].data<int32_t>();
        for (int64_t i = 0; i < n; ++i) {
          int e = 0;
          mantissa[i] = static_cast<T>(std::frexp(static_cast<ops::compute_t<T>>(src[i]), &e));
          exponent[i] = e;
        }
      }))
      // mantissa = x 2^-e with e constant between powers of two.
      .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
        const NDArray& dy = g.out_grads[0];
        const NDArray e = call("cast", {g.outputs[1]}, Attrs{{"dtype", dtype_name(dy.dtype())}});
        return {mul(dy, scalar_op("power_scalar", call("negative", {e}), 2.0, true))};
      })
      .set_grad_uses({}, {1});

  op_registry::get_or_create("modf")
      .set_num_inputs(1)
      .set_num_outputs(2)
      .set_infer(infer_float)
      .set_cpu(float_kernel([](auto tag, const auto* src, const std::vector<TBlob>& out, int64_t n) {
        using T = decltype(tag);
        using C = ops::compute_t<T>;
        T* fraction = out[0].data<T>();
        T* integral = out[1].data<T>();
        for (int64_t i = 0; i < n; ++i) {
          C whole;
          fraction[i] = static_cast<T>(std::modf(static_cast<C>(src[i]), &whole));
          integral[i] = static_cast<T>(whole);
        }
      }))
      // x = fraction + integral, the integral part piecewise constant.
      .set_gradient([](const GradContext& g) -> std::vector<NDArray> { return {g.out_grads[0]}; })
      .set_grad_uses({}, {});

  op_registry::get_or_create("i0")
      .set_num_inputs(1)
      .set_infer(infer_float)
      .set_cpu(through_double([](double x) { return ops::bessel_i0(x); }))
      .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
        return {mul(g.out_grads[0], call("bessel_i1", {g.inputs[0]}))};
      })
      .set_grad_uses({0}, {});

  op_registry::get_or_create("bessel_i1")
      .set_num_inputs(1)
      .set_infer(infer_float)
      .set_cpu(through_double([](double x) { return ops::bessel_i1(x); }));
  return true;
}();

}  // namespace
}  // namespace pymx
