// multi_all_finite: whether every element of every input is finite, as one bool scalar.
//
//   op                inputs            attrs   output
//   multi_all_finite  x0, x1, ... (>=1)  -       bool, shape (): no element is inf or NaN
//
// Inputs may have any dtypes and shapes (integers and bools are always finite). It is the
// overflow check of dynamic loss scaling (pymx/amp/loss_scaler.py): one op per device for all
// of a step's gradients, instead of isfinite + all per gradient. MXNet's multi_all_finite
// returns a float32 (1,) array and takes num_arrays / init_output; pymx counts the inputs
// itself and always starts from true. Not differentiable. GPU kernel: cuda/src/all_finite.cu.
#include <cmath>

#include "ops/elemwise.h"

namespace pymx {
namespace {

template <typename T>
bool all_finite(const T* x, int64_t n) {
  using C = ops::compute_t<T>;
  if constexpr (std::is_floating_point_v<C>) {
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(static_cast<C>(x[i]))) return false;
  }
  return true;
}

PMX_REGISTER_OP(multi_all_finite)
    .set_num_inputs(-1)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>&,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      PMX_CHECK(!in.empty(), "multi_all_finite: needs at least one input");
      (*out)[0] = Shape{};
      (*odt)[0] = DType::kBool;
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      bool finite = true;
      for (size_t k = 0; k < in.size() && finite; ++k)
        PMX_TYPE_SWITCH(in[k].dtype, T, { finite = all_finite(in[k].data<T>(), in[k].size()); });
      *out[0].data<bool>() = finite;
    });

}  // namespace
}  // namespace pymx
