// Indexing: basic slicing, integer-array gathering and their assignment forms. pymx.numpy's
// _indexing.py turns NumPy index expressions into these ops.
//
//   op            inputs                 attrs                       output
//   slice         x                      begin, end, step            x[b0:e0:s0, b1:e1:s1, ...]; one
//                                                                    entry per leading axis, already
//                                                                    normalised (slice.indices)
//   slice_assign  data, value            begin, end, step            data with the slice set to value
//                                                                    (broadcast); in place with out=data
//   take          data, indices          axis (0), mode (raise|clip|wrap)   NumPy take
//   index_update  data, indices, values  axis (0), accumulate (False)       data with data[..., idx, ...]
//                                                                    set (or added) from values, whose
//                                                                    shape is take(data, idx)'s
//   _strided_copy data (1-D)             shape, strides, offset      the strided view of data at
//                                                                    `offset` (element strides, any
//                                                                    sign), made contiguous: how
//                                                                    from_dlpack copies a strided
//                                                                    tensor where it lies
#include <algorithm>
#include <cstring>

#include "ops/cast.h"
#include "ops/elemwise.h"

namespace pymx {
namespace {

using ops::call;

struct SliceView {
  Shape shape;
  std::vector<int64_t> strides;  // in elements of the source
  int64_t offset = 0;
};

SliceView slice_view(const Attrs& attrs, const Shape& in) {
  const Shape begin = attrs.get_shape("begin"), end = attrs.get_shape("end");
  const Shape step = attrs.get_shape("step", Shape(begin.size(), 1));
  PMX_CHECK(begin.size() == end.size() && begin.size() == step.size() && begin.size() <= in.size(),
            "slice: begin ", shape_str(begin), ", end ", shape_str(end), " and step ", shape_str(step),
            " must have one entry per sliced axis of an array of shape ", shape_str(in));
  SliceView v;
  const std::vector<int64_t> st = ops::contiguous_strides(in);
  v.shape = in;
  v.strides = st;
  for (size_t d = 0; d < begin.size(); ++d) {
    PMX_CHECK(step[d] != 0, "slice: step cannot be zero (axis ", d, ")");
    const int64_t b = begin[d], e = end[d], s = step[d];
    const int64_t len = s > 0 ? std::max<int64_t>(0, (e - b + s - 1) / s) : std::max<int64_t>(0, (b - e - s - 1) / -s);
    if (len > 0)
      PMX_CHECK(b >= 0 && b < in[d] && b + (len - 1) * s >= 0 && b + (len - 1) * s < in[d],
                "slice: range ", b, ":", e, ":", s, " out of bounds for axis ", d, " of size ", in[d]);
    v.shape[d] = len;
    v.strides[d] = st[d] * s;
    if (len > 0) v.offset += b * st[d];
  }
  return v;
}

// dst[offset + index . strides] = src[i] for the i-th index of `shape` in row-major order.
template <typename T>
void strided_write(const T* src, const Shape& shape, const std::vector<int64_t>& strides, int64_t offset, T* dst) {
  const int64_t total = shape_size(shape);
  if (total == 0) return;
  const int nd = static_cast<int>(shape.size());
  if (nd == 0) {
    dst[offset] = src[0];
    return;
  }
  std::vector<int64_t> index(nd, 0);
  const int64_t inner = shape[nd - 1], step = strides[nd - 1];
  int64_t off = offset;
  for (int64_t done = 0; done < total; done += inner) {
    for (int64_t i = 0; i < inner; ++i) dst[off + i * step] = src[i];
    src += inner;
    for (int d = nd - 2; d >= 0; --d) {
      off += strides[d];
      if (++index[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

std::vector<int64_t> spread_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  const std::vector<int64_t> own = ops::contiguous_strides(in);
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) strides[lead + d] = in[d] == 1 ? 0 : own[d];
  return strides;
}

void copy_if_distinct(const TBlob& from, const TBlob& to) {
  if (from.dptr != to.dptr) cast_cpu(from, to);
}

struct TakeDims {
  int axis;
  int64_t outer, n, inner;
};

TakeDims take_dims(const Attrs& attrs, const Shape& data, const char* op) {
  PMX_CHECK(!data.empty(), op, ": cannot index a zero-dimensional array along an axis");
  TakeDims t{ops::normalize_axis(attrs.get_int("axis", 0), static_cast<int>(data.size()), op), 1, 0, 1};
  for (int d = 0; d < t.axis; ++d) t.outer *= data[d];
  t.n = data[t.axis];
  for (size_t d = t.axis + 1; d < data.size(); ++d) t.inner *= data[d];
  return t;
}

Shape take_shape(const Attrs& attrs, const Shape& data, const Shape& indices, const char* op) {
  const TakeDims t = take_dims(attrs, data, op);
  Shape s(data.begin(), data.begin() + t.axis);
  s.insert(s.end(), indices.begin(), indices.end());
  s.insert(s.end(), data.begin() + t.axis + 1, data.end());
  // No index fits an empty axis, and clip / wrap would map each one to -1 or 0 all the same:
  // the kernels would read (take) or write (index_update) outside the data. NumPy's IndexError.
  if (t.n == 0 && shape_size(s) > 0)
    PMX_THROW(Status::kIndex, op, ": cannot take indices of shape ", shape_str(indices),
              " from the empty axis ", t.axis, " of data ", shape_str(data));
  return s;
}

// The indices as int64, resolved by `mode` (negative indices count from the end in "raise"). The
// check runs in the kernel, so its error surfaces at a later wait: it names `op` to be traced.
std::vector<int64_t> resolve_indices(const TBlob& idx, int64_t n, const std::string& mode, int axis,
                                     const char* op) {
  std::vector<int64_t> out(static_cast<size_t>(idx.size()));
  PMX_TYPE_SWITCH(idx.dtype, I, {
    const I* p = idx.data<I>();
    for (int64_t i = 0; i < idx.size(); ++i) {
      int64_t v = static_cast<int64_t>(static_cast<ops::compute_t<I>>(p[i]));
      if (mode == "clip") {
        v = std::min(std::max<int64_t>(v, 0), n - 1);
      } else if (mode == "wrap") {
        v = n == 0 ? 0 : ((v % n) + n) % n;
      } else {
        if (v < -n || v >= n)
          PMX_THROW(Status::kIndex, op, ": index ", v, " is out of bounds for axis ", axis,
                    " with size ", n);
        if (v < 0) v += n;
      }
      out[i] = v;
    }
  });
  return out;
}

}  // namespace

PMX_REGISTER_OP(slice)
    .set_num_inputs(1)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      (*out)[0] = slice_view(attrs, in[0]).shape;
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const SliceView v = slice_view(*ctx.attrs, in[0].shape);
      ops::strided_copy(in[0].dptr, v.offset, v.shape, v.strides, out[0].dptr, dtype_size(in[0].dtype));
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      return {call("slice_assign", {ops::zeros_like(g.inputs[0]), g.out_grads[0]}, g.attrs)};
    });

PMX_REGISTER_OP(_strided_copy)
    .set_num_inputs(1)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      const Shape shape = attrs.get_shape("shape"), strides = attrs.get_shape("strides");
      const int64_t offset = attrs.get_int("offset");
      PMX_CHECK(in[0].size() == 1 && strides.size() == shape.size(), "_strided_copy: data ",
                shape_str(in[0]), " must be 1-D and strides ", shape_str(strides),
                " must have one entry per dimension of ", shape_str(shape));
      int64_t low = offset, high = offset;
      for (size_t d = 0; d < shape.size(); ++d) {
        PMX_CHECK(shape[d] >= 0, "_strided_copy: negative extent in ", shape_str(shape));
        const int64_t reach = (shape[d] - 1) * strides[d];
        (reach < 0 ? low : high) += reach;
      }
      PMX_CHECK(shape_size(shape) == 0 || (low >= 0 && high < in[0][0]), "_strided_copy: shape ",
                shape_str(shape), " with strides ", shape_str(strides), " at offset ", offset,
                " reaches elements ", low, " to ", high, " of ", in[0][0]);
      (*out)[0] = shape;
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      ops::strided_copy(in[0].dptr, ctx.attrs->get_int("offset"), out[0].shape,
                        ctx.attrs->get_shape("strides"), out[0].dptr, dtype_size(in[0].dtype));
    });

PMX_REGISTER_OP(slice_assign)
    .set_num_inputs(2)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      const Shape region = slice_view(attrs, in[0]).shape;
      PMX_CHECK(ops::broadcast_shapes(in[1], region, "slice_assign") == region,
                "could not broadcast input array from shape ", shape_str(in[1]), " into shape ",
                shape_str(region));
      (*out)[0] = in[0];
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      copy_if_distinct(in[0], out[0]);
      const SliceView v = slice_view(*ctx.attrs, in[0].shape);
      const TBlob value = ops::inputs_as(ctx, {in[1]}, out[0].dtype)[0];
      PMX_TYPE_SWITCH(out[0].dtype, T, {
        // Spread the value to the region's shape first, so the write is one strided pass.
        std::unique_ptr<T[]> spread(new T[static_cast<size_t>(shape_size(v.shape))]);
        ops::strided_copy(value.dptr, 0, v.shape, spread_strides(value.shape, v.shape), spread.get(), sizeof(T));
        strided_write(spread.get(), v.shape, v.strides, v.offset, out[0].data<T>());
      });
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray& dy = g.out_grads[0];
      NDArray zero = invoke(op_registry::get("zeros"), {}, Attrs{{"shape", "()"}, {"dtype", dtype_name(dy.dtype())}},
                            dy.device())[0];
      NDArray d_data = call("slice_assign", {dy, zero}, g.attrs);
      const NDArray& value = g.inputs[1];
      NDArray d_value;
      if (is_float(value.dtype())) {
        d_value = ops::sum_to_shape(call("slice", {dy}, g.attrs), value.shape());
        if (d_value.dtype() != value.dtype())
          d_value = call("cast", {d_value}, Attrs{{"dtype", dtype_name(value.dtype())}});
      }
      return {d_data, d_value};
    });

PMX_REGISTER_OP(take)
    .set_num_inputs(2)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      (*out)[0] = take_shape(attrs, in[0], in[1], "take");
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const TakeDims t = take_dims(*ctx.attrs, in[0].shape, "take");
      // NumPy checks the indices once per row before the axis: with no such rows (a zero extent
      // there) nothing is read and no index is checked, whatever mode says.
      if (t.outer == 0) return;
      const std::vector<int64_t> idx =
          resolve_indices(in[1], t.n, ctx.attrs->get_str("mode", "raise"), t.axis, "take");
      const size_t elem = dtype_size(in[0].dtype), row = static_cast<size_t>(t.inner) * elem;
      const char* src = static_cast<const char*>(in[0].dptr);
      char* dst = static_cast<char*>(out[0].dptr);
      for (int64_t o = 0; o < t.outer; ++o)
        for (int64_t j : idx) {
          std::memcpy(dst, src + (o * t.n + j) * row, row);
          dst += row;
        }
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      Attrs attrs = g.attrs;
      attrs.set("accumulate", "True");
      return {call("index_update", {ops::zeros_like(g.inputs[0]), g.inputs[1], g.out_grads[0]}, attrs), NDArray()};
    });

PMX_REGISTER_OP(index_update)
    .set_num_inputs(3)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      const Shape expected = take_shape(attrs, in[0], in[1], "index_update");
      PMX_CHECK(in[2] == expected, "index_update: values have shape ", shape_str(in[2]),
                " but the indexed positions have shape ", shape_str(expected));
      (*out)[0] = in[0];
      (*odt)[0] = dt[0];
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      copy_if_distinct(in[0], out[0]);
      const TakeDims t = take_dims(*ctx.attrs, in[0].shape, "index_update");
      const std::vector<int64_t> idx =
          resolve_indices(in[1], t.n, ctx.attrs->get_str("mode", "raise"), t.axis, "index_update");
      const bool accumulate = ctx.attrs->get_bool("accumulate", false);
      const TBlob values = ops::inputs_as(ctx, {in[2]}, out[0].dtype)[0];
      PMX_TYPE_SWITCH(out[0].dtype, T, {
        using C = ops::compute_t<T>;
        const T* v = values.data<T>();
        T* y = out[0].data<T>();
        for (int64_t o = 0; o < t.outer; ++o)
          for (int64_t j : idx) {
            T* dst = y + (o * t.n + j) * t.inner;
            if (accumulate) {
              for (int64_t i = 0; i < t.inner; ++i) dst[i] = static_cast<T>(static_cast<C>(dst[i]) + static_cast<C>(v[i]));
            } else {
              std::copy(v, v + t.inner, dst);
            }
            v += t.inner;
          }
      });
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray& dy = g.out_grads[0];
      NDArray d_data = g.attrs.get_bool("accumulate", false)
                           ? dy
                           : call("index_update", {dy, g.inputs[1], ops::zeros_like(g.inputs[2])}, g.attrs);
      const NDArray& values = g.inputs[2];
      NDArray d_values;
      if (is_float(values.dtype())) {
        Attrs take_attrs{{"axis", g.attrs.get_str("axis", "0")}, {"mode", g.attrs.get_str("mode", "raise")}};
        d_values = call("take", {dy, g.inputs[1]}, take_attrs);
        if (d_values.dtype() != values.dtype())
          d_values = call("cast", {d_values}, Attrs{{"dtype", dtype_name(values.dtype())}});
      }
      return {d_data, NDArray(), d_values};
    });

}  // namespace pymx
