// stop_gradient (MXNet's BlockGrad): the identity in the forward pass, a zero gradient in the
// backward pass. An op rather than detach() so that hybridized graphs, which replay ops, stop the
// gradient too.
//
// | op            | inputs | outputs | attrs |
// |---------------|--------|---------|-------|
// | stop_gradient | data   | out     |       |
#include "ops/cast.h"
#include "ops/elemwise.h"

namespace pymx {

PMX_REGISTER_OP(stop_gradient)
    .set_num_inputs(1)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& in_dtypes,
                  std::vector<Shape>* out, std::vector<DType>* out_dtypes) {
      (*out)[0] = in[0];
      (*out_dtypes)[0] = in_dtypes[0];
    })
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      cast_cpu(in[0], out[0]);
    })
    // Zeros rather than no gradient, so that backward() writes 0 into a variable whose only path
    // to the heads is blocked (as MXNet does).
    .set_grad_uses({}, {})
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      return {ops::zeros_like(g.out_grads[0])};
    });

}  // namespace pymx
