// Index-driven NN ops: pick, one_hot, topk, embedding, sequence_mask, batch_flatten.
//
// | op                      | inputs                        | outputs                  | attrs |
// |-------------------------|-------------------------------|--------------------------|-------|
// | pick                    | data, index                   | out                      | axis (-1), keepdims (False), mode (clip | wrap) |
// | pick_backward           | out_grad, data, index         | data_grad                | same as pick |
// | one_hot                 | indices                       | out                      | depth, on_value (1), off_value (0), dtype (float32) |
// | topk                    | data                          | 1 or 2 (ret_typ both)    | axis (-1 or None), k (1), ret_typ (indices | value | both | mask), is_ascend (False), dtype (float32: of indices) |
// | topk_backward           | out_grad, data, indices       | data_grad                | axis, k |
// | embedding               | data (indices), weight        | out                      | input_dim, output_dim |
// | embedding_backward      | out_grad, data, weight        | weight_grad              | - |
// | sequence_mask           | data, [sequence_length]       | out                      | use_sequence_length (False), value (0), axis (0) |
// | batch_flatten           | data                          | out                      | - |
// | batch_flatten_backward  | out_grad, data                | data_grad                | - |
//
// pick: out[..] = data[.., index[..], ..] along axis; index is any numeric dtype; clip clamps to
// [0, n-1], wrap takes it modulo n. one_hot: indices outside [0, depth) give an all-off row.
// topk: values ordered largest first (smallest with is_ascend); ties keep the lower index first;
// 'both' returns (values, indices); 'mask' a 0/1 array of data's shape and dtype.
// embedding: out = weight[clip(data, 0, input_dim-1)], shape data.shape + (output_dim,).
// sequence_mask: data is (max_len, batch, ...) for axis 0 or (batch, max_len, ...) for axis 1;
// steps t >= sequence_length[b] are set to `value`.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ops/nn_common.h"
#include "ops/sort_keys.h"
#include "ops/through_float.h"
#include "ops/topk_geometry.h"

namespace pymx {
namespace {

// Reads element i of an index blob of any dtype as an integer (floats are truncated).
int64_t read_index(const TBlob& b, int64_t i) {
  int64_t v = 0;
  PMX_TYPE_SWITCH(b.dtype, T, { v = static_cast<int64_t>(b.data<T>()[i]); });
  return v;
}

// ---------------------------------------------------------------------------------------------
// pick
// ---------------------------------------------------------------------------------------------
struct PickGeom {
  int axis;
  int64_t outer, n, inner;
  bool wrap;
};

PickGeom pick_geom(const Attrs& attrs, const Shape& data, const char* op = "pick") {
  PMX_CHECK(!data.empty(), op, ": data must have at least one dimension");
  const int axis = nn::normalize_axis(attrs.get_int("axis", -1), static_cast<int>(data.size()), op);
  const std::string mode = attrs.get_str("mode", "clip");
  PMX_CHECK(mode == "clip" || mode == "wrap", op, ": mode '", mode, "' is not one of clip, wrap");
  return {axis, nn::prod(data, 0, axis), data[axis],
          nn::prod(data, axis + 1, static_cast<int>(data.size())), mode == "wrap"};
}

int64_t pick_position(const PickGeom& g, int64_t idx) {
  if (g.wrap) return ((idx % g.n) + g.n) % g.n;
  return std::min(std::max<int64_t>(idx, 0), g.n - 1);
}

// The output shape of pick(data, index); checks the index shape and the axis.
Shape pick_out_shape(const Attrs& attrs, const Shape& data, const Shape& index, const char* op) {
  const PickGeom g = pick_geom(attrs, data, op);
  Shape reduced = data, kept = data;
  reduced.erase(reduced.begin() + g.axis);
  kept[g.axis] = 1;
  PMX_CHECK(index == reduced || index == kept, op, ": index shape ", shape_str(index),
            " must be ", shape_str(reduced), " or ", shape_str(kept), " for data ",
            shape_str(data), " and axis ", g.axis);
  PMX_CHECK(g.n > 0 || shape_size(reduced) == 0, op, ": cannot pick from an empty axis ", g.axis,
            " of data ", shape_str(data));
  return attrs.get_bool("keepdims", false) ? kept : reduced;
}

void pick_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                std::vector<Shape>* out, std::vector<DType>* out_dt) {
  *out = {pick_out_shape(attrs, in[0], in[1], "pick")};
  *out_dt = {dt[0]};
}

void pick_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const PickGeom g = pick_geom(*ctx.attrs, in[0].shape);
  PMX_TYPE_SWITCH(in[0].dtype, T, {
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t i = 0; i < g.inner; ++i) {
        const int64_t k = pick_position(g, read_index(in[1], o * g.inner + i));
        y[o * g.inner + i] = x[(o * g.n + k) * g.inner + i];
      }
  });
}

void pick_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                         const std::vector<DType>& dt, std::vector<Shape>* out,
                         std::vector<DType>* out_dt) {
  const Shape o = pick_out_shape(attrs, in[1], in[2], "pick_backward");
  PMX_CHECK(in[0] == o, "pick_backward: out_grad shape ", shape_str(in[0]),
            " does not match the output shape ", shape_str(o));
  nn::check_same_float(dt, "pick_backward", 0, 2);
  *out = {in[1]};
  *out_dt = {dt[1]};
}

void pick_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const PickGeom g = pick_geom(*ctx.attrs, in[1].shape);
  PMX_FLOAT_SWITCH(in[1].dtype, T, {
    const T* dy = in[0].data<T>();
    T* dx = out[0].data<T>();
    std::fill(dx, dx + out[0].size(), T(0));
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t i = 0; i < g.inner; ++i) {
        const int64_t k = pick_position(g, read_index(in[2], o * g.inner + i));
        T& d = dx[(o * g.n + k) * g.inner + i];
        d = static_cast<T>(static_cast<float>(d) + static_cast<float>(dy[o * g.inner + i]));
      }
  });
}

PMX_REGISTER_OP(pick)
    .set_num_inputs(2)
    .set_infer(pick_infer)
    .set_cpu(pick_forward)
    .set_gradient([](const GradContext& ctx) {
      NDArray dx = invoke("pick_backward", {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1]},
                          ctx.attrs)[0];
      return std::vector<NDArray>{dx, NDArray()};
    });

PMX_REGISTER_OP(pick_backward)
    .set_num_inputs(3)
    .set_infer(pick_backward_infer)
    .set_cpu(pick_backward);

// ---------------------------------------------------------------------------------------------
// one_hot
// ---------------------------------------------------------------------------------------------
void one_hot_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>&,
                   std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const int64_t depth = attrs.get_int("depth");
  PMX_CHECK(depth >= 0, "one_hot: depth must be >= 0, got ", depth);
  Shape s = in[0];
  s.push_back(depth);
  *out = {s};
  *out_dt = {attrs.get_dtype("dtype", DType::kFloat32)};
}

void one_hot_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  const int64_t depth = ctx.attrs->get_int("depth");
  const double on = ctx.attrs->get_float("on_value", 1.0);
  const double off = ctx.attrs->get_float("off_value", 0.0);
  PMX_TYPE_SWITCH(out[0].dtype, T, {
    T* y = out[0].data<T>();
    std::fill(y, y + out[0].size(), static_cast<T>(off));
    for (int64_t i = 0; i < in[0].size(); ++i) {
      const int64_t k = read_index(in[0], i);
      if (k >= 0 && k < depth) y[i * depth + k] = static_cast<T>(on);
    }
  });
}

PMX_REGISTER_OP(one_hot).set_infer(one_hot_infer).set_cpu(one_hot_forward);

// ---------------------------------------------------------------------------------------------
// topk
// ---------------------------------------------------------------------------------------------
using nn::parse_ret_typ;
using nn::RetTyp;
using nn::TopkGeom;
using nn::topk_geom;

void topk_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const TopkGeom g = topk_geom(attrs, in[0]);
  const Shape out_shape = g.out_shape(in[0]);
  const DType index_dtype = attrs.get_dtype("dtype", DType::kFloat32);
  switch (parse_ret_typ(attrs)) {
    case RetTyp::kIndices: *out = {out_shape}; *out_dt = {index_dtype}; break;
    case RetTyp::kValue: *out = {out_shape}; *out_dt = {dt[0]}; break;
    case RetTyp::kBoth: *out = {out_shape, out_shape}; *out_dt = {dt[0], index_dtype}; break;
    case RetTyp::kMask: *out = {in[0]}; *out_dt = {dt[0]}; break;
  }
}

void topk_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  const TopkGeom g = topk_geom(*ctx.attrs, in[0].shape);
  const RetTyp ret = parse_ret_typ(*ctx.attrs);
  const bool ascend = ctx.attrs->get_bool("is_ascend", false);
  std::vector<int64_t> order(g.n);
  PMX_TYPE_SWITCH(in[0].dtype, T, {
    const T* x = in[0].data<T>();
    if (ret == RetTyp::kMask) std::fill(out[0].data<T>(), out[0].data<T>() + out[0].size(), T(0));
    for (int64_t o = 0; o < g.outer; ++o) {
      for (int64_t i = 0; i < g.inner; ++i) {
        const T* row = x + o * g.n * g.inner + i;
        std::iota(order.begin(), order.end(), 0);
        // By sort key (sort_keys.h): NaN above +inf, -0.0 tied with +0.0, as sort orders them.
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return nn::sort_key(row[a * g.inner], ascend) < nn::sort_key(row[b * g.inner], ascend);
        });
        for (int64_t j = 0; j < g.k; ++j) {
          const int64_t src = order[j];
          const int64_t dst = (o * g.k + j) * g.inner + i;
          switch (ret) {
            case RetTyp::kValue: out[0].data<T>()[dst] = row[src * g.inner]; break;
            case RetTyp::kIndices:
              PMX_TYPE_SWITCH(out[0].dtype, I, { out[0].data<I>()[dst] = static_cast<I>(src); });
              break;
            case RetTyp::kBoth:
              out[0].data<T>()[dst] = row[src * g.inner];
              PMX_TYPE_SWITCH(out[1].dtype, I, { out[1].data<I>()[dst] = static_cast<I>(src); });
              break;
            case RetTyp::kMask:
              out[0].data<T>()[(o * g.n + src) * g.inner + i] = T(1);
              break;
          }
        }
      }
    }
  });
}

void topk_backward_infer(const Attrs& attrs, const std::vector<Shape>& in,
                         const std::vector<DType>& dt, std::vector<Shape>* out,
                         std::vector<DType>* out_dt) {
  const TopkGeom g = topk_geom(attrs, in[1], "topk_backward");
  const Shape out_shape = g.out_shape(in[1]);
  PMX_CHECK(in[0] == out_shape && in[2] == out_shape, "topk_backward: out_grad ",
            shape_str(in[0]), " and indices ", shape_str(in[2]), " must both have shape ",
            shape_str(out_shape), " for data ", shape_str(in[1]), " and k=", g.k);
  nn::check_same_float(dt, "topk_backward", 0, 2);
  *out = {in[1]};
  *out_dt = {dt[1]};
}

void topk_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const TopkGeom g = topk_geom(*ctx.attrs, in[1].shape);
  PMX_FLOAT_SWITCH(in[1].dtype, T, {
    const T* dy = in[0].data<T>();
    T* dx = out[0].data<T>();
    std::fill(dx, dx + out[0].size(), T(0));
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t j = 0; j < g.k; ++j)
        for (int64_t i = 0; i < g.inner; ++i) {
          const int64_t pos = (o * g.k + j) * g.inner + i;
          // The indices are data, known only here; out of range they would write outside dx.
          const int64_t k = read_index(in[2], pos);
          PMX_CHECK(k >= 0 && k < g.n, "topk_backward: index ", k, " is out of range [0, ", g.n,
                    ")");
          dx[(o * g.n + k) * g.inner + i] = dy[pos];
        }
  });
}

// Only the values are differentiable: recompute the indices, then scatter the gradient.
std::vector<NDArray> topk_gradient(const GradContext& ctx) {
  const RetTyp ret = parse_ret_typ(ctx.attrs);
  if (ret != RetTyp::kValue && ret != RetTyp::kBoth) return {NDArray()};
  Attrs index_attrs = ctx.attrs;
  index_attrs.set("ret_typ", "indices");
  index_attrs.set("dtype", "int64");
  NDArray indices = invoke("topk", {ctx.inputs[0]}, index_attrs)[0];
  return invoke("topk_backward", {ctx.out_grads[0], ctx.inputs[0], indices}, index_attrs);
}

PMX_REGISTER_OP(topk)
    .set_num_outputs([](const Attrs& a) { return parse_ret_typ(a) == RetTyp::kBoth ? 2 : 1; })
    .set_infer(topk_infer)
    .set_cpu(topk_forward)
    .set_gradient(topk_gradient);

PMX_REGISTER_OP(topk_backward)
    .set_num_inputs(3)
    .set_infer(topk_backward_infer)
    .set_cpu(topk_backward);

// ---------------------------------------------------------------------------------------------
// embedding
// ---------------------------------------------------------------------------------------------
void embedding_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                     std::vector<Shape>* out, std::vector<DType>* out_dt) {
  const int64_t input_dim = attrs.get_int("input_dim", in[1].empty() ? 0 : in[1][0]);
  const int64_t output_dim = attrs.get_int("output_dim", in[1].size() < 2 ? 0 : in[1][1]);
  PMX_CHECK(in[1] == Shape({input_dim, output_dim}), "embedding: weight shape ",
            shape_str(in[1]), " does not match input_dim=", input_dim, ", output_dim=", output_dim);
  PMX_CHECK(input_dim > 0, "embedding: input_dim must be > 0, got ", input_dim);
  Shape s = in[0];
  s.push_back(output_dim);
  *out = {s};
  *out_dt = {dt[1]};
}

void embedding_forward(const OpContext&, const std::vector<TBlob>& in,
                       const std::vector<TBlob>& out) {
  const int64_t rows = in[1].shape[0], dim = in[1].shape[1];
  const size_t row_bytes = dim * dtype_size(in[1].dtype);
  const char* w = static_cast<const char*>(in[1].dptr);
  char* y = static_cast<char*>(out[0].dptr);
  for (int64_t i = 0; i < in[0].size(); ++i) {
    const int64_t r = std::min(std::max<int64_t>(read_index(in[0], i), 0), rows - 1);
    std::memcpy(y + i * row_bytes, w + r * row_bytes, row_bytes);
  }
}

void embedding_backward_infer(const Attrs&, const std::vector<Shape>& in,
                              const std::vector<DType>& dt, std::vector<Shape>* out,
                              std::vector<DType>* out_dt) {
  PMX_CHECK(in[2].size() == 2 && in[2][0] > 0, "embedding_backward: weight shape ",
            shape_str(in[2]), " must be (input_dim, output_dim) with input_dim > 0");
  Shape o = in[1];
  o.push_back(in[2][1]);
  PMX_CHECK(in[0] == o, "embedding_backward: out_grad shape ", shape_str(in[0]),
            " must be data.shape + (output_dim,) = ", shape_str(o));
  nn::check_float(dt[2], "embedding_backward", "weight");
  if (dt[0] != dt[2])
    PMX_THROW(Status::kType, "embedding_backward: out_grad has dtype ", dtype_name(dt[0]),
              " but weight has ", dtype_name(dt[2]));
  *out = {in[2]};
  *out_dt = {dt[2]};
}

void embedding_backward(const OpContext&, const std::vector<TBlob>& in,
                        const std::vector<TBlob>& out) {
  const int64_t rows = in[2].shape[0], dim = in[2].shape[1];
  PMX_FLOAT_WIDE_SWITCH(in[2].dtype, T, {
    const T* dy = in[0].data<T>();
    T* dw = out[0].data<T>();
    std::fill(dw, dw + out[0].size(), T(0));
    for (int64_t i = 0; i < in[1].size(); ++i) {
      const int64_t r = std::min(std::max<int64_t>(read_index(in[1], i), 0), rows - 1);
      for (int64_t j = 0; j < dim; ++j) dw[r * dim + j] += dy[i * dim + j];
    }
  });
}

PMX_REGISTER_OP(embedding)
    .set_num_inputs(2)
    .set_infer(embedding_infer)
    .set_cpu(embedding_forward)
    .set_gradient([](const GradContext& ctx) {
      NDArray dw = invoke("embedding_backward", {ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1]},
                          ctx.attrs)[0];
      return std::vector<NDArray>{NDArray(), dw};
    });

// 16-bit weights sum their repeated rows in float and round once (a 16-bit running sum stops
// growing: 1000 additions of 1.0 give 256 in bfloat16).
PMX_REGISTER_OP(embedding_backward)
    .set_num_inputs(3)
    .set_infer(embedding_backward_infer)
    .set_cpu(nn::through_float(embedding_backward, nn::Widen::kBoth16BitFloats, {}, {2}));

// ---------------------------------------------------------------------------------------------
// sequence_mask
// ---------------------------------------------------------------------------------------------
void sequence_mask_infer(const Attrs& attrs, const std::vector<Shape>& in,
                         const std::vector<DType>& dt, std::vector<Shape>* out,
                         std::vector<DType>* out_dt) {
  const bool use_len = attrs.get_bool("use_sequence_length", false);
  PMX_CHECK(in.size() == (use_len ? 2u : 1u), "sequence_mask: expected ", use_len ? 2 : 1,
            " inputs with use_sequence_length=", use_len, ", got ", in.size());
  const int64_t axis = attrs.get_int("axis", 0);
  PMX_CHECK(axis == 0 || axis == 1, "sequence_mask: axis must be 0 or 1, got ", axis);
  PMX_CHECK(in[0].size() >= 2, "sequence_mask: data ", shape_str(in[0]),
            " must have at least 2 dimensions");
  if (use_len) {
    const int64_t batch = in[0][1 - axis];
    PMX_CHECK(in[1] == Shape({batch}), "sequence_mask: sequence_length shape ", shape_str(in[1]),
              " must be (", batch, ",) for data ", shape_str(in[0]), " and axis ", axis);
  }
  *out = {in[0]};
  *out_dt = {dt[0]};
}

void sequence_mask_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                           const std::vector<TBlob>& out) {
  const Shape& s = in[0].shape;
  const int64_t axis = ctx.attrs->get_int("axis", 0);
  const double value = ctx.attrs->get_float("value", 0.0);
  const int64_t steps = s[axis], batch = s[1 - axis], inner = nn::prod(s, 2, static_cast<int>(s.size()));
  PMX_TYPE_SWITCH(in[0].dtype, T, {
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    if (y != x) std::copy(x, x + in[0].size(), y);
    if (in.size() == 2) {
      for (int64_t b = 0; b < batch; ++b) {
        const double len = [&] {
          double v = 0;
          PMX_TYPE_SWITCH(in[1].dtype, L, { v = static_cast<double>(in[1].data<L>()[b]); });
          return v;
        }();
        for (int64_t t = 0; t < steps; ++t) {
          if (t < len) continue;
          T* row = y + (axis == 0 ? t * batch + b : b * steps + t) * inner;
          std::fill(row, row + inner, static_cast<T>(value));
        }
      }
    }
  });
}

PMX_REGISTER_OP(sequence_mask)
    .set_num_inputs(-1)
    .set_infer(sequence_mask_infer)
    .set_cpu(sequence_mask_forward)
    .set_gradient([](const GradContext& ctx) {
      Attrs attrs = ctx.attrs;
      attrs.set("value", "0");
      std::vector<NDArray> in = {ctx.out_grads[0]};
      if (ctx.inputs.size() == 2) in.push_back(ctx.inputs[1]);
      std::vector<NDArray> grads = {invoke("sequence_mask", in, attrs)[0]};
      if (ctx.inputs.size() == 2) grads.push_back(NDArray());
      return grads;
    });

// ---------------------------------------------------------------------------------------------
// batch_flatten
// ---------------------------------------------------------------------------------------------
void copy_blob(const OpContext&, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  std::memcpy(out[0].dptr, in[0].dptr, in[0].size() * dtype_size(in[0].dtype));
}

PMX_REGISTER_OP(batch_flatten)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
      PMX_CHECK(!in[0].empty(), "batch_flatten: data must have at least one dimension");
      *out = {{in[0][0], nn::prod(in[0], 1, static_cast<int>(in[0].size()))}};
      *out_dt = {dt[0]};
    })
    .set_cpu(copy_blob)
    .set_gradient([](const GradContext& ctx) {
      return invoke("batch_flatten_backward", {ctx.out_grads[0], ctx.inputs[0]});
    });

PMX_REGISTER_OP(batch_flatten_backward)
    .set_num_inputs(2)
    .set_infer([](const Attrs&, const std::vector<Shape>& in, const std::vector<DType>& dt,
                  std::vector<Shape>* out, std::vector<DType>* out_dt) {
      PMX_CHECK(shape_size(in[0]) == shape_size(in[1]), "batch_flatten_backward: out_grad ",
                shape_str(in[0]), " and data ", shape_str(in[1]), " differ in size");
      *out = {in[1]};
      *out_dt = {dt[0]};
    })
    .set_cpu(copy_blob);

}  // namespace
}  // namespace pymx
