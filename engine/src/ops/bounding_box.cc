// Bounding-box operators: box_iou (MXNet's contrib box_iou, npx.box_iou) and box_nms (contrib
// box_nms, npx.box_nms). The overlap maths and box_nms's attributes are in box_geometry.h.
//
// | op                | inputs             | outputs       | attrs |
// |-------------------|--------------------|---------------|-------|
// | box_iou           | lhs, rhs           | out           | format ('corner') |
// | box_nms           | data               | out, record   | overlap_thresh (0.5), valid_thresh (0), topk (-1), coord_start (2), score_index (1), id_index (-1), background_id (-1), force_suppress (False), in_format, out_format ('corner') |
// | box_nms_backward  | out_grad, record   | data_grad     | - |
//
// box_iou: lhs (a..., 4) and rhs (b..., 4) give (a..., b...), the IoU of every pair; no gradient
// flows to the boxes (MXNet passes zeros).
//
// box_nms: data (..., n, k) is batches of n boxes of k values each. In each batch the boxes whose
// score exceeds valid_thresh (and, with id_index and background_id, whose id is not the
// background) are sorted by descending score (equal scores keep their order); only the first
// topk take part. Going down that list, a box not yet suppressed suppresses every later one
// whose IoU with it exceeds overlap_thresh (with id_index and not force_suppress, only boxes of
// its class). The kept boxes fill the batch's first rows in score order, converted to
// out_format; the other rows are -1. record (int64, (..., n), hidden from Python) holds the
// input row of each output row, -1 for none; the gradient of an output row goes back to that
// row, and suppressed rows get 0. topk = 0 returns data unchanged.
// Float dtypes; 16-bit floats compute in float (through_float.h).
#include <algorithm>
#include <vector>

#include "ops/box_geometry.h"
#include "ops/nn_common.h"
#include "ops/through_float.h"
#include "parallel.h"

namespace pymx {
namespace {

// ---------------------------------------------------------------------------------------------
// box_iou
// ---------------------------------------------------------------------------------------------
void box_iou_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                   std::vector<Shape>* out, std::vector<DType>* out_dt) {
  box::parse_format(attrs.get_str("format", "corner"), "box_iou", "format");
  for (int i = 0; i < 2; ++i)
    PMX_CHECK(in[i].size() >= 2 && in[i].back() == 4, "box_iou: ", i == 0 ? "lhs" : "rhs",
              " must have at least 2 dimensions and 4 values per box (..., 4), got shape ",
              shape_str(in[i]));
  nn::check_same_float(dt, "box_iou");
  Shape shape(in[0].begin(), in[0].end() - 1);
  shape.insert(shape.end(), in[1].begin(), in[1].end() - 1);
  *out = {shape};
  *out_dt = {dt[0]};
}

template <typename T>
void box_iou_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const box::Format format = box::parse_format(ctx.attrs->get_str("format", "corner"), "box_iou",
                                               "format");
  const T* lhs = in[0].data<T>();
  const T* rhs = in[1].data<T>();
  T* y = out[0].data<T>();
  const int64_t num_rhs = in[1].size() / 4;
  parallel_for(0, in[0].size() / 4, std::max<int64_t>(1, 4096 / std::max<int64_t>(num_rhs, 1)),
               [&](int64_t lo, int64_t hi) {
    for (int64_t l = lo; l < hi; ++l)
      for (int64_t r = 0; r < num_rhs; ++r)
        y[l * num_rhs + r] = box::iou(lhs + l * 4, rhs + r * 4, format);
  });
}

void box_iou_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, { box_iou_typed<T>(ctx, in, out); });
}

// ---------------------------------------------------------------------------------------------
// box_nms
// ---------------------------------------------------------------------------------------------
void box_nms_infer(const Attrs& attrs, const std::vector<Shape>& in, const std::vector<DType>& dt,
                   std::vector<Shape>* out, std::vector<DType>* out_dt) {
  box::nms_params(attrs, in[0], "box_nms");
  nn::check_float(dt[0], "box_nms", "data");
  *out = {in[0], Shape(in[0].begin(), in[0].end() - 1)};
  *out_dt = {dt[0], DType::kInt64};
}

template <typename T>
void box_nms_typed(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const box::NmsParams p = box::nms_params(*ctx.attrs, in[0].shape, "box_nms");
  const T* x = in[0].data<T>();
  T* y = out[0].data<T>();
  int64_t* record = out[1].data<int64_t>();
  const int64_t n = p.num_boxes, k = p.width;
  if (p.candidates() == 0) {  // topk = 0 (or no boxes): data as it is
    std::copy(x, x + in[0].size(), y);
    for (int64_t i = 0; i < p.batches * n; ++i) record[i] = i % n;
    return;
  }
  parallel_for(0, p.batches, 1, [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> order;
    std::vector<char> suppressed;
    for (int64_t b = lo; b < hi; ++b) {
      const T* xb = x + b * n * k;
      order.clear();
      for (int64_t i = 0; i < n; ++i)
        if (p.valid(xb + i * k)) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
        return xb[i * k + p.score_index] > xb[j * k + p.score_index];
      });
      if (static_cast<int64_t>(order.size()) > p.candidates()) order.resize(p.candidates());
      const int64_t m = static_cast<int64_t>(order.size());
      suppressed.assign(m, 0);
      for (int64_t ref = 0; ref < m; ++ref) {
        if (suppressed[ref]) continue;
        const T* a = xb + order[ref] * k;
        for (int64_t pos = ref + 1; pos < m; ++pos) {
          const T* c = xb + order[pos] * k;
          if (!suppressed[pos] && p.same_group(a, c) &&
              box::suppresses(a + p.coord_start, c + p.coord_start, p.in_format,
                              p.overlap_thresh))
            suppressed[pos] = 1;
        }
      }
      T* yb = y + b * n * k;
      int64_t* rb = record + b * n;
      std::fill(yb, yb + n * k, T(-1));
      std::fill(rb, rb + n, int64_t(-1));
      int64_t kept = 0;
      for (int64_t pos = 0; pos < m; ++pos) {
        if (suppressed[pos]) continue;
        std::copy(xb + order[pos] * k, xb + (order[pos] + 1) * k, yb + kept * k);
        if (p.in_format != p.out_format)
          box::convert_format(yb + kept * k + p.coord_start, p.in_format);
        rb[kept++] = order[pos];
      }
    }
  });
}

void box_nms_forward(const OpContext& ctx, const std::vector<TBlob>& in,
                     const std::vector<TBlob>& out) {
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, { box_nms_typed<T>(ctx, in, out); });
}

void box_nms_backward_infer(const Attrs&, const std::vector<Shape>& in,
                            const std::vector<DType>& dt, std::vector<Shape>* out,
                            std::vector<DType>* out_dt) {
  PMX_CHECK(in[0].size() >= 2 && Shape(in[0].begin(), in[0].end() - 1) == in[1],
            "box_nms_backward: record ", shape_str(in[1]), " must be out_grad's shape ",
            shape_str(in[0]), " without its last dimension");
  nn::check_float(dt[0], "box_nms_backward", "out_grad");
  PMX_CHECK(dt[1] == DType::kInt64, "box_nms_backward: record must be int64, got ",
            dtype_name(dt[1]));
  *out = {in[0]};
  *out_dt = {dt[0]};
}

template <typename T>
void box_nms_backward_typed(const OpContext&, const std::vector<TBlob>& in,
                            const std::vector<TBlob>& out) {
  const T* dy = in[0].data<T>();
  const int64_t* record = in[1].data<int64_t>();
  T* dx = out[0].data<T>();
  const int64_t k = in[0].shape.back(), rows = in[1].size();
  const int64_t n = in[1].shape.back();
  std::fill(dx, dx + out[0].size(), T(0));
  for (int64_t i = 0; i < rows; ++i) {
    if (record[i] < 0) continue;
    std::copy(dy + i * k, dy + (i + 1) * k, dx + (i / n * n + record[i]) * k);
  }
}

void box_nms_backward(const OpContext& ctx, const std::vector<TBlob>& in,
                      const std::vector<TBlob>& out) {
  PMX_FLOAT_WIDE_SWITCH(in[0].dtype, T, { box_nms_backward_typed<T>(ctx, in, out); });
}

PMX_REGISTER_OP(box_iou)
    .set_num_inputs(2)
    .set_infer(box_iou_infer)
    .set_cpu(nn::through_float(box_iou_forward))
    .set_gradient([](const GradContext&) { return std::vector<NDArray>{NDArray(), NDArray()}; })
    .set_grad_uses({}, {});

PMX_REGISTER_OP(box_nms)
    .set_num_inputs(1)
    .set_num_outputs(2)
    .set_infer(box_nms_infer)
    .set_cpu(nn::through_float(box_nms_forward))
    .set_gradient([](const GradContext& ctx) {
      return std::vector<NDArray>{
          invoke("box_nms_backward", {ctx.out_grads[0], ctx.outputs[1]}, Attrs{})[0]};
    })
    .set_grad_uses({}, {1});

PMX_REGISTER_OP(box_nms_backward)
    .set_num_inputs(2)
    .set_infer(box_nms_backward_infer)
    .set_cpu(nn::through_float(box_nms_backward));

}  // namespace
}  // namespace pymx
