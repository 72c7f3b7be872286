// 1-D cross-correlation, the operator behind np.correlate.
//
// | op        | inputs          | outputs       | attrs        |
// |-----------|-----------------|---------------|--------------|
// | correlate | a (n), v (m)    | out (count)   | shift, count |
//
// out[k] = sum_{j < m} a[k + j + shift] * v[j], with a read as zero outside [0, n): 'full' is
// shift = 1 - m, count = n + m - 1; 'same' and 'valid' are ranges of it. Each output is one
// dot product computed in place, so memory is O(n + m + count) whatever the lengths (a window
// matrix, or im2col's copy of a convolution's receptive fields, would be O(count * m)).
// Sums run in the compute type (float for 16-bit floats); integers wrap as NumPy's do, and
// for bool a sum is true when any product is (NumPy's bool correlation).
//
// The gradients are correlations again: d_a = correlate(dy, flip(v), shift' = -shift - (m - 1),
// count' = n) and d_v = correlate(a, dy, shift, count' = m).
#include <algorithm>
#include <string>

#include "ops/elemwise.h"

namespace pymx {
namespace {

Attrs correlate_attrs(int64_t shift, int64_t count) {
  return Attrs{{"shift", std::to_string(shift)}, {"count", std::to_string(count)}};
}

}  // namespace

PMX_REGISTER_OP(correlate)
    .set_num_inputs(2)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      PMX_CHECK(in[0].size() == 1 && in[1].size() == 1, "correlate: a ", shape_str(in[0]),
                " and v ", shape_str(in[1]), " must both be 1-D");
      PMX_CHECK(dt[0] == dt[1], "correlate: a has dtype ", dtype_name(dt[0]), " but v has ",
                dtype_name(dt[1]));
      const int64_t count = attrs.get_int("count");
      PMX_CHECK(count >= 0, "correlate: count must be non-negative, got ", count);
      (*out)[0] = Shape{count};
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const int64_t n = in[0].size(), m = in[1].size(), shift = ctx.attrs->get_int("shift");
      PMX_TYPE_SWITCH(out[0].dtype, T, {
        using C = compute_t<T>;
        const T* a = in[0].data<T>();
        const T* v = in[1].data<T>();
        T* y = out[0].data<T>();
        for (int64_t k = 0; k < out[0].size(); ++k) {
          // Only the taps j whose a[k + j + shift] lies inside a contribute.
          const int64_t first = std::max<int64_t>(0, -(k + shift));
          const int64_t last = std::min<int64_t>(m, n - (k + shift));
          C sum = C(0);
          for (int64_t j = first; j < last; ++j)
            sum = static_cast<C>(sum + static_cast<C>(a[k + j + shift]) * static_cast<C>(v[j]));
          y[k] = static_cast<T>(sum);
        }
      });
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray &a = g.inputs[0], &v = g.inputs[1], &dy = g.out_grads[0];
      const int64_t n = a.shape()[0], m = v.shape()[0], shift = g.attrs.get_int("shift");
      NDArray flipped = ops::call("flip", {v}, Attrs{{"axis", "0"}});
      return {ops::call("correlate", {dy, flipped}, correlate_attrs(-shift - (m - 1), n)),
              ops::call("correlate", {a, dy}, correlate_attrs(shift, m))};
    });

}  // namespace pymx
