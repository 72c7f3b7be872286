// Fused optimizer updates on the GPU (CPU definitions and formulas: engine/src/ops/optimizer.cc).
// In place on weight and states (the ops' mutate_inputs); per element in double, like the CPU.
//
// | op              | inputs (all mutated but grad) | attrs |
// |-----------------|-------------------------------|-------|
// | sgd_update      | weight, grad                  | lr wd rescale_grad clip_gradient |
// | sgd_mom_update  | weight, grad, mom             | lr momentum wd rescale_grad clip_gradient |
// | nag_mom_update  | weight, grad, mom             | lr momentum wd rescale_grad clip_gradient |
// | adam_update     | weight, grad, mean, var       | lr beta1 beta2 epsilon wd rescale_grad clip_gradient |
// | adamw_update    | weight, grad, mean, var       | lr eta beta1 beta2 epsilon wd rescale_grad clip_gradient |
// | rmsprop_update  | weight, grad, n               | lr rho (alias gamma1) epsilon wd rescale_grad clip_gradient clip_weights |
// | adagrad_update  | weight, grad, history         | lr epsilon wd rescale_grad clip_gradient |
//
// multi_<op> updates many parameters in one call, with per-parameter lrs and wds (Note [Updates
// of many parameters in one op] in optimizer.cc): one launch per 32 parameters of one dtype.
#include <algorithm>
#include <string>

#include "kernel_util.cuh"

namespace pymx {
namespace gpu {
namespace {

enum class Rule : int { kSgd, kSgdMom, kNagMom, kAdam, kAdamW, kRmsProp, kAdaGrad };

struct Hyper {
  double lr, wd, rescale, clip;
  double momentum, beta1, beta2, eps, eta, rho, clip_weights;
};

// Every attribute but lr and wd, which a multi_ op gives per parameter.
Hyper parse_shared(Rule rule, const Attrs& a) {
  Hyper h;
  h.lr = 0.0;
  h.wd = 0.0;
  h.rescale = a.get_float("rescale_grad", 1.0);
  h.clip = a.get_float("clip_gradient", -1.0);
  h.momentum = a.get_float("momentum", 0.0);
  h.beta1 = a.get_float("beta1", 0.9);
  h.beta2 = a.get_float("beta2", 0.999);
  h.eps = a.get_float("epsilon", rule == Rule::kAdaGrad ? 1e-7 : 1e-8);
  h.eta = a.get_float("eta", 1.0);
  h.rho = a.get_float("rho", a.get_float("gamma1", 0.9));
  h.clip_weights = a.get_float("clip_weights", -1.0);
  return h;
}

// min(max(g, -c), c) as the CPU's std::min/std::max: a NaN gradient stays NaN (fmin/fmax
// would return the bound).
__device__ __forceinline__ double clip(double g, double c) {
  if (c < 0) return g;
  const double lower = g < -c ? -c : g;
  return c < lower ? c : lower;
}

// One parameter's update over its n elements, grid-striding along blockIdx.x.
template <typename T>
__device__ void update_elements(T* w, const T* grad, T* s1, T* s2, int64_t n, Rule rule,
                                const Hyper& h) {
  PMX_GRID_STRIDE_LOOP(i, n) {
    double wv = convert<double>(w[i]);
    double a = s1 ? convert<double>(s1[i]) : 0.0;
    double b = s2 ? convert<double>(s2[i]) : 0.0;
    const double r = convert<double>(grad[i]) * h.rescale;
    switch (rule) {
      case Rule::kSgd:
        wv = (1 - h.lr * h.wd) * wv - h.lr * clip(r, h.clip);
        break;
      case Rule::kSgdMom:
        a = h.momentum * a - h.lr * h.wd * wv - h.lr * clip(r, h.clip);
        wv += a;
        break;
      case Rule::kNagMom: {
        const double g = clip(r, h.clip) + h.wd * wv;
        a = h.momentum * a + g;
        wv -= h.lr * (g + h.momentum * a);
        break;
      }
      case Rule::kAdam: {
        const double g = clip(r + h.wd * wv, h.clip);
        a = h.beta1 * a + (1 - h.beta1) * g;
        b = h.beta2 * b + (1 - h.beta2) * g * g;
        wv -= h.lr * a / (sqrt(b) + h.eps);
        break;
      }
      case Rule::kAdamW: {
        const double g = clip(r, h.clip);
        a = h.beta1 * a + (1 - h.beta1) * g;
        b = h.beta2 * b + (1 - h.beta2) * g * g;
        wv -= h.eta * (h.lr * a / (sqrt(b) + h.eps) + h.wd * wv);
        break;
      }
      case Rule::kRmsProp: {
        const double g = clip(r, h.clip) + h.wd * wv;
        a = h.rho * a + (1 - h.rho) * g * g;
        wv = clip(wv - h.lr * g / (sqrt(a) + h.eps), h.clip_weights);
        break;
      }
      case Rule::kAdaGrad: {
        const double g = clip(r, h.clip) + h.wd * wv;
        a += g * g;
        wv -= h.lr * g / (sqrt(a) + h.eps);
        break;
      }
    }
    w[i] = convert<T>(wv);
    if (s1) s1[i] = convert<T>(a);
    if (s2) s2[i] = convert<T>(b);
  }
}

template <typename T>
__global__ void update_kernel(T* w, const T* grad, T* s1, T* s2, int64_t n, Rule rule, Hyper h) {
  update_elements(w, grad, s1, s2, n, rule, h);
}

// The parameters of one launch of a multi_ op (Note [Updates of many parameters in one op] in
// optimizer.cc), passed by value: well under the 4 KiB of kernel parameters.
constexpr int kParamsPerLaunch = 32;
template <typename T>
struct ParamTable {
  T* w[kParamsPerLaunch];
  const T* grad[kParamsPerLaunch];
  T* s1[kParamsPerLaunch];
  T* s2[kParamsPerLaunch];
  int64_t n[kParamsPerLaunch];
  double lr[kParamsPerLaunch], wd[kParamsPerLaunch];
};

// blockIdx.y picks the parameter; its blocks stride over its elements.
template <typename T>
__global__ void multi_update_kernel(ParamTable<T> table, Rule rule, Hyper h) {
  const int p = blockIdx.y;
  h.lr = table.lr[p];
  h.wd = table.wd[p];
  update_elements(table.w[p], table.grad[p], table.s1[p], table.s2[p], table.n[p], rule, h);
}

ComputeFn update_compute(Rule rule) {
  return [rule](const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>&) {
    const int64_t n = in[0].size();
    if (n == 0) return;
    Hyper h = parse_shared(rule, *ctx.attrs);
    h.lr = ctx.attrs->get_float("lr");
    h.wd = ctx.attrs->get_float("wd", 0.0);
    PMX_GPU_FLOAT_SWITCH(in[0].dtype, T, {
      update_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
          in[0].data<T>(), in[1].data<T>(), in.size() > 2 ? in[2].data<T>() : nullptr,
          in.size() > 3 ? in[3].data<T>() : nullptr, n, rule, h);
    });
    PMX_KERNEL_LAUNCH_CHECK();
  };
}

// Parameters [first, last) of a multi_ call, all of dtype T, in one launch per kParamsPerLaunch.
template <typename T>
void launch_multi(const OpContext& ctx, const std::vector<TBlob>& in, int group_size, Rule rule,
                  const Hyper& h, const std::vector<double>& lrs, const std::vector<double>& wds,
                  int64_t first, int64_t last) {
  for (int64_t begin = first; begin < last; begin += kParamsPerLaunch) {
    const int count = static_cast<int>(std::min<int64_t>(kParamsPerLaunch, last - begin));
    ParamTable<T> table{};
    int64_t largest = 0;
    for (int k = 0; k < count; ++k) {
      const TBlob* group = &in[(begin + k) * group_size];
      table.w[k] = group[0].data<T>();
      table.grad[k] = group[1].data<T>();
      table.s1[k] = group_size > 2 ? group[2].data<T>() : nullptr;
      table.s2[k] = group_size > 3 ? group[3].data<T>() : nullptr;
      table.n[k] = group[0].size();
      table.lr[k] = lrs[begin + k];
      table.wd[k] = wds[begin + k];
      largest = std::max(largest, table.n[k]);
    }
    if (largest == 0) continue;
    const dim3 grid(grid_for(largest), count);
    multi_update_kernel<T><<<grid, kBlock, 0, stream_of(ctx)>>>(table, rule, h);
    PMX_KERNEL_LAUNCH_CHECK();
  }
}

ComputeFn multi_update_compute(Rule rule, int group_size) {
  return [rule, group_size](const OpContext& ctx, const std::vector<TBlob>& in,
                            const std::vector<TBlob>&) {
    const Hyper h = parse_shared(rule, *ctx.attrs);
    const std::vector<double> lrs = ctx.attrs->get_floats("lrs"), wds = ctx.attrs->get_floats("wds");
    const int64_t num_weights = static_cast<int64_t>(in.size()) / group_size;
    // Runs of parameters of one dtype share launches.
    for (int64_t first = 0; first < num_weights;) {
      const DType dtype = in[first * group_size].dtype;
      int64_t last = first + 1;
      while (last < num_weights && in[last * group_size].dtype == dtype) ++last;
      PMX_GPU_FLOAT_SWITCH(dtype, T,
                           { launch_multi<T>(ctx, in, group_size, rule, h, lrs, wds, first, last); });
      first = last;
    }
  };
}

void register_rule(const std::string& name, Rule rule, int states) {
  op_registry::get_or_create(name).set_gpu(update_compute(rule));
  op_registry::get_or_create("multi_" + name).set_gpu(multi_update_compute(rule, 2 + states));
}

const bool registered = [] {
  register_rule("sgd_update", Rule::kSgd, 0);
  register_rule("sgd_mom_update", Rule::kSgdMom, 1);
  register_rule("nag_mom_update", Rule::kNagMom, 1);
  register_rule("adam_update", Rule::kAdam, 2);
  register_rule("adamw_update", Rule::kAdamW, 2);
  register_rule("rmsprop_update", Rule::kRmsProp, 1);
  register_rule("adagrad_update", Rule::kAdaGrad, 1);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
