// Creation operators: no inputs; the device is invoke()'s `device` argument.
//
//   op        attrs                                  output
//   zeros     shape, dtype (float32)                 all 0
//   ones      shape, dtype                           all 1
//   full      shape, dtype, value                    all `value` ("True"/"False" allowed)
//   empty     shape, dtype                           uninitialised
//   arange    start, stop (None: [0, start)), step, dtype     NumPy's arange
//   linspace  start, stop, num, endpoint (True), dtype        NumPy's linspace
//   eye       N, M (None: N), k (0), dtype           ones on the k-th diagonal
#include <algorithm>
#include <cmath>
#include <optional>

#include "ops/elemwise.h"

namespace pymx {
namespace {

void fill(const TBlob& out, double value) {
  const int64_t n = out.size();
  PMX_TYPE_SWITCH(out.dtype, T, {
    const T v = static_cast<T>(static_cast<ops::compute_t<T>>(value));
    T* y = out.data<T>();
    std::fill(y, y + n, v);
  });
}

Shape checked_shape(const Attrs& attrs, const char* op) {
  const Shape shape = attrs.get_shape("shape", Shape());
  for (int64_t d : shape)
    PMX_CHECK(d >= 0, op, ": negative dimensions are not allowed (shape ", shape_str(shape), ")");
  return shape;
}

InferFn infer_from_shape(const char* op) {
  return [op](const Attrs& attrs, const std::vector<Shape>&, const std::vector<DType>&,
              std::vector<Shape>* out, std::vector<DType>* odt) {
    (*out)[0] = checked_shape(attrs, op);
    (*odt)[0] = attrs.get_dtype("dtype", DType::kFloat32);
  };
}

// full's value in its dtype T: "True"/"False" are 1/0; an integer literal is exact in an
// integer dtype (See Note [Integer scalars are read as int64] in ops/elemwise.h).
template <typename T>
T fill_value(const Attrs& attrs) {
  using C = ops::compute_t<T>;
  const std::string text = attrs.get_str("value", "0");
  if (text == "True" || text == "False") return static_cast<T>(static_cast<C>(text == "True"));
  return static_cast<T>(ops::scalar_as<C>(attrs, "value", "full"));
}

void fill_from_attrs(const TBlob& out, const Attrs& attrs) {
  PMX_TYPE_SWITCH(out.dtype, T, {
    T* y = out.data<T>();
    std::fill(y, y + out.size(), fill_value<T>(attrs));
  });
}

struct Range {
  double start, stop, step;
};

Range arange_range(const Attrs& attrs) {
  Range r{attrs.get_float("start", 0.0), 0.0, attrs.get_float("step", 1.0)};
  if (attrs.has("stop")) {
    r.stop = attrs.get_float("stop");
  } else {  // arange(n) means [0, n)
    r.stop = r.start;
    r.start = 0.0;
  }
  PMX_CHECK(r.step != 0.0, "arange: step must not be zero");
  return r;
}

int64_t arange_length(const Range& r) {
  const double length = std::ceil((r.stop - r.start) / r.step);
  // NaN or infinite bounds have no length; converting such a double (or one past 2^63) to an
  // integer is undefined behaviour, so both are refused before the cast.
  PMX_CHECK(std::isfinite(length), "arange: cannot compute the length of the range (start=",
            r.start, ", stop=", r.stop, ", step=", r.step, ")");
  if (length >= 9.2e18)
    PMX_THROW(Status::kOutOfMemory, "arange: the range (start=", r.start, ", stop=", r.stop,
              ", step=", r.step, ") has ", length, " elements, too many to allocate");
  return std::max<int64_t>(0, static_cast<int64_t>(length));
}

// arange in an integer dtype with integer bounds runs in int64: through doubles, bounds above
// 2^53 would round (See Note [Integer scalars are read as int64] in ops/elemwise.h).
std::optional<ops::IntRange> int_range(const Attrs& attrs) {
  return ops::int_arange_range(attrs, attrs.get_dtype("dtype", DType::kFloat32));
}

}  // namespace

PMX_REGISTER_OP(zeros).set_num_inputs(0).set_infer(infer_from_shape("zeros"))
    .set_cpu([](const OpContext&, const std::vector<TBlob>&, const std::vector<TBlob>& out) { fill(out[0], 0.0); });

PMX_REGISTER_OP(ones).set_num_inputs(0).set_infer(infer_from_shape("ones"))
    .set_cpu([](const OpContext&, const std::vector<TBlob>&, const std::vector<TBlob>& out) { fill(out[0], 1.0); });

PMX_REGISTER_OP(full)
    .set_num_inputs(0)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>&, const std::vector<DType>&,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      const DType dtype = attrs.get_dtype("dtype", DType::kFloat32);
      // A missing, unparseable or out-of-bounds value is refused here, not in the kernel.
      PMX_TYPE_SWITCH(dtype, T, { (void)fill_value<T>(attrs); });
      (*out)[0] = checked_shape(attrs, "full");
      (*odt)[0] = dtype;
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
      fill_from_attrs(out[0], *ctx.attrs);
    });

PMX_REGISTER_OP(empty).set_num_inputs(0).set_infer(infer_from_shape("empty"))
    .set_cpu([](const OpContext&, const std::vector<TBlob>&, const std::vector<TBlob>&) {});

PMX_REGISTER_OP(arange)
    .set_num_inputs(0)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>&, const std::vector<DType>&,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      const std::optional<ops::IntRange> ints = int_range(attrs);
      (*out)[0] = {ints ? ints->length : arange_length(arange_range(attrs))};
      (*odt)[0] = attrs.get_dtype("dtype", DType::kFloat32);
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
      const int64_t n = out[0].size();
      if (const std::optional<ops::IntRange> ints = int_range(*ctx.attrs)) {
        PMX_TYPE_SWITCH(out[0].dtype, T, {
          T* y = out[0].data<T>();
          for (int64_t i = 0; i < n; ++i)
            y[i] = static_cast<T>(static_cast<ops::compute_t<T>>(ints->at(i)));
        });
        return;
      }
      const Range r = arange_range(*ctx.attrs);
      PMX_TYPE_SWITCH(out[0].dtype, T, {
        T* y = out[0].data<T>();
        for (int64_t i = 0; i < n; ++i)
          y[i] = static_cast<T>(static_cast<ops::compute_t<T>>(r.start + static_cast<double>(i) * r.step));
      });
    });

PMX_REGISTER_OP(linspace)
    .set_num_inputs(0)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>&, const std::vector<DType>&,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      attrs.get_float("start");  // both bounds are required: refused here, not in the kernel
      attrs.get_float("stop");
      const int64_t num = attrs.get_int("num", 50);
      PMX_CHECK(num >= 0, "linspace: number of samples, ", num, ", must be non-negative");
      (*out)[0] = {num};
      (*odt)[0] = attrs.get_dtype("dtype", DType::kFloat32);
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
      const double start = ctx.attrs->get_float("start"), stop = ctx.attrs->get_float("stop");
      const int64_t num = out[0].size();
      const bool endpoint = ctx.attrs->get_bool("endpoint", true);
      const int64_t div = endpoint ? num - 1 : num;
      const double step = div > 0 ? (stop - start) / static_cast<double>(div) : 0.0;
      PMX_TYPE_SWITCH(out[0].dtype, T, {
        T* y = out[0].data<T>();
        for (int64_t i = 0; i < num; ++i) {
          const double v = endpoint && i == num - 1 && num > 1 ? stop : start + static_cast<double>(i) * step;
          y[i] = static_cast<T>(static_cast<ops::compute_t<T>>(v));
        }
      });
    });

PMX_REGISTER_OP(eye)
    .set_num_inputs(0)
    .set_infer([](const Attrs& attrs, const std::vector<Shape>&, const std::vector<DType>&,
                  std::vector<Shape>* out, std::vector<DType>* odt) {
      const int64_t n = attrs.get_int("N");
      const int64_t m = attrs.get_int("M", n);
      PMX_CHECK(n >= 0 && m >= 0, "eye: N and M must be non-negative, got N=", n, ", M=", m);
      attrs.get_int("k", 0);  // an unparseable diagonal offset is refused here, not in the kernel
      (*out)[0] = {n, m};
      (*odt)[0] = attrs.get_dtype("dtype", DType::kFloat32);
    })
    .set_cpu([](const OpContext& ctx, const std::vector<TBlob>&, const std::vector<TBlob>& out) {
      fill(out[0], 0.0);
      const int64_t n = out[0].shape[0], m = out[0].shape[1], k = ctx.attrs->get_int("k", 0);
      PMX_TYPE_SWITCH(out[0].dtype, T, {
        T* y = out[0].data<T>();
        for (int64_t i = std::max<int64_t>(0, -k); i < n && i + k < m; ++i)
          y[i * m + i + k] = static_cast<T>(static_cast<ops::compute_t<T>>(1));
      });
    });

}  // namespace pymx
