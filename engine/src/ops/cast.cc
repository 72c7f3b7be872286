// Dtype conversion and plain copies.
//
//   op     inputs  attrs          output
//   cast   x       dtype          x converted to dtype (NumPy's astype; float -> int truncates)
//   copy   x       -              a copy of x
#include <cstring>

#include "ops/cast.h"
#include "ops/elemwise.h"
#include "ops/float16_convert.h"

namespace pymx {

void cast_cpu(const TBlob& in, const TBlob& out) {
  PMX_ASSERT(in.size() == out.size(), "cast of ", in.size(), " into ", out.size(), " elements");
  const int64_t n = in.size();
  if (in.dtype == out.dtype) {
    if (n != 0) std::memcpy(out.dptr, in.dptr, static_cast<size_t>(n) * dtype_size(in.dtype));
    return;
  }
  PMX_TYPE_SWITCH(in.dtype, I, {
    PMX_TYPE_SWITCH(out.dtype, O, { convert_span(in.data<I>(), out.data<O>(), n); });
  });
}

namespace {

void infer_cast(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>&,
                std::vector<Shape>* out, std::vector<DType>* out_dtypes) {
  (*out)[0] = in[0];
  (*out_dtypes)[0] = attrs.get_dtype("dtype", DType::kFloat32);
}

void infer_same(const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& in_dtypes,
                std::vector<Shape>* out, std::vector<DType>* out_dtypes) {
  (*out)[0] = in[0];
  (*out_dtypes)[0] = in_dtypes[0];
}

}  // namespace

PMX_REGISTER_OP(cast)
    .set_num_inputs(1)
    .set_infer(infer_cast)
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      cast_cpu(in[0], out[0]);
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      if (!is_float(g.inputs[0].dtype())) return {NDArray()};
      return {ops::call("cast", {g.out_grads[0]}, Attrs{{"dtype", dtype_name(g.inputs[0].dtype())}})};
    });

PMX_REGISTER_OP(copy)
    .set_num_inputs(1)
    .set_infer(infer_same)
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      cast_cpu(in[0], out[0]);
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> { return {g.out_grads[0]}; });

}  // namespace pymx
