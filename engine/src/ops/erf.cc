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
#include "ops/float_unary_kernel.h"
#include "ops/nn_common.h"

namespace pymx {
namespace {

using ops::call;
using ops::scalar_op;

void float_unary_infer(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                       std::vector<Shape>* out, std::vector<DType>* out_dt) {
  *out = {in[0]};
  *out_dt = {is_float(dt[0]) ? dt[0] : DType::kFloat32};  // integers compute in float32
}

constexpr double kTwoOverSqrtPi = 1.12837916709551257389615890312154;
constexpr double kSqrtPiOverTwo = 0.88622692545275801364908374167057;

PMX_REGISTER_OP(erf)
    .set_infer(float_unary_infer)
    .set_cpu(ops::float_unary_kernel([](auto x) { return std::erf(x); }, ops::MathFn::kErf))
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
    .set_cpu(ops::float_unary_kernel([](auto x) { return nn::erfinv(x); }))
    .set_gradient([](const GradContext& ctx) -> std::vector<NDArray> {
      const NDArray& y = ctx.outputs[0];
      NDArray derivative = scalar_op("multiply_scalar", call("exp", {call("square", {y})}),
                                     kSqrtPiOverTwo);
      return {call("multiply", {ctx.out_grads[0], derivative})};
    })
    .set_grad_uses({}, {0});

}  // namespace
}  // namespace pymx
