// Layout operators. Most are one strided copy (ops::strided_copy) with the right strides.
//
//   op           inputs       attrs                       output
//   reshape      x            newshape (one -1 allowed)   same data, new shape
//   expand_dims  x            axis (int or tuple)         a new axis of length 1
//   squeeze      x            axis (None: all 1-axes)     axes of length 1 removed
//   transpose    x            axes (None: reversed)       permuted axes
//   swapaxes     x            axis1, axis2                two axes exchanged
//   broadcast_to x            shape                       NumPy broadcast
//   tile         x            reps                        NumPy tile
//   repeat       x            repeats (int), axis (None: flatten first)
//   flip         x            axis (None: all)            reversed along axis
//   concatenate  x0, x1, ...  axis                        joined along axis (dtypes promoted)
//   stack        x0, x1, ...  axis                        joined along a new axis
//   split        x            indices, axis               len(indices)+1 outputs, cut at indices
//   where        cond, x, y   -                           cond ? x : y, all three broadcast
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

#include "ops/cast.h"
#include "ops/elemwise.h"

namespace pymx {
namespace {

using ops::call;
using ops::shape_attr;

void copy_kernel(const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  cast_cpu(in[0], out[0]);
}

InferFn infer_with(std::function<Shape(const Attrs&, const Shape&)> shape_fn) {
  return [shape_fn](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                    std::vector<Shape>* out, std::vector<DType>* odt) {
    (*out)[0] = shape_fn(attrs, in[0]);
    (*odt)[0] = dt[0];
  };
}

// Reads only the input's shape: ops using it declare set_grad_uses({}, {}).
GradFn reshape_back() {
  return [](const GradContext& g) -> std::vector<NDArray> {
    return {call("reshape", {g.out_grads[0]}, Attrs{{"newshape", shape_attr(g.input_shapes[0])}})};
  };
}

Shape reshape_shape(const Attrs& attrs, const Shape& in) {
  Shape s = attrs.get_shape("newshape");
  int unknown = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      PMX_CHECK(unknown < 0, "reshape: can only specify one unknown dimension in ", shape_str(s));
      unknown = static_cast<int>(i);
    } else {
      PMX_CHECK(s[i] >= 0, "reshape: invalid dimension ", s[i], " in ", shape_str(s));
      known *= s[i];
    }
  }
  if (unknown >= 0) {
    PMX_CHECK(known != 0 && shape_size(in) % known == 0, "cannot reshape array of size ",
              shape_size(in), " into shape ", shape_str(s));
    s[unknown] = shape_size(in) / known;
  }
  PMX_CHECK(shape_size(s) == shape_size(in), "cannot reshape array of size ", shape_size(in),
            " into shape ", shape_str(s));
  return s;
}

Shape expand_dims_shape(const Attrs& attrs, const Shape& in) {
  const Shape axes = attrs.get_shape("axis");
  const int nd = static_cast<int>(in.size() + axes.size());
  std::vector<bool> is_new(nd, false);
  for (int64_t a : axes) {
    const int ax = ops::normalize_axis(a, nd, "expand_dims");
    PMX_CHECK(!is_new[ax], "expand_dims: repeated axis ", a);
    is_new[ax] = true;
  }
  Shape out;
  size_t next = 0;
  for (int d = 0; d < nd; ++d) out.push_back(is_new[d] ? 1 : in[next++]);
  return out;
}

Shape squeeze_shape(const Attrs& attrs, const Shape& in) {
  const int nd = static_cast<int>(in.size());
  std::vector<bool> drop(nd, false);
  if (!attrs.has("axis")) {
    for (int d = 0; d < nd; ++d) drop[d] = in[d] == 1;
  } else {
    for (int64_t a : attrs.get_shape("axis")) {
      const int ax = ops::normalize_axis(a, nd, "squeeze");
      PMX_CHECK(in[ax] == 1, "squeeze: cannot select an axis to squeeze out which has size not "
                "equal to one (axis ", a, ", shape ", shape_str(in), ")");
      drop[ax] = true;
    }
  }
  Shape out;
  for (int d = 0; d < nd; ++d)
    if (!drop[d]) out.push_back(in[d]);
  return out;
}

std::vector<int> transpose_perm(const Attrs& attrs, int nd, const std::string& op) {
  std::vector<int> perm(nd);
  if (op == "swapaxes") {
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[ops::normalize_axis(attrs.get_int("axis1"), nd, "swapaxes")],
              perm[ops::normalize_axis(attrs.get_int("axis2"), nd, "swapaxes")]);
    return perm;
  }
  if (!attrs.has("axes")) {
    for (int d = 0; d < nd; ++d) perm[d] = nd - 1 - d;
    return perm;
  }
  const Shape axes = attrs.get_shape("axes");
  PMX_CHECK(static_cast<int>(axes.size()) == nd, "transpose: axes ", shape_str(axes),
            " don't match an array of dimension ", nd);
  std::vector<bool> used(nd, false);
  for (int d = 0; d < nd; ++d) {
    perm[d] = ops::normalize_axis(axes[d], nd, "transpose");
    PMX_CHECK(!used[perm[d]], "transpose: repeated axis in ", shape_str(axes));
    used[perm[d]] = true;
  }
  return perm;
}

void register_transpose(const std::string& name) {
  op_registry::get_or_create(name)
      .set_num_inputs(1)
      .set_infer(infer_with([name](const Attrs& attrs, const Shape& in) {
        const std::vector<int> perm = transpose_perm(attrs, static_cast<int>(in.size()), name);
        Shape out(in.size());
        for (size_t d = 0; d < in.size(); ++d) out[d] = in[perm[d]];
        return out;
      }))
      .set_cpu([name](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
        const std::vector<int> perm = transpose_perm(*ctx.attrs, in[0].ndim(), name);
        const std::vector<int64_t> st = ops::contiguous_strides(in[0].shape);
        std::vector<int64_t> strides(perm.size());
        for (size_t d = 0; d < perm.size(); ++d) strides[d] = st[perm[d]];
        ops::strided_copy(in[0].dptr, 0, out[0].shape, strides, out[0].dptr, dtype_size(in[0].dtype));
      })
      .set_gradient([name](const GradContext& g) -> std::vector<NDArray> {
        if (name == "swapaxes") return {call("swapaxes", {g.out_grads[0]}, g.attrs)};
        const std::vector<int> perm =
            transpose_perm(g.attrs, static_cast<int>(g.input_shapes[0].size()), name);
        std::vector<int> inverse(perm.size());
        for (size_t d = 0; d < perm.size(); ++d) inverse[perm[d]] = static_cast<int>(d);
        return {call("transpose", {g.out_grads[0]}, Attrs{{"axes", ops::axes_attr(inverse)}})};
      })
      .set_grad_uses({}, {});
}

// Strides that read `in` broadcast to `out` (0 on stretched and leading axes).
std::vector<int64_t> broadcast_read_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  const std::vector<int64_t> own = ops::contiguous_strides(in);
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) strides[lead + d] = in[d] == 1 ? 0 : own[d];
  return strides;
}

Shape broadcast_to_shape(const Attrs& attrs, const Shape& in) {
  const Shape target = attrs.get_shape("shape");
  PMX_CHECK(target.size() >= in.size() &&
                ops::broadcast_shapes(in, target, "broadcast_to") == target,
            "broadcast_to: cannot broadcast an array of shape ", shape_str(in), " to shape ",
            shape_str(target));
  return target;
}

// tile as a broadcast: x of shape (s0, s1) read as (1, s0, 1, s1) into (r0, s0, r1, s1).
struct TileView {
  Shape view;                    // interleaved (r_i, s_i)
  std::vector<int64_t> strides;  // (0, stride_i)
  Shape out;                     // (r_i * s_i)
};

TileView tile_view(const Attrs& attrs, const Shape& in) {
  Shape reps = attrs.get_shape("reps");
  for (int64_t r : reps) PMX_CHECK(r >= 0, "tile: negative repetition ", r, " in ", shape_str(reps));
  Shape s = in;
  while (reps.size() < s.size()) reps.insert(reps.begin(), 1);
  while (s.size() < reps.size()) s.insert(s.begin(), 1);
  const std::vector<int64_t> st = ops::contiguous_strides(s);
  TileView v;
  for (size_t d = 0; d < s.size(); ++d) {
    v.view.push_back(reps[d]);
    v.view.push_back(s[d]);
    v.strides.push_back(0);
    v.strides.push_back(st[d]);
    v.out.push_back(reps[d] * s[d]);
  }
  return v;
}

// repeat as a broadcast: along `axis` of length n, read (n, 1) as (n, k).
struct RepeatView {
  Shape in;   // the input (flattened when axis is None)
  int axis;
  int64_t k;
};

RepeatView repeat_view(const Attrs& attrs, const Shape& shape) {
  RepeatView v{shape, 0, attrs.get_int("repeats")};
  PMX_CHECK(v.k >= 0, "repeat: negative repeats ", v.k);
  if (!attrs.has("axis")) {
    v.in = {shape_size(shape)};
  } else {
    v.axis = ops::normalize_axis(attrs.get_int("axis"), static_cast<int>(shape.size()), "repeat");
  }
  return v;
}

Shape repeat_expanded(const RepeatView& v) {  // (..., n, k, ...)
  Shape s = v.in;
  s.insert(s.begin() + v.axis + 1, v.k);
  return s;
}

std::vector<int> flip_axes(const Attrs& attrs, int nd) { return ops::reduce_axes(attrs, nd, "flip"); }

int concat_axis(const Attrs& attrs, int nd, const char* op) {
  return ops::normalize_axis(attrs.get_int("axis", 0), nd, op);
}

// Copies each input's rows into place along `axis` of `out`: for every outer index, input i
// contributes a contiguous run of chunk_i elements.
void concat_kernel(const std::vector<TBlob>& in, const TBlob& out, int axis) {
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= out.shape[d];
  const size_t elem = dtype_size(out.dtype);
  const int64_t out_row = outer == 0 ? 0 : out.size() / outer;
  int64_t col = 0;
  for (const TBlob& b : in) {
    const int64_t chunk = outer == 0 ? 0 : b.size() / outer;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(static_cast<char*>(out.dptr) + (o * out_row + col) * elem,
                  static_cast<const char*>(b.dptr) + o * chunk * elem, static_cast<size_t>(chunk) * elem);
    col += chunk;
  }
}

std::vector<int64_t> split_points(const Attrs& attrs, int64_t length) {
  std::vector<int64_t> points;
  for (int64_t p : attrs.get_shape("indices")) {
    points.push_back(std::min(std::max<int64_t>(p, 0), length));
    PMX_CHECK(points.size() == 1 || points.back() >= points[points.size() - 2],
              "split: indices must be non-decreasing, got ", *attrs.find("indices"));
  }
  return points;
}

std::string ints_attr(const std::vector<int64_t>& v) { return shape_str(Shape(v.begin(), v.end())); }

}  // namespace

PMX_REGISTER_OP(reshape).set_num_inputs(1).set_infer(infer_with(reshape_shape)).set_cpu(copy_kernel)
    .set_gradient(reshape_back()).set_grad_uses({}, {});
PMX_REGISTER_OP(expand_dims).set_num_inputs(1).set_infer(infer_with(expand_dims_shape)).set_cpu(copy_kernel)
    .set_gradient(reshape_back()).set_grad_uses({}, {});
PMX_REGISTER_OP(squeeze).set_num_inputs(1).set_infer(infer_with(squeeze_shape)).set_cpu(copy_kernel)
    .set_gradient(reshape_back()).set_grad_uses({}, {});

static const bool g_transpose_registered = [] {
  register_transpose("transpose");
  register_transpose("swapaxes");
  return true;
}();

PMX_REGISTER_OP(broadcast_to)
    .set_num_inputs(1)
    .set_infer(infer_with(broadcast_to_shape))
    .set_cpu([](const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      ops::strided_copy(in[0].dptr, 0, out[0].shape, broadcast_read_strides(in[0].shape, out[0].shape),
                        out[0].dptr, dtype_size(in[0].dtype));
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      return {ops::sum_to_shape(g.out_grads[0], g.input_shapes[0])};
    })
    .set_grad_uses({}, {});

PMX_REGISTER_OP(tile)
    .set_num_inputs(1)
    .set_infer(infer_with([](const Attrs& attrs, const Shape& in) { return tile_view(attrs, in).out; }))
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const TileView v = tile_view(*ctx.attrs, in[0].shape);
      ops::strided_copy(in[0].dptr, 0, v.view, v.strides, out[0].dptr, dtype_size(in[0].dtype));
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const TileView v = tile_view(g.attrs, g.inputs[0].shape());
      std::vector<int> rep_axes;
      for (size_t d = 0; d < v.view.size(); d += 2) rep_axes.push_back(static_cast<int>(d));
      NDArray dy = call("reshape", {g.out_grads[0]}, Attrs{{"newshape", shape_attr(v.view)}});
      NDArray summed = call("sum", {dy}, Attrs{{"axis", ops::axes_attr(rep_axes)}});
      return {call("reshape", {summed}, Attrs{{"newshape", shape_attr(g.inputs[0].shape())}})};
    });

PMX_REGISTER_OP(repeat)
    .set_num_inputs(1)
    .set_infer(infer_with([](const Attrs& attrs, const Shape& in) {
      const RepeatView v = repeat_view(attrs, in);
      Shape out = v.in;
      out[v.axis] *= v.k;
      return out;
    }))
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const RepeatView v = repeat_view(*ctx.attrs, in[0].shape);
      std::vector<int64_t> strides = ops::contiguous_strides(v.in);
      strides.insert(strides.begin() + v.axis + 1, 0);
      ops::strided_copy(in[0].dptr, 0, repeat_expanded(v), strides, out[0].dptr, dtype_size(in[0].dtype));
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const RepeatView v = repeat_view(g.attrs, g.inputs[0].shape());
      NDArray dy = call("reshape", {g.out_grads[0]}, Attrs{{"newshape", shape_attr(repeat_expanded(v))}});
      NDArray summed = call("sum", {dy}, Attrs{{"axis", ops::axes_attr({v.axis + 1})}});
      return {call("reshape", {summed}, Attrs{{"newshape", shape_attr(g.inputs[0].shape())}})};
    });

PMX_REGISTER_OP(flip)
    .set_num_inputs(1)
    .set_infer(infer_with([](const Attrs& attrs, const Shape& in) {
      flip_axes(attrs, static_cast<int>(in.size()));  // validates the axes
      return in;
    }))
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      std::vector<int64_t> strides = ops::contiguous_strides(in[0].shape);
      int64_t offset = 0;
      for (int a : flip_axes(*ctx.attrs, in[0].ndim())) {
        offset += (in[0].shape[a] - 1) * strides[a];
        strides[a] = -strides[a];
      }
      ops::strided_copy(in[0].dptr, offset, in[0].shape, strides, out[0].dptr, dtype_size(in[0].dtype));
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      return {call("flip", {g.out_grads[0]}, g.attrs)};
    });

PMX_REGISTER_OP(concatenate)
    .set_num_inputs(-1)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      PMX_CHECK(!in.empty(), "concatenate: need at least one array to concatenate");
      PMX_CHECK(!in[0].empty(), "concatenate: zero-dimensional arrays cannot be concatenated");
      const int axis = concat_axis(attrs, static_cast<int>(in[0].size()), "concatenate");
      Shape s = in[0];
      DType t = dt[0];
      for (size_t i = 1; i < in.size(); ++i) {
        bool ok = in[i].size() == s.size();
        for (size_t d = 0; ok && d < s.size(); ++d) ok = static_cast<int>(d) == axis || in[i][d] == s[d];
        PMX_CHECK(ok, "concatenate: all input array dimensions except for the concatenation axis ",
                  axis, " must match exactly, but input 0 has shape ", shape_str(in[0]), " and input ",
                  i, " has shape ", shape_str(in[i]));
        s[axis] += in[i][axis];
        t = ops::promote(t, dt[i]);
      }
      (*out)[0] = s;
      (*odt)[0] = t;
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      concat_kernel(ops::inputs_as(ctx, in, out[0].dtype), out[0],
                    concat_axis(*ctx.attrs, out[0].ndim(), "concatenate"));
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const int axis = concat_axis(g.attrs, g.inputs[0].ndim(), "concatenate");
      std::vector<int64_t> points;
      int64_t at = 0;
      for (size_t i = 0; i + 1 < g.inputs.size(); ++i) points.push_back(at += g.inputs[i].shape()[axis]);
      std::vector<NDArray> parts = invoke(op_registry::get("split"), {g.out_grads[0]},
                                          Attrs{{"indices", ints_attr(points)}, {"axis", std::to_string(axis)}},
                                          g.out_grads[0].device());
      for (size_t i = 0; i < parts.size(); ++i) {
        if (!is_float(g.inputs[i].dtype())) parts[i] = NDArray();
        else if (parts[i].dtype() != g.inputs[i].dtype())
          parts[i] = call("cast", {parts[i]}, Attrs{{"dtype", dtype_name(g.inputs[i].dtype())}});
      }
      return parts;
    });

PMX_REGISTER_OP(stack)
    .set_num_inputs(-1)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      PMX_CHECK(!in.empty(), "stack: need at least one array to stack");
      DType t = dt[0];
      for (size_t i = 1; i < in.size(); ++i) {
        PMX_CHECK(in[i] == in[0], "stack: all input arrays must have the same shape, but input 0 has shape ",
                  shape_str(in[0]), " and input ", i, " has shape ", shape_str(in[i]));
        t = ops::promote(t, dt[i]);
      }
      const int axis = concat_axis(attrs, static_cast<int>(in[0].size()) + 1, "stack");
      Shape s = in[0];
      s.insert(s.begin() + axis, static_cast<int64_t>(in.size()));
      (*out)[0] = s;
      (*odt)[0] = t;
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      concat_kernel(ops::inputs_as(ctx, in, out[0].dtype), out[0],
                    concat_axis(*ctx.attrs, out[0].ndim(), "stack"));
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const int axis = concat_axis(g.attrs, g.inputs[0].ndim() + 1, "stack");
      std::vector<int64_t> points;
      for (size_t i = 1; i < g.inputs.size(); ++i) points.push_back(static_cast<int64_t>(i));
      std::vector<NDArray> parts = invoke(op_registry::get("split"), {g.out_grads[0]},
                                          Attrs{{"indices", ints_attr(points)}, {"axis", std::to_string(axis)}},
                                          g.out_grads[0].device());
      for (size_t i = 0; i < parts.size(); ++i) {
        if (!is_float(g.inputs[i].dtype())) {
          parts[i] = NDArray();
          continue;
        }
        parts[i] = call("reshape", {parts[i]}, Attrs{{"newshape", shape_attr(g.inputs[i].shape())}});
        if (parts[i].dtype() != g.inputs[i].dtype())
          parts[i] = call("cast", {parts[i]}, Attrs{{"dtype", dtype_name(g.inputs[i].dtype())}});
      }
      return parts;
    });

PMX_REGISTER_OP(split)
    .set_num_inputs(1)
    .set_num_outputs([](const Attrs& attrs) { return static_cast<int>(attrs.get_shape("indices").size()) + 1; })
    .set_infer([](const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      PMX_CHECK(!in[0].empty(), "split: cannot split a zero-dimensional array");
      const int axis = concat_axis(attrs, static_cast<int>(in[0].size()), "split");
      const std::vector<int64_t> points = split_points(attrs, in[0][axis]);
      int64_t prev = 0;
      for (size_t i = 0; i <= points.size(); ++i) {
        const int64_t end = i < points.size() ? points[i] : in[0][axis];
        Shape s = in[0];
        s[axis] = end - prev;
        (*out)[i] = s;
        (*odt)[i] = dt[0];
        prev = end;
      }
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      const int axis = concat_axis(*ctx.attrs, in[0].ndim(), "split");
      int64_t outer = 1;
      for (int d = 0; d < axis; ++d) outer *= in[0].shape[d];
      const size_t elem = dtype_size(in[0].dtype);
      const int64_t in_row = outer == 0 ? 0 : in[0].size() / outer;
      int64_t col = 0;
      for (const TBlob& b : out) {
        const int64_t chunk = outer == 0 ? 0 : b.size() / outer;
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(static_cast<char*>(b.dptr) + o * chunk * elem,
                      static_cast<const char*>(in[0].dptr) + (o * in_row + col) * elem,
                      static_cast<size_t>(chunk) * elem);
        col += chunk;
      }
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const int axis = concat_axis(g.attrs, g.inputs[0].ndim(), "split");
      return {invoke(op_registry::get("concatenate"), g.out_grads, Attrs{{"axis", std::to_string(axis)}},
                     g.inputs[0].device())[0]};
    });

PMX_REGISTER_OP(where)
    .set_num_inputs(3)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      (*out)[0] = ops::broadcast_shapes(ops::broadcast_shapes(in[0], in[1], "where"), in[2], "where");
      (*odt)[0] = ops::promote(dt[1], dt[2]);
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
      // Operands that already have the output's shape (x and y: and its dtype) are read in place
      // and single elements as values; only the others are spread to the output shape in the
      // workspace. Spreading all three made masked_softmax's where(mask, scores, fill), whose
      // scores are read in place and whose fill is one value, 4x slower than an add.
      const TBlob& y = out[0];
      const int64_t n = y.size();
      const size_t elem = dtype_size(y.dtype);
      const size_t cond_bytes = (static_cast<size_t>(n) + 63) / 64 * 64;
      const size_t val_bytes = (static_cast<size_t>(n) * elem + 63) / 64 * 64;
      char* space = static_cast<char*>(ctx.workspace(cond_bytes + 2 * val_bytes + in[0].size() + 64));
      const bool* cond = static_cast<const bool*>(in[0].dptr);
      if (in[0].dtype != DType::kBool || in[0].shape != y.shape) {
        bool* spread_cond = reinterpret_cast<bool*>(space);
        bool* cond_src = reinterpret_cast<bool*>(space + cond_bytes + 2 * val_bytes);
        TBlob cond_blob = in[0];
        cond_blob.dtype = DType::kBool;
        cond_blob.dptr = cond_src;
        cast_cpu(in[0], cond_blob);
        ops::strided_copy(cond_src, 0, y.shape, broadcast_read_strides(in[0].shape, y.shape),
                          spread_cond, 1);
        cond = spread_cond;
      }
      // x and y must be converted to the output dtype before spreading.
      PMX_TYPE_SWITCH(y.dtype, T, {
        T* dst = y.data<T>();
        const T* data[2] = {nullptr, nullptr};
        T value[2] = {};
        bool single[2];
        for (int side = 1; side <= 2; ++side) {
          const TBlob& operand = in[side];
          single[side - 1] = operand.size() == 1;
          std::unique_ptr<T[]> converted;  // not std::vector: vector<bool> has no data()
          const T* src = static_cast<const T*>(operand.dptr);
          if (operand.dtype != y.dtype) {
            converted.reset(new T[static_cast<size_t>(operand.size())]);
            TBlob c = operand;
            c.dtype = y.dtype;
            c.dptr = converted.get();
            cast_cpu(operand, c);
            src = converted.get();
          }
          if (single[side - 1]) {
            value[side - 1] = src[0];
          } else if (operand.dtype == y.dtype && operand.shape == y.shape) {
            data[side - 1] = src;
          } else {
            char* spread = space + cond_bytes + (side - 1) * val_bytes;
            ops::strided_copy(src, 0, y.shape, broadcast_read_strides(operand.shape, y.shape),
                              spread, elem);
            data[side - 1] = reinterpret_cast<const T*>(spread);
          }
        }
        // Calls fn with a reader of operand `side` (index -> value): one loop per combination.
        const auto with_reader = [&](int side, auto&& fn) {
          if (single[side]) {
            fn([v = value[side]](int64_t) { return v; });
          } else {
            fn([p = data[side]](int64_t i) { return p[i]; });
          }
        };
        with_reader(0, [&](auto a) {
          with_reader(1, [&](auto b) {
            for (int64_t i = 0; i < n; ++i) dst[i] = cond[i] ? a(i) : b(i);
          });
        });
      });
    })
    .set_gradient([](const GradContext& g) -> std::vector<NDArray> {
      const NDArray& dy = g.out_grads[0];
      NDArray zero = invoke(op_registry::get("zeros"), {}, Attrs{{"shape", "()"}, {"dtype", dtype_name(dy.dtype())}},
                            dy.device())[0];
      auto fit = [](NDArray grad, const NDArray& x) {
        if (!is_float(x.dtype())) return NDArray();
        grad = ops::sum_to_shape(grad, x.shape());
        return grad.dtype() == x.dtype() ? grad : call("cast", {grad}, Attrs{{"dtype", dtype_name(x.dtype())}});
      };
      return {NDArray(), fit(call("where", {g.inputs[0], dy, zero}), g.inputs[1]),
              fit(call("where", {g.inputs[0], zero, dy}), g.inputs[2])};
    });

}  // namespace pymx
