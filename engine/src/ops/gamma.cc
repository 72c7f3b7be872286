// The gamma function, the log of its absolute value, and its logarithmic derivative, elementwise
// (npx.gamma, npx.gammaln; _digamma is their gradients' building block, not exposed).
//
// | op       | input | output dtype                | gradient                     |
// |----------|-------|-----------------------------|------------------------------|
// | gamma    | x     | x's if float, else float32  | dy * gamma(x) * digamma(x)   |
// | gammaln  | x     | x's if float, else float32  | dy * digamma(x)              |
// | _digamma | x     | x's if float, else float32  | none (not differentiable)    |
//
// float16 and bfloat16 compute in float. gamma is +-inf at 0 (by the sign of zero) and NaN at the
// negative integers, gammaln +inf at all of them, _digamma NaN at all of them (gamma_math.h).
#include <cmath>
#include <type_traits>

#include "ops/elemwise.h"
#include "ops/float_unary_kernel.h"
#include "ops/gamma_math.h"

namespace pymx {
namespace {

using ops::call;
using ops::float_unary_infer;

// ln|Gamma(x)| through the reentrant lgamma_r: std::lgamma writes the sign to the global
// `signgam`, a data race between the intra-op threads.
template <typename A>
A log_abs_gamma(A x) {
  int sign = 0;
  if constexpr (std::is_same_v<A, float>) {
    return lgammaf_r(x, &sign);
  } else {
    return lgamma_r(x, &sign);
  }
}

PMX_REGISTER_OP(gamma)
    .set_infer(float_unary_infer)
    .set_cpu(ops::float_unary_kernel([](auto x) { return std::tgamma(x); }))
    .set_gradient([](const GradContext& ctx) -> std::vector<NDArray> {
      const NDArray derivative = call("multiply", {ctx.outputs[0], call("_digamma", {ctx.inputs[0]})});
      return {call("multiply", {ctx.out_grads[0], derivative})};
    })
    .set_grad_uses({0}, {0});

PMX_REGISTER_OP(gammaln)
    .set_infer(float_unary_infer)
    .set_cpu(ops::float_unary_kernel([](auto x) { return log_abs_gamma(x); }))
    .set_gradient([](const GradContext& ctx) -> std::vector<NDArray> {
      return {call("multiply", {ctx.out_grads[0], call("_digamma", {ctx.inputs[0]})})};
    })
    .set_grad_uses({0}, {});

PMX_REGISTER_OP(_digamma)
    .set_infer(float_unary_infer)
    .set_cpu(ops::float_unary_kernel([](auto x) { return ops::digamma(x); }));

}  // namespace
}  // namespace pymx
