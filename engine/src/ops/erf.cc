// The error function and its inverse (npx.erf, npx.erfinv), elementwise.
//
// | op      | input | output dtype                | gradient                            |
// |---------|-------|-----------------------------|-------------------------------------|
// | erf     | x     | x's if float, else float32  | dy * 2 / sqrt(pi) * exp(-x^2)       |
// | erfinv  | x     | x's if float, else float32  | dy * sqrt(pi) / 2 * exp(y^2)        |
//
// erfinv is defined on [-1, 1]: +-inf at +-1, NaN outside. float16 and bfloat16 compute in float.
#include <cmath>
#include <limits>

#include "ops/erf_inverse.h"
#include "ops/elemwise.h"
#include "ops/nn_common.h"
#include "parallel.h"

namespace pymx {
namespace {

using ops::call;
using ops::scalar_op;

void float_unary_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                       std::vector<Shape>* out, std::vector<DType>* out_dt) {
  *out = {in[0]};
  *out_dt = {is_float(dt[0]) ? dt[0] : DType::kFloat32};  // integers compute in float32
}

// Elements per parallel chunk: erf and erfinv cost tens of ns an element.
constexpr int64_t kGrain = 4096;

template <typename F>
ComputeFn unary_kernel(F f) {
  return [f](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
    const TBlob x = ops::inputs_as(ctx, in, out[0].dtype)[0];
    PMX_FLOAT_SWITCH(x.dtype, T, {
      using A = nn::acc_t<T>;
      const T* src = x.data<T>();
      T* dst = out[0].data<T>();
      parallel_for(0, x.size(), kGrain, [=](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) dst[i] = static_cast<T>(f(static_cast<A>(src[i])));
      });
    });
  };
}

constexpr double kTwoOverSqrtPi = 1.12837916709551257389615890312154;
constexpr double kSqrtPiOverTwo = 0.88622692545275801364908374167057;

PMX_REGISTER_OP(erf)
    .set_infer(float_unary_infer)
    .set_cpu(unary_kernel([](auto x) { return std::erf(x); }))
    .set_gradient([](const GradContext& ctx) -> std::vector<NDArray> {
      const NDArray& x = ctx.inputs[0];
      NDArray derivative = scalar_op(
          "multiply_scalar", call("exp", {call("negative", {call("square", {x})})}),
          kTwoOverSqrtPi);
      return {call("multiply", {ctx.out_grads[0], derivative})};
    })
    .set_grad_uses({0}, {});

PMX_REGISTER_OP(erfinv)
    .set_infer(float_unary_infer)
    .set_cpu(unary_kernel([](auto x) { return nn::erfinv(x); }))
    .set_gradient([](const GradContext& ctx) -> std::vector<NDArray> {
      const NDArray& y = ctx.outputs[0];
      NDArray derivative = scalar_op("multiply_scalar", call("exp", {call("square", {y})}),
                                     kSqrtPiOverTwo);
      return {call("multiply", {ctx.out_grads[0], derivative})};
    })
    .set_grad_uses({}, {0});

}  // namespace
}  // namespace pymx
