// The error function and its inverse (npx.erf, npx.erfinv), elementwise.
//
// | op      | input | output dtype                | gradient                            |
// |---------|-------|-----------------------------|-------------------------------------|
// | erf     | x     | x's if float, else float32  | dy * 2 / sqrt(pi) * exp(-x^2)       |
// | erfinv  | x     | x's if float, else float32  | dy * sqrt(pi) / 2 * exp(y^2)        |
//
// erfinv is defined on [-1, 1]: +-inf at +-1, NaN outside. float16 and bfloat16 compute in float;
// erfinv computes in double (Note [Inverse error function on vectors] in erf_inverse.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/erf_inverse.h"
#include "ops/elemwise.h"
#include "ops/float_unary_kernel.h"
#include "ops/nn_common.h"
#include "parallel.h"

namespace pymx {
namespace {

using ops::call;
using ops::float_unary_infer;
using ops::scalar_op;

// erfinv's CPU kernel: erfinv_vector over blocks in double where libmvec has its routines, the
// scalar nn::erfinv element by element elsewhere; both over the intra-op threads.
template <typename T>
void erfinv_loop(const T* src, T* dst, int64_t n) {
  using C = ops::compute_t<T>;  // float for float16 and bfloat16, as the scalar path rounds
  const bool vector = nn::has_vector_erfinv();
  parallel_for(0, n, ops::kUnaryGrain, [=](int64_t lo, int64_t hi) {
    if (!vector) {
      for (int64_t i = lo; i < hi; ++i) dst[i] = static_cast<T>(nn::erfinv(static_cast<C>(src[i])));
      return;
    }
    double wide[nn::kErfinvBlock];
    for (int64_t first = lo; first < hi; first += nn::kErfinvBlock) {
      const int64_t m = std::min(nn::kErfinvBlock, hi - first);
      for (int64_t i = 0; i < m; ++i) wide[i] = static_cast<double>(static_cast<C>(src[first + i]));
      nn::erfinv_vector(wide, wide, m, /*for_double=*/std::is_same_v<C, double>);
      for (int64_t i = 0; i < m; ++i) dst[first + i] = static_cast<T>(static_cast<C>(wide[i]));
    }
  });
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
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& inputs,
                const std::vector<TBlob>& outputs) {
      const TBlob x = ops::inputs_as(ctx, inputs, outputs[0].dtype)[0];
      PMX_FLOAT_SWITCH(x.dtype, T, {
        erfinv_loop(x.data<T>(), outputs[0].data<T>(), x.size());
      });
    })
    .set_gradient([](const GradContext& ctx) -> std::vector<NDArray> {
      const NDArray& y = ctx.outputs[0];
      NDArray derivative = scalar_op("multiply_scalar", call("exp", {call("square", {y})}),
                                     kSqrtPiOverTwo);
      return {call("multiply", {ctx.out_grads[0], derivative})};
    })
    .set_grad_uses({}, {0});

}  // namespace
}  // namespace pymx
